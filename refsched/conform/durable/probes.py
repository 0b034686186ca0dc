"""The durable scheduler's clause probes: for each clause of ``durable.*``, a short run of calls
that ends in it.

``("new", (max_concurrency, max_attempts))`` makes a fresh store on both sides: on the model's
side a :class:`ReferenceStore` (the API, each call taken as the actions of
``refsched.model.durable`` take it); on the implementation's, a store built as the lock-step
builds one (``factory(url, max_concurrency=..., max_attempts=..., clock="virtual",
record=True)``, on a SQLite file of its own). The store's clock moves only by ``tick``.

The two sides hand out leases of their own, so a probe names a lease as the spec does,
:class:`Held` ``(task_id, generation, attempt, worker)``: each side reports with the lease it
handed out under that name, or, for one no claim gave (attempt 0), with a lease made of those
fields. Each side's clock is read from where it stood at ``new``, so a lease's deadline,
``tick``'s and ``now``'s answers and ``leases()``'s deadlines compare as times since the store
began. Answers are compared in full: a lease by every field; an error by its type and what
identifies it (an ``UnknownDependencyError``'s pairs, a ``CycleError``'s cycle as a cycle of the
graph), never the message. After each call the snapshots and ``leases()`` are compared.
``refsched.conform.probes`` runs them.

The schedule probes (profile ``schedules``) hold the store to ``refsched.model.schedule``, the
model of ``spec/Schedule.tla``: the reference store keeps each schedule's spec state, takes
``Finish``, ``Release`` and ``Decide`` where docs/time.md says a store decides (a claim, a tick,
a change of the schedule), and submits each ``run`` as the durable model's ``Submit``. A run is
in the snapshot, so a slot decided otherwise shows after the call that decided it; those probes
own their state (``owns_state``): the difference is named by the schedule clause they ask.
A cron timing's slots are the times ``cronsim`` (the library the store reads cron with) gives
walking from the schedule's first second, each the model's next slot. The model's store begins
its clock where the implementation's does (:func:`align`), a probe brings the clock to a date
by :class:`Until` and names a run by :class:`Run` (its schedule and slot, each side reading
the task id from its own ``schedules``), so no probe assumes a clock that begins at 0.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from refsched.conform.client import HarnessError
from refsched.conform.dag.probes import refusal_differs as dag_refusal_differs
from refsched.conform.durable.wire import (
    ParentView,
    ProvenanceRecord,
    ScheduleView,
    SlotView,
    provenance_record,
    schedule_views,
    summary_views,
    waiting_times,
)
from refsched.conform.probes import Probe, differ, snapshots_differ
from refsched.durable import DurableStats, Lease, LeaseView
from refsched.durable.jobs import NOOP
from refsched.durable.scheduler import AGING, PRIORITY_RANGE, TimeView
from refsched.durable.scheduler import MAX_NOTE_CHARS as MAX_NOTE
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    StaleLeaseError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.model import schedule as schedule_model
from refsched.model.dag.actions import optional_of
from refsched.model.durable import (
    ACTIONS,
    INITIAL,
    DurableSnapshot,
    Limits,
    Refusal,
    Step,
    claim_transaction,
)
from refsched.model.durable.actions import RECORDING, current, repeat
from refsched.model.durable.counters import Counts
from refsched.schedule import slot_task_id
from refsched.types import CloseReport, Snapshot, TaskState
from refsched.verify.dag.inputs import show_summary
from refsched.verify.durable.lockstep import as_recorded
from refsched.verify.replay import format_rows, snapshot_rows

__all__ = ["PROBES", "Held", "ReferenceStore", "Run", "Until", "adapt", "align", "call",
           "discard", "judge", "needs_of", "new_implementation", "new_model", "show", "states"]


@dataclasses.dataclass(frozen=True)
class Run:
    """The task id of a schedule's run as a probe names it: the run of the ``slot``-th slot
    ``schedule`` decided (0 the oldest), each side's as its own ``schedules`` lists it, so a
    probe names a run by the store's slot times, wherever its clock began."""

    schedule: str
    slot: int


@dataclasses.dataclass(frozen=True)
class Held:
    """A lease as a probe names it: the spec's ``<<t, g, a>>`` of ``worker``, by the fields
    of a :class:`~refsched.durable.Lease` that fence it."""

    task_id: str | Run
    generation: int
    attempt: int
    worker: str = "w1"


@dataclasses.dataclass(frozen=True)
class Until:
    """``tick``'s seconds as a probe names them: as many as bring the store's clock to ``at``
    (seconds since the epoch, UTC), each side's from its own clock; a clock already there is
    asked a tick of 0 seconds or less, which both sides refuse."""

    at: float


# -- the probes ---------------------------------------------------------------------------------

_Call = tuple[str, tuple[Any, ...]]


def _p(clause: str, *calls: _Call, needs: tuple[str, ...] = (),
       owns_state: bool = False) -> Probe:
    return Probe(clause, tuple(calls), needs, owns_state)


def _sub(task: str, *deps: str, fn: str = NOOP, priority: Any = 0, delay: Any = 0) -> _Call:
    return ("submit", (task, list(deps), fn, priority, delay))


def _opt(task: str, deps: list[str], optional: list[str]) -> _Call:
    """A submit with optional deps (profile ``edges``)."""
    return ("submit", (task, deps, NOOP, 0, 0, optional))


def _add(task: str, deps: list[str], optional: Any = ()) -> _Call:
    return ("add_deps", (task, deps, list(optional)))


def _claim(worker: str = "w1", limit: Any = 1, lease: Any = 1) -> _Call:
    return ("claim", (worker, limit, lease))


def _report(method: str, task: str | Run, generation: int = 1, attempt: int = 1,
            worker: str = "w1") -> _Call:
    return (method, (Held(task, generation, attempt, worker),))


def _tick(seconds: float | Until) -> _Call:
    return ("tick", (seconds,))


def _sched(name: str, every: Any = 1, overlap: Any = "skip", catchup: Any = None,
           cron: Any = None, fn: str = NOOP, priority: Any = 0, timezone: Any = "UTC") -> _Call:
    return ("schedule", (name, fn, every, cron, overlap, catchup, priority, timezone))


def _utc(text: str) -> Until:
    """The tick that brings the clock to ``text``, an ISO 8601 time in UTC."""
    return Until(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


_SCHEDULES: Final[_Call] = ("schedules", ())
_NEW: Final[_Call] = ("new", (2, 2))  # max_concurrency 2, max_attempts 2
_START: Final[_Call] = ("start", ())
_RUNNING_A: Final[tuple[_Call, ...]] = (_NEW, _sub("a"), _START, _claim())  # a's lease: 0..1

PROBES: Final[tuple[Probe, ...]] = (
    _p("durable.new.ok", _NEW, _sub("a"), _START, _claim(), ("new", (1, 1))),
    # b waits for a's end: a fails, and b is ready, not blocked; c's optional edge to b
    _p("durable.submit.optional", _NEW, _sub("a"), _opt("b", [], ["a"]), _START, _claim(),
       _report("fail", "a"), _opt("c", ["a"], ["b"]), _opt("d", [], ["b"]),
       needs=("deps", "edges")),
    _p("durable.submit.ok", _NEW, _sub("a"), _sub("b", "a"), _sub("a")),
    _p("durable.submit.time-refused", _NEW, _sub("a", priority=1), _sub("b", priority=True),
       _sub("b", priority=1.5), _sub("b", priority=2**31), _sub("b", delay=-1),
       _sub("b", delay="soon"), _sub("b", delay=True)),
    _p("durable.submit.invalid", _NEW, _sub("a"), _sub("b", "a", "a"), _sub("b", "b"),
       _sub("b", fn="no module")),
    _p("durable.submit.closed", _NEW, _sub("a"), ("close", (False,)), _sub("b")),
    _p("durable.submit.running", *_RUNNING_A, _sub("a")),
    _p("durable.submit.unknown-dep", _NEW, _sub("a"), _START, _sub("b", "x", "a", "y")),
    _p("durable.submit.cycle", _NEW, _sub("a", "b"), _sub("b"), _START, _sub("b", "a")),
    # c gets a required edge to b and an optional one to d; e, pending on a, one to f, which
    # failed: blocked at once
    _p("durable.add_deps.ok", _NEW, _sub("a"), _sub("b"), _sub("d"), _sub("c", "a"),
       _sub("e", "a"), _sub("f"), _START, _claim("w1", 2), _report("fail", "f", worker="w1"),
       _add("c", ["b"], ["d"]), _add("e", ["f"]), needs=("deps", "edges")),
    _p("durable.add_deps.twice", _NEW, _sub("a"), _sub("b"), _sub("c", "a"),
       _add("c", ["b", "b"]), _add("c", ["b"], ["b"]), needs=("deps", "edges")),
    _p("durable.add_deps.invalid", _NEW, _sub("a"), _sub("b"), _sub("c", "a"), _add("c", []),
       _add("c", ["c"]), _add("c", ["a"]), needs=("deps", "edges")),
    _p("durable.add_deps.unknown-task", _NEW, _sub("a"), _add("x", ["a"]),
       needs=("deps", "edges")),
    _p("durable.add_deps.closed", _NEW, _sub("a"), _sub("b"), _sub("c", "a"),
       ("close", (False,)), _add("c", ["b"]), needs=("deps", "edges", "close")),
    # a is claimed: its version takes no edge; b is ready, d succeeded
    _p("durable.add_deps.not-pending", _NEW, _sub("a"), _sub("b"), _sub("d"), _START,
       _claim("w1", 1), _add("a", ["b"]), _add("b", ["a"]), _claim("w2", 1),
       _report("complete", "b", worker="w2"), _add("b", ["d"]), needs=("deps", "edges")),
    _p("durable.add_deps.unknown-dep", _NEW, _sub("a"), _sub("c", "a"), _START,
       _add("c", ["x", "y"]), needs=("deps", "edges", "start")),
    _p("durable.add_deps.cycle", _NEW, _sub("x"), _sub("a", "x"), _sub("b", "a"), _START,
       _add("a", ["b"]), needs=("deps", "edges", "start")),
    _p("durable.start.ok", _NEW, _sub("b", "a"), _sub("a"), _START),
    _p("durable.start.refused", _NEW, _sub("a"), _START, _START),
    _p("durable.start.closed", _NEW, _sub("a"), ("close", (False,)), _START),
    _p("durable.start.unknown-dep", _NEW, _sub("a", "x", "y"), _sub("b", "x"), _START,
       _sub("x"), _START),
    _p("durable.start.cycle", _NEW, _sub("b", "a"), _sub("c", "b"), _sub("a", "c"), _START),
    # a is due at 2: not claimed at 0 nor at 1 (b, due at 0.5, is), claimed at 2
    _p("durable.claim.due", _NEW, _sub("a", delay=2), _sub("b", delay=0.5), _START, _claim(),
       ("times", ()), _tick(1), _claim("w2"), _tick(1), _claim("w2", 2), _claim("w3")),
    # b first by its priority; then a, due 120 s before c, comes before c's higher priority
    # (aging: one level for every 60 s)
    _p("durable.claim.order", _NEW, _sub("a"), _sub("b", priority=1), _START, _claim(),
       _report("complete", "b"), _tick(120), _sub("c", priority=1), ("times", ()), _claim()),
    # c, then b (max_concurrency 2 of 3 asked); both expire and are re-claimed in seq order
    _p("durable.claim.ok", _NEW, _sub("c"), _sub("b"), _sub("a"), _sub("d", "b"), _START,
       _claim("w1", 1), _claim("w2", 3), _tick(2), _claim("w2", 2)),
    _p("durable.claim.invalid", _NEW, _sub("a"), _START, _claim("w1", 0), _claim("w1", True),
       _claim("w1", 1.5), _claim("w1", 1, 0)),
    _p("durable.claim.not-started", _NEW, _sub("a"), _claim()),
    _p("durable.heartbeat.ok", *_RUNNING_A, _tick(1), _report("heartbeat", "a"),
       ("cancel", ("a",)), _tick(1.5), _report("heartbeat", "a")),
    _p("durable.heartbeat.lost", *_RUNNING_A, _tick(2), _claim("w2"),
       _report("heartbeat", "a", 1, 2, "w2"), _report("heartbeat", "a"),
       _report("complete", "a", 1, 2, "w2"), _report("heartbeat", "a", 1, 2, "w2")),
    _p("durable.report.ok", _NEW, _sub("a"), _sub("b", "a"), _sub("c"), _sub("d", "b"), _START,
       _claim("w1", 2), _report("complete", "a"), _report("complete", "a"),
       ("cancel", ("c",)), _report("acknowledge_cancel", "c"), _claim("w2"),
       _report("fail", "b", worker="w2"), _report("fail", "b", worker="w2")),
    _p("durable.report.waiting", _NEW, _sub("a"), _sub("b", "a"), _START, _claim(),
       _report("complete", "b", 1, 0), _report("fail", "b", 1, 0)),
    _p("durable.report.stale", *_RUNNING_A, _tick(2), _claim("w2"), _report("fail", "a"),
       _report("complete", "a", 1, 2, "w1"), _report("complete", "a")),
    _p("durable.lease.invalid", *_RUNNING_A, ("fail", (7,)), ("heartbeat", ("lease",)),
       ("complete", ("lease",))),
    _p("durable.cancel.ok", _NEW, _sub("a"), _sub("b", "a"), _START, _claim(),
       ("cancel", ("b",)), ("cancel", ("a",)), ("cancel", ("a",)), ("cancel", ("b",))),
    # b waits for a's end: nothing ended, then a succeeded; claimed, b keeps what it was
    # given when a is renewed; c, waiting on the renewed a, has nothing yet; e fails, and
    # f, blocked by e, shows in d's summary as blocked by e
    _p("durable.input_summary.ok", _NEW, _sub("a"), _opt("b", [], ["a"]), _START, _claim(),
       ("input_summary", ("b",)), _report("complete", "a"), ("input_summary", ("b",)),
       _claim("w2"), _sub("a"), ("input_summary", ("b",)), _opt("c", [], ["a"]),
       ("input_summary", ("c",)), _sub("e"), _sub("f", "e"), _opt("d", [], ["e", "f"]),
       _claim("w3"), _claim("w3"), _report("complete", "b", worker="w2"), _claim("w3"),
       _report("fail", "e", worker="w3"), ("input_summary", ("z",)), ("input_summary", ("d",)),
       needs=("deps", "edges"), owns_state=True),
    # a cancelled while it waits; b while it runs (its worker acknowledges); c by close
    _p("durable.provenance.cancelled", _NEW, _sub("a"), _sub("b"), _sub("c"),
       ("cancel", ("a", "ops", "not needed")), ("provenance", ("a",)), _START, _claim(),
       ("cancel", ("b", None, "stop")), ("provenance", ("b",)),
       _report("acknowledge_cancel", "b"), ("provenance", ("b",)), ("close", (True,)),
       ("provenance", ("c",))),
    # a fails: b, c and d are blocked through it; x is given up after its last lease expired
    # (max_attempts 2): y is blocked by x, in the store's words
    _p("durable.provenance.blocked", _NEW, _sub("a"), _sub("b", "a"), _sub("c", "b"),
       _sub("d", "a", "c"), _sub("x"), _sub("y", "x"), _START, _claim("w1", 2),
       _report("fail", "a"), ("provenance", ("b",)), ("provenance", ("d",)),
       ("provenance", ("c",)), _tick(2), _claim("w2"), _tick(2), ("expire", ()),
       ("provenance", ("y",))),
    # a waiting, then failed (its own record is no provenance), renewed by retry with b; a
    # cancelled, then submitted again
    _p("durable.provenance.none", _NEW, _sub("a"), _sub("b", "a"), ("provenance", ("a",)),
       _START, _claim(), _report("fail", "a"), ("provenance", ("a",)), ("retry", ("a",)),
       ("provenance", ("b",)), ("provenance", ("z",)), ("cancel", ("a",)), _sub("a"),
       ("provenance", ("a",))),
    _p("durable.retry.ok", _NEW, _sub("a"), _sub("b", "a"), ("cancel", ("a",)),
       ("retry", ("a",)), _START, _claim("w1", 2), _report("fail", "a", 2),
       ("retry", ("a",))),
    _p("durable.retry.closed", _NEW, _sub("a"), ("cancel", ("a",)), ("close", (True,)),
       ("retry", ("a",))),
    _p("durable.retry.refused", _NEW, _sub("a"), ("retry", ("a",))),
    _p("durable.call.unknown-task", _NEW, _sub("a"), _START, ("cancel", ("z",)),
       ("retry", ("z",)), _report("heartbeat", "z"), _report("complete", "z")),
    _p("durable.close.ok", _NEW, _sub("c"), _sub("b"), _sub("a"), _sub("d", "c"), _START,
       _claim(), ("close", (True,)), ("close", (False,))),
    # a's lease ends at 1: expired at 1.5, re-claimed as attempt 2, which expires out of
    # attempts at 4.5 (max_attempts 2): a fails
    _p("durable.time.ok", *_RUNNING_A, ("now", ()), _tick(1), ("expire", ()), _tick(0.5),
       ("expire", ()), ("now", ()), _claim("w2"), _tick(3), ("expire", ())),
    _p("durable.snapshot.ok", *_RUNNING_A, _sub("b", "a"), _report("complete", "a"),
       _report("fail", "a"), _report("complete", "b", 1, 0), _tick(1), ("snapshot", ()),
       ("leases", ()), ("stats", ()), ("history", ())),
    # every 1 s from 0, a downtime of 5 s: with catchup 2, slots 1 and 2 are missed and 3, 4
    # and 5 (no more than 2 s old) run; with catchup 0 only slot 5 runs
    _p("durable.schedule.catchup", _NEW, _sched("two", overlap="allow", catchup=2),
       _sched("none", overlap="allow", catchup=0), _tick(5), _SCHEDULES, owns_state=True),
    # three schedules every 1 s whose first runs stay unfinished: skip skips, buffer_one holds
    # slot 1 and skips slot 2, allow runs each; the buffered run ends, its held slot runs and
    # slot 3 is held; allow, paused, skips slot 4 and, resumed, runs slot 5
    _p("durable.schedule.overlap", ("new", (9, 2)), _START, _sched("skip"),
       _sched("buffer", overlap="buffer_one"), _sched("allow", overlap="allow"), _tick(1),
       _tick(1), _claim("w1", 9, 100), _report("complete", Run("buffer", 0)), _tick(1),
       ("pause", ("allow",)), _tick(1), ("resume", ("allow",)), _tick(1), _SCHEDULES,
       owns_state=True),
    # Europe/London moves from GMT to BST at 01:00 UTC on 2024-03-31. From 23:10 UTC the day
    # before: "utc" runs at 23:45, 00:00, 00:45, 01:00, ... (45 and 15 minutes apart);
    # "london" at 01:30 London time, which that night falls at 02:00 BST (01:00 UTC) and the
    # next at 01:30 BST (00:30 UTC); "hourly" at every :30 of real time (no 01:30 GMT that
    # night). Its first run ended, "london" runs again under skip; the others, gone, do not;
    # the same "london" again changes nothing. Then the night London goes back from BST to
    # GMT (02:00 BST is 01:00 GMT, at 01:00 UTC on 2024-10-27), when 01:30 comes twice:
    # "daily" (01:30 London) runs on the first pass only (00:30 UTC), "everyhour" (every :30
    # London) on both (00:30 and 01:30 UTC), as cronsim gives them; "daily" again changes
    # nothing.
    _p("durable.schedule.cron", ("new", (9, 2)), _START, _tick(_utc("2024-03-30T23:10:00")),
       _sched("utc", None, "allow", cron="0,45 * * * *"),
       _sched("london", None, cron="30 1 * * *", timezone="Europe/London"),
       _sched("hourly", None, "allow", cron="30 * * * *", timezone="Europe/London"),
       _tick(3600), _tick(3600), _tick(3600), _claim("w1", 9, 100),
       _report("complete", Run("london", 0)), ("unschedule", ("utc",)),
       ("unschedule", ("hourly",)), _tick(_utc("2024-04-01T01:00:00")), _SCHEDULES,
       _sched("london", None, cron="30 1 * * *", timezone="Europe/London"),
       ("unschedule", ("london",)), _tick(_utc("2024-10-26T23:10:00")),
       _sched("daily", None, "allow", cron="30 1 * * *", timezone="Europe/London"),
       _sched("everyhour", None, "allow", cron="30 * * * *", timezone="Europe/London"),
       _tick(3600), _tick(3600), _tick(3600), _tick(3600), _SCHEDULES,
       _sched("daily", None, "allow", cron="30 1 * * *", timezone="Europe/London"),
       owns_state=True),
    # slot 0 runs at once, slot 2 once the clock reaches it, each a version of its own id; the
    # same schedule again changes nothing; unschedule decides what is owed, then removes it
    _p("durable.schedule.decide", _NEW, _START, _sched("report", 2, "allow"), _tick(1),
       _SCHEDULES, _tick(1), _claim("w1", 2, 100), _sched("report", 2, "allow"),
       _report("complete", Run("report", 1)), _sched("gone", 5), _tick(2),
       ("unschedule", ("gone",)), _SCHEDULES, owns_state=True),
    _p("durable.schedule.refused", _NEW, _sched("r", overlap="sometimes"),
       _sched("r", every=1, cron="* * * * *"), _sched("r", every=None), _sched("r", catchup=-1),
       _SCHEDULES, _sched("r", every=-1)),
    _p("durable.schedule.redefined", _NEW, _sched("r", 2), _tick(1), _sched("r", 2),
       _sched("r", 3)),
    _p("durable.schedule.unknown", _NEW, _sched("r"), ("pause", ("x",)), ("resume", ("x",)),
       ("unschedule", ("r",)), ("unschedule", ("r",))),
)
"""One probe per clause of ``durable.*``, in the catalogue's order."""


# -- the model's side ---------------------------------------------------------------------------

_FUNCTION = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _seconds(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _raise(refusal: Refusal) -> None:
    """The error the API raises for ``refusal`` (none when it has none: no step, no error)."""
    error = refusal.error
    if error is UnknownDependencyError or error is CycleError:
        raise error(refusal.reason, refusal.details)
    if error is not None:
        raise error(refusal.reason)


# -- recurring schedules, on the model of Schedule.tla ------------------------------------------

def _number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _cron_times(cron: str, zone: str, start: float) -> Iterator[float]:
    """The times of ``cron`` read in ``zone`` from ``start`` on (UTC seconds, increasing), as
    ``cronsim`` gives them walking from ``start``: a time it gives again (a repeated hour's
    second pass of a fixed wall time) is passed over, as docs/time.md says."""
    last = start - 1.0
    for moment in CronSim(cron, datetime.fromtimestamp(last, ZoneInfo(zone))):
        t = moment.timestamp()
        if t > last:
            last = t
            yield t


@dataclasses.dataclass
class _Kept:
    """One schedule of the model's store: its definition, and the state of
    ``refsched.model.schedule`` (the spec's ``Schedule.tla``).

    The model's slots are ``0, every, 2 * every, ...``. For an ``every`` timing they are
    seconds from the schedule's first slot, and so is the model's clock. A ``cron`` timing's
    slots are the model's ``0, 1, 2, ...``, the ``k``-th cron time the model's ``k`` and the
    model's clock the last slot whose time has come: the model's decisions read only which
    slots have come (no ``catchup``: its ages would be counted in slots, not seconds)."""

    # (fn, every, cron, timezone, overlap, catchup, priority): what the same schedule again
    # must repeat
    definition: tuple[Any, ...]
    fn: str  # the function its runs run
    priority: int  # its runs' priority
    start: float  # the first slot on the store's clock, for an every timing: the model's 0
    instance: schedule_model.Instance  # the spec's constants: overlap, catchup, every
    state: schedule_model.ScheduleSnapshot  # the spec's variables, in the model's slots
    upcoming: Iterator[float] | None = None  # a cron timing's times not yet in ``times``
    times: list[float] = dataclasses.field(default_factory=list)  # its times found so far

    def _times_to(self, index: int | None = None, until: float | None = None) -> None:
        """Find cron times until ``times`` has ``index + 1`` or one past ``until``."""
        assert self.upcoming is not None
        while ((index is not None and len(self.times) <= index)
               or (until is not None and (not self.times or self.times[-1] <= until))):
            found = next(self.upcoming, None)
            if found is None or len(self.times) >= _MAX_SLOTS:
                raise AssertionError(f"schedule: no cron time left after {self.times[-1:]}")
            self.times.append(found)

    def at(self, slot: int) -> float:
        """The store's time of the model's ``slot``."""
        if self.upcoming is None:
            return self.start + slot
        self._times_to(index=slot)
        return self.times[slot]

    def model_now(self, now: float) -> float:
        """The model's clock at the store's ``now``."""
        if self.upcoming is None:
            return now - self.start
        self._times_to(until=now)
        return sum(1 for t in self.times if t <= now) - 1


# no slot after it: more than any probe's clock reaches
_MAX_SLOTS = 10**6


class _Schedules:
    """``schedule``, ``unschedule``, ``pause``, ``resume`` and ``schedules`` of
    :class:`ReferenceStore`: each checks its arguments as docs/time.md says, then decides
    what the schedules owe as the model's ``Decide`` and ``Release`` do, each ``run`` the
    durable model's ``Submit`` of the run's version. A slot is decided where docs/time.md says
    a store decides it: by a claim, a tick or a change of its schedule."""

    state: DurableSnapshot
    kept: dict[str, _Kept]
    fns: dict[Hashable, str]
    limits: Limits

    def _take(self, step: Step, limits: Limits | None = None) -> None:
        """Take one step of the durable model (the store's own)."""
        raise NotImplementedError

    def schedule(self, name: str, *, fn: Any = NOOP, every: Any = None, cron: Any = None,
                 overlap: Any = "skip", catchup: Any = None, priority: Any = 0,
                 timezone: Any = "UTC") -> bool:
        call = f"schedule({name!r})"
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"{call}: a schedule name is a non-empty str")
        if not isinstance(fn, str) or _FUNCTION.fullmatch(fn) is None:
            raise InvalidArgumentError(f"{call}: fn {fn!r} is not module:function")
        if not _is_int(priority):
            raise InvalidArgumentError(f"{call}: priority={priority!r}: an int")
        if not isinstance(overlap, str) or overlap not in schedule_model.OVERLAPS:
            raise InvalidArgumentError(f"{call}: overlap={overlap!r}: one of "
                                       f"{schedule_model.OVERLAPS}")
        if catchup is not None and not (_number(catchup) and catchup >= 0):
            raise InvalidArgumentError(f"{call}: catchup={catchup!r}: None or seconds >= 0")
        if (every is None) == (cron is None):
            raise InvalidArgumentError(f"{call}: exactly one of every and cron")
        if every is not None and not _seconds(every):
            raise InvalidArgumentError(f"{call}: every={every!r}: seconds > 0")
        if not isinstance(timezone, str):
            raise InvalidArgumentError(f"{call}: timezone={timezone!r}: an IANA zone name")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise InvalidArgumentError(f"{call}: timezone={timezone!r}: no such zone") from None
        start = float(math.ceil(self.state.now))  # the slots read as whole seconds
        upcoming = None
        if cron is not None:
            if not isinstance(cron, str) or len(cron.split()) != 5:
                raise InvalidArgumentError(f"{call}: cron={cron!r}: five fields")
            try:
                upcoming = _cron_times(cron, timezone, start)
                next(_cron_times(cron, timezone, start), None)  # cronsim reads it whole
            except (CronSimError, ValueError, KeyError, IndexError) as e:
                raise InvalidArgumentError(f"{call}: cron={cron!r}: {e}") from None
            if catchup is not None:
                # the model counts a cron timing's slots, not its seconds; no probe asks
                raise AssertionError(f"{call}: the model's cron schedules have no catchup")
        elif not _is_int(every) or (catchup is not None and not _is_int(catchup)):
            # the model counts whole ticks of an every timing; no probe asks for a fraction
            # of a second
            raise AssertionError(f"{call}: the model's schedules are every whole seconds")
        definition = (fn, every, cron, timezone, overlap, catchup, priority)
        if name in self.kept:
            if self.kept[name].definition != definition:
                raise InvalidTransitionError(f"{call}: a different schedule of that name exists")
            self._decide(name)
            return False
        step = 1 if every is None else every
        instance = schedule_model.Instance(overlap, catchup, step, _MAX_SLOTS * step,
                                           _MAX_SLOTS * step)
        self.kept[name] = _Kept(definition, fn, priority, start, instance,
                                schedule_model.INITIAL, upcoming)
        self._decide(name)
        return True

    def _known(self, call: str, name: Any) -> _Kept:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"{call}({name!r}): a schedule name is a non-empty str")
        if name not in self.kept:
            raise UnknownTaskError(f"{call}({name!r}): no schedule of that name", name)
        return self.kept[name]

    def unschedule(self, name: str) -> None:
        self._known("unschedule", name)
        self._decide(name)
        del self.kept[name]  # its runs stay, as versions of their ids

    def pause(self, name: str) -> None:
        self._paused("pause", name, True)

    def resume(self, name: str) -> None:
        self._paused("resume", name, False)

    def _paused(self, call: str, name: str, paused: bool) -> None:
        kept = self._known(call, name)
        self._decide(name)  # what it owes, under the state it had
        action = schedule_model.ACTIONS["Pause" if paused else "Resume"]
        if action.enabled(kept.state, kept.instance):
            kept.state = action.step(kept.state, kept.instance)

    def schedules(self, limit: int = 0) -> dict[str, ScheduleView]:
        """Each schedule by name, with every slot it decided (``limit`` is the store's: the
        model lists them all, no probe decides many)."""
        views = {}
        for name, kept in sorted(self.kept.items()):
            s, at = kept.state, kept.at
            slots = tuple(SlotView(at(slot), d, slot_task_id(name, at(slot)) if d == "run"
                                   else None) for slot, d in sorted(s.decided))
            _, _, _, _, overlap, catchup, _ = kept.definition
            views[name] = ScheduleView(overlap, None if catchup is None else float(catchup),
                                       s.paused, at(s.next),
                                       at(min(s.held)) if s.held else None, slots)
        return views

    def _decide_owed(self) -> None:
        for name in sorted(self.kept):  # as a store decides them: by name
            self._decide(name)

    def _decide(self, name: str) -> None:
        """Decide what schedule ``name`` owes now: first a ``Finish`` of each run whose
        version ended, then ``Release`` and ``Decide`` while one is enabled. A closed store
        decides nothing (it takes no submission)."""
        if self.state.scheduler.closed:
            return
        kept = self.kept[name]
        inst, at = kept.instance, kept.at
        s = dataclasses.replace(kept.state, now=kept.model_now(self.state.now))
        tasks = self.state.scheduler.tasks
        for r in sorted(s.unfinished):
            version = tasks.get(slot_task_id(name, at(r)))
            if version is None or version.state.is_terminal:
                s = schedule_model.ACTIONS["Finish"].step(s, inst, r)
        release, decide = schedule_model.ACTIONS["Release"], schedule_model.ACTIONS["Decide"]
        while True:
            if release.enabled(s, inst):
                after = release.step(s, inst)
            elif decide.enabled(s, inst):
                after = decide.step(s, inst)
            else:
                break
            for slot, d in sorted(after.decided - s.decided):
                if d == "run":
                    self._submit_run(slot_task_id(name, at(slot)), kept)
            s = after
        kept.state = s

    def _submit_run(self, task: str, kept: _Kept) -> None:
        """The durable model's ``Submit`` of a run, due now; none when the id's version is
        unfinished (that version is the slot's run)."""
        version = self.state.scheduler.tasks.get(task)
        if version is not None and not version.state.is_terminal:
            return
        self._take(Step("Submit", (("t", task), ("D", frozenset()), ("p", kept.priority),
                                   ("d", 0))))
        self.fns[task] = kept.fn


def _dep_lists(call: str, task: object, deps: object,
               optional: object) -> tuple[list[str], frozenset[str]]:
    """Every dep of a call (required ones, then optional ones) and the optional ones, as the
    store reads them: a task or dep that is not an id, or an id given twice (in one list or in
    both) -> ``InvalidArgumentError``."""
    if not isinstance(task, str) or not task:
        raise InvalidArgumentError(f"{call}({task!r}): a task id is a non-empty string")
    lists: dict[str, list[str]] = {}
    for name, given in (("deps", deps), ("optional", optional)):
        if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
            raise InvalidArgumentError(f"{call}({task!r}): {name} must be a list of ids")
        lists[name] = list(given)
        if not all(isinstance(d, str) and d for d in lists[name]):
            raise InvalidArgumentError(f"{call}({task!r}): {name} must be a list of ids")
    both = lists["deps"] + lists["optional"]
    if len(set(both)) != len(both):
        raise InvalidArgumentError(f"{call}({task!r}): a dependency is given twice")
    return both, frozenset(lists["optional"])


class _AnyText(str):
    """The reason a model's record names where the store words its own (a version the store
    gave up on after its last lease expired): equal to any text, shown as what it stands for."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, str)

    def __hash__(self) -> int:
        return 0


#: The reason of a give-up after the last lease expired: the store's own words, any text.
STORES_OWN_WORDS: Final = _AnyText("<the store's own words>")


class ReferenceStore(_Schedules):
    """The durable scheduler's API on the reference model, for one worker process that never
    loses an answer: each call checks its arguments as ``docs/durable.md`` says, then takes the
    spec steps of ``refsched.model.durable`` the call is, or raises the error the step's
    refusal names. The clock is the model's ``now``, moved by ``tick`` second for second."""

    def __init__(self, max_concurrency: int, max_attempts: int,
                 aging: float | None = AGING) -> None:
        # the claim key is priority * aging - due (docs/time.md); the model's 0 is strict
        # priority, the store's None
        self.limits = Limits(max_concurrency, max_attempts, lease_time=1, lose_answers=False,
                             aging=aging or 0,  # seconds here, where the spec counts ticks
                             optional_edges=True, add_deps=True)
        # the spec's RecordProvenance: provenance() reads the records (snapshot() leaves them
        # out, as the store's snapshot() does unless asked)
        self.state: DurableSnapshot = RECORDING
        self.fns: dict[Hashable, str] = {}  # task -> the function its versions run
        self.lengths: dict[Hashable, float] = {}  # task -> seconds of its lease, once claimed
        self.counts = Counts()  # the store-wide counters of the steps taken
        self.cycles = 0  # calls refused with CycleError
        self.stale = 0  # reports refused with StaleLeaseError
        self.duplicates = 0  # repeated reports answered
        self.recorded: list[tuple[str, dict[str, Any]]] = []  # what history() answers
        self.kept: dict[str, _Kept] = {}  # name -> a schedule, on refsched.model.schedule
        # (task, generation) of each claimed version with optional deps -> its input summary
        # at the claim, fixed from then on
        self.inputs: dict[tuple[Hashable, int], dict[str, ParentView]] = {}
        # (task, generation) of each version that failed or was cancelled -> the actor and
        # reason the call that ended it gave, which the records rooted at it carry
        self.notes: dict[tuple[Hashable, int], tuple[str | None, str | None]] = {}
        self._cancel_notes: tuple[str | None, str | None] = (None, None)  # of a cancel() now

    def _take(self, step: Step, limits: Limits | None = None) -> None:
        action = ACTIONS[step.action]
        args = action.arguments(step.param_map)
        before = self.state
        self.state = action.step(before, *args, limits=limits or self.limits)
        self.counts = self.counts.step(step.action, args, before, self.state)
        self.recorded.append(as_recorded(step, before, self.state))
        self._note_ends(step, before)

    def _note_ends(self, step: Step, before: DurableSnapshot) -> None:
        """What the call behind ``step`` said of each version it failed or cancelled (the
        records of the versions blocked by it carry it), as docs/durable.md says the store
        keeps it: a report's worker as actor (no reason: no error travels), a cancel's actor
        and reason, a close's reason "close", and the store's own words for a version given
        up after its last lease expired."""
        was = before.scheduler.tasks
        for t, v in self.state.scheduler.tasks.items():
            if v.state not in (TaskState.FAILED, TaskState.CANCELLED) or (
                    t in was and was[t].state is v.state and was[t].generation == v.generation):
                continue
            if step.action in ("Fail", "AcknowledgeCancel"):
                note: tuple[str | None, str | None] = (str(step.param_map["w"]), None)
            elif step.action == "Cancel":
                note = self._cancel_notes
            elif step.action == "Close":
                note = (None, "close")
            else:  # Expire of its last attempt
                note = (None, STORES_OWN_WORDS)
            self.notes[(t, v.generation)] = note

    def _state_of(self, task: Hashable) -> TaskState:
        state: TaskState = self.state.scheduler.tasks[task].state
        return state

    def _refuse(self, refusal: Refusal | None) -> None:
        if refusal is not None:
            if refusal.error is CycleError:
                self.cycles += 1
            _raise(refusal)

    def submit(self, task: str, deps: Iterable[str] = (), *, fn: str = NOOP,
               priority: Any = 0, delay: Any = 0, optional: Iterable[str] = ()) -> int:
        listed, opt = _dep_lists("submit", task, deps, optional)
        if task in listed:
            raise InvalidArgumentError(f"submit({task!r}): a task cannot depend on itself")
        if not isinstance(fn, str) or _FUNCTION.fullmatch(fn) is None:
            raise InvalidArgumentError(f"submit({task!r}): fn {fn!r} is not module:function")
        if not _is_int(priority) or priority not in PRIORITY_RANGE:
            raise InvalidArgumentError(f"submit({task!r}, priority={priority!r}): an int in "
                                       f"[{PRIORITY_RANGE.start}, {PRIORITY_RANGE.stop})")
        if not (_seconds(delay) or (isinstance(delay, int | float)
                                    and not isinstance(delay, bool) and delay == 0)):
            raise InvalidArgumentError(f"submit({task!r}, delay={delay!r}): seconds >= 0")
        if opt:
            # the spec's SubmitOptional(t, D, O, p, d), D the deps of both kinds
            step = Step("SubmitOptional", (("t", task), ("D", frozenset(listed)), ("O", opt),
                                           ("p", priority), ("d", delay)))
            refusal = ACTIONS["SubmitOptional"].refused(self.state, task, frozenset(listed),
                                                        opt, limits=self.limits)
        else:
            # the spec's Submit(t, D, p, d), recorded as the store records it
            step = Step("Submit", (("t", task), ("D", frozenset(listed)), ("p", priority),
                                   ("d", delay)))
            refusal = ACTIONS["Submit"].refused(self.state, task, frozenset(listed),
                                                limits=self.limits)
        self._refuse(refusal)
        self._take(step)
        self.fns[task] = fn
        generation: int = self.state.scheduler.tasks[task].generation
        return generation

    def add_deps(self, task: str, deps: Iterable[str] = (),
                 optional: Iterable[str] = ()) -> TaskState:
        """Spec: AddDeps(t, D, O), D the new deps of both kinds; its refusal names the error
        (an unknown task first, then no dep, a dep of itself or one already, closed, not
        pending, an unknown dep or a cycle after start)."""
        listed, opt = _dep_lists("add_deps", task, deps, optional)
        self._refuse(ACTIONS["AddDeps"].refused(self.state, task, frozenset(listed), opt,
                                                limits=self.limits))
        self._take(Step("AddDeps", (("t", task), ("D", frozenset(listed)), ("O", opt))))
        return self._state_of(task)

    def start(self) -> None:
        self._refuse(ACTIONS["Start"].refused(self.state, limits=self.limits))
        self._take(Step("Start", ()))

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        if not isinstance(worker, str) or not worker:
            raise InvalidArgumentError(f"claim({worker!r}): a worker's name")
        if not _is_int(limit) or limit < 1:
            raise InvalidArgumentError(f"claim({worker!r}, limit={limit!r}): an int >= 1")
        if not _seconds(lease):
            raise InvalidArgumentError(f"claim({worker!r}, lease={lease!r}): seconds > 0")
        self._decide_owed()  # every claim decides the slots whose time has come, first
        limits = dataclasses.replace(self.limits, lease_time=lease)
        _, steps = claim_transaction(self.state, worker, limit, limits=limits)
        taken: list[Hashable] = []
        for step in steps:
            before = self.state.scheduler.tasks
            self._take(step, limits)
            after = self.state.scheduler.tasks
            if step.action == "Reclaim":
                taken.append(step.param_map["t"])
            elif step.action == "Claim":
                claimed = sorted((t for t, v in after.items() if v.state is TaskState.RUNNING
                                  and before[t].state is TaskState.READY),
                                 key=lambda t: after[t].seq)
                for t in claimed:  # its summary is fixed from its first claim on
                    if optional_of(after[t]):
                        self.inputs[(t, after[t].generation)] = self._ended(t)
                taken.extend(claimed)
        for t in taken:
            self.lengths[t] = float(lease)
        return [Lease(str(t), self.state.scheduler.tasks[t].generation, self.state.attempt[t],
                      float(self.state.deadline[t]), self.fns[t], {}, worker) for t in taken]

    def _lease(self, call: str, lease: object) -> Lease:
        if (not isinstance(lease, Lease) or not isinstance(lease.task_id, str)
                or not _is_int(lease.generation) or not _is_int(lease.attempt)
                or not isinstance(lease.worker, str)):
            raise InvalidArgumentError(f"{call}({lease!r}): give the Lease that claim() returned")
        return lease

    def _holding(self, lease: Lease) -> DurableSnapshot:
        """The state with ``lease`` among its worker's: the store cannot tell who holds what,
        and takes a report with the live lease from whoever makes it."""
        held = dict(self.state.held)
        key = (lease.task_id, lease.generation, lease.attempt)
        held[lease.worker] = held.get(lease.worker, frozenset()) | {key}
        return self.state.replace(held=held)

    def heartbeat(self, lease: Lease) -> bool:
        lease = self._lease("heartbeat", lease)
        args = (lease.worker, lease.task_id, lease.generation, lease.attempt)
        self._refuse(ACTIONS["Heartbeat"].refused(self._holding(lease), *args,
                                                  limits=self.limits))
        self.state = self._holding(lease)
        self._take(Step("Heartbeat", tuple(zip(("w", "t", "g", "a"), args, strict=True))),
                   dataclasses.replace(self.limits, lease_time=self.lengths[lease.task_id]))
        asked: bool = self.state.scheduler.tasks[lease.task_id].cancel_requested
        return asked

    def _end(self, action: str, call: str, lease: Lease) -> TaskState:
        lease = self._lease(call, lease)
        t, g, a = lease.task_id, lease.generation, lease.attempt
        args = (lease.worker, t, g, a)
        if t in self.state.scheduler.tasks and current(self.state, *args):
            self.state = self._holding(lease)
            self._take(Step(action, tuple(zip(("w", "t", "g", "a"), args, strict=True))))
            return self._state_of(t)
        if repeat(self.state, t, g, a):
            self.duplicates += 1
            return self._state_of(t)
        refusal = ACTIONS[action].refused(self._holding(lease), *args, limits=self.limits)
        if refusal is not None and refusal.error is StaleLeaseError:
            self.stale += 1
            raise StaleLeaseError(refusal.reason, t, g, self.state.scheduler.tasks[t].generation,
                                  a, self.state.attempt.get(t, 0))
        self._refuse(refusal)
        raise AssertionError(f"{call}: the model neither takes nor refuses {lease}")

    def complete(self, lease: Lease) -> TaskState:
        return self._end("Complete", "complete", lease)

    def fail(self, lease: Lease) -> TaskState:
        return self._end("Fail", "fail", lease)

    def acknowledge_cancel(self, lease: Lease) -> TaskState:
        return self._end("AcknowledgeCancel", "acknowledge_cancel", lease)

    def cancel(self, task: str, actor: Any = None, reason: Any = None) -> TaskState:
        for name, value in (("actor", actor), ("reason", reason)):
            if value is not None and (not isinstance(value, str) or len(value) > MAX_NOTE):
                raise InvalidArgumentError(f"cancel({task!r}, {name}={value!r:.60}): None or "
                                           f"a str of at most {MAX_NOTE} characters")
        refusal = ACTIONS["Cancel"].refused(self.state, task, limits=self.limits)
        self._refuse(refusal)
        if refusal is None:
            self._cancel_notes = (actor, reason)
            self._take(Step("Cancel", (("t", task),)))
        return self._state_of(task)

    def _version(self, call: str, task: object) -> Any:
        if not isinstance(task, str) or not task:
            raise InvalidArgumentError(f"{call}({task!r}): a task id is a non-empty string")
        version = self.state.scheduler.tasks.get(task)
        if version is None:
            raise UnknownTaskError(f"{call}({task!r}): no such task", task)
        return version

    def _ended(self, task: Hashable) -> dict[str, ParentView]:
        """The optional deps of ``task``'s current version whose current version ended."""
        tasks = self.state.scheduler.tasks
        ended = {}
        for dep in optional_of(tasks[task]):
            parent = tasks.get(dep)
            if parent is not None and parent.state.is_terminal:
                ended[str(dep)] = ParentView(parent.generation, parent.state,
                                             None if parent.blocked_by is None
                                             else str(parent.blocked_by))
        return ended

    def input_summary(self, task: str) -> dict[str, ParentView]:
        """How each optional dep of ``task``'s current version ended: as at its first claim
        once it was claimed, else those that have ended so far."""
        version = self._version("input_summary", task)
        kept = self.inputs.get((task, version.generation))
        return dict(kept) if kept is not None else self._ended(task)

    def provenance(self, task: str) -> ProvenanceRecord | None:
        """The record of ``task``'s current version, with what the call that ended its root
        said; None for a version neither blocked nor cancelled."""
        self._version("provenance", task)
        view = self.state.scheduler.records.get(task)
        if view is None:
            return None
        actor, reason = self.notes.get((view.root, view.generation), (None, None))
        return ProvenanceRecord(str(view.root), view.generation, view.end,
                                tuple(str(x) for x in view.path), actor, reason)

    def retry(self, task: str) -> int:
        self._refuse(ACTIONS["Retry"].refused(self.state, task, limits=self.limits))
        self._take(Step("Retry", (("t", task),)))
        generation: int = self.state.scheduler.tasks[task].generation
        return generation

    def close(self, cancel_pending: bool = True) -> CloseReport:
        if not isinstance(cancel_pending, bool):
            raise InvalidArgumentError(f"close(cancel_pending={cancel_pending!r}): a bool")
        if ACTIONS["Close"].enabled(self.state, cancel_pending, limits=self.limits):
            self._take(Step("Close", (("cancelPending", cancel_pending),)))
        tasks = self.state.scheduler.tasks
        by_state: dict[str, list[Hashable]] = {}
        for t in sorted(tasks, key=lambda x: tasks[x].seq):
            by_state.setdefault(tasks[t].state.value, []).append(t)
        return CloseReport(**{s: tuple(ids) for s, ids in by_state.items()})

    def tick(self, seconds: float = 1.0) -> float:
        if not _seconds(seconds):
            raise InvalidArgumentError(f"tick({seconds!r}): seconds > 0")
        self.state = self.state.replace(now=self.state.now + seconds)
        self.recorded.append(("Tick", {}))
        self._decide_owed()
        return float(self.state.now)

    def expire(self) -> None:
        tasks = self.state.scheduler.tasks
        for t in sorted(self.state.holder, key=lambda x: tasks[x].seq):
            if ACTIONS["Expire"].enabled(self.state, t, limits=self.limits):
                self._take(Step("Expire", (("t", t),)))

    def now(self) -> float:
        return float(self.state.now)

    def snapshot(self) -> Snapshot:
        snapshot: Snapshot = self.state.scheduler.replace(provenance=None)
        return snapshot

    def leases(self) -> dict[str, LeaseView]:
        s = self.state
        return {str(t): LeaseView(a, None if t not in s.holder else str(s.holder[t]),
                                  None if t not in s.deadline else float(s.deadline[t]),
                                  s.ended_attempt.get(t, 0))
                for t, a in s.attempt.items()}

    def stats(self) -> DurableStats:
        return DurableStats(**self.counts.expected(self.state), cycles_reported=self.cycles,
                            stale_callbacks=self.stale, duplicate_callbacks=self.duplicates)

    def history(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.recorded)

    def times(self) -> dict[str, TimeView]:
        """The due time and priority of each waiting version, as the spec keeps them."""
        s = self.state
        return {str(t): TimeView(float(s.due.get(t, 0)), int(s.priority.get(t, 0)))
                for t, v in s.scheduler.tasks.items()
                if v.state in (TaskState.PENDING, TaskState.READY)}


# -- both sides ---------------------------------------------------------------------------------

class _Side:
    """One side of a probe: its store, the leases it handed out, where its clock began."""

    def __init__(self, store: Any, origin: float) -> None:
        self.store = store
        self.origin = origin
        self.given: dict[Held, Lease] = {}
        self.discard: Callable[[], Any] | None = None  # lets the store and its file go

    def lease(self, held: Held) -> Lease:
        """The lease this side handed out under that name, or one made of its fields."""
        if isinstance(held.task_id, Run):
            held = dataclasses.replace(held, task_id=self.run(held.task_id))
        found = self.given.get(held)
        if found is not None:
            return found
        return Lease(str(held.task_id), held.generation, held.attempt, self.origin, NOOP, {},
                     held.worker)

    def run(self, run: Run) -> str:
        """The task id of ``run``, as this side's ``schedules`` lists its slot."""
        slots = schedule_views(self.store)[run.schedule].slots
        if run.slot >= len(slots) or slots[run.slot].task is None:
            raise LookupError(f"{run}: schedule {run.schedule!r} lists no run of that slot")
        return str(slots[run.slot].task)

    def since(self, time: float | None) -> float | None:
        return None if time is None else float(time) - self.origin

    def snapshot(self) -> Any:
        return self.store.snapshot()

    def leases(self) -> dict[str, LeaseView]:
        return {t: dataclasses.replace(v, deadline=self.since(v.deadline))
                for t, v in self.store.leases().items()}


def _discard(store: Any, folder: str) -> None:
    try:
        store.release()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def new_model(max_concurrency: int, max_attempts: int) -> _Side:
    """The model of a fresh store."""
    return _Side(ReferenceStore(max_concurrency, max_attempts), 0.0)


def new_implementation(factory: Callable[..., Any], max_concurrency: int,
                       max_attempts: int) -> _Side:
    """A fresh store of the implementation, on a SQLite file of its own (removed with it)."""
    folder = tempfile.mkdtemp(prefix="refsched-durable-probe-")
    try:
        store = factory(f"sqlite:///{Path(folder) / 'store.db'}",
                        max_concurrency=max_concurrency, max_attempts=max_attempts,
                        clock="virtual", record=True)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    side = _Side(store, float(store.now()))
    side.discard = weakref.finalize(side, _discard, store, folder)  # at the latest
    return side


def align(model: _Side, impl: _Side) -> None:
    """Begin the model's fresh store on the implementation's clock: the two then agree on
    every time, a cron timing's slots and the run ids named by them too, wherever the
    implementation's virtual clock begins (refsched's at 0)."""
    store = model.store
    if isinstance(store, ReferenceStore) and store.state == RECORDING:
        store.state = store.state.replace(now=impl.origin)
        model.origin = impl.origin


def discard(side: _Side) -> None:
    """Let a side's store go, and its file with it (the model's has none)."""
    if side.discard is not None:
        side.discard()


def call(side: _Side, method: str, args: tuple[Any, ...]) -> Any:
    """One call on either side, a lease named by a :class:`Held` given as that side's; its
    times answered from where the side's clock began."""
    sent = tuple(side.lease(a) if isinstance(a, Held) else side.run(a) if isinstance(a, Run)
                 else float(a.at - side.store.now()) if isinstance(a, Until) else a
                 for a in args)
    if method == "leases":
        return side.leases()
    if method == "submit":  # the function, priority, delay and optional are keywords
        task, deps, fn, priority, delay, *optional = sent
        edges = {"optional": optional[0]} if optional else {}  # asked of a store with edges
        return side.store.submit(task, deps, fn=fn, **_time_keywords(priority, delay), **edges)
    if method == "cancel":  # actor and reason are keywords, given only when they say something
        task, *notes = sent
        given = {k: v for k, v in zip(("actor", "reason"), notes, strict=False) if v is not None}
        return side.store.cancel(task, **given)
    if method == "input_summary":
        return summary_views(side.store.input_summary(*sent))
    if method == "provenance":  # a DurableScheduler keeps it in info()
        ask = getattr(side.store, "provenance", None)
        return provenance_record(ask(*sent) if ask is not None
                                 else side.store.info(*sent).provenance)
    if method == "times":
        return {t: dataclasses.replace(v, due=v.due - side.origin)
                for t, v in waiting_times(side.store).items()}
    if method == "schedule":  # all but the name are keyword arguments
        name, fn, every, cron, overlap, catchup, priority, timezone = sent
        zoned = {} if timezone == "UTC" else {"timezone": timezone}  # only when not UTC
        return side.store.schedule(name, fn=fn, every=every, cron=cron, overlap=overlap,
                                   catchup=catchup, priority=priority, **zoned)
    if method == "schedules":
        return {name: view._replace(
            next_slot=side.since(view.next_slot), held_slot=side.since(view.held_slot),
            slots=tuple(slot._replace(at=slot.at - side.origin) for slot in view.slots))
            for name, view in schedule_views(side.store).items()}
    answer = getattr(side.store, method)(*sent)
    if method == "claim":
        for lease in answer:
            side.given[Held(lease.task_id, lease.generation, lease.attempt, lease.worker)] = lease
        return [lease._replace(deadline=side.since(lease.deadline)) for lease in answer]
    if method in ("tick", "now"):
        return side.since(answer)
    return answer


def _time_keywords(priority: Any, delay: Any) -> dict[str, Any]:
    """A submit's ``priority`` and ``delay``, only those given (a store without due times is
    asked neither)."""
    return {k: v for k, v in (("priority", priority), ("delay", delay))
            if not (type(v) is int and v == 0)}


def _flag(method: str) -> str | None:
    return {"start": "start", "heartbeat": "heartbeat", "cancel": "cancel",
            "acknowledge_cancel": "cancel", "retry": "retry", "close": "close",
            "expire": "expire", "snapshot": "snapshot", "leases": "snapshot",
            "stats": "snapshot", "history": "snapshot", "now": "snapshot",
            "times": "time", "input_summary": "edges", "provenance": "provenance",
            "schedule": "schedules", "unschedule": "schedules",
            "pause": "schedules", "resume": "schedules", "schedules": "schedules"}.get(method)


def needs_of(probe: Probe) -> tuple[str, ...]:
    """The profile flags a probe's calls need: each op's flag, dependencies (``deps``), a
    second submit of an id (``generations``), a bad argument (``validates``)."""
    needs: set[str] = set()
    submitted: set[Any] = set()
    for method, args in probe.calls:
        flag = _flag(method)
        if flag is not None:
            needs.add(flag)
        if method == "times":  # the waiting versions' times, read beside the snapshot
            needs.add("snapshot")
        if method == "new":
            submitted = set()
        elif method == "submit":
            task, deps, fn, priority, delay, *optional = args
            if optional and optional[0]:
                needs.update(("deps", "edges"))
                deps = [*deps, *optional[0]]
            if _time_keywords(priority, delay):
                needs.add("time")
                if not _is_int(priority) or not (_seconds(delay) or delay == 0):
                    needs.add("validates")
            if deps:
                needs.add("deps")
            if task in submitted:
                needs.add("generations")
            submitted.add(task)
            if fn != NOOP or len(set(deps)) != len(deps) or task in deps:
                needs.add("validates")
        elif method == "add_deps":
            needs.update(("deps", "edges"))
            task, deps, optional = args
            both = [*deps, *optional]
            if not both or len(set(both)) != len(both) or task in both:
                needs.add("validates")
        elif method == "claim":
            if not _is_int(args[1]) or args[1] < 1 or not _seconds(args[2]):
                needs.add("validates")
        elif method in ("heartbeat", "complete", "fail", "acknowledge_cancel"):
            if not isinstance(args[0], Held):
                needs.add("validates")
        elif method == "close" and not isinstance(args[0], bool):
            needs.add("validates")
        elif method == "cancel" and any(note is not None for note in args[1:]):
            needs.add("provenance")  # an actor or a reason for the record
        elif method == "schedule":
            try:
                name, fn, every, cron, overlap, catchup, priority, timezone = args
                _Checker().schedule(name, fn=fn, every=every, cron=cron, overlap=overlap,
                                    catchup=catchup, priority=priority, timezone=timezone)
            except InvalidArgumentError:
                needs.add("validates")
    return tuple(sorted(needs))


class _Checker(_Schedules):
    """Schedules with nothing stored: whether ``schedule``'s arguments pass its checks."""

    def __init__(self) -> None:
        self.state = INITIAL
        self.kept = {}

    def _decide(self, name: str) -> None:
        """Nothing is stored, so nothing is owed."""


def adapt(method: str, args: tuple[Any, ...], profile: Any) -> tuple[Any, ...]:
    """The arguments as sent: the durable scheduler's need no change."""
    return args


def show(value: Any) -> str:
    """An answer as the counterexample table shows it."""
    return repr(value)


def _refusal(method: str, args: tuple[Any, ...], before: Snapshot | None,
             expected: BaseException, actual: BaseException) -> str | None:
    """How two refusals of the same type differ in what identifies them, or None: a
    ``StaleLeaseError`` by the generation and attempt the lease named and the current ones."""
    if isinstance(expected, StaleLeaseError):
        fields = ("generation", "current", "attempt", "current_attempt")
        want = tuple(getattr(expected, name) for name in fields)
        got = tuple(getattr(actual, name, None) for name in fields)
        if got != want:
            return (f"the implementation's StaleLeaseError names {_named(fields, got)}; the "
                    f"model's {_named(fields, want)}")
        return None
    return dag_refusal_differs(method, args, before, expected, actual, "durable")


def _named(fields: tuple[str, ...], numbers: tuple[Any, ...]) -> str:
    return ", ".join(f"{name} {number!r}" for name, number in zip(fields, numbers, strict=True))


def judge(method: str, args: tuple[Any, ...], before: Snapshot | None, expected: Any,
          expected_error: BaseException | None, actual: Any,
          actual_error: BaseException | None, profile: Any) -> str | None:
    """How the implementation's answer differs from the model's, in a sentence, or None."""
    return differ(expected, expected_error, actual, actual_error, show=show,
                  comparable=lambda value: value,
                  refusal=lambda: (_refusal(method, args, before, expected_error, actual_error)
                                   if expected_error is not None and actual_error is not None
                                   else None))


_ROW_HEADS: Final = ("id", "field", "model", "implementation")


def states(model: _Side, impl: _Side) -> tuple[str | None, str]:
    """How the implementation's snapshot, then its ``leases()``, then the input summaries of
    the versions with optional deps differ from the model's: a sentence and the rows, or None
    and ""."""
    problem, diff = snapshots_differ(model, impl, lambda m, i: format_rows(
        _ROW_HEADS, snapshot_rows(m, i)))
    if problem is not None:
        return problem, diff
    problem, diff = snapshots_differ(model, impl, lambda m, i: f"model {m}\nimplementation {i}",
                                     read="leases")
    if problem is not None:
        return problem, diff
    rows = summary_rows(model, impl)
    if rows:
        return ("input_summary() is not what the model's steps give after the call",
                format_rows(_ROW_HEADS, rows))
    return None, ""


def summary_rows(model: _Side, impl: _Side) -> list[tuple[str, str, str, str]]:
    """(id, field, model, implementation) for each version with optional deps in the model
    whose input summary the implementation gives otherwise (the others have none to give)."""
    rows = []
    for task, view in model.store.snapshot().tasks.items():
        if not optional_of(view):
            continue
        expected = call(model, "input_summary", (task,))
        try:
            actual = call(impl, "input_summary", (task,))
        except HarnessError:  # the run cannot go on: not a difference of the implementation
            raise
        except Exception as error:  # what it raised is the difference
            rows.append((str(task), "input_summary()", show_summary(expected),
                         f"raised {type(error).__name__}: {error}"[:200]))
            continue
        if actual != expected:
            rows.append((str(task), "input_summary()", show_summary(expected),
                         show_summary(actual)))
    return rows


