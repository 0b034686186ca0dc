"""The production TaskScheduler: an in-memory dependency scheduler; implements spec/Scheduler.tla.

Callers submit task ids with dependency ids and a function; a version is handed out by ``ready()``
only when every dependency's current version has succeeded, at most ``max_concurrency`` at a time,
in submission-sequence order. The vocabulary, the state effects and the errors of every method are
those of ``docs/semantics.md``; the method docstrings name the spec action (``Spec: Claim``) where
the API name differs.

Cost: a whole run is O(V + E). Each operation touches only the versions it changes and their edges
(the ready order is a heap keyed by ``seq`` with lazy deletion, sorted once instead of popped when
``ready()`` claims every ready version; blocking spreads by a breadth-first search over the
reverse index); only ``start()`` (once), ``close()``, ``snapshot()`` and
``check_invariants()`` look at every task. Nothing recurses.

Threads: one lock guards all state. The scheduler never calls user code while holding it: ``fn``
is only stored, and ``deps`` is iterated and hashed before the lock is taken. The one exception is
an optional ``Recorder``, called at each step's linearization point, which only the lock makes
atomic with the step. Task ids are used as dict keys under the lock, so their
``__hash__``/``__eq__`` (and ``__repr__`` in error messages) run there, as for any dict. Every
call looks up the ids it is given before its first change, so an id whose ``__hash__`` or
``__eq__`` raises leaves the scheduler as it was (provided they raise, or not, the same way each
time, as a dict requires). The calls made once per task (``submit``, ``ready``, ``complete``,
``pop_endings``) take the lock with ``acquire()``/``release()`` in ``try``/``finally`` rather than
``with``, which costs about twice as much on CPython 3.11.
"""

from __future__ import annotations

import heapq
import operator
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

from refsched import sync
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    SchedulerClosedError,
    StaleGenerationError,
    TaskRunningError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import Claim, CloseReport, Snapshot, TaskInfo, TaskState, VersionView

__all__ = [
    "INVARIANTS",
    "DurationSummary",
    "Recorder",
    "SchedulerStats",
    "TaskScheduler",
]

# The invariants check_invariants() checks, named as in spec/Scheduler.tla and refsched.model.
INVARIANTS: Final = (
    "TypeOK",
    "AtMostOneClaimPerVersion",
    "IndegreeInvariant",
    "ConcurrencyBound",
    "BlockedHasCause",
    "BlockedPropagated",
    "SealedGraph",
)

# Internal state codes, ordered so that ranges mean something: <= _READY is "pending or ready"
# (what Settle may block), >= _SUCCEEDED is terminal, >= _FAILED is dead.
_PENDING: Final = 0
_READY: Final = 1
_RUNNING: Final = 2
_SUCCEEDED: Final = 3
_FAILED: Final = 4
_BLOCKED: Final = 5
_CANCELLED: Final = 6
_STATES: Final = (
    TaskState.PENDING,
    TaskState.READY,
    TaskState.RUNNING,
    TaskState.SUCCEEDED,
    TaskState.FAILED,
    TaskState.BLOCKED,
    TaskState.CANCELLED,
)

# TaskState members as module constants: an Enum member is an attribute lookup through the class.
_SUCCEEDED_STATE: Final = TaskState.SUCCEEDED

_perf_counter = time.perf_counter
_heappush = heapq.heappush
_heappop = heapq.heappop
_tuple_new = tuple.__new__
_NOTHING: Final = object()  # a sentinel: no value a caller passes is this object
_NO_DEPS: Final[frozenset[Hashable]] = frozenset()


class Recorder(Protocol):
    """Receives every spec step a TaskScheduler takes, at the step's linearization point.

    ``record`` is called with the scheduler's lock held, once per step and in the order the
    steps take effect: the action's name in spec/Scheduler.tla, its parameters named as there
    (``t``, ``D``, ``k``, ``g``, ``cancelPending``) and the state right after the step. Calls
    that change nothing and are not spec steps (a refused call, ``ready()`` claiming nothing,
    a second ``close()``) are not recorded; a stale callback is (StaleCallback), though the
    call raises. It must return quickly and must not call the scheduler: the lock is held.
    """

    def record(self, action: str, params: dict[str, Any], state: Snapshot) -> None: ...


@dataclass(frozen=True, slots=True)
class DurationSummary:
    """Count, total and maximum of a set of durations, in seconds."""

    count: int = 0
    total: float = 0.0
    max: float = 0.0

    @property
    def mean(self) -> float:
        """The mean duration, 0.0 when there is none."""
        return self.total / self.count if self.count else 0.0


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """Counters of one TaskScheduler since it was built (``TaskScheduler.stats()``)."""

    submitted: int = 0  # successful submit() calls (versions created by Submit)
    retried: int = 0  # versions created by retry() (the retried id and its blocked descendants)
    claimed: int = 0  # versions handed out by ready()
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0  # by cancel(), acknowledge_cancel() and close()
    blocked: int = 0  # versions that became blocked
    cycles_reported: int = 0  # start()/submit() calls that raised CycleError
    claim_conflicts: int = 0  # ready() calls cut short by the concurrency limit
    duplicate_callbacks: int = 0  # complete/fail/acknowledge_cancel on an already terminal version
    stale_callbacks: int = 0  # StaleGenerationError raised
    ready_wait: DurationSummary = DurationSummary()  # becoming ready -> claimed
    run_time: DurationSummary = DurationSummary()  # claimed -> succeeded/failed/cancelled


class _Task:
    """One task id and its current version (spec variables at index ``t``)."""

    __slots__ = (
        "blocked_by",
        "cancel_requested",
        "claims",
        "dependents",
        "deps",
        "fn",
        "generation",
        "outcome",
        "remaining",
        "seq",
        "stamp",
        "state",
        "task_id",
    )

    def __init__(
        self, task_id: Hashable, seq: int, deps: tuple[Hashable, ...],
        fn: Callable[..., Any] | None, dependents: dict[_Task, None],
    ) -> None:
        # the key of this record in TaskScheduler._tasks
        self.task_id: Hashable = task_id
        # generation >= 1; +1 for each new version (submit or retry)
        self.generation: int = 1
        # 1 <= seq < next_seq, unique; TaskScheduler._tasks is kept in seq order
        self.seq: int = seq
        # one of _PENDING .. _CANCELLED (index into _STATES)
        self.state: int = _PENDING
        # the current version's deps in the order given: no duplicates, task_id not in deps
        self.deps: tuple[Hashable, ...] = deps
        # reverse index: the records whose current deps contain task_id (each edge once)
        self.dependents: dict[_Task, None] = dependents
        # while pending/ready: remaining == number of deps not succeeded, and
        # state == _PENDING <=> remaining > 0; frozen once the version leaves pending/ready
        self.remaining: int = 0
        # is not None <=> state == _BLOCKED; then blocked_by.task_id in deps
        self.blocked_by: _Task | None = None
        # set only while _RUNNING (kept once the version ends); implies claims == 1
        self.cancel_requested: bool = False
        # 0 or 1; 1 <=> the version was claimed (running, succeeded, failed, some cancelled)
        self.claims: int = 0
        # stored for the claimer; the scheduler never calls it
        self.fn: Callable[..., Any] | None = fn
        # the result given to complete() when succeeded, the error given to fail() when failed,
        # else None
        self.outcome: Any = None
        # perf_counter() when the version last became ready (pending/ready), when it was claimed
        # (running and after)
        self.stamp: float = 0.0


_seq_of: Final[Callable[[_Task], int]] = operator.attrgetter("seq")


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


def _show_path(path: Iterable[Hashable]) -> str:
    return " -> ".join(_r(t) for t in path)


class TaskScheduler:
    """An in-memory dependency scheduler; every method is thread-safe.

    The life of a version: pending -> ready -> running -> succeeded | failed | cancelled, or
    pending/ready -> cancelled | blocked. See ``docs/semantics.md`` for the contract.
    """

    def __init__(self, max_concurrency: int, *, track_endings: bool = False,
                 recorder: Recorder | None = None) -> None:
        """Build an empty, unstarted scheduler running at most ``max_concurrency`` versions.

        ``track_endings`` keeps the endings ``pop_endings()`` returns; ``recorder`` is given
        every spec step as it is taken (see :class:`Recorder`). Errors: ``max_concurrency`` not
        an int (bool excluded) or negative, ``track_endings`` not a bool, ``recorder`` without a
        ``record`` method -> ``InvalidArgumentError``.
        """
        if not _is_int(max_concurrency) or max_concurrency < 0:
            raise InvalidArgumentError(
                f"TaskScheduler({_r(max_concurrency)}): max_concurrency must be an int >= 0"
            )
        if not isinstance(track_endings, bool):
            raise InvalidArgumentError(
                f"TaskScheduler(track_endings={_r(track_endings)}): track_endings must be True "
                "or False"
            )
        if recorder is not None and not callable(getattr(recorder, "record", None)):
            raise InvalidArgumentError(
                f"TaskScheduler(recorder={_r(recorder)}): recorder has no record() method"
            )
        self._max: Final = int(max_concurrency)
        self._track: Final = bool(track_endings)
        self._recorder: Final = recorder
        # _lock guards every attribute below, and every field of every _Task.
        self._lock = sync.Lock()
        self._started = False
        self._closed = False
        self._next_seq = 1
        # every submitted id -> its record, in the seq order of the current versions
        self._tasks: dict[Hashable, _Task] = {}
        # dependents of ids never submitted (reverse index for absent deps); empty once started
        self._dangling: dict[Hashable, dict[_Task, None]] = {}
        # the ready order: a heap of the seqs of versions that became ready, and the record
        # each was pushed for. An entry whose record is gone from _ready_at, has another seq
        # now or is no longer ready is stale and skipped when popped (lazy deletion). Plain
        # ints keep the heap cheap to compare and out of the garbage collector's way.
        self._heap: list[int] = []
        self._ready_at: dict[int, _Task] = {}
        self._ready_count = 0  # == number of ready versions
        self._running = 0  # == number of running versions <= _max
        # True => every dep of every current version is submitted with a smaller seq, so the
        # graph is acyclic and start() can skip its cycle search
        self._seq_ordered = True
        self._endings: list[tuple[Hashable, int, TaskState]] = []
        # counters behind stats()
        self._n_retried = 0
        self._n_succeeded = 0
        self._n_failed = 0
        self._n_cancelled = 0
        self._n_blocked = 0
        self._n_cycles = 0
        self._n_conflicts = 0
        self._n_duplicates = 0
        self._n_stale = 0
        self._wait_total = 0.0
        self._wait_max = 0.0
        # versions that ended failed or cancelled while running: run_time counts these and
        # the succeeded ones
        self._n_stopped = 0
        self._run_total = 0.0
        self._run_max = 0.0

    # ------------------------------------------------------------------ Submit / Start

    def submit(
        self, task_id: Hashable, deps: Iterable[Hashable] = (),
        fn: Callable[..., Any] | None = None,
    ) -> int:
        """Submit a new version of ``task_id`` depending on ``deps``; return its generation.

        absent or pending/ready/terminal -> pending (some dep not succeeded) or ready; a replaced
        succeeded version turns its pending/ready dependents back to pending; then blocking
        spreads (Settle). Errors, in this order: unhashable id, ``deps`` not an iterable of
        hashables (a str or bytes is refused too), a dep twice, ``task_id`` in ``deps``, ``fn``
        not callable -> ``InvalidArgumentError``; closed -> ``SchedulerClosedError``; current
        version running -> ``TaskRunningError``; after start: a dep never submitted ->
        ``UnknownDependencyError``; after start: the new edges close a cycle -> ``CycleError``.
        An id or dep whose ``__hash__`` or ``__eq__`` raises makes the call raise with nothing
        changed.
        """
        try:
            hash(task_id)
        except TypeError:
            raise InvalidArgumentError(f"submit({_r(task_id)}): task id is unhashable") from None
        if type(deps) is tuple:
            dep_t: tuple[Hashable, ...] = deps
        elif isinstance(deps, (str, bytes)):
            raise InvalidArgumentError(
                f"submit({_r(task_id)}, {_r(deps)}): deps must be an iterable of task ids, "
                f"not {type(deps).__name__}"
            )
        else:
            try:
                dep_t = tuple(deps)
            except TypeError:
                raise InvalidArgumentError(
                    f"submit({_r(task_id)}, {_r(deps)}): deps is not an iterable"
                ) from None
        dep_s = _NO_DEPS
        if dep_t:
            try:
                dep_s = frozenset(dep_t)
            except TypeError as e:
                bad = next((d for d in dep_t if not isinstance(d, Hashable) or not _hashes(d)),
                           _NOTHING)
                if bad is _NOTHING:  # every dep hashes: an __eq__ raised the TypeError
                    raise InvalidArgumentError(
                        f"submit({_r(task_id)}, {_r(dep_t)}): dependencies cannot be "
                        f"compared: {e}"
                    ) from e
                raise InvalidArgumentError(
                    f"submit({_r(task_id)}, {_r(deps)}): dependency {_r(bad)} is unhashable"
                ) from None
            if len(dep_s) != len(dep_t):
                seen: set[Hashable] = set()
                dup = None
                for d in dep_t:
                    if d in seen:
                        dup = d
                        break
                    seen.add(d)
                raise InvalidArgumentError(
                    f"submit({_r(task_id)}, {_r(dep_t)}): dependency {_r(dup)} given twice"
                )
            if task_id in dep_s:
                raise InvalidArgumentError(
                    f"submit({_r(task_id)}, {_r(dep_t)}): a task cannot depend on itself"
                )
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(f"submit({_r(task_id)}): fn {_r(fn)} is not callable")

        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                raise SchedulerClosedError(f"submit({_r(task_id)}): the scheduler is closed")
            # Every lookup of a caller's id (its __hash__ and __eq__ may raise) happens before
            # the first change; the changes below find what they need in these results.
            tasks = self._tasks
            dangling = self._dangling
            rec = tasks.get(task_id)
            if rec is not None and rec.state == _RUNNING:
                raise TaskRunningError(
                    f"submit({_r(task_id)}): version {rec.generation} is running"
                )
            get = tasks.get
            # the records of the deps submitted, and (dep, dangling.get(dep)) for each dep never
            # submitted (only before start: after it, that is an error)
            dep_recs: list[_Task] | tuple[()] = ()
            absent: list[tuple[Hashable, dict[_Task, None] | None]] | None = None
            if dep_t:
                dep_recs = []
                append = dep_recs.append
                for d in dep_t:
                    r = get(d)
                    if r is not None:
                        append(r)
                    elif absent is None:
                        absent = [(d, dangling.get(d))]
                    else:
                        absent.append((d, dangling.get(d)))
            if self._started:
                if absent is not None:
                    missing = [(task_id, d) for d, _ in absent]
                    raise UnknownDependencyError(
                        f"submit({_r(task_id)}, {_r(dep_t)}): unknown "
                        f"{'dependency' if len(missing) == 1 else 'dependencies'} "
                        + ", ".join(_r(d) for _, d in missing),
                        missing,
                    )
                if rec is not None and rec.dependents and dep_t:
                    cycle = self._cycle_through(rec, dep_t)
                    if cycle is not None:
                        self._n_cycles += 1
                        raise CycleError(
                            f"submit({_r(task_id)}, {_r(dep_t)}): the new dependencies close "
                            f"the cycle {_show_path(cycle)}",
                            [cycle],
                        )
            # before start: the versions waiting for this id, which its first version inherits
            adopted = dangling.get(task_id) if rec is None and dangling else None
            # the replaced version's edges: the records of its deps submitted, and
            # (dep, dangling[dep]) for each dep never submitted
            old_recs: list[_Task] | tuple[()] = ()
            old_absent: list[tuple[Hashable, dict[_Task, None]]] | tuple[()] = ()
            if rec is not None and rec.deps:
                old_recs = []
                old_absent = []
                for d in rec.deps:
                    r = get(d)
                    if r is not None:
                        old_recs.append(r)
                    else:
                        old_absent.append((d, dangling[d]))

            # Guards passed: mutate.
            seq = self._next_seq
            if rec is None:
                rec = _Task(task_id, seq, dep_t, fn, {} if adopted is None else adopted)
                tasks[task_id] = rec
                if adopted is not None:
                    del dangling[task_id]
            else:
                # the id's key first: a hash that fails now leaves the record where it was
                del tasks[task_id]
                tasks[task_id] = rec  # keep _tasks in seq order
                old_state = rec.state
                if old_state == _READY:
                    self._ready_count -= 1
                for r in old_recs:
                    del r.dependents[rec]
                for _, gone in old_absent:
                    del gone[rec]
                if rec.dependents:
                    # Its dependents now have smaller seqs than the new version.
                    self._seq_ordered = False
                    if old_state == _SUCCEEDED:
                        for x in rec.dependents:
                            if x.state <= _READY:
                                x.remaining += 1
                                if x.state == _READY:
                                    x.state = _PENDING
                                    self._ready_count -= 1
                rec.task_id = task_id
                rec.generation += 1
                rec.seq = seq
                rec.deps = dep_t
                rec.fn = fn
                rec.blocked_by = None
                rec.cancel_requested = False
                rec.claims = 0
                rec.outcome = None
            self._next_seq = seq + 1

            remaining = 0
            dead = False
            for r in dep_recs:
                r.dependents[rec] = None
                st = r.state
                if st != _SUCCEEDED:
                    remaining += 1
                    if st >= _FAILED:
                        dead = True
            if absent is not None:
                # Only before start: an absent dep counts as not succeeded.
                self._seq_ordered = False
                remaining += len(absent)
                for d, waiting in absent:
                    if waiting is None:
                        dangling[d] = {rec: None}
                    else:
                        waiting[rec] = None
            for d, gone in old_absent:
                # only now: the new version may have taken up an absent dep the old one had
                if not gone:
                    del dangling[d]
            rec.remaining = remaining
            if remaining:
                rec.state = _PENDING
            else:
                rec.state = _READY
                rec.stamp = _perf_counter()
                _heappush(self._heap, seq)
                self._ready_at[seq] = rec
                self._ready_count += 1
            if dead:
                self._settle((), (rec,))
            if self._recorder is not None:
                self._record("Submit", {"t": task_id, "D": dep_s})
            return rec.generation
        finally:
            lock.release()

    def start(self) -> None:
        """Seal the initial graph and allow claims.

        not started -> started; nothing else changes. Errors: closed -> ``SchedulerClosedError``;
        already started -> ``InvalidTransitionError``; a dep never submitted ->
        ``UnknownDependencyError`` naming every ``(task, dep)`` pair; a cycle -> ``CycleError``
        (``.cycle`` one path ``[a, b, c, a]``, ``.cycles`` one per strongly connected component).
        """
        with self._lock:
            if self._closed:
                raise SchedulerClosedError("start(): the scheduler is closed")
            if self._started:
                raise InvalidTransitionError("start(): the scheduler is already started")
            tasks = self._tasks
            if self._dangling:
                holders: dict[_Task, None] = {}
                for waiting in self._dangling.values():
                    holders.update(waiting)
                missing = [
                    (x.task_id, d)
                    for x in sorted(holders, key=_seq_of)
                    for d in x.deps
                    if d not in tasks
                ]
                raise UnknownDependencyError(
                    "start(): unknown dependencies: "
                    + ", ".join(f"{_r(t)} needs {_r(d)}" for t, d in missing),
                    missing,
                )
            if not self._seq_ordered:
                cycles = _find_cycles(tasks.values())
                if cycles:
                    self._n_cycles += 1
                    more = f" (and {len(cycles) - 1} more)" if len(cycles) > 1 else ""
                    raise CycleError(
                        f"start(): dependency cycle {_show_path(cycles[0])}{more}", cycles
                    )
            self._started = True
            if self._recorder is not None:
                self._record("Start", {})

    # ------------------------------------------------------------------ Claim

    def ready(self, limit: int | None = None) -> list[Claim]:
        """Claim up to ``limit`` ready versions, smallest ``seq`` first, and return them in order.

        Spec: Claim. ready -> running (claims 1) for ``k = min(limit, max_concurrency - running,
        ready versions)``; returns ``[]`` without a step when ``k`` is 0 or when closed. Errors:
        ``limit`` not an int or negative -> ``InvalidArgumentError``; not started ->
        ``InvalidTransitionError``.
        """
        if limit is not None and (not _is_int(limit) or limit < 0):
            raise InvalidArgumentError(f"ready({_r(limit)}): limit must be None or an int >= 0")
        lock = self._lock
        lock.acquire()
        try:
            if not self._started:
                raise InvalidTransitionError("ready(): the scheduler is not started")
            if self._closed:
                return []
            available = self._ready_count
            if not available:
                return []
            want = available if limit is None or limit > available else limit
            free = self._max - self._running
            if free < want:
                self._n_conflicts += 1
                want = free
            if want <= 0:
                return []
            heap = self._heap
            take = self._ready_at.pop
            claims: list[Claim] = []
            append = claims.append
            now = _perf_counter()
            waited = 0.0
            longest = self._wait_max
            # When every ready version is claimed, one sort of the heap replaces a pop per
            # claim; whatever follows the last claim in that order is stale.
            order: list[int] | None = None
            if want > 1 and want == available:
                order = sorted(heap)
                heap.clear()
            i = 0
            left = want
            while left:
                if order is None:
                    seq = _heappop(heap)
                else:
                    seq = order[i]
                    i += 1
                rec = take(seq, None)
                if rec is None or rec.seq != seq or rec.state != _READY:
                    continue  # stale entry
                rec.state = _RUNNING
                rec.claims = 1
                wait = now - rec.stamp
                rec.stamp = now
                waited += wait
                if wait > longest:
                    longest = wait
                append(_tuple_new(Claim, (rec.task_id, rec.generation, rec.fn)))
                left -= 1
            if not heap and self._ready_at:
                self._ready_at.clear()  # nothing is ready any more: what it holds is stale
            self._wait_total += waited
            self._wait_max = longest
            self._running += want
            self._ready_count = available - want
            if self._recorder is not None:
                self._record("Claim", {"k": want})
            return claims
        finally:
            lock.release()

    # ------------------------------------------------------------------ Callbacks

    def complete(self, task_id: Hashable, generation: int, result: Any = None) -> TaskState:
        """Record that version ``generation`` of ``task_id`` succeeded; return its state.

        running -> succeeded; each pending dependent whose last unfinished dep this was becomes
        ready. An already terminal current version is left as it is and its state returned.
        Errors: unhashable id or ``generation`` not an int -> ``InvalidArgumentError``; unknown
        id -> ``UnknownTaskError``; not the current generation -> ``StaleGenerationError``;
        pending or ready -> ``InvalidTransitionError``.
        """
        lock = self._lock
        lock.acquire()
        try:
            try:
                rec = self._tasks.get(task_id)
            except TypeError:
                rec = None
            if (rec is None or generation.__class__ is not int or rec.generation != generation
                    or rec.state != _RUNNING):
                checked = self._check_callback("complete", task_id, generation)
                if not isinstance(checked, _Task):
                    return checked
                rec = checked
            rec.state = _SUCCEEDED
            rec.outcome = result
            now = _perf_counter()
            ran = now - rec.stamp
            self._run_total += ran
            if ran > self._run_max:
                self._run_max = ran
            self._running -= 1
            self._n_succeeded += 1
            if self._track:
                self._endings.append((rec.task_id, rec.generation, _SUCCEEDED_STATE))
            dependents = rec.dependents
            if dependents:
                newly_ready = 0
                heap = self._heap
                ready_at = self._ready_at
                for x in dependents:
                    if x.state == _PENDING:
                        left = x.remaining - 1
                        x.remaining = left
                        if not left:
                            x.state = _READY
                            x.stamp = now
                            seq = x.seq
                            _heappush(heap, seq)
                            ready_at[seq] = x
                            newly_ready += 1
                if newly_ready:
                    self._ready_count += newly_ready
            if self._recorder is not None:
                self._record("Complete", {"t": rec.task_id, "g": rec.generation})
            return _SUCCEEDED_STATE
        finally:
            lock.release()

    def fail(self, task_id: Hashable, generation: int, error: Any = None) -> TaskState:
        """Record that version ``generation`` of ``task_id`` failed; return its state.

        running -> failed, then every pending/ready version that depends on it, directly or
        through pending/ready versions, becomes blocked (Settle). An already terminal current
        version is left as it is. Errors: as ``complete()``.
        """
        return self._end_running("fail", task_id, generation, _FAILED, error)

    def acknowledge_cancel(self, task_id: Hashable, generation: int) -> TaskState:
        """Record that running version ``generation`` of ``task_id`` stopped; return its state.

        Spec: AcknowledgeCancel. running -> cancelled (with or without a prior request), then
        Settle. An already terminal current version is left as it is. Errors: as ``complete()``.
        """
        return self._end_running("acknowledge_cancel", task_id, generation, _CANCELLED, None)

    def cancel(self, task_id: Hashable, generation: int | None = None) -> TaskState:
        """Cancel the current version of ``task_id`` (or version ``generation``); return its state.

        pending/ready -> cancelled, then Settle; running -> running with ``cancel_requested``
        set (a cooperative request, once); terminal -> unchanged. Errors: unhashable id or
        ``generation`` neither None nor an int -> ``InvalidArgumentError``; unknown id ->
        ``UnknownTaskError``; ``generation`` given and not current -> ``StaleGenerationError``.
        """
        with self._lock:
            rec = self._lookup("cancel", task_id)
            if generation is not None:
                if not _is_int(generation):
                    raise InvalidArgumentError(
                        f"cancel({_r(task_id)}, {_r(generation)}): generation must be None or "
                        "an int"
                    )
                self._insist_current("cancel", rec, generation)
            st = rec.state
            if st <= _READY:
                if st == _READY:
                    self._ready_count -= 1
                rec.state = _CANCELLED
                self._n_cancelled += 1
                if self._track:
                    self._endings.append((rec.task_id, rec.generation, TaskState.CANCELLED))
                self._settle((rec,), ())
                if self._recorder is not None:
                    self._record("Cancel", {"t": rec.task_id})
                return TaskState.CANCELLED
            if st == _RUNNING and not rec.cancel_requested:
                # A second request is no step: the spec's Cancel asks a running version once.
                rec.cancel_requested = True
                if self._recorder is not None:
                    self._record("Cancel", {"t": rec.task_id})
            return _STATES[st]

    def retry(self, task_id: Hashable) -> int:
        """Give a failed, cancelled or blocked task a new version; return its generation.

        The task and every version blocked through a ``blocked_by`` chain leading back to it get
        new versions in the order of their old ``seq`` (consecutive new seqs, as Submit with the
        same deps), become pending or ready, then Settle. Errors: unhashable id ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``; closed ->
        ``SchedulerClosedError``; not failed/cancelled/blocked -> ``InvalidTransitionError``.
        """
        with self._lock:
            root = self._lookup("retry", task_id)
            if self._closed:
                raise SchedulerClosedError(f"retry({_r(task_id)}): the scheduler is closed")
            if root.state < _FAILED:
                raise InvalidTransitionError(
                    f"retry({_r(task_id)}): version {root.generation} is "
                    f"{_STATES[root.state].value}, not failed, cancelled or blocked"
                )
            members = [root]
            # Each version has one blocked_by, so only root can be met twice (when its own
            # blocked_by chain, through a cycle of an unstarted graph, leads back to it).
            for m in members:  # grows while iterating: breadth-first over blocked_by chains
                for x in m.dependents:
                    if x.blocked_by is m and x is not root:
                        members.append(x)
            members.sort(key=_seq_of)
            tasks = self._tasks
            seq = self._next_seq
            for m in members:
                del tasks[m.task_id]
                tasks[m.task_id] = m  # keep _tasks in seq order
                m.generation += 1
                m.seq = seq
                seq += 1
                m.state = _PENDING
                m.blocked_by = None
                m.cancel_requested = False
                m.claims = 0
                m.outcome = None
            self._next_seq = seq
            now = _perf_counter()
            heap = self._heap
            doomed: list[_Task] = []
            for m in members:
                remaining = 0
                dead = False
                for d in m.deps:
                    r = tasks.get(d)
                    if r is None:
                        remaining += 1
                    elif r.state != _SUCCEEDED:
                        remaining += 1
                        if r.state >= _FAILED:
                            dead = True
                m.remaining = remaining
                if not remaining:
                    m.state = _READY
                    m.stamp = now
                    _heappush(heap, m.seq)
                    self._ready_at[m.seq] = m
                    self._ready_count += 1
                if dead:
                    doomed.append(m)
            # The members' dependents outside R keep their smaller seqs.
            self._seq_ordered = False
            self._n_retried += len(members)
            if doomed:
                self._settle((), doomed)
            if self._recorder is not None:
                self._record("Retry", {"t": root.task_id})
            return root.generation

    # ------------------------------------------------------------------ Close

    def close(self, cancel_pending: bool = True) -> CloseReport:
        """Close the scheduler and report every submitted id by the state of its current version.

        not closed -> closed: no more submissions, retries or claims; with ``cancel_pending``,
        every pending/ready version -> cancelled (``blocked_by`` stays none). Running versions
        keep running and may still report. A later ``close()`` changes nothing and returns a
        fresh report. Errors: ``cancel_pending`` not a bool -> ``InvalidArgumentError``.
        """
        if not isinstance(cancel_pending, bool):
            raise InvalidArgumentError(
                f"close({_r(cancel_pending)}): cancel_pending must be True or False"
            )
        with self._lock:
            if not self._closed:
                self._closed = True
                if cancel_pending:
                    endings = self._endings if self._track else None
                    cancelled = 0
                    for rec in self._tasks.values():
                        if rec.state <= _READY:
                            rec.state = _CANCELLED
                            cancelled += 1
                            if endings is not None:
                                endings.append((rec.task_id, rec.generation, TaskState.CANCELLED))
                    self._n_cancelled += cancelled
                    self._ready_count = 0
                    self._heap.clear()
                    self._ready_at.clear()
                if self._recorder is not None:
                    self._record("Close", {"cancelPending": bool(cancel_pending)})
            buckets: list[list[Hashable]] = [[] for _ in _STATES]
            for tid, rec in self._tasks.items():
                buckets[rec.state].append(tid)
            return CloseReport(
                succeeded=tuple(buckets[_SUCCEEDED]),
                failed=tuple(buckets[_FAILED]),
                blocked=tuple(buckets[_BLOCKED]),
                cancelled=tuple(buckets[_CANCELLED]),
                running=tuple(buckets[_RUNNING]),
                pending=tuple(buckets[_PENDING]),
                ready=tuple(buckets[_READY]),
            )

    # ------------------------------------------------------------------ Queries

    def state(self, task_id: Hashable) -> TaskState:
        """Return the state of the current version of ``task_id``.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return _STATES[self._lookup("state", task_id).state]

    def info(self, task_id: Hashable) -> TaskInfo:
        """Return what is known about the current version of ``task_id``.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            rec = self._lookup("info", task_id)
            cause = rec.blocked_by
            return TaskInfo(
                task_id=rec.task_id,
                generation=rec.generation,
                state=_STATES[rec.state],
                deps=frozenset(rec.deps),
                remaining_deps=rec.remaining,
                blocked_by=None if cause is None else cause.task_id,
                cancel_requested=rec.cancel_requested,
                result=rec.outcome if rec.state == _SUCCEEDED else None,
                error=rec.outcome if rec.state == _FAILED else None,
            )

    def snapshot(self) -> Snapshot:
        """Return the spec variables as an immutable ``Snapshot`` (one ``VersionView`` per id)."""
        with self._lock:
            return self._snapshot_locked()

    def stats(self) -> SchedulerStats:
        """Return the counters and duration summaries gathered so far."""
        with self._lock:
            # A claimed version is running, or ended from running: succeeded, failed or
            # acknowledged a cancel.
            claimed = self._running + self._n_succeeded + self._n_stopped
            return SchedulerStats(
                # every version takes one seq, from submit() or from retry()
                submitted=self._next_seq - 1 - self._n_retried,
                retried=self._n_retried,
                claimed=claimed,
                succeeded=self._n_succeeded,
                failed=self._n_failed,
                cancelled=self._n_cancelled,
                blocked=self._n_blocked,
                cycles_reported=self._n_cycles,
                claim_conflicts=self._n_conflicts,
                duplicate_callbacks=self._n_duplicates,
                stale_callbacks=self._n_stale,
                ready_wait=DurationSummary(claimed, self._wait_total, self._wait_max),
                run_time=DurationSummary(self._n_succeeded + self._n_stopped, self._run_total,
                                         self._run_max),
            )

    def pop_endings(self) -> list[tuple[Hashable, int, TaskState]]:
        """Return and forget the versions that reached a terminal state, in the order they did.

        Each entry is ``(task_id, generation, state)``; versions blocked by Settle and cancelled
        by ``close()`` are included. Always ``[]`` unless built with ``track_endings=True``.
        """
        lock = self._lock
        lock.acquire()
        try:
            endings = self._endings
            if endings:
                self._endings = []
                return endings
            return []
        finally:
            lock.release()

    @property
    def max_concurrency(self) -> int:
        """The most versions that may run at once."""
        return self._max

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

    def _snapshot_locked(self) -> Snapshot:
        """The spec variables now. Lock held."""
        views: dict[Hashable, VersionView] = {}
        for tid, rec in self._tasks.items():
            cause = rec.blocked_by
            views[tid] = VersionView(
                rec.generation,
                _STATES[rec.state],
                frozenset(rec.deps),
                rec.remaining,
                None if cause is None else cause.task_id,
                rec.cancel_requested,
                rec.claims,
                rec.seq,
            )
        return Snapshot(self._started, self._closed, self._next_seq, MappingProxyType(views))

    def _record(self, action: str, params: dict[str, Any]) -> None:
        """Give the step just taken to the recorder. Lock held, recorder set."""
        assert self._recorder is not None
        self._recorder.record(action, params, self._snapshot_locked())

    def _lookup(self, call: str, task_id: Hashable) -> _Task:
        """The record of ``task_id``. Lock held."""
        try:
            rec = self._tasks.get(task_id)
        except TypeError:
            raise InvalidArgumentError(f"{call}({_r(task_id)}): task id is unhashable") from None
        if rec is None:
            raise UnknownTaskError(f"{call}({_r(task_id)}): unknown task", task_id)
        return rec

    def _insist_current(self, call: str, rec: _Task, generation: int) -> None:
        """Raise StaleGenerationError unless ``generation`` is the current one. Lock held."""
        if generation != rec.generation:
            self._n_stale += 1
            if self._recorder is not None:
                self._record("StaleCallback", {"t": rec.task_id, "g": generation})
            raise StaleGenerationError(
                f"{call}({_r(rec.task_id)}, {generation}): generation {generation} is stale, "
                f"current is {rec.generation}",
                rec.task_id, generation, rec.generation,
            )

    def _check_callback(self, call: str, task_id: Hashable, generation: int) -> _Task | TaskState:
        """The running record a callback steps, or the terminal state it returns. Lock held.

        Errors, in this order: unhashable id, unknown id, generation not an int, stale
        generation, pending/ready version.
        """
        rec = self._lookup(call, task_id)
        if not _is_int(generation):
            raise InvalidArgumentError(
                f"{call}({_r(task_id)}, {_r(generation)}): generation must be an int"
            )
        self._insist_current(call, rec, generation)
        st = rec.state
        if st == _RUNNING:
            return rec
        if st >= _SUCCEEDED:
            self._n_duplicates += 1
            if self._recorder is not None:
                self._record("RepeatedCallback", {"t": rec.task_id})
            return _STATES[st]
        raise InvalidTransitionError(
            f"{call}({_r(task_id)}, {generation}): version {generation} is "
            f"{_STATES[st].value}, not running"
        )

    def _end_running(
        self, call: str, task_id: Hashable, generation: int, to: int, error: Any
    ) -> TaskState:
        """Fail or acknowledge the cancel of a running version, then Settle."""
        with self._lock:
            checked = self._check_callback(call, task_id, generation)
            if not isinstance(checked, _Task):
                return checked
            rec = checked
            rec.state = to
            ran = _perf_counter() - rec.stamp
            self._run_total += ran
            if ran > self._run_max:
                self._run_max = ran
            self._n_stopped += 1
            self._running -= 1
            if to == _FAILED:
                rec.outcome = error
                self._n_failed += 1
            else:
                self._n_cancelled += 1
            if self._track:
                self._endings.append((rec.task_id, rec.generation, _STATES[to]))
            self._settle((rec,), ())
            if self._recorder is not None:
                self._record("Fail" if to == _FAILED else "AcknowledgeCancel",
                             {"t": rec.task_id, "g": rec.generation})
            return _STATES[to]

    def _settle(self, dead: Iterable[_Task], fresh: Iterable[_Task]) -> None:
        """Spread blocking (spec: Settle) from what this step changed. Lock held.

        ``dead``: versions that just died; ``fresh``: new pending/ready versions with a dead dep.
        Before the step no pending/ready version had a dead dep, so the set B of the spec is
        exactly what a breadth-first search over the reverse index from these seeds reaches
        through pending/ready versions.
        """
        # A version joins B by becoming blocked at once: its state then keeps the search from
        # visiting it again, and "dead or in B" below is just "dead".
        order: list[_Task] = []
        append = order.append
        was_ready = 0
        for gone in dead:
            for x in gone.dependents:
                if x.state <= _READY:
                    was_ready += x.state
                    x.state = _BLOCKED
                    append(x)
        for x in fresh:
            if x.state <= _READY:
                was_ready += x.state
                x.state = _BLOCKED
                append(x)
        if not order:
            return
        for m in order:  # grows while iterating: breadth-first
            for x in m.dependents:
                if x.state <= _READY:
                    was_ready += x.state  # _READY == 1, _PENDING == 0
                    x.state = _BLOCKED
                    append(x)
        self._ready_count -= was_ready
        self._n_blocked += len(order)
        tasks = self._tasks
        get = tasks.get
        for x in order:
            cause: _Task | None = None
            for d in x.deps:
                r = get(d)
                if r is not None and r.state >= _FAILED and (cause is None or r.seq < cause.seq):
                    cause = r
            x.blocked_by = cause
        if self._track:
            order.sort(key=_seq_of)
            self._endings.extend((x.task_id, x.generation, TaskState.BLOCKED) for x in order)

    def _cycle_through(self, rec: _Task, new_deps: tuple[Hashable, ...]) -> list[Hashable] | None:
        """The cycle that making ``rec`` depend on ``new_deps`` would close, if any. Lock held.

        Searches the ancestors of the new deps (following dependency edges) for ``rec``; the path
        is ``[t, ..., d, t]``, each entry a dependency of the next.
        """
        tasks = self._tasks
        # parent[y] = the version whose dep y is, on the path back to a new dep (None: a root)
        parent: dict[_Task, _Task | None] = {}
        queue: list[_Task] = []
        for d in new_deps:
            r = tasks[d]
            if r not in parent:
                parent[r] = None
                queue.append(r)
        for node in queue:  # grows while iterating: breadth-first
            for d in node.deps:
                r = tasks[d]
                if r is rec:
                    path: list[Hashable] = [rec.task_id]
                    cur: _Task | None = node
                    while cur is not None:
                        path.append(cur.task_id)
                        cur = parent[cur]
                    path.append(rec.task_id)
                    return path
                if r not in parent:
                    parent[r] = node
                    queue.append(r)
        return None


def _hashes(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _find_cycles(records: Iterable[_Task]) -> list[list[Hashable]]:
    """One cycle path per strongly connected component with a cycle (all deps submitted).

    Kahn's algorithm first removes every version not on or behind a cycle; an iterative Tarjan
    then splits the rest into components. Components are reported in the order of their smallest
    seq, each as the shortest cycle through that member.
    """
    indegree: dict[_Task, int] = {}
    queue: list[_Task] = []
    for rec in records:
        n = len(rec.deps)
        indegree[rec] = n
        if not n:
            queue.append(rec)
    for rec in queue:  # grows while iterating
        for x in rec.dependents:
            n = indegree[x] - 1
            indegree[x] = n
            if not n:
                queue.append(x)
    if len(queue) == len(indegree):
        return []
    rest = {rec: None for rec, n in indegree.items() if n}

    # Iterative Tarjan over the dependents edges of the leftover versions.
    index: dict[_Task, int] = {}
    low: dict[_Task, int] = {}
    on_stack: set[_Task] = set()
    stack: list[_Task] = []
    components: list[list[_Task]] = []
    counter = 0
    for root in rest:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(root.dependents))]
        while work:
            v, successors = work[-1]
            descended = False
            for w in successors:
                if w not in rest:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(w.dependents)))
                    descended = True
                    break
                if w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                component: list[_Task] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w is v:
                        break
                if len(component) > 1:
                    components.append(component)

    cycles: list[tuple[int, list[Hashable]]] = []
    for component in components:
        members = set(component)
        start = min(component, key=_seq_of)
        # Shortest cycle through start: breadth-first along dependents inside the component.
        came_from: dict[_Task, _Task] = {}
        frontier = [start]
        found: _Task | None = None
        for node in frontier:
            for x in node.dependents:
                if x is start:
                    found = node
                    break
                if x in members and x not in came_from:
                    came_from[x] = node
                    frontier.append(x)
            if found is not None:
                break
        assert found is not None  # start lies on a cycle inside its component
        back: list[Hashable] = [start.task_id]
        step = found
        while step is not start:
            back.append(step.task_id)
            step = came_from[step]
        back.append(start.task_id)
        back.reverse()
        cycles.append((start.seq, back))
    cycles.sort(key=lambda item: item[0])
    return [path for _, path in cycles]


class _Checker:
    """check_invariants(): recompute every invariant from the raw structures. Lock held."""

    def __init__(self, scheduler: TaskScheduler) -> None:
        self.s = scheduler

    @staticmethod
    def fail(invariant: str, detail: str) -> None:
        raise InvariantViolation(invariant, detail)

    def run(self) -> None:
        self.type_ok()
        self.at_most_one_claim_per_version()
        self.indegree_invariant()
        self.concurrency_bound()
        self.blocked_has_cause()
        self.blocked_propagated()
        self.sealed_graph()

    def type_ok(self) -> None:
        s, name = self.s, "TypeOK"
        if not isinstance(s._started, bool) or not isinstance(s._closed, bool):
            self.fail(name, "started/closed are not booleans")
        if not _is_int(s._next_seq) or s._next_seq < 1:
            self.fail(name, f"next_seq {s._next_seq!r} is not an int >= 1")
        last = 0
        for tid, rec in s._tasks.items():
            if not isinstance(rec, _Task) or rec.task_id is not tid:
                self.fail(name, f"_tasks[{_r(tid)}] is not the record of {_r(tid)}")
            if not _is_int(rec.generation) or rec.generation < 1:
                self.fail(name, f"{_r(tid)}: generation {rec.generation!r} is not an int >= 1")
            if not _is_int(rec.state) or not _PENDING <= rec.state <= _CANCELLED:
                self.fail(name, f"{_r(tid)}: state {rec.state!r} is not a state")
            if not _is_int(rec.seq) or not last < rec.seq < s._next_seq:
                self.fail(name, f"{_r(tid)}: seq {rec.seq!r} out of order or >= next_seq")
            last = rec.seq
            if not isinstance(rec.deps, tuple) or len(set(rec.deps)) != len(rec.deps):
                self.fail(name, f"{_r(tid)}: deps {rec.deps!r} is not a tuple without repeats")
            if tid in rec.deps:
                self.fail(name, f"{_r(tid)} depends on itself")
            if not _is_int(rec.remaining) or rec.remaining < 0:
                self.fail(name, f"{_r(tid)}: remaining_deps {rec.remaining!r} is not an int >= 0")
            if not isinstance(rec.cancel_requested, bool):
                self.fail(name, f"{_r(tid)}: cancel_requested is not a bool")
            if rec.blocked_by is not None and not isinstance(rec.blocked_by, _Task):
                self.fail(name, f"{_r(tid)}: blocked_by {rec.blocked_by!r} is not a record")
            if not isinstance(rec.dependents, dict):
                self.fail(name, f"{_r(tid)}: dependents is not a dict")
        for entry in s._heap:
            if not _is_int(entry) or not 1 <= entry < s._next_seq:
                self.fail(name, f"ready heap entry {entry!r} is not a seq")
        for seq, rec in s._ready_at.items():
            if not _is_int(seq) or not isinstance(rec, _Task):
                self.fail(name, f"ready index entry {seq!r}: {rec!r} is not seq: record")

    def at_most_one_claim_per_version(self) -> None:
        name = "AtMostOneClaimPerVersion"
        for tid, rec in self.s._tasks.items():
            if rec.claims not in (0, 1):
                self.fail(name, f"{_r(tid)}: claims {rec.claims!r} is not 0 or 1")
            st = rec.state
            if st in (_PENDING, _READY, _BLOCKED) and rec.claims:
                self.fail(name, f"{_r(tid)}: {_STATES[st].value} version counts a claim")
            if st in (_RUNNING, _SUCCEEDED, _FAILED) and not rec.claims:
                self.fail(name, f"{_r(tid)}: {_STATES[st].value} version was never claimed")
            if rec.cancel_requested and not rec.claims:
                self.fail(name, f"{_r(tid)}: cancel requested on a version never claimed")

    def indegree_invariant(self) -> None:
        s, name = self.s, "IndegreeInvariant"
        tasks = s._tasks
        edges = 0
        ready = 0
        for tid, rec in tasks.items():
            for d in rec.deps:
                holder = tasks[d].dependents if d in tasks else s._dangling.get(d, {})
                if rec not in holder:
                    self.fail(name, f"reverse index lacks the edge {_r(tid)} -> {_r(d)}")
                edges += 1
            if rec.state <= _READY:
                ready += rec.state == _READY
                count = sum(1 for d in rec.deps if d not in tasks or tasks[d].state != _SUCCEEDED)
                if rec.remaining != count:
                    self.fail(name, f"{_r(tid)}: remaining_deps {rec.remaining} but {count} "
                                    "deps not succeeded")
                if (rec.state == _PENDING) != (count > 0):
                    self.fail(name, f"{_r(tid)} is {_STATES[rec.state].value} with "
                                    f"{count} deps not succeeded")
        indexed = 0
        for tid, rec in tasks.items():
            for x in rec.dependents:
                if tasks.get(x.task_id) is not x or tid not in x.deps:
                    self.fail(name, f"reverse index holds {_r(x.task_id)} under {_r(tid)} "
                                    "with no such dependency")
                indexed += 1
        for d, waiting in s._dangling.items():
            if d in tasks or not waiting:
                self.fail(name, f"dangling index entry {_r(d)} is stale")
            for x in waiting:
                if tasks.get(x.task_id) is not x or d not in x.deps:
                    self.fail(name, f"dangling index holds {_r(x.task_id)} under {_r(d)} "
                                    "with no such dependency")
                indexed += 1
        if indexed != edges:
            self.fail(name, f"reverse index holds {indexed} edges, deps hold {edges}")
        if s._ready_count != ready:
            self.fail(name, f"ready count {s._ready_count} but {ready} ready versions")
        heap = s._heap
        for i in range(1, len(heap)):
            if heap[(i - 1) // 2] > heap[i]:
                self.fail(name, f"ready heap out of order at {i}")
        queued = set(heap)
        for tid, rec in tasks.items():
            if rec.state == _READY and (rec.seq not in queued
                                        or s._ready_at.get(rec.seq) is not rec):
                self.fail(name, f"ready version {_r(tid)} is missing from the ready heap")

    def concurrency_bound(self) -> None:
        s, name = self.s, "ConcurrencyBound"
        running = sum(1 for rec in s._tasks.values() if rec.state == _RUNNING)
        if s._running != running:
            self.fail(name, f"running count {s._running} but {running} running versions")
        if running > s._max:
            self.fail(name, f"{running} versions running, max_concurrency is {s._max}")

    def blocked_has_cause(self) -> None:
        tasks, name = self.s._tasks, "BlockedHasCause"
        for tid, rec in tasks.items():
            cause = rec.blocked_by
            if (rec.state == _BLOCKED) != (cause is not None):
                self.fail(name, f"{_r(tid)} is {_STATES[rec.state].value} with blocked_by "
                                f"{'set' if cause is not None else 'unset'}")
            if cause is not None and (cause.task_id not in rec.deps
                                      or tasks.get(cause.task_id) is not cause):
                self.fail(name, f"{_r(tid)}: blocked_by {_r(cause.task_id)} is not a dependency")

    def blocked_propagated(self) -> None:
        tasks, name = self.s._tasks, "BlockedPropagated"
        for tid, rec in tasks.items():
            if rec.state <= _READY:
                for d in rec.deps:
                    r = tasks.get(d)
                    if r is not None and r.state >= _FAILED:
                        self.fail(name, f"{_STATES[rec.state].value} {_r(tid)} depends on "
                                        f"{_STATES[r.state].value} {_r(d)}")

    def sealed_graph(self) -> None:
        s, name = self.s, "SealedGraph"
        tasks = s._tasks
        if s._seq_ordered:
            for tid, rec in tasks.items():
                for d in rec.deps:
                    if d not in tasks or tasks[d].seq >= rec.seq:
                        self.fail(name, f"graph marked seq-ordered but {_r(tid)} -> {_r(d)} "
                                        "is not")
        if not s._started:
            return
        if s._dangling:
            self.fail(name, f"started with unknown dependencies {list(s._dangling)!r:.200}")
        cycles = _find_cycles(tasks.values())
        if cycles:
            self.fail(name, f"started graph has the cycle {_show_path(cycles[0])}")
