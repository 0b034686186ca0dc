"""Durable schedulers that each break one rule of ``docs/durable.md``, for showing that the
checks reject them.

Each is a :class:`refsched.durable.DurableScheduler` subclass with one plausible bug, named
after it, and built as the checks build the real one (``factory(url, max_concurrency=...,
max_attempts=..., clock="virtual", record=True)``); the docstring names the rule (in
``docs/durable.md``'s words, with its action of ``spec/DurableScheduler.tla``) and the bug. Every
bug is in Python, in a method of the subclass, none in the store's SQL, so it shows on the SQLite
store the checks build. The replay of the durable corpus rejects most within a few steps; a bug
the corpus's single task cannot show (blocking) is left to the durable lock-step machine
(``tests/test_conform_broken_systems.py``).

Where the rule lives inside one transaction, the bug reaches into the scheduler's internals
(named where it does), and may take a second transaction of its own: these are seeded bugs,
for one process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from refsched.durable import DurableScheduler, Lease
from refsched.durable.scheduler import PRIORITY_RANGE
from refsched.durable.store import Tx
from refsched.errors import LeaseLostError, SchedulerError, StaleLeaseError, UnknownTaskError
from refsched.schedule import Timing
from refsched.types import ParentOutcome, TaskState

__all__ = [
    "BROKEN",
    "BROKEN_CLAUSES",
    "AddDepsIgnoredWhenNotPending",
    "AddDepsOptionalAsRequired",
    "BufferDropsHeldSlot",
    "CancelDoesNotBlock",
    "CancelIgnoresRunning",
    "CancelNotesDropped",
    "CatchupOneSecondShort",
    "CronStepsByItsFirstGap",
    "DueOneSecondEarly",
    "HeartbeatExtendsFromDeadline",
    "HeartbeatHidesCancel",
    "OptionalTakenAsRequired",
    "PriorityIgnored",
    "ReclaimKeepsAttempt",
    "RepeatedReportRefused",
    "SkipRunsOverlapping",
    "StaleAttemptAccepted",
    "SummaryReadAtTheCall",
    "ZoneOffsetFixedAtCreation",
]


def _well_formed(lease: object) -> bool:
    """Whether ``lease`` is a Lease the real calls would look up (else they refuse it)."""
    return (isinstance(lease, Lease) and isinstance(lease.task_id, str) and bool(lease.task_id)
            and type(lease.generation) is int and type(lease.attempt) is int
            and isinstance(lease.worker, str))


class StaleAttemptAccepted(DurableScheduler):
    """Complete(w, t, g, a): a report is accepted only with the version's live lease; a lease of
    an older attempt, whose version was re-claimed after it expired, gets ``StaleLeaseError``.

    Bug: ``complete()`` fences on the generation only: a worker that paused past its lease
    still ends the version that another worker's attempt now runs.
    """

    def complete(self, lease: Lease, result: Any = None) -> TaskState:
        if _well_formed(lease):
            try:
                info = self.info(lease.task_id)
            except SchedulerError:  # unknown: let the real complete() refuse it
                info = None
            if (info is not None and info.generation == lease.generation
                    and info.state is TaskState.RUNNING and info.holder is not None
                    and info.attempts != lease.attempt):
                lease = lease._replace(attempt=info.attempts, worker=info.holder)
        return super().complete(lease, result)


class HeartbeatExtendsFromDeadline(DurableScheduler):
    """Heartbeat(w, t, g, a): a heartbeat with the live lease sets its deadline to ``now +
    LeaseTime``.

    Bug: ``heartbeat()`` adds the lease's length to the old deadline, so every early heartbeat
    pushes the deadline further out, and a worker that beats often can hold a lease long after
    it stopped.
    """

    def heartbeat(self, lease: Lease) -> bool:
        if not _well_formed(lease):
            return super().heartbeat(lease)  # refuses it
        with self._store.transaction() as tx:
            row = tx.one("SELECT generation, state, attempt, holder, cancel_requested, "
                         "deadline, lease_seconds FROM task WHERE id = ?", (lease.task_id,))
            if row is None:
                raise UnknownTaskError(f"heartbeat({lease.task_id!r}): unknown task",
                                       lease.task_id)
            generation, state, attempt, holder, cancel_requested, deadline, seconds = row
            if not (generation == lease.generation and attempt == lease.attempt
                    and state == "running" and holder == lease.worker):
                raise LeaseLostError(f"heartbeat({lease.task_id!r}, generation="
                                     f"{lease.generation}, attempt={lease.attempt}): the lease "
                                     "is no longer live")
            tx.run("UPDATE task SET deadline = ? WHERE id = ?", (deadline + seconds,
                                                                lease.task_id))
            self._step(tx, "Heartbeat", w=lease.worker, t=lease.task_id, g=lease.generation,
                       a=lease.attempt)
            return bool(cancel_requested)


class ReclaimKeepsAttempt(DurableScheduler):
    """Reclaim(w, t): the version whose lease expired is claimed again as the next attempt
    (``attempt + 1``), the fencing token of the new lease, until ``max_attempts`` is reached.

    Bug: a re-claim hands the version to its new worker under the attempt number of the lease
    that expired: the token does not move, and ``max_attempts`` never gives a version up.
    (Internals: it writes the attempt back after the claim's transaction.)
    """

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        taken = super().claim(worker, limit, lease)
        again = [x for x in taken if x.attempt > 1]
        if not again:
            return taken
        with self._store.transaction() as tx:
            tx.many("UPDATE task SET attempt = attempt - 1 WHERE id = ?",
                    [(x.task_id,) for x in again])
        return [x._replace(attempt=x.attempt - 1) if x.attempt > 1 else x for x in taken]


class CancelDoesNotBlock(DurableScheduler):
    """Cancel(t), then Settle: every waiting version that depends on a cancelled one, directly or
    through other waiting versions, becomes blocked.

    Bug: ``cancel()`` of a waiting version cancels it and leaves its dependents waiting for
    ever. (Internals: it skips the scheduler's Settle, ``_settle``, for the duration of the
    call.)
    """

    _cancelling = False  # True only inside cancel(): the constructor stays the real one's

    def cancel(self, task_id: str, *, actor: str | None = None,
               reason: str | None = None) -> TaskState:
        self._cancelling = True
        try:
            return super().cancel(task_id, actor=actor, reason=reason)
        finally:
            self._cancelling = False

    def _settle(self, tx: Tx, seeds: Iterable[str]) -> None:
        if not self._cancelling:
            super()._settle(tx, seeds)


class CancelIgnoresRunning(DurableScheduler):
    """Cancel(t): cancel of a running version sets its cooperative stop request
    (``cancel_requested``), which its worker hears on its next heartbeat.

    Bug: ``cancel()`` of a running version answers ``running`` and does nothing.
    """

    def cancel(self, task_id: str, *, actor: str | None = None,
               reason: str | None = None) -> TaskState:
        try:
            running = self.state(task_id) is TaskState.RUNNING
        except SchedulerError:  # unknown or a bad id: let the real cancel() refuse it
            running = False
        if running:
            return TaskState.RUNNING
        return super().cancel(task_id, actor=actor, reason=reason)


class HeartbeatHidesCancel(DurableScheduler):
    """Heartbeat(w, t, g, a): the answer to a heartbeat with the live lease is the version's
    ``cancel_requested``: how a worker hears that its version was cancelled and should stop.

    Bug: ``heartbeat()`` renews the lease and always answers ``False``, so a worker never hears
    the stop request and runs its cancelled version to the end.
    """

    def heartbeat(self, lease: Lease) -> bool:
        super().heartbeat(lease)
        return False


class RepeatedReportRefused(DurableScheduler):
    """RepeatedReport(w, t, g, a) (and RepeatedCallback(t)): the same lease reporting again
    after its report was accepted (a worker retrying a report whose answer it lost) gets the
    version's state, and nothing changes.

    Bug: reports are not idempotent: the repeat is refused with ``StaleLeaseError``, so the
    worker believes its work was lost. (Internals: the fence's look-up, ``_current``.)
    """

    def _current(self, tx: Tx, call: str, lease: Lease) -> tuple[Any, ...] | None:
        row = super()._current(tx, call, lease)
        if row is None:
            self._stale += 1  # counted as the real fence counts the reports it refuses
            raise StaleLeaseError(
                f"{call}({lease.task_id!r}, generation={lease.generation}, attempt="
                f"{lease.attempt}): the version has ended", lease.task_id, lease.generation,
                lease.generation, lease.attempt, lease.attempt)
        return row


class DueOneSecondEarly(DurableScheduler):
    """Claim(w, k) takes only eligible versions: a version submitted with ``delay`` d is due
    ``d`` seconds after its submit (docs/time.md, spec ``ClaimsOnlyDue``).

    Bug: the delay is read one second short, so a delayed version is claimed a second before
    its due time.
    """

    rule = "durable.claim.due"

    def submit(self, task_id: str, deps: Iterable[str] = (), **options: Any) -> int:
        delay = options.get("delay")
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay >= 1:
            options["delay"] = delay - 1
        return super().submit(task_id, deps, **options)


class PriorityIgnored(DurableScheduler):
    """Claim(w, k) takes the first eligible versions in the claim order, higher priority first
    (docs/time.md, spec ``ClaimsInKeyOrder``).

    Bug: ``submit()`` checks the priority and stores 0, so the claims go by due time alone.
    """

    rule = "durable.claim.order"

    def submit(self, task_id: str, deps: Iterable[str] = (), **options: Any) -> int:
        if type(options.get("priority")) is int and options["priority"] in PRIORITY_RANGE:
            options["priority"] = 0
        return super().submit(task_id, deps, **options)


class SkipRunsOverlapping(DurableScheduler):
    """Decide (spec ``Schedule.tla``, ``SkipNeverOverlaps``): under ``overlap="skip"`` a slot
    whose time comes while a run of its schedule is unfinished is skipped (docs/time.md,
    "Deciding a slot").

    Bug: the policy table has no row for ``skip``, which falls through to ``allow``: a slot
    runs beside the unfinished run before it.
    """

    rule = "durable.schedule.overlap"

    def schedule(self, name: str, **options: Any) -> bool:
        if options.get("overlap", "skip") == "skip":
            options["overlap"] = "allow"
        return super().schedule(name, **options)


class BufferDropsHeldSlot(DurableScheduler):
    """Decide, Release (spec ``Schedule.tla``, ``BufferHoldsOne``): under
    ``overlap="buffer_one"`` the first slot that comes while a run is unfinished is held, and
    runs once no run is unfinished (docs/time.md, "Deciding a slot").

    Bug: ``buffer_one`` is read as ``skip``: the slot that should wait for the run is skipped,
    and nothing runs after the run ends.
    """

    rule = "durable.schedule.overlap"

    def schedule(self, name: str, **options: Any) -> bool:
        if options.get("overlap") == "buffer_one":
            options["overlap"] = "skip"
        return super().schedule(name, **options)


class CatchupOneSecondShort(DurableScheduler):
    """Decide (spec ``Schedule.tla``, ``CatchupKept``): a slot is missed exactly when
    ``now - slot > catchup`` at its decision (docs/time.md, "Deciding a slot").

    Bug: the window is kept one second short (``>=`` for ``>``, on whole seconds): after a
    downtime the oldest slot the window still holds is missed.
    """

    rule = "durable.schedule.catchup"

    def schedule(self, name: str, **options: Any) -> bool:
        catchup = options.get("catchup")
        if isinstance(catchup, int | float) and not isinstance(catchup, bool) and catchup >= 1:
            options["catchup"] = catchup - 1
        return super().schedule(name, **options)


def _cron_start(db: DurableScheduler, options: dict[str, Any]) -> Timing | None:
    """The timing a well-formed cron schedule made now would have (None for any other, which
    the real ``schedule()`` takes or refuses as it is)."""
    cron, zone = options.get("cron"), options.get("timezone", "UTC")
    if options.get("every") is not None or options.get("start") is not None:
        return None
    try:
        return Timing(cron=cron, timezone=zone, start=float(math.ceil(db.now())))
    except (SchedulerError, TypeError, ValueError):
        return None


class CronStepsByItsFirstGap(DurableScheduler):
    """Decide (docs/time.md, "Recurring schedules"): a cron timing's slots are the times its
    expression gives, however unevenly they fall.

    Bug: the expression is read for its first two times only, and the schedule steps by the
    gap between them: ``0,45 * * * *`` from 23:10 runs at 23:45, 00:00, 00:15, 00:30...,
    two slots where it has one.
    """

    rule = "durable.schedule.cron"

    def schedule(self, name: str, **options: Any) -> bool:
        timing = _cron_start(self, options)
        first = None if timing is None else timing.first_slot()
        second = None if first is None or timing is None else timing.slot_after(first)
        if first is not None and second is not None:
            options.update(cron=None, timezone="UTC", every=second - first,
                           start=datetime.fromtimestamp(first, UTC))
        return super().schedule(name, **options)


class ZoneOffsetFixedAtCreation(DurableScheduler):
    """Decide (docs/time.md, "Recurring schedules"): a cron expression is read in its time
    zone, whose offset from UTC changes with daylight saving.

    Bug: the zone is read once, as its offset when the schedule is made: a wall time after
    the change falls an hour off (``30 1 * * *`` in Europe/London runs at 01:30 UTC on the
    night the clocks go forward, not at 01:00 UTC, 02:00 BST).
    """

    rule = "durable.schedule.cron"

    def schedule(self, name: str, **options: Any) -> bool:
        timing = _cron_start(self, options)
        if timing is not None and timing.timezone != "UTC":
            offset = ZoneInfo(timing.timezone).utcoffset(datetime.fromtimestamp(timing.start,
                                                                                 UTC))
            hours = 0 if offset is None else round(offset.total_seconds() / 3600)
            # the Etc zones name an offset with the sign turned round (Etc/GMT+5 is UTC-5)
            options["timezone"] = "Etc/GMT" + ("" if hours == 0 else f"{-hours:+d}")
        return super().schedule(name, **options)


class OptionalTakenAsRequired(DurableScheduler):
    """SubmitOptional(t, D, O, p, d): the edges to ``optional`` are optional: the version
    waits for each of those deps to end, in any state, and is never blocked by one
    (docs/durable.md, "Edge kinds").

    Bug: it stores every dep as required, so an optional dep's failure blocks the version.
    """

    rule = "durable.submit.optional"

    def submit(self, task_id: str, deps: Iterable[str] = (), *,
               optional: Iterable[str] = (), **options: Any) -> int:
        listed = list(deps) if isinstance(deps, (list, tuple)) else deps
        extra = list(optional) if isinstance(optional, (list, tuple)) else optional
        if isinstance(listed, list) and isinstance(extra, list):
            return super().submit(task_id, [*listed, *extra], **options)
        return super().submit(task_id, deps, optional=optional, **options)


class AddDepsIgnoredWhenNotPending(DurableScheduler):
    """AddDeps(t, D, O): only a pending version takes new edges; a ready, running or ended
    one refuses them with ``InvalidTransitionError``, so an edge never lands on a version a
    claim may have taken (docs/durable.md, "Adding dependencies").

    Bug: it answers the version's state and changes nothing, so the caller believes the
    version waits for deps it will never wait for.
    """

    rule = "durable.add_deps.not-pending"

    def add_deps(self, task_id: str, deps: Iterable[str] = (),
                 optional: Iterable[str] = ()) -> TaskState:
        try:
            state = self.state(task_id)
        except SchedulerError:
            state = None
        if state is not None and state is not TaskState.PENDING:
            return state
        return super().add_deps(task_id, deps, optional)


class AddDepsOptionalAsRequired(DurableScheduler):
    """AddDeps(t, D, O): the added edges to ``optional`` are optional, as at submit.

    Bug: it adds them as required edges.
    """

    rule = "durable.add_deps.ok"

    def add_deps(self, task_id: str, deps: Iterable[str] = (),
                 optional: Iterable[str] = ()) -> TaskState:
        if isinstance(deps, list) and isinstance(optional, list):
            return super().add_deps(task_id, [*deps, *optional])
        return super().add_deps(task_id, deps, optional)


class SummaryReadAtTheCall(DurableScheduler):
    """The input summary of a claimed version is how its optional deps had ended at its
    first claim, fixed from then on: the function that ran was given that (docs/durable.md,
    "Edge kinds").

    Bug: it reads the deps as they are at the call, so a dep renewed after the claim vanishes
    from the summary of the version that already ran on its outcome.
    """

    rule = "durable.input_summary.ok"

    def input_summary(self, task_id: str) -> dict[str, ParentOutcome]:
        super().input_summary(task_id)  # its checks and errors
        tasks = self.snapshot().tasks
        summary = {}
        for dep in sorted(getattr(tasks[task_id], "optional", ())):
            parent = tasks.get(dep)
            if parent is not None and parent.state.is_terminal:
                summary[dep] = ParentOutcome(dep, parent.generation, parent.state,
                                             blocked_by=parent.blocked_by)
        return summary


class CancelNotesDropped(DurableScheduler):
    """Cancel(t): the record of a version cancelled while it waits keeps the ``actor`` and
    ``reason`` given to ``cancel()`` (docs/durable.md, "Provenance").

    Bug: it cancels without them, so the record says nobody cancelled it, for no reason.
    """

    rule = "durable.provenance.cancelled"

    def cancel(self, task_id: str, *, actor: str | None = None,
               reason: str | None = None) -> TaskState:
        return super().cancel(task_id)


BROKEN_CLAUSES: tuple[type[DurableScheduler], ...] = (
    DueOneSecondEarly, PriorityIgnored, SkipRunsOverlapping, BufferDropsHeldSlot,
    CatchupOneSecondShort, CronStepsByItsFirstGap, ZoneOffsetFixedAtCreation,
    OptionalTakenAsRequired, AddDepsIgnoredWhenNotPending, AddDepsOptionalAsRequired,
    SummaryReadAtTheCall, CancelNotesDropped,
)
"""The broken stores of due times, priorities, schedules, edge kinds, input summaries and
provenance, each with the rule it breaks (``rule``)."""


BROKEN: tuple[type[DurableScheduler], ...] = (
    StaleAttemptAccepted, HeartbeatExtendsFromDeadline, ReclaimKeepsAttempt, CancelDoesNotBlock,
    CancelIgnoresRunning, HeartbeatHidesCancel, RepeatedReportRefused,
)
"""Every broken durable scheduler, in the order of the actions in ``docs/durable.md``."""
