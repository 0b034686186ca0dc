"""DurableScheduler: the TaskScheduler contract kept in a database, with leases and attempts.

Implements ``spec/DurableScheduler.tla`` (see ``docs/durable.md``). Every public call that
changes anything is one transaction of the store, named after the spec action it takes; the
transaction reads the store's clock itself, so a deadline is written and judged on one clock.
A lease is fenced by ``(task_id, generation, attempt)`` and its worker: a report is accepted only
while the lease is the version's live one, so a worker that died or paused past its lease can
never overwrite the work of the one that took the version over.

Expiry happens inside the transactions that claim: a lease whose deadline has passed stays live
until some claimer's transaction expires it, so a report that commits first wins.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
import math
import re
import threading
import time
import traceback
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from refsched.cycles import find_cycles
from refsched.dag.signals import Signals
from refsched.durable import schedules
from refsched.durable import signals as signal_rows
from refsched.durable.store import (
    COUNTERS_READ,
    FORMAT,
    MIGRATIONS,
    SCHEMA_VERSION,
    Store,
    Tx,
)
from refsched.durable.urls import open_store
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    LeaseLostError,
    SchedulerClosedError,
    SchedulerError,
    StaleLeaseError,
    StoreError,
    TaskRunningError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.loading import UnusableName, import_callable
from refsched.schedule import Policy, Timing
from refsched.types import (
    CloseReport,
    OptionalDepsView,
    ParentOutcome,
    Provenance,
    ProvenanceView,
    Snapshot,
    TaskState,
    VersionView,
)
from refsched.values import check_note

__all__ = ["AGING", "MAX_ID_BYTES", "MAX_NOTE_CHARS", "NOT_LOOKED", "DurableInfo",
           "DurableScheduler", "DurableStats", "Lease", "LeaseView", "NotLooked", "StoreView",
           "TimeView", "storable"]

_WAITING = ("pending", "ready")
_DEAD = ("failed", "blocked", "cancelled")
_TERMINAL = ("succeeded", *_DEAD)
_STATES = frozenset(("pending", "ready", "running", *_TERMINAL))
#: The input summary of one claimed version (``?``): a row per optional dep that ended.
_KEEP_INPUTS = (
    "INSERT INTO input_summary (task, dep, generation, state, result, error, blocked_by) "
    "SELECT dep.task, d.id, d.generation, d.state, "
    "CASE WHEN d.state = 'succeeded' THEN d.result END, "
    "CASE WHEN d.state = 'failed' THEN d.error END, d.blocked_by "
    "FROM dep JOIN task d ON d.id = dep.dep WHERE dep.task = ? AND dep.optional <> 0 "
    "AND d.state IN ('succeeded', 'failed', 'blocked', 'cancelled')")
#: Whether the edge of a dep row (``dep`` joined to its dep's version as ``d``) holds its
#: version back (spec: ``~Settles``): a required edge until the dep succeeded, an optional one
#: until it ended in any way; an edge to an id with no version always does.
_UNSETTLED = ("(d.state IS NULL OR (dep.optional = 0 AND d.state != 'succeeded') OR "
              "(dep.optional <> 0 AND d.state IN ('pending', 'ready', 'running')))")
_FN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
#: A new store's aging (docs/time.md): a waiting version gains one priority level a minute.
AGING = 60.0
#: The priorities a version may have: what a signed 32-bit int holds, so that the claim key
#: ``priority * aging - due`` of a store keeps the due time's precision for every priority.
PRIORITY_RANGE = range(-2**31, 2**31)


class NotLooked(enum.Enum):
    """What :meth:`DurableScheduler.claim_and_due` gives when its claim did not read the next
    due time."""

    NOT_LOOKED = "not looked"


NOT_LOOKED = NotLooked.NOT_LOOKED


class _Given(enum.Enum):
    """An argument not given: the store's setting (its creator's, or the default)."""

    STORE = "the store's"


_COUNTERS = ("submitted", "retried", "claimed", "reclaimed", "expired", "succeeded", "failed",
             "cancelled", "blocked", "cycles_reported")


class Lease(NamedTuple):
    """One attempt of one version, handed to ``worker`` by ``claim()``: run ``fn(**args)``.

    ``attempt`` is the fencing token: reports name it, and only the newest attempt of the
    current generation is accepted. ``deadline`` is on the store's clock.
    """

    task_id: str
    generation: int
    attempt: int
    deadline: float
    fn: str
    args: dict[str, Any]
    worker: str


@dataclass(frozen=True, slots=True)
class LeaseView:
    """The lease part of a version (spec: ``attempt``, ``holder``, ``deadline``,
    ``endedAttempt``)."""

    attempt: int  # claims of the version; 0 = never claimed
    holder: str | None  # the worker whose lease is live; None when none is
    deadline: float | None  # the live lease's end on the store's clock
    ended_attempt: int = 0  # the attempt whose report ended the version; 0 = none did


@dataclass(frozen=True, slots=True)
class DurableInfo:
    """What the store knows of a task's current version (``DurableScheduler.info``)."""

    task_id: str
    generation: int
    state: TaskState
    deps: frozenset[str]
    remaining_deps: int
    blocked_by: str | None
    cancel_requested: bool
    fn: str
    args: dict[str, Any]
    seq: int
    attempts: int  # claims of this version: 1 + the expired attempts taken over
    holder: str | None  # the worker holding the live lease
    deadline: float | None
    result: Any = None
    error: str | None = None
    traceback: str | None = None  # the formatted traceback of the exception fail() was given
    lease_seconds: float | None = None  # what a heartbeat extends the live lease by
    became_ready_at: float | None = None  # store clock: ready since
    claimed_at: float | None = None  # store clock: the current attempt's claim
    ended_at: float | None = None  # store clock: the version's end
    due: float = 0.0  # store clock: claimable from then on (docs/time.md)
    priority: int = 0  # higher first
    optional: frozenset[str] = frozenset()  # the deps whose edge is optional (a subset of deps)
    # how each optional dep ended (input_summary()): fixed when the version was claimed
    input_summary: dict[str, ParentOutcome] = field(default_factory=dict)
    # when blocked or cancelled: how it came to end (root, path, actor, reason, store time)
    provenance: Provenance | None = None
    task_type: str | None = None  # the version's partition of the signals (docs/durable.md)
    tenant: str | int | None = None  # and its tenant, as submit() was given them


@dataclass(frozen=True, slots=True)
class TimeView:
    """The time part of a version (spec: ``due``, ``priority``)."""

    due: float  # store clock: the version is eligible once due <= now (and it is ready)
    priority: int  # in PRIORITY_RANGE; higher first


@dataclass(frozen=True, slots=True)
class DurableStats:
    """Store-wide counters since the store was created, and this process's refused reports."""

    submitted: int = 0  # versions created by submit()
    retried: int = 0  # versions created by retry()
    claimed: int = 0  # versions claimed (first attempts)
    reclaimed: int = 0  # attempts after an expiry
    expired: int = 0  # leases expired
    succeeded: int = 0
    failed: int = 0  # including versions given up after max_attempts
    cancelled: int = 0
    blocked: int = 0
    cycles_reported: int = 0
    by_state: dict[str, int] | None = None  # current versions per state
    live_leases: int = 0
    stale_callbacks: int = 0  # reports refused by this process's scheduler object
    duplicate_callbacks: int = 0  # repeated reports answered by this process's object


@dataclass(frozen=True, slots=True)
class StoreView:
    """A durable store as one read transaction saw it: settings, counters, every current
    version (in seq order), and the store's clock read in that same transaction."""

    now: float
    settings: dict[str, Any]  # meta: max_concurrency, max_attempts, started, closed, count:...
    versions: tuple[DurableInfo, ...]  # in seq order


def _r(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_json(value: object, where: str, depth: int = 0) -> None:
    """Refuse what JSON cannot carry back as it was given (tuples travel as lists)."""
    if depth > 100:
        raise InvalidArgumentError(f"{where}: nested more than 100 deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError(f"{where}: a str that is not valid text") from None
        return
    if isinstance(value, int):
        if abs(value) > 2**63:
            raise InvalidArgumentError(f"{where}: int {_r(value)} is too large to store")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{where}: {value!r} is not a JSON number")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise InvalidArgumentError(f"{where}: key {_r(k)} is not a str")
            _check_json(item, f"{where}[{k!r}]", depth + 1)
        return
    raise InvalidArgumentError(f"{where}: {type(value).__name__} is not JSON-serialisable")


def _dumps(value: object, where: str) -> str:
    _check_json(value, where)
    try:
        return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{where}: {e}") from None


def _reach(tx: Tx, members: dict[str, None], queue: list[str], query: str) -> None:
    """Add to ``members`` every id ``query`` leads to from the ids in ``queue``, and from those.

    ``query`` takes one id (its ``?``) and selects the ids one step on. Depth first with a list
    of its own: the walk is as deep as the graph, and nothing recurses.
    """
    while queue:
        t = queue.pop()
        for (x,) in tx.all(query, (t,)):
            if x not in members:
                members[x] = None
                queue.append(x)


def resolve(fn: str) -> Callable[..., Any]:
    """The function named ``"module:function"`` (``InvalidArgumentError`` when it is not one)."""
    if not isinstance(fn, str) or not _FN.match(fn):
        raise InvalidArgumentError(f"fn={_r(fn)}: name a function as 'module:function'")
    module_name, _, path = fn.partition(":")
    try:
        return import_callable(module_name, path)
    except UnusableName as e:
        raise InvalidArgumentError(f"fn={fn!r}: {e}") from None


def function_name(fn: str | Callable[..., Any]) -> str:
    """``"module:qualname"`` for a module-level function (or the name itself, checked).

    A durable task runs in another process, which finds its function by this name.
    """
    if isinstance(fn, str):
        resolve(fn)
        return fn
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if (not callable(fn) or not isinstance(module, str) or not isinstance(qualname, str)
            or "<" in qualname or module == "__main__"):
        raise InvalidArgumentError(
            f"fn={_r(fn)}: a durable task runs in another process, so its function must be "
            "importable by name: define it at the top level of a module (not __main__), or "
            "give its 'module:function' name")
    name = f"{module}:{qualname}"
    if resolve(name) is not fn:
        raise InvalidArgumentError(f"fn={_r(fn)}: {name!r} names another object")
    return name


#: The longest task id or worker name, in UTF-8 bytes: one rule for both stores, well below
#: what PostgreSQL's index on ``task.id`` takes (about 2,700 bytes a key).
MAX_ID_BYTES = 1024


def _check_name(call: str, value: object, what: str = "a durable task id") -> str:
    """One rule for ids and worker names on every store, checked before anything changes:
    a non-empty str of valid text, without NUL (PostgreSQL's text cannot hold it), at most
    ``MAX_ID_BYTES`` bytes in UTF-8."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{call}({_r(value)}): {what} is a non-empty str")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"{call}({_r(value)}): {what} is not valid text "
                                   "(it holds a lone surrogate)") from None
    if "\x00" in value:
        raise InvalidArgumentError(f"{call}({_r(value)}): {what} holds a NUL character")
    if size > MAX_ID_BYTES:
        raise InvalidArgumentError(f"{call}({_r(value)}): {what} is {size} bytes in UTF-8; "
                                   f"at most {MAX_ID_BYTES}")
    return value


def _check_id(call: str, task_id: object) -> str:
    return _check_name(call, task_id)


def _args_text(call: str, args: object) -> str:
    """A function's keyword arguments (None for none) as the JSON text the store keeps; not a
    dict, or not JSON -> ``InvalidArgumentError`` naming ``call``."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InvalidArgumentError(f"{call}: args must be a dict of keyword arguments, not "
                                   f"{type(args).__name__}")
    return _dumps(args, f"{call} args")


def _aware_seconds(call: str, what: str, moment: object) -> float:
    """An aware datetime as seconds since the epoch (the store's clock's unit); a naive one, or
    anything else, is an ``InvalidArgumentError``: a naive time has no place on any clock."""
    if not isinstance(moment, dt.datetime) or moment.utcoffset() is None:
        raise InvalidArgumentError(f"{call}: {what}={_r(moment)}: an aware datetime "
                                   "(with a tzinfo)")
    return moment.timestamp()


def _check_time(task_id: str, run_at: object, delay: object,
                call: str = "submit") -> tuple[float | None, float | None]:
    """``(run_at, delay)`` of a submit as seconds (run_at on the Unix epoch, the store
    clock's), checked: an aware datetime, a finite number >= 0, not both."""
    if run_at is not None and delay is not None:
        raise InvalidArgumentError(f"{call}({task_id!r}): give run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, dt.datetime):
            raise InvalidArgumentError(f"{call}({task_id!r}, run_at={_r(run_at)}): an aware "
                                       "datetime")
        if run_at.tzinfo is None or run_at.utcoffset() is None:
            raise InvalidArgumentError(f"{call}({task_id!r}, run_at={_r(run_at)}): a naive "
                                       "datetime names no instant; give its tzinfo")
        return run_at.timestamp(), None
    if delay is not None:
        if (isinstance(delay, bool) or not isinstance(delay, (int, float))
                or not math.isfinite(delay) or delay < 0):
            raise InvalidArgumentError(f"{call}({task_id!r}, delay={_r(delay)}): seconds >= 0")
        return None, float(delay)
    return None, None


def _check_lease(call: str, lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise InvalidArgumentError(f"{call}({_r(lease)}): give the Lease that claim() returned")
    if (not isinstance(lease.task_id, str) or not _is_int(lease.generation)
            or not _is_int(lease.attempt) or not isinstance(lease.worker, str)):
        raise InvalidArgumentError(f"{call}({_r(lease)}): a malformed lease")
    return lease


def storable(text: str) -> str:
    """``text`` as both stores keep it, the same on each: a lone surrogate (an undecodable
    byte of ``surrogateescape``) as ``\\udcXX`` and a NUL as ``\\x00``, which PostgreSQL's text
    cannot hold; everything else unchanged."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")


def _safe_str(value: object) -> str:
    """``str(value)``, or what stands for it when its ``__str__`` raises or returns no str."""
    try:
        text = str(value)
    except BaseException as e:  # any error of user code: the report must go on
        try:
            why = type(e).__name__
        except BaseException:
            why = "an error"
        return f"<str() of the exception raised {why}>"
    return text if type(text) is str else "<str() of the exception gave no str>"


def _error_text(error: object) -> str | None:
    """What ``fail()`` stores as the version's error: storable whatever ``error`` is."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {_safe_str(error)}"
    elif isinstance(error, str):
        text = error
    else:
        try:
            text = _dumps(error, "error")
        except InvalidArgumentError:
            text = _safe_repr(error)
    return storable(text)


#: The longest ``actor`` or ``reason`` a provenance record keeps, in characters: ``cancel()``
#: refuses a longer one, and a failure's error text is cut to it (:func:`_note_cut`).
MAX_NOTE_CHARS = 1000


def _check_note(call: str, task_id: str, actor: object, reason: object) -> None:
    """``actor`` and ``reason`` of a call that ends a version: each None or a str (the
    in-memory scheduler's rule), of at most :data:`MAX_NOTE_CHARS` characters."""
    check_note(call, task_id, actor, reason)
    for name, value in (("actor", actor), ("reason", reason)):
        if isinstance(value, str) and len(value) > MAX_NOTE_CHARS:
            raise InvalidArgumentError(f"{call}({task_id!r}, {name}=<{len(value)} characters>): "
                                       f"{name} has at most {MAX_NOTE_CHARS} characters")


def _note_cut(text: str | None) -> str | None:
    """A text a record keeps as its reason (an error's, as ``fail()`` stored it): its first
    :data:`MAX_NOTE_CHARS` characters, then how many were left out (the version's ``error``
    has them all)."""
    if text is None or len(text) <= MAX_NOTE_CHARS:
        return text
    return f"{text[:MAX_NOTE_CHARS]}... ({len(text) - MAX_NOTE_CHARS} more characters)"


def _own_record(t: str, generation: int, end: str, actor: str | None, reason: str | None,
                now: float) -> str:
    """Spec: EndRecord: the provenance of a version that ended itself (``end`` 'failed' or
    'cancelled'), as the store keeps it (JSON): its own root, its path itself alone, what the
    call that ended it said, and the store's time. A failed version keeps it for the versions
    its failure blocks, which extend it."""
    return json.dumps({"root": t, "generation": generation, "end": end, "path": [t],
                       "actor": actor, "reason": reason, "time": now}, separators=(",", ":"))


def _blocked_records(blame: dict[str, list[str]],
                     causes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Spec Settle's ``record``: the provenance of each version Settle blocks.

    ``blame[x]``: the required deps of a blocked version ``x`` that are dead or blocked with
    it, in seq order (the first is its ``blocked_by``); ``causes``: the record of each of them
    that was dead before (a failed one's own). A path runs through the blamed dep when its
    chain of blame leads to a version dead before; in an unstarted graph with a cycle it may
    loop, and then it runs through the dep of smallest seq one edge nearer to a dead version
    (``model.dag.actions.blocked_records``, which this mirrors).
    """
    sound = set(causes)
    grew = True
    while grew:
        new = {x for x, ds in blame.items() if x not in sound and ds[0] in sound}
        sound |= new
        grew = bool(new)
    level = dict.fromkeys(causes, 0)
    left, k = set(blame), 0
    while left:
        k += 1
        near = {x for x in left if any(level.get(d, k) < k for d in blame[x])}
        if not near:  # cannot happen: each blocked version reaches a dead one
            break
        level.update(dict.fromkeys(near, k))
        left -= near

    def via(x: str) -> str:
        if x in sound:
            return blame[x][0]
        return next(d for d in blame[x] if level.get(d, -2) == level[x] - 1)

    made: dict[str, dict[str, Any]] = {}
    for x in blame:
        chain = []  # x, then the blocked versions its path runs back through, not yet made
        y = x
        while y in blame and y not in made:
            chain.append(y)
            y = via(y)
        for z in reversed(chain):
            d = via(z)
            before = made[d] if d in blame else causes[d]
            made[z] = {**before, "path": [*before["path"], z]}
    return made


def _record_dead(tx: Tx) -> None:
    """Give the dead versions of a store older than provenance their records (schema version
    5's migration): a failed or cancelled one its own, without actor or reason, timed at its
    end; a blocked one its root's, along the edges Settle would have taken."""
    rows = tx.all("SELECT id, generation, state, ended_at, blocked_by FROM task WHERE state IN "
                  "('failed', 'blocked', 'cancelled') ORDER BY seq")
    causes = {t: json.loads(_own_record(t, int(g), s, None, None, float(at or 0.0)))
              for t, g, s, at, _ in rows if s != "blocked"}
    # each blocked version's blamed dep first: the one Settle blamed (BlockedHasCause)
    dead = {t for t, *_ in rows}
    blame: dict[str, list[str]] = {t: [bb] if bb in dead else []
                                   for t, _, s, _, bb in rows if s == "blocked"}
    for t, d in tx.all("SELECT dep.task, d.id FROM dep JOIN task x ON x.id = dep.task JOIN task "
                       "d ON d.id = dep.dep WHERE x.state = 'blocked' AND dep.optional = 0 AND "
                       "d.state IN ('failed', 'blocked', 'cancelled') ORDER BY d.seq"):
        if d not in blame[t]:
            blame[t].append(d)
    made = {**causes, **_blocked_records({t: ds for t, ds in blame.items() if ds}, causes)}
    tx.many("UPDATE task SET provenance = ? WHERE id = ?",
            ((json.dumps(r, separators=(",", ":")), t) for t, r in made.items()))


def _provenance(text: str | None) -> Provenance | None:
    """A record as the store keeps it, as ``info()`` gives it."""
    if text is None:
        return None
    r = json.loads(text)
    return Provenance(r["root"], int(r["generation"]), TaskState(r["end"]), tuple(r["path"]),
                      r["actor"], r["reason"], float(r["time"]))


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except BaseException:  # user code's __repr__
        return f"<a {type(value).__name__} whose repr() raised>"
    return text if type(text) is str else f"<a {type(value).__name__}>"


def _traceback_text(error: object) -> str | None:
    """The formatted traceback of an exception ``fail()`` was given, storable (else None)."""
    if not isinstance(error, BaseException):
        return None
    try:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except BaseException:  # user code's __str__, inside the formatting
        return None
    return storable(text)


def _edges(rows: Iterable[tuple[str, str, int]]) -> tuple[dict[str, set[str]],
                                                          dict[str, set[str]]]:
    """The deps of each id, and its optional deps (only ids that have some), from
    ``(task, dep, optional)`` rows."""
    deps: dict[str, set[str]] = {}
    optional: dict[str, set[str]] = {}
    for t, d, o in rows:
        deps.setdefault(t, set()).add(d)
        if o:
            optional.setdefault(t, set()).add(d)
    return deps, optional


def _cycles(tasks: Iterable[tuple[str, int]],
            edges: Iterable[tuple[str, str]]) -> list[list[Hashable]]:
    """The cycles of the store's dependency graph, one per strongly connected component.

    ``tasks`` are ``(id, seq)`` pairs, ``edges`` ``(task, dep)`` pairs whose deps are all among
    the tasks. The nodes are numbered in seq order for ``refsched.cycles.find_cycles``,
    which reports the cycles as ``TaskScheduler.start()`` does.
    """

    names = [t for t, _ in sorted(tasks, key=lambda pair: pair[1])]
    node = {t: i for i, t in enumerate(names)}
    deps: list[list[int]] = [[] for _ in names]
    dependents: list[list[int]] = [[] for _ in names]
    for t, d in edges:
        deps[node[t]].append(node[d])
        dependents[node[d]].append(node[t])
    return find_cycles(range(len(names)), deps, dependents, names)


def _ids_of(call: str, task_id: str, what: str, ids: object) -> list[str]:
    """The ids of ``deps`` or ``optional``, each checked; not an iterable of ids (a str
    is refused too) -> ``InvalidArgumentError``."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidArgumentError(
            f"{call}({task_id!r}, {what}={_r(ids)}): an iterable of task ids")
    listed = list(ids)
    for d in listed:
        _check_id(f"{call}({task_id!r}) dependency", d)
    return listed


def _dep_list(call: str, task_id: str, deps: object,
              optional: object) -> tuple[list[str], frozenset[str]]:
    """Every dep of a call (required ones first, then the optional ones) and the optional
    ones: an id given twice, in one list or in both, is an ``InvalidArgumentError``."""
    dep_list = _ids_of(call, task_id, "deps", deps)
    opt_list = _ids_of(call, task_id, "optional", optional) if optional != () else []
    dep_list += opt_list
    if len(set(dep_list)) != len(dep_list):
        dup = next(d for i, d in enumerate(dep_list) if d in dep_list[:i])
        raise InvalidArgumentError(f"{call}({task_id!r}): dependency {dup!r} given twice")
    return dep_list, frozenset(opt_list)


#: A new version's row (Submit): the columns every version has; the edge kinds' and signals'
#: columns are left to their defaults unless the version uses them.
_INSERT_VERSION = (
    "INSERT INTO task (id, generation, seq, state, fn, args, remaining_deps, became_ready_at, "
    "due, priority, claim_key, claim_due) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_VERSION_WITH_EDGE_KINDS_AND_LABELS = (
    "INSERT INTO task (id, generation, seq, state, fn, args, remaining_deps, became_ready_at, "
    "due, priority, claim_key, claim_due, optional_deps, task_type, tenant) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")

#: The errors a refused graph change may raise: counted by ``_count_refusal``.
_REFUSALS = (CycleError, UnknownDependencyError, InvalidTransitionError)

#: The claim check's text (:meth:`DurableScheduler._claim_check`) by (look_ahead, clock).
_CLAIM_CHECKS: dict[tuple[bool, str], str] = {}


class _Submission(NamedTuple):
    """One submit's arguments, checked: what :meth:`DurableScheduler.submit` stores."""

    call: str  # how errors name the call: "submit", or "submit_many[i]"
    task_id: str
    deps: list[str]  # required ones first, then the optional ones
    optional: frozenset[str]
    fn: str  # "module:function"
    args: str  # JSON text
    at: float | None  # run_at on the store clock's epoch
    wait: float | None  # delay in seconds
    priority: int
    task_type: str | None = None  # the version's partition (docs/durable.md, Signals)
    tenant: str | None = None  # JSON of the version's tenant


#: The ints a durable tenant may be: what both stores' JSON text keeps and reads back alike.
TENANT_INT_RANGE = range(-2**63, 2**63)


def _check_labels(call: str, task_id: str, task_type: object,
                  tenant: object) -> tuple[str | None, str | None]:
    """A version's ``task_type`` (None or a str, as an id) and ``tenant`` (None, a str as an
    id, or an int in :data:`TENANT_INT_RANGE`), checked: ``(task_type, tenant as JSON)``.
    Anything else -> ``InvalidArgumentError``."""
    if task_type is not None:
        _check_name(f"{call}({task_id!r}, task_type=...)", task_type, "a task type")
    if tenant is None or isinstance(tenant, str):
        if tenant is not None:
            _check_name(f"{call}({task_id!r}, tenant=...)", tenant, "a tenant")
    elif not _is_int(tenant) or tenant not in TENANT_INT_RANGE:
        raise InvalidArgumentError(
            f"{call}({task_id!r}, tenant={_r(tenant)}): a tenant is None, a str, or an int "
            f"in [-2**63, 2**63)")
    return task_type, signal_rows.encode_tenant(tenant)  # type: ignore[return-value,arg-type]


def _submission(call: str, task_id: object, deps: object, optional: object, fn: object,
                args: object, run_at: object, delay: object, priority: object,
                task_type: object = None, tenant: object = None) -> _Submission:
    """A submit's arguments checked, before anything changes (``InvalidArgumentError``)."""
    task_id = _check_id(call, task_id)
    dep_list, opt_set = _dep_list(call, task_id, deps, optional)
    if task_id in dep_list:
        raise InvalidArgumentError(f"{call}({task_id!r}): a task cannot depend on itself")
    name = function_name(fn)  # type: ignore[arg-type]
    args_text = _args_text(f"{call}({task_id!r})", args)
    at, wait = _check_time(task_id, run_at, delay, call)
    if not _is_int(priority) or priority not in PRIORITY_RANGE:
        raise InvalidArgumentError(
            f"{call}({task_id!r}, priority={_r(priority)}): an int in "
            f"[{PRIORITY_RANGE.start}, {PRIORITY_RANGE.stop})")
    assert isinstance(priority, int)
    labels = _check_labels(call, task_id, task_type, tenant)
    return _Submission(call, task_id, dep_list, opt_set, name, args_text, at, wait, priority,
                       *labels)


#: The keys an item of ``submit_many`` may have: ``id`` and ``fn`` are required.
_ITEM_KEYS = frozenset(("id", "fn", "deps", "optional", "args", "run_at", "delay", "priority",
                        "task_type", "tenant"))


def _submissions(tasks: object) -> list[_Submission]:
    """Every item of a ``submit_many`` checked, in order, before anything changes: a bad one is
    an ``InvalidArgumentError`` that names its index (and id)."""
    if isinstance(tasks, (str, bytes, Mapping)) or not isinstance(tasks, Iterable):
        raise InvalidArgumentError(f"submit_many({_r(tasks)}): an iterable of mappings, each "
                                   "with 'id' and 'fn'")
    items: list[_Submission] = []
    for i, task in enumerate(tasks):
        call = f"submit_many[{i}]"
        if not isinstance(task, Mapping):
            raise InvalidArgumentError(f"{call}: {_r(task)} is not a mapping with 'id' and "
                                       "'fn'")
        unknown = sorted(map(str, set(task) - _ITEM_KEYS))
        missing = sorted({"id", "fn"} - set(task))
        if unknown or missing:
            raise InvalidArgumentError(
                f"{call}({_r(task.get('id'))}): "
                + (f"unknown keys {unknown}" if unknown else f"missing {missing}")
                + f"; the keys are {sorted(_ITEM_KEYS)}")
        items.append(_submission(call, task["id"], task.get("deps", ()),
                                 task.get("optional", ()), task["fn"], task.get("args"),
                                 task.get("run_at"), task.get("delay"),
                                 task.get("priority", 0), task.get("task_type"),
                                 task.get("tenant")))
    return items


#: The kinds of report ``report_many`` takes: each one's spec action and the state it ends in.
REPORT_KINDS: dict[str, tuple[str, str]] = {
    "complete": ("Complete", "succeeded"), "fail": ("Fail", "failed"),
    "acknowledge_cancel": ("AcknowledgeCancel", "cancelled")}


class _Report(NamedTuple):
    """One report of a ``report_many`` batch, checked: what :meth:`DurableScheduler._end_in`
    takes."""

    call: str  # how errors name it: "report_many[i]"
    action: str  # Complete, Fail, AcknowledgeCancel
    state: str  # the state it ends the version in
    lease: Lease
    result: str | None  # JSON text (complete)
    error: str | None  # the error's text (fail)
    trace: str | None  # its traceback (fail)


def _reports(reports: object) -> list[_Report]:
    """Every report of a ``report_many`` checked, in order, before anything changes: a bad one
    is an ``InvalidArgumentError`` that names its index."""
    if isinstance(reports, (str, bytes, Mapping)) or not isinstance(reports, Iterable):
        raise InvalidArgumentError(f"report_many({_r(reports)}): an iterable of (kind, lease, "
                                   "value) tuples")
    items: list[_Report] = []
    for i, report in enumerate(reports):
        call = f"report_many[{i}]"
        if not isinstance(report, tuple) or len(report) != 3:
            raise InvalidArgumentError(f"{call}: {_r(report)} is not a (kind, lease, value) "
                                       "tuple")
        kind, lease, value = report
        if not isinstance(kind, str) or kind not in REPORT_KINDS:
            raise InvalidArgumentError(f"{call}: kind {_r(kind)} is not one of "
                                       f"{sorted(REPORT_KINDS)}")
        _check_lease(call, lease)
        action, state = REPORT_KINDS[kind]
        result = error = trace = None
        if kind == "complete":
            result = _dumps(value, f"{call}({lease.task_id!r}) result")
        elif kind == "fail":
            error, trace = _error_text(value), _traceback_text(value)
        items.append(_Report(call, action, state, lease, result, error, trace))
    return items


def storable_result(result: object) -> bool:
    """Whether ``complete()`` (and ``report_many``) can store ``result``: JSON-serialisable."""
    try:
        _dumps(result, "result")
    except InvalidArgumentError:
        return False
    return True


def _settles(state: str | None, optional: bool) -> bool:
    """Whether a dep in ``state`` (None: no version) no longer holds its dependent back
    (spec: Settles): through a required edge once it succeeded, an optional one once ended."""
    return state in _TERMINAL if optional else state == "succeeded"


class DurableScheduler:
    """A dependency scheduler whose state lives in a database shared by many processes.

    ``DurableScheduler(url, max_concurrency=N)`` opens the store at ``url`` (``sqlite:///f.db``),
    creating it on first use. ``max_concurrency``, ``max_attempts``, ``clock`` and ``record``
    belong to the store: its creator sets them, later openers may omit them or must repeat them.
    ``clock='virtual'`` makes the store's clock a value moved only by :meth:`tick` (for tests
    and lock-step checks); ``record=True`` appends every accepted spec step to the store's
    history, in commit order (:meth:`history`).

    ``aging`` (seconds > 0, or None for strict priority; :data:`AGING` when the creator gives
    none) is a store setting too: it orders the claims (docs/time.md).

    ``url`` may also be an open :class:`~refsched.durable.store.Store` (``open_store(url)``),
    which the scheduler then uses without owning it: :meth:`release` leaves it open, so that
    schedulers made one after another share its connections.
    """

    def __init__(self, url: str | Store, max_concurrency: int | None = None, *,
                 max_attempts: int | None = None, clock: str | None = None,
                 record: bool | None = None, create: bool = True,
                 synchronous: str = "normal", schema: str | None = None,
                 read_only: bool = False,
                 aging: float | Literal[_Given.STORE] | None = _Given.STORE,
                 max_partitions: int = 64) -> None:
        if max_concurrency is not None and (not _is_int(max_concurrency) or max_concurrency < 1):
            raise InvalidArgumentError(
                f"DurableScheduler(max_concurrency={_r(max_concurrency)}): an int >= 1")
        if max_attempts is not None and (not _is_int(max_attempts) or max_attempts < 1):
            raise InvalidArgumentError(
                f"DurableScheduler(max_attempts={_r(max_attempts)}): an int >= 1")
        if clock is not None and clock not in ("wall", "virtual"):
            raise InvalidArgumentError(f"DurableScheduler(clock={_r(clock)}): 'wall' or 'virtual'")
        if record is not None and not isinstance(record, bool):
            raise InvalidArgumentError(f"DurableScheduler(record={_r(record)}): a bool")
        if not isinstance(create, bool):
            raise InvalidArgumentError(f"DurableScheduler(create={_r(create)}): a bool")
        if not isinstance(read_only, bool):
            raise InvalidArgumentError(f"DurableScheduler(read_only={_r(read_only)}): a bool")
        if not _is_int(max_partitions) or max_partitions < 1:
            raise InvalidArgumentError(
                f"DurableScheduler(max_partitions={_r(max_partitions)}): an int >= 1")
        self.max_partitions = max_partitions
        if aging is not _Given.STORE and aging is not None and (
                isinstance(aging, bool) or not isinstance(aging, (int, float))
                or not math.isfinite(aging) or aging <= 0):
            raise InvalidArgumentError(f"DurableScheduler(aging={_r(aging)}): seconds > 0, or "
                                       "None for strict priority")
        # Only a creator (one that gives max_concurrency) may create: an opener that meets no
        # store (a mistyped path or schema) is told so, and leaves no file or schema behind.
        create = create and max_concurrency is not None and not read_only
        self.read_only = read_only
        self._owns_store = not isinstance(url, Store)
        if isinstance(url, Store):
            if synchronous != "normal" or schema is not None:
                raise InvalidArgumentError("DurableScheduler(store): synchronous and schema are "
                                           "the open store's")
            self._store = url
        else:
            options: dict[str, Any] = {"read_only": True} if read_only else {}
            try:
                self._store = open_store(url, create=create, synchronous=synchronous,
                                         schema=schema, **options)
            except StoreError as e:
                if max_concurrency is None and not read_only and "no store" in str(e):
                    raise StoreError(f"{e} (give max_concurrency to create one)") from None
                raise
        self.url = self._store.url
        self._stale = 0  # reports refused through this object
        self._duplicates = 0  # repeated reports answered through this object
        # due_in: what the last claim on this thread read of the next due time (claim_and_due);
        # full: whether that claim took as many versions as it asked for
        self._look = threading.local()
        try:
            settings = self._initialise(max_concurrency, max_attempts, clock, record, aging)
        except BaseException:
            if self._owns_store:
                self._store.close()
            raise
        self._max = int(settings["max_concurrency"])
        self._max_attempts = int(settings["max_attempts"])
        self._schema_version = int(settings["schema_version"])
        self._record = bool(settings["record"])
        # meta keeps 0 for strict priority (its values are never NULL), as the spec's Aging
        self._aging = float(settings.get("aging", AGING)) or None
        self.clock = str(settings["clock"])
        if self.clock == "virtual":
            self._store.use_virtual_clock()
        elif not self._owns_store:
            self._store.use_wall_clock()

    def _initialise(self, max_concurrency: int | None, max_attempts: int | None,
                    clock: str | None, record: bool | None,
                    aging: float | Literal[_Given.STORE] | None) -> dict[str, Any]:
        stored_aging = None if aging is _Given.STORE else float(aging or 0)
        with self._store.transaction(write=not self.read_only) as tx:
            meta: dict[str, Any] = tx.settings() if tx.has_schema() else {}
            if not meta:
                if max_concurrency is None:
                    raise StoreError(f"{self._store.url}: no store there" + (
                        "" if self.read_only else " (give max_concurrency to create one)"))
                for statement in self._store.schema():
                    tx.run(statement)
                meta = {"format": FORMAT, "schema_version": SCHEMA_VERSION,
                        "max_concurrency": max_concurrency,
                        "max_attempts": 3 if max_attempts is None else max_attempts,
                        "clock": clock or "wall", "now": 0.0, "record": int(bool(record)),
                        "aging": AGING if stored_aging is None else stored_aging,
                        "started": 0, "closed": 0, "next_seq": 1,
                        "slot_due": schedules.NO_SLOT}
                tx.meta_insert(meta.items())
                tx.many("INSERT INTO counter (name, shard, n) VALUES (?, 0, 0)",
                        ((c,) for c in _COUNTERS))
                self._store.prepare(tx)
                self._store.make_slots(tx, max_concurrency)
                return meta
            from refsched.durable.store import check_meta
            check_meta(self._store.url, meta)
            if self.read_only:
                return meta
            version = int(meta["schema_version"])
            if version < SCHEMA_VERSION:
                for v in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[v]:
                        tx.run(statement)
                if version < 5:
                    _record_dead(tx)
                tx.meta_set("schema_version", SCHEMA_VERSION)
                meta["schema_version"] = SCHEMA_VERSION
            if "aging" not in meta:  # a store older than due times: its migrating writer's
                meta["aging"] = AGING if stored_aging is None else stored_aging
                tx.meta_insert([("aging", meta["aging"])])
            if "slot_due" not in meta:  # a store older than schedules: none owes a slot
                meta["slot_due"] = schedules.NO_SLOT
                tx.meta_insert([("slot_due", schedules.NO_SLOT)])
            self._store.prepare(tx)
            if version < 7:  # the slot rows its writers now take
                self._store.make_slots(tx, int(meta["max_concurrency"]))
            elif version == SCHEMA_VERSION:
                tx.versions_untouched()
            given: dict[str, object] = {
                "max_concurrency": max_concurrency, "max_attempts": max_attempts,
                "clock": clock, "record": None if record is None else int(record),
                "aging": stored_aging}
            for key, value in given.items():
                if value is not None and meta.get(key) != value:
                    mine, theirs = value, meta.get(key)
                    if key == "aging":  # as the caller writes it: None for strict priority
                        mine, theirs = stored_aging or None, float(theirs or 0) or None
                    raise InvalidArgumentError(
                        f"DurableScheduler({self._store.url!r}, {key}={mine!r}): the store "
                        f"has {key}={theirs!r}, set by its creator; open it without "
                        f"{key} to use the store's")
            return meta

    # ------------------------------------------------------------------ helpers

    @property
    def max_concurrency(self) -> int:
        """How many versions may run at once, across every process (the store's setting)."""
        return self._max

    @property
    def aging(self) -> float | None:
        """Seconds a waiting version takes to gain one priority level; None: strict priority
        (the store's setting, docs/time.md)."""
        return self._aging

    @property
    def max_attempts(self) -> int:
        """How many attempts a version gets before an expiry fails it."""
        return self._max_attempts

    @property
    def notifies(self) -> bool:
        """Whether :meth:`wait_for_work` hears of new work (PostgreSQL), or only waits."""
        return self._store.notifies

    def wait_for_work(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a step that may have made a version claimable
        (True), or for the time to pass (False): what an idle worker does between claims."""
        return self._store.wait_for_work(timeout, self._max)

    def release(self) -> None:
        """Release the connection (of a store it opened itself). Not :meth:`close`: the
        store's state does not change."""
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> DurableScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _meta(self, tx: Tx, key: str) -> Any:
        return tx.meta(key)

    def _count(self, tx: Tx, counter: str, n: int = 1) -> None:
        if n:
            tx.count(counter, n)

    @contextlib.contextmanager
    def _counting_refusals(self, of: list[_Submission] | str | None,
                           edges: bool = False) -> Iterator[None]:
        """Count a graph configuration error the block raises (:meth:`_count_refusal`)."""
        try:
            yield
        except _REFUSALS as error:
            self._count_refusal(error, of, edges)
            raise

    def _count_refusal(self, error: SchedulerError, of: list[_Submission] | str | None,
                       edges: bool = False) -> None:
        """Count a graph configuration error (a cycle, an unknown dependency, and with
        ``edges`` an ``add_deps()`` on a version no longer pending) in a transaction of its
        own: the refused call's transaction is rolled back, and the count must not go with it.
        It is charged to the partition ``of`` names: the submission refused (a list holding
        it), the version of a task id, or none (None: unlabelled). Any other error is not
        counted; the caller raises it, as it raises this one."""
        if isinstance(error, CycleError):
            kind = "cycles_reported"
        elif isinstance(error, UnknownDependencyError):
            kind = "unknown_deps"
        elif edges and type(error) is InvalidTransitionError:
            kind = "edges_refused"
        else:
            return
        with self._store.transaction() as tx:
            if kind == "cycles_reported":
                self._count(tx, kind)
            if isinstance(of, list):
                labels = (of[0].task_type, of[0].tenant) if of else (None, None)
            elif of is None:
                labels = (None, None)
            else:
                labels = self._labels(tx, of)
            self._refused(tx, labels, kind)

    def _labels(self, tx: Tx, task_id: str) -> tuple[str | None, str | None]:
        """The ``task_type`` and ``tenant`` columns of a task's version ((None, None): none)."""
        row = tx.one("SELECT task_type, tenant FROM task WHERE id = ?", (task_id,))
        return (None, None) if row is None else (row[0], row[1])

    def _refused(self, tx: Tx, labels: tuple[str | None, str | None], kind: str) -> None:
        """Count a call that changed no version in the partition of ``labels`` (the
        ``refusal`` table: written only on such paths)."""
        tx.run(signal_rows.UPSERT_REFUSAL, (*signal_rows.refusal_key(*labels), kind, 1))

    def _step(self, tx: Tx, action: str, **params: Any) -> None:
        if self._record:
            tx.later("INSERT INTO step (action, params, at) VALUES (?, ?, ?)",
                     (action, json.dumps(params, separators=(",", ":")), tx.now()))

    def _row(self, tx: Tx, call: str, task_id: str) -> tuple[Any, ...]:
        row = tx.one("SELECT generation, state, attempt, holder, cancel_requested, seq, "
                     "ended_attempt FROM task WHERE id = ?", (task_id,))
        if row is None:
            raise UnknownTaskError(f"{call}({task_id!r}): unknown task", task_id)
        return row

    def _settle(self, tx: Tx, seeds: Iterable[str]) -> None:
        """Settle: block every waiting version that reaches a dead version through required
        edges of waiting ones; then settle the optional edges to the versions it blocked.

        Before a step the store has no waiting version with a dead required dep
        (BlockedPropagated), so only the dependents of what the step made dead or waiting can
        join B: ``seeds`` are those versions; B grows from the seeds that are waiting with a
        dead required dep, or from the dead seeds, through waiting dependents along required
        edges. Each member is blamed on its required dep with the smallest seq among those dead
        or in B. The versions of B have ended, which settles every optional edge to them
        (:meth:`_settle_optional`); a step that ended a version itself settles the optional
        edges to it next, with :meth:`_ended`.
        """
        seeds = list(seeds)
        members: dict[str, None] = {}
        frontier: list[str] = []
        for t in seeds:
            row = tx.one("SELECT state FROM task WHERE id = ?", (t,))
            if row is None:
                continue
            if row[0] in _DEAD or (row[0] in _WAITING and tx.one(
                    "SELECT 1 FROM dep JOIN task d ON d.id = dep.dep WHERE dep.task = ? "
                    "AND dep.optional = 0 AND d.state IN ('failed', 'blocked', 'cancelled') "
                    "LIMIT 1", (t,))):
                frontier.append(t)
                if row[0] in _WAITING:
                    members[t] = None
        if frontier:
            _reach(tx, members, list(frontier),
                   "SELECT dep.task FROM dep JOIN task x ON x.id = dep.task "
                   "WHERE dep.dep = ? AND dep.optional = 0 AND x.state IN ('pending', 'ready')")
        if members:
            tx.many("UPDATE task SET state = 'blocked', ended_at = ? WHERE id = ?",
                    ((tx.now(), x) for x in members))
            blame: dict[str, list[str]] = {}
            for x in members:
                blame[x] = [d for (d,) in tx.all(
                    "SELECT d.id FROM dep JOIN task d ON d.id = dep.dep WHERE dep.task = ? AND "
                    "dep.optional = 0 AND d.state IN ('failed', 'blocked', 'cancelled') "
                    "ORDER BY d.seq", (x,))]
                tx.later("UPDATE task SET blocked_by = ? WHERE id = ?", (blame[x][0], x))
            self._count(tx, "blocked", len(members))
            self._record_blocked(tx, blame)
        self._settle_optional(tx, list(members))

    def _record_blocked(self, tx: Tx, blame: dict[str, list[str]]) -> None:
        """Settle's provenance: each version it just blocked (``blame``, as
        :func:`_blocked_records` takes it) records its root's record with its path extended,
        in the transaction that blocked it. Only versions that were waiting are blocked, so no
        record is ever written over: a second cause reaching a blocked version changes
        nothing."""
        dead = sorted({d for ds in blame.values() for d in ds} - blame.keys())
        causes = {d: json.loads(r) for d, r in self._column_of(tx, "provenance", dead).items()
                  if r is not None}
        made = _blocked_records(blame, causes)
        tx.many("UPDATE task SET provenance = ? WHERE id = ?",
                ((json.dumps(r, separators=(",", ":")), x) for x, r in made.items()))

    def _ended(self, tx: Tx, t: str) -> None:
        """Spec: Settle after a step that put ``t`` in a dead state (Fail, AcknowledgeCancel,
        Cancel, an Expire that gives up): blocking spreads from it, then its optional edges
        are settled, as Settle's ``ended`` = {t}. (The order of the two does not matter to
        the counts: each decrements its own edges, and B is blocked before either.)"""
        self._settle(tx, [t])
        self._settle_optional(tx, [t])

    def _settle_optional(self, tx: Tx, ended: Sequence[str]) -> None:
        """The rest of Settle (its ``freed``): each optional edge to a version of ``ended``
        (each just ended) is settled: its pending dependent has one dep fewer to wait for, and
        is ready when none is left. One statement per ended version; its dependents through
        required edges are blocked already, and so out of reach."""
        if not ended:
            return
        now = tx.now()
        freed = 0
        for e in ended:
            freed += tx.run(
                "UPDATE task SET remaining_deps = remaining_deps - 1, "
                "became_ready_at = CASE WHEN remaining_deps = 1 THEN ? ELSE became_ready_at END, "
                "state = CASE WHEN remaining_deps = 1 THEN 'ready' ELSE state END "
                "WHERE state = 'pending' AND optional_deps > 0 AND id IN "
                "(SELECT task FROM dep WHERE dep = ? AND optional <> 0)", (now, e))
        if freed:
            tx.wake(self._max)  # a dependent may be ready

    def _claim_key(self, priority: int, due: float) -> tuple[float, float]:
        """``(claim_key, claim_due)`` of a version: claims take the largest key first, then the
        smallest claim_due, then the smallest seq (docs/time.md). With aging A the key is
        ``priority * A - due``: one level more for every A seconds it has been due, the same for
        every version, so the order never changes while they wait and is one index scan."""
        if self._aging is None:
            return float(priority), due
        return priority * self._aging - due, 0.0

    # ------------------------------------------------------------------ Submit, Start

    def submit(self, task_id: str, deps: Iterable[str] = (), *, fn: str | Callable[..., Any],
               args: dict[str, Any] | None = None, optional: Iterable[str] = (),
               if_absent: bool = False, run_at: dt.datetime | None = None,
               delay: float | None = None, priority: int = 0, task_type: str | None = None,
               tenant: str | int | None = None) -> int:
        """Submit a new version of ``task_id`` that runs ``fn(**args)``; return its generation.

        Spec: Submit, or SubmitOptional when ``optional`` names an id. As
        ``TaskScheduler.submit``: the edges to ``deps`` are required (the version waits for each
        to succeed, and is blocked when one cannot), those to ``optional`` optional (it waits
        for each to end, in any state, and is never blocked by it; docs/semantics.md); a
        replaced version that had settled an edge of a waiting dependent makes it wait again.
        ``fn`` names a function as ``"module:function"`` importable here, ``args`` is a dict of
        JSON-serialisable keyword arguments. A known ``task_id`` gets a new version (its work
        runs again, whatever its state) unless ``if_absent``: then the store keeps what it
        has, takes no step, and the current generation is returned (an idempotent submit keyed
        by id, for a script that may run twice). The version is due at ``run_at`` (an aware
        datetime; one in the past means now), or ``delay`` seconds from now, or now, on the
        store's clock read in this transaction, and claimed once ready and due, by
        ``priority`` (an int, higher first) and the store's aging (docs/time.md). Errors
        (nothing is stored): a bad id, deps, optional, fn, args, run_at, delay or priority, an
        id in both ``deps`` and ``optional`` or twice in one -> ``InvalidArgumentError``;
        closed -> ``SchedulerClosedError``; running -> ``TaskRunningError``; after start, an
        unknown dep -> ``UnknownDependencyError``, a cycle -> ``CycleError``. ``task_type``
        (None or a str) and ``tenant`` (None, a str or an int in ``TENANT_INT_RANGE``; any
        other -> ``InvalidArgumentError``) name the version's partition of :meth:`signals`.
        """
        item = _submission("submit", task_id, deps, optional, fn, args, run_at, delay,
                           priority, task_type, tenant)
        if not isinstance(if_absent, bool):
            raise InvalidArgumentError(f"submit({task_id!r}, if_absent={_r(if_absent)}): a bool")
        if if_absent:
            known = self._store.peek("SELECT generation FROM task WHERE id = ?", (task_id,))
            if known is not None:  # a version once stored is never removed: no race here
                return int(known[0])
        # The common path, on the server if it can (steps_postgres.py): the batch function,
        # given a batch of one. The server-side functions store no partition: a labelled
        # version is the client's transaction.
        labelled = item.task_type is not None or item.tenant is not None
        if not (labelled or if_absent):
            generations = self._submit_on_server([item])
            if generations is not None:
                return generations[0]
        # (what _counting_refusals does, without a context manager's cost on each submit)
        try:
            with self._store.transaction() as tx:
                return self._submit_in(tx, item, if_absent)
        except _REFUSALS as error:
            self._count_refusal(error, [item])
            raise

    def submit_many(self, tasks: Iterable[Mapping[str, Any]]) -> list[int]:
        """Submit many versions in one transaction; return their generations, in order.

        Spec: one Submit (or SubmitOptional) step per item, in the order given: the same as
        calling :meth:`submit` for each item in turn inside one transaction, so an item may
        depend on one before it in the batch, and an id given twice gets two versions. Each
        item is a mapping with the keys ``id`` and ``fn`` and, optionally, ``deps``,
        ``optional``, ``args``, ``run_at``, ``delay`` and ``priority``, each as
        :meth:`submit` takes it (no ``if_absent``). All or nothing: every item's arguments
        are checked before anything changes (a bad one -> ``InvalidArgumentError`` naming its
        index and id), and a refusal of any item (closed -> ``SchedulerClosedError``, an id
        running -> ``TaskRunningError``; after start, an unknown dep ->
        ``UnknownDependencyError``, a cycle -> ``CycleError``, as :meth:`submit` raises them)
        leaves the store as it was. A few round trips for the whole batch: SQLite runs it as
        one transaction, PostgreSQL as one call of a server-side function
        (steps_postgres.py's ``refsched_submit_many``).
        """
        items = _submissions(tasks)
        if not items:
            return []
        if all(item.task_type is None and item.tenant is None for item in items):
            generations = self._submit_on_server(items)
            if generations is not None:
                return generations
        at: list[_Submission] = []  # the item being submitted: a refusal is charged to it
        with self._counting_refusals(at), self._store.transaction() as tx:
            return self._submit_batch(tx, items, at)

    def _submit_batch(self, tx: Tx, items: Sequence[_Submission],
                      at: list[_Submission] | None = None) -> list[int]:
        """Each of ``items`` submitted in ``tx``, in order (Spec: Submit, SubmitOptional);
        ``at`` holds the item being submitted."""
        generations = []
        for item in items:
            if at is not None:
                at[:] = [item]
            generations.append(self._submit_in(tx, item))
        return generations

    def _submit_on_server(self, items: Sequence[_Submission]) -> list[int] | None:
        """``items`` submitted by one call of the store's server-side function (PostgreSQL):
        their generations; None when the store has none, or when it left the batch to the
        client's transaction (an error to raise, a dead dep to settle), having changed
        nothing."""
        if not self._store.has_steps:  # SQLite: no batch to build
            return None
        edges = [(i, d, d in item.optional) for i, item in enumerate(items, 1)
                 for d in item.deps]
        rows = self._store.call(
            "submit_many", self._record, self._max, self._aging,
            [item.task_id for item in items], [item.fn for item in items],
            [item.args for item in items], [item.at for item in items],
            [item.wait for item in items], [item.priority for item in items],
            [i for i, _, _ in edges], [d for _, d, _ in edges], [o for _, _, o in edges])
        if not rows or rows[0][0] is None:
            return None
        return [int(g) for g in rows[0][0]]

    def _submit_in(self, tx: Tx, item: _Submission, if_absent: bool = False) -> int:
        """Spec: Submit (SubmitOptional) of ``item`` in ``tx``; the new generation (the
        current one of a known id when ``if_absent``)."""
        task_id, dep_list, opt_set = item.task_id, item.deps, item.optional
        started, closed, seq = tx.metas("started", "closed", "next_seq")
        seq = int(seq)
        if closed:
            raise SchedulerClosedError(f"{item.call}({task_id!r}): the scheduler is closed")
        old = tx.one("SELECT generation, state, optional_deps FROM task WHERE id = ?",
                     (task_id,))
        if old is not None and if_absent:
            return int(old[0])
        if old is not None and old[1] == "running":
            raise TaskRunningError(f"{item.call}({task_id!r}): its current version is running")
        states = self._states_of(tx, dep_list) if dep_list else {}
        if started:
            self._check_deps_known_and_acyclic(tx, item.call, task_id, dep_list, states)
        tx.meta_add("next_seq", 1)
        remaining = sum(1 for d in dep_list if not _settles(states.get(d), d in opt_set))
        state = "pending" if remaining else "ready"
        generation = 1 if old is None else old[0] + 1
        now = tx.now()
        at, wait, priority = item.at, item.wait, item.priority
        due = max(at, now) if at is not None else now + (wait or 0.0)
        key, key_due = self._claim_key(priority, due)
        if old is not None:
            self._replace(tx, task_id, old[1], old[2])
        row = (task_id, generation, seq, state, item.fn, item.args, remaining,
               now if state == "ready" else None, due, priority, key, key_due)
        if opt_set or item.task_type is not None or item.tenant is not None:
            tx.later(_INSERT_VERSION_WITH_EDGE_KINDS_AND_LABELS,
                     (*row, len(opt_set), item.task_type, item.tenant))
        else:  # the columns' defaults: a row without what it does not use
            tx.later(_INSERT_VERSION, row)
        if dep_list:
            tx.many("INSERT INTO dep (task, dep, optional) VALUES (?, ?, ?)",
                    ((task_id, d, int(d in opt_set)) for d in dep_list))
        self._count(tx, "submitted")
        # d: the delay as given (exact), or how far ahead a run_at put the due time
        d_ = due - now if at is not None else wait or 0
        if opt_set:
            self._step(tx, "SubmitOptional", t=task_id, D=sorted(dep_list),
                       O=sorted(opt_set), p=priority, d=d_)
        else:
            self._step(tx, "Submit", t=task_id, D=sorted(dep_list), p=priority, d=d_)
        if state == "ready":
            # One not yet due wakes the idle workers to read the next due time again.
            tx.wake(self._max, always=due > now)
        if any(states.get(d) in _DEAD for d in dep_list if d not in opt_set):
            # Only a dead required dep can block the new version (and through it, the
            # dependents its replaced success had): nothing else waiting has one.
            self._settle(tx, [task_id])
        return generation

    def _check_deps_known_and_acyclic(self, tx: Tx, call: str, task_id: str,
                                      deps: Iterable[str], states: dict[str, Any]) -> None:
        """After start: a dep never submitted -> ``UnknownDependencyError``; edges from
        ``task_id`` to ``deps`` that close a cycle -> ``CycleError`` (``states``: the deps'
        states, as read in ``tx``)."""
        deps = list(deps)
        missing = [(task_id, d) for d in deps if d not in states]
        if missing:
            raise UnknownDependencyError(
                f"{call}({task_id!r}): unknown dependencies: "
                + ", ".join(repr(d) for _, d in missing), missing)
        cycle = self._path_to(tx, deps, task_id)
        if cycle is not None:
            path = [task_id, *cycle]
            raise CycleError(f"{call}({task_id!r}): dependency cycle "
                             + " -> ".join(repr(x) for x in path), [path])

    def add_deps(self, task_id: str, deps: Iterable[str] = (),
                 optional: Iterable[str] = ()) -> TaskState:
        """Make the pending version of ``task_id`` depend on ``deps`` and ``optional`` too.

        Spec: AddDeps. The edges to ``deps`` are required, those to ``optional`` optional, as
        for :meth:`submit`. pending -> pending, its count raised by the new deps not settled;
        or -> blocked when a new required dep can no longer succeed (then Settle). One
        transaction, which reads the version's state: a version a claim took first (or that
        was never pending) refuses the change, and a claim that commits after it sees the new
        edges. Returns the state. Errors, in this order, with nothing changed: a bad id, deps
        or optional not an iterable of ids, a dep twice (in one list or in both) ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``; no dep given,
        ``task_id`` a dep, a dep that is one already -> ``InvalidArgumentError``; closed ->
        ``SchedulerClosedError``; the version not pending (ready, running or ended: it keeps
        its deps) -> ``InvalidTransitionError``; after start: a dep never submitted ->
        ``UnknownDependencyError``, new edges that close a cycle -> ``CycleError``.
        """
        call = "add_deps"
        _check_id(call, task_id)
        new, opt_set = _dep_list(call, task_id, deps, optional)
        with self._counting_refusals(task_id, edges=True), self._store.transaction() as tx:
            row = tx.one("SELECT generation, state FROM task WHERE id = ?", (task_id,))
            if row is None:
                raise UnknownTaskError(f"{call}({task_id!r}): unknown task", task_id)
            generation, state = row
            if not new:
                raise InvalidArgumentError(f"{call}({task_id!r}): no dependency given")
            if task_id in new:
                raise InvalidArgumentError(
                    f"{call}({task_id!r}, {new!r}): a task cannot depend on itself")
            already = self._already(tx, task_id, new)
            if already:
                raise InvalidArgumentError(f"{call}({task_id!r}, {new!r}): "
                                           + ", ".join(map(repr, already))
                                           + " already a dependency")
            started, closed = tx.metas("started", "closed")
            if closed:
                raise SchedulerClosedError(f"{call}({task_id!r}): the scheduler is closed")
            if state != "pending":
                raise InvalidTransitionError(f"{call}({task_id!r}): version {generation} is "
                                             f"{state}, not pending")
            states = self._states_of(tx, new)
            if started:
                self._check_deps_known_and_acyclic(tx, call, task_id, new, states)
            added = sum(1 for d in new if not _settles(states.get(d), d in opt_set))
            tx.later("UPDATE task SET remaining_deps = remaining_deps + ?, "
                     "optional_deps = optional_deps + ? WHERE id = ?",
                     (added, len(opt_set), task_id))
            tx.many("INSERT INTO dep (task, dep, optional) VALUES (?, ?, ?)",
                    ((task_id, d, int(d in opt_set)) for d in new))
            self._step(tx, "AddDeps", t=task_id, D=sorted(new), O=sorted(opt_set))
            if any(states.get(d) in _DEAD for d in new if d not in opt_set):
                self._settle(tx, [task_id])
                (state,) = tx.one("SELECT state FROM task WHERE id = ?", (task_id,)) or (state,)
            return TaskState(state)

    def _already(self, tx: Tx, task_id: str, ids: Sequence[str]) -> list[str]:
        """The ids of ``ids`` that are deps of ``task_id`` already, in the order given."""
        found: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            found.update(d for (d,) in tx.all(
                f"SELECT dep FROM dep WHERE task = ? AND dep IN ({marks})", (task_id, *chunk)))
        return [d for d in ids if d in found]

    def _replace(self, tx: Tx, task_id: str, old_state: str, old_optional: int) -> None:
        """Take the current version of ``task_id`` (in ``old_state``, with ``old_optional``
        optional edges) out of the store, for the new one the caller inserts. A replaced
        version that had settled an edge of a waiting dependent (it succeeded; or it ended,
        and the edge is optional) no longer does: that dependent waits again (spec:
        NewVersion's bumped)."""
        if old_state == "succeeded":
            tx.later("UPDATE task SET remaining_deps = remaining_deps + 1, "
                     "state = 'pending' WHERE state IN ('pending', 'ready') AND id IN "
                     "(SELECT task FROM dep WHERE dep = ?)", (task_id,))
        elif old_state in _DEAD:
            tx.later("UPDATE task SET remaining_deps = remaining_deps + 1, "
                     "state = 'pending' WHERE state IN ('pending', 'ready') AND optional_deps > 0 "
                     "AND id IN (SELECT task FROM dep WHERE dep = ? AND optional <> 0)",
                     (task_id,))
        tx.later(signal_rows.ARCHIVE, (task_id,))  # its signals outlive its row
        tx.later("DELETE FROM task WHERE id = ?", (task_id,))
        tx.later("DELETE FROM dep WHERE task = ?", (task_id,))
        if old_optional:
            tx.later("DELETE FROM input_summary WHERE task = ?", (task_id,))

    def _states_of(self, tx: Tx, ids: Sequence[str]) -> dict[str, str]:
        return self._column_of(tx, "state", ids)

    def _column_of(self, tx: Tx, column: str, ids: Sequence[str]) -> dict[str, Any]:
        """``column`` of each id of ``ids`` that has a row, in chunks SQLite accepts."""
        values: dict[str, Any] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            values.update(tx.all(f"SELECT id, {column} FROM task WHERE id IN ({marks})", chunk))
        return values

    def _path_to(self, tx: Tx, sources: Sequence[str], target: str) -> list[str] | None:
        """A dependency path from one of ``sources`` to ``target``, or None (iterative BFS)."""
        parent: dict[str, str | None] = {s: None for s in sources}
        queue = list(sources)
        while queue:
            x = queue.pop(0)
            if x == target:
                path = [x]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])  # type: ignore[arg-type]
                return path[::-1]
            for (d,) in tx.all("SELECT dep FROM dep WHERE task = ?", (x,)):
                if d not in parent:
                    parent[d] = x
                    queue.append(d)
        return None

    def start(self) -> None:
        """Seal the initial graph and allow claims (Spec: Start); errors as ``TaskScheduler``."""
        with self._counting_refusals(None), self._store.transaction() as tx:
            if self._meta(tx, "closed"):
                raise SchedulerClosedError("start(): the scheduler is closed")
            if self._meta(tx, "started"):
                raise InvalidTransitionError(
                    "start(): the store is already started: its versions are claimed as they "
                    "become ready, and a submit now joins the running graph (checked at "
                    "once); use submit(..., if_absent=True) to add only the ids it lacks, "
                    "and skip start() when started() is True")
            missing = tx.all("SELECT dep.task, dep.dep FROM dep LEFT JOIN task ON "
                             "task.id = dep.dep WHERE task.id IS NULL ORDER BY dep.task, dep.dep")
            if missing:
                pairs = [(t, d) for t, d in missing]
                raise UnknownDependencyError(
                    "start(): unknown dependencies: "
                    + ", ".join(f"{t!r} needs {d!r}" for t, d in pairs), pairs)
            cycles = _cycles(tx.all("SELECT id, seq FROM task"),
                             tx.all("SELECT task, dep FROM dep"))
            if cycles:
                raise CycleError("start(): dependency cycle "
                                 + " -> ".join(repr(x) for x in cycles[0]), cycles)
            tx.meta_set("started", 1)
            self._step(tx, "Start")
            tx.wake(self._max)

    # ------------------------------------------------------------------ Claim

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        """Claim up to ``limit`` versions for ``worker`` under leases of ``lease`` seconds.

        One transaction on the store's clock: first Expire every live lease whose deadline has
        passed (a version out of attempts fails), then Reclaim expired versions, smallest seq
        first, then Claim eligible versions (ready and due), first by the claim key of
        docs/time.md (smallest seq first when priorities and due times agree), within
        ``max_concurrency``. A re-claimed version keeps the slot it had. Returns the leases in
        that order; ``[]`` when there is nothing to take. After close() only expired versions
        are re-claimed. Errors: a bad argument -> ``InvalidArgumentError``; not started ->
        ``InvalidTransitionError``.
        """
        _check_name("claim", worker, "worker")
        if not _is_int(limit) or limit < 1:
            raise InvalidArgumentError(f"claim({worker!r}, limit={_r(limit)}): an int >= 1")
        if (isinstance(lease, bool) or not isinstance(lease, (int, float))
                or not math.isfinite(lease) or lease <= 0):
            raise InvalidArgumentError(f"claim({worker!r}, lease={_r(lease)}): seconds > 0")
        taken, self._look.due_in = self._claim(worker, limit, float(lease))
        return taken

    def claim_and_due(self, worker: str, limit: int = 1, lease: float = 30.0
                      ) -> tuple[list[Lease], float | NotLooked | None]:
        """:meth:`claim`, and what :meth:`next_due` would say right after it, when the claim
        read that in its own first look: a claim that finds nothing to take reads the next due
        time in the query that found so, and an idle worker waits for it without a round trip
        of its own. ``NOT_LOOKED`` when that look did not read it (the claim went on to the
        store's claim step, or the store is older than due times): ask :meth:`next_due`."""
        self._look.due_in = NOT_LOOKED
        taken = self.claim(worker, limit, lease)
        due_in, self._look.due_in = self._look.due_in, NOT_LOOKED
        return taken, due_in

    def _claim(self, worker: str, limit: int, lease: float
               ) -> tuple[list[Lease], float | NotLooked | None]:
        self._store.forget_wakeups()  # what they told of, this look sees
        look = self._look
        # After a claim that took all it asked for, a store with a claim step goes to it at
        # once: the step looks before it locks, as the first look would, and a busy worker
        # saves that look's round trip (one in ten of a worker claiming eight at a time). An
        # empty answer then carries no due time: the caller asks next_due() if it waits.
        if not (getattr(look, "full", False) and self._store.has_steps):
            claimable, due_in = self._claimable()
            if not claimable:
                look.full = False
                return [], due_in
        # The common path, on the server if it can (steps_postgres.py); a lease to expire or an
        # error to raise is left to the transaction below.
        rows = self._store.call("claim", self._record, self._max, worker, limit, lease)
        if rows is not None and not (rows and rows[0][0]):
            look.full = len(rows) >= limit
            if look.full:  # as many as asked for: busy while they run
                self._store.busy()
            return [Lease(t, g, 1, deadline, fn, json.loads(args), worker)
                    for _, _, t, g, fn, args, deadline in rows], NOT_LOOKED
        # The check is sent with BEGIN: a claimer that finds nothing to take holds the store's
        # lock for one round trip, as each of the idle workers a notification wakes does.
        with self._store.transaction(first=self._claim_check()) as tx:
            started, closed, overdue, running, ready, _ = tx.first or (0, 0, 0, 0, 0, 0)
            if not started:
                raise InvalidTransitionError("claim(): the scheduler is not started")
            if not overdue and (closed or not ready or running >= self._max):
                look.full = False
                return [], NOT_LOOKED
            now = tx.now()
            if overdue:
                running -= self._expire(tx, now)
            deadline = now + lease
            taken: list[Lease] = []
            orphans = tx.all("SELECT id, generation, attempt, fn, args FROM task WHERE "
                             "state = 'running' AND holder IS NULL ORDER BY seq LIMIT ?",
                             (limit,)) if overdue else []
            for t, g, a, fn, args in orphans:
                tx.later("UPDATE task SET attempt = ?, holder = ?, deadline = ?, "
                         "lease_seconds = ?, claimed_at = ? WHERE id = ?",
                         (a + 1, worker, deadline, lease, now, t))
                self._step(tx, "Reclaim", w=worker, t=t)
                taken.append(Lease(t, g, a + 1, deadline, fn, json.loads(args), worker))
            self._count(tx, "reclaimed", len(taken))
            want = limit - len(taken)
            if want and not closed:
                want = min(want, self._max - running)
                if want > 0:
                    # One statement picks and takes the first k eligible versions, walking
                    # task_claim in its order: "+due" keeps SQLite's planner from taking
                    # task_due instead, which sorted every due version at each claim.
                    rows = sorted(tx.all(
                        "UPDATE task SET state = 'running', attempt = 1, holder = ?, "
                        "deadline = ?, lease_seconds = ?, claimed_at = ?, first_claimed_at = ? "
                        "WHERE id IN (SELECT id "
                        "FROM task WHERE state = 'ready' AND +due <= ? "
                        "ORDER BY claim_key DESC, claim_due, seq LIMIT ?) "
                        "RETURNING -claim_key, claim_due, seq, id, generation, fn, args, "
                        "optional_deps", (worker, deadline, lease, now, now, now, want)))
                    if rows:
                        self._count(tx, "claimed", len(rows))
                        self._step(tx, "Claim", w=worker, k=len(rows),
                                   chosen=sorted(row[3] for row in rows))
                        self._keep_inputs(tx, [row[3] for row in rows if row[7]])
                    taken.extend(Lease(t, g, 1, deadline, fn, json.loads(args), worker)
                                 for _, _, _, t, g, fn, args, _ in rows)
            if taken:
                tx.wake(self._max)  # what it left is for the next idle worker
        look.full = len(taken) >= limit
        if look.full:
            self._store.busy()
        return taken, NOT_LOOKED

    def _keep_inputs(self, tx: Tx, claimed: Sequence[str]) -> None:
        """Store the input summary of each version of ``claimed`` (just claimed; each has
        optional edges): how each of its optional deps had ended, fixed from now on. (On
        PostgreSQL, ``refsched_claim`` of steps_postgres.py writes the same rows.)"""
        tx.many(_KEEP_INPUTS, ((t,) for t in claimed))

    def _claimable(self) -> tuple[bool, float | NotLooked | None]:
        """Whether a claim now would take a step, read without the store's write lock: idle
        workers poll with claims, and an empty one must not queue behind (or delay) the steps
        of others. False only when the claim transaction would find no lease past its deadline,
        no version running without a lease, and no ready version it may take; a claim that
        returns ``[]`` here took no step, as the transaction would not have. With it, what
        :meth:`next_due` says, read in the same query (``NOT_LOOKED`` on a store older than
        due times): the idle worker's wait, without a round trip of its own."""
        look_ahead = self._schema_version >= 3
        started, closed, overdue, running, ready, owed, *due = (
            self._store.peek(self._claim_check(look_ahead=look_ahead))
            or (0, 0, 0, 0, 0, 0, None, None))
        # A slot's time has come: decide it first, in a transaction of its own, so that what
        # it runs can be claimed now (refsched/durable/schedules.py).
        if owed and started and not closed and self.decide_slots():
            return True, NOT_LOOKED
        if not started or overdue:
            return True, NOT_LOOKED  # (not started: the claim transaction says why not)
        waits = [float(w) for w in due if w is not None]
        due_in = (min(waits) if waits else None) if look_ahead else NOT_LOOKED
        return not closed and running < self._max and bool(ready), due_in

    def _claim_check(self, look_ahead: bool = False) -> str:
        """What a claim needs to know first, in one query: started, closed, whether a version
        runs without a live lease or past its deadline, how many run, whether one is eligible
        (ready and due), whether a schedule owes a slot (``meta.slot_due`` has come); with
        ``look_ahead``, then the two waits of :meth:`next_due`.
        (On PostgreSQL, ``refsched_claimable`` of steps_postgres.py judges the same.)"""
        key = (look_ahead, self._store.clock_sql)
        sql = _CLAIM_CHECKS.get(key)
        if sql is None:  # built once per clock: every claim asks it, twice
            sql = _CLAIM_CHECKS[key] = self._claim_check_text(look_ahead)
        return sql

    def _claim_check_text(self, look_ahead: bool) -> str:
        # The clock read once, as c.now, a value each comparison can seek an index with: in
        # the comparisons themselves PostgreSQL's clock_timestamp(), volatile, is evaluated
        # per row, and MIN(due) over the ready versions read the whole index (8 ms at 12,000).
        ahead = (", (SELECT MIN(due) FROM task WHERE state = 'ready' AND due > c.now) - c.now, "
                 "(SELECT MIN(next_slot) FROM schedule WHERE next_slot > c.now) - c.now"
                 ) if look_ahead else ""
        return ("SELECT CAST((SELECT value FROM meta WHERE key = 'started') AS INTEGER) AS "
                "started, CAST((SELECT value FROM meta WHERE key = 'closed') AS INTEGER) AS "
                "closed, EXISTS (SELECT 1 FROM task WHERE state = 'running' AND (holder IS "
                "NULL OR deadline < c.now)) AS overdue, "
                "(SELECT COUNT(*) FROM task WHERE state = 'running') AS running, "
                # the earliest due of the ready versions, an index's first entry: EXISTS
                # over due <= now may scan the table past every version already claimed
                "COALESCE((SELECT MIN(due) FROM task WHERE state = 'ready') <= c.now, FALSE) "
                "AS ready, "
                "COALESCE(CAST((SELECT value FROM meta WHERE key = 'slot_due') AS DOUBLE "
                f"PRECISION), {schedules.NO_SLOT}) <= c.now AS owed" + ahead
                + f" FROM (SELECT {self._store.clock_sql} AS now) AS c")

    def expire(self) -> None:
        """Expire every live lease whose deadline has passed, without claiming (Spec: Expire).

        The step ``claim()`` takes first, in a transaction of its own: for a reaper that only
        ends dead workers' leases, and for lock-step checks that take Expire alone. A version
        out of attempts fails, and blocking spreads.
        """
        with self._store.transaction() as tx:
            self._expire(tx, tx.now())
            tx.wake(self._max)  # what expired can be re-claimed

    def _expire(self, tx: Tx, now: float) -> int:
        """Spec: Expire, for every live lease whose deadline is before ``now``, in seq order.
        Returns how many versions failed (out of attempts): slots freed."""
        expired = tx.all("SELECT id, attempt, generation FROM task WHERE state = 'running' AND "
                         "holder IS NOT NULL AND deadline < ? ORDER BY seq", (now,))
        failed = 0
        for t, attempt, generation in expired:
            self._count(tx, "expired")
            if attempt < self._max_attempts:
                tx.later("UPDATE task SET holder = NULL, deadline = NULL, expiries = expiries + 1 "
                         "WHERE id = ?", (t,))
            else:
                why = (f"lease expired {attempt} times (max_attempts={self._max_attempts}): its "
                       "workers died or stalled")
                # its provenance: no actor (the store gave it up), the error as the reason
                tx.later("UPDATE task SET state = 'failed', holder = NULL, deadline = NULL, "
                         "ended_at = ?, error = ?, provenance = ?, expiries = expiries + 1 "
                         "WHERE id = ?",
                         (now, why, _own_record(t, generation, "failed", None, why, now), t))
                self._count(tx, "failed")
                failed += 1
            self._step(tx, "Expire", t=t)
            if attempt >= self._max_attempts:
                self._ended(tx, t)
        return failed

    # ------------------------------------------------------------------ Reports

    def _current(self, tx: Tx, call: str, lease: Lease) -> tuple[Any, ...] | None:
        """The version's row when ``lease`` is its live one; None for a repeated report of the
        attempt that ended it; otherwise ``StaleLeaseError``."""
        row = self._row(tx, call, lease.task_id)
        generation, state, attempt, holder, _, _, ended_attempt = row
        if (generation == lease.generation and attempt == lease.attempt
                and state == "running" and holder == lease.worker):
            return row
        if (generation == lease.generation and ended_attempt == lease.attempt
                and state in _TERMINAL):
            return None
        self._stale += 1
        if generation != lease.generation:
            why = f"generation {lease.generation} is stale, current is {generation}"
        elif attempt != lease.attempt:
            why = f"attempt {lease.attempt} is stale, current is {attempt}"
        elif state != "running":
            why = f"the version is {state}"
        else:
            why = "the lease expired"
        raise StaleLeaseError(f"{call}({lease.task_id!r}, generation={lease.generation}, "
                              f"attempt={lease.attempt}): {why}", lease.task_id,
                              lease.generation, generation, lease.attempt, attempt)

    def heartbeat(self, lease: Lease) -> bool:
        """Extend a live lease by its length; return whether a cancel was requested.

        Spec: Heartbeat. Error: the lease is not the version's live one -> ``LeaseLostError``
        (stop the work: another attempt has it, or the version ended).
        """
        _check_lease("heartbeat", lease)
        with self._store.transaction() as tx:
            return self._heartbeat_in(tx, lease, "heartbeat")

    def heartbeat_many(self, leases: Iterable[Lease]) -> list[bool | LeaseLostError]:
        """Heartbeat many leases in one transaction; return, for each in order, whether a
        cancel was requested, or the ``LeaseLostError`` that refused it.

        Spec: one Heartbeat step per lease, in the order given, each judged on its own
        version's row as :meth:`heartbeat` judges it: a lease that is not live changes nothing
        and does not undo the others. Every lease is checked before anything changes (a bad one
        -> ``InvalidArgumentError`` naming its index; a task the store does not know ->
        ``UnknownTaskError``, and nothing changes). Why: a worker holding many leases extends
        them all with one commit (on PostgreSQL, one wait for the store's lock) instead of one
        each."""
        if isinstance(leases, (str, bytes, Mapping)) or not isinstance(leases, Iterable):
            raise InvalidArgumentError(f"heartbeat_many({_r(leases)}): an iterable of leases")
        batch = [_check_lease(f"heartbeat_many[{i}]", lease) for i, lease in enumerate(leases)]
        if not batch:
            return []
        answers: list[bool | LeaseLostError] = []
        with self._store.transaction() as tx:
            for i, lease in enumerate(batch):
                try:
                    answers.append(self._heartbeat_in(tx, lease, f"heartbeat_many[{i}]"))
                except LeaseLostError as lost:  # its check changed nothing: go on
                    answers.append(lost)
        return answers

    def _heartbeat_in(self, tx: Tx, lease: Lease, call: str) -> bool:
        """Spec: Heartbeat, in ``tx``: whether a cancel was requested."""
        row = tx.one("SELECT generation, state, attempt, holder, cancel_requested, "
                     "lease_seconds FROM task WHERE id = ?", (lease.task_id,))
        if row is None:
            raise UnknownTaskError(f"{call}({lease.task_id!r}): unknown task", lease.task_id)
        generation, state, attempt, holder, cancel_requested, seconds = row
        if not (generation == lease.generation and attempt == lease.attempt
                and state == "running" and holder == lease.worker):
            raise LeaseLostError(f"{call}({lease.task_id!r}, generation={lease.generation}, "
                                 f"attempt={lease.attempt}): the lease is no longer live")
        tx.later("UPDATE task SET deadline = ? WHERE id = ?", (tx.now() + seconds,
                                                               lease.task_id))
        self._step(tx, "Heartbeat", w=lease.worker, t=lease.task_id, g=lease.generation,
                   a=lease.attempt)
        return bool(cancel_requested)

    def complete(self, lease: Lease, result: Any = None) -> TaskState:
        """Report success with a JSON-serialisable ``result`` (Spec: Complete).

        Each pending dependent has one dep fewer to wait for (under the store's write lock)
        and becomes ready when none is left. A repeat of the accepted report returns the
        state; a lease that is not live -> ``StaleLeaseError``, and nothing changes.
        """
        _check_lease("complete", lease)
        text = _dumps(result, f"complete({lease.task_id!r}) result")
        # The common path, on the server if it can (steps_postgres.py); a repeated or stale
        # report is answered by the transaction below.
        if self._store.call("complete", self._record, self._max, lease.task_id,
                            lease.generation, lease.attempt, lease.worker, text) == [(True,)]:
            return TaskState.SUCCEEDED
        return self._end(lease, "complete", "Complete", "succeeded", result=text)

    def fail(self, lease: Lease, error: Any = None) -> TaskState:
        """Report failure (Spec: Fail); then blocking spreads (Settle). Errors as complete().

        The provenance of each version it blocks names this version as root, the lease's worker
        as actor and the error's text (as ``info().error`` has it, cut to
        :data:`MAX_NOTE_CHARS`) as reason."""
        _check_lease("fail", lease)
        return self._end(lease, "fail", "Fail", "failed", error=_error_text(error),
                         trace=_traceback_text(error))

    def acknowledge_cancel(self, lease: Lease) -> TaskState:
        """Report that the function stopped as cancelled (Spec: AcknowledgeCancel). The
        version records its provenance: itself as root, the lease's worker as actor, no
        reason."""
        _check_lease("acknowledge_cancel", lease)
        return self._end(lease, "acknowledge_cancel", "AcknowledgeCancel", "cancelled")

    def report_many(self, reports: Iterable[tuple[str, Lease, Any]]
                    ) -> list[TaskState | StaleLeaseError]:
        """Make many reports in one transaction; return, for each in order, the state it left
        its version in, or the ``StaleLeaseError`` that refused it.

        Each report is a tuple ``(kind, lease, value)``: ``("complete", lease, result)``,
        ``("fail", lease, error)`` or ``("acknowledge_cancel", lease, None)`` (the value is
        ignored), as :meth:`complete`, :meth:`fail` and :meth:`acknowledge_cancel` take them.
        Spec: one Complete, Fail or AcknowledgeCancel step per report, in the order given, each
        fenced on its own version's row as the single report is: a report whose lease is not
        its version's live one changes nothing and does not undo the others (its entry is the
        ``StaleLeaseError``), and a repeat of an accepted report is answered with the state
        (so a batch whose answer was lost is sent again, and each of its reports is then a
        repeat). Every report is checked before anything changes (a bad one ->
        ``InvalidArgumentError`` naming its index; a task the store does not know ->
        ``UnknownTaskError``, and nothing changes). One commit for the whole batch: SQLite runs
        it as one transaction; PostgreSQL as one call of a server-side function when every
        report is a complete of a live lease (steps_postgres.py's
        ``refsched_complete_many``), else as one transaction of the client.
        """
        items = _reports(reports)
        if not items:
            return []
        if self._complete_on_server(items):
            return [TaskState.SUCCEEDED] * len(items)
        with self._store.transaction() as tx:
            return self._report_batch(tx, items)

    def _report_batch(self, tx: Tx, items: Sequence[_Report]
                      ) -> list[TaskState | StaleLeaseError]:
        """Each report of ``items`` in ``tx``, in order; a refused one is its entry, and the
        reports after it are still made."""
        answers: list[TaskState | StaleLeaseError] = []
        for item in items:
            try:
                answers.append(self._end_in(tx, item.lease, item.call, item.action,
                                            item.state, result=item.result, error=item.error,
                                            trace=item.trace))
            except StaleLeaseError as refused:  # its fence changed nothing: go on
                self._refused(tx, self._labels(tx, item.lease.task_id), "stale_callbacks")
                answers.append(refused)
        return answers

    def _complete_on_server(self, items: Sequence[_Report]) -> bool:
        """Whether one call of the store's server-side function (PostgreSQL) completed every
        report of ``items``; False when the store has none, when a report is not a complete,
        or when the function left the batch to the client's transaction (a lease not live: a
        stale report or a repeat), having changed nothing."""
        if not self._store.has_steps or any(item.action != "Complete" for item in items):
            return False
        rows = self._store.call(
            "complete_many", self._record, self._max, [item.lease.task_id for item in items],
            [item.lease.generation for item in items], [item.lease.attempt for item in items],
            [item.lease.worker for item in items], [item.result for item in items])
        return rows == [(True,)]

    def _end(self, lease: Lease, call: str, action: str, state: str, *,
             result: str | None = None, error: str | None = None,
             trace: str | None = None) -> TaskState:
        try:
            with self._store.transaction() as tx:
                return self._end_in(tx, lease, call, action, state, result=result, error=error,
                                    trace=trace)
        except StaleLeaseError:
            # refused by the fence: counted in a transaction of its own (the refused one is
            # rolled back), in the partition of the task's current version
            with self._store.transaction() as tx:
                self._refused(tx, self._labels(tx, lease.task_id), "stale_callbacks")
            raise

    def _end_in(self, tx: Tx, lease: Lease, call: str, action: str, state: str, *,
                result: str | None = None, error: str | None = None,
                trace: str | None = None) -> TaskState:
        """Spec: ``action`` (Complete, Fail, AcknowledgeCancel) of ``lease`` in ``tx``; a
        repeat is answered with the state, a lease not live -> ``StaleLeaseError``, and
        neither changes anything but the count of refused calls."""
        t = lease.task_id
        now = tx.now()
        # The fence: the row changes only while this lease is the version's live one.
        if not tx.run("UPDATE task SET state = ?, holder = NULL, deadline = NULL, "
                      "ended_attempt = ?, ended_at = ?, result = ?, error = ? WHERE id = ? "
                      "AND generation = ? AND attempt = ? AND state = 'running' AND "
                      "holder = ?", (state, lease.attempt, now, result, error, t,
                                     lease.generation, lease.attempt, lease.worker)):
            self._current(tx, call, lease)  # raises StaleLeaseError unless a repeat
            self._duplicates += 1
            self._refused(tx, self._labels(tx, t), "duplicate_callbacks")
            return TaskState(self._row(tx, call, t)[1])
        if trace is not None:  # the version is running until this step: its row is ours
            tx.later("UPDATE task SET traceback = ? WHERE id = ?", (trace, t))
        if state != "succeeded":  # it ended itself: its own record, once
            tx.later("UPDATE task SET provenance = ? WHERE id = ?", (_own_record(
                t, lease.generation, state, lease.worker, _note_cut(error), now), t))
        self._count(tx, state)
        self._step(tx, action, w=lease.worker, t=t, g=lease.generation, a=lease.attempt)
        tx.wake(self._max)  # a slot is free, and dependents may be ready
        if state == "succeeded":
            # Fan-in: the count of each pending dependent is decremented by this one
            # statement, under the write lock, so two parents ending at once both count.
            tx.later("UPDATE task SET remaining_deps = remaining_deps - 1, "
                     "became_ready_at = CASE WHEN remaining_deps = 1 THEN ? ELSE "
                     "became_ready_at END, state = CASE WHEN remaining_deps = 1 THEN 'ready' "
                     "ELSE state END WHERE "
                     "state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = ?)",
                     (now, t))
        else:
            self._ended(tx, t)
        return TaskState(state)

    # ------------------------------------------------------------------ Cancel, Retry, Close

    def cancel(self, task_id: str, *, actor: str | None = None,
               reason: str | None = None) -> TaskState:
        """Cancel a waiting version, or ask a running one to stop (Spec: Cancel).

        Waiting -> cancelled, then Settle; running -> ``cancel_requested`` (the worker hears it
        on its next heartbeat); otherwise no step. Returns the state after the call. A version
        cancelled here records its provenance (itself as root, ``actor``, ``reason``, the
        store's time), and so does each version Settle blocks. Errors: a bad id, or ``actor``
        or ``reason`` neither None nor a str of at most :data:`MAX_NOTE_CHARS` characters ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        _check_id("cancel", task_id)
        _check_note("cancel", task_id, actor, reason)
        with self._store.transaction() as tx:
            generation, state, _, _, requested, _, _ = self._row(tx, "cancel", task_id)
            if state in _WAITING:
                now = tx.now()
                tx.later("UPDATE task SET state = 'cancelled', ended_at = ?, provenance = ? "
                         "WHERE id = ?", (now, _own_record(task_id, generation, "cancelled",
                                                           actor, reason, now), task_id))
                self._count(tx, "cancelled")
                self._step(tx, "Cancel", t=task_id)
                self._ended(tx, task_id)
                return TaskState.CANCELLED
            if state == "running" and not requested:
                tx.later("UPDATE task SET cancel_requested = 1 WHERE id = ?", (task_id,))
                self._step(tx, "Cancel", t=task_id)
            return TaskState(state)

    def retry(self, task_id: str) -> int:
        """Give a dead version, and every version blocked because of it, a new version.

        Spec: Retry. Each new version is due now and keeps its priority. Returns the new
        generation of ``task_id``. Errors: unknown ->
        ``UnknownTaskError``; closed -> ``SchedulerClosedError``; not failed, cancelled or
        blocked -> ``InvalidTransitionError``.
        """
        _check_id("retry", task_id)
        with self._store.transaction() as tx:
            _, state, _, _, _, _, _ = self._row(tx, "retry", task_id)
            if self._meta(tx, "closed"):
                raise SchedulerClosedError(f"retry({task_id!r}): the scheduler is closed")
            if state not in _DEAD:
                raise InvalidTransitionError(f"retry({task_id!r}): the version is {state}, "
                                             "not failed, cancelled or blocked")
            members = {task_id: None}
            _reach(tx, members, [task_id],
                   "SELECT id FROM task WHERE state = 'blocked' AND blocked_by = ?")
            seqs = self._column_of(tx, "seq", list(members))
            priorities = self._column_of(tx, "priority", list(members))
            ordered = sorted(members, key=seqs.__getitem__)
            optionals = self._column_of(tx, "optional_deps", list(members))
            # the dead versions' signals, kept before any statement below changes their rows
            tx.many(signal_rows.ARCHIVE, ((t,) for t in ordered))
            seq = int(self._meta(tx, "next_seq"))
            tx.meta_add("next_seq", len(ordered))
            now = tx.now()
            # Each member ended, which settled the optional edges to it: a waiting dependent
            # waits for its new version (read while every member is dead: none is bumped).
            tx.many("UPDATE task SET remaining_deps = remaining_deps + 1, state = 'pending' "
                    "WHERE state IN ('pending', 'ready') AND optional_deps > 0 AND id IN "
                    "(SELECT task FROM dep WHERE dep = ? AND optional <> 0)",
                    ((t,) for t in ordered))
            kept = [t for t in ordered if optionals[t]]
            if kept:
                # Counted once every member is a new version, which has not ended: an optional
                # edge from one member to another is not settled.
                tx.many("UPDATE task SET state = 'pending' WHERE id = ?", ((t,) for t in ordered))
                tx.many("DELETE FROM input_summary WHERE task = ?", ((t,) for t in kept))
            for i, t in enumerate(ordered):
                (remaining,) = tx.one(
                    "SELECT COUNT(*) FROM dep LEFT JOIN task d ON d.id = dep.dep WHERE "
                    f"dep.task = ? AND {_UNSETTLED}", (t,)) or (0,)
                tx.run("UPDATE task SET generation = generation + 1, seq = ?, state = ?, "
                       "remaining_deps = ?, blocked_by = NULL, cancel_requested = 0, attempt = 0, "
                       "holder = NULL, deadline = NULL, ended_attempt = NULL, result = NULL, "
                       "error = NULL, traceback = NULL, provenance = NULL, became_ready_at = ?, "
                       "claimed_at = NULL, retried = 1, first_claimed_at = NULL, expiries = 0, "
                       "ended_at = NULL, due = ?, claim_key = ?, claim_due = ? "
                       "WHERE id = ?", (seq + i, "pending" if remaining else "ready", remaining,
                                        None if remaining else now, now,
                                        *self._claim_key(priorities[t], now), t))
            self._count(tx, "retried", len(ordered))
            self._step(tx, "Retry", t=task_id)
            tx.wake(self._max)
            self._settle(tx, ordered)
            (generation,) = tx.one("SELECT generation FROM task WHERE id = ?", (task_id,)) or (0,)
            return int(generation)

    def close(self, cancel_pending: bool = True) -> CloseReport:
        """Take no more submissions or claims, for every process (Spec: Close).

        With ``cancel_pending`` every waiting version is cancelled. Running versions finish
        (expired ones are still re-claimed). A second close changes nothing. Returns every
        id by the state of its current version.
        """
        if not isinstance(cancel_pending, bool):
            raise InvalidArgumentError(f"close(cancel_pending={_r(cancel_pending)}): a bool")
        with self._store.transaction() as tx:
            if not self._meta(tx, "closed"):
                tx.meta_set("closed", 1)
                if cancel_pending:
                    n = tx.run("UPDATE task SET state = 'cancelled', ended_at = ? WHERE state IN "
                               "('pending', 'ready')", (tx.now(),))
                    self._count(tx, "cancelled", n)
                    # Their records (reason "close", as TaskScheduler.close() gives): every
                    # version cancelled before has one (ProvenanceRecorded).
                    now = tx.now()
                    tx.many("UPDATE task SET provenance = ? WHERE id = ?", (
                        (_own_record(t, g, "cancelled", None, "close", now), t)
                        for t, g in tx.all("SELECT id, generation FROM task WHERE state = "
                                           "'cancelled' AND provenance IS NULL")))
                self._step(tx, "Close", c=cancel_pending)
            by_state: dict[str, list[str]] = {}
            for t, s in tx.all("SELECT id, state FROM task ORDER BY seq"):
                by_state.setdefault(s, []).append(t)
        return CloseReport(**{s: tuple(ids) for s, ids in by_state.items()})

    # ------------------------------------------------------------------ Recurring schedules

    def schedule(self, name: str, *, fn: str | Callable[..., Any],
                 args: dict[str, Any] | None = None, every: float | None = None,
                 cron: str | None = None, timezone: str = "UTC", overlap: str = "skip",
                 catchup: float | None = None, start: dt.datetime | None = None,
                 priority: int = 0) -> bool:
        """Create the recurring schedule ``name`` (docs/time.md); False if an identical one
        exists (nothing changes: a script that declares its schedules may run twice).

        Its slots are ``start, start + every, ...`` (seconds) or the times of the five-field
        ``cron`` expression in ``timezone`` from ``start`` (an aware datetime; when None, the
        store's clock now, rounded up to a whole second). Each slot whose time has come is
        decided once, by whichever process next claims, ticks or changes a schedule: ``run``
        (a version of the task id
        ``name@<slot, UTC ISO 8601>`` running ``fn(**args)`` with ``priority``, due at once),
        ``skipped`` (``overlap``: ``"skip"``, ``"buffer_one"``, ``"allow"``; or paused) or
        ``missed`` (older than ``catchup`` seconds). Errors (nothing is stored): a bad argument
        -> ``InvalidArgumentError``; another schedule of that name -> ``InvalidTransitionError``.
        """
        call = f"schedule({name!r})"
        _check_name("schedule", name, "a schedule name")
        fn = function_name(fn)
        args_text = _args_text(call, args)
        if not _is_int(priority):
            raise InvalidArgumentError(f"{call}: priority={_r(priority)}: an int")
        start_s = None if start is None else _aware_seconds(call, "start", start)
        policy = Policy.of(call, overlap=overlap, catchup=catchup)
        Timing.of(call, every=every, cron=cron, timezone=timezone,
                  start=0.0 if start_s is None else start_s)
        with self._store.transaction() as tx:
            now = tx.now()
            # By default the first slot is the next whole second: slot ids read as times.
            timing = Timing(every, cron, timezone,
                            float(math.ceil(now)) if start_s is None else start_s)
            created = schedules.define(tx, name, fn=fn, args_text=args_text, timing=timing,
                                       policy=policy, priority=int(priority), now=now,
                                       record=self._step)
            schedules.decide_owed(tx, now, self._submit_run, only=name, record=self._step)
            if created:
                tx.wake(self._max)
            return created

    def unschedule(self, name: str) -> None:
        """Remove schedule ``name`` and the record of its slots, after deciding the slots it
        owes; its runs stay, as versions of their ids. ``UnknownTaskError`` if there is none."""
        _check_name("unschedule", name, "a schedule name")
        with self._store.transaction() as tx:
            schedules.remove(tx, name, tx.now(), self._submit_run, record=self._step)

    def pause(self, name: str) -> None:
        """Pause schedule ``name``: the slots that come while it is paused are skipped (a held
        slot still runs once no run is unfinished). ``UnknownTaskError`` if there is none."""
        self._set_paused("pause", name, True)

    def resume(self, name: str) -> None:
        """Resume schedule ``name``: its next slot is decided by its policy again."""
        self._set_paused("resume", name, False)

    def _set_paused(self, call: str, name: str, paused: bool) -> None:
        _check_name(call, name, "a schedule name")
        with self._store.transaction() as tx:
            schedules.set_paused(tx, name, paused, tx.now(), self._submit_run,
                                 record=self._step)
            tx.wake(self._max)

    def schedules(self, limit: int = 20) -> list[schedules.ScheduleInfo]:
        """Every schedule, by name, with its next slot and its latest ``limit`` decided slots
        (latest first), read in one transaction. ``refsched schedules`` shows them."""
        schedules.check_limit(limit)
        if self._schema_version < 3:
            return []  # a store older than schedules, read as it is, has none
        rows, slots = self._store.read(schedules.list_queries(limit))
        return schedules.listing(rows, slots)

    def decide_slots(self) -> int:
        """Decide every slot whose time has come now (what a claim does first); return how
        many were decided. For a process that keeps schedules but claims nothing."""
        with self._store.transaction() as tx:
            if self._meta(tx, "closed"):
                return 0  # a closed store takes no submission: the slots stay owed
            decided = schedules.decide_owed(tx, tx.now(), self._submit_run, record=self._step)
            if decided:
                tx.wake(self._max)
            return decided

    def _submit_run(self, tx: Tx, task_id: str, fn: str, args_text: str, priority: int) -> None:
        """Submit the version of a slot's run, due now, in ``tx`` (Spec: Submit): a new id, or
        a new generation of an id whose version is not running."""
        closed, seq = tx.metas("closed", "next_seq")
        if closed:
            return
        old = tx.one("SELECT generation, state, optional_deps FROM task WHERE id = ?",
                     (task_id,))
        if old is not None and old[1] in ("pending", "ready", "running"):
            return  # the id is taken by an unfinished version: that version is the slot's run
        now = tx.now()
        tx.meta_add("next_seq", 1)
        if old is not None:
            self._replace(tx, task_id, old[1], old[2])
        key, key_due = self._claim_key(priority, now)
        tx.later("INSERT INTO task (id, generation, seq, state, fn, args, remaining_deps, "
                 "became_ready_at, due, priority, claim_key, claim_due) VALUES "
                 "(?, ?, ?, 'ready', ?, ?, 0, ?, ?, ?, ?, ?)",
                 (task_id, 1 if old is None else old[0] + 1, int(seq), fn, args_text, now,
                  now, priority, key, key_due))
        self._count(tx, "submitted")
        self._step(tx, "Submit", t=task_id, D=[], p=priority, d=0)

    # ------------------------------------------------------------------ The virtual clock

    def tick(self, seconds: float | None = None) -> float:
        """Move a virtual store clock forward by ``seconds`` (1 when None; Spec: Tick), then
        decide the slots whose time has come; return the store's time.

        On a wall clock, ``tick()`` only decides the slots (the clock moves by itself), and
        ``tick(seconds)`` is an ``InvalidTransitionError``."""
        if seconds is not None and (isinstance(seconds, bool)
                                    or not isinstance(seconds, (int, float))
                                    or not math.isfinite(seconds) or seconds <= 0):
            raise InvalidArgumentError(f"tick({_r(seconds)}): seconds > 0")
        if seconds is not None and self.clock != "virtual":
            raise InvalidTransitionError("tick(seconds): the store's clock is the wall clock; "
                                         "create the store with clock='virtual'")
        with self._store.transaction() as tx:
            if self.clock == "virtual":
                tx.meta_add("now", 1.0 if seconds is None else float(seconds))
                self._step(tx, "Tick")
                tx.wake(self._max)  # versions may have come due
            now = tx.now()
            owed = float(self._meta(tx, "slot_due") or schedules.NO_SLOT) <= now
            if (owed and not self._meta(tx, "closed")
                    and schedules.decide_owed(tx, now, self._submit_run, record=self._step)):
                tx.wake(self._max)
            return now

    def now(self) -> float:
        """The store's clock."""
        (now,) = self._store.peek(f"SELECT {self._store.clock_sql}") or (None,)
        return float(now)

    def next_due(self) -> float | None:
        """Seconds on the store's clock until the first ready version not yet due comes due,
        or a schedule's next slot comes; None when nothing waits for its time. An idle worker
        waits that long (or until a notification) rather than polling for delayed work. (A
        held slot already owed is not waited for: the claim after its run ends releases it.)"""
        if self._schema_version < 3:
            return None  # a store older than due times, read as it is: nothing waits for one
        row = self._store.peek(
            "SELECT (SELECT MIN(due) FROM task WHERE state = 'ready' AND due > c.now) - c.now, "
            "(SELECT MIN(next_slot) FROM schedule WHERE next_slot > c.now) - c.now "
            f"FROM (SELECT {self._store.clock_sql} AS now) AS c")
        waits = [float(w) for w in row or () if w is not None]
        return min(waits) if waits else None

    # ------------------------------------------------------------------ Reading

    def state(self, task_id: str) -> TaskState:
        """The state of ``task_id``'s current version (``UnknownTaskError`` if never submitted)."""
        _check_id("state", task_id)
        row = self._store.peek("SELECT state FROM task WHERE id = ?", (task_id,))
        if row is None:
            raise UnknownTaskError(f"state({task_id!r}): unknown task", task_id)
        return TaskState(row[0])

    def info(self, task_id: str) -> DurableInfo:
        """Everything the store knows of ``task_id``'s current version."""
        return self._view("info", task_id).versions[0]

    def result(self, task_id: str) -> Any:
        """The result the accepted completion stored (``InvalidTransitionError`` if none)."""
        info = self.info(task_id)
        if info.state is not TaskState.SUCCEEDED:
            raise InvalidTransitionError(f"result({task_id!r}): the version is "
                                         f"{info.state.value}, not succeeded")
        return info.result

    def snapshot(self, *, provenance: bool = False) -> Snapshot:
        """The scheduler part of the state: ``spec/Scheduler.tla``'s variables under the
        refinement mapping (``claims`` is 1 once a version was claimed). With ``provenance``,
        the spec's provenance too (``Snapshot.provenance``: the record of each blocked and
        cancelled version, without actor, reason or time)."""
        records = "provenance" if provenance and self._schema_version >= 5 else "NULL"
        dep_rows, task_rows, meta_rows = self._store.read([
            (f"SELECT task, dep, {self._optional_column} FROM dep", ()),
            ("SELECT id, generation, state, remaining_deps, blocked_by, cancel_requested, "
             f"attempt, seq, {records} FROM task", ()),
            ("SELECT key, value FROM meta WHERE key IN ('started', 'closed', 'next_seq')", ())])
        deps, optional = _edges(dep_rows)
        tasks: dict[Hashable, VersionView] = {}
        views: dict[Hashable, ProvenanceView] = {}
        for t, g, s, rd, bb, cr, a, seq, pv in task_rows:
            if s in ("blocked", "cancelled") and pv is not None:
                views[t] = _provenance(pv).view()  # type: ignore[union-attr]
            fields = (g, TaskState(s), frozenset(deps.get(t, ())), rd, bb, bool(cr),
                      1 if a else 0, seq)
            opt = optional.get(t)
            # a version with optional edges is an OptionalDepsView, as the model's
            tasks[t] = VersionView(*fields) if opt is None else OptionalDepsView(
                *fields, optional=frozenset(opt))
        meta: dict[str, Any] = dict(meta_rows)
        return Snapshot(bool(meta["started"]), bool(meta["closed"]), int(meta["next_seq"]),
                        tasks, views if provenance else None)

    @property
    def _optional_column(self) -> str:
        """``dep.optional`` as a store of this schema has it (0: one older than edge kinds)."""
        return "optional" if self._schema_version >= 4 else "0"

    def input_summary(self, task_id: str) -> dict[str, ParentOutcome]:
        """How each optional dependency of the current version of ``task_id`` ended.

        For a version that was claimed: as they had ended when it was claimed (stored by the
        claim's transaction: a dependency resubmitted since does not change it). For one not
        claimed: those that have ended so far. An optional dependency's failure is here with
        its error, never dropped. Errors: a bad id -> ``InvalidArgumentError``; unknown id ->
        ``UnknownTaskError``."""
        return self._view("input_summary", task_id).versions[0].input_summary

    def provenance(self, task_id: str) -> Provenance | None:
        """How the current version of ``task_id`` came to be blocked or cancelled (the
        version that failed or was cancelled at its source, the path of required edges from
        it, what the call that ended it said, the store's time then), or None for a version
        neither blocked nor cancelled: ``info(task_id).provenance``. Errors: a bad id ->
        ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``."""
        return self._view("provenance", task_id).versions[0].provenance

    def started(self) -> bool:
        """Whether :meth:`start` was called on the store (by any process)."""
        row = self._store.peek("SELECT value FROM meta WHERE key = 'started'")
        return bool(row and int(row[0]))

    def view(self, task_id: str | None = None) -> StoreView:
        """The store in one read transaction: settings, counters, the current version of
        every id (or of ``task_id`` only, ``UnknownTaskError`` if none), and the store's
        clock, all of one state: a lease and the time it is judged by are read together."""
        return self._view("view", task_id)

    def _view(self, call: str, task_id: str | None) -> StoreView:
        if task_id is not None:
            _check_id(call, task_id)
        where, params = ("WHERE id = ?", (task_id,)) if task_id is not None else ("", ())
        trace = "traceback" if self._schema_version >= 2 else "NULL"
        times = "due, priority" if self._schema_version >= 3 else "0, 0"
        times += ", provenance" if self._schema_version >= 5 else ", NULL"
        times += ", task_type, tenant" if self._schema_version >= 6 else ", NULL, NULL"
        queries: list[tuple[str, Sequence[Any]]] = [
            (f"SELECT {self._store.clock_sql}", ()),
            ("SELECT key, value FROM meta", ()),
            self._counters_read,
            ("SELECT id, generation, state, remaining_deps, blocked_by, cancel_requested, fn, "
             "args, seq, attempt, holder, deadline, result, error, " + trace + ", "
             "lease_seconds, became_ready_at, claimed_at, ended_at, " + times + " FROM task "
             + where
             + " ORDER BY seq", params),
            (f"SELECT task, dep, {self._optional_column} FROM dep "
             + where.replace("id", "task"), params)]
        if self._schema_version >= 4:
            # the input summaries: stored for a claimed version, so far for the others
            queries += [
                ("SELECT task, dep, generation, state, result, error, blocked_by FROM "
                 "input_summary " + where.replace("id", "task"), params),
                ("SELECT dep.task, d.id, d.generation, d.state, d.result, d.error, "
                 "d.blocked_by FROM dep JOIN task x ON x.id = dep.task JOIN task d ON "
                 "d.id = dep.dep WHERE dep.optional <> 0 AND x.attempt = 0 AND d.state IN "
                 "('succeeded', 'failed', 'blocked', 'cancelled')"
                 + where.replace("WHERE id", " AND dep.task"), params)]
        now_rows, meta_rows, count_rows, task_rows, dep_rows, *input_rows = self._store.read(
            queries)
        if task_id is not None and not task_rows:
            raise UnknownTaskError(f"{call}({task_id!r}): unknown task", task_id)
        deps, optional = _edges(dep_rows)
        inputs: dict[str, dict[str, ParentOutcome]] = {}
        for rows in input_rows:
            for t, d, g, st, res, err, bb in rows:
                inputs.setdefault(t, {})[d] = ParentOutcome(
                    d, int(g), TaskState(st),
                    result=None if res is None or st != "succeeded" else json.loads(res),
                    error=err if st == "failed" else None, blocked_by=bb)
        versions = tuple(
            DurableInfo(t, g, TaskState(st), frozenset(deps.get(t, ())), rd, bb, bool(cr), fn,
                        json.loads(args), seq, a, h, dl,
                        None if res is None else json.loads(res), err, tb, ls, br, ca, ea,
                        float(due), int(p), frozenset(optional.get(t, ())), inputs.get(t, {}),
                        _provenance(pv) if st in ("blocked", "cancelled") else None, tt,
                        None if tn is None else json.loads(tn))
            for (t, g, st, rd, bb, cr, fn, args, seq, a, h, dl, res, err, tb, ls, br, ca, ea,
                 due, p, pv, tt, tn) in task_rows)
        settings: dict[str, Any] = dict(meta_rows)
        settings.update((f"count:{name}", int(n)) for name, n in count_rows)
        return StoreView(float(now_rows[0][0]), settings, versions)

    @property
    def _counters_read(self) -> tuple[str, Sequence[Any]]:
        """The query of the counters' ``name, value`` rows: summed over the shards of the
        table counter, or meta's ``count:NAME`` keys in a store older than it."""
        if self._schema_version >= 7:
            return COUNTERS_READ, ()
        return "SELECT substr(key, 7), value FROM meta WHERE key LIKE 'count:%'", ()

    def leases(self) -> dict[str, LeaseView]:
        """The lease part of every claimed version (spec: ``attempt``, ``holder``, ``deadline``,
        ``endedAttempt``)."""
        return {t: LeaseView(a, h, dl, e) for t, a, h, dl, e in self._store.read([(
            "SELECT id, attempt, holder, deadline, COALESCE(ended_attempt, 0) FROM task "
            "WHERE attempt > 0", ())])[0]}

    def times(self) -> dict[str, TimeView]:
        """The due time and priority of every current version (spec: ``due``, ``priority``)."""
        columns = "due, priority" if self._schema_version >= 3 else "0, 0"
        rows = self._store.read([(f"SELECT id, {columns} FROM task", ())])[0]
        return {t: TimeView(float(due), int(p)) for t, due, p in rows}

    def history(self) -> list[tuple[str, dict[str, Any]]]:
        """Every accepted step, in commit order (a store created with ``record=True``)."""
        return [(a, p) for a, p, _ in self.timed_history()]

    def timed_history(self) -> list[tuple[str, dict[str, Any], float]]:
        """Every accepted step with the store's time of its transaction, in commit order."""
        return [(a, json.loads(p), float(at)) for a, p, at in self._store.read([(
            "SELECT action, params, at FROM step ORDER BY n", ())])[0]]

    def stats(self) -> DurableStats:
        """Store-wide counters, the current versions by state, and the live leases."""
        count_rows, by_state_rows, live_rows = self._store.read([
            self._counters_read,
            ("SELECT state, COUNT(*) FROM task GROUP BY state", ()),
            ("SELECT COUNT(*) FROM task WHERE holder IS NOT NULL", ())])
        counts = {name: int(n) for name, n in count_rows}
        by_state: dict[str, int] = dict(by_state_rows)
        live = live_rows[0][0] if live_rows else 0
        return DurableStats(**counts, by_state=by_state, live_leases=live,
                            stale_callbacks=self._stale, duplicate_callbacks=self._duplicates)

    def signals(self, max_partitions: int | None = None) -> Signals:
        """The counters and durations of :meth:`stats` per (task type, tenant) partition, with
        the versions each has waiting and running now, read from the store's rows in one read
        transaction (docs/durable.md, Signals; the type of :mod:`refsched.dag.signals`).

        The first ``max_partitions`` keys (this object's setting when None) in the order
        their first versions were made keep a partition; the rest go to ``OVERFLOW``. Ready
        wait runs from a version's becoming ready to its first claim, run time from its first
        claim to its end, on the store's clock. Errors: ``max_partitions`` not an int >= 1 ->
        ``InvalidArgumentError``."""
        if max_partitions is None:
            max_partitions = self.max_partitions
        elif not _is_int(max_partitions) or max_partitions < 1:
            raise InvalidArgumentError(f"signals(max_partitions={_r(max_partitions)}): an int "
                                       ">= 1")
        queries = (signal_rows.QUERIES if self._schema_version >= 6
                   else signal_rows.OLD_QUERIES)
        results = self._store.read([(sql, ()) for sql in queries])
        return signal_rows.read_signals(results, max_partitions)

    def done(self) -> bool:
        """Whether the store is started and every version is terminal."""
        # Running and ready versions are found through their indexes; only a store with
        # neither scans for a pending one. Why: every idle worker of ``--until-done`` asks this
        # after each empty claim, and a scan past every ended version made that linear in them.
        started, waiting = self._store.peek(
            "SELECT (SELECT value FROM meta WHERE key = 'started'), CASE WHEN EXISTS (SELECT 1 "
            "FROM task WHERE state = 'running') OR EXISTS (SELECT 1 FROM task WHERE state = "
            "'ready') THEN 1 WHEN EXISTS (SELECT 1 FROM task WHERE state = 'pending') THEN 1 "
            "ELSE 0 END") or (0, 1)
        return bool(started) and not waiting

    def wait(self, timeout: float | None = None, *, poll: float = 0.05) -> bool:
        """Block until :meth:`done` (True) or ``timeout`` seconds pass (False)."""
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float))
                                    or not timeout >= 0):
            raise InvalidArgumentError(f"wait(timeout={_r(timeout)}): None or seconds >= 0")
        end = None if timeout is None else time.monotonic() + timeout
        while not self.done():
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(poll)
        return True

    # ------------------------------------------------------------------ Invariants

    def check_invariants(self) -> None:
        """Raise ``InvariantViolation`` if the store holds a state the spec forbids."""
        # Every query in one read of one state; the first invariant broken is reported.
        recorded = ("SELECT id, state FROM task WHERE (state IN ('failed', 'blocked', "
                    "'cancelled')) != (provenance IS NOT NULL) LIMIT 1"
                    if self._schema_version >= 5 else "SELECT 1 WHERE 1 = 0")
        (type_ok, indegree, running, blocked_cause, blocked_propagated, started, dangling,
         seqs, edges, attempts, lease_out_of_running, ended_by_other,
         unrecorded) = self._store.read([
            ("SELECT id, state FROM task WHERE state NOT IN ('pending', 'ready', 'running', "
             "'succeeded', 'failed', 'blocked', 'cancelled') OR generation < 1 LIMIT 1", ()),
            ("SELECT id, remaining_deps, n FROM (SELECT x.id, x.state, x.remaining_deps, "
             "(SELECT COUNT(*) FROM dep LEFT JOIN task d ON d.id = dep.dep WHERE dep.task = x.id "
             f"AND {_UNSETTLED}) AS n FROM task x WHERE x.state IN "
             "('pending', 'ready')) AS c WHERE c.remaining_deps != c.n OR "
             "(c.state = 'pending') != (c.n > 0) LIMIT 1", ()),
            ("SELECT COUNT(*) FROM task WHERE state = 'running'", ()),
            ("SELECT id FROM task x WHERE (x.state = 'blocked') != (x.blocked_by IS NOT NULL) OR "
             "(x.blocked_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dep WHERE dep.task = x.id "
             "AND dep.dep = x.blocked_by AND dep.optional = 0)) LIMIT 1", ()),
            ("SELECT x.id, d.id FROM task x JOIN dep ON dep.task = x.id JOIN task d ON "
             "d.id = dep.dep WHERE x.state IN ('pending', 'ready') AND dep.optional = 0 AND "
             "d.state IN ('failed', 'blocked', 'cancelled') LIMIT 1", ()),
            ("SELECT value FROM meta WHERE key = 'started'", ()),
            ("SELECT dep.task, dep.dep FROM dep LEFT JOIN task ON task.id = dep.dep "
             "WHERE task.id IS NULL LIMIT 1", ()),
            ("SELECT id, seq FROM task", ()),
            ("SELECT task, dep FROM dep", ()),
            (f"SELECT id, attempt FROM task WHERE attempt > {int(self._max_attempts)} OR "
             "attempt < 0 LIMIT 1", ()),
            ("SELECT id FROM task WHERE (holder IS NOT NULL AND (state != 'running' OR "
             "deadline IS NULL)) OR (state = 'running' AND attempt < 1) LIMIT 1", ()),
            ("SELECT id FROM task WHERE ended_attempt IS NOT NULL AND (state NOT IN "
             "('succeeded', 'failed', 'cancelled') OR ended_attempt != attempt) LIMIT 1", ()),
            (recorded, ())])

        def fail(name: str, detail: str) -> None:
            raise InvariantViolation(name, detail)

        if type_ok:
            fail("TypeOK", f"{type_ok[0][0]!r} has state {type_ok[0][1]!r}")
        if indegree:
            bad = indegree[0]
            fail("IndegreeInvariant", f"{bad[0]!r}: remaining_deps {bad[1]}, counted {bad[2]}")
        if running[0][0] > self._max:
            fail("ConcurrencyBound", f"{running[0][0]} running > max_concurrency {self._max}")
        if blocked_cause:
            fail("BlockedHasCause", f"{blocked_cause[0][0]!r}")
        if blocked_propagated:
            bad = blocked_propagated[0]
            fail("BlockedPropagated", f"{bad[0]!r} waits on dead {bad[1]!r}")
        if started and started[0][0]:
            if dangling:
                fail("SealedGraph", f"{dangling[0][0]!r} depends on unknown {dangling[0][1]!r}")
            cycles = _cycles(seqs, edges)
            if cycles:
                fail("SealedGraph", f"cycle {cycles[0]!r}")
        if attempts:
            fail("AttemptsBounded", f"{attempts[0][0]!r} has attempt {attempts[0][1]}")
        if lease_out_of_running:
            fail("AtMostOneLiveLease", f"{lease_out_of_running[0][0]!r} holds a lease out of "
                 "running")
        if ended_by_other:
            fail("OnlyCurrentAttemptEnds", f"{ended_by_other[0][0]!r} ended by an attempt not "
                 "its last")
        if unrecorded:
            # Spec: ProvenanceRecorded (the store keeps a failed version's own record too)
            fail("ProvenanceRecorded", f"{unrecorded[0][0]!r} is {unrecorded[0][1]} "
                 + ("without a provenance record" if unrecorded[0][1] in _DEAD
                    else "with a provenance record"))
