"""The production TaskScheduler: an in-memory dependency scheduler; implements spec/Scheduler.tla.

Callers submit task ids with dependency ids and a function; a version is handed out by ``ready()``
only when every dependency's current version has succeeded, at most ``max_concurrency`` at a time,
in submission-sequence order. The vocabulary, the state effects and the errors of every method are
those of ``docs/semantics.md``; the method docstrings name the spec action (``Spec: Claim``) where
the API name differs.

State: one row per version, fields in columns. Every version (from ``submit``, a resubmission or
``retry``) takes the next row, so row order is ``seq`` order, and ``_rows[t]`` is the row of the
current version of ``t``. The spec's variables at index ``t``, with ``r = _rows[t]``:

==================  ====================================================================
``generation[t]``   ``_gen[r]``
``state[t]``        ``_state[r]``: one of the codes ``_PENDING`` .. ``_CANCELLED``
``deps[t]``         ``_deps[r]`` (the tuple the caller gave, or built from its iterable)
``remainingDeps``   ``_remaining[r]``: the indegree left while pending/ready
``blockedBy[t]``    ``_ids[_blocked_by[r]]``: a sparse dict, row -> row of the cause
``cancelRequested`` ``r in _cancel_requested``: a sparse set of rows
``claims[t]``       ``_claims[r]``: 0 or 1
``seq[t]``          ``_seq_of(r)``: ``_seq[r]`` for a row kept by the last compaction, else
                    ``r + nextSeq - (number of rows)`` (each row made since took one seq)
``nextSeq``         ``_next_seq``; ``started``, ``closed``: ``_started``, ``_closed``
``provenance[t]``   ``_provenance[r]``: a sparse dict, row -> the :class:`_Link` ending the
                    version's path (blocked and cancelled rows only)
==================  ====================================================================

Beside them: ``_ids[r]`` (the task id), ``_fn[r]``, ``_outcome[r]`` (result or error),
``_stamp`` (a sparse dict of ``perf_counter()`` stamps, held only for the versions in flight)
and ``_dependents[r]`` (the reverse index: a list of rows, built only for a row that has
dependents). The int columns are lists of small ints, which CPython indexes much faster than a
bytearray or array (an ``array('d')`` of stamps costs more to index than a dict of the few in
flight); seq needs a column only for compacted rows.

A replaced version's row is *dead* (state code ``_DEAD``) and lets go of its id, deps, fn, outcome
and dependents; the reverse index and the ready heap hold rows and skip dead or no longer ready
ones when they meet them (lazy deletion). When such garbage outweighs what is live, the columns
are compacted: the live rows are renumbered in order (their ``seq`` kept in ``_seq``) and the heap
is rebuilt, at an amortized O(1) per version, so memory follows the live tasks, not every version
ever made. Ints and floats in flat columns give the cyclic garbage collector nothing to walk per
task but a dependents list.

Cost: a whole run is O(V + E). Each operation touches only the versions it changes and their edges
(the ready order is a heap of rows with lazy deletion, sorted once instead of popped when
``ready()`` claims every ready version; blocking spreads by a breadth-first search over the
reverse index); only ``start()`` (once), ``close()``, ``snapshot()``, ``check_invariants()`` and
the amortized compaction look at every row. Nothing recurses.

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
import time
from array import array
from collections.abc import Callable, Hashable, Iterable, MutableSequence
from dataclasses import dataclass
from dataclasses import replace as _replace
from itertools import repeat
from types import MappingProxyType
from typing import Any, Final, NamedTuple, Protocol, TypeVar

from refsched import sync
from refsched.checked import Checker, LockChecked, checker_of, find_current
from refsched.cycles import find_cycles as _find_cycles
from refsched.dag.signals import UNLABELLED, SignalBook, Signals
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    StaleGenerationError,
    TaskRunningError,
    UnknownDependencyError,
)
from refsched.types import (
    Claim,
    CloseReport,
    OptionalDepsView,
    ParentOutcome,
    Provenance,
    Snapshot,
    TaskInfo,
    TaskState,
    VersionView,
)
from refsched.values import check_note as _check_note
from refsched.values import hashes as _hashes
from refsched.values import is_int as _is_int
from refsched.values import shown as _r

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

# State codes, ordered so that ranges mean something: <= _READY is "pending or ready" (what
# Settle may block), >= _SUCCEEDED is terminal, _FAILED .. _CANCELLED is dead. _DEAD marks the
# row of a replaced version: it is no spec state, fails every guard that picks a version to step
# (== _PENDING, <= _READY, == _READY), and is skipped wherever all rows are read.
_PENDING, _READY, _RUNNING, _SUCCEEDED, _FAILED, _BLOCKED, _CANCELLED, _DEAD = range(8)
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
_NO_IDS: Final[tuple[()]] = ()  # submit()'s default optional deps
_heappush = heapq.heappush
_heappop = heapq.heappop
_tuple_new = tuple.__new__
_NOTHING: Final = object()  # a sentinel: no value a caller passes is this object
_NO_DEP_TUPLE: Final[tuple[Hashable, ...]] = ()

_Column = TypeVar("_Column", bound="MutableSequence[Any] | dict[int, Any] | set[int]")


def _column(owner: TaskScheduler, name: str, empty: _Column) -> _Column:
    """The column ``owner.<name>``, made from ``empty``: ``empty`` itself.

    ``empty`` is a list, bytearray or array, or for a sparse column a dict or set keyed by row.
    Every column is made here, so that ``refsched.explore.discipline`` can swap this function
    for one whose columns check, at each write, that the writing thread holds ``owner``'s lock.
    """
    return empty


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


def _show_path(path: Iterable[Hashable]) -> str:
    return " -> ".join(_r(t) for t in path)


class _Link(NamedTuple):
    """The last step of a provenance path: the version of ``task_id`` reached from ``prev``.

    A root's link has no ``prev``; each blocked version's link points to its cause's, so a
    path costs one link per blocked version, whatever its length (``_provenance_of`` reads
    it out). ``root`` is the root's own record, shared along every path from it.
    """

    root: Provenance
    prev: _Link | None
    task_id: Hashable


def _provenance_of(link: _Link) -> Provenance:
    """The record ``link`` ends: its root's, with the path from the root to it."""
    path: list[Hashable] = []
    step: _Link | None = link
    while step is not None:
        path.append(step.task_id)
        step = step.prev
    path.reverse()
    return _replace(link.root, path=tuple(path))


class TaskScheduler(LockChecked):
    """An in-memory dependency scheduler; every method is thread-safe.

    The life of a version: pending -> ready -> running -> succeeded | failed | cancelled, or
    pending/ready -> cancelled | blocked. See ``docs/semantics.md`` for the contract.

    Each version is a row of the columns below (the module docstring maps them to the spec's
    variables): ``_rows[t]`` is the row of the current version of ``t``; every other row is
    dead until a compaction renumbers the live ones.
    """

    # Slots, not a __dict__: past 30 attributes an instance dict stops sharing its keys, and
    # each self._x read and write on the per-task paths then goes through that dict.
    __slots__ = (
        "_blocked_by", "_cancel_requested", "_claims", "_clock", "_closed", "_dangling",
        "_dependents", "_deps", "_endings", "_entries", "_failures", "_fn", "_garbage", "_gen",
        "_heap", "_ids", "_inputs", "_labels", "_lock",
        "_max", "_n_blocked", "_n_cancelled", "_n_conflicts", "_n_cycles", "_n_duplicates",
        "_n_failed", "_n_retried", "_n_stale", "_n_stopped", "_n_succeeded", "_next_seq",
        "_optional", "_outcome", "_provenance", "_ready_count", "_recorder", "_remaining",
        "_rows", "_run_max", "_run_total", "_running", "_seq", "_seq_ordered", "_signals",
        "_stamp", "_started", "_state", "_track", "_wait_max", "_wait_total",
    )

    def __init__(self, max_concurrency: int, *, track_endings: bool = False,
                 recorder: Recorder | None = None,
                 clock: Callable[[], float] | None = None,
                 max_partitions: int | None = None) -> None:
        """Build an empty, unstarted scheduler running at most ``max_concurrency`` versions.

        ``track_endings`` keeps the endings ``pop_endings()`` returns; ``recorder`` is given
        every spec step as it is taken (see :class:`Recorder`); ``clock`` (default
        ``time.monotonic``) gives the time a provenance record says its root ended;
        ``max_partitions`` keeps ``signals()`` for that many (task type, tenant) partitions
        and one overflow partition (None: no signals, and no cost). Errors:
        ``max_concurrency`` not an int (bool excluded) or negative, ``track_endings`` not a
        bool, ``recorder`` without a ``record`` method, ``clock`` not callable,
        ``max_partitions`` neither None nor an int >= 1 -> ``InvalidArgumentError``.
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
        if max_partitions is not None and (not _is_int(max_partitions) or max_partitions < 1):
            raise InvalidArgumentError(
                f"TaskScheduler(max_partitions={_r(max_partitions)}): max_partitions must be "
                "None or an int >= 1"
            )
        if clock is not None and not callable(clock):
            raise InvalidArgumentError(f"TaskScheduler(clock={_r(clock)}): clock is not callable")
        self._clock: Final = time.monotonic if clock is None else clock
        self._max: Final = int(max_concurrency)
        self._track: Final = bool(track_endings)
        self._recorder = recorder  # set here once, never changed
        # _lock guards every attribute below, and every item of every column.
        self._lock = sync.Lock()
        self._started = False
        self._closed = False
        self._next_seq = 1
        # every submitted id -> the row of its current version; a row is live <=> it is here
        self._rows: dict[Hashable, int] = {}
        # The columns, one item per row; a row's items are its version's fields. In a dead row
        # (state _DEAD): id None, deps (), fn None, outcome None, dependents None.
        # the task id (the object given by the call that made the version)
        self._ids: list[Hashable] = _column(self, "_ids", [])
        # generation >= 1; +1 for each new version of the id (submit or retry)
        self._gen: list[int] = _column(self, "_gen", [])
        # the seqs of the rows the last compaction kept (the others': _seq_of()); with them,
        # 1 <= seq < next_seq, strictly increasing with the row (row order is seq order)
        self._seq: array[int] = _column(self, "_seq", array("q"))
        # one of _PENDING .. _CANCELLED (index into _STATES), or _DEAD
        self._state: list[int] = _column(self, "_state", [])
        # 0 or 1; 1 <=> the version was claimed (running, succeeded, failed, some cancelled)
        self._claims: list[int] = _column(self, "_claims", [])
        # the version's deps in the order given: no duplicates, its id not among them
        self._deps: list[tuple[Hashable, ...]] = _column(self, "_deps", [])
        # while pending/ready: == number of deps not succeeded, and state == _PENDING <=> > 0;
        # frozen once the version leaves pending/ready
        self._remaining: list[int] = _column(self, "_remaining", [])
        # stored for the claimer; the scheduler never calls it
        self._fn: list[Callable[..., Any] | None] = _column(self, "_fn", [])
        # the result given to complete() when succeeded, the error given to fail() when
        # failed, else None
        self._outcome: list[Any] = _column(self, "_outcome", [])
        # reverse index, None while empty: the rows whose deps contain this row's id, each live
        # one once and in row order; entries of dead rows are skipped (lazy deletion). It
        # belongs to the id: a new version takes over its predecessor's list.
        self._dependents: list[list[int] | None] = _column(self, "_dependents", [])
        # Sparse columns. row -> the row of the current version of the dep that blocked it;
        # keys <=> blocked
        self._blocked_by: dict[int, int] = _column(self, "_blocked_by", {})
        # the rows of versions asked to stop while running (kept once they end)
        self._cancel_requested: set[int] = _column(self, "_cancel_requested", set())
        # row -> the deps whose edge is optional (a non-empty subset of the row's deps); keys
        # <=> the version has optional edges. Every other edge is required.
        self._optional: dict[int, frozenset[Hashable]] = _column(self, "_optional", {})
        # row -> how each optional dep had ended when the version was claimed (its input
        # summary); only for claimed versions with optional edges
        self._inputs: dict[int, dict[Hashable, ParentOutcome]] = _column(self, "_inputs", {})
        # row -> the link that ends the version's provenance path; keys <=> blocked or
        # cancelled (spec: provenance). Touched only when a version is blocked or cancelled.
        self._provenance: dict[int, _Link] = _column(self, "_provenance", {})
        # row -> the root link of a failed version, which its blocked dependents extend
        # (a failed version has no provenance of its own)
        self._failures: dict[int, _Link] = _column(self, "_failures", {})
        # row -> perf_counter() when the version became ready (while ready; kept if it goes
        # back to pending), when it was claimed (while running); no entry once it ends, so a
        # float is kept only for the versions in flight
        self._stamp: dict[int, float] = _column(self, "_stamp", {})
        # row -> (task type, tenant) of the version, when the caller named either
        self._labels: dict[int, tuple[str | None, Hashable]] = _column(self, "_labels", {})
        # the partitions behind signals(); None: not kept (max_partitions None)
        self._signals = None if max_partitions is None else SignalBook(max_partitions)
        # dependents of ids never submitted: absent id -> {row: None} (reverse index for absent
        # deps, entries removed as their rows die); empty once started
        self._dangling: dict[Hashable, dict[int, None]] = {}
        # the ready order: a heap of rows that became ready. An entry whose row is no longer
        # ready (claimed, cancelled, blocked, back to pending, dead) is stale and skipped when
        # popped (lazy deletion); a ready row is in it at least once.
        self._heap: list[int] = []
        self._ready_count = 0  # == number of ready versions
        self._running = 0  # == number of running versions <= _max
        # True => every dep of every current version is submitted with a smaller seq, so the
        # graph is acyclic and start() can skip its cycle search
        self._seq_ordered = True
        # What compaction would free: dead rows plus their entries left in dependents lists;
        # and the number of entries in the dependents lists, live or not. Stale heap entries
        # are len(_heap) - _ready_count.
        self._garbage = 0
        self._entries = 0
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
        fn: Callable[..., Any] | None = None, optional: Iterable[Hashable] = _NO_IDS, *,
        tenant: Hashable = None, task_type: str | None = None,
    ) -> int:
        """Submit a new version of ``task_id`` depending on ``deps``; return its generation.

        Spec: Submit, or SubmitOptional when ``optional`` names an id. The edges to ``deps``
        are required: the version waits for each to succeed, and is blocked when one cannot.
        The edges to ``optional`` are optional: it waits for each to end, in any state, and is
        never blocked by it (``docs/semantics.md`` has the table). absent or
        pending/ready/terminal -> pending (some dep not settled) or ready; a replaced version
        that had settled an edge of a pending/ready dependent (it succeeded; or it ended, and
        the edge is optional) turns that dependent back to pending; then blocking spreads
        (Settle). Errors, in this order: unhashable id, ``deps`` or ``optional`` not an
        iterable of hashables (a str or bytes is refused too), a dep twice (in one list or in
        both), ``task_id`` a dep, ``fn`` not callable, ``tenant`` unhashable, ``task_type``
        neither None nor a str -> ``InvalidArgumentError``; closed ->
        ``SchedulerClosedError``; current version running -> ``TaskRunningError``; after start:
        a dep never submitted -> ``UnknownDependencyError``; after start: the new edges close a
        cycle -> ``CycleError``. An id or dep whose ``__hash__`` or ``__eq__`` raises makes the
        call raise with nothing changed. ``tenant`` and ``task_type`` are the version's
        partition key in ``signals()``.
        """
        try:
            hash(task_id)
        except TypeError:
            raise InvalidArgumentError(f"submit({_r(task_id)}): task id is unhashable") from None
        if type(deps) is tuple:
            dep_t: tuple[Hashable, ...] = deps
        else:
            dep_t = _id_tuple("submit", task_id, "deps", deps)
        # the optional deps, None when there are none (the usual case costs one test)
        opt_s: frozenset[Hashable] | None = None
        if optional is not _NO_IDS:  # () itself, the default: one identity test
            opt_t = _id_tuple("submit", task_id, "optional", optional)
            if opt_t:
                deps = dep_t = dep_t + opt_t
                _check_deps(task_id, deps, dep_t)
                opt_s = frozenset(opt_t)
        # The deps are checked for repeats and for task_id as they are looked up under the
        # lock, before any change; anything irregular there, and any call about to fail for a
        # reason ranked after a bad dep, runs the full check first.
        if fn is not None and not callable(fn):
            _check_deps(task_id, deps, dep_t)
            raise InvalidArgumentError(f"submit({_r(task_id)}): fn {_r(fn)} is not callable")
        labels = None  # the version's partition key, None when the caller named none
        if tenant is not None or task_type is not None:
            try:
                labels = _labels_of("submit", task_id, task_type, tenant)
            except InvalidArgumentError:
                _check_deps(task_id, deps, dep_t)  # a bad dep is reported first
                raise

        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                _check_deps(task_id, deps, dep_t)
                raise SchedulerClosedError(f"submit({_r(task_id)}): the scheduler is closed")
            # Every lookup of a caller's id (its __hash__ and __eq__ may raise) happens before
            # the first change; the changes below find what they need in these results.
            rows = self._rows
            state = self._state
            dangling = self._dangling
            old = rows.get(task_id)  # the row of the version this one replaces
            if old is not None and state[old] == _RUNNING:
                _check_deps(task_id, deps, dep_t)
                raise TaskRunningError(
                    f"submit({_r(task_id)}): version {self._gen[old]} is running"
                )
            get = rows.get
            # The rows of the deps: one C-level pass finds them when the deps are sound and all
            # submitted. Otherwise the deps are checked, and (only before start: after it, that
            # is an error) the rows of the deps submitted are listed, with
            # (dep, dangling.get(dep)) for each dep never submitted.
            # (a set of rows may hold None, for a dep never submitted, until it is checked)
            dep_rows: set[Any] | list[int] | tuple[()] = ()
            absent: list[tuple[Hashable, dict[int, None] | None]] | None = None
            if dep_t:
                try:
                    dep_rows = set(map(get, dep_t))
                except TypeError:  # an unhashable dep, or an __eq__ that says so
                    dep_rows = ()
                # each dep submitted, given once (a row per dep) and not task_id itself
                if len(dep_rows) != len(dep_t) or None in dep_rows or old in dep_rows:
                    _check_deps(task_id, deps, dep_t)  # raises unless some deps are absent
                    dep_rows = []
                    append = dep_rows.append
                    for d in dep_t:
                        r = get(d)
                        if r is not None:
                            append(r)
                        elif absent is None:
                            absent = [(d, dangling.get(d))]
                        else:
                            absent.append((d, dangling.get(d)))
            dependents = self._dependents
            if self._started:
                if absent is not None:
                    missing = list(zip(repeat(task_id), (d for d, _ in absent)))
                    self._charge(labels or UNLABELLED, "unknown_deps")
                    raise UnknownDependencyError(
                        f"submit({_r(task_id)}, {_r(dep_t)}): unknown "
                        f"{'dependency' if len(missing) == 1 else 'dependencies'} "
                        + ", ".join(_r(d) for _, d in missing),
                        missing,
                    )
                if old is not None and dependents[old] and dep_t:
                    cycle = self._cycle_through(old, dep_t)
                    if cycle is not None:
                        self._n_cycles += 1
                        self._charge(labels or UNLABELLED, "cycles_reported")
                        raise CycleError(
                            f"submit({_r(task_id)}, {_r(dep_t)}): the new dependencies close "
                            f"the cycle {_show_path(cycle)}",
                            [cycle],
                        )
            # before start: the versions waiting for this id, which its first version inherits
            adopted = dangling.get(task_id) if old is None and dangling else None
            # the replaced version's deps never submitted, as (dep, dangling[dep])
            old_absent: list[tuple[Hashable, dict[int, None]]] | tuple[()] = ()
            if old is not None and dangling:
                old_absent = _absent_deps(self._deps[old], rows, dangling)

            # Guards passed: mutate. The new version takes the next row.
            if self._signals is not None:
                self._signal_submit(labels, old)
            seq = self._next_seq
            self._next_seq = seq + 1
            row = len(state)
            remaining = 0
            dead = False
            if dep_rows:
                # retry() and add_deps() link a row to its deps with these same lines (add_deps
                # counts only required edges to a dead version as blocking); they are written
                # out in each because here they run once per edge of every submit, where a
                # shared function would add a Python call per edge.
                for r in dep_rows:
                    listed = dependents[r]
                    if listed is None:
                        dependents[r] = [row]
                    else:
                        listed.append(row)
                    st = state[r]
                    if st < _SUCCEEDED:  # pending, ready or running
                        remaining += 1
                    elif st != _SUCCEEDED:  # failed, blocked or cancelled
                        remaining += 1
                        dead = True
                self._entries += len(dep_rows)
                if dead and opt_s is not None:
                    # An optional edge to a version that ended is settled, and blocks nothing.
                    remaining, dead = _settled_optional(rows, state, dep_t, opt_s, remaining)
            if absent is not None:
                # Only before start: an absent dep counts as not succeeded.
                self._seq_ordered = False
                remaining += len(absent)
                for d, waiting in absent:
                    if waiting is None:
                        dangling[d] = {row: None}
                    else:
                        waiting[row] = None
            self._ids.append(task_id)
            self._claims.append(0)
            self._deps.append(dep_t)
            self._remaining.append(remaining)
            self._fn.append(fn)
            self._outcome.append(None)
            if opt_s is not None:
                self._optional[row] = opt_s
            if labels is not None:
                self._labels[row] = labels
            if remaining:
                state.append(_PENDING)
            else:
                state.append(_READY)
                self._stamp[row] = _perf_counter()
                _heappush(self._heap, row)
                self._ready_count += 1
            if old is None:
                generation = 1
                self._gen.append(1)
                rows[task_id] = row
                if adopted is None:
                    dependents.append(None)
                else:
                    dependents.append(list(adopted))
                    self._entries += len(adopted)
                    del dangling[task_id]
            else:
                generation = self._gen[old] + 1
                self._gen.append(generation)
                rows[task_id] = row
                listed = dependents[old]
                dependents.append(listed)
                old_state = state[old]
                self._garbage += 1 + len(self._deps[old]) - len(old_absent)
                self._retire(old)
                if old_state == _READY:
                    self._ready_count -= 1
                for _, gone in old_absent:
                    del gone[old]
                if listed:
                    # Its dependents now have smaller seqs than the new version.
                    self._seq_ordered = False
                    if old_state == _SUCCEEDED:
                        remaining_of = self._remaining
                        for x in listed:
                            st = state[x]
                            if st <= _READY:
                                remaining_of[x] += 1
                                if st == _READY:
                                    state[x] = _PENDING
                                    self._ready_count -= 1
                    elif old_state > _SUCCEEDED and self._optional:
                        self._bump_optional(listed, task_id)
                    blocked_by = self._blocked_by
                    if blocked_by:
                        for x in listed:
                            if blocked_by.get(x) == old:
                                blocked_by[x] = row
            for d, gone in old_absent:
                # only now: the new version may have taken up an absent dep the old one had
                if not gone:
                    del dangling[d]
            if dead:
                self._settle((), (row,))
            if self._recorder is not None:
                if opt_s is None:
                    self._record("Submit", {"t": task_id, "D": frozenset(dep_t)})
                else:
                    self._record("SubmitOptional",
                                 {"t": task_id, "D": frozenset(dep_t), "O": opt_s})
            if self._garbage:
                self._compact_if_wasteful()
            return generation
        finally:
            lock.release()

    def add_deps(self, task_id: Hashable, deps: Iterable[Hashable] = (),
                 optional: Iterable[Hashable] = ()) -> TaskState:
        """Make the pending version of ``task_id`` depend on ``deps`` and ``optional`` too.

        Spec: AddDeps. The edges to ``deps`` are required, those to ``optional`` optional, as
        for ``submit()``. pending -> pending, its count raised by the new deps not settled; or
        -> blocked when a new required dep can no longer succeed (then Settle). One step under
        the lock, so a version that a claim took first refuses the change. Returns the state.
        Errors, in this order, with nothing changed: unhashable id, ``deps`` or ``optional``
        not an iterable of hashables, a dep twice (in one list or in both) ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``; no dep given,
        ``task_id`` a dep, a dep that is one already -> ``InvalidArgumentError``; closed ->
        ``SchedulerClosedError``; the version not pending (ready, running or ended: it keeps
        its deps) -> ``InvalidTransitionError``; after start: a dep never submitted ->
        ``UnknownDependencyError``, new edges that close a cycle -> ``CycleError``.
        """
        call = "add_deps"
        try:
            hash(task_id)
        except TypeError:
            raise InvalidArgumentError(f"{call}({_r(task_id)}): task id is unhashable") from None
        req_t = _id_tuple(call, task_id, "deps", deps)
        opt_t = _id_tuple(call, task_id, "optional", optional)
        new_t = req_t + opt_t
        with self._lock:
            _check_deps(task_id, new_t, new_t, call, check_self=False)
            row = self._lookup(call, task_id)
            if not new_t:
                raise InvalidArgumentError(f"{call}({_r(task_id)}): no dependency given")
            if task_id in new_t:
                raise InvalidArgumentError(
                    f"{call}({_r(task_id)}, {_r(new_t)}): a task cannot depend on itself"
                )
            old_deps = self._deps[row]
            already = [d for d in new_t if d in old_deps]
            if already:
                raise InvalidArgumentError(
                    f"{call}({_r(task_id)}, {_r(new_t)}): "
                    + ", ".join(map(_r, already)) + " already a dependency"
                )
            if self._closed:
                raise SchedulerClosedError(f"{call}({_r(task_id)}): the scheduler is closed")
            state = self._state
            if state[row] != _PENDING and self._signals is not None:
                self._signals.count(self._key(row), "edges_refused")
            if state[row] != _PENDING:
                raise InvalidTransitionError(
                    f"{call}({_r(task_id)}): version {self._gen[row]} is "
                    f"{_STATES[state[row]].value}, not pending"
                )
            get = self._rows.get
            found = [(d, get(d)) for d in new_t]
            absent = [d for d, r in found if r is None]
            if self._started:
                if absent:
                    self._charge(self._key(row), "unknown_deps")
                    raise UnknownDependencyError(
                        f"{call}({_r(task_id)}, {_r(new_t)}): unknown "
                        f"{'dependency' if len(absent) == 1 else 'dependencies'} "
                        + ", ".join(map(_r, absent)),
                        [(task_id, d) for d in absent],
                    )
                if self._dependents[row]:
                    cycle = self._cycle_through(row, new_t)
                    if cycle is not None:
                        self._n_cycles += 1
                        self._charge(self._key(row), "cycles_reported")
                        raise CycleError(
                            f"{call}({_r(task_id)}, {_r(new_t)}): the new dependencies close "
                            f"the cycle {_show_path(cycle)}",
                            [cycle],
                        )
            # Guards passed: mutate.
            opt_s = frozenset(opt_t)
            self._deps[row] = old_deps + new_t
            if opt_s:
                self._optional[row] = self._optional.get(row, frozenset()) | opt_s
            dependents = self._dependents
            added = 0
            dead = False
            for d, r in found:  # as submit() links its deps (see there)
                if r is None:
                    continue
                listed = dependents[r]
                if listed is None:
                    dependents[r] = [row]
                else:
                    listed.append(row)
                st = state[r]
                if st < _SUCCEEDED:  # pending, ready or running
                    added += 1
                elif st != _SUCCEEDED and d not in opt_s:  # a required edge to a dead version
                    added += 1
                    dead = True
                if r > row:  # an edge to a later seq
                    self._seq_ordered = False
            self._entries += len(found) - len(absent)
            if absent:  # only before start: an absent dep counts as not settled
                self._seq_ordered = False
                added += len(absent)
                dangling = self._dangling
                for d in absent:
                    waiting = dangling.get(d)
                    if waiting is None:
                        dangling[d] = {row: None}
                    else:
                        waiting[row] = None
            self._remaining[row] += added
            if dead:
                self._settle((), (row,))
            if self._recorder is not None:
                self._record("AddDeps", {"t": task_id, "D": frozenset(new_t), "O": opt_s})
            return _STATES[state[row]]

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
            rows = self._rows
            if self._dangling:
                holders: dict[int, None] = {}
                for waiting in self._dangling.values():
                    holders.update(waiting)
                ids, deps = self._ids, self._deps
                missing = [
                    (ids[x], d)
                    for x in sorted(holders)
                    for d in deps[x]
                    if d not in rows
                ]
                self._charge(UNLABELLED, "unknown_deps")
                raise UnknownDependencyError(
                    "start(): unknown dependencies: "
                    + ", ".join(f"{_r(t)} needs {_r(d)}" for t, d in missing),
                    missing,
                )
            if not self._seq_ordered:
                cycles = _find_cycles(self._live_rows(), self._deps, self._dependents, self._ids)
                if cycles:
                    self._n_cycles += 1
                    self._charge(UNLABELLED, "cycles_reported")
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
                self._charge(UNLABELLED, "claim_conflicts")
                want = free
            if want <= 0:
                return []
            heap = self._heap
            state = self._state
            claimed = self._claims
            stamp = self._stamp
            optional = self._optional
            ids = self._ids
            gen = self._gen
            fns = self._fn
            book = self._signals
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
                    row = _heappop(heap)
                else:
                    row = order[i]
                    i += 1
                if state[row] != _READY:
                    continue  # stale entry
                state[row] = _RUNNING
                claimed[row] = 1
                if optional and row in optional:
                    self._inputs[row] = self._outcomes_locked(row)
                wait = now - stamp[row]
                stamp[row] = now
                waited += wait
                if wait > longest:
                    longest = wait
                if book is not None:
                    book.claimed(self._key(row), wait)
                append(_tuple_new(Claim, (ids[row], gen[row], fns[row])))
                left -= 1
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
                row = self._rows.get(task_id)
            except TypeError:
                row = None
            state = self._state
            if (row is None or generation.__class__ is not int or self._gen[row] != generation
                    or state[row] != _RUNNING):
                checked = self._check_callback("complete", task_id, generation)
                if isinstance(checked, TaskState):
                    return checked
                row = checked
            state[row] = _SUCCEEDED
            self._outcome[row] = result
            now = _perf_counter()
            ran = now - self._stamp.pop(row)
            self._run_total += ran
            if ran > self._run_max:
                self._run_max = ran
            self._running -= 1
            self._n_succeeded += 1
            if self._signals is not None:
                self._signals.ended(self._key(row), "succeeded", ran)
            if self._track:
                self._endings.append((self._ids[row], self._gen[row], _SUCCEEDED_STATE))
            dependents = self._dependents[row]
            if dependents:
                newly_ready = 0
                heap = self._heap
                remaining = self._remaining
                stamp = self._stamp
                book = self._signals
                if book is None:
                    # Written out twice, with and without the list of those made ready for the
                    # signals: this loop runs once per edge of every completion.
                    for x in dependents:
                        if state[x] == _PENDING:
                            left = remaining[x] - 1
                            remaining[x] = left
                            if not left:
                                state[x] = _READY
                                stamp[x] = now
                                _heappush(heap, x)
                                newly_ready += 1
                else:
                    released: list[int] = []
                    for x in dependents:
                        if state[x] == _PENDING:
                            left = remaining[x] - 1
                            remaining[x] = left
                            if not left:
                                state[x] = _READY
                                stamp[x] = now
                                _heappush(heap, x)
                                newly_ready += 1
                                released.append(x)
                    self._signal_propagated(book, released, now)
                if newly_ready:
                    self._ready_count += newly_ready
            if self._recorder is not None:
                self._record("Complete", {"t": self._ids[row], "g": self._gen[row]})
            return _SUCCEEDED_STATE
        finally:
            lock.release()

    def fail(self, task_id: Hashable, generation: int, error: Any = None, *,
             actor: str | None = None, reason: str | None = None) -> TaskState:
        """Record that version ``generation`` of ``task_id`` failed; return its state.

        running -> failed, then every pending/ready version that depends on it, directly or
        through pending/ready versions, becomes blocked (Settle), each with its provenance:
        this version as root, with ``actor``, ``reason`` and the clock's time. An already
        terminal current version is left as it is. Errors: ``actor`` or ``reason`` neither
        None nor a str -> ``InvalidArgumentError``; then as ``complete()``.
        """
        return self._end_running("fail", task_id, generation, _FAILED, error, actor, reason)

    def acknowledge_cancel(self, task_id: Hashable, generation: int, *,
                           actor: str | None = None, reason: str | None = None) -> TaskState:
        """Record that running version ``generation`` of ``task_id`` stopped; return its state.

        Spec: AcknowledgeCancel. running -> cancelled (with or without a prior request), then
        Settle; the provenance records ``actor`` and ``reason``. An already terminal current
        version is left as it is. Errors: as ``fail()``.
        """
        return self._end_running("acknowledge_cancel", task_id, generation, _CANCELLED, None,
                                 actor, reason)

    def cancel(self, task_id: Hashable, generation: int | None = None, *,
               actor: str | None = None, reason: str | None = None) -> TaskState:
        """Cancel the current version of ``task_id`` (or version ``generation``); return its state.

        pending/ready -> cancelled, then Settle; running -> running with ``cancel_requested``
        set (a cooperative request, once); terminal -> unchanged. A version cancelled here
        records its provenance (itself as root, ``actor``, ``reason``, the clock's time), and
        so does each version Settle blocks. Errors: ``actor`` or ``reason`` neither None nor a
        str, unhashable id or ``generation`` neither None nor an int ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``; ``generation`` given and
        not current -> ``StaleGenerationError``.
        """
        _check_note("cancel", task_id, actor, reason)
        now = self._clock()  # before the lock and any change: a clock that raises changes nothing
        with self._lock:
            row = self._lookup("cancel", task_id)
            if generation is not None:
                if not _is_int(generation):
                    raise InvalidArgumentError(
                        f"cancel({_r(task_id)}, {_r(generation)}): generation must be None or "
                        "an int"
                    )
                self._insist_current("cancel", row, generation)
            st = self._state[row]
            if st <= _READY:
                if st == _READY:
                    self._ready_count -= 1
                self._state[row] = _CANCELLED
                self._stamp.pop(row, None)
                self._n_cancelled += 1
                if self._signals is not None:
                    self._signals.count(self._key(row), "cancelled")
                self._record_end(row, TaskState.CANCELLED, actor, reason, now)
                if self._track:
                    self._endings.append((self._ids[row], self._gen[row], TaskState.CANCELLED))
                self._settle((row,), ())
                if self._recorder is not None:
                    self._record("Cancel", {"t": self._ids[row]})
                return TaskState.CANCELLED
            if st == _RUNNING and row not in self._cancel_requested:
                # A second request is no step: the spec's Cancel asks a running version once.
                self._cancel_requested.add(row)
                if self._recorder is not None:
                    self._record("Cancel", {"t": self._ids[row]})
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
            state = self._state
            if state[root] < _FAILED:
                raise InvalidTransitionError(
                    f"retry({_r(task_id)}): version {self._gen[root]} is "
                    f"{_STATES[state[root]].value}, not failed, cancelled or blocked"
                )
            dependents = self._dependents
            blocked_by = self._blocked_by
            members = [root]
            # Each version has one blocked_by, so only root can be met twice (when its own
            # blocked_by chain, through a cycle of an unstarted graph, leads back to it). A dead
            # row has no blocked_by.
            for m in members:  # grows while iterating: breadth-first over blocked_by chains
                listed = dependents[m]
                if listed:
                    for x in listed:
                        if blocked_by.get(x) == m and x != root:
                            members.append(x)
            members.sort()  # row order is seq order
            rows = self._rows
            ids = self._ids
            gen = self._gen
            deps = self._deps
            optional = self._optional
            if optional:
                # Each member ended, which settled the optional edges to it; its new version
                # has not.
                for m in members:
                    self._bump_optional(dependents[m] or (), ids[m])
            seq = self._next_seq
            renewed: list[int] = []
            for m in members:
                # the member's new version takes the next row, as Submit with the same deps
                row = len(state)
                tid = ids[m]
                ids.append(tid)
                gen.append(gen[m] + 1)
                seq += 1
                state.append(_PENDING)
                self._claims.append(0)
                deps.append(deps[m])
                self._remaining.append(0)
                self._fn.append(self._fn[m])
                self._outcome.append(None)
                dependents.append(dependents[m])
                if m in optional:
                    optional[row] = optional[m]
                if m in self._labels:  # a new version keeps its task type and tenant
                    self._labels[row] = self._labels[m]
                rows[tid] = row
                renewed.append(row)
            self._next_seq = seq
            now = _perf_counter()
            heap = self._heap
            dangling = self._dangling
            get = rows.get
            doomed: list[int] = []
            for m, row in zip(members, renewed, strict=True):
                remaining = 0
                dead = False
                present = 0
                opt = optional.get(row, ())
                for d in deps[row]:
                    r = get(d)
                    if r is None:
                        remaining += 1
                        waiting = dangling[d]  # before start: the old row waits there
                        del waiting[m]
                        waiting[row] = None
                        continue
                    present += 1
                    listed = dependents[r]
                    if listed is None:
                        dependents[r] = [row]
                    else:
                        listed.append(row)
                    st = state[r]
                    if st < _SUCCEEDED:  # pending, ready or running
                        remaining += 1
                    elif st != _SUCCEEDED and d not in opt:  # failed, blocked or cancelled
                        remaining += 1
                        dead = True
                self._entries += present
                self._garbage += 1 + present  # the old row, and its entries in those lists
                self._retire(m)
                self._remaining[row] = remaining
                if not remaining:
                    state[row] = _READY
                    self._stamp[row] = now
                    _heappush(heap, row)
                    self._ready_count += 1
                if dead:
                    doomed.append(row)
            # The members' dependents outside R keep their smaller seqs.
            self._seq_ordered = False
            self._n_retried += len(members)
            if self._signals is not None:
                for row in renewed:
                    self._signals.count(self._key(row), "retried")
            if doomed:
                self._settle((), doomed)
            top = renewed[members.index(root)]  # the retried task's new row
            generation = gen[top]
            if self._recorder is not None:
                self._record("Retry", {"t": ids[top]})
            self._compact_if_wasteful()
            return generation

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
        now = self._clock() if cancel_pending else 0.0  # before any change: it may raise
        with self._lock:
            state = self._state
            ids = self._ids
            if not self._closed:
                self._closed = True
                if cancel_pending:
                    endings = self._endings if self._track else None
                    cancelled = 0
                    for row, st in enumerate(state):  # in row order: seq order
                        if st <= _READY:
                            state[row] = _CANCELLED
                            self._stamp.pop(row, None)
                            self._record_end(row, TaskState.CANCELLED, None, "close", now)
                            cancelled += 1
                            if self._signals is not None:
                                self._signals.count(self._key(row), "cancelled")
                            if endings is not None:
                                endings.append((ids[row], self._gen[row], TaskState.CANCELLED))
                    self._n_cancelled += cancelled
                    self._ready_count = 0
                    self._heap.clear()
                if self._recorder is not None:
                    self._record("Close", {"cancelPending": bool(cancel_pending)})
            # one list per state code, the last one (_DEAD) left out of the report
            buckets: list[list[Hashable]] = [[] for _ in range(_DEAD + 1)]
            for row, st in enumerate(state):
                buckets[st].append(ids[row])
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
            return _STATES[self._state[self._lookup("state", task_id)]]

    def info(self, task_id: Hashable) -> TaskInfo:
        """Return what is known about the current version of ``task_id``.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            row = self._lookup("info", task_id)
            st = self._state[row]
            cause = self._blocked_by.get(row)
            outcome = self._outcome[row]
            return TaskInfo(
                task_id=self._ids[row],
                generation=self._gen[row],
                state=_STATES[st],
                deps=frozenset(self._deps[row]),
                remaining_deps=self._remaining[row],
                blocked_by=None if cause is None else self._ids[cause],
                cancel_requested=row in self._cancel_requested,
                result=outcome if st == _SUCCEEDED else None,
                error=outcome if st == _FAILED else None,
                optional=self._optional.get(row, frozenset()),
                provenance=self._provenance_locked(row),
            )

    def input_summary(self, task_id: Hashable) -> dict[Hashable, ParentOutcome]:
        """How each optional dependency of the current version of ``task_id`` ended.

        For a version that was claimed: as they had ended when it was claimed (a dependency
        resubmitted since does not change it). For one not claimed: those that have ended so
        far. An optional dependency's failure is here with its error, never dropped. Errors:
        unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            row = self._lookup("input_summary", task_id)
            kept = self._inputs.get(row)
            if kept is not None:
                return dict(kept)
            return self._outcomes_locked(row)

    def provenance(self, task_id: Hashable) -> Provenance | None:
        """How the current version of ``task_id`` came to be blocked or cancelled (None when it
        is neither): ``info(task_id).provenance``.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        with self._lock:
            return self._provenance_locked(self._lookup("provenance", task_id))

    def snapshot(self, *, provenance: bool = False) -> Snapshot:
        """Return the spec variables as an immutable ``Snapshot`` (one ``VersionView`` per id).

        With ``provenance``, the spec's provenance too (``Snapshot.provenance``: the spec's
        part of each record); without, None, as in an instance without ``RecordProvenance``.
        """
        with self._lock:
            snap = self._snapshot_locked()
            if not provenance:
                return snap
            ids = self._ids
            return snap.replace(provenance={
                ids[row]: _provenance_of(link).view() for row, link in self._provenance.items()})

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

    def signals(self) -> Signals:
        """Return the counters and durations of ``stats()`` per (task type, tenant) partition,
        with the versions each has waiting and running now (see :mod:`refsched.dag.signals`).

        Errors: built without ``max_partitions`` -> ``InvalidTransitionError``.
        """
        with self._lock:
            book = self._signals
            if book is None:
                raise InvalidTransitionError(
                    "signals(): the scheduler was built without max_partitions")
            gauges: dict[Hashable, list[int]] = {}
            for row, st in enumerate(self._state):
                if st <= _RUNNING:
                    both = gauges.setdefault(self._key(row), [0, 0])
                    both[st == _RUNNING] += 1
            return book.signals({k: (w, r) for k, (w, r) in gauges.items()})

    @property
    def max_partitions(self) -> int | None:
        """The partitions ``signals()`` keeps besides the overflow one (None: no signals)."""
        return None if self._signals is None else self._signals.max_partitions

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

    # ------------------------------------------------------------------ Internals

    def _seq_of(self, row: int) -> int:
        """The seq of the version in ``row``. Lock held."""
        if row < len(self._seq):
            return self._seq[row]
        return row + self._next_seq - len(self._state)  # one seq per row made since

    def _key(self, row: int) -> Hashable:
        """The partition key of the version in ``row``. Lock held."""
        return self._labels.get(row, UNLABELLED) if self._labels else UNLABELLED

    def _charge(self, key: Hashable, counter: str) -> None:
        """Count one more ``counter`` in ``key``'s partition, when signals are kept. Lock held."""
        if self._signals is not None:
            self._signals.count(key, counter)

    def _signal_submit(self, labels: tuple[str | None, Hashable] | None, old: int | None) -> None:
        """Charge a submission, and the pending or ready version it replaces. Lock held."""
        book = self._signals
        assert book is not None
        book.count(labels or UNLABELLED, "submitted")
        if old is not None and self._state[old] <= _READY:
            book.count(self._key(old), "replaced")

    def _live_rows(self) -> list[int]:
        """The rows of the current versions, in row (seq) order. Lock held."""
        return [row for row, st in enumerate(self._state) if st != _DEAD]

    def _snapshot_locked(self) -> Snapshot:
        """The spec variables now. Lock held."""
        ids, gen, state, deps = self._ids, self._gen, self._state, self._deps
        remaining, claims = self._remaining, self._claims
        compacted, base = len(self._seq), self._next_seq - len(state)
        blocked_by, cancel_requested = self._blocked_by, self._cancel_requested
        optional = self._optional
        views: dict[Hashable, VersionView] = {}
        for row, st in enumerate(state):
            if st == _DEAD:
                continue
            cause = blocked_by.get(row)
            fields = (
                gen[row],
                _STATES[st],
                frozenset(deps[row]),
                remaining[row],
                None if cause is None else ids[cause],
                row in cancel_requested,
                claims[row],
                self._seq[row] if row < compacted else row + base,
            )
            opt = optional.get(row)
            views[ids[row]] = (VersionView(*fields) if opt is None
                               else OptionalDepsView(*fields, opt))
        return Snapshot(self._started, self._closed, self._next_seq, MappingProxyType(views))

    def _outcomes_locked(self, row: int) -> dict[Hashable, ParentOutcome]:
        """How the optional deps of ``row`` that have ended did, by id. Lock held."""
        rows, state, gen, outcome = self._rows, self._state, self._gen, self._outcome
        ids, blocked_by = self._ids, self._blocked_by
        ended: dict[Hashable, ParentOutcome] = {}
        for d in self._optional.get(row, ()):
            r = rows.get(d)
            if r is None or state[r] < _SUCCEEDED:
                continue
            st = state[r]
            cause = blocked_by.get(r, -1)
            ended[d] = ParentOutcome(
                d, gen[r], _STATES[st],
                result=outcome[r] if st == _SUCCEEDED else None,
                error=outcome[r] if st == _FAILED else None,
                blocked_by=ids[cause] if cause >= 0 else None,
            )
        return ended

    def _provenance_locked(self, row: int) -> Provenance | None:
        """The provenance of the version in ``row``. Lock held."""
        link = self._provenance.get(row)
        return None if link is None else _provenance_of(link)

    def _record_end(self, row: int, end: TaskState, actor: str | None, reason: str | None,
                    now: float) -> None:
        """The version in ``row`` just failed or was cancelled: its root link (spec: EndRecord),
        which a cancelled version keeps as its provenance. Lock held."""
        tid = self._ids[row]
        link = _Link(Provenance(tid, self._gen[row], end, (tid,), actor, reason, now), None, tid)
        if end is TaskState.FAILED:
            self._failures[row] = link
        else:
            self._provenance[row] = link

    def _record_blocked(self, order: list[int]) -> None:
        """The provenance of each version of ``order``, which Settle just blocked (its
        ``_blocked_by`` set). Lock held.

        Each one's path is its blamed dep's extended by itself, when the chain of blame leads
        to a version that was dead before the step; in an unstarted graph with a cycle the
        chain may loop, and then the path runs through the dep of smallest seq one edge nearer
        to a dead version (spec: Settle's via). Nothing recurses: chains are walked with a list.
        """
        blamed = self._blocked_by
        made = self._provenance
        new = set(order)
        looping: list[int] = []
        sound: dict[int, bool] = {}
        for x in order:
            if x in sound:
                continue
            chain: list[int] = []
            on_chain: set[int] = set()
            y = x
            while y in new and y not in sound and y not in on_chain:
                chain.append(y)
                on_chain.add(y)
                y = blamed[y]
            # y: a version dead before the step (sound), one judged already, or a loop
            ok = y not in on_chain and (y not in new or sound[y])
            for z in chain:
                sound[z] = ok
            if not ok:
                looping.extend(chain)
                continue
            base = made[y] if y in new else self._cause(y)
            for z in reversed(chain):
                base = made[z] = _Link(base.root, base, self._ids[z])
        if looping:
            self._record_looping(looping, new)

    def _cause(self, row: int) -> _Link:
        """The link a version blocked by the dead version in ``row`` extends. Lock held."""
        return self._failures[row] if self._state[row] == _FAILED else self._provenance[row]

    def _record_looping(self, looping: list[int], new: set[int]) -> None:
        """The provenance of the blocked versions of ``looping``, whose chain of blame loops
        (only in an unstarted graph with a cycle), nearest to a dead version first. Lock held."""
        rows, state, deps, made = self._rows, self._state, self._deps, self._provenance
        level: dict[int, int] = {}
        left = set(new)
        k = 0
        while left:  # the fewest required edges from each to a version dead before the step
            k += 1
            near = set()
            for x in left:
                opt = self._optional.get(x, ())
                for d in deps[x]:
                    r = rows.get(d)
                    if r is not None and d not in opt and state[r] >= _FAILED and (
                            level.get(r, k) < k if r in new else True):
                        near.add(x)
                        break
            for x in near:
                level[x] = k
            left -= near
        for x in sorted(set(looping), key=level.__getitem__):
            opt = self._optional.get(x, ())
            via = min(r for r in (rows.get(d) for d in deps[x] if d not in opt)
                      if r is not None and state[r] >= _FAILED
                      and (level.get(r, 0) if r in new else 0) == level[x] - 1)
            base = made[via] if via in made else self._cause(via)
            made[x] = _Link(base.root, base, self._ids[x])

    def _lookup(self, call: str, task_id: Hashable) -> int:
        """The row of the current version of ``task_id``. Lock held."""
        return find_current(self._rows, call, task_id)

    def _insist_current(self, call: str, row: int, generation: int) -> None:
        """Raise StaleGenerationError unless ``generation`` is the current one. Lock held."""
        current = self._gen[row]
        if generation != current:
            self._n_stale += 1
            self._charge(self._key(row), "stale_callbacks")
            task_id = self._ids[row]
            if self._recorder is not None:
                self._record("StaleCallback", {"t": task_id, "g": generation})
            raise StaleGenerationError(
                f"{call}({_r(task_id)}, {generation}): generation {generation} is stale, "
                f"current is {current}",
                task_id, generation, current,
            )

    def _check_callback(self, call: str, task_id: Hashable, generation: int) -> int | TaskState:
        """The running row a callback steps, or the terminal state it returns. Lock held.

        Errors, in this order: unhashable id, unknown id, generation not an int, stale
        generation, pending/ready version.
        """
        row = self._lookup(call, task_id)
        if not _is_int(generation):
            raise InvalidArgumentError(
                f"{call}({_r(task_id)}, {_r(generation)}): generation must be an int"
            )
        self._insist_current(call, row, generation)
        st = self._state[row]
        if st == _RUNNING:
            return row
        if st >= _SUCCEEDED:
            self._n_duplicates += 1
            self._charge(self._key(row), "duplicate_callbacks")
            if self._recorder is not None:
                self._record("RepeatedCallback", {"t": self._ids[row]})
            return _STATES[st]
        raise InvalidTransitionError(
            f"{call}({_r(task_id)}, {generation}): version {generation} is "
            f"{_STATES[st].value}, not running"
        )

    def _end_running(
        self, call: str, task_id: Hashable, generation: int, to: int, error: Any,
        actor: str | None, reason: str | None,
    ) -> TaskState:
        """Fail or acknowledge the cancel of a running version, then Settle."""
        _check_note(call, task_id, actor, reason)
        now = self._clock()  # before the lock and any change: a clock that raises changes nothing
        with self._lock:
            checked = self._check_callback(call, task_id, generation)
            if isinstance(checked, TaskState):
                return checked
            row = checked
            self._state[row] = to
            ran = _perf_counter() - self._stamp.pop(row)
            self._run_total += ran
            if ran > self._run_max:
                self._run_max = ran
            self._n_stopped += 1
            self._running -= 1
            if to == _FAILED:
                self._outcome[row] = error
                self._n_failed += 1
            else:
                self._n_cancelled += 1
            if self._signals is not None:
                self._signals.ended(self._key(row), "failed" if to == _FAILED else "stopped", ran)
            self._record_end(row, _STATES[to], actor, reason, now)
            if self._track:
                self._endings.append((self._ids[row], self._gen[row], _STATES[to]))
            self._settle((row,), ())
            if self._recorder is not None:
                self._record("Fail" if to == _FAILED else "AcknowledgeCancel",
                             {"t": self._ids[row], "g": self._gen[row]})
            return _STATES[to]

    def _settle(self, dead: Iterable[int], fresh: Iterable[int]) -> None:
        """Spread blocking (spec: Settle) from what this step changed. Lock held.

        ``dead``: rows of versions that just died; ``fresh``: rows of new pending/ready versions
        with a dead required dep. Before the step no pending/ready version had a dead required
        dep, so the set B of the spec is exactly what a breadth-first search over the reverse
        index from these seeds reaches through required edges of pending/ready versions. Then
        every optional edge to a version of ``dead`` or B is settled.
        """
        # A version joins B by becoming blocked at once: its state then keeps the search from
        # visiting it again, and "dead or in B" below is just "dead".
        state = self._state
        dependents = self._dependents
        optional = self._optional
        ids = self._ids
        order: list[int] = []
        append = order.append
        was_ready = 0
        seeds = list(dead)
        book = self._signals
        # the end of the versions of ``dead`` (just before this call), from which the
        # propagation of what they block or release is timed
        ended = _perf_counter() if book is not None and seeds else None
        for x in fresh:
            st = state[x]
            if st <= _READY:
                was_ready += st
                state[x] = _BLOCKED
                append(x)
        if optional:
            # the same search, where an optional edge does not carry blocking
            queue = [*seeds, *order]
            for m in queue:  # grows while iterating: breadth-first
                tid = ids[m]
                for x in dependents[m] or ():
                    st = state[x]
                    if st <= _READY and tid not in optional.get(x, ()):
                        was_ready += st
                        state[x] = _BLOCKED
                        append(x)
                        queue.append(x)
        else:
            for gone in seeds:
                for x in dependents[gone] or ():
                    st = state[x]
                    if st <= _READY:
                        was_ready += st
                        state[x] = _BLOCKED
                        append(x)
            for m in order:  # grows while iterating: breadth-first
                for x in dependents[m] or ():
                    st = state[x]
                    if st <= _READY:
                        was_ready += st  # _READY == 1, _PENDING == 0
                        state[x] = _BLOCKED
                        append(x)
        self._ready_count -= was_ready
        if order:
            self._n_blocked += len(order)
            if self._signals is not None:
                for x in order:
                    self._signals.count(self._key(x), "blocked")
            get = self._rows.get
            deps = self._deps
            blocked_by = self._blocked_by
            forget = self._stamp.pop
            for x in order:
                forget(x, None)
                opt = optional.get(x, ()) if optional else ()
                cause = -1  # none found: BlockedHasCause would report it
                for d in deps[x]:
                    r = get(d)
                    if (r is not None and state[r] >= _FAILED and (cause < 0 or r < cause)
                            and d not in opt):
                        cause = r  # row order is seq order: the dead dep of smallest seq
                blocked_by[x] = cause
            self._record_blocked(order)
            if self._track:
                endings = sorted(order)
                gen = self._gen
                self._endings.extend((ids[x], gen[x], TaskState.BLOCKED) for x in endings)
        released = self._settle_optional((*seeds, *order)) if optional else []
        if ended is not None:
            assert book is not None
            self._signal_propagated(book, [*order, *released], ended)

    def _signal_propagated(self, book: SignalBook, rows: list[int], ended: float) -> None:
        """Each version of ``rows`` was made ready or blocked now by a dependency's end at
        ``ended`` (on the performance counter). Lock held."""
        if not rows:
            return
        took = _perf_counter() - ended
        key = self._key
        for x in rows:
            book.propagated(key(x), took)

    def _settle_optional(self, ended: Iterable[int]) -> list[int]:
        """The rest of Settle: each optional edge to a version of ``ended`` is settled, so a
        pending version waiting on it has one dep fewer, and is ready when none is left.
        Lock held; runs after blocking has spread, so what is still pending/ready is outside
        the spec's B. Returns the rows it made ready."""
        state = self._state
        dependents = self._dependents
        optional = self._optional
        remaining = self._remaining
        ids = self._ids
        now = _perf_counter()
        made: list[int] = []
        for m in ended:
            tid = ids[m]
            for x in dependents[m] or ():
                if state[x] <= _READY and tid in optional.get(x, ()):
                    left = remaining[x] - 1
                    remaining[x] = left
                    if not left:
                        state[x] = _READY
                        self._stamp[x] = now
                        _heappush(self._heap, x)
                        self._ready_count += 1
                        made.append(x)
        return made

    def _bump_optional(self, listed: Iterable[int], task_id: Hashable) -> None:
        """A version of ``task_id`` that ended is being replaced: the pending/ready versions of
        ``listed`` whose optional edge to it was settled wait again. Lock held."""
        state = self._state
        remaining = self._remaining
        optional = self._optional
        for x in listed:
            st = state[x]
            if st <= _READY and task_id in optional.get(x, ()):
                remaining[x] += 1
                if st == _READY:
                    state[x] = _PENDING
                    self._ready_count -= 1

    def _cycle_through(self, target: int, new_deps: tuple[Hashable, ...]) -> list[Hashable] | None:
        """The cycle that making row ``target`` depend on ``new_deps`` would close, if any.

        Searches the ancestors of the new deps (following dependency edges) for ``target``; the
        path is ``[t, ..., d, t]``, each entry a dependency of the next. Lock held.
        """
        rows, deps, ids = self._rows, self._deps, self._ids
        # parent[y] = the row whose dep y is, on the path back to a new dep (-1: a root)
        parent: dict[int, int] = {}
        queue: list[int] = []
        for d in new_deps:
            r = rows[d]
            if r not in parent:
                parent[r] = -1
                queue.append(r)
        for node in queue:  # grows while iterating: breadth-first
            for d in deps[node]:
                r = rows[d]
                if r == target:
                    path: list[Hashable] = [ids[target]]
                    cur = node
                    while cur >= 0:
                        path.append(ids[cur])
                        cur = parent[cur]
                    path.append(ids[target])
                    return path
                if r not in parent:
                    parent[r] = node
                    queue.append(r)
        return None

    def _retire(self, row: int) -> None:
        """Mark ``row`` dead, its version replaced, and drop what it held. Lock held.

        The caller has handed its dependents list on to the new version and counted its
        garbage; the entries naming it elsewhere are skipped from now on.
        """
        self._state[row] = _DEAD
        self._ids[row] = None
        self._deps[row] = _NO_DEP_TUPLE
        self._fn[row] = None
        self._outcome[row] = None
        self._dependents[row] = None
        if self._blocked_by:
            self._blocked_by.pop(row, None)
        if self._provenance:
            self._provenance.pop(row, None)
        if self._failures:
            self._failures.pop(row, None)
        if self._cancel_requested:
            self._cancel_requested.discard(row)
        if self._optional:
            self._optional.pop(row, None)
            self._inputs.pop(row, None)
        if self._labels:
            self._labels.pop(row, None)
        self._stamp.pop(row, None)

    def _compact_if_wasteful(self) -> None:
        """Compact the columns when garbage is more than half of what they hold. Lock held.

        Garbage: dead rows, the entries naming them in dependents lists, and stale heap
        entries. The compaction costs O(what is held), at least half of which was made garbage
        since the last one: amortized O(1) for each.
        """
        heap = self._heap
        waste = self._garbage + len(heap) - self._ready_count
        if 2 * waste > len(self._state) + self._entries + len(heap):
            self._compact()

    def _compact(self) -> None:
        """Renumber the live rows in order, dropping the dead ones and stale entries. Lock held.

        Row order, and so seq order, is kept; only internal row numbers change. The ids are
        hashed again (``_rows`` gets its new rows), as a dict may at any insertion.
        """
        state = self._state
        live = self._live_rows()
        renumber = [-1] * len(state)  # old row -> new row, -1 for a dead one
        for new, old in enumerate(live):
            renumber[old] = new
        dependents = self._dependents
        moved: list[list[int] | None] = []
        entries = 0
        for old in live:
            listed = dependents[old]
            if listed:
                kept = [new for new in map(renumber.__getitem__, listed) if new >= 0]
                entries += len(kept)
                moved.append(kept or None)
            else:
                moved.append(None)
        ids, gen, claims = self._ids, self._gen, self._claims
        seq = [*self._seq, *range(len(self._seq) + self._next_seq - len(state), self._next_seq)]
        deps, remaining, fn, outcome = self._deps, self._remaining, self._fn, self._outcome
        self._ids = _column(self, "_ids", [ids[r] for r in live])
        self._gen = _column(self, "_gen", [gen[r] for r in live])
        self._seq = _column(self, "_seq", array("q", [seq[r] for r in live]))
        self._state = _column(self, "_state", [state[r] for r in live])
        self._claims = _column(self, "_claims", [claims[r] for r in live])
        self._deps = _column(self, "_deps", [deps[r] for r in live])
        self._remaining = _column(self, "_remaining", [remaining[r] for r in live])
        self._fn = _column(self, "_fn", [fn[r] for r in live])
        self._outcome = _column(self, "_outcome", [outcome[r] for r in live])
        self._stamp = _column(self, "_stamp", {
            renumber[r]: t for r, t in self._stamp.items()})
        self._dependents = _column(self, "_dependents", moved)
        self._blocked_by = _column(self, "_blocked_by", {
            renumber[r]: renumber[c] for r, c in self._blocked_by.items()})
        self._cancel_requested = _column(self, "_cancel_requested", {
            renumber[r] for r in self._cancel_requested})
        self._provenance = _column(self, "_provenance", {
            renumber[r]: link for r, link in self._provenance.items()})
        self._failures = _column(self, "_failures", {
            renumber[r]: link for r, link in self._failures.items()})
        self._optional = _column(self, "_optional", {
            renumber[r]: o for r, o in self._optional.items()})
        self._inputs = _column(self, "_inputs", {
            renumber[r]: o for r, o in self._inputs.items()})
        self._labels = _column(self, "_labels", {
            renumber[r]: k for r, k in self._labels.items()})
        for waiting in self._dangling.values():
            held = list(waiting)
            waiting.clear()
            for r in held:
                waiting[renumber[r]] = None
        rows = self._rows
        for task_id, r in rows.items():  # values only: the dict keeps its size
            rows[task_id] = renumber[r]
        # each ready row once, in row order: a sorted list is a heap
        self._heap = [row for row, st in enumerate(self._state) if st == _READY]
        self._entries = entries
        self._garbage = 0


def _absent_deps(deps: tuple[Hashable, ...], rows: dict[Hashable, int],
                 dangling: dict[Hashable, dict[int, None]]
                 ) -> list[tuple[Hashable, dict[int, None]]]:
    """The deps of ``deps`` never submitted, each with the versions waiting for it (before
    start). A function of its own for the reason :func:`_settled_optional` gives."""
    return [(d, dangling[d]) for d in deps if d not in rows]


def _settled_optional(rows: dict[Hashable, int], state: list[int], dep_t: tuple[Hashable, ...],
                      opt_s: frozenset[Hashable], remaining: int) -> tuple[int, bool]:
    """A submit's count of unsettled deps less its optional deps that ended (an optional edge
    to a version that ended is settled, and blocks nothing), and whether a required dep is
    dead. A function of its own, not a closure in submit(): a closure there would make every
    access to the variables it reads a cell access, on every submit."""
    def ended(d: Hashable) -> bool:
        r = rows.get(d)
        return r is not None and state[r] > _SUCCEEDED
    return (remaining - sum(map(ended, opt_s)),
            any(ended(d) for d in dep_t if d not in opt_s))


def _id_tuple(call: str, task_id: Hashable, what: str, ids: Iterable[Hashable]
              ) -> tuple[Hashable, ...]:
    """The ids a call's ``what`` argument lists, as a tuple; ``InvalidArgumentError`` for a
    str or bytes (an iterable of characters, never meant as ids) or a non-iterable."""
    if isinstance(ids, (str, bytes)):
        raise InvalidArgumentError(
            f"{call}({_r(task_id)}, {_r(ids)}): {what} must be an iterable of task ids, "
            f"not {type(ids).__name__}"
        )
    try:
        return tuple(ids)
    except TypeError:
        raise InvalidArgumentError(
            f"{call}({_r(task_id)}, {_r(ids)}): {what} is not an iterable"
        ) from None


def _labels_of(call: str, task_id: Hashable, task_type: Any,
               tenant: Any) -> tuple[str | None, Hashable]:
    """The partition key ``(task_type, tenant)`` of a version, checked."""
    if task_type is not None and not isinstance(task_type, str):
        raise InvalidArgumentError(
            f"{call}({_r(task_id)}): task_type {_r(task_type)} must be None or a str")
    try:
        hash(tenant)
    except TypeError:
        raise InvalidArgumentError(
            f"{call}({_r(task_id)}): tenant {_r(tenant)} is unhashable") from None
    return (task_type, tenant)


def _check_deps(task_id: Hashable, deps: Iterable[Hashable], dep_t: tuple[Hashable, ...],
                call: str = "submit", check_self: bool = True) -> None:
    """Raise the ``InvalidArgumentError`` that ``submit(task_id, deps)`` owes its deps, if any.

    In this order: a dep unhashable (or deps an ``__eq__`` cannot compare), a dep given twice,
    ``task_id`` among them. Calls the deps' ``__hash__`` and ``__eq__``.
    """
    if not dep_t:
        return
    try:
        dep_s = frozenset(dep_t)
    except TypeError as e:
        bad = next((d for d in dep_t if not isinstance(d, Hashable) or not _hashes(d)),
                   _NOTHING)
        if bad is _NOTHING:  # every dep hashes: an __eq__ raised the TypeError
            raise InvalidArgumentError(
                f"{call}({_r(task_id)}, {_r(dep_t)}): dependencies cannot be "
                f"compared: {e}"
            ) from e
        raise InvalidArgumentError(
            f"{call}({_r(task_id)}, {_r(deps)}): dependency {_r(bad)} is unhashable"
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
            f"{call}({_r(task_id)}, {_r(dep_t)}): dependency {_r(dup)} given twice"
        )
    if check_self and task_id in dep_s:
        raise InvalidArgumentError(
            f"{call}({_r(task_id)}, {_r(dep_t)}): a task cannot depend on itself"
        )


@checker_of(TaskScheduler)
class _Checker(Checker[TaskScheduler]):
    """check_invariants(): recompute every invariant from the raw columns. Lock held."""

    invariants = INVARIANTS

    def __init__(self, scheduler: TaskScheduler) -> None:
        super().__init__(scheduler)
        # the live rows, in row order (filled by type_ok, once the columns are known sound)
        self.live: list[int] = []

    def type_ok(self) -> None:
        s, name = self.s, "TypeOK"
        if not isinstance(s._started, bool) or not isinstance(s._closed, bool):
            self.fail(name, "started/closed are not booleans")
        if not _is_int(s._next_seq) or s._next_seq < 1:
            self.fail(name, f"next_seq {s._next_seq!r} is not an int >= 1")
        columns = {
            "_ids": (s._ids, list), "_gen": (s._gen, list), "_state": (s._state, list),
            "_claims": (s._claims, list),
            "_deps": (s._deps, list), "_remaining": (s._remaining, list), "_fn": (s._fn, list),
            "_outcome": (s._outcome, list),
            "_dependents": (s._dependents, list),
        }
        n = len(s._state)
        for column, (values, kind) in columns.items():
            if not isinstance(values, kind) or len(values) != n:
                self.fail(name, f"column {column} is not a {kind.__name__} of {n} rows")
        if not isinstance(s._seq, array) or len(s._seq) > n:
            self.fail(name, f"column _seq is not an array of at most {n} rows")
        ids, state, rows = s._ids, s._state, s._rows
        last = 0
        live = self.live
        for row in range(n):
            seq = s._seq_of(row)
            if not last < seq < s._next_seq:
                self.fail(name, f"row {row}: seq {seq} out of order or >= next_seq")
            last = seq
            st = state[row]
            if not _is_int(st) or not _PENDING <= st <= _DEAD:
                self.fail(name, f"row {row}: state {st!r} is not a state")
            if st == _DEAD:
                if (ids[row] is not None or s._deps[row] or s._fn[row] is not None
                        or s._outcome[row] is not None or s._dependents[row] is not None
                        or row in s._blocked_by or row in s._cancel_requested):
                    self.fail(name, f"dead row {row} still holds its version's fields")
                continue
            live.append(row)
            tid = ids[row]
            if rows.get(tid) != row:
                self.fail(name, f"row {row} is not the current version of {_r(tid)}")
            gen = s._gen[row]
            if not _is_int(gen) or gen < 1:
                self.fail(name, f"{_r(tid)}: generation {gen!r} is not an int >= 1")
            deps = s._deps[row]
            if not isinstance(deps, tuple) or len(set(deps)) != len(deps):
                self.fail(name, f"{_r(tid)}: deps {deps!r} is not a tuple without repeats")
            if tid in deps:
                self.fail(name, f"{_r(tid)} depends on itself")
            remaining = s._remaining[row]
            if not _is_int(remaining) or remaining < 0:
                self.fail(name, f"{_r(tid)}: remaining_deps {remaining!r} is not an int >= 0")
            listed = s._dependents[row]
            if listed is not None and not isinstance(listed, list):
                self.fail(name, f"{_r(tid)}: dependents {listed!r} is not None or a list")
            opt = s._optional.get(row)
            if opt is not None and (not isinstance(opt, frozenset) or not opt
                                    or not opt <= set(deps)):
                self.fail(name, f"{_r(tid)}: optional {opt!r} is not a non-empty subset of "
                                "its deps")
        for row in s._optional:
            if not _is_int(row) or not 0 <= row < n or state[row] == _DEAD:
                self.fail(name, f"optional names row {row!r}, not a live row")
        for row in s._labels:
            if not _is_int(row) or not 0 <= row < n or state[row] == _DEAD:
                self.fail(name, f"the partition keys name row {row!r}, not a live row")
        if len(live) != len(rows):
            self.fail(name, f"{len(rows)} ids but {len(live)} live rows")
        # -1 as a cause: Settle found none (BlockedHasCause reports it)
        causes = [c for c in s._blocked_by.values() if c != -1]
        for row in (*s._cancel_requested, *s._blocked_by, *causes):
            if not _is_int(row) or not 0 <= row < n or state[row] == _DEAD:
                self.fail(name, f"cancel_requested/blocked_by names row {row!r}, not a live row")
        for entry in s._heap:
            if not _is_int(entry) or not 0 <= entry < n:
                self.fail(name, f"ready heap entry {entry!r} is not a row")
        for row in live:
            st = state[row]
            if (st in (_READY, _RUNNING)) > (row in s._stamp):
                self.fail(name, f"{_STATES[st].value} {_r(ids[row])} has no stamp")
        for row, stamp in s._stamp.items():
            if (not _is_int(row) or not 0 <= row < n or state[row] > _RUNNING
                    or not isinstance(stamp, float)):
                self.fail(name, f"stamp {stamp!r} of row {row!r}: not a float of a pending, "
                                "ready or running version")

    def at_most_one_claim_per_version(self) -> None:
        s, name = self.s, "AtMostOneClaimPerVersion"
        for row in self.live:
            tid, st, claims = s._ids[row], s._state[row], s._claims[row]
            if claims not in (0, 1):
                self.fail(name, f"{_r(tid)}: claims {claims!r} is not 0 or 1")
            if st in (_PENDING, _READY, _BLOCKED) and claims:
                self.fail(name, f"{_r(tid)}: {_STATES[st].value} version counts a claim")
            if st in (_RUNNING, _SUCCEEDED, _FAILED) and not claims:
                self.fail(name, f"{_r(tid)}: {_STATES[st].value} version was never claimed")
            if row in s._cancel_requested and not claims:
                self.fail(name, f"{_r(tid)}: cancel requested on a version never claimed")

    def indegree_invariant(self) -> None:
        s, name = self.s, "IndegreeInvariant"
        rows, ids, state, deps = s._rows, s._ids, s._state, s._deps
        # the reverse index's live entries, as (row of the dep, row of the dependent)
        indexed: set[tuple[int, int]] = set()
        for row in self.live:
            for x in s._dependents[row] or ():
                if not _is_int(x) or not 0 <= x < len(state):
                    self.fail(name, f"reverse index of {_r(ids[row])} holds {x!r}, not a row")
                if state[x] == _DEAD:
                    continue
                if (row, x) in indexed or ids[row] not in deps[x]:
                    self.fail(name, f"reverse index holds {_r(ids[x])} under {_r(ids[row])} "
                                    "with no such dependency, or twice")
                indexed.add((row, x))
        dangling = 0
        for d, waiting in s._dangling.items():
            if d in rows or not waiting:
                self.fail(name, f"dangling index entry {_r(d)} is stale")
            for x in waiting:
                if not 0 <= x < len(state) or state[x] == _DEAD or d not in deps[x]:
                    self.fail(name, f"dangling index holds row {x!r} under {_r(d)} "
                                    "with no such dependency")
                dangling += 1
        edges = 0
        ready = 0
        for row in self.live:
            tid = ids[row]
            for d in deps[row]:
                r = rows.get(d)
                if (row not in s._dangling.get(d, {}) if r is None
                        else (r, row) not in indexed):
                    self.fail(name, f"reverse index lacks the edge {_r(tid)} -> {_r(d)}")
                edges += 1
            st = state[row]
            if st <= _READY:
                ready += st == _READY
                opt = s._optional.get(row, ())
                # spec Unsettled: a required dep not succeeded, an optional one not ended
                count = sum(1 for d in deps[row] if d not in rows or (
                    state[rows[d]] < _SUCCEEDED if d in opt else state[rows[d]] != _SUCCEEDED))
                if s._remaining[row] != count:
                    self.fail(name, f"{_r(tid)}: remaining_deps {s._remaining[row]} but {count} "
                                    "deps not settled")
                if (st == _PENDING) != (count > 0):
                    self.fail(name, f"{_r(tid)} is {_STATES[st].value} with "
                                    f"{count} deps not settled")
        if len(indexed) + dangling != edges:
            self.fail(name, f"reverse index holds {len(indexed) + dangling} edges, deps hold "
                            f"{edges}")
        if s._ready_count != ready:
            self.fail(name, f"ready count {s._ready_count} but {ready} ready versions")
        heap = s._heap
        for i in range(1, len(heap)):
            if heap[(i - 1) // 2] > heap[i]:
                self.fail(name, f"ready heap out of order at {i}")
        queued = set(heap)
        for row in self.live:
            if state[row] == _READY and row not in queued:
                self.fail(name, f"ready version {_r(ids[row])} is missing from the ready heap")

    def concurrency_bound(self) -> None:
        s, name = self.s, "ConcurrencyBound"
        running = s._state.count(_RUNNING)
        if s._running != running:
            self.fail(name, f"running count {s._running} but {running} running versions")
        if running > s._max:
            self.fail(name, f"{running} versions running, max_concurrency is {s._max}")

    def blocked_has_cause(self) -> None:
        s, name = self.s, "BlockedHasCause"
        for row in self.live:
            tid, st = s._ids[row], s._state[row]
            cause = s._blocked_by.get(row)
            if (st == _BLOCKED) != (cause is not None):
                self.fail(name, f"{_r(tid)} is {_STATES[st].value} with blocked_by "
                                f"{'set' if cause is not None else 'unset'}")
            if cause is not None and (cause < 0 or s._ids[cause] not in s._deps[row]
                                      or s._ids[cause] in s._optional.get(row, ())):
                self.fail(name, f"{_r(tid)}: blocked_by "
                                f"{_r(s._ids[cause]) if cause >= 0 else 'none'} is not a "
                                "required dependency")

    def blocked_propagated(self) -> None:
        s, name = self.s, "BlockedPropagated"
        rows, state = s._rows, s._state
        for row in self.live:
            st = state[row]
            if st <= _READY:
                opt = s._optional.get(row, ())
                for d in s._deps[row]:
                    r = rows.get(d)
                    if r is not None and state[r] >= _FAILED and d not in opt:
                        self.fail(name, f"{_STATES[st].value} {_r(s._ids[row])} depends on "
                                        f"{_STATES[state[r]].value} {_r(d)}")

    def sealed_graph(self) -> None:
        s, name = self.s, "SealedGraph"
        rows = s._rows
        if s._seq_ordered:
            for row in self.live:
                for d in s._deps[row]:
                    if d not in rows or s._seq_of(rows[d]) >= s._seq_of(row):
                        self.fail(name, f"graph marked seq-ordered but {_r(s._ids[row])} -> "
                                        f"{_r(d)} is not")
        if not s._started:
            return
        if s._dangling:
            self.fail(name, f"started with unknown dependencies {list(s._dangling)!r:.200}")
        cycles = _find_cycles(self.live, s._deps, s._dependents, s._ids)
        if cycles:
            self.fail(name, f"started graph has the cycle {_show_path(cycles[0])}")
