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

import functools
import heapq
import math
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from refsched import runners, sync
from refsched.errors import (
    Cancelled,
    InvalidArgumentError,
    SchedulerClosedError,
    SchedulerError,
    UnknownTaskError,
)
from refsched.runners import CancelToken, SchedulerRunner, worker_count
from refsched.schedule import (
    Decision,
    Policy,
    ScheduleState,
    ScheduleView,
    Timing,
    advance,
    owed,
    slot_task_id,
)
from refsched.timer.scheduler import TimerRecorder, TimerScheduler, _as_time
from refsched.types import Due, TimerCloseReport, TimerStats
from refsched.values import is_int, shown

__all__ = ["HISTORY", "RecurringView", "TimerFuture", "TimerRunner"]

# The settlement kinds and their applier as module globals: the hot paths read them
# with one lookup.
_RESULT, _ERROR, _CANCEL = runners.RESULT, runners.ERROR, runners.CANCEL
_apply = runners.apply_settlements

_INF: Final = math.inf
_MAX_WAIT: Final = 86400.0  # seconds: the longest single sleep of the dispatcher
HISTORY: Final = 100  # the decisions of each recurring schedule schedules() keeps, the latest

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


@dataclass(frozen=True, slots=True)
class RecurringView(ScheduleView):
    """A TimerRunner's recurring schedule as ``schedules()`` shows it."""

    # the futures of its latest runs (at most HISTORY), oldest first: a function's result or
    # error, whatever it raised, is its future's
    runs: tuple[TimerFuture, ...] = ()


class _Recurrence:
    """What the runner keeps of one recurring schedule."""

    __slots__ = ("fn", "history", "name", "outcomes", "priority", "removed", "runs", "seq",
                 "starting", "state")

    def __init__(self, name: str, fn: Callable[..., Any], priority: int,
                 state: ScheduleState) -> None:
        self.name = name
        # what each run calls: fn bound to its arguments (with a token parameter if fn has one)
        self.fn = fn
        self.priority = priority
        # the slots decided, held and owed; only the schedule thread advances it
        self.state = state
        # the runs scheduled and not finished: task id -> future, in slot order
        self.runs: dict[str, TimerFuture] = {}
        # the runs decided and not yet scheduled (by the schedule thread, outside the lock)
        self.starting = 0
        # the latest decisions, and the futures of the latest runs
        self.history: deque[tuple[float, Decision]] = deque(maxlen=HISTORY)
        self.outcomes: deque[TimerFuture] = deque(maxlen=HISTORY)
        # the seq of this schedule's one valid entry in the runner's slot heap (0: none)
        self.seq = 0
        self.removed = False  # unschedule() took it away: its heap entries are stale

    @property
    def unfinished(self) -> int:
        """advance()'s count: the runs decided and not finished."""
        return len(self.runs) + self.starting


def _bind(fn: Callable[..., Any], args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Callable[..., Any]:
    """``fn`` with its arguments, as a one-shot version calls it (``token=`` if it takes one)."""
    if runners.wants_token(fn):
        def call_with_token(token: CancelToken) -> Any:
            return fn(*args, token=token, **kwargs)
        return call_with_token

    def call() -> Any:
        return fn(*args, **kwargs)
    return call


class TimerRunner(SchedulerRunner[TimerScheduler]):
    """Run functions at their time on ``max_workers`` threads over a TimerScheduler.

    ``TimerRunner(max_workers=N, clock=time.monotonic, *, rebuild_floor=64)``; use as a context
    manager (leaving the block closes it). ``schedule(task_id, run_at, fn, priority=0)`` returns
    the new version's future; ``run_at`` is a time on ``clock``. At most ``max_workers`` functions
    run at once. A function with a ``token`` parameter is called with ``token=`` a
    :class:`refsched.CancelToken`, set when ``cancel()`` asks the running version to stop.
    ``recorder=`` is handed to the TimerScheduler underneath, which gives it every spec step it
    takes, in the order the steps take effect (see :class:`refsched.TimerRecorder`).

    ``recurring(name, fn, ...)`` runs ``fn`` at each slot of a recurring schedule
    (``spec/Schedule.tla``), on a schedule thread started by the first one; ``wall_clock=``
    says whether ``clock`` reads UTC seconds, which a cron schedule needs (default: whether
    ``clock`` is ``time.time``).

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
                 recorder: TimerRecorder | None = None, wall_clock: bool | None = None) -> None:
        max_workers = worker_count("TimerRunner", max_workers)
        if wall_clock is not None and not isinstance(wall_clock, bool):
            raise InvalidArgumentError(f"TimerRunner(wall_clock={shown(wall_clock)}): must be "
                                       "None or a bool")
        # the clock reads UTC seconds, so a cron schedule's slots are times on it
        self._wall = clock is time.time if wall_clock is None else wall_clock
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
        self._clock = clock
        # Recurring schedules. The schedule thread (started by the first recurring()) decides
        # their slots and waits on _slot_wake until the earliest entry of _slot_heap.
        self._recurring: dict[str, _Recurrence] = {}  # by name
        # (time, seq, schedule): the schedule has something to decide at that time; an entry
        # is stale once the schedule's seq is another or it was removed
        self._slot_heap: list[tuple[float, int, _Recurrence]] = []
        self._slot_seq = 0  # the seq of the latest heap entry
        self._slot_wake = sync.Condition(self._lock)  # the schedule thread waits here
        self._slot_poke = False  # a change since the schedule thread last looked concerns it
        self._slot_now = 0.0  # the schedule thread's time: its largest clock reading
        self._slot_thread: sync.Thread | None = None
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

    # -- recurring schedules (docs/time.md, "Recurring schedules"; spec/Schedule.tla) ----------

    def recurring(self, name: str, fn: Callable[..., Any], *,
                  args: tuple[Any, ...] | list[Any] | None = None,
                  kwargs: Mapping[str, Any] | None = None, every: float | None = None,
                  cron: str | None = None, timezone: str = "UTC", overlap: str = "skip",
                  catchup: float | None = None, start: float | None = None,
                  priority: int = 0) -> None:
        """Run ``fn(*args, **kwargs)`` at each slot of a schedule named ``name``.

        The slots are times on the runner's clock: ``start, start + every, ...``, or the times
        of a five-field ``cron`` expression read in ``timezone``, which needs a clock of UTC
        seconds (``TimerRunner(clock=time.time)``, or ``wall_clock=True``). ``start`` is a time
        on the clock; None is the clock's reading now. Each slot whose time has come is decided
        once, in order, as docs/time.md's table says (``overlap``: ``"skip"``, ``"buffer_one"``
        or ``"allow"``; ``catchup``: None or the seconds a slot may be late and still run); a
        slot decided "run" becomes a one-shot version of the task id
        ``slot_task_id(name, slot)`` (``name@<slot as UTC, ISO 8601>``), due at its slot, with
        ``priority``, which the workers run like any other (``fn`` may take a ``token``). A run
        is unfinished until its future is done. After the process stood still or the clock
        jumped, every slot owed is decided at the next look, oldest first.

        Errors, with nothing changed: ``InvalidArgumentError`` for a name that is not a
        non-empty str or that names a schedule already, an ``fn`` that is not callable, bad
        ``args``, ``kwargs`` or ``priority``, a bad timing or policy (refsched.schedule), or a
        cron on a clock that is not a wall clock; ``SchedulerClosedError`` once closed.
        """
        call = f"recurring({shown(name)})"
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"{call}: name must be a non-empty str")
        if not callable(fn):
            raise InvalidArgumentError(f"{call}: fn must be callable, not {type(fn).__name__}")
        if args is not None and not isinstance(args, tuple | list):
            raise InvalidArgumentError(f"{call}: args={shown(args)}: must be a tuple, a list "
                                       "or None")
        if kwargs is not None and not (isinstance(kwargs, Mapping)
                                       and all(isinstance(k, str) for k in kwargs)):
            raise InvalidArgumentError(f"{call}: kwargs={shown(kwargs)}: must be a mapping of "
                                       "str keys or None")
        if not is_int(priority):
            raise InvalidArgumentError(f"{call}: priority={shown(priority)}: must be an int")
        policy = Policy.of(call, overlap=overlap, catchup=catchup)
        if cron is not None and not self._wall:
            raise InvalidArgumentError(
                f"{call}: a cron schedule needs a clock of UTC seconds: TimerRunner(clock="
                "time.time), or wall_clock=True for a clock that reads them")
        if start is None:
            start = self._clock()  # the time of creation; an error of the clock is raised as is
        timing = Timing.of(call, every=every, cron=cron, timezone=timezone, start=start)
        run = _bind(fn, tuple(args or ()), dict(kwargs or {}))
        rec = _Recurrence(name, run, priority, ScheduleState.new(timing, policy))
        with self._lock:
            if self._closed:
                raise SchedulerClosedError(f"{call}: the runner is closed")
            if name in self._recurring:
                raise InvalidArgumentError(f"{call}: a schedule of that name exists: "
                                           "unschedule() it first")
            self._recurring[name] = rec
            if self._slot_thread is None:
                thread = sync.Thread(target=self._slot_loop, daemon=True,
                                     name="refsched-timer-schedules")
                thread.start()
                self._slot_thread = thread
                self._threads.append(thread)
            self._push_locked(rec, rec.state.next)

    def unschedule(self, name: str) -> None:
        """Stop the schedule ``name``: no slot of it is decided from now on, a held slot never
        runs. Runs already decided go on (their versions are the runner's, as any other).
        ``UnknownTaskError`` for a name no schedule has."""
        with self._lock:
            rec = self._recurrence("unschedule", name)
            rec.removed = True
            del self._recurring[name]

    def pause(self, name: str) -> None:
        """Pause the schedule ``name``: its slots are skipped until ``resume()`` (a held slot
        still runs once no run is unfinished). ``UnknownTaskError`` for an unknown name."""
        with self._lock:
            rec = self._recurrence("pause", name)
            rec.state = replace(rec.state, paused=True)

    def resume(self, name: str) -> None:
        """Resume the schedule ``name``: its slots are decided by its policy again (those owed
        meanwhile by the time they are decided). ``UnknownTaskError`` for an unknown name."""
        with self._lock:
            rec = self._recurrence("resume", name)
            rec.state = replace(rec.state, paused=False)

    def schedules(self) -> dict[str, RecurringView]:
        """Each schedule by name: its next slot, held slot, pause, unfinished runs, its latest
        decisions and its latest runs' futures (at most ``HISTORY`` of each, oldest first; a
        hold is no decision)."""
        with self._lock:
            return {name: RecurringView(name, rec.state.next, rec.state.held, rec.state.paused,
                                        tuple(rec.runs), tuple(rec.history), rec.state.unlisted,
                                        tuple(rec.outcomes))
                    for name, rec in self._recurring.items()}

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
        self._slot_wake.notify_all()  # the schedule thread stops
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

    def _recurrence(self, call: str, name: str) -> _Recurrence:
        rec = self._recurring.get(name) if isinstance(name, str) else None
        if rec is None:
            raise UnknownTaskError(f"{call}({shown(name)}): no schedule of that name", name)
        return rec

    def _push_locked(self, rec: _Recurrence, when: float | None) -> None:
        """Make ``when`` the schedule's one time to look at it again (None: no time)."""
        self._slot_seq += 1
        rec.seq = self._slot_seq
        if when is None:
            return
        heapq.heappush(self._slot_heap, (when, rec.seq, rec))
        if when <= self._slot_heap[0][0]:
            self._slot_poke = True
            self._slot_wake.notify()

    def _run_finished(self, rec: _Recurrence, task_id: str, future: TimerFuture) -> None:
        """A run's future is done: it is no longer unfinished, and a held slot may run."""
        with self._lock:
            if rec.runs.pop(task_id, None) is not None and (
                    rec.unfinished == 0 and rec.state.held is not None and not rec.removed):
                self._push_locked(rec, -_INF)  # Spec: Release, at the next look

    # -- the schedule thread ---------------------------------------------------------------

    def _slot_loop(self) -> None:
        """Decide each schedule's owed slots when their time comes; sleep until the next.

        Decisions are made under the runner lock; the runs decided are then scheduled through
        ``schedule()``, outside it, and counted unfinished before the next decision (only this
        thread decides, so each ``advance()`` sees every run decided before it).
        """
        lock = self._lock
        decided: list[tuple[_Recurrence, float]] = []  # runs decided, not yet scheduled
        failure: BaseException | None = None
        out: list[_Settlement] = []
        lock.acquire()
        try:
            while not self._closed:
                self._slot_poke = False
                lock.release()
                try:
                    for rec, slot in decided:
                        self._start_run(rec, slot)
                    decided.clear()
                    reading = self._clock()
                finally:
                    lock.acquire()
                now = _as_time(reading)
                if now is not None and now > self._slot_now:
                    self._slot_now = now  # a reading that is no time, or goes back, is ignored
                now = self._slot_now
                if self._closed:
                    break
                self._decide_locked(now, decided)
                if self._slot_poke or decided:
                    continue
                heap = self._slot_heap
                if not heap:
                    self._slot_wake.wait()
                elif heap[0][0] > now:
                    self._slot_wake.wait(min(heap[0][0] - now, _MAX_WAIT))
        except BaseException as exc:  # the clock, or the thread's own bookkeeping, failed
            failure = exc
            self._fail_locked(exc, out)
        finally:
            lock.release()
        if failure is not None:
            runners.log_failure("the timer runner", failure)
        if out:
            _apply(out)

    def _decide_locked(self, now: float, decided: list[tuple[_Recurrence, float]]) -> None:
        """Decide what each schedule due at ``now`` owes (Spec: Release, Decide); list the runs
        decided in ``decided``."""
        heap = self._slot_heap
        again: list[_Recurrence] = []
        while heap and heap[0][0] <= now:
            _, seq, rec = heapq.heappop(heap)
            if rec.removed or seq != rec.seq:
                continue  # stale
            rec.state, decisions = advance(rec.state, now, rec.unfinished)
            for slot, decision in decisions:
                rec.history.append((slot, decision))
                if decision == "run":
                    rec.starting += 1
                    decided.append((rec, slot))
            if owed(rec.state, now, rec.unfinished):
                again.append(rec)  # advance() left runs owed (its bound): once these started
            else:
                self._push_locked(rec, rec.state.next)
        for rec in again:
            self._push_locked(rec, now)

    def _start_run(self, rec: _Recurrence, slot: float) -> None:
        """Schedule the run of a slot decided "run": a one-shot version due at the slot."""
        try:
            task_id = slot_task_id(rec.name, slot)
        except InvalidArgumentError:  # a slot past the calendar's years, on a clock of its own
            task_id = f"{rec.name}@{slot!r}"
        try:
            future = self.schedule(task_id, slot, rec.fn, rec.priority)
        except SchedulerError as exc:
            # Closed meanwhile (the run is cancelled, as close() cancels what is pending), or
            # the same slot's run of an earlier schedule of this name still runs (this run
            # cannot be made, and fails at once).
            future = TimerFuture(self, task_id)
            future._settled = True
            closed = isinstance(exc, SchedulerClosedError)
            _apply([(future, _CANCEL, None) if closed else (future, _ERROR, exc)])
        with self._lock:
            rec.starting -= 1
            rec.runs[task_id] = future
            rec.outcomes.append(future)
        # outside the lock: a future done already calls back at once
        future.add_done_callback(functools.partial(self._run_finished, rec, task_id))

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
        self._slot_wake.notify_all()  # the schedule thread stops
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
