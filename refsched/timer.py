"""The production TimerScheduler: runs task versions at a time on a clock; implements
spec/TimerQueue.tla.

Callers ``schedule(task_id, run_at, priority, fn)`` a new version of an id, ``cancel`` it, and
take due versions with ``next()``, then report them with ``complete`` / ``fail``. The vocabulary,
the state effects and the errors of every method are those of ``docs/timer.md``; the method
docstrings name the spec action (``Spec: Claim``) where the API name differs.

The heap holds ``(run_at, -priority, seq, task_id, version)`` tuples, so the heap order is
``TimerEntry.key`` and, ``seq`` being unique, a comparison never reaches the task id. An entry is
live when its ``seq`` is the seq of its id's current version and that version is pending.
Rescheduling or cancelling only changes the id's record: the old entry turns stale where it lies
(lazy deletion). ``next()`` drops stale entries it meets at the top, and after Schedule, Cancel
and Claim the heap is rebuilt from its live entries when it holds more than ``rebuild_floor``
entries of which more than half are stale, so ``len(heap) <= 2 * live + rebuild_floor`` always
holds and each stale entry is removed once (amortised O(1)). The scheduler counts stale entries
(``live = len(heap) - stale``), so neither a new id's Schedule nor a Claim updates a counter.
Entries hold the id rather than its record: tuples of plain values leave the garbage
collector's care once it has seen them.

Cost: schedule, cancel, next, complete and fail are O(log n) amortised and touch one record;
only ``close()``, ``snapshot()`` and ``check_invariants()`` look at everything.

Threads: one lock guards all state. The scheduler never calls user code while holding it: ``fn``
is only stored, the clock is read (and its reading checked as ``run_at`` is: one that is no time
is ignored, like NaN) before the lock is taken, and ``run_at`` / ``priority`` are checked (and
anything but an ``int`` or ``float`` converted) before it too. Task ids are used as
dict keys under the lock, so their ``__hash__``/``__eq__`` (and ``__repr__`` in error messages)
run there, as for any dict. The one exception is an optional ``TimerRecorder``, called at each
step's linearization point, which only the lock makes atomic with the step. The calls made once
per task take the lock with ``acquire()``/``release()`` in ``try``/``finally`` rather than
``with``, which costs about twice as much on CPython 3.11.
"""

from __future__ import annotations

import heapq
import math
import numbers
import sys
import time
from collections.abc import Callable, Hashable
from types import MappingProxyType
from typing import Any, Final, NoReturn, Protocol

from refsched import sync
from refsched.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    SchedulerClosedError,
    StaleGenerationError,
    TaskRunningError,
    UnknownTaskError,
)
from refsched.types import (
    Due,
    TimerCloseReport,
    TimerEntry,
    TimerSnapshot,
    TimerState,
    TimerStats,
    TimerVersionView,
    Wait,
)

__all__ = ["ACTIONS", "INVARIANTS", "TimerRecorder", "TimerScheduler"]

# The invariants check_invariants() checks, named as in spec/TimerQueue.tla and the model.
INVARIANTS: Final = (
    "TypeOK",
    "HeapHoldsLiveVersions",
    "AtMostOneClaimPerVersion",
    "HeapGarbageBounded",
    "CancelRequestOnlyWhileRunning",
)

# The steps a TimerRecorder is given, named as the actions of spec/TimerQueue.tla. Tick, the
# clock advancing, is the environment's: the scheduler only reads it, so it records no Tick.
ACTIONS: Final = (
    "Schedule",
    "Cancel",
    "Claim",
    "Idle",
    "Complete",
    "Fail",
    "StaleCallback",
    "RepeatedCallback",
    "Close",
)

# TimerState members as module constants: an Enum member is an attribute lookup through the
# class, a global is one dict lookup, and members compare with ``is``.
_PENDING: Final = TimerState.PENDING
_RUNNING: Final = TimerState.RUNNING
_COMPLETED: Final = TimerState.COMPLETED
_FAILED: Final = TimerState.FAILED
_CANCELLED: Final = TimerState.CANCELLED

_heappush = heapq.heappush
_heappop = heapq.heappop
_heapify = heapq.heapify
_tuple_new = tuple.__new__

# A heap entry: (run_at, -priority, seq, task_id, version). Ordered by TimerEntry.key.
_HeapEntry = tuple[float, int, int, Hashable, int]


class TimerRecorder(Protocol):
    """Receives every spec step a TimerScheduler takes, at the step's linearization point.

    ``record`` is called with the scheduler's lock held, once per step and in the order the
    steps take effect: the action's name in spec/TimerQueue.tla (one of ``ACTIONS``), its
    parameters named as there (``t``, ``r``, ``p``, ``v``) and the state right after the step.
    A refused call is not a step and is not recorded, except a stale callback (StaleCallback) and
    a callback on a terminal version (RepeatedCallback), which are steps that change nothing.
    Calls that change nothing and are no step of the spec (cancelling a terminal version, a
    second cancel of a running one, a second ``close()``) are not recorded either. The clock
    advancing (Tick) is not a step of the scheduler: ``state.now`` simply moves. ``record`` must
    return quickly and must not call the scheduler: the lock is held.
    """

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None: ...


class _Timer:
    """One task id and its current version (spec variables at index ``t``).

    Built field by field in ``schedule()``: no ``__init__``, so ``_Timer()`` runs no Python code
    (and costs less than ``object.__new__(_Timer)``, a call CPython 3.11 does not specialize).
    """

    __slots__ = (
        "cancel_requested",
        "claims",
        "error",
        "fn",
        "priority",
        "result",
        "run_at",
        "seq",
        "state",
        "task_id",
        "version",
    )

    # the key of this record in TimerScheduler._tasks
    task_id: Hashable
    # version >= 1; +1 for each schedule() of the id
    version: int
    # the state of the current version; _PENDING <=> it has exactly one live heap entry
    state: TimerState
    # the current version's time: a finite int or float
    run_at: float
    # the current version's priority: an int (higher first among equal run_at)
    priority: int
    # 1 <= seq < next_seq, unique; the seq of the current version's heap entry
    seq: int
    # True only once claimed: state in (_RUNNING, _COMPLETED, _FAILED); set by cancel() while
    # running and kept once the version ends
    cancel_requested: bool
    # 0 or 1: times next() handed this version out; 1 <=> state in (running, completed, failed)
    claims: int
    # stored for the claimer while pending; the scheduler never calls it; handed out (and
    # dropped) by the claim, dropped by a cancel
    fn: Callable[..., Any] | None
    # the value given to complete() when completed, else None
    result: Any
    # the error given to fail() when failed, else None
    error: Any


def _r(value: object) -> str:
    """repr() cut to a length fit for an error message.

    A ``__repr__`` that raises (or recurses too deeply) gives ``object``'s repr instead: the
    error being reported is the caller's, not the repr's.
    """
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hashes(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


_LARGEST: Final = sys.float_info.max  # the largest time: Wait(run_at - now) must be a float


def _as_time(value: object) -> float | None:
    """``value`` as a scheduler time: an exact ``int``/``float`` as it is, another real number
    converted to ``float`` (an ``int`` subclass to ``int``); None when it is no time: not a real
    number, a bool, NaN, infinite, or an int no float can hold.
    """
    cls = value.__class__
    if cls is float:
        return value if value - value == 0.0 else None  # type: ignore[operator,return-value]
    if cls is int:
        # An int beyond the floats' range could not be compared with now or waited for.
        return value if -_LARGEST <= value <= _LARGEST else None  # type: ignore[operator,return-value]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, int):
        return int(value) if -_LARGEST <= value <= _LARGEST else None
    try:
        converted = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return converted if math.isfinite(converted) else None


# Clocks that read nothing but finite floats: next() and snapshot() call them as they are.
_FLOAT_CLOCKS: Final = (time.monotonic, time.perf_counter, time.time)


def _time_reader(clock: Callable[[], object]) -> Callable[[], float]:
    """A function reading ``clock`` as a time, as ``_as_time()`` takes ``run_at``.

    A reading that is no time (NaN, an infinity, a ``Decimal``, a bool, an int no float can
    hold, no number at all) reads as NaN, which is never larger than the scheduler's time: it is
    ignored, and time stays where it was. Whatever the clock or the reading's conversion
    raises is raised to the caller, before the scheduler's lock is taken.
    """
    def read() -> float:
        reading = _as_time(clock())
        return math.nan if reading is None else reading
    return read


def _bad_schedule(task_id: Hashable, run_at: object, priority: object, fn: object) -> str:
    """The message of schedule()'s first refused argument, in the order of docs/timer.md."""
    call = f"schedule({_r(task_id)}, {_r(run_at)})"
    if not _hashes(task_id):
        return f"{call}: task id is unhashable"
    if _as_time(run_at) is None:
        return f"{call}: run_at must be a finite real number, not {_r(run_at)}"
    if not _is_int(priority):
        return f"{call}: priority must be an int, not {_r(priority)}"
    return f"{call}: fn {_r(fn)} is neither None nor callable"




class TimerScheduler:
    """A timer queue of task versions; every method is thread-safe.

    The life of a version: pending -> running -> completed | failed, or pending -> cancelled, or
    pending -> superseded by the id's next version. See ``docs/timer.md`` for the contract.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, rebuild_floor: int = 64,
                 recorder: TimerRecorder | None = None) -> None:
        """Build an empty, open scheduler reading time from ``clock``.

        The scheduler's time starts at 0 and follows ``clock()`` (read by ``next()`` and
        ``snapshot()``) but never goes back. A reading that is no time by the rule ``run_at``
        follows (NaN, an infinity, a ``Decimal``, a bool, an int no float can hold, not a number)
        is ignored as a reading behind the time is: the time stays where it was. Another real
        number is converted to ``float``. Whatever the clock raises comes out of the call that
        read it, which then has changed nothing. ``rebuild_floor``: the heap is never rebuilt
        while it holds at most this many entries. ``recorder`` is given every spec step as it is
        taken (see :class:`TimerRecorder`). Errors: ``clock`` not callable, ``rebuild_floor`` not
        an int (bool excluded) or negative, ``recorder`` without a ``record`` method ->
        ``InvalidArgumentError``.
        """
        if not callable(clock):
            raise InvalidArgumentError(f"TimerScheduler({_r(clock)}): clock must be callable")
        if not _is_int(rebuild_floor) or rebuild_floor < 0:
            raise InvalidArgumentError(
                f"TimerScheduler(rebuild_floor={_r(rebuild_floor)}): rebuild_floor must be an "
                "int >= 0")
        if recorder is not None and not callable(getattr(recorder, "record", None)):
            raise InvalidArgumentError(
                f"TimerScheduler(recorder={_r(recorder)}): recorder has no record() method")
        self._clock: Final = clock
        # what next() and snapshot() call for the time: the clock itself when it can only read
        # finite floats, else the clock with each reading checked (see _time_reader)
        self._read_clock: Final = (clock if any(clock is c for c in _FLOAT_CLOCKS)
                                   else _time_reader(clock))
        self._floor: Final = int(rebuild_floor)
        self._recorder: Final = recorder
        # _lock guards every attribute below, and every field of every _Timer.
        self._lock = sync.Lock()
        # the scheduler's time: the largest clock() reading so far (0 before the first)
        self._now: float = 0
        self._closed = False
        self._next_seq = 1  # == schedule() calls that made a version, + 1
        # every scheduled id -> the record of its current version
        self._tasks: dict[Hashable, _Timer] = {}
        # a heap of (run_at, -priority, seq, task_id, version), live and stale entries
        self._heap: list[_HeapEntry] = []
        # == len(_heap) - pending versions: the stale entries (each pending version has one
        # live entry). Kept instead of the live count, so that neither a new id's Schedule nor
        # a Claim, the two steps of every timer, has a counter to update.
        self._stale = 0
        # Counters behind stats(). Every version ever made (next_seq - 1) is pending, running,
        # completed, failed, cancelled or superseded, so the running count needs none.
        self._rebuilds = 0
        self._n_superseded = 0  # pending versions replaced by a new schedule()
        self._n_completed = 0
        self._n_failed = 0
        self._n_cancelled = 0

    # ------------------------------------------------------------------ Schedule / Cancel

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        """Make a new version of ``task_id`` due at ``run_at``; return its version number.

        Spec: Schedule(t, r, p). absent or pending/terminal -> a new pending version (version
        + 1) with its own heap entry; a pending version it replaces is superseded (its entry turns
        stale). Then the heap may be compacted. ``run_at`` may lie in the past (due at once); a
        real number that is not an ``int`` or ``float`` is stored as a ``float``. Errors, in
        this order: unhashable id, ``run_at`` not a real number (bool excluded), NaN or
        infinite, ``priority`` not an int (bool excluded), ``fn`` neither None nor callable ->
        ``InvalidArgumentError``; closed -> ``SchedulerClosedError``; current version running
        -> ``TaskRunningError``.
        """
        # A finite float passes with one test (x - x is 0.0 for no NaN or infinity), an int
        # the floats can hold with a second; _as_time() converts or refuses anything else.
        if ((run_at.__class__ is not float or run_at - run_at != 0.0)
                and (run_at.__class__ is not int or not -_LARGEST <= run_at <= _LARGEST)):
            at = _as_time(run_at)
            if at is None:
                raise InvalidArgumentError(_bad_schedule(task_id, run_at, priority, fn))
            run_at = at
        if priority.__class__ is not int:
            if not _is_int(priority):
                raise InvalidArgumentError(_bad_schedule(task_id, run_at, priority, fn))
            priority = int(priority)
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(_bad_schedule(task_id, run_at, priority, fn))

        lock = self._lock
        lock.acquire()
        try:
            tasks = self._tasks
            try:
                rec = tasks.get(task_id)
            except TypeError:
                raise InvalidArgumentError(_bad_schedule(task_id, run_at, priority, fn)) from None
            if self._closed:
                raise SchedulerClosedError(
                    f"schedule({_r(task_id)}, {_r(run_at)}): the scheduler is closed")
            seq = self._next_seq
            if rec is None:
                rec = _Timer()
                rec.task_id = task_id
                rec.version = 1
                rec.state = _PENDING
                rec.run_at = run_at
                rec.priority = priority
                rec.seq = seq
                rec.cancel_requested = False
                rec.claims = 0
                rec.fn = fn
                rec.result = None
                rec.error = None
                tasks[task_id] = rec
                version = 1
            else:
                st = rec.state
                if st is _RUNNING:
                    raise TaskRunningError(
                        f"schedule({_r(task_id)}, {_r(run_at)}): version {rec.version} is "
                        "running")
                if st is _PENDING:
                    # superseded: its entry is stale from now on
                    self._stale += 1
                    self._n_superseded += 1
                else:
                    rec.state = _PENDING
                version = rec.version + 1
                rec.version = version
                rec.run_at = run_at
                rec.priority = priority
                rec.seq = seq
                rec.cancel_requested = False
                rec.claims = 0
                rec.fn = fn
                rec.result = None
                rec.error = None
            self._next_seq = seq + 1
            heap = self._heap
            _heappush(heap, (run_at, -priority, seq, task_id, version))
            # stale == 0 (no garbage: the common case) rules a rebuild out with one load
            stale = self._stale
            if stale:
                n = len(heap)
                if n > self._floor and 2 * stale > n:
                    self._compact_locked()
            if self._recorder is not None:
                self._record("Schedule", {"t": task_id, "r": run_at, "p": priority})
            return version
        finally:
            lock.release()

    def cancel(self, task_id: Hashable) -> bool:
        """Cancel the current version of ``task_id``; return True if it was pending.

        Spec: Cancel(t). pending -> cancelled (its entry turns stale; then the heap may be
        compacted), True; running -> stays running with ``cancel_requested`` set (a cooperative
        stop request, once), False; terminal -> unchanged, False. Errors: unhashable id ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        lock = self._lock
        lock.acquire()
        try:
            rec = self._lookup("cancel", task_id)
            st = rec.state
            if st is _PENDING:
                rec.state = _CANCELLED
                rec.fn = None
                stale = self._stale + 1
                self._stale = stale
                self._n_cancelled += 1
                n = len(self._heap)
                if n > self._floor and 2 * stale > n:
                    self._compact_locked()
                if self._recorder is not None:
                    self._record("Cancel", {"t": rec.task_id})
                return True
            if st is _RUNNING and not rec.cancel_requested:
                rec.cancel_requested = True
                if self._recorder is not None:
                    self._record("Cancel", {"t": rec.task_id})
            return False
        finally:
            lock.release()

    # ------------------------------------------------------------------ Claim / Idle

    def next(self) -> Due | Wait | None:
        """Hand out the earliest due version, or say how long until one is due.

        Spec: Claim when it returns ``Due``, Idle otherwise. Reads the clock (the scheduler's time
        becomes ``max(now, clock())``; a reading that is no time is ignored, and an error the
        clock raises is raised with nothing changed), then drops stale entries off the top of the
        heap. If the top entry is then due (``run_at <= now``) its version goes pending -> running
        (claims 1) and is returned as ``Due(task_id, version, fn)``, then the heap may be
        compacted. Otherwise returns ``Wait(run_at - now)`` for the earliest live entry, or
        ``None`` when the heap is empty (always after ``close()``).
        """
        # bound first: LOAD_METHOD does not specialize an instance attribute
        clock = self._read_clock
        clock_now = clock()
        lock = self._lock
        lock.acquire()
        try:
            now = self._now
            if clock_now > now:
                self._now = now = clock_now
            heap = self._heap
            tasks = self._tasks
            while heap:
                run_at, _, seq, task_id, version = heap[0]
                rec = tasks[task_id]
                # The stale case comes first so that its test jumps a short way: CPython 3.11
                # specializes ``rec.seq != seq`` only when the jump after it needs no
                # EXTENDED_ARG.
                if rec.seq != seq or rec.state is not _PENDING:
                    _heappop(heap)  # stale: superseded or cancelled
                    self._stale -= 1
                    continue
                if run_at > now:
                    if self._recorder is not None:
                        self._record("Idle", {})
                    return _tuple_new(Wait, (run_at - now,))
                _heappop(heap)
                rec.state = _RUNNING
                rec.claims += 1  # counted, not set: a second claim must show
                fn = rec.fn
                rec.fn = None  # handed out: the record need not keep it alive
                stale = self._stale  # as in schedule(): no garbage, no rebuild
                if stale:
                    n = len(heap)
                    if n > self._floor and 2 * stale > n:
                        self._compact_locked()
                if self._recorder is not None:
                    self._record("Claim", {})
                return _tuple_new(Due, (task_id, version, fn))
            if self._recorder is not None:
                self._record("Idle", {})
            return None
        finally:
            lock.release()

    # ------------------------------------------------------------------ Callbacks

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        """Record that version ``version`` of ``task_id`` ran to its end; return its state.

        Spec: Complete(t, v). running -> completed. A terminal current version is left as it is
        and its state returned (Spec: RepeatedCallback(t)). Errors, in this order: unhashable id
        -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``; ``version`` not an int
        -> ``InvalidArgumentError``; not the current version -> ``StaleGenerationError`` (Spec:
        StaleCallback(t, v)); pending -> ``InvalidTransitionError``.
        """
        lock = self._lock
        lock.acquire()
        try:
            try:
                rec = self._tasks[task_id]  # a subscript is cheaper than .get()
            except (KeyError, TypeError):
                rec = None  # unknown or unhashable: _check_callback() says which
            if (rec is None or version.__class__ is not int or rec.version != version
                    or rec.state is not _RUNNING):
                checked = self._check_callback("complete", task_id, version)
                if isinstance(checked, TimerState):
                    return checked
                rec = checked
            rec.state = _COMPLETED
            rec.result = result
            self._n_completed += 1
            if self._recorder is not None:
                self._record("Complete", {"t": rec.task_id, "v": version})
            return _COMPLETED
        finally:
            lock.release()

    def fail(self, task_id: Hashable, version: int, error: Any = None) -> TimerState:
        """Record that version ``version`` of ``task_id`` failed with ``error``; return its state.

        Spec: Fail(t, v). running -> failed. A terminal current version is left as it is and its
        state returned (Spec: RepeatedCallback(t)). Errors: as ``complete()``.
        """
        lock = self._lock
        lock.acquire()
        try:
            try:
                rec = self._tasks[task_id]  # a subscript is cheaper than .get()
            except (KeyError, TypeError):
                rec = None  # unknown or unhashable: _check_callback() says which
            if (rec is None or version.__class__ is not int or rec.version != version
                    or rec.state is not _RUNNING):
                checked = self._check_callback("fail", task_id, version)
                if isinstance(checked, TimerState):
                    return checked
                rec = checked
            rec.state = _FAILED
            rec.error = error
            self._n_failed += 1
            if self._recorder is not None:
                self._record("Fail", {"t": rec.task_id, "v": version})
            return _FAILED
        finally:
            lock.release()

    # ------------------------------------------------------------------ Close

    def close(self) -> TimerCloseReport:
        """Stop taking schedules; cancel every pending version; report what was cancelled.

        Spec: Close. open -> closed: ``schedule()`` raises ``SchedulerClosedError`` from now on,
        every pending version -> cancelled (listed in ``seq`` order), the heap is emptied.
        Running versions keep running and may still complete or fail; the report lists them. A
        later ``close()`` changes nothing, cancels nothing and lists the versions running then.
        """
        with self._lock:
            cancelled: tuple[Hashable, ...] = ()
            if not self._closed:
                self._closed = True
                tasks = self._tasks
                pending = sorted(map(tasks.__getitem__, self._live_ids()), key=_record_seq)
                for rec in pending:
                    rec.state = _CANCELLED
                    rec.fn = None
                self._n_cancelled += len(pending)
                self._stale = 0
                self._heap.clear()
                cancelled = tuple(rec.task_id for rec in pending)
                if self._recorder is not None:
                    self._record("Close", {})
            running = sorted((rec for rec in self._tasks.values() if rec.state is _RUNNING),
                             key=_record_seq)
            return TimerCloseReport(cancelled, tuple(rec.task_id for rec in running))

    # ------------------------------------------------------------------ Queries

    def state(self, task_id: Hashable) -> TimerState:
        """Return the state of the current version of ``task_id``.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return self._lookup("state", task_id).state

    def version(self, task_id: Hashable) -> int:
        """Return the current version number of ``task_id`` (1 for the first schedule).

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return self._lookup("version", task_id).version

    def view(self, task_id: Hashable) -> TimerVersionView:
        """Return the spec variables of ``task_id``'s current version (as in ``snapshot()``).

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return _view(self._lookup("view", task_id))

    def outcome(self, task_id: Hashable) -> Any:
        """Return the result given to ``complete()`` or the error given to ``fail()``.

        None unless the current version is completed or failed. Errors: unhashable id ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            rec = self._lookup("outcome", task_id)
            return rec.error if rec.state is _FAILED else rec.result

    def snapshot(self) -> TimerSnapshot:
        """Read the clock as ``next()`` does and return the spec variables as a ``TimerSnapshot``.

        A reading that is no time is ignored; an error the clock raises is raised with nothing
        changed.

        ``heap`` holds every entry, live and stale, as ``TimerEntry(run_at, priority, seq,
        task_id, version)``.
        """
        clock_now = self._read_clock()
        with self._lock:
            if clock_now > self._now:
                self._now = clock_now
            return self._snapshot_locked()

    def stats(self) -> TimerStats:
        """Return the scheduler's counters."""
        with self._lock:
            running = self._running_locked()
            return TimerStats(
                live=len(self._heap) - self._stale,
                heap=len(self._heap),
                rebuilds=self._rebuilds,
                running=running,
                scheduled=self._next_seq - 1,
                # a claimed version is running, or ended from running: completed or failed
                claimed=running + self._n_completed + self._n_failed,
                completed=self._n_completed,
                failed=self._n_failed,
                cancelled=self._n_cancelled,
            )

    @property
    def now(self) -> float:
        """The scheduler's time as last read from the clock (no new reading; 0 before any)."""
        with self._lock:
            return self._now

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        with self._lock:
            return self._closed

    @property
    def rebuild_floor(self) -> int:
        """The heap size at or below which the heap is never rebuilt."""
        return self._floor

    # ------------------------------------------------------------------ Invariants

    def check_invariants(self) -> None:
        """Check the spec invariants against the internal data structures.

        Scans everything (a checker, not an operation). Errors: a broken invariant ->
        ``InvariantViolation`` (an ``AssertionError``) whose ``invariant`` is its name in
        ``INVARIANTS``.
        """
        with self._lock:
            _Checker(self).run()

    # ------------------------------------------------------------------ Internals

    def _compact_locked(self) -> None:
        """Rebuild the heap from its live entries. Lock held."""
        heap = self._heap
        tasks = self._tasks
        pending = _PENDING
        heap[:] = [e for e in heap if (rec := tasks[e[3]]).seq == e[2] and rec.state is pending]
        _heapify(heap)
        self._stale = 0
        self._rebuilds += 1

    def _running_locked(self) -> int:
        """The number of running versions: every version made that is in no other state."""
        live = len(self._heap) - self._stale
        return (self._next_seq - 1 - live - self._n_superseded - self._n_cancelled
                - self._n_completed - self._n_failed)

    def _live_ids(self) -> list[Hashable]:
        """The ids of the live heap entries, in heap order. Lock held."""
        tasks = self._tasks
        pending = _PENDING
        return [e[3] for e in self._heap
                if (rec := tasks[e[3]]).seq == e[2] and rec.state is pending]

    def _snapshot_locked(self) -> TimerSnapshot:
        """The spec variables now. Lock held."""
        views = {tid: _view(rec) for tid, rec in self._tasks.items()}
        heap = frozenset(
            _tuple_new(TimerEntry, (e[0], -e[1], e[2], e[3], e[4])) for e in self._heap)
        return TimerSnapshot(self._now, self._closed, self._next_seq, MappingProxyType(views),
                             heap)

    def _record(self, action: str, params: dict[str, Any]) -> None:
        """Give the step just taken to the recorder. Lock held, recorder set."""
        assert self._recorder is not None
        self._recorder.record(action, params, self._snapshot_locked())

    def _lookup(self, call: str, task_id: Hashable) -> _Timer:
        """The record of ``task_id``. Lock held."""
        try:
            rec = self._tasks.get(task_id)
        except TypeError:
            raise InvalidArgumentError(f"{call}({_r(task_id)}): task id is unhashable") from None
        if rec is None:
            raise UnknownTaskError(f"{call}({_r(task_id)}): unknown task", task_id)
        return rec

    def _check_callback(self, call: str, task_id: Hashable, version: object) -> _Timer | TimerState:
        """The running record a callback steps, or the terminal state it returns. Lock held.

        Errors, in this order: unhashable id, unknown id, version not an int, stale version,
        pending version.
        """
        rec = self._lookup(call, task_id)
        if not _is_int(version):
            raise InvalidArgumentError(
                f"{call}({_r(task_id)}, {_r(version)}): version must be an int")
        assert isinstance(version, int)
        if version != rec.version:
            if self._recorder is not None:
                self._record("StaleCallback", {"t": rec.task_id, "v": version})
            raise StaleGenerationError(
                f"{call}({_r(task_id)}, {version}): version {version} is stale, current is "
                f"{rec.version}",
                rec.task_id, version, rec.version,
            )
        st = rec.state
        if st is _RUNNING:
            return rec
        if st is not _PENDING:
            if self._recorder is not None:
                self._record("RepeatedCallback", {"t": rec.task_id})
            return st
        raise InvalidTransitionError(
            f"{call}({_r(task_id)}, {version}): version {version} is pending, not running")


def _record_seq(rec: _Timer) -> int:
    return rec.seq


def _view(rec: _Timer) -> TimerVersionView:
    return TimerVersionView(rec.version, rec.state, rec.run_at, rec.priority, rec.seq,
                            rec.cancel_requested, rec.claims)


def _is_time(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


class _Checker:
    """check_invariants(): recompute every invariant from the raw structures. Lock held."""

    def __init__(self, scheduler: TimerScheduler) -> None:
        self.s = scheduler

    @staticmethod
    def fail(invariant: str, detail: str) -> NoReturn:
        raise InvariantViolation(invariant, detail)

    def run(self) -> None:
        self.type_ok()
        self.heap_holds_live_versions()
        self.at_most_one_claim_per_version()
        self.heap_garbage_bounded()
        self.cancel_request_only_while_running()

    def type_ok(self) -> None:
        s, name = self.s, "TypeOK"
        if not _is_time(s._now):
            self.fail(name, f"now {s._now!r} is not a finite real number")
        if not isinstance(s._closed, bool):
            self.fail(name, "closed is not a boolean")
        if not _is_int(s._next_seq) or s._next_seq < 1:
            self.fail(name, f"next_seq {s._next_seq!r} is not an int >= 1")
        for counter in ("_stale", "_rebuilds", "_n_superseded", "_n_completed", "_n_failed",
                        "_n_cancelled"):
            value = getattr(s, counter)
            if not _is_int(value) or value < 0:
                self.fail(name, f"counter {counter} is {value!r}, not an int >= 0")
        seqs: set[int] = set()
        for tid, rec in s._tasks.items():
            if not isinstance(rec, _Timer) or rec.task_id is not tid:
                self.fail(name, f"_tasks[{_r(tid)}] is not the record of {_r(tid)}")
            if not _is_int(rec.version) or rec.version < 1:
                self.fail(name, f"{_r(tid)}: version {rec.version!r} is not an int >= 1")
            if not isinstance(rec.state, TimerState):
                self.fail(name, f"{_r(tid)}: state {rec.state!r} is not a TimerState")
            if not _is_time(rec.run_at):
                self.fail(name, f"{_r(tid)}: run_at {rec.run_at!r} is not a finite number")
            if not _is_int(rec.priority):
                self.fail(name, f"{_r(tid)}: priority {rec.priority!r} is not an int")
            if not _is_int(rec.seq) or not 1 <= rec.seq < s._next_seq or rec.seq in seqs:
                self.fail(name, f"{_r(tid)}: seq {rec.seq!r} is not a unique seq < next_seq")
            seqs.add(rec.seq)
            if not isinstance(rec.cancel_requested, bool):
                self.fail(name, f"{_r(tid)}: cancel_requested is not a bool")
            if not _is_int(rec.claims):
                self.fail(name, f"{_r(tid)}: claims {rec.claims!r} is not an int")
            if rec.fn is not None and not callable(rec.fn):
                self.fail(name, f"{_r(tid)}: fn {rec.fn!r} is not callable")
        heap = s._heap
        entry_seqs: set[int] = set()
        for entry in heap:
            if not (isinstance(entry, tuple) and len(entry) == 5 and _is_time(entry[0])
                    and _is_int(entry[1]) and _is_int(entry[2]) and _is_int(entry[4])):
                self.fail(name, f"heap entry {entry!r:.200} is not (run_at, -priority, seq, "
                                "task_id, version)")
            run_at, neg_priority, seq, tid, version = entry
            if not 1 <= seq < s._next_seq or seq in entry_seqs:
                self.fail(name, f"heap entry seq {seq!r} is not a unique seq < next_seq")
            entry_seqs.add(seq)
            owner = s._tasks.get(tid)
            if owner is None:
                self.fail(name, f"heap entry {seq} names {_r(tid)}, which was never scheduled")
            if (not 1 <= version <= owner.version
                    or (version == owner.version) != (seq == owner.seq)):
                self.fail(name, f"heap entry {seq} names version {version} of {_r(tid)}, whose "
                                f"version {owner.version} has seq {owner.seq}")
            if seq == owner.seq and (run_at, -neg_priority) != (owner.run_at, owner.priority):
                self.fail(name, f"heap entry {seq} of {_r(tid)} disagrees with its version's "
                                "run_at/priority")
        for i in range(1, len(heap)):
            if heap[i][:3] < heap[(i - 1) // 2][:3]:
                self.fail(name, f"heap out of order at index {i}")

    def heap_holds_live_versions(self) -> None:
        s, name = self.s, "HeapHoldsLiveVersions"
        # entries of each id's current version (live if that version is pending)
        current: dict[Hashable, int] = {}
        for entry in s._heap:
            tid = entry[3]
            if entry[2] == s._tasks[tid].seq:
                current[tid] = current.get(tid, 0) + 1
        pending = 0
        for tid, rec in s._tasks.items():
            held = current.get(tid, 0)
            if rec.state is _PENDING:
                pending += 1
                if held != 1:
                    self.fail(name, f"pending {_r(tid)} version {rec.version} has {held} live "
                                    "heap entries")
            elif rec.state is not _CANCELLED and held:
                # A cancelled version's entry may wait in the heap as garbage; a claimed
                # version's entry was popped by the claim.
                self.fail(name, f"{rec.state.value} {_r(tid)} version {rec.version} still has "
                                "its heap entry")
        if len(s._heap) - s._stale != pending:
            self.fail(name, f"{len(s._heap)} heap entries of which {s._stale} counted stale, "
                            f"but {pending} pending versions")

    def at_most_one_claim_per_version(self) -> None:
        s, name = self.s, "AtMostOneClaimPerVersion"
        running = 0
        for tid, rec in s._tasks.items():
            if rec.claims not in (0, 1):
                self.fail(name, f"{_r(tid)}: claims {rec.claims!r} is not 0 or 1")
            claimed = rec.state in (_RUNNING, _COMPLETED, _FAILED)
            if claimed != (rec.claims == 1):
                self.fail(name, f"{rec.state.value} {_r(tid)} counts {rec.claims} claims")
            running += rec.state is _RUNNING
        if s._running_locked() != running:
            self.fail(name, f"the counters make {s._running_locked()} versions running, but "
                            f"{running} are")

    def heap_garbage_bounded(self) -> None:
        s, name = self.s, "HeapGarbageBounded"
        live = len(s._live_ids())
        if len(s._heap) > 2 * live + s._floor:
            self.fail(name, f"heap holds {len(s._heap)} entries for {live} live ones "
                            f"(rebuild_floor {s._floor})")

    def cancel_request_only_while_running(self) -> None:
        s, name = self.s, "CancelRequestOnlyWhileRunning"
        for tid, rec in s._tasks.items():
            if rec.cancel_requested and rec.state not in (_RUNNING, _COMPLETED, _FAILED):
                self.fail(name, f"{rec.state.value} {_r(tid)} has a cancel request")
