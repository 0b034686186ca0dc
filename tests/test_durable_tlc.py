"""TLC checks of spec/DurableScheduler.tla, must-fail mutants, and model = spec on TLC's graph.

Each mutant copies ``spec/`` to a temporary folder, breaks ``DurableScheduler.tla`` (or the
``Scheduler.tla`` it reuses) by text substitutions, asserting each original text is there once
so that an edit of the spec cannot silently turn a mutant into the unmodified spec, and asserts
TLC reports exactly the check it breaks. Safety mutants run with one worker, so the
breadth-first search, and so the violation TLC finds first, is the same on every run. Each
liveness mutant drops one fairness condition and must break EveryVersionEnds (TLC 2.15 does not
name the temporal property it finds violated; there is only one).

Time on 2 shared cores (TLC 2.15): the safety model 17-50 s, the liveness model 12-25 s (both
marked big_instance, run by `pytest -m big_instance`), each mutant 2-8 s, the dump of the
traces instance and its match with the model about 15 s; 2-3 minutes in all.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from refsched.model.durable import (
    ACTION_PROPERTIES,
    ACTIONS,
    INVARIANTS,
    DurableSnapshot,
    Instance,
    explore,
    violated,
    violated_by_step,
)
from refsched.model.durable.actions import Limits
from refsched.model.graph import Edge, ModelGraph, describe
from refsched.types import TaskState
from refsched.verify import durablespec, stategraph
from refsched.verify.durablespec import TRACES_CONFIG, read_instance, snapshot_of
from refsched.verify.tla import parse_state
from refsched.verify.tlc import TLCResult, run_tlc, spec_dir

pytestmark = pytest.mark.slow

MODULE = "MCDurableScheduler.tla"
SPEC = "DurableScheduler.tla"
SAFETY = "MCDurableScheduler.cfg"
LIVENESS = "MCDurableSchedulerLiveness.cfg"

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
SAFETY_DISTINCT_STATES = 16_751  # views: 2 ids, 2 workers, 2 slots, 1 generation, symmetry
SAFETY_DEPTH = 22
LIVENESS_DISTINCT_STATES = 2_212  # views: 1 id, 2 workers, 2 generations, no symmetry
LIVENESS_DEPTH = 23
TRACES_DISTINCT_STATES = 1_916  # 1 id, 2 workers, 2 generations, the clock up to 4
TRACES_EDGES = 10_033
TRACES_DEPTH = 19


class DurableGraphs:
    """What :mod:`refsched.verify.stategraph` needs to read and match the durable spec's graph.

    (The durable scheduler is not yet a replayable :class:`~refsched.verify.system.System`:
    that comes with its implementation's driver.)
    """

    name = "durable"
    mc_module = MODULE
    traces_config = TRACES_CONFIG
    label_actions: Mapping[str, str] = durablespec.LABEL_ACTIONS

    def snapshot_of(self, values: Mapping[str, Any]) -> DurableSnapshot:
        return durablespec.snapshot_of(values)

    def explore(self, instance: Instance) -> ModelGraph[DurableSnapshot]:
        return explore(instance)

    def show(self, state: DurableSnapshot) -> str:
        return durablespec.show(state)

    def describe(self, action: str, params: Mapping[str, Any]) -> str:
        return str(describe(action, params))


DURABLE: Any = DurableGraphs()


def check(config: str, directory: Path | None = None, workers: int = 2) -> TLCResult:
    # -deadlock: a closed scheduler with nothing running legitimately has no successor.
    return run_tlc(config, MODULE, directory=directory, workers=workers,
                   extra_args=["-deadlock"])


def mutate(tmp_path: Path, substitutions: list[tuple[str, str, str]]) -> Path:
    """Copy spec/ into tmp_path with (module, old text, new text) edits; return the copy."""
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    for module, old, new in substitutions:
        path = copy / module
        text = path.read_text()
        assert text.count(old) == 1, f"mutant is stale: {old!r} is not in {module} once"
        path.write_text(text.replace(old, new))
    return copy


@pytest.mark.big_instance
def test_safety_model_holds_with_recorded_state_count() -> None:
    result = check(SAFETY)
    assert result.ok, result.output[-4000:]
    assert result.version is not None and "2.15" in result.version
    assert (result.distinct_states, result.depth) == (SAFETY_DISTINCT_STATES, SAFETY_DEPTH), (
        "the state space changed: update SAFETY_DISTINCT_STATES/SAFETY_DEPTH and the cfg"
    )


@pytest.mark.big_instance
def test_liveness_model_holds_with_recorded_state_count() -> None:
    result = check(LIVENESS)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (
        LIVENESS_DISTINCT_STATES, LIVENESS_DEPTH,
    ), "the state space changed: update LIVENESS_DISTINCT_STATES/LIVENESS_DEPTH and the cfg"


# -- Must-fail mutants --------------------------------------------------------------------------

D, S = SPEC, "Scheduler.tla"
LEASE_REPORTS = "\\E w \\in Workers : \\E t \\in Tasks : {}(w, t, generation[t], attempt[t])"
HELD_REPORTS = "\\E w \\in Workers : \\E l \\in held[w] : {}(w, l[1], l[2], l[3])"
SCHEDULER_UNCHANGED_BUT_STATE = (
    "UNCHANGED <<started, closed, nextSeq, generation, deps, remainingDeps,\n"
    "                         blockedBy, cancelRequested, seq>>\n")

# name -> (check broken, kind TLC reports, substitutions (module, old, new))
MUTANTS: dict[str, tuple[str, str, list[tuple[str, str, str]]]] = {
    # The store fences a completion by generation and state only, not by attempt and live
    # lease (River's and pg-boss's "state only"): a worker whose lease expired completes.
    "complete_without_attempt_check": (
        "OnlyCurrentAttemptEnds", "action property",
        [(D, "Complete(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
             "    /\\ Current(w, t, g, a)\n",
          "Complete(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
          "    /\\ g = generation[t]\n    /\\ state[t] = \"running\"\n"),
         (D, LEASE_REPORTS.format("Complete"), HELD_REPORTS.format("Complete"))],
    ),
    # The rescuer's write is not conditional on the lease it read (River's rescuer that
    # overwrote a job completed between its read and its write): it fails any version out of
    # attempts whose deadline is past, even one that already succeeded.
    "expire_without_conditional_guard": (
        "AtMostOneEndPerVersion", "invariant",
        [(D, "Expire(t) ==\n    /\\ Live(t)\n    /\\ deadline[t] < now\n",
          "Expire(t) ==\n    /\\ deadline[t] < now\n"),
         (D, "          /\\ Abs!Fail(t, generation[t])\n",
          "          /\\ state' = [state EXCEPT ![t] = \"failed\"]\n          /\\ "
          + SCHEDULER_UNCHANGED_BUT_STATE)],
    ),
    # Re-claims ignore MaxAttempts, and the expiry of the last attempt re-opens the lease
    # instead of failing the version (alone, the first is caught by Expire giving up).
    "reclaim_ignores_max_attempts": (
        "AttemptsBounded", "invariant",
        [(D, "    /\\ holder[t] = NoWorker\n    /\\ attempt[t] < MaxAttempts\n",
          "    /\\ holder[t] = NoWorker\n"),
         (D, "    /\\ \\/ /\\ attempt[t] < MaxAttempts\n",
          "    /\\ \\/ /\\ attempt[t] <= MaxAttempts\n"),
         (D, "       \\/ /\\ attempt[t] >= MaxAttempts\n",
          "       \\/ /\\ attempt[t] > MaxAttempts\n")],
    ),
    # A re-claim hands out the expired lease's attempt again: no new fencing token, so the
    # paused worker and the new one hold the same live lease.
    "reclaim_reuses_the_attempt": (
        "AtMostOneLiveLease", "invariant",
        [(D, "    /\\ attempt' = [attempt EXCEPT ![t] = @ + 1]\n",
          "    /\\ attempt' = attempt\n"),
         (D, "@ \\cup {<<t, generation[t], attempt[t] + 1>>}]",
          "@ \\cup {<<t, generation[t], attempt[t]>>}]")],
    ),
    # A heartbeat renews the lease by writing it (holder and deadline) for the running
    # version, checking neither the attempt nor that the lease is still live: a paused
    # worker takes the version back from the one that re-claimed it.
    "heartbeat_extends_a_lost_lease": (
        "AtMostOneLiveLease", "invariant",
        [(D, "Heartbeat(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
             "    /\\ Current(w, t, g, a)\n"
             "    /\\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]\n"
             "    /\\ UNCHANGED <<attempt, holder, now, held, ends>>\n",
          "Heartbeat(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
          "    /\\ g = generation[t]\n    /\\ state[t] = \"running\"\n"
          "    /\\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]\n"
          "    /\\ holder' = [holder EXCEPT ![t] = w]\n"
          "    /\\ UNCHANGED <<attempt, now, held, ends>>\n"),
         (D, LEASE_REPORTS.format("Heartbeat"), HELD_REPORTS.format("Heartbeat"))],
    ),
    # Fan-in decides readiness before counting the completed dependency (the pg-boss race
    # in one step: the last parent's completion does not release the child).
    "fan_in_counts_before_the_decrement": (
        "IndegreeInvariant", "invariant",
        [(S, "ELSE IF x \\in waiting /\\ remainingDeps[x] = 1 THEN \"ready\"",
          "ELSE IF x \\in waiting /\\ remainingDeps[x] = 0 THEN \"ready\"")],
    ),
    # The expiry puts the version back in the ready queue (Oban's and River's rescue to
    # "available"): no TaskScheduler step takes a running version back to ready.
    "expire_requeues_the_version": (
        "Refinement", "action property",
        [(D, "          /\\ UNCHANGED ends\n          /\\ UNCHANGED schedulerVars\n",
          "          /\\ UNCHANGED ends\n          /\\ state' = [state EXCEPT ![t] = \"ready\"]\n"
          "          /\\ " + SCHEDULER_UNCHANGED_BUT_STATE)],
    ),
}

DURABLE_CHECKS = {"AtMostOneEndPerVersion", "AtMostOneLiveLease", "OnlyCurrentAttemptEnds",
                  "AttemptsBounded", "Refinement"}


def test_every_lease_check_and_the_refinement_have_a_mutant() -> None:
    assert {m[0] for m in MUTANTS.values()} >= DURABLE_CHECKS
    assert {m[0] for m in MUTANTS.values()} <= set(INVARIANTS) | set(ACTION_PROPERTIES)


def trace_states(trace: str) -> list[dict[str, Any]]:
    """The states of a TLC error trace, as variable -> value."""
    blocks = re.split(r"^State \d+: .*$", trace, flags=re.M)[1:]
    return [parse_state(block) for block in blocks]


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_violates_exactly_its_check(name: str, tmp_path: Path) -> None:
    broken, kind, substitutions = MUTANTS[name]
    result = check(SAFETY, mutate(tmp_path, substitutions), workers=1)
    assert not result.ok
    assert (result.violation_kind, result.violated) == (kind, broken), result.output[-4000:]
    assert result.trace is not None and result.trace.startswith("State 1: <Initial predicate>")
    # The model's predicates agree: the counterexample's last step breaks that check (an
    # invariant alone; an action property perhaps with others the same step breaks).
    *_, before, after = trace_states(result.trace)
    limits = read_instance(SAFETY).limits
    source, target = snapshot_of(before), snapshot_of(after)
    assert violated(source, limits) == []
    if kind == "invariant":
        assert violated(target, limits) == [broken]
    else:
        assert violated(target, limits) == []
        assert broken in violated_by_step(source, target, limits)


# name -> substitutions in DurableScheduler.tla that break EveryVersionEnds
LIVENESS_MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    # Nobody takes an expired lease away: the version of a crashed worker runs for ever.
    "no_fairness_on_expire": [(D, "    /\\ \\A t \\in Tasks : WF_vars(Expire(t))\n", "")],
    # The fair worker does not re-claim what others lost.
    "no_fairness_on_reclaim": [
        (D, "    /\\ \\A t \\in Tasks : WF_vars(Reclaim(FairWorker, t))\n", "")],
    # Another worker may heartbeat one version for ever.
    "other_workers_may_run_for_ever": [
        (D, "    /\\ \\A w \\in Workers \\ {FairWorker} : WF_vars(Stop(w))\n", "")],
    # The clock may stop while a lease waits to expire.
    "no_fairness_on_tick": [(D, "    /\\ WF_vars(Tick)\n", "")],
    # Nobody claims: a ready version waits for ever.
    "no_fairness_on_claim": [
        (D, "    /\\ WF_vars(\\E k \\in 1..MaxConcurrency : Claim(FairWorker, k))\n", "")],
    # The fair worker may heartbeat the version it runs for ever.
    "the_fair_worker_may_run_for_ever": [
        (D, "    /\\ \\A t \\in Tasks : WF_vars(Finish(FairWorker, t))\n", "")],
}


def test_every_fairness_condition_has_a_mutant() -> None:
    text = (spec_dir() / SPEC).read_text()
    fair = text.split("\nFairSpec ==\n", 1)[1].split("\n\\*", 1)[0]
    conditions = {line + "\n" for line in fair.splitlines() if "WF_vars" in line}
    removed = {old for subs in LIVENESS_MUTANTS.values() for _, old, new in subs if new == ""}
    assert conditions == removed


@pytest.mark.parametrize("name", sorted(LIVENESS_MUTANTS))
def test_liveness_mutant_violates_every_version_ends(name: str, tmp_path: Path) -> None:
    copy = mutate(tmp_path, LIVENESS_MUTANTS[name])
    result = check(LIVENESS, copy)
    assert not result.ok
    assert result.violation_kind == "temporal", result.output[-4000:]
    assert result.trace is not None


# -- Model = spec on the traces instance --------------------------------------------------------

@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    """TLC's whole state graph of the traces instance, its states read as the model's."""
    graph, result, _ = stategraph.dump_state_graph(TRACES_CONFIG, system=DURABLE)
    assert (result.distinct_states, result.depth) == (TRACES_DISTINCT_STATES, TRACES_DEPTH)
    return graph


@pytest.fixture(scope="module")
def matched(dumped: stategraph.TLCStateGraph) -> stategraph.StateGraph:
    return stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)


def test_tlc_state_graph_equals_the_models(dumped: stategraph.TLCStateGraph,
                                           matched: stategraph.StateGraph) -> None:
    assert matched.state_count == TRACES_DISTINCT_STATES
    assert len(dumped.edges) == matched.edge_count == TRACES_EDGES
    # The instance exercises every action, and the cases that tell the rules apart.
    labels = {durablespec.LABEL_ACTIONS.get(label, label) for _, _, label in dumped.edges}
    assert labels == set(ACTIONS)
    edges = matched.all_edges()

    def some(action: str, where: Callable[[Edge[DurableSnapshot]], object]) -> bool:
        return any(e.action == action and where(e) for e in edges)

    def state(s: DurableSnapshot, t: str) -> TaskState | None:
        view = s.scheduler.tasks.get(t)
        return None if view is None else view.state

    # An expiry that re-opens the lease, and one that fails the version.
    assert some("Expire", lambda e: state(e.target, e.param_map["t"]) is TaskState.RUNNING)
    assert some("Expire", lambda e: state(e.target, e.param_map["t"]) is TaskState.FAILED)
    # A re-claim by the worker that lost the lease, and by the other one.
    assert some("Reclaim", lambda e: (e.param_map["t"], e.source.scheduler.tasks[
        e.param_map["t"]].generation, 1) in e.source.held.get(e.param_map["w"], ()))
    assert some("Reclaim", lambda e: not e.source.held.get(e.param_map["w"]))
    assert some("Reclaim", lambda e: e.source.scheduler.closed)
    # Refusals of a lease that expired, of an older attempt, of an ended version, of an
    # older generation.
    for why in (lambda e: e.source.attempt.get(e.param_map["t"]) == e.param_map["a"]
                and state(e.source, e.param_map["t"]) is TaskState.RUNNING,
                lambda e: e.source.attempt.get(e.param_map["t"], 0) > e.param_map["a"],
                lambda e: state(e.source, e.param_map["t"]) is not TaskState.RUNNING,
                lambda e: e.source.scheduler.tasks[e.param_map["t"]].generation
                > e.param_map["g"]):
        assert some("Refused", why)
    assert some("Heartbeat", lambda e: e.source.deadline[e.param_map["t"]] < e.source.now)


def test_every_check_holds_on_every_state_and_step_of_tlcs_graph(
        matched: stategraph.StateGraph) -> None:
    limits = read_instance(TRACES_CONFIG).limits
    for s, out in matched.edges.items():
        assert violated(s, limits) == [], durablespec.show(s)
        for e in out:
            assert violated_by_step(e.source, e.target, limits) == [], (e.action, e.params)


def test_a_model_whose_reclaim_keeps_the_attempt_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    def reclaim_same_attempt(s: DurableSnapshot, w: str, t: str, *,
                             limits: Limits) -> DurableSnapshot:
        g, a = s.scheduler.tasks[t].generation, s.attempt[t]
        return s.replace(holder={**s.holder, t: w}, deadline={**s.deadline, t: s.now + 1},
                         held={**s.held, w: s.held.get(w, frozenset()) | {(t, g, a)}})

    monkeypatch.setitem(ACTIONS, "Reclaim", replace(ACTIONS["Reclaim"],
                                                    effect=reclaim_same_attempt))
    with pytest.raises(stategraph.GraphMismatch, match="only in"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)
