"""TLC checks of spec/WorkStealing.tla, must-fail mutants, and model = spec on TLC's state graph.

Each mutant copies ``spec/`` to a temporary folder, breaks ``WorkStealing.tla`` by text
substitutions (asserting each original text is there once, so an edit of the spec cannot
silently turn a mutant into the unmodified spec) and asserts TLC reports exactly the check it
breaks. Safety mutants run with one worker, so the breadth-first search, and so the violation
TLC finds first, is the same on every run. TLC 2.15 does not name the temporal property it
finds violated, so each liveness mutant is checked against a config listing that property
alone, on the small traces instance.

Time on 2 shared cores (TLC 2.15): the safety model 16-45 s, the liveness model 10-25 s (both
marked big_instance, run by `pytest -m big_instance`), each mutant 1-6 s, the dump of the
traces instance and its match with the model about 5 s; about 65-100 s in all.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from refsched.model.graph import Edge
from refsched.model.pool import (
    ACTION_PROPERTIES,
    ACTIONS,
    INVARIANTS,
    Phase,
    violated,
    violated_by_step,
)
from refsched.model.pool.actions import PoolSnapshot
from refsched.verify import stategraph, system
from refsched.verify.poolspec import TRACES_CONFIG, read_instance, snapshot_of
from refsched.verify.specstate import SpecStateError
from refsched.verify.tla import parse_state
from refsched.verify.tlc import TLCResult, run_tlc, spec_dir

MODULE = "MCWorkStealing.tla"
SPEC = "WorkStealing.tla"
POOL = system.get("pool")
SAFETY = "MCWorkStealing.cfg"
LIVENESS = "MCWorkStealingLiveness.cfg"
LIVENESS_PROPERTIES = ("EverySubmittedTaskRuns", "ShutdownTerminates")

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
SAFETY_DISTINCT_STATES = 34_084  # 3 workers, 4 roots, 3 children, symmetry
SAFETY_DEPTH = 23
LIVENESS_DISTINCT_STATES = 40_809  # 2 workers, 2 roots, 3 children, no symmetry
LIVENESS_DEPTH = 17
TRACES_DISTINCT_STATES = 3_231  # 2 workers, 2 roots, 2 children, no symmetry
TRACES_EDGES = 9_216
TRACES_DEPTH = 14


def check(config: str, directory: Path | None = None, workers: int = 2) -> TLCResult:
    # -deadlock: a terminated pool has no successor, legitimately.
    return run_tlc(config, MODULE, directory=directory, workers=workers,
                   extra_args=["-deadlock"])


def mutate(tmp_path: Path, substitutions: list[tuple[str, str]]) -> Path:
    """Copy spec/ into tmp_path with WorkStealing.tla edited; return the copy's folder."""
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    module = copy / SPEC
    text = module.read_text()
    for old, new in substitutions:
        assert text.count(old) == 1, f"mutant is stale: {old!r} is not in {SPEC} once"
        text = text.replace(old, new)
    module.write_text(text)
    return copy


@pytest.mark.slow
@pytest.mark.big_instance
def test_safety_model_holds_with_recorded_state_count() -> None:
    result = check(SAFETY)
    assert result.ok, result.output[-4000:]
    assert result.version is not None and "2.15" in result.version
    assert (result.distinct_states, result.depth) == (SAFETY_DISTINCT_STATES, SAFETY_DEPTH), (
        "the state space changed: update SAFETY_DISTINCT_STATES/SAFETY_DEPTH and the cfg"
    )


@pytest.mark.slow
@pytest.mark.big_instance
def test_liveness_model_holds_with_recorded_state_count() -> None:
    result = check(LIVENESS)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (
        LIVENESS_DISTINCT_STATES, LIVENESS_DEPTH,
    ), "the state space changed: update LIVENESS_DISTINCT_STATES/LIVENESS_DEPTH and the cfg"


# name -> (check broken, kind TLC reports, substitutions in WorkStealing.tla)
MUTANTS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    # A thief runs the top task but leaves it in the victim's deque: its owner will pop it
    # and run it a second time.
    "steal_leaves_task_in_victim": (
        "ExecutedAtMostOnce", "invariant",
        [("    /\\ deque' = [deque EXCEPT ![victim] = Tail(@)]\n", "    /\\ deque' = deque\n")],
    ),
    # The owner pops the top of its own deque, the oldest task (FIFO), not the bottom.
    "pop_takes_top": (
        "OwnerTakesBottom", "action property",
        [("    /\\ running' = [running EXCEPT ![w] = Bottom(deque[w])]\n"
          "    /\\ deque' = [deque EXCEPT ![w] = WithoutBottom(@)]\n"
          "    /\\ runs' = [runs EXCEPT ![Bottom(deque[w])] = @ + 1]\n",
          "    /\\ running' = [running EXCEPT ![w] = Head(deque[w])]\n"
          "    /\\ deque' = [deque EXCEPT ![w] = Tail(@)]\n"
          "    /\\ runs' = [runs EXCEPT ![Head(deque[w])] = @ + 1]\n")],
    ),
    # A thief takes the victim's newest task, from the owner's end.
    "steal_takes_bottom": (
        "ThiefTakesTop", "action property",
        [("    /\\ running' = [running EXCEPT ![thief] = Head(deque[victim])]\n"
          "    /\\ deque' = [deque EXCEPT ![victim] = Tail(@)]\n"
          "    /\\ runs' = [runs EXCEPT ![Head(deque[victim])] = @ + 1]\n",
          "    /\\ running' = [running EXCEPT ![thief] = Bottom(deque[victim])]\n"
          "    /\\ deque' = [deque EXCEPT ![victim] = WithoutBottom(@)]\n"
          "    /\\ runs' = [runs EXCEPT ![Bottom(deque[victim])] = @ + 1]\n")],
    ),
    # A spawned child is pushed at once but counted only when its parent finishes: the
    # count lags the deques (and could reach zero while the child waits).
    "child_counted_when_parent_finishes": (
        "OutstandingIsQueuedPlusRunning", "invariant",
        [("        /\\ outstanding' = outstanding + 1\n",
          "        /\\ outstanding' = outstanding\n"),
         ("    /\\ outstanding' = outstanding - 1\n",
          "    /\\ outstanding' = outstanding - 1\n"
          "                        + Cardinality({c \\in Tasks : parent[c] = running[w]})\n")],
    ),
    # Children are buffered while their parent runs and submitted (pushed and counted)
    # after it finished: between the two, a draining pool may see nothing outstanding.
    "child_submitted_after_parent_finished": (
        "ChildCountedBeforeParentCompletes", "action property",
        [("    LET p == running[w]\n    IN  /\\ phase",
          "    \\E p \\in Running \\cup finished :\n        /\\ phase")],
    ),
    # shutdown() sees every deque empty and terminates the pool while a task still runs
    # (and might spawn a child).
    "shutdown_terminates_on_empty_deques": (
        "TerminatedOnlyWhenIdle", "invariant",
        [("    /\\ phase' = IF outstanding = 0 THEN \"terminated\" ELSE \"draining\"\n",
          "    /\\ phase' = IF (\\A v \\in Workers : deque[v] = <<>>) THEN \"terminated\"\n"
          "                ELSE \"draining\"\n")],
    ),
    # cancel_futures empties the deques without cancelling what it removed: those futures
    # never resolve.
    "cancel_forgets_removed_tasks": (
        "NoTaskLost", "invariant",
        [("    /\\ cancelled' = cancelled \\cup Queued\n", "    /\\ cancelled' = cancelled\n")],
    ),
    # cancel_futures marks the running tasks cancelled too.
    "cancel_marks_running_tasks": (
        "CancelledNeverRan", "invariant",
        [("    /\\ cancelled' = cancelled \\cup Queued\n",
          "    /\\ cancelled' = cancelled \\cup Queued \\cup Running\n")],
    ),
    # submit() from outside is still taken while draining.
    "submit_while_draining": (
        "RootsOnlyWhileAccepting", "action property",
        [("    /\\ phase = \"accepting\"\n    /\\ t \\in Tasks \\ Children\n",
          "    /\\ phase \\in {\"accepting\", \"draining\"}\n    /\\ t \\in Tasks \\ Children\n")],
    ),
    # The pool terminates itself when it runs out of work, without a shutdown().
    "pool_closes_itself_when_idle": (
        "PhasesInOrder", "action property",
        [("IF phase = \"draining\" /\\ outstanding = 1 THEN", "IF outstanding = 1 THEN")],
    ),
    # shutdown() writes a phase that does not exist.
    "shutdown_misspells_draining": (
        "TypeOK", "invariant",
        [("THEN \"terminated\" ELSE \"draining\"", "THEN \"terminated\" ELSE \"drainig\"")],
    ),
}


def test_every_invariant_and_action_property_has_a_mutant() -> None:
    assert {m[0] for m in MUTANTS.values()} == set(INVARIANTS) | set(ACTION_PROPERTIES)


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
    # The model's predicates agree: the counterexample's last step breaks that check alone.
    *_, before, after = trace_states(result.trace)
    if broken == "TypeOK":
        with pytest.raises(SpecStateError):
            snapshot_of(after)
        return
    source, target = snapshot_of(before), snapshot_of(after)
    assert violated(source) == [] and violated_by_step(source, target) in ([], [broken])
    assert [*violated(target), *violated_by_step(source, target)] == [broken]


# name -> (the liveness property broken, those that still hold, substitutions in WorkStealing.tla)
LIVENESS_MUTANTS: dict[str, tuple[str, tuple[str, ...], list[tuple[str, str]]]] = {
    # A running task may run forever.
    "no_fairness_on_finish": (
        "EverySubmittedTaskRuns", (),
        [("    /\\ \\A w \\in Workers : WF_vars(Finish(w))\n", "")],
    ),
    # Idle workers may stop taking work: a queued task may wait forever.
    "no_fairness_on_pop_and_steal": (
        "EverySubmittedTaskRuns", (),
        [("    /\\ \\A w \\in Workers : WF_vars(Pop(w))\n", ""),
         ("    /\\ \\A w \\in Workers : WF_vars(\\E v \\in Workers : Steal(w, v))\n", "")],
    ),
    # The last task of a draining pool to finish does not terminate it: every task runs,
    # but the pool drains forever.
    "last_finish_does_not_terminate": (
        "ShutdownTerminates", ("EverySubmittedTaskRuns",),
        [("IF phase = \"draining\" /\\ outstanding = 1 THEN", "IF FALSE THEN")],
    ),
}


def liveness_config(directory: Path, prop: str) -> str:
    """A config in ``directory``: the traces instance under FairSpec, checking ``prop`` alone.

    Unmutated, it passes: its behaviours are those of MCWorkStealingLiveness.cfg (one more
    child) in which that child is never spawned.
    """
    constants = (spec_dir() / TRACES_CONFIG).read_text().split("SPECIFICATION", 1)[0]
    name = f"MCWorkStealingLiveness{prop}.cfg"
    (directory / name).write_text(f"{constants}SPECIFICATION FairSpec\n\nPROPERTIES\n    {prop}\n")
    return name


def test_every_liveness_property_has_a_mutant() -> None:
    assert {m[0] for m in LIVENESS_MUTANTS.values()} == set(LIVENESS_PROPERTIES)


@pytest.mark.parametrize("name", sorted(LIVENESS_MUTANTS))
def test_liveness_mutant_violates_exactly_its_property(name: str, tmp_path: Path) -> None:
    broken, holding, substitutions = LIVENESS_MUTANTS[name]
    copy = mutate(tmp_path, substitutions)
    result = check(liveness_config(copy, broken), copy)
    assert not result.ok
    assert result.violation_kind == "temporal", result.output[-4000:]
    assert result.trace is not None
    for prop in holding:
        result = check(liveness_config(copy, prop), copy)
        assert result.ok, result.output[-4000:]


# -- Model = spec on the traces instance --------------------------------------------------------

@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    """TLC's whole state graph of the traces instance, its states read as the model's."""
    graph, result, _ = stategraph.dump_state_graph(TRACES_CONFIG, system=POOL)
    assert (result.distinct_states, result.depth) == (TRACES_DISTINCT_STATES, TRACES_DEPTH)
    return graph


def test_tlc_state_graph_equals_the_models(dumped: stategraph.TLCStateGraph) -> None:
    matched = stategraph.match(dumped, read_instance(TRACES_CONFIG), system=POOL)
    assert matched.state_count == TRACES_DISTINCT_STATES
    assert len(dumped.edges) == matched.edge_count == TRACES_EDGES
    # The instance exercises every action, and the cases that tell the rules apart.
    assert set(Counter(label for _, _, label in dumped.edges)) == set(ACTIONS)
    edges = matched.all_edges()

    def some(action: str, where: Callable[[Edge[PoolSnapshot]], object]) -> bool:
        return any(e.action == action and where(e) for e in edges)

    assert some("Pop", lambda e: len(e.source.deque[e.param_map["w"]]) == 2)
    assert some("Steal", lambda e: len(e.source.deque[e.param_map["victim"]]) == 2)
    assert some("SubmitChild", lambda e: e.source.phase is Phase.DRAINING)
    assert some("SubmitChild", lambda e: e.source.running[e.param_map["w"]] in e.source.parent)
    assert some("CancelQueued", lambda e: e.source.running and e.target.phase is Phase.DRAINING)
    assert some("CancelQueued", lambda e: e.target.phase is Phase.TERMINATED)
    assert some("Shutdown", lambda e: e.target.phase is Phase.TERMINATED)
    assert some("Finish", lambda e: e.target.phase is Phase.TERMINATED)


def test_a_model_whose_steal_takes_the_bottom_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    def steal_bottom(s: PoolSnapshot, thief: str, victim: str) -> PoolSnapshot:
        d = s.deque[victim]
        return s.replace(deque={**s.deque, victim: d[:-1]}, running={**s.running, thief: d[-1]},
                         runs={**s.runs, d[-1]: 1})

    monkeypatch.setitem(ACTIONS, "Steal", replace(ACTIONS["Steal"], effect=steal_bottom))
    with pytest.raises(stategraph.GraphMismatch, match="only in"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=POOL)

