"""TLC checks of spec/TimerQueue.tla, must-fail mutants, and model = spec on TLC's state graph.

Each mutant breaks ``TimerQueue.tla`` by a text substitution and names the (config, check)
pairs that must report it (tests/spec_mutants.py): every invariant and property each
``MCTimerQueue*.cfg`` lists is reported, by name, by some mutant in that config, and the
model's predicates find the same check broken on the counterexample's last step.

Time on 2 cores (TLC 2.15): the safety model 95-170 s (marked big_instance, run by
`pytest -m big_instance`), each mutant 3-16 s with one worker (24 runs), the dump of the traces
instance and its match with the model about 6 s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from refsched.model.timer import (
    ACTION_PROPERTIES,
    ACTIONS,
    INVARIANTS,
    Instance,
    explore,
    violated,
    violated_by_step,
)
from refsched.model.timer import INITIAL as INITIAL_STATE
from refsched.model.timer.actions import dropped_on_top
from refsched.verify import stategraph, system
from refsched.verify.specstate import SpecStateError
from refsched.verify.timer.spec import (
    TRACES_CONFIG,
    read_instance,
    show,
    snapshot_of,
    spec_state,
)
from refsched.verify.tla import Function, ModelValue
from refsched.verify.tlc import TLCResult, run_tlc
from tests.spec_mutants import Mutant, SpecChecks, cases, check_mutant
from tests.tlc_support import (
    TracesGraph,
    assert_every_check_has_a_mutant,
    assert_holds_with_recorded_count,
    assert_round_trips_through_tla_text,
    big_instances,
)

MODULE = "MCTimerQueue.tla"
TIMER = system.get("timer")
SAFETY = "MCTimerQueue.cfg"

# Measured with TLC 2.15 on MCTimerQueue.cfg (2 ids, times 0..2, priorities {0, 1},
# RebuildFloor 2, 3 versions per id, 6 schedules, symmetry on ids), and on the traces
# instance. If the spec changes, update these and the comments in the cfg files.
RECORDED_COUNTS = {SAFETY: (1_064_364, 21)}  # (distinct states, depth)
TRACES_GRAPH = TracesGraph(TIMER, states=5_308, edges=34_992, depth=11)


def check(config: str, directory: Path | None = None, workers: int = 2) -> TLCResult:
    return run_tlc(config, MODULE, directory=directory, workers=workers)


@pytest.mark.parametrize(("config", "counts"), big_instances(RECORDED_COUNTS))
def test_model_holds_with_recorded_state_count(config: str, counts: tuple[int, int]) -> None:
    assert_holds_with_recorded_count(check(config), counts)


S, T = SAFETY, TRACES_CONFIG

# Each mutant, and the (config, check) pairs that must report it.
MUTANTS: dict[str, Mutant] = {
    # Claim orders by time and seq only: a lower priority entry may go first.
    "claim_ignores_priority": Mutant(
        (("    \\/ e[1] = f[1] /\\ e[2] > f[2]\n"
         "    \\/ e[1] = f[1] /\\ e[2] = f[2] /\\ e[3] < f[3]\n",
         "    \\/ e[1] = f[1] /\\ e[3] < f[3]\n"),),
        ((S, "ClaimTakesMinimum"), (T, "ClaimTakesMinimum")),
    ),
    # next() hands out the first live entry one time unit early.
    "claim_before_due": Mutant(
        (("SomethingDue == Live # {} /\\ Top(Live)[1] <= now\n",
         "SomethingDue == Live # {} /\\ Top(Live)[1] <= now + 1\n"),),
        ((S, "ClaimTakesMinimum"), (T, "ClaimTakesMinimum")),
    ),
    # next() returning Wait or None pops the live entries along with the stale ones.
    "idle_drops_live_entries": Mutant(
        (("    /\\ heap' = heap \\ DroppedOnTop\n",
         "    /\\ heap' = heap \\ (DroppedOnTop \\cup Live)\n"),),
        ((S, "HeapHoldsLiveVersions"), (T, "HeapHoldsLiveVersions")),
    ),
    # cancel() removes the entry but leaves the version pending: pending but not live.
    "cancel_leaves_version_pending": Mutant(
        (("          IN  /\\ state' = st\n              /\\ heap' = Compact(heap, version, st)\n",
         "          IN  /\\ state' = state\n              /\\ heap' = heap \\ {Entry(t)}\n"),),
        ((S, "HeapHoldsLiveVersions"), (T, "HeapHoldsLiveVersions")),
    ),
    # The heap is never rebuilt: reschedules and cancels pile up stale entries.
    "compaction_never_runs": Mutant(
        (("    IF Cardinality(h) > RebuildFloor",
         "    IF FALSE /\\ Cardinality(h) > RebuildFloor"),),
        ((S, "HeapGarbageBounded"), (T, "HeapGarbageBounded")),
    ),
    # next() does not rebuild the heap after a claim. Only the traces instance (RebuildFloor
    # 0) sees the garbage pass the bound; with RebuildFloor 2 and 6 schedules the safety
    # instance never holds enough stale entries behind a claimed one: a full run of it passes
    # (TLC 2.15: 2,974,122 distinct states, depth 19, 996 s with 2 workers on loaded cores).
    "claim_skips_compaction": Mutant(
        (("           /\\ heap' = Compact(heap \\ (DroppedOnTop \\cup {e}), version, st)\n",
          "           /\\ heap' = heap \\ (DroppedOnTop \\cup {e})\n"),),
        ((T, "HeapGarbageBounded"),),
    ),
    # Claim takes the first entry of a current version whatever its state: a cancelled
    # version's stale entry is handed out.
    "claim_takes_stale_entry": Mutant(
        (("    /\\ LET e  == Top(Live)\n",
         "    /\\ LET e  == Top({f \\in heap : version[f[4]] = f[5]})\n"),),
        ((S, "NoStaleOrCancelledRun"), (T, "NoStaleOrCancelledRun")),
    ),
    # A new version inherits the claim count of the one it replaces.
    "schedule_keeps_claims": Mutant(
        (("/\\ claims' = [claims EXCEPT ![t] = 0]",
         "/\\ claims' = claims"),),
        ((S, "AtMostOneClaimPerVersion"), (T, "AtMostOneClaimPerVersion")),
    ),
    # The clock is allowed to step back.
    "tick_goes_back": Mutant(
        (("    /\\ now' = now + 1\n",
         "    /\\ now' = IF now > 0 THEN now - 1 ELSE now + 1\n"),),
        ((S, "TimeNeverGoesBack"), (T, "TimeNeverGoesBack")),
    ),
    # cancel() turns a completed version into a cancelled one.
    "cancel_of_completed": Mutant(
        (("    \\/ /\\ state[t] = \"pending\"\n",
         "    \\/ /\\ state[t] \\in {\"pending\", \"completed\"}\n"),),
        ((S, "TerminalStaysTerminal"), (T, "TerminalStaysTerminal")),
    ),
    # cancel() of a cancelled version records a stop request.
    "stop_request_on_cancelled": Mutant(
        (("    \\/ /\\ state[t] = \"running\"\n",
         "    \\/ /\\ state[t] \\in {\"running\", \"cancelled\"}\n"),),
        ((S, "CancelRequestOnlyWhileRunning"), (T, "CancelRequestOnlyWhileRunning")),
    ),
    # schedule() replaces a running version: its function runs on, unowned.
    "schedule_replaces_running": Mutant(
        (("    /\\ ~closed\n    /\\ state[t] # \"running\"\n", "    /\\ ~closed\n"),),
        ((S, "RunningNeverReplaced"), (T, "RunningNeverReplaced")),
    ),
    # close() writes a state name that does not exist.
    "close_misspells_cancelled": Mutant(
        (("IF state[x] = \"pending\" THEN \"cancelled\" ELSE state[x]",
         "IF state[x] = \"pending\" THEN \"canceled\" ELSE state[x]"),),
        ((S, "TypeOK"), (T, "TypeOK")),
    ),
}


SPEC = SpecChecks(
    module="TimerQueue.tla", mc_module=MODULE, system="timer",
    invariants=frozenset(INVARIANTS), action_properties=frozenset(ACTION_PROPERTIES),
    temporal=frozenset(), violated=lambda s, instance: violated(s, instance.rebuild_floor),
    violated_by_step=violated_by_step, mutants=MUTANTS, deadlock_ok=False,
)


def test_every_check_of_every_config_has_a_mutant_it_reports() -> None:
    assert_every_check_has_a_mutant(SPEC, [SAFETY, TRACES_CONFIG])


@pytest.mark.parametrize(("name", "config", "check"), cases(SPEC))
def test_mutant_is_reported_by_name(name: str, config: str, check: str, tmp_path: Path) -> None:
    check_mutant(SPEC, name, config, check, tmp_path)


# -- Model = spec on the traces instance --------------------------------------------------------

@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    return TRACES_GRAPH.dump()


def test_tlc_state_graph_equals_the_models(dumped: stategraph.TLCStateGraph) -> None:
    # The instance exercises every action, and compaction and lazy drops happen in it.
    edges = TRACES_GRAPH.matched_edges(dumped)
    rebuilt = {e.action for e in edges if ACTIONS[e.action].rebuilds(
        e.source, *e.param_map.values(), rebuild_floor=0)}
    assert rebuilt == {"Cancel", "Claim"}
    assert {e.action for e in edges if dropped_on_top(e.source)} >= {"Claim", "Idle"}


def test_a_model_whose_idle_keeps_stale_entries_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ACTIONS, "Idle", replace(ACTIONS["Idle"], effect=lambda s: s))
    # TLC's Idle pops stale entries, so TLC reaches states (those entries gone) the model cannot.
    with pytest.raises(stategraph.GraphMismatch, match="only in TLC"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=TIMER)


# -- The spec's variables and the model's state --------------------------------------------------

def test_read_instance_reads_both_configs() -> None:
    assert read_instance(TRACES_CONFIG) == Instance(("a", "b"), 1, (0, 1), 0, 2, 2)
    assert read_instance(SAFETY) == Instance(("a", "b"), 2, (0, 1), 2, 3, 6)


def test_spec_state_and_snapshot_of_are_inverse_through_tla_text() -> None:
    ids = [ModelValue("a"), ModelValue("b")]
    model = explore(read_instance(TRACES_CONFIG))
    assert_round_trips_through_tla_text(model.depth, lambda s: spec_state(s, ids), snapshot_of)


def test_snapshot_of_refuses_states_of_another_shape() -> None:
    good = spec_state(INITIAL_STATE, [ModelValue("a")])
    for name, value in [
        ("state", Function({ModelValue("a"): "pending"})),  # version 0 but not absent
        ("heap", frozenset({(0, 0, 1, ModelValue("a"))})),  # not a 5-tuple
        ("runAt", Function({})),  # not over the ids
    ]:
        with pytest.raises(SpecStateError):
            snapshot_of({**good, name: value})
    with pytest.raises(SpecStateError):
        snapshot_of({k: v for k, v in good.items() if k != "heap"})
    scheduled = ACTIONS["Schedule"].step(INITIAL_STATE, "b", 0, 0, rebuild_floor=0)
    with pytest.raises(SpecStateError):
        spec_state(scheduled, [ModelValue("a")])


def test_show_names_every_version_and_entry() -> None:
    s = ACTIONS["Schedule"].step(INITIAL_STATE, "a", 1, 0, rebuild_floor=0)
    s = ACTIONS["Schedule"].step(s, "a", 0, 1, rebuild_floor=0)
    assert show(s) == ("now=0 closed=False nextSeq=3\n"
                       "  a: v2 pending runAt=0 priority=1 seq=2 cancelRequested=False claims=0\n"
                       "  heap: live <<0, 1, 2, a, 2>>, stale <<1, 0, 1, a, 1>>")
    assert show(INITIAL_STATE).startswith("now=0 closed=False nextSeq=1 (no task scheduled)")
