"""TimerRunner: runs the functions of a TimerScheduler's tasks at their time, on worker threads.

The TimerRunner is a client of ``spec/TimerQueue.tla``: it drives one :class:`TimerScheduler`.
``schedule``, ``cancel`` and ``close`` are the actions of the same names; a dispatcher thread takes
``Claim`` / ``Idle`` (``next()``) and hands each claimed version to one of ``max_workers`` worker
threads, which run its function and report ``Complete`` or ``Fail``. Every version's outcome
reaches its :class:`TimerFuture`: a result, an exception, or cancelled (by ``cancel()``, by
``close()``, or because a new ``schedule()`` of the id superseded the version before it ran).

Design:
- One runner lock guards the runner's fields and serialises every scheduler action with the
  bookkeeping that follows it (lock order: runner lock, then the scheduler's).
- The dispatcher reserves a worker before each ``next()`` (``busy`` counts reservations, claimed
  versions waiting for a worker and functions running; ``busy <= max_workers``), so it claims only
  what a free worker takes at once; with every worker busy it waits until one reports.
- ``next()`` reads the clock, so the dispatcher calls it without the runner lock. A change made
  meanwhile (``schedule``, ``cancel``) sets ``_poke``, and the dispatcher calls ``next()`` again
  instead of sleeping on an answer that may be out of date: no wake-up is lost. Asleep, it waits
  on a condition with the ``Wait`` seconds as its timeout; a change that could move the earliest
  entry forward (an entry due before the one it sleeps toward, or the cancel or supersede of an
  entry due no later) wakes it at once, and so does ``close()``. Nothing polls.
- Futures are resolved, and their callbacks run, outside the runner lock; functions are called
  outside it too. The clock is only read by ``next()``, outside the runner lock.
- User code never costs a thread: whatever a function raises (``BaseException`` included) is its
  version's failure, and whatever a done-callback raises is logged, and the next callback runs
  (the futures are the Runner's kind: see ``refsched.runners._RunnerFuture``). If the clock
  or the runner's own machinery fails on one of its threads, the runner stops: see ``_fail_locked``.
"""

from __future__ import annotations

import math
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Final

from refsched import runners, sync
from refsched.errors import Cancelled, InvalidArgumentError, SchedulerError
from refsched.runners import CancelToken, SchedulerRunner, worker_count
from refsched.timer.scheduler import TimerRecorder, TimerScheduler, _as_time
from refsched.types import Due, TimerCloseReport, TimerStats

__all__ = ["TimerFuture", "TimerRunner"]

# The settlement kinds and their applier as module globals: the hot paths read them
# with one lookup.
_RESULT, _ERROR, _CANCEL = runners.RESULT, runners.ERROR, runners.CANCEL
_apply = runners.apply_settlements

_INF: Final = math.inf
_MAX_WAIT: Final = 86400.0  # seconds: the longest single sleep of the dispatcher

# A future, how to resolve it (_RESULT, _ERROR or _CANCEL), the value: decided under the runner
# lock, applied outside it.
_Settlement = tuple["TimerFuture", int, Any]


class TimerFuture(runners.RunnerFuture):
    """The outcome of one version of a timer task: a ``concurrent.futures.Future``.

    ``result()`` is the function's return value; a function's exception is the future's. The
    future is cancelled when the version never runs: cancelled while pending, cancelled by
    ``close()``, or superseded by a new ``schedule()`` of the id. A function that stops on a
    cancel request by raising :class:`refsched.Cancelled` (or that was asked to stop before it
    started, and was then never called) also leaves its future cancelled. If the runner stopped
    on a failure (the clock's, or its own) before the version's outcome was settled, the future
    fails with :class:`refsched.SchedulerError` (its ``__cause__`` is that failure). A
    done-callback's error, whatever it is, is logged on the ``concurrent.futures`` logger and the
    next callback runs: it never reaches the thread that settled the future.
    """

    def __init__(self, runner: TimerRunner, task_id: Hashable) -> None:
        super().__init__()
        self.task_id = task_id
        self.version = 0  # the version this future belongs to: set once schedule() made it
        self._runner = runner
        self._settled = False
        self._started = False

    def cancel(self) -> bool:
        """Cancel this version: pending -> cancelled (True); running -> request a stop (False).

        A running version's function gets a cooperative request (its token is set) and the call
        returns False, as ``Future.cancel()`` does for a running future. A done future returns
        ``cancelled()``.
        """
        if self.done():
            return self.cancelled()
        self._runner._cancel(self.task_id, self.version)
        return self.cancelled()

    def __repr__(self) -> str:
        return f"<TimerFuture {self.task_id!r} version={self.version} {super().__repr__()}>"


class _Slot:
    """What the runner knows about a task id's current version."""

    __slots__ = ("future", "run_at", "stop", "token", "version")

    def __init__(self, version: int, future: TimerFuture, run_at: float,
                 token: CancelToken | None) -> None:
        # the scheduler's current version of the id, >= 1
        self.version = version
        # the current version's future (future.version == version); settled once it ends
        self.future = future
        # the current version's run_at, as the scheduler holds it
        self.run_at = run_at
        # the token given to the function, when it takes one (token.generation == version)
        self.token = token
        # a stop was requested while the version was running (so far unreported)
        self.stop = False


class TimerRunner(SchedulerRunner[TimerScheduler]):
    """Run functions at their time on ``max_workers`` threads over a TimerScheduler.

    ``TimerRunner(max_workers=N, clock=time.monotonic, *, rebuild_floor=64)``; use as a context
    manager (leaving the block closes it). ``schedule(task_id, run_at, fn, priority=0)`` returns
    the new version's future; ``run_at`` is a time on ``clock``. At most ``max_workers`` functions
    run at once. A function with a ``token`` parameter is called with ``token=`` a
    :class:`refsched.CancelToken`, set when ``cancel()`` asks the running version to stop.
    ``recorder=`` is handed to the TimerScheduler underneath, which gives it every spec step it
    takes, in the order the steps take effect (see :class:`refsched.TimerRecorder`).

    ``close()`` may be called from inside a task's function (it then waits for the others and
    reports that one as still running) or from a future's done-callback.

    A function's exception, whatever it is, fails its version; a done-callback's is logged (on
    the ``concurrent.futures`` logger) and the next callback runs. If the clock raises, or the
    runner's own machinery fails on one of its threads (a recorder that raises, a bug), the error
    is logged and the runner stops: it closes (what is pending is cancelled in the scheduler,
    nothing more is claimed), and every future not yet resolved — pending, claimed or running —
    fails with a :class:`refsched.SchedulerError` whose ``__cause__`` is that error. ``close()``
    then returns as usual, once the functions still running have returned; their outcomes no
    longer reach their futures. The scheduler may go on listing the version a failing worker held
    as running.
    """

    def __init__(self, max_workers: int | None = None,
                 clock: Callable[[], float] = time.monotonic, *, rebuild_floor: int = 64,
                 recorder: TimerRecorder | None = None) -> None:
        max_workers = worker_count("TimerRunner", max_workers)
        self._max_workers = max_workers
        self._local = threading.local()  # .running: this worker thread is in a function
        # InvalidArgumentError for a bad clock, rebuild_floor or recorder
        self._scheduler = TimerScheduler(clock, rebuild_floor=rebuild_floor,
                                        recorder=recorder)
        # The runner lock guards every field below and serialises every call on the scheduler.
        self._lock = sync.Lock()
        self._wake = sync.Condition(self._lock)  # the dispatcher waits here: time, poke, a worker
        self._work = sync.Condition(self._lock)  # workers wait here: for a claim, or for close
        self._idle = sync.Condition(self._lock)  # close() waits here for busy to drop
        self._slots: dict[Hashable, _Slot] = {}  # every id scheduled through the runner
        self._queue: deque[tuple[Due, _Slot]] = deque()  # claimed, not yet taken by a worker
        # == reservations (0 or 1) + len(_queue) + functions being run; <= max_workers
        self._busy = 0
        self._claiming = False  # the dispatcher is in next(), holding a reservation
        # The scheduler time the dispatcher sleeps toward: inf while it is in next() or asleep
        # with nothing scheduled; None when no change can concern it (it waits for a worker)
        self._deadline: float | None = None
        self._poke = False  # a change since the dispatcher last called next() concerns it
        self._slot_wanted = False  # the dispatcher waits for a worker to report
        self._closed = False  # close() began (or the runner stopped on a failure)
        # what stopped the runner: the first error of the clock or of its own machinery (or None)
        self._failure: BaseException | None = None
        self._threads: list[sync.Thread] = []
        # daemon: a function still running after close(timeout) must not keep the interpreter
        # from exiting
        self._threads.append(sync.Thread(target=self._dispatch_loop, daemon=True,
                                         name="refsched-timer-dispatcher"))
        for i in range(max_workers):
            self._threads.append(sync.Thread(target=self._work_loop, daemon=True,
                                             name=f"refsched-timer-worker-{i}"))
        for thread in self._threads:
            thread.start()

    # -- public API ------------------------------------------------------------------------

    def schedule(self, task_id: Hashable, run_at: float, fn: Callable[..., Any],
                 priority: int = 0) -> TimerFuture:
        """Run ``fn()`` at ``run_at`` (a time on the clock) as a new version of ``task_id``.

        Spec: Schedule(t, r, p). Returns the new version's future. A pending version it
        supersedes never runs: its future is cancelled. Errors are the scheduler's
        (``InvalidArgumentError``, ``SchedulerClosedError``, ``TaskRunningError`` when the id's
        function is running), plus ``InvalidArgumentError`` when ``fn`` is not callable; nothing
        changes when one is raised.
        """
        if not callable(fn):
            raise InvalidArgumentError(
                f"schedule({task_id!r}): fn must be callable, not {type(fn).__name__}")
        at = _as_time(run_at)  # None: the scheduler refuses run_at below
        # Built before the lock is taken; nobody else's until returned, so their version is
        # filled in once the scheduler has made it.
        future = TimerFuture(self, task_id)
        token = CancelToken(task_id, 0) if runners.wants_token(fn) else None
        out: list[_Settlement] = []
        lock = self._lock
        lock.acquire()
        try:
            version = self._scheduler.schedule(task_id, run_at, priority, fn)
            assert at is not None  # the scheduler took run_at
            future.version = version
            if token is not None:
                token.generation = version
            slot = self._slots.get(task_id)
            stale_at: float | None = None
            if slot is None:
                self._slots[task_id] = _Slot(version, future, at, token)
            else:
                old = slot.future
                if not old._settled:  # the version was pending: superseded
                    old._settled = True
                    out.append((old, _CANCEL, None))
                    stale_at = slot.run_at
                slot.version = version
                slot.future = future
                slot.run_at = at
                slot.token = token
                slot.stop = False
            deadline = self._deadline
            if deadline is not None and (at < deadline
                                         or (stale_at is not None and stale_at <= deadline)):
                self._poke_locked()
        finally:
            lock.release()
        if out:
            _apply(out)
        return future

    def cancel(self, task_id: Hashable) -> bool:
        """Cancel the current version of ``task_id``; True if it was pending. Spec: Cancel(t).

        pending -> cancelled: the function never runs, its future is cancelled (True). Running ->
        the function's token is set (a cooperative request; a function that has not started yet
        is not called) and False is returned. Terminal -> unchanged, False. Errors:
        ``UnknownTaskError`` for an id never scheduled, ``InvalidArgumentError`` for an
        unhashable one.
        """
        return self._cancel(task_id, None)

    def close(self, timeout: float | None = None) -> TimerCloseReport:
        """Stop taking schedules, cancel what is pending, wait up to ``timeout`` for what runs.

        Spec: Close. Every pending version is cancelled (its future too); functions already
        running finish and report. Returns the ids cancelled (in scheduling order) and those
        whose function was still running when the wait ended: empty unless ``timeout`` passed
        first (their futures resolve when they finish). A second call cancels nothing, waits
        again and reports what still runs. ``timeout``: None (no limit) or a finite number of
        seconds >= 0, else ``InvalidArgumentError`` with nothing changed.
        """
        seconds = runners.check_timeout("close", timeout)
        out: list[_Settlement] = []
        cancelled: tuple[Hashable, ...] = ()
        with self._lock:
            if not self._closed:
                cancelled = self._close_locked(out, None)
        if out:
            _apply(out)
        me = threading.get_ident()
        # A function that calls close() waits for the others, not for itself.
        own = 1 if getattr(self._local, "running", False) else 0
        with self._lock:
            self._idle.wait_for(lambda: self._busy <= own and not self._claiming, seconds)
            finished = self._busy <= own
        if finished:
            for thread in self._threads:
                if thread.ident != me:
                    thread.join()
        running = self._scheduler.close().running  # a fresh report: changes nothing
        return TimerCloseReport(cancelled, running)

    def stats(self) -> TimerStats:
        """Return the scheduler's counters."""
        return self._scheduler.stats()

    def __enter__(self) -> TimerRunner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        """Close: cancel what is pending, wait for the functions running."""
        self.close()

    def _cancel(self, task_id: Hashable, version: int | None) -> bool:
        """Cancel the current version of ``task_id`` (only if it is ``version``, when given)."""
        out: list[_Settlement] = []
        with self._lock:
            if version is not None:
                slot = self._slots.get(task_id)
                if slot is None or slot.version != version:
                    return False  # superseded: its future is settled already
            ok = self._scheduler.cancel(task_id)
            slot = self._slots.get(task_id)
            if slot is not None:
                future = slot.future
                if ok:
                    if not future._settled:
                        future._settled = True
                        out.append((future, _CANCEL, None))
                    deadline = self._deadline
                    if deadline is not None and slot.run_at <= deadline:
                        self._poke_locked()
                elif not future._settled:  # claimed: running, or about to start
                    slot.stop = True
                    if slot.token is not None:
                        slot.token._event.set()
        if out:
            _apply(out)
        return ok

    # -- under the runner lock -------------------------------------------------------------

    def _poke_locked(self) -> None:
        """Make the dispatcher look at the heap again before it sleeps (again)."""
        self._poke = True
        self._wake.notify()

    def _close_locked(self, out: list[_Settlement], error: BaseException | None) -> tuple[
            Hashable, ...]:
        """Close the scheduler; settle the futures of the versions it cancelled.

        ``error``: what stopped the dispatcher; those futures then get it instead of a cancel.
        """
        self._closed = True
        report = self._scheduler.close()
        for task_id in report.cancelled:
            slot = self._slots.get(task_id)
            if slot is not None and not slot.future._settled:
                slot.future._settled = True
                out.append((slot.future, _CANCEL, None) if error is None else
                           (slot.future, _ERROR, error))
        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled

    def _report_locked(self, slot: _Slot, due: Due, kind: int, value: Any,
                       out: list[_Settlement]) -> None:
        """Report a function's end to the scheduler (Complete / Fail), settle its future."""
        task_id, version, _ = due
        # Counted first, so that if what follows raises busy is right (see _work_loop).
        self._busy -= 1
        try:
            if kind == _RESULT:
                self._scheduler.complete(task_id, version, value)
            else:
                self._scheduler.fail(task_id, version, value)
        except SchedulerError:
            pass  # ended behind the runner's back (an action taken on runner.scheduler directly)
        future = slot.future if slot.version == version else None
        if future is not None and not future._settled:
            future._settled = True
            out.append((future, kind, value))
        slot.stop = False
        if self._slot_wanted:
            self._wake.notify()
        if self._closed:
            self._idle.notify_all()

    # -- the dispatcher --------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        """Claim due versions for free workers; sleep until the earliest entry or a change."""
        lock = self._lock
        scheduler = self._scheduler
        out: list[_Settlement] = []
        failure: BaseException | None = None  # what stopped the runner here, to log unlocked
        lock.acquire()
        try:
            while not self._closed:
                if self._busy >= self._max_workers:
                    self._deadline = None
                    self._slot_wanted = True
                    self._wake.wait()
                    self._slot_wanted = False
                    continue
                self._busy += 1  # reserved for what next() may claim
                self._claiming = True
                self._deadline = _INF
                self._poke = False
                lock.release()
                try:
                    nxt = scheduler.next()
                except BaseException as exc:  # the clock (or the recorder) failed
                    lock.acquire()
                    failure = exc
                    self._claiming = False
                    self._busy -= 1
                    self._fail_locked(exc, out)
                    break
                lock.acquire()
                # _claiming stays set until the reservation is the queued claim's or given back,
                # so that a failure in between gives it back (see the handler below).
                if isinstance(nxt, Due):
                    if self._failure is not None:
                        # claimed as the runner stopped: never run (its future failed already)
                        self._claiming = False
                        self._busy -= 1
                        continue
                    slot = self._slots.get(nxt.task_id)
                    if slot is None or slot.version != nxt.version:
                        # scheduled on runner.scheduler directly: run it, with a future nobody
                        # holds
                        slot = _Slot(nxt.version, TimerFuture(self, nxt.task_id), 0, None)
                    self._queue.append((nxt, slot))
                    self._claiming = False
                    self._work.notify()
                    continue
                self._claiming = False
                self._busy -= 1
                if self._closed:
                    break
                if self._poke:
                    continue  # something changed while next() ran: look again
                if nxt is None:
                    self._wake.wait()
                else:
                    seconds = nxt.seconds
                    self._deadline = scheduler.now + seconds
                    # a longer timeout overflows the platform's; waking early is harmless
                    self._wake.wait(min(seconds, _MAX_WAIT))
            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty
            self._idle.notify_all()
        except BaseException as exc:  # the dispatcher's own bookkeeping failed: the runner stops
            failure = exc
            if self._claiming:  # the reservation is nobody's now
                self._claiming = False
                self._busy -= 1
            self._fail_locked(exc, out)
        finally:
            lock.release()
        if failure is not None:
            runners.log_failure("the timer runner", failure)
        if out:
            _apply(out)

    def _fail_locked(self, exc: BaseException, out: list[_Settlement]) -> None:
        """Stop the runner: ``exc`` came out of the clock or the runner's own machinery.

        The runner's account of what runs can no longer be trusted, so it closes (what is
        pending is cancelled in the scheduler), drops the claims no worker took (their busy
        units given back), and fails every future not yet settled with a SchedulerError caused
        by ``exc``. Functions still running go on, and close() waits for them; their outcomes
        reach no future. The caller has given back its own reservation or busy unit; the first
        such error is kept in ``_failure``.
        """
        if self._failure is None:
            self._failure = exc
        error = runners.stopped_error("the timer runner", exc)
        if not self._closed:
            try:
                self._close_locked(out, error)
            except BaseException:
                # the recorder again, most likely, once the close is made: _closed is set, the
                # futures are failed below, and exc is what to report
                self._closed = True
        self._busy -= len(self._queue)
        self._queue.clear()
        for slot in self._slots.values():
            future = slot.future
            if not future._settled:
                future._settled = True
                out.append((future, _ERROR, error))
        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()

    # -- the workers -----------------------------------------------------------------------

    def _work_loop(self) -> None:
        """Take claimed versions, run them, report them; exit once closed with nothing left.

        The same loop as the Runner's ``_work_loop`` in outline (report, take, run; on a failure
        of the machinery give back what was taken, stop the runner, log unlocked), but written
        apart: here workers take from a shared queue that a dispatcher fills and count ``busy``,
        where the Runner hands each claim to one idle worker's inbox and counts ``inflight``
        and the settlements still resolving. A shared loop would test which at each task.
        """
        lock = self._lock
        queue = self._queue
        done: tuple[_Slot, Due, int, Any] | None = None  # the run this worker has not reported
        local = self._local
        failure: BaseException | None = None  # what stopped the runner here, to log unlocked
        while True:
            out: list[_Settlement] = []
            job: tuple[Due, _Slot] | None = None
            stop = False
            token: CancelToken | None = None
            lock.acquire()
            try:
                if done is not None:
                    self._report_locked(*done, out)
                    done = None
                if not out:
                    while not queue and not (self._closed and not self._claiming):
                        self._work.wait()
                if queue:
                    job = queue.popleft()
                    due, slot = job
                    stop = slot.stop
                    token = slot.token
                    slot.future._started = not stop
                exiting = job is None and not out
            except BaseException as exc:  # the runner's own machinery failed: it stops
                failure = exc
                # Nothing above can raise but _report_locked (the scheduler, its recorder), which
                # gives back the worker's busy unit first.
                done = None
                if job is not None:
                    self._busy -= 1  # taken from the queue, and never to run now
                    job = None
                self._fail_locked(exc, out)
                exiting = False  # apply out, then exit as on a close
            finally:
                lock.release()
            if failure is not None:
                runners.log_failure("the timer runner", failure)
                failure = None
            if out:
                _apply(out)
            if job is not None:
                due, slot = job
                local.running = True
                try:
                    kind, value = _run(due, token, stop)
                finally:
                    local.running = False
                done = (slot, due, kind, value)
            elif exiting:
                return


def _run(due: Due, token: CancelToken | None, stop: bool) -> tuple[int, Any]:
    """Call the claimed function (unless asked to stop first); never raises."""
    task_id, version, fn = due
    if stop:
        return (_CANCEL, Cancelled(f"{task_id!r} (version {version}) was cancelled before it "
                                   "started"))
    if fn is None:
        return (_RESULT, None)
    try:
        value = fn() if token is None else fn(token=token)
    except Cancelled as exc:
        return (_CANCEL, exc)
    except BaseException as exc:  # a function's error fails its task, never the worker
        return (_ERROR, exc)
    return (_RESULT, value)
