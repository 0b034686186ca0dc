"""WorkStealingPool: a fixed set of workers, each with its own deque, that steal from each other.

The pool implements ``spec/WorkStealing.tla``. ``submit()`` from outside the pool is
``SubmitExternal(t, w)``; from inside one of the pool's running tasks it is ``SubmitChild(t, w)``,
which pushes onto the bottom of that worker's own deque. A worker takes ``Pop(w)`` (its own deque,
bottom, LIFO) or, with its own deque empty, ``Steal(thief, victim)`` (another deque, top, FIFO),
runs the task, and records ``Finish(w)`` (``outstanding - 1``). ``shutdown()`` is ``Shutdown``:
the pool goes accepting → draining → terminated, the last step once ``outstanding`` is 0.

Design:
- One pool lock guards every deque and every counter. Per-deque locks (an owner end and a thief
  end) were measured against it: with the GIL nothing runs in parallel, and the extra lock round
  trips (submit: the state check, then the push; a worker: the pop, then the Finish) made both
  the flat and the fork-join benchmark slower. So the deques share the pool lock, and a worker
  records the Finish of one task and takes the next in a single critical section. Workers and
  submitters take the lock with ``sync.acquire`` (try, yield the GIL once, then block), which
  keeps a convoy of threads queued on it from forming (see its docstring). A task leaves
  its deque under that lock before it runs, so it is claimed exactly once; a task whose future
  was cancelled while queued is still taken (Pop or Steal) and finished (Finish), without
  running. ``shutdown(cancel_futures=True)`` is CancelQueued: it empties the deques at once.
- ``outstanding`` counts tasks queued or running. A submission increments it in the critical
  section that pushes the task; a child is submitted while its parent runs, so it is counted
  before its parent's Finish, and ``outstanding`` cannot touch 0 while work remains.
- A worker with nothing to take searches: a bounded backoff (``_BACKOFF_ROUNDS`` GIL yields,
  each followed by a re-scan), then it parks on its own condition over the pool lock. The last
  scan and the park happen in one critical section, and every push holds the lock too. A push
  wakes a parked worker only when no worker is searching (the searcher's next scan sees the
  task); a searcher that finds a task wakes the next parked worker if work is left. No wake-up
  is lost, nothing polls, and a producer that outpaces the workers wakes them one at a time
  instead of once per task.
- ``future.result()`` / ``exception()`` called from inside one of the pool's tasks helps while it
  waits: it pops its own deque, else steals, and runs what it gets on the same thread; with
  nothing runnable it parks, registered on the awaited future, whose Finish (or ``cancel()``)
  wakes it. Fork-join code therefore cannot starve the pool of threads. Helping nests on the
  thread's stack, a few frames per task. Within ``_FRAME_MARGIN`` frames of the recursion limit
  the waiting worker goes on helping on a new stack: it starts a thread that is worker ``w``
  until the awaited future is done, and blocks until that thread returns (a stack segment; one
  thread at a time acts as each worker). A waiting worker never stops taking tasks: one that
  waited without helping would leave its awaited child in its own deque, with nobody to run it
  when it is the only worker or every worker is as deep. The stack is measured only from
  ``_CHECK_DEPTH`` tasks on a thread on (the walk is too slow for every wait), so no
  RecursionError strikes the pool's own bookkeeping provided the first ones fit on it. The
  recursion limit still bounds the nesting, counted in tasks instead of frames: a wait that
  would nest more than ``sys.getrecursionlimit()`` tasks on one worker (over all its segments)
  raises ``RecursionError``, as a plain call that deep would, so a runaway recursion ends
  instead of starting threads without end. The waiting task unwinds; the child it submitted
  stays queued and runs later, nearer the stack's bottom.
- A task is its own future (:class:`_Task`), and it builds the condition ``Future`` waits on
  only when some thread first needs it; a future nobody waits on is claimed and settled under a
  bare per-task lock. With 100,000 tasks in flight, the conditions (and the garbage collections
  they cause) were most of the cost of a submission.
- User code (task functions, done-callbacks, ``Future.cancel``'s callbacks) never runs under the
  pool lock.
- Managed blocking (``blocking()``, ``managed_block()``; spec section "Managed blocking", code
  in :mod:`refsched.pool.blocking`): a task that blocks inside ``blocking()`` is stood in for
  by a spare thread, which serves as an extra worker with its own index and deque, so the pool
  keeps ``workers`` threads taking tasks. At most ``max_spares`` spares are active at once;
  past that a blocker blocks uncompensated. A spare whose blocker returned retires once it is
  idle with its own deque empty, and its thread waits for the next blocker until the pool
  terminates. A new blocker adopts a released spare before a new one is launched.
- An optional :class:`PoolRecorder` is given each spec step where it takes effect, under the pool
  lock; without one, each step costs a single ``None`` check.
- Batch steals (``steal="half"``, Spec: StealBatch): a thief takes ``steal_cap`` tasks (half or
  less) from the top of a victim's deque that holds at least twice as many, in the one
  critical section a single steal takes. It runs the oldest and moves the others, in their
  order, to its own (empty) deque: it pops the newest of them next, and the next thief takes
  the oldest. A shorter deque gives single steals (Spec: Steal): a fork-join tree's deque holds
  one pending subtree per level, the oldest the largest, and a single steal already takes the
  most work there is; a batch would take subtrees the owner is about to wait on, and the last
  tasks it would pop while warm in its cache. A worker helping inside ``result()`` steals
  single tasks: a batch would pile the kept tasks on top of its wait, running them before it
  returns to the awaited task, which lengthened nested fork-join by a fifth (bench/pool.py).
  Helping is no spec step either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING, RUNNING
from dataclasses import dataclass, field
from typing import Any, Final, Literal, ParamSpec, Protocol, TypeVar, cast

from refsched import sync
from refsched.errors import InvalidArgumentError, SchedulerClosedError
from refsched.pool.blocking import DEFAULT_MAX_SPARES, Spares, SpareThread, new_spare_thread

__all__ = ["PoolRecorder", "PoolStats", "PoolView", "WorkStealingPool"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

PoolState = Literal["accepting", "draining", "terminated"]
_ACCEPTING: Final = "accepting"  # root and child submissions are taken
_DRAINING: Final = "draining"  # only children of running tasks are taken; outstanding > 0
_TERMINATED: Final = "terminated"  # outstanding == 0 after Shutdown; workers have left

_DONE: Final = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED})

# A waiting worker runs other tasks on its own stack, a few Python frames each. From this many
# nested tasks on a thread, result() first counts the frames on the stack, and helps on this
# stack only while more than _FRAME_MARGIN are left below the recursion limit (otherwise on a
# new thread's): a RecursionError must never strike inside the pool's bookkeeping.
_CHECK_DEPTH: Final = 32
_FRAME_MARGIN: Final = 100
# Full scans of the deques (each after yielding the GIL) before a worker with nothing to take
# parks: a producer gets a chance to push without the cost of a park and a wake-up.
_BACKOFF_ROUNDS: Final = 2

_LOGGER: Final = logging.getLogger("concurrent.futures")


# The metadata of a field that stays off the conformance protocol's wire.
_LOCAL: Final = types.MappingProxyType({"wire": False})


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A consistent snapshot of a :class:`WorkStealingPool`'s counters."""

    executed: int  # tasks whose function was called and has returned or raised
    stolen: int  # steals so far, Steal and StealBatch (a cancelled task stolen counts too)
    # per worker, then per spare slot used so far (managed blocking): tasks in its deque,
    # cancelled ones included
    queue_lengths: tuple[int, ...]
    parked: int  # workers parked now: nothing to take (some of them waiting on a future)
    outstanding: int  # tasks queued or running: sum(queue_lengths) + running
    state: PoolState  # "accepting", "draining" or "terminated"
    # Managed blocking's figures. They stay off the wire: a remote pool's stats are what they
    # were, and its blocking_snapshot (the protocol's managed_blocking) says what they count.
    # spares active now (<= max_spares): launched, serving, or about to retire
    spares: int = field(default=0, metadata=_LOCAL)
    blocked: int = field(default=0, metadata=_LOCAL)  # tasks inside blocking() now
    # blocking() calls a spare stood in for
    compensated: int = field(default=0, metadata=_LOCAL)
    # blocking() calls at the bound, that no spare stood in for
    uncompensated: int = field(default=0, metadata=_LOCAL)
    # tasks those steals took: 1 per single steal, k per batch of k; == stolen without batches.
    # An implementation of the protocol may leave it out of its answer: it is then taken to
    # be stolen (single steals only), as it was before batch steals.
    stolen_tasks: int = field(default=0, metadata={"absent_as": "stolen"})


@dataclass(frozen=True, slots=True)
class PoolView:
    """The spec variables a :class:`WorkStealingPool` holds itself, as a recorder is given them.

    The others (``running``, ``submitted``, ``finished``, ``cancelled``, ``runs``, ``parent``)
    are no state of the pool: they follow from the steps a recorder is given. Managed
    blocking's ``blocked``, ``spare`` and ``blocker`` are the pool's: ``blocked`` and ``spares``.
    """

    phase: PoolState  # "accepting", "draining" or "terminated"
    # per worker index, then per spare slot used so far; top (thieves' end) first
    deques: tuple[tuple[Future[Any], ...], ...]
    outstanding: int  # tasks queued or running
    # Managed blocking: the worker (or spare) indexes whose task blocks inside blocking()
    blocked: frozenset[int] = frozenset()
    # per spare slot used so far (index ``len(deques) - len(spares) + i``): its state ("off",
    # "starting", "on") and the index of the blocked thread it stands in for (None: none)
    spares: tuple[tuple[str, int | None], ...] = ()


class PoolRecorder(Protocol):
    """Receives every spec step a WorkStealingPool takes, at the step's linearization point.

    ``record`` is called with the pool lock held, once per step and in the order the steps take
    effect: the action's name in spec/WorkStealing.tla, its parameters named as there (``w``,
    ``thief`` and ``victim`` are worker indexes, ``t`` is the task's future) and the pool's
    state right after the step. ``Pop``, ``Steal``, ``StealBatch`` and ``Finish`` are also
    given ``t``, the task taken (the one a batch's thief runs) or finished (the spec reads it
    from ``running``). Managed blocking gives ``Block`` (``x``, the blocked worker or spare
    index, and ``s``, the spare standing in for it or None), ``StartSpare`` (``s``),
    ``Unblock`` (``x``) and ``Retire`` (``s``); a spare's index is also a ``thief`` or a
    ``victim`` when it steals or is stolen from. Calls that change nothing are no step: a
    refused ``submit()``, a second ``shutdown()``, ``cancel_futures`` with nothing queued. A
    worker that helps while it waits (``result()`` inside a task) runs a second task before its
    first one finishes, which the spec has no step for. ``record`` must return quickly, must
    not raise and must not call the pool: the lock is held.
    """

    def record(self, action: str, params: dict[str, Any], state: PoolView) -> None: ...


class _Task(Future[Any]):
    """One submitted task: its future, and the call to make.

    A ``Future`` whose condition (and its ``_waiters`` / ``_done_callbacks`` lists) is made only
    when a thread first needs one: to wait, to add a callback, to cancel. Until then no thread
    can be waiting on the future nor have a callback on it, so the pool claims and settles it
    under ``_guard`` alone, without building a condition for a future nobody watches. Making the
    condition and those bare transitions both hold ``_guard``, so neither misses the other; once
    the condition exists every transition goes through ``Future``'s own methods.
    """

    __slots__ = ("_args", "_callbacks", "_cond", "_exception", "_fn", "_guard", "_joiners",
                 "_kwargs", "_pool", "_result", "_state", "_waiter_list")

    def __init__(self, pool: WorkStealingPool, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        # Future.__init__ is not called: it would build the condition this class makes lazily.
        self._state = PENDING  # a concurrent.futures state; only ever moves forward
        self._result: Any = None
        self._exception: BaseException | None = None
        self._guard = sync.Lock()  # guards _cond, and _state while _cond is None
        self._cond: threading.Condition | None = None  # Future's condition, once needed
        self._waiter_list: list[Any] | None = None  # Future's _waiters, once needed
        self._callbacks: list[Callable[[Future[Any]], object]] | None = None  # _done_callbacks
        self._pool = pool  # the pool it was submitted to
        # the call to make; all three are None once the task has been taken to run
        self._fn: Callable[..., Any] | None = fn
        self._args: tuple[Any, ...] | None = args
        self._kwargs: dict[str, Any] | None = kwargs
        # guarded by the pool lock: workers parked in result()/exception() on this future
        self._joiners: list[int] | None = None

    # Future's own fields, made on first use. Future reads _waiters and _done_callbacks only
    # while holding _condition, so that holds for making them too. (The setters are for
    # Future.__init__'s sake; it is never called.)

    @property
    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is not None:
            return cond
        with self._guard:
            if self._cond is None:
                if self._state is FINISHED:
                    # Final: nobody will wait on it or notify it (Future returns, raises or
                    # calls a callback at once), so a bare RLock is all that wait() and
                    # as_completed() need of it, and far cheaper to make.
                    self._cond = cast(threading.Condition, sync.RLock())
                else:
                    self._cond = sync.Condition(sync.RLock())
            return self._cond

    @_condition.setter
    def _condition(self, cond: threading.Condition) -> None:
        self._cond = cond

    @property
    def _waiters(self) -> list[Any]:
        if self._waiter_list is None:
            self._waiter_list = []
        return self._waiter_list

    @_waiters.setter
    def _waiters(self, waiters: list[Any]) -> None:
        self._waiter_list = waiters

    @property
    def _done_callbacks(self) -> list[Callable[[Future[Any]], object]]:
        if self._callbacks is None:
            self._callbacks = []
        return self._callbacks

    @_done_callbacks.setter
    def _done_callbacks(self, callbacks: list[Callable[[Future[Any]], object]]) -> None:
        self._callbacks = callbacks

    def _claim(self) -> bool:
        """Move to running before the function is called; False if it was cancelled instead."""
        if self._cond is None:
            with self._guard:
                if self._cond is None:
                    # No condition: nobody cancelled (cancel() makes one), nobody waits.
                    if self._state is PENDING:
                        self._state = RUNNING
                        return True
                    twice = True
                else:
                    twice = False
            if twice:  # raised outside _guard: repr() reads the condition, which takes it
                raise RuntimeError(f"{self!r}: claimed twice")  # as Future would
        return self.set_running_or_notify_cancel()

    def _settle(self, failed: bool, value: Any) -> None:
        """Resolve the future with the function's outcome (running → finished)."""
        if self._cond is None:
            with self._guard:
                if self._cond is None:
                    # No condition: no waiter and no done-callback to tell.
                    if failed:
                        self._exception = value
                    else:
                        self._result = value
                    self._state = FINISHED
                    return
        if failed:
            self.set_exception(value)
        else:
            self.set_result(value)

    def _cancel_queued(self) -> bool:
        """Cancel the task, taken out of its deque before it started: its future is settled as
        cancelled now, and its waiters told. True if it was pending (its done-callbacks are
        then still to be called), False if it was already done (cancelled, or settled by hand).
        """
        if self._cond is None:
            with self._guard:
                if self._cond is None:
                    # No condition: nobody waits on it and no callback is registered.
                    if self._state is not PENDING:
                        return False
                    self._state = CANCELLED_AND_NOTIFIED
                    return True
        with self._cond:
            was_pending = self._state is PENDING
            if self._state in (PENDING, CANCELLED):
                # as cancel() then set_running_or_notify_cancel() would, with the callbacks left
                # to the caller
                self._state = CANCELLED_AND_NOTIFIED
                for waiter in self._waiters:
                    waiter.add_cancelled(self)
                self._cond.notify_all()
            return was_pending

    def done(self) -> bool:
        """Whether the task has finished or was cancelled."""
        return self._state in _DONE

    def result(self, timeout: float | None = None) -> Any:
        """The function's return value; waits up to ``timeout`` seconds (None: no limit).

        Called from inside one of the pool's tasks, it runs other tasks while it waits (the
        timeout is then checked between them). Raises the function's exception, ``TimeoutError``
        or ``CancelledError``; inside a task already ``sys.getrecursionlimit()`` tasks deep on
        its worker, ``RecursionError`` (unless the future is done).
        """
        if self._state is FINISHED and self._exception is None:  # final: no condition needed
            return self._result
        if self._state not in _DONE and self._pool._local.worker is not None:
            self._pool._help_until(self, timeout)
            timeout = 0
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The function's exception, or None; waits (and helps) as :meth:`result` does."""
        if self._state is FINISHED:
            return self._exception
        if self._state not in _DONE and self._pool._local.worker is not None:
            self._pool._help_until(self, timeout)
            timeout = 0
        return super().exception(timeout)

    def cancel(self) -> bool:
        """Cancel the task if it has not started: True if it is cancelled, False if not.

        A cancelled task stays in its deque until a worker takes it, and is then dropped (it
        still counts in ``outstanding`` until then).
        """
        if not super().cancel():
            return False
        self._pool._wake_joiners(self)
        return True


class _WorkerLocal(threading.local):
    """Per-thread: which of the pool's workers this thread is."""

    worker: int | None = None  # this thread's worker index; None on every other thread
    depth = 0  # tasks running on this thread's stack: 1 + nested tasks run while waiting
    # tasks running on the worker's earlier stack segments, each waiting on the next: 0 on the
    # worker's own thread; below + depth <= sys.getrecursionlimit() (as read when they started)
    below = 0
    spare: SpareThread | None = None  # on a spare thread: its record; None on every other


class WorkStealingPool(Executor):
    """Run functions on ``workers`` threads, each with its own deque, stealing when idle.

    ``WorkStealingPool(workers=N)``; a ``concurrent.futures.Executor`` and a context manager
    (leaving the block shuts it down and waits). ``submit(fn, *args, **kwargs)`` returns a
    future. A task's exception goes to its future; the worker carries on.

    ``future.result()`` and ``future.exception()`` called from inside a task of this pool run
    other tasks of the pool while they wait, so recursive fork-join code cannot deadlock it.
    Tasks nest on a worker up to ``sys.getrecursionlimit()`` deep, as plain calls do; a wait
    that would nest deeper raises ``RecursionError`` in the waiting task.
    ``concurrent.futures.wait()`` and ``as_completed()`` do not help: called from inside a task,
    they block its worker as they would in any executor.

    The worker threads are daemons: call ``shutdown()`` (or use ``with``) to wait for the work.
    ``recorder=`` is given every spec step the pool takes, in the order the steps take effect
    (see :class:`PoolRecorder`); ``InvalidArgumentError`` if it has no ``record`` method.

    A task that blocks (I/O, a lock, ``time.sleep``) inside ``with pool.blocking():`` or
    ``pool.managed_block(fn)`` has a spare thread stand in for it, so ``workers`` threads keep
    taking tasks. ``max_spares`` (default 256, ``0`` turns managed blocking off) bounds the
    spares active at once; past it a blocker blocks without one.

    ``steal=`` is how an idle worker (or spare) steals: ``"single"`` (the default) takes the
    oldest task of another deque; ``"half"`` takes ``steal_cap`` (default 32) tasks from a
    deque of at least twice as many, runs the oldest and keeps the others in its own deque.
    A shorter deque still gives one, and so does a steal by a worker helping inside
    ``result()``.
    ``InvalidArgumentError`` for another ``steal``, or a ``steal_cap`` that is not an int >= 1.
    """

    def __init__(self, workers: int | None = None, *,
                 recorder: PoolRecorder | None = None,
                 max_spares: int = DEFAULT_MAX_SPARES, steal: str = "single",
                 steal_cap: int = 32) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgumentError(
                f"WorkStealingPool(workers={workers!r}): workers must be an int >= 1")
        if isinstance(max_spares, bool) or not isinstance(max_spares, int) or max_spares < 0:
            raise InvalidArgumentError(
                f"WorkStealingPool(max_spares={max_spares!r}): max_spares must be an int >= 0")
        if recorder is not None and not callable(getattr(recorder, "record", None)):
            raise InvalidArgumentError(
                f"WorkStealingPool(recorder={recorder!r}): recorder has no record() method")
        cap = _steal_cap_of(steal, steal_cap)
        self._workers: Final = workers
        self._recorder: Final = recorder
        self._local: Final = _WorkerLocal()
        # The pool lock guards every field below that is not Final.
        self._lock: Final = sync.Lock()
        # One deque per worker, then one per spare slot used so far: its owner pushes and pops
        # at the right end (bottom), thieves take from the left end (top).
        self._deques: Final[list[deque[_Task]]] = [deque() for _ in range(workers)]
        # Worker w parks on _wake[w]; only worker w ever waits there. (As long as _deques.)
        self._wake: Final = [sync.Condition(self._lock) for _ in range(workers)]
        self._terminated: Final = sync.Condition(self._lock)  # await_termination() waits here
        self._state: PoolState = _ACCEPTING
        self._outstanding = 0  # == sum(map(len, _deques)) + tasks taken and not yet Finished
        self._executed = 0  # == tasks whose function was called and has returned or raised
        self._stolen = 0  # == Steal and StealBatch actions taken
        # Parked workers, as an ordered set (the most recently parked last); a worker is in it
        # only while it waits on its _wake condition, and whoever wakes it removes it.
        self._parked: dict[int, None] = {}
        # _searching_flags[w]: worker w is awake with nothing in hand and will scan the deques
        # again before it parks (set by whoever wakes it for a push, cleared when it finds a
        # task or parks). A push wakes a parked worker only when nobody searches: the searcher
        # will see the task, and once it finds one it wakes the next (_pass_wake_locked).
        self._searching_flags = [False] * workers
        self._searching = 0  # == _searching_flags.count(True)
        self._next = 0  # the deque the next external submission goes to (round-robin), < workers
        self._rng = random.Random()  # picks where a steal starts
        self._spares: Final = Spares(workers, max_spares)  # the managed-blocking bookkeeping
        self._steal_cap: Final = cap  # the most tasks one steal takes (Spec: StealCap); 1: single
        self._stolen_tasks = 0  # == tasks taken by steals: 1 per Steal, k per StealBatch of k
        self._threads: Final = self._start_workers()

    def _start_workers(self) -> tuple[threading.Thread, ...]:
        """Start one thread per worker. (A pool driven step by step, as replay drives it, takes
        the workers' moves itself and starts none.)"""
        threads = tuple(
            # daemon: a pool never shut down must not keep the interpreter from exiting
            sync.Thread(target=self._work_loop, args=(w,), daemon=True,
                        name=f"refsched-pool-worker-{w}")
            for w in range(self._workers))
        for thread in threads:
            thread.start()
        return threads

    # -- public API ------------------------------------------------------------------------

    @property
    def workers(self) -> int:
        return self._workers

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        """Queue ``fn(*args, **kwargs)`` and return its future.

        Spec: SubmitExternal(t, w) from outside the pool: accepting only; the task goes to the
        deque of a parked worker, which is woken, when no worker is searching, else round-robin.
        Spec: SubmitChild(t, w) from inside a running task of worker w: accepting or draining;
        the task goes to the bottom of w's own deque, and a parked worker is woken to steal it
        when no worker is searching. ``outstanding + 1``.
        Errors, raised before anything changes: ``InvalidArgumentError`` (a ``TypeError``) when
        ``fn`` is not callable, ``SchedulerClosedError`` (a ``RuntimeError``) for a submission
        from outside once ``shutdown()`` was called.
        """
        if not callable(fn):
            raise InvalidArgumentError(
                f"submit({fn!r}): fn must be callable, not {type(fn).__name__}")
        task = _Task(self, fn, args, kwargs)
        w = self._local.worker
        lock = self._lock
        sync.acquire(lock)  # not ``with``: this runs once per task
        try:
            if w is None:
                if self._state is not _ACCEPTING:
                    raise SchedulerClosedError(
                        f"submit({fn!r}): the pool is {self._state}; it takes no new tasks "
                        "from outside")
                self._outstanding += 1
                if self._parked and not self._searching:
                    target = self._wake_one_locked()
                else:
                    target = self._next
                    self._next = target + 1 if target + 1 < self._workers else 0
                self._deques[target].append(task)
                if self._recorder is not None:
                    self._record("SubmitExternal", {"t": task, "w": target})
            else:
                # A child is submitted while its parent runs: the pool is not terminated.
                self._outstanding += 1
                self._deques[w].append(task)
                if self._recorder is not None:
                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()
        finally:
            lock.release()
        return task

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking tasks from outside; with ``wait``, return once every task has finished.

        Spec: Shutdown. accepting → draining, or straight to terminated when nothing is
        outstanding; later calls change nothing. While draining, tasks that are running may
        still submit children, and the pool terminates once ``outstanding`` is 0.
        ``cancel_futures`` (Spec: CancelQueued, after Shutdown) takes every task still queued
        out of its deque and cancels it, in one critical section: it never runs and no longer
        counts. A task that has started runs on, and so does a child submitted later. Called
        from inside one of the pool's tasks, it does not wait: that task would be waiting for
        itself.
        """
        dropped: list[_Task] = []
        with self._lock:
            if self._state is _ACCEPTING:
                self._state = _DRAINING
                if self._outstanding == 0:
                    self._terminate_locked()
                if self._recorder is not None:
                    self._record("Shutdown", {})
            if cancel_futures and self._state is _DRAINING:
                dropped = self._cancel_queued_locked()
        for task in dropped:
            # Future's own (not in its type stubs); user code, so outside the pool lock
            task._invoke_callbacks()  # type: ignore[attr-defined]
        if wait and self._local.worker is None:
            with self._lock:
                self._terminated.wait_for(self._is_terminated)
            for thread in self._threads:
                thread.join()
            for spare in self._spares.threads:  # each leaves once the pool is terminated
                assert spare.thread is not None
                spare.thread.join()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Block until the pool has terminated, or ``timeout`` seconds pass; True if it has.

        Terminated means ``shutdown()`` was called and no task is queued or running.
        ``InvalidArgumentError`` for a timeout that is not a number.
        """
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float))):
            raise InvalidArgumentError(
                f"await_termination(timeout={timeout!r}): timeout must be a number or None")
        with self._lock:
            return self._terminated.wait_for(self._is_terminated, timeout)

    def stats(self) -> PoolStats:
        """Return a consistent snapshot of the pool's counters."""
        with self._lock:
            return PoolStats(
                executed=self._executed,
                stolen=self._stolen,
                queue_lengths=tuple(len(dq) for dq in self._deques),
                parked=len(self._parked),
                outstanding=self._outstanding,
                state=self._state,
                spares=self._spares.active,
                blocked=len(self._spares.blocked),
                compensated=self._spares.compensated,
                uncompensated=self._spares.uncompensated,
                stolen_tasks=self._stolen_tasks,
            )

    def __enter__(self) -> WorkStealingPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        """Shut down and wait for every task to finish."""
        self.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"<WorkStealingPool workers={self._workers} {self._state}>"

    # -- managed blocking ------------------------------------------------------------------

    @property
    def max_spares(self) -> int:
        """The most spares that may stand in for blocked tasks at once (0: managed blocking
        is off)."""
        return self._spares.bound

    @contextlib.contextmanager
    def blocking(self) -> Iterator[None]:
        """Block inside the ``with`` block while a spare thread stands in for this task's.

        Spec: Block(x) on entry, Unblock(x) on exit, x the worker (or spare) running the task.
        On entry a spare takes over: one released by an earlier blocker and still serving, else
        a new one (its thread reused from a retired spare when one waits), unless
        ``max_spares`` spares are active: the task then blocks uncompensated
        (``stats().uncompensated``). On exit the spare is released; it retires once idle with
        its own deque empty. The spare has a deque of its own, so the blocked task's deque
        stays its own: children it submits meanwhile go there, and thieves take them.
        Outside this pool's tasks (another thread, another pool's task), inside another
        ``blocking()`` of the same task, or with ``max_spares=0``, it does nothing: the code
        in the block simply runs. Exceptions from the block propagate; the spare is released
        either way.
        """
        x = self._local.worker
        if x is None:
            yield
            return
        with self._lock:
            entered = x not in self._spares.blocked and self._spares.bound > 0
            if entered:
                self._block_locked(x)
        try:
            yield
        finally:
            if entered:
                with self._lock:
                    self._unblock_locked(x)

    def managed_block(self, fn: Callable[_P, _T], /, *args: _P.args,
                      **kwargs: _P.kwargs) -> _T:
        """Call ``fn(*args, **kwargs)`` inside :meth:`blocking` and return what it returns.

        ``InvalidArgumentError`` (a ``TypeError``), raised before anything changes, when
        ``fn`` is not callable.
        """
        if not callable(fn):
            raise InvalidArgumentError(
                f"managed_block({fn!r}): fn must be callable, not {type(fn).__name__}")
        with self.blocking():
            return fn(*args, **kwargs)

    def _block_locked(self, x: int) -> None:
        """Spec: Block(x). A spare stands in for x if the bound allows; a new slot gets a
        deque and a wake-up condition, and a thread: a waiting one, else a new one."""
        spares = self._spares
        spares.blocked.add(x)
        taken = spares.take_slot(x)
        s = None if taken is None else taken[0]
        if taken is not None and taken[1]:  # a slot off until now: it needs a thread
            assert s is not None
            if s == len(self._deques):  # a slot never used: slots are numbered in order
                self._deques.append(deque())
                self._wake.append(sync.Condition(self._lock))
                self._searching_flags.append(False)
            spare = spares.idle_thread()
            if spare is None:
                spare = new_spare_thread(self._lock)
                spare.slot = s
                # daemon, as the workers are; it waits on the pool lock, held here
                spare.thread = self._spare_thread(spare)
                spares.threads.append(spare)
                spare.thread.start()
            else:
                spare.slot = s
                spare.wake.notify()
        if self._recorder is not None:
            self._record("Block", {"x": x, "s": s})

    def _spare_thread(self, spare: SpareThread) -> threading.Thread:
        """The thread a new spare runs on, not yet started. (A pool driven step by step takes
        the spares' moves itself: its thread does nothing.)"""
        # daemon, as the workers are; it waits on the pool lock, held by whoever starts it
        return sync.Thread(target=self._spare_loop, args=(spare,), daemon=True,
                           name=f"refsched-pool-spare-{len(self._spares.threads)}")

    def _unblock_locked(self, x: int) -> None:
        """Spec: Unblock(x). The spare that stood in for x is released, and woken if parked
        so that it retires."""
        self._spares.blocked.discard(x)
        s = self._spares.release(x)
        if s is not None and s in self._parked:
            del self._parked[s]
            self._wake[s].notify()
        if self._recorder is not None:
            self._record("Unblock", {"x": x})

    def _may_retire_locked(self, w: int) -> bool:
        """Whether ``w``, idle, is a released spare that may retire: its own deque empty, so it
        leaves no task behind (the enabling condition of Spec: Retire(s))."""
        return w >= self._workers and not self._deques[w] and self._spares.may_retire(w)

    def _retire_locked(self, s: int) -> None:
        """Spec: Retire(s), on the spare's thread: released, idle, its deque empty."""
        spare = self._local.spare
        assert spare is not None and spare.slot == s
        self._spares.retire(s, spare)
        if self._recorder is not None:
            self._record("Retire", {"s": s})

    def _spare_loop(self, spare: SpareThread) -> None:
        """A spare thread: serve each slot it is given (Spec: StartSpare(s), then as worker
        ``s`` until Retire(s)), until the pool terminates."""
        local = self._local
        local.spare = spare
        lock = self._lock
        lock.acquire()
        try:
            while True:
                s = spare.slot
                if s is None:
                    if self._state is _TERMINATED:
                        return
                    spare.wake.wait()
                    continue
                self._spares.start(s)
                if self._recorder is not None:
                    self._record("StartSpare", {"s": s})
                local.worker = s
                lock.release()
                try:
                    self._serve(s, None, None)  # returns once it retired
                finally:
                    local.worker = None
                    lock.acquire()
                if spare.slot == s and self._spares.slots[s].state == "on":
                    return  # it left its slot without retiring: the pool terminated
                # else it retired; it may already have been given a slot again, while the
                # lock was let go
        finally:
            lock.release()

    # -- the workers -----------------------------------------------------------------------

    def _work_loop(self, w: int) -> None:
        """Worker ``w``: take, run and finish tasks until the pool terminates."""
        self._local.worker = w
        self._serve(w, None, None)

    def _help_until(self, awaited: _Task, timeout: float | None) -> None:
        """On a worker's thread: run the pool's tasks until ``awaited`` is done or time is up.

        ``RecursionError``, raised before anything changes, when the waiting task is already
        nested ``sys.getrecursionlimit()`` tasks deep on its worker: helping would nest more.
        """
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        local = self._local
        w = local.worker
        assert w is not None
        nested = local.below + local.depth
        limit = sys.getrecursionlimit()
        if nested >= limit:
            raise RecursionError(
                f"waiting on {awaited!r} inside a task of worker {w}: {nested} tasks are "
                f"nested on the worker, each waiting on the next, and sys.getrecursionlimit() "
                f"is {limit}; helping while waiting would nest one more")
        if local.depth >= _CHECK_DEPTH and _frames_left() <= _FRAME_MARGIN:
            self._serve_on_new_stack(w, awaited, deadline, nested)
        else:
            self._serve(w, awaited, deadline)

    def _serve_on_new_stack(self, w: int, awaited: _Task, deadline: float | None,
                            below: int) -> None:
        """Serve as worker ``w`` (``_serve``) on a new thread until ``awaited`` is done or
        ``deadline`` has passed, while this thread, ``below`` tasks deep, waits for it to end.

        The new thread is worker ``w`` meanwhile, named as its own thread is: one thread at a
        time takes worker ``w``'s moves. What it raises is raised here.
        """
        failure: list[BaseException] = []

        def segment() -> None:
            local = self._local
            local.worker = w
            local.below = below
            try:
                self._serve(w, awaited, deadline)
            except BaseException as exc:
                failure.append(exc)

        thread = sync.Thread(target=segment, daemon=True, name=f"refsched-pool-worker-{w}")
        thread.start()
        thread.join()
        if failure:
            raise failure[0]

    def _serve(self, w: int, awaited: _Task | None, deadline: float | None) -> None:
        """Take (Pop, else Steal), run and Finish tasks as worker ``w``.

        With ``awaited`` None this is the worker's main loop: it returns once the pool has
        terminated. Otherwise it returns once ``awaited`` is done or ``deadline`` (a
        ``time.monotonic()`` value, None: none) has passed.
        """
        lock = self._lock
        local = self._local
        flags = self._searching_flags
        finished: _Task | None = None  # run by this loop, Finish not yet recorded
        ran = False  # finished's function was called (it was not cancelled)
        idle_rounds = 0  # failed scans in a row, each followed by a GIL yield
        searching = False  # == flags[w] while this worker is awake
        lock.acquire()
        try:
            while True:
                if finished is not None:
                    self._finish_locked(finished, ran)
                    if self._recorder is not None:
                        self._record("Finish", {"w": w, "t": finished})
                    finished = None
                if awaited is None and self._may_retire_locked(w):
                    if searching:
                        flags[w] = False
                        self._searching -= 1
                    self._retire_locked(w)
                    # a push may have woken this spare to take its task: pass that on
                    self._pass_wake_locked()
                    return
                if awaited is not None and (
                        awaited._state in _DONE
                        or (deadline is not None and time.monotonic() >= deadline)):
                    if searching:
                        flags[w] = False
                        self._searching -= 1
                    self._pass_wake_locked()
                    return
                task = self._take_locked(w)
                if task is None:
                    if awaited is None and self._state is _TERMINATED:
                        return
                    if not searching:
                        searching = flags[w] = True
                        self._searching += 1
                    if idle_rounds < _BACKOFF_ROUNDS:
                        idle_rounds += 1
                        lock.release()
                        time.sleep(0)  # yield the GIL to whoever may push
                        lock.acquire()
                    else:
                        idle_rounds = 0
                        searching = flags[w] = False
                        self._searching -= 1
                        self._park_locked(w, awaited, deadline)
                        searching = flags[w]  # set when woken for a push
                    continue
                if searching:
                    searching = flags[w] = False
                    self._searching -= 1
                    self._pass_wake_locked()
                idle_rounds = 0
                lock.release()
                local.depth += 1
                ran = _run(task)
                local.depth -= 1
                finished = task
                sync.acquire(lock)
        finally:
            lock.release()

    # -- under the pool lock ---------------------------------------------------------------

    def _take_locked(self, w: int, victim: int | None = None) -> _Task | None:
        """Worker ``w`` (running nothing) takes a task: the bottom of its own deque (Spec:
        Pop(w)), or with that empty, the top of another's (Spec: Steal); None if all are empty.

        The task leaves its deque here, under the pool lock: that is the claim, so a task is
        taken once. ``victim``: the deque a steal tries first (None: a random one).
        """
        own = self._deques[w]
        if own:
            task = own.pop()  # Spec: Pop(w)
            if self._recorder is not None:
                self._record("Pop", {"w": w, "t": task})
            return task
        return self._steal_locked(w, victim)

    def _steal_locked(self, w: int, victim: int | None = None) -> _Task | None:
        """Take the oldest task of another worker's deque, trying ``victim`` first (None: a
        random one) and then the next ones in turn (Spec: Steal); with batch steals, from a
        deque of twice ``steal_cap`` or more and outside a helping wait, ``steal_cap`` of its
        tasks (Spec: StealBatch). The deques are the workers', then the spare slots': a spare
        steals and is stolen from as a worker is."""
        n = len(self._deques)  # the workers' deques, then the spare slots'
        if n == 1:
            return None
        deques = self._deques
        if victim is None:
            victim = self._rng.randrange(n)
        for _ in range(n):
            if victim != w and deques[victim]:
                if (self._steal_cap > 1 and not self._local.depth
                        and _steal_size(len(deques[victim]), self._steal_cap) > 1):
                    return self._steal_batch_locked(w, victim)
                self._stolen += 1
                self._stolen_tasks += 1
                task = deques[victim].popleft()  # Spec: Steal(w, victim)
                if self._recorder is not None:
                    self._record("Steal", {"thief": w, "victim": victim, "t": task})
                return task
            victim = victim + 1 if victim + 1 < n else 0
        return None

    def _steal_batch_locked(self, w: int, victim: int) -> _Task:
        """Take the ``_steal_cap`` oldest tasks of ``victim``'s deque, which holds at least
        twice as many, onto worker ``w``, whose deque is empty: run the first, keep the others
        in their order (Spec: StealBatch)."""
        source, own = self._deques[victim], self._deques[w]
        k = _steal_size(len(source), self._steal_cap)
        task = source.popleft()  # Spec: StealBatch(w, victim)
        for _ in range(k - 1):
            own.append(source.popleft())  # the oldest of them on top, as they were
        self._stolen += 1
        self._stolen_tasks += k
        if self._recorder is not None:
            self._record("StealBatch", {"thief": w, "victim": victim, "t": task})
        return task

    def _finish_locked(self, task: _Task, ran: bool) -> None:
        """Record that a taken task is done (Spec: Finish(w)); wake the workers waiting on it."""
        self._outstanding -= 1
        if ran:
            self._executed += 1
        if task._joiners:
            self._wake_joiners_locked(task)
        if self._outstanding == 0 and self._state is _DRAINING:
            self._terminate_locked()

    def _park_locked(self, w: int, awaited: _Task | None, deadline: float | None) -> None:
        """Wait on ``_wake[w]`` until woken (a push, ``awaited`` done, termination) or timed out.

        There was nothing to take, and a push should wake this worker: the lock is held since
        that was seen, so any later push finds it parked.
        """
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        self._parked[w] = None
        if awaited is not None:
            if awaited._joiners is None:
                awaited._joiners = []
            awaited._joiners.append(w)
        try:
            self._wake[w].wait(timeout)
        finally:
            self._parked.pop(w, None)  # still there when it timed out
            if awaited is not None:
                assert awaited._joiners is not None
                awaited._joiners.remove(w)

    def _wake_one_locked(self) -> int:
        """Wake the most recently parked worker to search: there is work it may take."""
        w, _ = self._parked.popitem()
        self._searching_flags[w] = True
        self._searching += 1
        self._wake[w].notify()
        return w

    def _pass_wake_locked(self) -> None:
        """A worker stopped searching: if it was the last and work is left, wake another.

        Called when a searcher found a task (more may be queued, that nobody else was woken
        for), and when a waiting worker goes back to its task (a push may have woken it).
        """
        if self._parked and not self._searching and any(self._deques):
            self._wake_one_locked()

    def _wake_joiners_locked(self, task: _Task) -> None:
        """Wake the workers parked waiting on ``task`` (each is registered only while parked)."""
        for w in task._joiners or ():
            self._parked.pop(w, None)
            self._wake[w].notify()

    def _cancel_queued_locked(self) -> list[_Task]:
        """Take every queued task out of its deque, cancelled and no longer counted (Spec:
        CancelQueued); terminate if nothing runs. Returns the tasks cancelled here, whose
        done-callbacks are still to be called (outside the pool lock).

        Cancelled in the same critical section that takes them out: no worker can start one
        meanwhile, and once the pool reads terminated every future is done.
        """
        dropped: list[_Task] = []
        count = 0
        for dq in self._deques:
            for task in dq:
                if task._cancel_queued():
                    dropped.append(task)
                if task._joiners:
                    self._wake_joiners_locked(task)
            count += len(dq)
            dq.clear()
        self._outstanding -= count
        if count and self._outstanding == 0:
            self._terminate_locked()
        if count and self._recorder is not None:
            self._record("CancelQueued", {})
        return dropped

    def _terminate_locked(self) -> None:
        """draining → terminated (outstanding == 0): wake every parked worker so it leaves."""
        self._state = _TERMINATED
        for w in self._parked:
            self._wake[w].notify()
        self._parked.clear()
        self._terminated.notify_all()
        self._spares.wake_idle()

    def _is_terminated(self) -> bool:
        return self._state is _TERMINATED

    def _record(self, action: str, params: dict[str, Any]) -> None:
        """Give the step just taken to the recorder. Lock held, recorder set."""
        assert self._recorder is not None
        spares = self._spares
        self._recorder.record(action, params, PoolView(
            self._state, tuple(tuple(dq) for dq in self._deques), self._outstanding,
            frozenset(spares.blocked),
            tuple((spares.slots[s].state, spares.slots[s].blocker)
                  for s in range(spares.first, spares.first + len(spares.slots)))))

    # -- outside the pool lock -------------------------------------------------------------

    def _wake_joiners(self, task: _Task) -> None:
        """After ``task`` was cancelled: wake the workers parked waiting on it."""
        with self._lock:
            if task._joiners:
                self._wake_joiners_locked(task)


_STEAL_POLICIES: Final = ("single", "half")


def _steal_cap_of(steal: object, steal_cap: object) -> int:
    """The most tasks one steal takes under the constructor's ``steal`` policy and
    ``steal_cap`` (Spec: StealCap): 1 for single steals. Validated before any state exists."""
    if steal not in _STEAL_POLICIES:
        raise InvalidArgumentError(
            f"WorkStealingPool(steal={steal!r}): steal must be one of "
            f"{', '.join(map(repr, _STEAL_POLICIES))}")
    if isinstance(steal_cap, bool) or not isinstance(steal_cap, int) or steal_cap < 1:
        raise InvalidArgumentError(
            f"WorkStealingPool(steal_cap={steal_cap!r}): steal_cap must be an int >= 1")
    return steal_cap if steal == "half" else 1


def _steal_size(n: int, cap: int) -> int:
    """How many tasks a steal takes from a deque of ``n`` > 0 (Spec: StealSize): ``cap`` from
    a deque of at least twice that many, 1 from a shorter one."""
    return cap if n >= cap << 1 else 1


def _frames_left() -> int:
    """How many more Python frames this thread's stack can take before a RecursionError."""
    depth = 0
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return sys.getrecursionlimit() - depth


def _run(task: _Task) -> bool:
    """Call the task's function and settle its future; False if it was cancelled instead."""
    fn, args, kwargs = task._fn, task._args, task._kwargs
    task._fn = task._args = task._kwargs = None  # let go of them once the future is settled
    try:
        if not task._claim():
            return False
    except RuntimeError:
        return False  # settled by hand (set_result on the future): the first outcome stands
    assert fn is not None and args is not None and kwargs is not None
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        failed, value = True, exc
    else:
        failed, value = False, result
    try:
        task._settle(failed, value)
    except BaseException:
        # InvalidStateError (settled by hand), or a BaseException out of a done-callback
        # (Future logs the Exceptions itself): the worker carries on
        _LOGGER.exception("exception settling %r", task)
    return True
