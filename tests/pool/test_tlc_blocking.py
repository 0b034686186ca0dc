"""TLC checks of managed blocking in spec/WorkStealing.tla (MCPoolBlocking*.cfg), and must-fail
mutants: every check each of those configs lists is reported, by name, by some mutant there,
and on a safety counterexample the model's predicates (refsched.model.pool and its blocking
module) find the same check broken on the last step.

Time on 2 shared cores (TLC 2.15, one worker): the safety instance ~10 s, the liveness
instances ~15-70 s (marked big_instance), each mutant 3-40 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from refsched.model.pool import ACTION_PROPERTIES, INVARIANTS, violated, violated_by_step
from refsched.model.pool.blocking import BlockingInstance, BlockingSnapshot, blocking_violated
from refsched.model.pool.graph import Instance
from refsched.verify.pool.spec import blocking_snapshot_of, read_blocking_instance
from refsched.verify.tlc import TLCResult, run_tlc
from tests.pool.test_tlc import MUTANTS as POOL_MUTANTS
from tests.spec_mutants import Mutant, SpecChecks, cases, check_mutant
from tests.tlc_support import (
    assert_every_check_has_a_mutant,
    assert_holds_with_recorded_count,
    big_instances,
)

MODULE = "MCPoolBlocking.tla"
B = "MCPoolBlocking.cfg"  # safety, MaxSpares 1 of 2 spares
LIVE = "MCPoolBlockingLive.cfg"  # FairSpec: blocking calls may never return
RETURNS = "MCPoolBlockingReturns.cfg"  # ReturningFairSpec: every blocking call returns
BATCH = "MCPoolBlockingBatch.cfg"  # safety with batch steals: StealCap 2, 1 worker, 1 spare
BLOCKING_INVARIANTS = ("RunnableBounded", "CompensationBounded", "SparesStandInForBlockers")
TEMPORAL = ("QueuedTasksRunDespiteBlockers", "SparesRetire", "EverySubmittedTaskRuns",
            "ShutdownTerminates")

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
RECORDED_COUNTS = {  # (distinct states, depth)
    B: (6_793, 16),
}
BIG_COUNTS = {
    LIVE: (28_069, 22),
    RETURNS: (1_491, 16),
    BATCH: (2_187_285, 25),
}


class _BlockingSystem:
    """What check_mutant reads TLC's states and constants with, for these configs."""

    @staticmethod
    def read_instance(path: Path) -> tuple[Instance, BlockingInstance]:
        return read_blocking_instance(path)

    @staticmethod
    def snapshot_of(state: dict[str, Any]) -> BlockingSnapshot:
        return blocking_snapshot_of(state)


def _violated(s: BlockingSnapshot, constants: tuple[Instance, BlockingInstance]) -> list[str]:
    return [*violated(s.pool), *blocking_violated(s, constants[1])]


def _violated_by_step(before: BlockingSnapshot, after: BlockingSnapshot) -> list[str]:
    return violated_by_step(before.pool, after.pool)


def check(config: str) -> TLCResult:
    return run_tlc(config, MODULE, workers=2, extra_args=["-deadlock"])


@pytest.mark.parametrize(("config", "counts"), list(RECORDED_COUNTS.items()))
def test_blocking_model_holds_with_recorded_state_count(config: str,
                                                        counts: tuple[int, int]) -> None:
    assert_holds_with_recorded_count(check(config), counts)


@pytest.mark.parametrize(("config", "counts"), big_instances(BIG_COUNTS))
def test_blocking_liveness_holds_with_recorded_state_count(config: str,
                                                           counts: tuple[int, int]) -> None:
    assert_holds_with_recorded_count(check(config), counts)


# The pool's own mutants, each caught in the blocking safety instance as in MCWorkStealing.cfg.
_REUSED = {
    f"{name}": Mutant(m.substitutions, ((B, check),))
    for name, m in POOL_MUTANTS.items()
    for config, check in m.caught[:1] if config == "MCWorkStealing.cfg"
}
# Caught here first by the check the spares' deques add: an off spare gets a child.
_REUSED["child_submitted_after_parent_finished"] = Mutant(
    POOL_MUTANTS["child_submitted_after_parent_finished"].substitutions,
    ((B, "SparesStandInForBlockers"),))

MUTANTS: dict[str, Mutant] = {
    **_REUSED,
    # Block launches a spare whenever one is off: no bound on how many are active.
    "compensation_without_a_bound": Mutant(
        (("    \\/ spare[s] = \"off\" /\\ Cardinality(ActiveSpares) < MaxSpares\n",
          "    \\/ spare[s] = \"off\"\n"),),
        ((B, "CompensationBounded"),),
    ),
    # Unblock releases only a spare still starting: one that serves goes on standing in for
    # the thread, which runs on beside it.
    "unblock_releases_only_a_starting_spare": Mutant(
        (("    /\\ blocker' = [s \\in Spares |-> blocker[s] \\ {x}]\n",
          "    /\\ blocker' = [s \\in Spares |-> IF spare[s] = \"starting\"\n"
          "                                    THEN blocker[s] \\ {x}\n"
          "                                    ELSE blocker[s]]\n"),),
        ((B, "RunnableBounded"),),
    ),
    # Unblock releases only a spare that has started: one still starting goes on standing in
    # for a thread that no longer blocks (a blocker returning while its compensator starts).
    "unblock_misses_a_starting_spare": Mutant(
        (("    /\\ blocker' = [s \\in Spares |-> blocker[s] \\ {x}]\n",
          "    /\\ blocker' = [s \\in Spares |-> IF spare[s] = \"on\" THEN blocker[s] \\ {x}\n"
          "                                    ELSE blocker[s]]\n"),),
        ((B, "SparesStandInForBlockers"),),
    ),
    # A child may be submitted by a running thread after its parent finished (the pool's
    # mutant of that name, kept to running threads: with the spares' deques it would first
    # push onto an off spare's).
    "child_submitted_after_parent_finished_by_a_running_thread": Mutant(
        (("    LET p == running[w]\n    IN  /\\ phase",
          "    \\E p \\in Running \\cup finished :\n        /\\ running[w] # NoTask\n"
          "        /\\ phase"),),
        ((B, "ChildCountedBeforeParentCompletes"),),
    ),
    # A retiring spare drops the tasks left in its deque.
    "retiring_spare_drops_its_deque": Mutant(
        (("    /\\ deque[s] = <<>>\n    /\\ spare' = [spare EXCEPT ![s] = \"off\"]\n"
          "    /\\ UNCHANGED <<phase, deque, ",
          "    /\\ deque' = [deque EXCEPT ![s] = <<>>]\n"
          "    /\\ spare' = [spare EXCEPT ![s] = \"off\"]\n"
          "    /\\ UNCHANGED <<phase, "),),
        ((B, "OutstandingIsQueuedPlusRunning"), (RETURNS, "EverySubmittedTaskRuns")),
    ),
    # The spare's thread is launched but never begins serving.
    "compensator_never_starts": Mutant(
        (("    /\\ spare[s] = \"starting\"\n    /\\ spare' = [spare EXCEPT ![s] = \"on\"]\n",
          "    /\\ FALSE\n    /\\ spare' = [spare EXCEPT ![s] = \"on\"]\n"),),
        ((LIVE, "QueuedTasksRunDespiteBlockers"),),
    ),
    # Block never launches a spare: every blocker blocks uncompensated.
    "blocker_never_compensated": Mutant(
        (("    /\\ IF \\E s \\in Spares \\ {x} : Free(s)\n",
          "    /\\ IF FALSE\n"),),
        ((LIVE, "QueuedTasksRunDespiteBlockers"),),
    ),
    # A released spare never gives its thread back.
    "spare_never_retires": Mutant(
        (("    /\\ spare[s] = \"on\"\n    /\\ blocker[s] = {}\n",
          "    /\\ FALSE\n    /\\ blocker[s] = {}\n"),),
        ((RETURNS, "SparesRetire"),),
    ),
    # Blocking calls may block for ever under ReturningFairSpec too: a task never ends and a
    # draining pool never terminates.
    "blocking_calls_need_not_return": Mutant(
        (("ReturningFairSpec == FairSpec /\\ \\A x \\in Threads : WF_vars(Unblock(x))",
          "ReturningFairSpec == FairSpec"),),
        ((RETURNS, "EverySubmittedTaskRuns"), (RETURNS, "ShutdownTerminates")),
    ),
}

# Managed blocking with batch steals: a mutant for each check MCPoolBlockingBatch.cfg lists.
MUTANTS["batch_steal_by_a_spare_not_serving"] = Mutant(
    # StealBatch by a spare that is off: it runs a task with no blocker to stand in for.
    (("    IN  /\\ thief # victim\n        /\\ Serving(thief)\n",
      "    IN  /\\ thief # victim\n"),),
    ((BATCH, "SparesStandInForBlockers"),),
)
# A batch leaves the victim's other tasks in reverse order (with StealCap 2 a batch keeps one
# task: reversing it, test_tlc.py's mutant, changes nothing).
MUTANTS["batch_reverses_what_the_victim_keeps"] = Mutant(
    (("![victim] = SubSeq(@, k + 1, Len(@)),",
      "![victim] = [i \\in 1..(Len(deque[victim]) - k) |->\n"
      "                       deque[victim][Len(deque[victim]) + 1 - i]],"),),
    ((BATCH, "StolenInOrder"),),
)
_IN_BATCH = {  # mutant -> the check it breaks in MCPoolBlockingBatch.cfg
    "shutdown_misspells_draining": "TypeOK",
    "batch_leaves_kept_tasks_in_victim": "ExecutedAtMostOnce",
    "batch_double_counts": "OutstandingIsQueuedPlusRunning",
    "shutdown_terminates_on_empty_deques": "TerminatedOnlyWhenIdle",
    "cancel_forgets_removed_tasks": "NoTaskLost",
    "cancel_marks_running_tasks": "CancelledNeverRan",
    "last_finish_does_not_terminate": "HaltsOnlyWhenTerminated",
    "unblock_releases_only_a_starting_spare": "RunnableBounded",
    "child_submitted_after_parent_finished_by_a_running_thread":
        "ChildCountedBeforeParentCompletes",
    "pop_takes_top": "OwnerTakesBottom",
    "batch_takes_owner_end": "ThiefTakesTop",
    "pool_closes_itself_when_idle": "PhasesInOrder",
    "batch_takes_more_than_half": "StealTakesAtMostHalf",
}
for _name, _check in _IN_BATCH.items():
    _known = MUTANTS[_name] if _name in MUTANTS else POOL_MUTANTS[_name]
    _caught = MUTANTS[_name].caught if _name in MUTANTS else ()
    MUTANTS[_name] = Mutant(_known.substitutions, (*_caught, (BATCH, _check)))

SPEC = SpecChecks(
    module="WorkStealing.tla", mc_module=MODULE, system=_BlockingSystem(),
    invariants=frozenset(INVARIANTS) | frozenset(BLOCKING_INVARIANTS),
    action_properties=frozenset(ACTION_PROPERTIES), temporal=frozenset(TEMPORAL),
    violated=_violated, violated_by_step=_violated_by_step, mutants=MUTANTS,
)


def test_every_check_of_every_blocking_config_has_a_mutant_it_reports() -> None:
    assert_every_check_has_a_mutant(SPEC, [B, BATCH, LIVE, RETURNS])


@pytest.mark.parametrize(("name", "config", "check"), cases(SPEC))
def test_blocking_mutant_is_reported_by_name(name: str, config: str, check: str,
                                             tmp_path: Path) -> None:
    check_mutant(SPEC, name, config, check, tmp_path)
