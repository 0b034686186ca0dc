"""The production TimerScheduler: runs task versions at a time on a clock; implements
spec/TimerQueue.tla.

Callers ``schedule(task_id, run_at, priority, fn)`` a new version of an id, ``cancel`` it, and
take due versions with ``next()``, then report them with ``complete`` / ``fail``. The vocabulary,
the state effects and the errors of every method are those of ``docs/timer.md``; the method
docstrings name the spec action (``Spec: Claim``) where the API name differs.

Representation, against the spec's variables. Every id ever scheduled has a slot ``i`` (0, 1, 2,
... in the order the ids were first scheduled) in three columns, plain lists that only grow, and
its current version has one entry tuple ``e = (run_at, -priority, seq, task_id, version, i)``:

- ``now``, ``closed``, ``nextSeq``: ``_now``, ``_closed``, ``_next_seq``;
- ``_tasks[t]`` is the entry of t's current version (kept once the entry left the heap), so
  ``version[t]``, ``runAt[t]``, ``priority[t]`` and ``seq[t]`` are its ``e[4]``, ``e[0]``,
  ``-e[1]`` and ``e[2]``; an id not in ``_tasks`` is "absent";
- ``_marks[i]`` packs the rest of the id's variables in one int: ``state[t]`` is
  ``_STATES[_marks[i] & _STATE]`` (a code 0-4: pending, running, completed, failed, cancelled),
  ``cancelRequested[t]`` is the bit ``_CANCEL_REQUESTED`` (8), ``claims[t]`` is
  ``_marks[i] >> 4`` (one claim adds ``_CLAIM``, 16: counted, so a second claim would show);
- ``heap`` is the set of the entries held in ``_sorted`` and ``_heap``, as ``<<e[0], -e[1],
  e[2], e[3], e[4]>>``; ``_sorted`` is in descending order (its last entry comes first) and
  ``_heap`` is a binary heap. Entries order as ``TimerEntry.key`` does, and, ``seq`` being
  unique, a comparison never reaches the task id;
- not spec variables: ``_ids[i]`` is the id as first scheduled (the key of ``_tasks``, which
  errors and the recorder name), and ``_payload[i]`` is what the version holds for its callers:
  its ``fn`` while pending (the scheduler never calls it; the claim hands it out), the result
  given to ``complete()`` once completed, the error given to ``fail()`` once failed, else None.

So a schedule allocates one tuple, its entry, and no object the garbage collector must keep
watching: a tuple of plain values leaves its care once it has seen it, and a column is one list
of ints or of the callers' own objects. A claim reads and writes one mark and one payload.

An entry is live when it is its id's current entry (``_tasks[e[3]] is e``) and that version is
pending. Rescheduling or cancelling only changes the id's entry or mark: the old entry turns
stale where it lies (lazy deletion). ``schedule()`` pushes onto ``_heap``. ``next()`` takes the
first of ``_heap[0]`` and ``_sorted[-1]``, dropping the stale entries it meets there; but first,
when ``_heap`` holds more than ``_MERGE_MIN`` entries and more than ``_sorted`` does, it sorts
them all into ``_sorted`` (``_sort_descending``: one sort of numbers in C, then one of whole
entries only if two times are equal), after which taking an entry is a ``list.pop()`` rather
than a sift through the heap's levels: a batch scheduled and then run is sorted once. After
Schedule, Cancel and Claim both parts are rebuilt from their live entries when they hold more
than ``rebuild_floor`` entries of which more than half are stale, so ``len(heap) <= 2 * live +
rebuild_floor`` always holds and each stale entry is removed once (amortised O(1)). The scheduler
counts stale entries (``live = len(heap) - stale``), so neither a new id's Schedule nor a Claim
updates a counter.

Cost: schedule, cancel, next, complete and fail are O(log n) amortised and touch one id (a merge
sorts h heap entries into a sorted part shorter than h, in O(h log h) paid by the h schedules
that pushed them); only ``close()``, ``snapshot()`` and ``check_invariants()`` look at everything.

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
from collections.abc import Callable, Hashable, Iterator
from itertools import chain, islice
from operator import itemgetter, ne
from types import MappingProxyType
from typing import Any, Final, Protocol

from refsched import sync
from refsched.checked import Checker, LockChecked, checker_of, find_current
from refsched.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    StaleGenerationError,
    TaskRunningError,
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
from refsched.values import hashes as _hashes
from refsched.values import is_int as _is_int
from refsched.values import shown as _r

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

# A mark (see the module docstring): the state's code in its low bits, then the cancel request,
# then the claims. The codes index _STATES; they are small ints, which compare without a lookup.
# They look like the TaskScheduler's state codes but are not those: another spec's states, in an
# order of their own, packed beside bits the TaskScheduler keeps in columns of their own.
_PENDING, _RUNNING, _COMPLETED, _FAILED, _CANCELLED = range(5)
_STATES: Final = (TimerState.PENDING, TimerState.RUNNING, TimerState.COMPLETED,
                  TimerState.FAILED, TimerState.CANCELLED)
_STATE: Final = 7  # the bits of the state's code
_CANCEL_REQUESTED: Final = 8
_CLAIM: Final = 16  # one claim; claims = mark >> 4
# The steps of the other transitions, added to a mark: each keeps the cancel request and claims.
_CLAIMED: Final = _RUNNING - _PENDING + _CLAIM  # pending -> running, claims + 1
_TO_COMPLETED: Final = _COMPLETED - _RUNNING
_TO_FAILED: Final = _FAILED - _RUNNING
_TO_CANCELLED: Final = _CANCELLED - _PENDING
_CLAIMED_STATES: Final = (_RUNNING, _COMPLETED, _FAILED)  # the states of a claimed version
# what complete() and fail() return: a global, not an attribute of the Enum class
_COMPLETED_STATE: Final = TimerState.COMPLETED
_FAILED_STATE: Final = TimerState.FAILED

# next() sorts the heap into the sorted run when the heap holds more entries than this and
# more than the run: below it, a heap's pops are as cheap as a sort.
_MERGE_MIN: Final = 32

_heappush = heapq.heappush
_heappop = heapq.heappop
_heapify = heapq.heapify
_tuple_new = tuple.__new__
_run_at_of = itemgetter(0)
_ne = ne

# An entry: (run_at, -priority, seq, task_id, version, slot). Ordered by TimerEntry.key.
_Entry = tuple[float, int, int, Hashable, int, int]


def _column(owner: TimerScheduler, name: str, empty: list[Any]) -> list[Any]:
    """The per-id column ``owner.<name>``, made from ``empty``: ``empty`` itself.

    Every column is built here, so that a check can stand in for it:
    ``refsched.explore.discipline`` swaps this factory for one whose lists verify, at every
    write, that the thread writing holds ``owner``'s lock.
    """
    return empty


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


def _reading(value: object) -> float:
    """A clock's reading as a time, as ``_as_time()`` takes ``run_at``; the callers test the
    common reading, a finite float, before they call this.

    A reading that is no time (NaN, an infinity, a ``Decimal``, a bool, an int no float can
    hold, no number at all) reads as NaN, which is never larger than the scheduler's time: it is
    ignored, and time stays where it was. Whatever the reading's conversion raises is raised to
    the caller, before the scheduler's lock is taken.
    """
    reading = _as_time(value)
    return math.nan if reading is None else reading


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


class TimerScheduler(LockChecked):
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
        self._floor: Final = int(rebuild_floor)
        self._recorder = recorder  # set here once, never changed
        # _lock guards every attribute below, and every item of every column.
        self._lock = sync.Lock()
        # the scheduler's time: the largest clock() reading so far (0 before the first)
        self._now: float = 0
        self._closed = False
        self._next_seq = 1  # == schedule() calls that made a version, + 1
        # every scheduled id -> the entry of its current version (see the module docstring)
        self._tasks: dict[Hashable, _Entry] = {}
        # The columns, indexed by an id's slot (its entry's last field): the id as first
        # scheduled, its mark (state, cancel request, claims) and its payload (fn, result, error).
        self._ids: list[Hashable] = _column(self, "_ids", [])
        self._marks: list[int] = _column(self, "_marks", [])
        self._payload: list[Any] = _column(self, "_payload", [])
        # The heap's entries, live and stale, in two parts: a binary heap that schedule() pushes
        # onto, and a list in descending order, whose last entry comes first, that next() sorts
        # the heap into when the heap has grown the longer of the two.
        self._heap: list[_Entry] = []
        self._sorted: list[_Entry] = []
        # == len(_heap) + len(_sorted) - pending versions: the stale entries (each pending
        # version has one live entry). Kept instead of the live count, so that neither a new
        # id's Schedule nor a Claim, the two steps of every timer, has a counter to update.
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
                old = tasks.get(task_id)
            except TypeError:
                raise InvalidArgumentError(_bad_schedule(task_id, run_at, priority, fn)) from None
            if self._closed:
                raise SchedulerClosedError(
                    f"schedule({_r(task_id)}, {_r(run_at)}): the scheduler is closed")
            seq = self._next_seq
            if old is None:
                slot = len(tasks)  # == len(self._ids): a new slot
                version = 1
            else:
                slot = old[5]
                st = self._marks[slot] & _STATE
                if st == _RUNNING:
                    raise TaskRunningError(
                        f"schedule({_r(task_id)}, {_r(run_at)}): version {old[4]} is running")
                version = old[4] + 1
            entry = (run_at, -priority, seq, task_id, version, slot)
            tasks[task_id] = entry  # first: for a new id, the one write that can raise
            if old is None:
                self._ids.append(task_id)
                self._marks.append(_PENDING)
                self._payload.append(fn)
            else:
                if st == _PENDING:
                    # superseded: its entry is stale from now on
                    self._stale += 1
                    self._n_superseded += 1
                self._marks[slot] = _PENDING  # no cancel request, no claim
                self._payload[slot] = fn
            self._next_seq = seq + 1
            _heappush(self._heap, entry)
            # stale == 0 (no garbage: the common case) rules a rebuild out with one load
            if self._stale:
                n = len(self._heap) + len(self._sorted)
                if n > self._floor and 2 * self._stale > n:
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
            slot = self._lookup("cancel", task_id)[5]
            marks = self._marks
            mark = marks[slot]
            st = mark & _STATE
            if st == _PENDING:
                marks[slot] = mark + _TO_CANCELLED
                self._payload[slot] = None
                stale = self._stale + 1
                self._stale = stale
                self._n_cancelled += 1
                n = len(self._heap) + len(self._sorted)
                if n > self._floor and 2 * stale > n:
                    self._compact_locked()
                if self._recorder is not None:
                    self._record("Cancel", {"t": self._ids[slot]})
                return True
            if st == _RUNNING and not mark & _CANCEL_REQUESTED:
                marks[slot] = mark | _CANCEL_REQUESTED
                if self._recorder is not None:
                    self._record("Cancel", {"t": self._ids[slot]})
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
        clock_now = self._clock()
        if clock_now.__class__ is not float or clock_now - clock_now != 0.0:
            clock_now = _reading(clock_now)  # not a finite float: converted, or NaN
        lock = self._lock
        lock.acquire()
        try:
            now = self._now
            if clock_now > now:
                self._now = now = clock_now
            heap = self._heap
            ordered = self._sorted
            if heap and len(heap) > _MERGE_MIN and len(heap) > len(ordered):
                ordered += heap
                heap.clear()
                _sort_descending(ordered)
            tasks = self._tasks
            marks = self._marks
            while heap or ordered:
                # Take the top: the first of the heap's top and the sorted run's last entry.
                if heap and (not ordered or heap[0] < ordered[-1]):
                    entry = _heappop(heap)
                else:
                    entry = ordered.pop()
                run_at, _, _, task_id, version, slot = entry
                mark = marks[slot]
                if tasks[task_id] is not entry or mark & _STATE != _PENDING:
                    self._stale -= 1  # stale (superseded or cancelled): dropped
                    continue
                if run_at > now:
                    # Not due: it goes back as the sorted run's last entry, which it precedes
                    # (it came first of all), so the run stays sorted.
                    ordered.append(entry)
                    if self._recorder is not None:
                        self._record("Idle", {})
                    return _tuple_new(Wait, (run_at - now,))
                marks[slot] = mark + _CLAIMED
                payload = self._payload
                fn = payload[slot]
                payload[slot] = None  # handed out: the scheduler need not keep it alive
                if self._stale:  # as in schedule(): no garbage, no rebuild
                    n = len(heap) + len(ordered)
                    if n > self._floor and 2 * self._stale > n:
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
        # complete() and fail() each write out the same lookup and guard rather than share a
        # method: once per task, a second Python call would cost as much as the step itself.
        # What is not the common case goes to the one shared _check_callback().
        lock = self._lock
        lock.acquire()
        try:
            try:
                entry = self._tasks[task_id]  # a subscript is cheaper than .get()
            except (KeyError, TypeError):
                entry = None  # unknown or unhashable: _check_callback() says which
            marks = self._marks
            if (entry is None or version.__class__ is not int or entry[4] != version
                    or (mark := marks[slot := entry[5]]) & _STATE != _RUNNING):
                checked = self._check_callback("complete", task_id, version)
                if isinstance(checked, TimerState):
                    return checked
                slot = checked
                mark = marks[slot]
            marks[slot] = mark + _TO_COMPLETED
            self._payload[slot] = result
            self._n_completed += 1
            if self._recorder is not None:
                self._record("Complete", {"t": self._ids[slot], "v": version})
            return _COMPLETED_STATE
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
                entry = self._tasks[task_id]  # a subscript is cheaper than .get()
            except (KeyError, TypeError):
                entry = None  # unknown or unhashable: _check_callback() says which
            marks = self._marks
            if (entry is None or version.__class__ is not int or entry[4] != version
                    or (mark := marks[slot := entry[5]]) & _STATE != _RUNNING):
                checked = self._check_callback("fail", task_id, version)
                if isinstance(checked, TimerState):
                    return checked
                slot = checked
                mark = marks[slot]
            marks[slot] = mark + _TO_FAILED
            self._payload[slot] = error
            self._n_failed += 1
            if self._recorder is not None:
                self._record("Fail", {"t": self._ids[slot], "v": version})
            return _FAILED_STATE
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
            marks = self._marks
            payload = self._payload
            ids = self._ids
            if not self._closed:
                self._closed = True
                pending = sorted(self._live_entries(), key=_entry_seq)
                for entry in pending:
                    slot = entry[5]
                    marks[slot] += _TO_CANCELLED
                    payload[slot] = None
                self._n_cancelled += len(pending)
                self._stale = 0
                self._heap.clear()
                self._sorted.clear()
                cancelled = tuple(ids[entry[5]] for entry in pending)
                if self._recorder is not None:
                    self._record("Close", {})
            running = sorted((e for e in self._tasks.values() if marks[e[5]] & _STATE == _RUNNING),
                             key=_entry_seq)
            return TimerCloseReport(cancelled, tuple(ids[e[5]] for e in running))

    # ------------------------------------------------------------------ Queries

    def state(self, task_id: Hashable) -> TimerState:
        """Return the state of the current version of ``task_id``.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return _STATES[self._marks[self._lookup("state", task_id)[5]] & _STATE]

    def version(self, task_id: Hashable) -> int:
        """Return the current version number of ``task_id`` (1 for the first schedule).

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return self._lookup("version", task_id)[4]

    def view(self, task_id: Hashable) -> TimerVersionView:
        """Return the spec variables of ``task_id``'s current version (as in ``snapshot()``).

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            entry = self._lookup("view", task_id)
            return _view(entry, self._marks[entry[5]])

    def outcome(self, task_id: Hashable) -> Any:
        """Return the result given to ``complete()`` or the error given to ``fail()``.

        None unless the current version is completed or failed. Errors: unhashable id ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            slot = self._lookup("outcome", task_id)[5]
            st = self._marks[slot] & _STATE
            return self._payload[slot] if st in (_COMPLETED, _FAILED) else None

    def snapshot(self) -> TimerSnapshot:
        """Read the clock as ``next()`` does and return the spec variables as a ``TimerSnapshot``.

        A reading that is no time is ignored; an error the clock raises is raised with nothing
        changed.

        ``heap`` holds every entry, live and stale, as ``TimerEntry(run_at, priority, seq,
        task_id, version)``.
        """
        clock_now = self._clock()
        if clock_now.__class__ is not float or clock_now - clock_now != 0.0:
            clock_now = _reading(clock_now)
        with self._lock:
            if clock_now > self._now:
                self._now = clock_now
            return self._snapshot_locked()

    def stats(self) -> TimerStats:
        """Return the scheduler's counters."""
        with self._lock:
            running = self._running_locked()
            heap = len(self._heap) + len(self._sorted)
            return TimerStats(
                live=heap - self._stale,
                heap=heap,
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

    # ------------------------------------------------------------------ Internals

    def _is_live(self, entry: _Entry) -> bool:
        """Whether ``entry`` is its id's current entry and that version pending. Lock held."""
        return (self._tasks[entry[3]] is entry
                and self._marks[entry[5]] & _STATE == _PENDING)

    def _compact_locked(self) -> None:
        """Rebuild the heap from its live entries. Lock held."""
        tasks = self._tasks
        marks = self._marks
        pending = _PENDING
        # The sorted run stays sorted as it is filtered; the heap is made a heap again.
        self._sorted[:] = [e for e in self._sorted
                           if tasks[e[3]] is e and marks[e[5]] & _STATE == pending]
        heap = self._heap
        heap[:] = [e for e in heap if tasks[e[3]] is e and marks[e[5]] & _STATE == pending]
        _heapify(heap)
        self._stale = 0
        self._rebuilds += 1

    def _running_locked(self) -> int:
        """The number of running versions: every version made that is in no other state."""
        live = len(self._heap) + len(self._sorted) - self._stale
        return (self._next_seq - 1 - live - self._n_superseded - self._n_cancelled
                - self._n_completed - self._n_failed)

    def _entries(self) -> Iterator[_Entry]:
        """Every entry of the heap, live and stale: the heap's, then the sorted run's. Lock
        held."""
        return chain(self._heap, self._sorted)

    def _live_entries(self) -> list[_Entry]:
        """The live entries of the heap. Lock held."""
        return list(filter(self._is_live, self._entries()))

    def _snapshot_locked(self) -> TimerSnapshot:
        """The spec variables now. Lock held."""
        marks = self._marks
        views = {tid: _view(e, marks[e[5]]) for tid, e in self._tasks.items()}
        heap = frozenset(
            _tuple_new(TimerEntry, (e[0], -e[1], e[2], e[3], e[4])) for e in self._entries())
        return TimerSnapshot(self._now, self._closed, self._next_seq, MappingProxyType(views),
                             heap)

    def _lookup(self, call: str, task_id: Hashable) -> _Entry:
        """The entry of ``task_id``'s current version. Lock held."""
        return find_current(self._tasks, call, task_id)

    def _check_callback(self, call: str, task_id: Hashable, version: object) -> int | TimerState:
        """The slot of the running version a callback steps, or the terminal state it returns.
        Lock held.

        Errors, in this order: unhashable id, unknown id, version not an int, stale version,
        pending version.
        """
        entry = self._lookup(call, task_id)
        slot = entry[5]
        if not _is_int(version):
            raise InvalidArgumentError(
                f"{call}({_r(task_id)}, {_r(version)}): version must be an int")
        assert isinstance(version, int)
        current = entry[4]
        if version != current:
            if self._recorder is not None:
                self._record("StaleCallback", {"t": self._ids[slot], "v": version})
            raise StaleGenerationError(
                f"{call}({_r(task_id)}, {version}): version {version} is stale, current is "
                f"{current}",
                self._ids[slot], version, current,
            )
        st = self._marks[slot] & _STATE
        if st == _RUNNING:
            return slot
        if st != _PENDING:
            if self._recorder is not None:
                self._record("RepeatedCallback", {"t": self._ids[slot]})
            return _STATES[st]
        raise InvalidTransitionError(
            f"{call}({_r(task_id)}, {version}): version {version} is pending, not running")


def _sort_descending(entries: list[_Entry]) -> None:
    """Sort ``entries`` in descending order, so that the one that comes first is last.

    The entries are first sorted by ``run_at`` alone: a sort of numbers, which C compares
    without the steps of a tuple's comparison (an equality test of the first items, then the
    order). Entries of equal times are then in no particular order among themselves; when two
    times are equal, the whole entries are sorted again, which orders them by ``-priority`` and
    ``seq`` (on a list already in order of time, that sort is a near-linear merge).
    """
    entries.sort(key=_run_at_of, reverse=True)
    times = list(map(_run_at_of, entries))
    if not all(map(_ne, times, islice(times, 1, None))):
        entries.sort(reverse=True)


def _entry_seq(entry: _Entry) -> int:
    return entry[2]


def _view(entry: _Entry, mark: int) -> TimerVersionView:
    """The spec variables at the index of ``entry``'s id: its current ``entry`` and ``mark``."""
    return TimerVersionView(entry[4], _STATES[mark & _STATE], entry[0], -entry[1], entry[2],
                            bool(mark & _CANCEL_REQUESTED), mark >> 4)


def _is_time(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


@checker_of(TimerScheduler)
class _Checker(Checker[TimerScheduler]):
    """check_invariants(): recompute every invariant from the raw structures. Lock held."""

    invariants = INVARIANTS

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
        ids, marks, payload = s._ids, s._marks, s._payload
        if not len(ids) == len(marks) == len(payload) == len(s._tasks):
            self.fail(name, f"the columns hold {len(ids)}, {len(marks)} and {len(payload)} items "
                            f"for {len(s._tasks)} ids")
        seqs: set[int] = set()
        for tid, entry in s._tasks.items():
            if not (isinstance(entry, tuple) and len(entry) == 6 and _is_int(entry[5])
                    and 0 <= entry[5] < len(ids) and ids[entry[5]] is tid):
                self.fail(name, f"_tasks[{_r(tid)}] is not the entry of {_r(tid)}'s slot")
            run_at, neg_priority, seq, _, version, slot = entry
            mark = marks[slot]
            if not _is_int(version) or version < 1:
                self.fail(name, f"{_r(tid)}: version {version!r} is not an int >= 1")
            if not _is_int(mark) or mark < 0 or mark & _STATE >= len(_STATES):
                self.fail(name, f"{_r(tid)}: mark {mark!r} names no TimerState")
            if not _is_time(run_at):
                self.fail(name, f"{_r(tid)}: run_at {run_at!r} is not a finite number")
            if not _is_int(neg_priority):
                self.fail(name, f"{_r(tid)}: priority {-neg_priority!r} is not an int")
            if not _is_int(seq) or not 1 <= seq < s._next_seq or seq in seqs:
                self.fail(name, f"{_r(tid)}: seq {seq!r} is not a unique seq < next_seq")
            seqs.add(seq)
            fn = payload[slot]
            if mark & _STATE == _PENDING and fn is not None and not callable(fn):
                self.fail(name, f"{_r(tid)}: fn {fn!r} is not callable")
        entries = list(s._entries())
        entry_seqs: set[int] = set()
        for entry in entries:
            if not (isinstance(entry, tuple) and len(entry) == 6 and _is_time(entry[0])
                    and _is_int(entry[1]) and _is_int(entry[2]) and _is_int(entry[4])
                    and _is_int(entry[5])):
                self.fail(name, f"heap entry {entry!r:.200} is not (run_at, -priority, seq, "
                                "task_id, version, slot)")
            run_at, neg_priority, seq, tid, version, slot = entry
            if not 1 <= seq < s._next_seq or seq in entry_seqs:
                self.fail(name, f"heap entry seq {seq!r} is not a unique seq < next_seq")
            entry_seqs.add(seq)
            owner = s._tasks.get(tid)
            if owner is None:
                self.fail(name, f"heap entry {seq} names {_r(tid)}, which was never scheduled")
            if slot != owner[5]:
                self.fail(name, f"heap entry {seq} names slot {slot}, not {_r(tid)}'s")
            if (not 1 <= version <= owner[4]
                    or (version == owner[4]) != (seq == owner[2])):
                self.fail(name, f"heap entry {seq} names version {version} of {_r(tid)}, whose "
                                f"version {owner[4]} has seq {owner[2]}")
            if seq == owner[2]:
                if (run_at, neg_priority) != (owner[0], owner[1]):
                    self.fail(name, f"heap entry {seq} of {_r(tid)} disagrees with its version's "
                                    "run_at/priority")
                if entry is not owner:
                    self.fail(name, f"heap entry {seq} of {_r(tid)} is a copy of its version's "
                                    "entry, not the entry")
        heap = s._heap
        for i in range(1, len(heap)):
            if heap[i][:3] < heap[(i - 1) // 2][:3]:
                self.fail(name, f"heap out of order at index {i}")
        ordered = s._sorted
        for i in range(1, len(ordered)):
            if ordered[i][:3] > ordered[i - 1][:3]:
                self.fail(name, f"sorted run out of order at index {i}")

    def heap_holds_live_versions(self) -> None:
        s, name = self.s, "HeapHoldsLiveVersions"
        # entries of each id's current version (live if that version is pending)
        current: dict[Hashable, int] = {}
        entries = list(s._entries())
        for entry in entries:
            tid = entry[3]
            if entry[2] == s._tasks[tid][2]:
                current[tid] = current.get(tid, 0) + 1
        pending = 0
        for tid, entry in s._tasks.items():
            held = current.get(tid, 0)
            st = s._marks[entry[5]] & _STATE
            if st == _PENDING:
                pending += 1
                if held != 1:
                    self.fail(name, f"pending {_r(tid)} version {entry[4]} has {held} live "
                                    "heap entries")
            elif st != _CANCELLED and held:
                # A cancelled version's entry may wait in the heap as garbage; a claimed
                # version's entry was popped by the claim.
                self.fail(name, f"{_STATES[st].value} {_r(tid)} version {entry[4]} still has "
                                "its heap entry")
        if len(entries) - s._stale != pending:
            self.fail(name, f"{len(entries)} heap entries of which {s._stale} counted stale, "
                            f"but {pending} pending versions")

    def at_most_one_claim_per_version(self) -> None:
        s, name = self.s, "AtMostOneClaimPerVersion"
        running = 0
        for tid, entry in s._tasks.items():
            mark = s._marks[entry[5]]
            claims, st = mark >> 4, mark & _STATE
            if claims not in (0, 1):
                self.fail(name, f"{_r(tid)}: claims {claims!r} is not 0 or 1")
            claimed = st in _CLAIMED_STATES
            if claimed != (claims == 1):
                self.fail(name, f"{_STATES[st].value} {_r(tid)} counts {claims} claims")
            running += st == _RUNNING
        if s._running_locked() != running:
            self.fail(name, f"the counters make {s._running_locked()} versions running, but "
                            f"{running} are")

    def heap_garbage_bounded(self) -> None:
        s, name = self.s, "HeapGarbageBounded"
        live = len(s._live_entries())
        size = len(s._heap) + len(s._sorted)
        if size > 2 * live + s._floor:
            self.fail(name, f"heap holds {size} entries for {live} live ones "
                            f"(rebuild_floor {s._floor})")

    def cancel_request_only_while_running(self) -> None:
        s, name = self.s, "CancelRequestOnlyWhileRunning"
        for tid, entry in s._tasks.items():
            mark = s._marks[entry[5]]
            if mark & _CANCEL_REQUESTED and mark & _STATE not in _CLAIMED_STATES:
                self.fail(name, f"{_STATES[mark & _STATE].value} {_r(tid)} has a cancel request")
