"""The work-stealing corpus: current with the spec, replayed edge for edge against
WorkStealingPool, and able to catch a pool that moves differently.

The corpus (traces/pool-cover.jsonl.gz) covers every edge of TLC's state graph of
spec/MCWorkStealingTraces.cfg; its instance with managed blocking
(traces/pool-blocking-cover.jsonl.gz) every edge of spec/MCWorkStealingCorpusBlocking.cfg's,
one spare with MaxSpares 1; its instance with batch steals (traces/pool-batch-cover.jsonl.gz)
every edge of spec/MCWorkStealingCorpusBatch.cfg's, StealCap 2. Replay takes each step
through the production pool with its workers' and its spare's moves driven one at a time
(refsched.verify.pool.driver); each
must-fail test breaks one thing in a WorkStealingPool and asserts the replay names the first
step where it shows.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from refsched import WorkStealingPool
from refsched.cli import main
from refsched.pool.pool import PoolStats, _Task
from refsched.verify import corpus, system
from refsched.verify.itf import Trace, read_traces
from refsched.verify.mutants import Budget, run_mutant
from refsched.verify.pool.driver import SteppedPool, stepped_class
from refsched.verify.pool.mutants import CATALOGUE
from refsched.verify.pool.system import BATCH_CONFIG, BLOCKING_CONFIG
from refsched.verify.replay import format_divergence, replay
from tests.pool.test_lockstep import SpareNeverRetires, UnblockKeepsTheSpare
from tests.replay_support import (
    CorpusTests,
    assert_wrong_state_after,
    corpus_traces,
    first_divergence,
)

POOL = system.get("pool")


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    return corpus_traces(POOL)


class TestPoolCorpus(CorpusTests):
    system, config = POOL, "MCWorkStealingTraces.cfg"
    # The corpus instance has StealCap = 1 and no spare: the instances below take batch steals
    # and managed blocking's actions.
    gated_off = ("StealBatch", "Block", "StartSpare", "Unblock", "Retire")


@pytest.fixture(scope="module")
def blocking_traces() -> list[Trace]:
    return corpus_traces(POOL, BLOCKING_CONFIG)


class TestPoolBlockingCorpus(CorpusTests):
    system, config = POOL, BLOCKING_CONFIG
    gated_off = ("StealBatch",)

    @pytest.fixture
    def traces(self, blocking_traces: list[Trace]) -> list[Trace]:
        return blocking_traces


@pytest.fixture(scope="module")
def batch_traces() -> list[Trace]:
    return corpus_traces(POOL, BATCH_CONFIG)


class TestPoolBatchCorpus(CorpusTests):
    system, config = POOL, BATCH_CONFIG
    # StealCap 2 and no spare; no child either (the other instances spawn them)
    gated_off = ("SubmitChild", "Block", "StartSpare", "Unblock", "Retire")

    @pytest.fixture
    def traces(self, batch_traces: list[Trace]) -> list[Trace]:
        return batch_traces


# -- Broken pools -------------------------------------------------------------------------------

class OwnerTakesTop(WorkStealingPool):
    """Pop takes the oldest task of the worker's own deque (FIFO) instead of the newest."""

    def _take_locked(self, w: int, victim: int | None = None) -> _Task | None:
        own = self._deques[w]
        if own:
            return own.popleft()
        return self._steal_locked(w, victim)


class ThiefTakesBottom(WorkStealingPool):
    """A steal takes the newest task of the victim's deque, the end its owner works at."""

    def _steal_locked(self, w: int, victim: int | None = None) -> _Task | None:
        if victim is None or victim == w or not self._deques[victim]:
            return super()._steal_locked(w, victim)
        self._stolen += 1
        return self._deques[victim].pop()


class ChildUncounted(WorkStealingPool):
    """A child is pushed without being counted: outstanding can reach 0 while it is queued."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future = super().submit(fn, *args, **kwargs)
        if self._local.worker is not None:
            with self._lock:
                self._outstanding -= 1
        return future


class CancelKeepsCount(WorkStealingPool):
    """shutdown(cancel_futures=True) empties the deques but leaves the tasks counted."""

    def _cancel_queued_locked(self) -> list[_Task]:
        before = self._outstanding
        dropped = super()._cancel_queued_locked()
        self._outstanding = before
        return dropped


class NeverTerminates(WorkStealingPool):
    """Stays draining once shut down, even with nothing outstanding."""

    def _terminate_locked(self) -> None:
        pass


@pytest.mark.parametrize(("factory", "action", "field"), [
    (OwnerTakesTop, "Pop", "deque"),
    (ThiefTakesBottom, "Steal", "deque"),
    (ChildUncounted, "SubmitChild", "outstanding"),
    (CancelKeepsCount, "CancelQueued", "outstanding"),
    (NeverTerminates, "Shutdown", "phase"),
], ids=["owner-takes-top", "thief-takes-bottom", "child-uncounted", "cancel-keeps-count",
        "never-terminates"])
def test_a_broken_pool_is_named_at_its_first_wrong_step(
        traces: list[Trace], factory: Callable[..., Any], action: str, field: str) -> None:
    assert_wrong_state_after(first_divergence(traces, factory, POOL).divergences[0], action,
                             field, column=0)


# -- Broken pools with batch steals --------------------------------------------------------------

class BatchTakesOwnerEnd(WorkStealingPool):
    """A batch steal takes the victim's newest tasks, from the end its owner works at."""

    def _steal_batch_locked(self, w: int, victim: int) -> _Task:
        source = self._deques[victim]
        source.rotate(self._steal_cap)  # the newest cap tasks now on top, in their order
        return super()._steal_batch_locked(w, victim)


class BatchFromShortDeques(WorkStealingPool):
    """Batches of two from a deque of two or three tasks: no fallback to single steals."""

    def _steal_locked(self, w: int, victim: int | None = None) -> _Task | None:
        source = self._deques[victim] if victim is not None else ()
        if victim != w and self._steal_cap > 1 and len(source) in (2, 3):
            assert isinstance(source, deque)
            task = source.popleft()
            self._deques[w].append(source.popleft())
            self._stolen += 1
            self._stolen_tasks += 2
            return task
        return super()._steal_locked(w, victim)


class BatchKeptTasksCounted(WorkStealingPool):
    """The tasks a batch thief keeps are counted in outstanding again, as if submitted."""

    def _steal_batch_locked(self, w: int, victim: int) -> _Task:
        task = super()._steal_batch_locked(w, victim)
        self._outstanding += len(self._deques[w])
        return task


@pytest.mark.parametrize(("factory", "field"), [
    (BatchTakesOwnerEnd, "deque"), (BatchKeptTasksCounted, "outstanding"),
], ids=["batch-takes-owner-end", "batch-kept-tasks-counted"])
def test_a_broken_batch_steal_is_named_at_its_first_batch(
        batch_traces: list[Trace], factory: Callable[..., Any], field: str) -> None:
    d = first_divergence(batch_traces, factory, POOL).divergences[0]
    assert_wrong_state_after(d, "StealBatch", field, column=0)


def test_a_batch_from_a_short_deque_is_named_at_the_single_steal_it_replaced(
        batch_traces: list[Trace]) -> None:
    d = first_divergence(batch_traces, BatchFromShortDeques, POOL).divergences[0]
    assert_wrong_state_after(d, "Steal", "deque", column=0)


# -- Broken pools with managed blocking ----------------------------------------------------------

def test_a_pool_whose_spare_stands_in_after_its_blocker_returned_is_named_at_unblock(
        blocking_traces: list[Trace]) -> None:
    d = first_divergence(blocking_traces, UnblockKeepsTheSpare, POOL).divergences[0]
    assert_wrong_state_after(d, "Unblock", "blocker", column=0)
    # the trace's spare released, the pool's still standing in for the thread that returned
    assert d.diff.splitlines()[1].split()[1:] == ["{}", "{s1:", f"{{{d.params['x']}}}}}"], d.diff


def test_a_pool_whose_spare_never_retires_is_named_by_the_move(
        blocking_traces: list[Trace]) -> None:
    d = first_divergence(blocking_traces, SpareNeverRetires, POOL).divergences[0]
    assert (d.side, d.action) == ("implementation", "Retire"), format_divergence(d)
    assert "spare s1 retires spare 's1' may not retire, expected the move taken" in d.reason


def test_the_replay_layer_kills_the_seeded_spare_that_unblock_keeps() -> None:
    (mutant,) = (m for m in CATALOGUE if m.name == "pool_unblock_keeps_the_spare")
    (layer,) = run_mutant(mutant, ["replay"], budget=Budget()).layers
    assert layer.status == "killed", layer.evidence
    # only the instance with managed blocking takes Unblock
    assert "Unblock" in layer.evidence and "blocker" in layer.evidence, layer.evidence


def test_a_trace_of_more_spares_than_one_is_refused(blocking_traces: list[Trace]) -> None:
    trace = blocking_traces[0]
    two = dataclasses.replace(trace, constants={**trace.constants, "Spares": ["s1", "s2"]})
    d = replay([two], system=POOL).divergences[0]
    assert (d.side, d.step) == ("model", 0), format_divergence(d)
    assert "a replay drives one spare" in d.reason


class TakesNothing(WorkStealingPool):
    """A worker with a task in its own deque finds nothing to take."""

    def _take_locked(self, w: int, victim: int | None = None) -> _Task | None:
        return None


def test_a_pool_that_takes_nothing_is_named_by_the_move() -> None:
    d = first_divergence(read_traces(corpus.traces_dir() / POOL.bundle), TakesNothing,
                         POOL).divergences[0]
    assert (d.side, d.action) == ("implementation", "Pop"), format_divergence(d)
    assert "worker w1 takes a task worker 'w1' took no task, expected a task" in d.reason


class ExecutedMiscounted(WorkStealingPool):
    """Counts a task as executed twice: its state is right, its stats() are not."""

    def _finish_locked(self, task: _Task, ran: bool) -> None:
        super()._finish_locked(task, ran)
        if ran:
            self._executed += 1


def test_the_driven_pool_checks_its_counters_after_every_step(traces: list[Trace]) -> None:
    d = first_divergence(traces, ExecutedMiscounted, POOL).divergences[0]
    assert (d.side, d.action) == ("implementation", "Finish"), format_divergence(d)
    assert "check_invariants() raised AssertionError: stats().executed is 2" in d.reason


class QueueLengthsReversed(WorkStealingPool):
    """Lists the lengths of the deques last worker first."""

    def stats(self) -> PoolStats:
        counted = super().stats()
        return dataclasses.replace(counted, queue_lengths=counted.queue_lengths[::-1])


def test_a_pool_that_miscounts_is_named_at_its_first_wrong_step(traces: list[Trace]) -> None:
    d = first_divergence(traces, QueueLengthsReversed, POOL).divergences[0]
    assert (d.side, d.action) == ("implementation", "SubmitExternal"), format_divergence(d)
    assert d.reason == "stats() is not what the trace's steps count: queue_lengths", d.reason
    # the table the pool's state differences are shown in: field, trace, implementation
    assert d.diff.splitlines() == ["  field                  trace   implementation",
                                   "  stats().queue_lengths  (1, 0)  (0, 1)"], d.diff


def test_a_stepped_pool_starts_no_thread_and_needs_a_pool_class() -> None:
    pool = SteppedPool(WorkStealingPool, ["w1", "w2"])
    assert pool.pool._threads == ()
    assert stepped_class(WorkStealingPool) is type(pool.pool)
    with pytest.raises(TypeError, match="WorkStealingPool or a subclass"):
        stepped_class(dict)  # type: ignore[arg-type]


def test_replay_cli_replays_the_pool_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    bundle = corpus.traces_dir() / POOL.bundle
    assert main(["replay", "-q", str(bundle)]) == 0  # the spec is read off the traces
    assert "no divergence" in capsys.readouterr().err
    assert main(["replay", "-q", "--system", "pool"]) == 0
    out = capsys.readouterr().out
    assert "edges replayed (MCWorkStealingTraces.cfg): 9,216 of 9,216 (100.0%)" in out
    assert "edges replayed (MCWorkStealingCorpusBlocking.cfg): 15,174 of 15,174 (100.0%)" in out
    assert main(["replay", "-q", "--system", "pool",
                 "--impl", "tests.pool.test_replay:OwnerTakesTop"]) == 1
