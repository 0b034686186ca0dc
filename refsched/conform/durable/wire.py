"""The durable scheduler's operations on the wire (``--system durable``).

The ``DurableScheduler`` API (``docs/durable.md``): the TaskScheduler's operations kept in a
store, and the workers' side by lease and attempt. The store's clock is virtual and moves only
by ``tick``, so a lease expires exactly when the oracle says time has passed. A lease travels
as the object ``claim`` answered (``{task_id, generation, attempt, deadline, fn, args,
worker}``) and comes back as it went: the attempt in it is the fencing token.

======================================  ======================================  ===============
request                                 call                                    ``ok`` result
======================================  ======================================  ===============
``new {max_concurrency, max_attempts,   a fresh, empty store, claims aged by     ``null``
aging: 60}``                            ``aging`` (null: strict priority)
``submit {task, deps: [], fn,           ``submit(task, deps, fn=fn,             the generation
priority: 0, delay: 0, optional: []}``  priority=priority, delay=delay,
                                        optional=optional)``
``add_deps {task, deps: [],             ``add_deps(task, deps,                  a state
optional: []}``                         optional=optional)``
``start {}``                            ``start()``                             ``null``
``claim {worker, limit: 1, lease: 30}``  ``claim(worker, limit, lease)``        ``[lease]``
``heartbeat {lease}``                   ``heartbeat(lease)``                    cancel asked?
``complete`` / ``fail`` /               ``complete`` / ``fail`` /               a state
``acknowledge_cancel {lease}``          ``acknowledge_cancel(lease)``
``cancel {task, actor: null,           ``cancel(task, actor=actor,             a state, the
reason: null}``, ``retry {task}``       reason=reason)``, ``retry(task)``       generation
``input_summary {task}``                ``input_summary(task)``                 ``{parent:
                                                                                outcome}``
``provenance {task}``                   ``info(task).provenance``               a record or
                                                                                ``null``
``close {cancel_pending: true}``        ``close(cancel_pending)``               the report
``tick {seconds: 1}``                   ``tick(seconds)``                       the new time
``expire {}``                           ``expire()``                            ``null``
``crash {worker}``                      the worker died: nothing tells the      ``null``
                                        store, its leases run out
``now {}``, ``snapshot {}``,            ``now()``, ``snapshot()``,              as the API
``leases {}``, ``stats {}``,            ``leases()``, ``stats()``,
``history {}``                          ``history()``
``times {}``                            ``times()``, of the waiting versions    ``{task: {due,
                                                                                priority}}``
``schedule {name, fn, every: null,      ``schedule(name, fn=fn, every=every,    created?
cron: null, overlap: "skip", catchup:   cron=cron, overlap=overlap,
null, priority: 0}``                    catchup=catchup, priority=priority)``
``unschedule`` / ``pause`` /            ``unschedule(name)`` / ``pause(name)``  ``null``
``resume {name}``                       / ``resume(name)``
``schedules {}``                        ``schedules()``                         ``{name:
                                                                                schedule}``
======================================  ======================================  ===============

``optional`` and ``add_deps`` need the profile's ``edges`` (docs/dag.md, "Edge kinds"): a
submit's ``optional`` names deps whose end, not their success, the version waits for, sent
only when it names one; a snapshot's version has the key ``optional`` (its optional deps)
only when it has some. An implementation whose hello does not declare ``edges`` is sent
neither, nor ``input_summary``: how each optional dep of the current version had ended when it
was claimed (for one not claimed: those that have ended so far), as a :class:`ParentView` per
dep (a result or an error does not travel: no report on the wire carries one).

``provenance`` answers how a blocked or cancelled version came to end, as a
:class:`ProvenanceRecord` (null for any other); ``cancel``'s ``actor`` and ``reason``, which the
record of what it cancels keeps, are sent only when given. Both need the profile's
``provenance``, which a hello must declare to have.

``delay`` is seconds on the store's virtual clock (``run_at`` is not on the wire: on a virtual
clock a delay says the same). ``times`` lists the versions that wait (pending or ready), as the
spec keeps ``due`` and ``priority``: once a version is claimed nothing reads its due time. The
oracle's stores age at the store's default (:data:`refsched.durable.scheduler.AGING`, one
priority level for every 60 seconds due) but for the time corpus's traces, whose ``Aging`` is
sent with ``new``. ``priority``, ``delay`` and ``times`` need the
profile's ``time``: without it no submit names either (the keywords are left out of the call).

The schedule requests need the profile's ``schedules`` (docs/time.md, "Recurring schedules"). A
schedule's slots start at the store's clock rounded up to a whole second (``start`` and
``timezone`` are not on the wire: the clock is virtual, and a cron timing is read in UTC).
``schedules`` answers each schedule as a :class:`ScheduleView`: its policy, whether it is
paused, its next undecided slot and its held slot, and every slot decided so far, oldest first,
as a :class:`SlotView` (its time, its decision, the task id of its run).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, NamedTuple

from refsched.conform import values
from refsched.conform.protocol import WireError
from refsched.conform.wire import Op, Remote, Wire, lazy
from refsched.durable.jobs import NOOP
from refsched.durable.scheduler import AGING, DurableStats, Lease, LeaseView, TimeView
from refsched.types import CloseReport, Provenance, Snapshot, TaskState

__all__ = ["NOOP", "WIRE", "ParentView", "ProvenanceRecord", "RemoteDurable", "ScheduleView",
           "ServedDurable", "SlotView", "paired", "provenance_record", "schedule_views",
           "summary_views", "waiting_times"]
# NOOP: the function a submit names when the oracle does not say (the checks never run one)


def _lease(value: Any) -> Any:
    """A lease as it came back over the wire, or the value itself when it is none (the
    scheduler refuses it as it would any other bad argument)."""
    try:
        return values.from_json(Lease, value, "lease")
    except WireError:
        return value


def _times(priority: Any, delay: Any) -> dict[str, Any]:
    """The time keywords of a submit, only those given (a store without due times is sent
    neither, and a bad value is sent as it came, for the store to refuse)."""
    given = {"priority": priority, "delay": delay}
    return {k: v for k, v in given.items() if not (type(v) is int and v == 0)}


def _optional(optional: Any) -> dict[str, Any]:
    """The ``optional`` keyword of a submit, only when it names a dep (a store without edge
    kinds is never sent it; a bad value is sent as it came, for the store to refuse)."""
    return {} if isinstance(optional, (list, tuple)) and not optional else {"optional": optional}


def _notes(actor: Any, reason: Any) -> dict[str, Any]:
    """The ``actor`` and ``reason`` of a cancel, only those given (an implementation without
    provenance is never sent them; a bad value is sent as it came, for the store to refuse)."""
    return {k: v for k, v in (("actor", actor), ("reason", reason)) if v is not None}


class ParentView(NamedTuple):
    """One optional dependency's entry of ``input_summary``: how its version had ended."""

    generation: int
    state: TaskState  # succeeded, failed, blocked or cancelled
    blocked_by: str | None  # the dependency that blocked it, when it is blocked


class ProvenanceRecord(NamedTuple):
    """``provenance``'s answer: how a blocked or cancelled version came to end (its time
    stays behind: each side keeps its own clock)."""

    root: str  # the version that failed or was cancelled
    generation: int  # the root's generation
    end: TaskState  # failed or cancelled
    path: tuple[str, ...]  # from the root to the version, each a required dep of the next
    actor: str | None  # what the call that ended the root said of it
    reason: str | None


def summary_views(summary: Any) -> dict[str, ParentView]:
    """An input summary as the wire answers it: a ``DurableScheduler``'s
    :class:`~refsched.types.ParentOutcome` per dep, without its result and error (an
    implementation over the wire answers the views themselves)."""
    return {str(parent): (outcome if isinstance(outcome, ParentView) else ParentView(
        outcome.generation, outcome.state,
        None if outcome.blocked_by is None else str(outcome.blocked_by)))
        for parent, outcome in summary.items()}


def provenance_record(record: Provenance | ProvenanceRecord | None) -> ProvenanceRecord | None:
    """A version's provenance as the wire answers it, its time left behind."""
    if record is None or isinstance(record, ProvenanceRecord):
        return record
    return ProvenanceRecord(str(record.root), record.generation, record.end,
                            tuple(str(x) for x in record.path), record.actor, record.reason)


def _aged(aging: Any) -> dict[str, Any]:
    """The ``aging`` keyword of a new store, only when it is not a new store's default (a
    store without due times is never given it)."""
    return {} if aging == AGING and type(aging) is float else {"aging": aging}


def _zoned(timezone: Any) -> dict[str, Any]:
    """The ``timezone`` keyword of a schedule, only when it is not UTC (an implementation
    whose cron timings are read in UTC alone is never sent it; a bad value is sent as it
    came, for the store to refuse)."""
    return {} if timezone == "UTC" and type(timezone) is str else {"timezone": timezone}


def waiting_times(store: Any) -> dict[str, TimeView]:
    """``store.times()`` of the versions that wait (pending or ready): the spec's ``due`` and
    ``priority``, which it keeps only while a version waits."""
    waiting = {t for t, v in store.snapshot().tasks.items()
               if v.state in (TaskState.PENDING, TaskState.READY)}
    return {t: TimeView(float(v.due), int(v.priority)) for t, v in store.times().items()
            if t in waiting}


class SlotView(NamedTuple):
    """One decided slot of a schedule, as ``schedules`` answers it."""

    at: float  # the slot's time on the store's clock
    decision: Literal["run", "skipped", "missed"]
    task: str | None  # the run's task id, for "run"; else None


class ScheduleView(NamedTuple):
    """One schedule as ``schedules`` answers it: what decides its slots, and its slots."""

    overlap: str  # "skip" | "buffer_one" | "allow"
    catchup: float | None  # None: any age runs
    paused: bool
    next_slot: float | None  # the oldest slot neither decided nor held; None: no more slots
    held_slot: float | None  # the slot held under buffer_one, or None
    slots: tuple[SlotView, ...]  # every decided slot, oldest first


#: How many decided slots of a schedule ``schedules`` reads: more than any check decides.
_LISTED = 1000


def schedule_views(store: Any) -> dict[str, ScheduleView]:
    """``store.schedules()`` as the wire answers it: each schedule by name, its slots oldest
    first (a ``DurableScheduler`` lists :class:`~refsched.durable.schedules.ScheduleInfo`,
    the latest slot first; a store over the wire answers the views themselves)."""
    listed = store.schedules(limit=_LISTED)
    if isinstance(listed, dict):
        return listed
    return {info.name: ScheduleView(
        info.overlap, None if info.catchup is None else float(info.catchup), bool(info.paused),
        info.next_slot, info.held_slot,
        tuple(SlotView(float(s.at), s.decision, s.task) for s in reversed(info.slots)))
        for info in listed}


class ServedDurable:
    """A durable scheduler served over the wire, on a fresh SQLite store of its own."""

    def __init__(self, factory: Callable[..., Any], max_concurrency: Any,
                 max_attempts: Any, aging: Any = AGING) -> None:
        self.folder = tempfile.mkdtemp(prefix="refsched-serve-durable-")
        try:
            self.db = factory(f"sqlite:///{Path(self.folder) / 'store.db'}", max_concurrency,
                              max_attempts=max_attempts, clock="virtual", record=True,
                              **_aged(aging))
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def discard(self) -> None:
        """Release the store and remove it (a later ``new`` replaced this instance)."""
        try:
            self.db.release()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def submit(self, task: str, deps: list[str], fn: str, priority: int, delay: float,
               optional: list[str]) -> int:
        return int(self.db.submit(task, deps, fn=fn, **_times(priority, delay),
                                  **_optional(optional)))

    def add_deps(self, task: str, deps: list[str], optional: list[str]) -> TaskState:
        return TaskState(self.db.add_deps(task, deps, optional=optional))

    def times(self) -> dict[str, TimeView]:
        return waiting_times(self.db)

    def start(self) -> None:
        self.db.start()

    def claim(self, worker: str, limit: int, lease: float) -> list[Lease]:
        return list(self.db.claim(worker, limit, lease))

    def heartbeat(self, lease: Any) -> bool:
        return bool(self.db.heartbeat(_lease(lease)))

    def complete(self, lease: Any) -> TaskState:
        return TaskState(self.db.complete(_lease(lease)))

    def fail(self, lease: Any) -> TaskState:
        return TaskState(self.db.fail(_lease(lease)))

    def acknowledge_cancel(self, lease: Any) -> TaskState:
        return TaskState(self.db.acknowledge_cancel(_lease(lease)))

    def cancel(self, task: str, actor: Any = None, reason: Any = None) -> TaskState:
        return TaskState(self.db.cancel(task, **_notes(actor, reason)))

    def retry(self, task: str) -> int:
        return int(self.db.retry(task))

    def input_summary(self, task: str) -> dict[str, ParentView]:
        return summary_views(self.db.input_summary(task))

    def provenance(self, task: str) -> ProvenanceRecord | None:
        return provenance_record(self.db.info(task).provenance)

    def close(self, cancel_pending: bool) -> CloseReport:
        report: CloseReport = self.db.close(cancel_pending)
        return report

    def tick(self, seconds: float) -> float:
        return float(self.db.tick(seconds))

    def expire(self) -> None:
        self.db.expire()

    def crash(self, worker: str) -> None:
        """A worker died: the store learns nothing; an implementation that can be told is."""
        crash = getattr(self.db, "crash", None)
        if crash is not None:
            crash(worker)

    def now(self) -> float:
        return float(self.db.now())

    def snapshot(self) -> Snapshot:
        snapshot: Snapshot = self.db.snapshot()
        return snapshot

    def leases(self) -> dict[str, LeaseView]:
        return dict(self.db.leases())

    def stats(self) -> DurableStats:
        stats: DurableStats = self.db.stats()
        return stats

    def history(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.db.history())

    def schedule(self, name: str, fn: str, every: float | None = None, cron: str | None = None,
                 overlap: str = "skip", catchup: float | None = None, priority: int = 0,
                 timezone: str = "UTC") -> bool:
        return bool(self.db.schedule(name, fn=fn, every=every, cron=cron, overlap=overlap,
                                     catchup=catchup, priority=priority,
                                     **_zoned(timezone)))

    def unschedule(self, name: str) -> None:
        self.db.unschedule(name)

    def pause(self, name: str) -> None:
        self.db.pause(name)

    def resume(self, name: str) -> None:
        self.db.resume(name)

    def schedules(self) -> dict[str, ScheduleView]:
        return schedule_views(self.db)


class RemoteDurable(Remote[Snapshot, DurableStats]):
    """A durable scheduler over the protocol, with the ``DurableScheduler`` API, built as the
    checks build one: ``RemoteDurable(impl, url, max_concurrency, max_attempts=...)`` (the url
    and clock are the implementation's business: it keeps its own store, on a virtual clock)."""

    def __init__(self, implementation: Any, url: Any = None, max_concurrency: int | None = None,
                 *, max_attempts: int | None = None, **options: Any) -> None:
        super().__init__(implementation, max_concurrency=max_concurrency,
                         max_attempts=max_attempts, **_aged(options.get("aging", AGING)))

    def release(self) -> None:
        """Nothing: the implementation's next ``new`` replaces this store."""

    def submit(self, task_id: str, deps: Iterable[str] = (), *, fn: Any = NOOP,
               args: dict[str, Any] | None = None, priority: Any = 0, delay: Any = 0,
               optional: Iterable[str] = ()) -> int:
        generation: int = self._call("submit", task=task_id, deps=list(deps), fn=fn,
                                     **_times(priority, delay), **_optional(list(optional)))
        return generation

    def add_deps(self, task_id: str, deps: Iterable[str] = (),
                 optional: Iterable[str] = ()) -> TaskState:
        state: TaskState = self._call("add_deps", task=task_id, deps=list(deps),
                                      optional=list(optional))
        return state

    def times(self) -> dict[str, TimeView]:
        times: dict[str, TimeView] = self._call("times")
        return times

    def start(self) -> None:
        self._call("start")

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        leases: list[Lease] = self._call("claim", worker=worker, limit=limit, lease=lease)
        return leases

    def _report(self, op: str, lease: Any) -> Any:
        sent = values.to_json(lease) if isinstance(lease, Lease) else lease
        return self._call(op, lease=sent)

    def heartbeat(self, lease: Lease) -> bool:
        asked: bool = self._report("heartbeat", lease)
        return asked

    def complete(self, lease: Lease, result: Any = None) -> TaskState:
        state: TaskState = self._report("complete", lease)
        return state

    def fail(self, lease: Lease, error: Any = None) -> TaskState:
        state: TaskState = self._report("fail", lease)
        return state

    def acknowledge_cancel(self, lease: Lease) -> TaskState:
        state: TaskState = self._report("acknowledge_cancel", lease)
        return state

    def cancel(self, task_id: str, *, actor: Any = None, reason: Any = None) -> TaskState:
        state: TaskState = self._call("cancel", task=task_id, **_notes(actor, reason))
        return state

    def input_summary(self, task_id: str) -> dict[str, ParentView]:
        summary: dict[str, ParentView] = self._call("input_summary", task=task_id)
        return summary

    def provenance(self, task_id: str) -> ProvenanceRecord | None:
        record: ProvenanceRecord | None = self._call("provenance", task=task_id)
        return record

    def retry(self, task_id: str) -> int:
        generation: int = self._call("retry", task=task_id)
        return generation

    def close(self, cancel_pending: bool = True) -> CloseReport:
        report: CloseReport = self._call("close", cancel_pending=cancel_pending)
        return report

    def tick(self, seconds: float = 1.0) -> float:
        now: float = self._call("tick", seconds=seconds)
        return now

    def expire(self) -> None:
        self._call("expire")

    def crash(self, worker: str) -> None:
        self._call("crash", worker=worker)

    def now(self) -> float:
        now: float = self._call("now")
        return now

    def leases(self) -> dict[str, LeaseView]:
        leases: dict[str, LeaseView] = self._call("leases")
        return leases

    def history(self) -> list[tuple[str, dict[str, Any]]]:
        history: list[tuple[str, dict[str, Any]]] = self._call("history")
        return history

    def schedule(self, name: str, *, fn: Any = NOOP, every: Any = None, cron: Any = None,
                 overlap: Any = "skip", catchup: Any = None, priority: Any = 0,
                 timezone: Any = "UTC") -> bool:
        created: bool = self._call("schedule", name=name, fn=fn, every=every, cron=cron,
                                   overlap=overlap, catchup=catchup, priority=priority,
                                   **_zoned(timezone))
        return created

    def unschedule(self, name: str) -> None:
        self._call("unschedule", name=name)

    def pause(self, name: str) -> None:
        self._call("pause", name=name)

    def resume(self, name: str) -> None:
        self._call("resume", name=name)

    def schedules(self, limit: int = _LISTED) -> dict[str, ScheduleView]:
        views: dict[str, ScheduleView] = self._call("schedules")
        return views


class _OnTheModel:
    """The model's store (:class:`~refsched.conform.durable.probes.ReferenceStore`) made as the
    checks make an instance (``(url, max_concurrency, max_attempts=...)``), with what the
    checks' calls need beyond it: ``crash`` tells the store nothing, and under a profile
    without ``start`` the claims are open from the beginning (the spec's Start is taken, with
    no call, at the first claim)."""

    def __init__(self, opens_claims: bool, url: Any = None, max_concurrency: int = 1, *,
                 max_attempts: int = 1, **options: Any) -> None:
        from refsched.conform.durable.probes import ReferenceStore  # which speaks this wire

        self._store = ReferenceStore(max_concurrency, max_attempts,
                                     aging=options.get("aging", AGING))
        self._opens_claims = opens_claims

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        if self._opens_claims and not self._store.state.scheduler.started:
            self._store.start()
        leases: list[Lease] = self._store.claim(worker, limit, lease)
        return leases

    def crash(self, worker: str) -> None:
        """A worker died: nothing tells the store, whose leases run out on their own."""


def paired(factory: Callable[..., Any], pair: Callable[..., Any],
           profile: Any = None) -> Callable[..., Any]:
    """Schedulers as the durable checks make them (``factory(url, max_concurrency,
    max_attempts=..., ...)``), each beside the model's store made alike; under a profile
    without ``start``, one whose claims are open from the beginning."""
    opens_claims = not getattr(profile, "start", True)

    def new(*args: Any, **options: Any) -> Any:
        return pair(factory(*args, **options), _OnTheModel(opens_claims, *args, **options))
    return new


WIRE = Wire(
    system="durable",
    title="refsched.DurableScheduler",
    new=Op(("max_concurrency", "max_attempts"), {"aging": AGING}),
    ops={
        "submit": Op(("task",), {"deps": [], "fn": NOOP, "priority": 0, "delay": 0,
                                 "optional": []}, int),
        "add_deps": Op(("task",), {"deps": [], "optional": []}, TaskState, flag="edges"),
        "start": Op(flag="start"),
        "claim": Op(("worker",), {"limit": 1, "lease": 30.0}, list[Lease]),
        "heartbeat": Op(("lease",), result=bool, flag="heartbeat"),
        "complete": Op(("lease",), result=TaskState),
        "fail": Op(("lease",), result=TaskState),
        "acknowledge_cancel": Op(("lease",), result=TaskState, flag="cancel"),
        "cancel": Op(("task",), {"actor": None, "reason": None}, TaskState, flag="cancel"),
        "retry": Op(("task",), result=int, flag="retry"),
        "close": Op((), {"cancel_pending": True}, CloseReport, flag="close"),
        "tick": Op((), {"seconds": 1.0}, float),
        "expire": Op(flag="expire"),
        "crash": Op(("worker",)),
        "now": Op(result=float),
        "snapshot": Op(result=Snapshot, flag="snapshot"),
        "leases": Op(result=dict[str, LeaseView], flag="snapshot"),
        "stats": Op(result=DurableStats, flag="snapshot"),
        "history": Op(result=list[tuple[str, dict[str, Any]]], flag="snapshot"),
        "times": Op(result=dict[str, TimeView], flag="time"),
        "input_summary": Op(("task",), result=dict[str, ParentView], flag="edges"),
        "provenance": Op(("task",), result=ProvenanceRecord | None, flag="provenance"),
        "schedule": Op(("name",), {"fn": NOOP, "every": None, "cron": None, "overlap": "skip",
                                   "catchup": None, "priority": 0, "timezone": "UTC"}, bool,
                       flag="schedules"),
        "unschedule": Op(("name",), flag="schedules"),
        "pause": Op(("name",), flag="schedules"),
        "resume": Op(("name",), flag="schedules"),
        "schedules": Op(result=dict[str, ScheduleView], flag="schedules"),
    },
    serve=ServedDurable,
    default_factory=lazy("refsched.durable:DurableScheduler"),
    remote=RemoteDurable,
    paired=paired,
)
RemoteDurable.wire = WIRE
