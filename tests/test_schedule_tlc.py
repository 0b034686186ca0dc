"""TLC checks of spec/Schedule.tla, must-fail mutants, and model = spec on TLC's state graph.

Each mutant breaks ``Schedule.tla`` by a text substitution and names the (config, check) pairs
that must report it (tests/spec_mutants.py): every invariant and property each
``MCSchedule*.cfg`` lists is reported, by name, by some mutant in that config, and the model's
predicates (``refsched.model.schedule``) find the same check broken on the counterexample's
last step. One config per overlap policy, so that each property is checked where it can fail.

Time on 2 cores (TLC 2.15): each config or mutant 2-4 s with one worker (JVM start included).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from refsched.model import schedule as model
from refsched.verify import stategraph
from refsched.verify.schedule import (
    CONFIGS,
    SCHEDULE,
    SPEC_VARIABLES,
    read_instance,
    show,
    snapshot_of,
    spec_state,
)
from refsched.verify.specstate import SpecStateError
from refsched.verify.tlc import run_tlc
from tests.spec_mutants import Mutant, SpecChecks, cases, cfg_checks, check_mutant
from tests.tlc_support import (
    assert_every_check_has_a_mutant,
    assert_holds_with_recorded_count,
    assert_round_trips_through_tla_text,
)

MODULE = "MCSchedule.tla"
SKIP, BUFFER, ALLOW = CONFIGS
LIVENESS = "MCScheduleLiveness.cfg"

# Measured with TLC 2.15 (distinct states, depth). If the spec changes, update these and the
# comments in the cfg files.
RECORDED_COUNTS = {
    SKIP: (1_362, 19),
    BUFFER: (3_954, 20),
    ALLOW: (1_812, 19),
    LIVENESS: (462, 16),
}
# Edges of TLC's -dump of each safety instance (one per (state, action, parameters) step).
RECORDED_EDGES = {SKIP: 3_360, BUFFER: 10_192, ALLOW: 6_052}


@pytest.mark.parametrize(("config", "counts"), sorted(RECORDED_COUNTS.items()))
def test_spec_holds_with_recorded_state_count(config: str, counts: tuple[int, int]) -> None:
    assert_holds_with_recorded_count(run_tlc(config, MODULE, workers=1), counts)


MUTANTS: dict[str, Mutant] = {
    # Decide leaves next where it is once at slot Every: that slot gets a second decision.
    "decide_twice": Mutant(
        (("    /\\ next' = next + Every\n",
          "    /\\ next' = IF next = Every THEN next ELSE next + Every\n"),),
        ((SKIP, "OneDecisionPerSlot"), (BUFFER, "OneDecisionPerSlot"),
         (ALLOW, "OneDecisionPerSlot")),
    ),
    # Decide passes slot Every by: a later slot is decided while an earlier one is neither
    # decided nor held.
    "decide_passes_a_slot_by": Mutant(
        (("    /\\ next' = next + Every\n",
          "    /\\ next' = IF next = 0 THEN 2 * Every ELSE next + Every\n"),),
        ((SKIP, "OneDecisionPerSlot"), (ALLOW, "OneDecisionPerSlot")),
    ),
    # Release records the held slot's run and forgets every earlier decision.
    "release_forgets_decisions": Mutant(
        (("       IN  /\\ decided' = decided \\cup {<<s, \"run\">>}\n",
          "       IN  /\\ decided' = {<<s, \"run\">>}\n"),),
        ((BUFFER, "OneDecisionPerSlot"),),
    ),
    # The held slot is not released fairly: it may wait for ever once no run is unfinished.
    "release_unfair": Mutant(
        (("    /\\ WF_vars(Release)\n", ""),),
        ((LIVENESS, "EverySlotDecided"),),
    ),
    # skip lets a second run start while one is unfinished.
    "skip_overlaps": Mutant(
        (('    ELSE IF Overlap = "skip" /\\ unfinished # {} THEN "skipped"\n',
          '    ELSE IF Overlap = "skip" /\\ Cardinality(unfinished) > 1 THEN "skipped"\n'),),
        ((SKIP, "SkipNeverOverlaps"),),
    ),
    # buffer_one holds every slot that comes while a run is unfinished.
    "buffer_holds_many": Mutant(
        (('         THEN IF held # {} THEN "skipped" ELSE "hold"\n',
          '         THEN "hold"\n'),),
        ((BUFFER, "BufferHoldsOne"),),
    ),
    # A slot exactly Catchup old is missed.
    "catchup_too_strict": Mutant(
        (("TooOld(s) == Catchup # NoCatchup /\\ now - s > Catchup\n",
          "TooOld(s) == Catchup # NoCatchup /\\ now - s >= Catchup\n"),),
        ((SKIP, "CatchupKept"), (BUFFER, "CatchupKept")),
    ),
    # A slot more than 2 ticks old is missed whatever Catchup says (even with NoCatchup).
    "catchup_hard_coded": Mutant(
        (('    IF TooOld(s) THEN "missed"\n',
          '    IF TooOld(s) \\/ now - s > 2 THEN "missed"\n'),),
        ((ALLOW, "CatchupKept"),),
    ),
    # A paused schedule writes a decision that does not exist.
    "paused_misspells_skipped": Mutant(
        (('    ELSE IF paused THEN "skipped"\n', '    ELSE IF paused THEN "skip"\n'),),
        ((SKIP, "TypeOK"), (BUFFER, "TypeOK"), (ALLOW, "TypeOK")),
    ),
    # A paused schedule decides nothing: paused for ever, its slots are never decided.
    "paused_decides_nothing": Mutant(
        (("    /\\ Owed\n    /\\ ~Releasable\n", "    /\\ Owed\n    /\\ ~paused\n"
          "    /\\ ~Releasable\n"),),
        ((LIVENESS, "EverySlotDecided"),),
    ),
}

SPEC = SpecChecks(
    module="Schedule.tla", mc_module=MODULE, system=SCHEDULE,
    invariants=frozenset(model.INVARIANTS), action_properties=frozenset(model.ACTION_PROPERTIES),
    temporal=frozenset({"EverySlotDecided"}), violated=model.violated,
    violated_by_step=lambda s, t: [], mutants=MUTANTS, deadlock_ok=False,
)


def test_the_configs_check_every_name_the_model_defines_and_no_other() -> None:
    listed = {check for config in SPEC.configs() for check in cfg_checks(config)}
    assert listed == {*model.INVARIANTS, *model.ACTION_PROPERTIES, "EverySlotDecided"}


def test_every_check_of_every_config_has_a_mutant_it_reports() -> None:
    assert_every_check_has_a_mutant(SPEC, sorted([*CONFIGS, LIVENESS]))


@pytest.mark.parametrize(("name", "config", "check"), cases(SPEC))
def test_mutant_is_reported_by_name(name: str, config: str, check: str, tmp_path: Path) -> None:
    # The action properties need the config's constants (the slots, the catch-up).
    instance = read_instance(config)
    spec = replace(SPEC, violated_by_step=lambda s, t: model.violated_by_step(s, t, instance))
    check_mutant(spec, name, config, check, tmp_path)


# -- Model = spec on each safety instance --------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS)
def test_tlc_state_graph_equals_the_models(config: str) -> None:
    dumped, result, _ = stategraph.dump_state_graph(config, workers=1, system=SCHEDULE)
    assert (result.distinct_states, result.depth) == RECORDED_COUNTS[config]
    matched = stategraph.match(dumped, read_instance(config), system=SCHEDULE)
    assert matched.state_count == RECORDED_COUNTS[config][0]
    assert len(dumped.edges) == matched.edge_count == RECORDED_EDGES[config]
    # Only buffer_one holds a slot, and so releases one.
    assert {label for _, _, label in dumped.edges} == (
        set(model.ACTIONS) if config == BUFFER else set(model.ACTIONS) - {"Release"})
    # Every decision the instance can make is made in it.
    made = {model.decision(e.source, e.source.next, matched.instance)
            for e in matched.all_edges() if e.action == "Decide"}
    expected = {"run", "skipped", "missed", "hold"}
    if config == BUFFER:
        assert made == expected
    elif config == SKIP:
        assert made == expected - {"hold"}
    else:  # allow, no catch-up: nothing is missed or held
        assert made == {"run", "skipped"}


def test_a_model_whose_release_ignores_unfinished_runs_differs_from_tlc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dumped, _, _ = stategraph.dump_state_graph(BUFFER, workers=1, system=SCHEDULE)
    broken = replace(model.ACTIONS["Release"], enabled=lambda s, inst: bool(s.held))
    monkeypatch.setitem(model.ACTIONS, "Release", broken)
    with pytest.raises(stategraph.GraphMismatch, match="Release: model 1 edge"):
        stategraph.match(dumped, read_instance(BUFFER), system=SCHEDULE)


# -- The spec's variables and the model's state --------------------------------------------------

def test_read_instance_reads_every_config() -> None:
    assert read_instance(SKIP) == model.Instance("skip", 1, 2, 6, 8)
    assert read_instance(BUFFER) == model.Instance("buffer_one", 2, 1, 4, 6)
    assert read_instance(ALLOW) == model.Instance("allow", None, 1, 4, 5)
    assert read_instance(LIVENESS) == model.Instance("buffer_one", None, 1, 3, 4)


def test_spec_state_and_snapshot_of_are_inverse_through_tla_text() -> None:
    graph = model.explore(read_instance(BUFFER))
    assert_round_trips_through_tla_text(graph.depth, spec_state, snapshot_of, SPEC_VARIABLES)


def test_snapshot_of_refuses_states_of_another_shape() -> None:
    good = spec_state(model.INITIAL)
    for name, value in [
        ("decided", frozenset({(0, "skip")})),  # no such decision
        ("decided", frozenset({(0,)})),
        ("held", frozenset({-1})),
        ("unfinished", (0,)),
        ("paused", 0),
        ("now", True),
    ]:
        with pytest.raises(SpecStateError):
            snapshot_of({**good, name: value})
    with pytest.raises(SpecStateError):
        snapshot_of({k: v for k, v in good.items() if k != "held"})


def test_show_names_every_variable() -> None:
    s = model.ScheduleSnapshot(3, 4, frozenset({2}), True, frozenset({0}),
                               frozenset({(0, "run"), (1, "skipped")}))
    assert show(s) == ("now=3 next=4 held=[2] paused=True unfinished=[0] "
                       "decided={0:run, 1:skipped}")
