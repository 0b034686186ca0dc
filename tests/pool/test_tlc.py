"""TLC checks of spec/WorkStealing.tla, must-fail mutants, and model = spec on TLC's state graph.

Each mutant breaks ``WorkStealing.tla`` by text substitutions and names the (config, check)
pairs that must report it (tests/spec_mutants.py): every invariant and property each
``MCWorkStealing*.cfg`` lists is reported, by name, by some mutant in that config (a temporal
property in a copy of the config that lists it alone: TLC 2.15 does not name the one it finds
violated), and the model's predicates find the same check broken on the counterexample's last
step.

Time on 2 shared cores (TLC 2.15): the safety model 16-45 s, the liveness model 10-25 s (both
marked big_instance, run by `pytest -m big_instance`), each mutant 3-8 s with one worker (about
40 runs), the dump of the traces instance and its match with the model about 5 s.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from refsched.model.dag.graph import Edge
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
from refsched.verify.pool.spec import TRACES_CONFIG, read_instance
from refsched.verify.tlc import TLCResult, run_tlc, spec_dir
from tests.spec_mutants import Mutant, SpecChecks, cases, check_mutant
from tests.tlc_support import (
    TracesGraph,
    assert_every_check_has_a_mutant,
    assert_holds_with_recorded_count,
    big_instances,
)

MODULE = "MCWorkStealing.tla"
SPEC_MODULE = "WorkStealing.tla"
POOL = system.get("pool")
SAFETY = "MCWorkStealing.cfg"
LIVENESS = "MCWorkStealingLiveness.cfg"
BATCH = "MCWorkStealingBatch.cfg"
LIVENESS_PROPERTIES = ("EverySubmittedTaskRuns", "ShutdownTerminates")

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
RECORDED_COUNTS = {  # (distinct states, depth)
    SAFETY: (34_084, 23),  # 3 workers, 4 roots, 3 children, symmetry
    LIVENESS: (40_809, 17),  # 2 workers, 2 roots, 3 children, no symmetry
    BATCH: (38_882, 23),  # as SAFETY, StealCap = 3
}
# The traces instance: 2 workers, 2 roots, 2 children, no symmetry.
# StealCap = 1 there: no batch steal (MCWorkStealingBatch.cfg checks those).
TRACES_GRAPH = TracesGraph(POOL, states=3_231, edges=9_216, depth=14,
                           disabled=frozenset({"StealBatch", "Block", "StartSpare", "Unblock",
                                               "Retire"}))


def check(config: str, directory: Path | None = None, workers: int = 2) -> TLCResult:
    # -deadlock: a terminated pool has no successor, legitimately.
    return run_tlc(config, MODULE, directory=directory, workers=workers,
                   extra_args=["-deadlock"])


@pytest.mark.parametrize(("config", "counts"), big_instances(RECORDED_COUNTS))
def test_model_holds_with_recorded_state_count(config: str, counts: tuple[int, int]) -> None:
    assert_holds_with_recorded_count(check(config), counts)


S, T, L, B = SAFETY, TRACES_CONFIG, LIVENESS, BATCH

# Each mutant, and the (config, check) pairs that must report it.
MUTANTS: dict[str, Mutant] = {
    # A thief runs the top task but leaves it in the victim's deque: its owner will pop it
    # and run it a second time.
    "steal_leaves_task_in_victim": Mutant(
        (("    /\\ deque' = [deque EXCEPT ![victim] = Tail(@)]\n", "    /\\ deque' = deque\n"),),
        ((S, "ExecutedAtMostOnce"), (T, "ExecutedAtMostOnce"), (L, "ExecutedAtMostOnce"),
         (B, "ExecutedAtMostOnce")),
    ),
    # The owner pops the top of its own deque, the oldest task (FIFO), not the bottom.
    "pop_takes_top": Mutant(
        (("    /\\ running' = [running EXCEPT ![w] = Bottom(deque[w])]\n"
           "    /\\ deque' = [deque EXCEPT ![w] = WithoutBottom(@)]\n"
           "    /\\ runs' = [runs EXCEPT ![Bottom(deque[w])] = @ + 1]\n",
           "    /\\ running' = [running EXCEPT ![w] = Head(deque[w])]\n"
           "    /\\ deque' = [deque EXCEPT ![w] = Tail(@)]\n"
           "    /\\ runs' = [runs EXCEPT ![Head(deque[w])] = @ + 1]\n"),),
        ((S, "OwnerTakesBottom"), (T, "OwnerTakesBottom"), (L, "OwnerTakesBottom"),
         (B, "OwnerTakesBottom")),
    ),
    # A thief takes the victim's newest task, from the owner's end.
    "steal_takes_bottom": Mutant(
        (("    /\\ running' = [running EXCEPT ![thief] = Head(deque[victim])]\n"
           "    /\\ deque' = [deque EXCEPT ![victim] = Tail(@)]\n"
           "    /\\ runs' = [runs EXCEPT ![Head(deque[victim])] = @ + 1]\n",
           "    /\\ running' = [running EXCEPT ![thief] = Bottom(deque[victim])]\n"
           "    /\\ deque' = [deque EXCEPT ![victim] = WithoutBottom(@)]\n"
           "    /\\ runs' = [runs EXCEPT ![Bottom(deque[victim])] = @ + 1]\n"),),
        ((S, "ThiefTakesTop"), (T, "ThiefTakesTop"), (L, "ThiefTakesTop"),
         (B, "ThiefTakesTop")),
    ),
    # A spawned child is pushed at once but counted only when its parent finishes: the
    # count lags the deques (and could reach zero while the child waits).
    "child_counted_when_parent_finishes": Mutant(
        (("        /\\ outstanding' = outstanding + 1\n",
           "        /\\ outstanding' = outstanding\n"),
          ("    /\\ outstanding' = outstanding - 1\n",
           "    /\\ outstanding' = outstanding - 1\n"
           "                        + Cardinality({c \\in Tasks : parent[c] = running[w]})\n"),),
        ((S, "OutstandingIsQueuedPlusRunning"), (T, "OutstandingIsQueuedPlusRunning"),
         (L, "OutstandingIsQueuedPlusRunning"), (B, "OutstandingIsQueuedPlusRunning")),
    ),
    # Children are buffered while their parent runs and submitted (pushed and counted)
    # after it finished: between the two, a draining pool may see nothing outstanding.
    "child_submitted_after_parent_finished": Mutant(
        (("    LET p == running[w]\n    IN  /\\ phase",
           "    \\E p \\in Running \\cup finished :\n        /\\ phase"),),
        ((S, "ChildCountedBeforeParentCompletes"), (T, "ChildCountedBeforeParentCompletes"),
         (L, "ChildCountedBeforeParentCompletes"), (B, "ChildCountedBeforeParentCompletes")),
    ),
    # shutdown() sees every deque empty and terminates the pool while a task still runs
    # (and might spawn a child).
    "shutdown_terminates_on_empty_deques": Mutant(
        (("    /\\ phase' = IF outstanding = 0 THEN \"terminated\" ELSE \"draining\"\n",
           "    /\\ phase' = IF (\\A v \\in Workers : deque[v] = <<>>) THEN \"terminated\"\n"
           "                ELSE \"draining\"\n"),),
        ((S, "TerminatedOnlyWhenIdle"), (T, "TerminatedOnlyWhenIdle"),
         (L, "TerminatedOnlyWhenIdle"), (B, "TerminatedOnlyWhenIdle")),
    ),
    # cancel_futures empties the deques without cancelling what it removed: those futures
    # never resolve.
    "cancel_forgets_removed_tasks": Mutant(
        (("    /\\ cancelled' = cancelled \\cup Queued\n", "    /\\ cancelled' = cancelled\n"),),
        ((S, "NoTaskLost"), (T, "NoTaskLost"), (L, "NoTaskLost"), (B, "NoTaskLost")),
    ),
    # cancel_futures marks the running tasks cancelled too.
    "cancel_marks_running_tasks": Mutant(
        (("    /\\ cancelled' = cancelled \\cup Queued\n",
           "    /\\ cancelled' = cancelled \\cup Queued \\cup Running\n"),),
        ((S, "CancelledNeverRan"), (T, "CancelledNeverRan"), (L, "CancelledNeverRan"),
         (B, "CancelledNeverRan")),
    ),
    # submit() from outside is still taken while draining.
    "submit_while_draining": Mutant(
        (("    /\\ phase = \"accepting\"\n    /\\ t \\in Tasks \\ Children\n",
           "    /\\ phase \\in {\"accepting\", \"draining\"}\n"
           "    /\\ t \\in Tasks \\ Children\n"),),
        ((S, "RootsOnlyWhileAccepting"), (T, "RootsOnlyWhileAccepting"),
         (L, "RootsOnlyWhileAccepting"), (B, "RootsOnlyWhileAccepting")),
    ),
    # The pool terminates itself when it runs out of work, without a shutdown().
    "pool_closes_itself_when_idle": Mutant(
        (("IF phase = \"draining\" /\\ outstanding = 1 THEN", "IF outstanding = 1 THEN"),),
        ((S, "PhasesInOrder"), (T, "PhasesInOrder"), (L, "PhasesInOrder"),
         (B, "PhasesInOrder")),
    ),
    # The last task of a draining pool to finish does not terminate it: every task runs,
    # but the pool drains for ever, with nothing left to do (a halt that -deadlock hides).
    "last_finish_does_not_terminate": Mutant(
        (("IF phase = \"draining\" /\\ outstanding = 1 THEN", "IF FALSE THEN"),),
        ((S, "HaltsOnlyWhenTerminated"), (T, "HaltsOnlyWhenTerminated"),
         (L, "HaltsOnlyWhenTerminated"), (L, "ShutdownTerminates"),
         (B, "HaltsOnlyWhenTerminated")),
    ),
    # A running task may run forever.
    "no_fairness_on_finish": Mutant(
        (("    /\\ \\A w \\in Workers : SF_vars(Finish(w))\n", ""),),
        ((L, "EverySubmittedTaskRuns"),),
    ),
    # Idle workers may stop taking work: a queued task may wait forever.
    "no_fairness_on_pop_and_steal": Mutant(
        (("    /\\ \\A w \\in Workers : WF_vars(Pop(w))\n", ""),
         ("    /\\ \\A w \\in Workers : WF_vars(\\E v \\in Threads : Steal(w, v) \\/ "
          "StealBatch(w, v))\n", "")),
        ((L, "EverySubmittedTaskRuns"),),
    ),
    # shutdown() writes a phase that does not exist.
    "shutdown_misspells_draining": Mutant(
        (("THEN \"terminated\" ELSE \"draining\"", "THEN \"terminated\" ELSE \"drainig\""),),
        ((S, "TypeOK"), (T, "TypeOK"), (L, "TypeOK"), (B, "TypeOK")),
    ),
    # -- Batch steals --
    # A batch steal takes the victim's newest tasks, from the owner's end.
    "batch_takes_owner_end": Mutant(
        (("        taken == SubSeq(deque[victim], 1, k)\n",
          "        taken == SubSeq(deque[victim], Len(deque[victim]) - k + 1,\n"
          "                        Len(deque[victim]))\n"),
         ("![victim] = SubSeq(@, k + 1, Len(@)),", "![victim] = SubSeq(@, 1, Len(@) - k),")),
        ((B, "ThiefTakesTop"),),
    ),
    # A batch steal copies the tasks the thief keeps and leaves them in the victim's deque:
    # each may run twice.
    "batch_leaves_kept_tasks_in_victim": Mutant(
        (("![victim] = SubSeq(@, k + 1, Len(@)),", "![victim] = SubSeq(@, 2, Len(@)),"),),
        ((B, "ExecutedAtMostOnce"),),
    ),
    # A batch steal counts the tasks the thief keeps as new submissions.
    "batch_double_counts": Mutant(
        (("        /\\ runs' = [runs EXCEPT ![taken[1]] = @ + 1]\n"
          "        /\\ UNCHANGED <<phase, outstanding, submitted, finished, cancelled, parent>>\n",
          "        /\\ runs' = [runs EXCEPT ![taken[1]] = @ + 1]\n"
          "        /\\ outstanding' = outstanding + k - 1\n"
          "        /\\ UNCHANGED <<phase, submitted, finished, cancelled, parent>>\n"),),
        ((B, "OutstandingIsQueuedPlusRunning"),),
    ),
    # A batch of StealCap is taken from a deque one task short of twice that: three of five.
    "batch_takes_more_than_half": Mutant(
        (("StealSize(n) == IF n >= 2 * StealCap THEN",
          "StealSize(n) == IF n >= 2 * StealCap - 1 THEN"),),
        ((B, "StealTakesAtMostHalf"),),
    ),
    # The tasks a thief keeps land in its deque in reverse order.
    "batch_reverses_kept_tasks": Mutant(
        (("![thief] = Tail(taken)]", "![thief] = [i \\in 1..(k - 1) |-> taken[k + 1 - i]]]"),),
        ((B, "StolenInOrder"),),
    ),
}


SPEC = SpecChecks(
    module=SPEC_MODULE, mc_module=MODULE, system="pool",
    invariants=frozenset(INVARIANTS), action_properties=frozenset(ACTION_PROPERTIES),
    temporal=frozenset(LIVENESS_PROPERTIES), violated=lambda s, instance: violated(s),
    violated_by_step=violated_by_step, mutants=MUTANTS,
)


def test_every_check_of_every_config_has_a_mutant_it_reports() -> None:
    # MCWorkStealingCorpus{Batch,Blocking}.cfg list no check: they are corpus instances, whose
    # checks MCWorkStealingBatch.cfg and MCPoolBlocking*.cfg make with their mutants.
    assert_every_check_has_a_mutant(SPEC, [SAFETY, BATCH, "MCWorkStealingCorpusBatch.cfg",
                                           "MCWorkStealingCorpusBlocking.cfg", LIVENESS,
                                           TRACES_CONFIG])


@pytest.mark.parametrize(("name", "config", "check"), cases(SPEC))
def test_mutant_is_reported_by_name(name: str, config: str, check: str, tmp_path: Path) -> None:
    check_mutant(SPEC, name, config, check, tmp_path)


def test_a_pool_that_never_terminates_still_runs_every_task(tmp_path: Path) -> None:
    # The last_finish_does_not_terminate mutant breaks termination alone: under FairSpec every
    # submitted task still ends. (On the traces instance, whose behaviours are those of the
    # liveness instance in which its third child is never spawned.)
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    module = copy / SPEC_MODULE
    old, new = MUTANTS["last_finish_does_not_terminate"].substitutions[0]
    module.write_text(module.read_text().replace(old, new))
    constants = (copy / TRACES_CONFIG).read_text().split("SPECIFICATION", 1)[0]
    (copy / "Fair.cfg").write_text(
        f"{constants}SPECIFICATION FairSpec\n\nPROPERTIES\n    EverySubmittedTaskRuns\n")
    result = check("Fair.cfg", copy)
    assert result.ok, result.output[-4000:]


# -- Model = spec on the traces instance --------------------------------------------------------

@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    return TRACES_GRAPH.dump()


def test_tlc_state_graph_equals_the_models(dumped: stategraph.TLCStateGraph) -> None:
    # The instance exercises every action, and the cases that tell the rules apart.
    edges = TRACES_GRAPH.matched_edges(dumped)

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
    def steal_bottom(s: PoolSnapshot, thief: str, victim: str, steal_cap: int) -> PoolSnapshot:
        d = s.deque[victim]
        return s.replace(deque={**s.deque, victim: d[:-1]}, running={**s.running, thief: d[-1]},
                         runs={**s.runs, d[-1]: 1})

    monkeypatch.setitem(ACTIONS, "Steal", replace(ACTIONS["Steal"], effect=steal_bottom))
    with pytest.raises(stategraph.GraphMismatch, match="only in"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=POOL)

