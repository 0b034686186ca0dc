"""The durable scheduler's clauses phase: a probe per ``durable.*`` clause, run on the reference
store and on the implementation.

refsched's own DurableScheduler conforms with every clause driven and no answer left
unclassified; each broken durable scheduler of ``refsched.conform.durable.broken`` is rejected
by the clauses phase alone, with a verdict naming a ``durable.`` rule; and the schedulers below,
each breaking one clause a few calls reach, are rejected by it naming that very clause.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from refsched.conform import clauses
from refsched.conform.client import InProcessImplementation, ProtocolImplementation
from refsched.conform.coverage import Coverage, observed
from refsched.conform.durable import broken
from refsched.conform.durable.probes import PROBES, needs_of
from refsched.conform.durable.wire import RemoteDurable
from refsched.conform.oracle import check
from refsched.conform.probes import model_answers, run_probes
from refsched.conform.protocol import Unsupported
from refsched.conform.report import PhaseResult, WireRow
from refsched.durable import DurableScheduler, Lease, schedules
from refsched.errors import InvalidTransitionError, SchedulerClosedError, StaleLeaseError
from refsched.profile import full_profile
from refsched.schedule import Timing
from refsched.types import CloseReport

FULL = full_profile("durable")


# -- schedulers that each break one clause ------------------------------------------------------

class HeartbeatOfStaleAttemptAnswered(DurableScheduler):
    """durable.heartbeat.lost: a heartbeat with a lease that is not the version's live one
    raises ``LeaseLostError`` (the worker must stop).

    Bug: a heartbeat with an older attempt of the running version answers ``False``, so a
    worker that paused past its lease keeps working beside the one that took it over.
    """

    rule = "durable.heartbeat.lost"

    def heartbeat(self, lease: Lease) -> bool:
        if isinstance(lease, Lease) and isinstance(lease.task_id, str):
            info = self.info(lease.task_id) if lease.task_id in self.snapshot().tasks else None
            if (info is not None and info.generation == lease.generation
                    and info.holder is not None and info.attempts > lease.attempt):
                return False
        return super().heartbeat(lease)


class ClaimOfLimitZeroAccepted(DurableScheduler):
    """durable.claim.invalid: ``claim`` with a limit below 1 raises ``InvalidArgumentError``.

    Bug: a limit of 0 claims nothing and answers ``[]``.
    """

    rule = "durable.claim.invalid"

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        if limit == 0 and not isinstance(limit, bool):
            return []
        return super().claim(worker, limit, lease)


class StartAfterCloseAccepted(DurableScheduler):
    """durable.start.closed: ``start`` after ``close`` raises ``SchedulerClosedError``.

    Bug: ``start`` after ``close`` is taken as a second start (``InvalidTransitionError``),
    which tells a caller to skip a start it never made.
    """

    rule = "durable.start.closed"

    def start(self) -> None:
        try:
            super().start()
        except SchedulerClosedError:
            raise InvalidTransitionError("start(): already started") from None


class CloseWithoutCancelCancels(DurableScheduler):
    """durable.close.ok: ``close(False)`` leaves the waiting versions waiting.

    Bug: ``close`` cancels the waiting versions whatever ``cancel_pending`` says.
    """

    rule = "durable.close.ok"

    def close(self, cancel_pending: bool = True) -> CloseReport:
        return super().close(True if isinstance(cancel_pending, bool) else cancel_pending)


class StaleLeaseNamesItsOwnAttempt(DurableScheduler):
    """durable.report.stale: a report with a stale lease raises ``StaleLeaseError`` naming the
    lease's generation and attempt and the current ones.

    Bug: the error names the lease's own attempt as the current one, so a worker reading it
    cannot tell that another attempt took the version over.
    """

    rule = "durable.report.stale"

    def complete(self, lease: Lease, result: Any = None) -> Any:
        try:
            return super().complete(lease, result)
        except StaleLeaseError as error:
            error.current_attempt = error.attempt
            raise


BROKEN_CLAUSES = (HeartbeatOfStaleAttemptAnswered, ClaimOfLimitZeroAccepted,
                  StartAfterCloseAccepted, CloseWithoutCancelCancels, StaleLeaseNamesItsOwnAttempt)


# -- the probes ---------------------------------------------------------------------------------

def test_every_durable_clause_has_one_probe_in_the_catalogues_order() -> None:
    assert [p.clause for p in PROBES] == [c.id for c in clauses.clauses("durable")]


@pytest.mark.parametrize("probe", PROBES, ids=[p.clause for p in PROBES])
def test_each_durable_probe_ends_in_its_clause_on_the_model(probe: Any) -> None:
    method, args, answer = model_answers("durable", probe)[-1]
    decided = clauses.decide("durable", method, args, answer)
    assert decided is not None and decided.id == probe.clause, (method, args, answer)


def test_the_clauses_phase_drives_every_durable_clause_of_refsched_itself() -> None:
    coverage = Coverage("durable")
    phase = PhaseResult("clauses")
    found = run_probes("durable", observed(DurableScheduler, coverage), FULL, phase)
    assert found is None, found.format()
    assert coverage.not_driven(FULL) == []
    assert coverage.to_json(FULL)["unclassified"] == {}
    assert phase.figures["probes"] == len(PROBES)


# -- broken schedulers --------------------------------------------------------------------------

@pytest.mark.parametrize("cls", broken.BROKEN, ids=lambda c: c.__name__)
def test_each_broken_durable_scheduler_is_rejected_by_the_clauses_phase(cls: type[Any]) -> None:
    report = check(InProcessImplementation(cls, system="durable"), corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "clauses"
    assert example.wire_reason.startswith("rule durable."), example.wire_reason
    assert not example.calls[-1].agrees and all(c.agrees for c in example.calls[:-1])


@pytest.mark.parametrize("cls", BROKEN_CLAUSES, ids=lambda c: c.__name__)
def test_each_broken_durable_clause_is_a_divergence_naming_its_rule(cls: type[Any]) -> None:
    report = check(InProcessImplementation(cls, system="durable"), corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "clauses"
    assert example.wire_reason.startswith(f"rule {cls.rule}: "), example.wire_reason


@pytest.mark.parametrize("cls", [HeartbeatOfStaleAttemptAnswered, StaleLeaseNamesItsOwnAttempt,
                                 broken.DueOneSecondEarly, broken.SkipRunsOverlapping],
                         ids=lambda c: c.__name__)
def test_a_broken_durable_clause_served_is_rejected_by_the_clauses_phase(cls: type[Any]) -> None:
    # the second: what identifies a StaleLeaseError travels on the wire and is compared
    argv = [sys.executable, "-m", "refsched.serve", "--system", "durable", "--impl",
            f"{cls.__module__}:{cls.__name__}"]
    with ProtocolImplementation(argv, timeout=20, system="durable") as impl:
        report = check(impl, corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    assert report.counterexample is not None
    rule = cls.rule
    assert report.counterexample.wire_reason.startswith(f"rule {rule}: ")


# -- end to end ---------------------------------------------------------------------------------

def _conform_served_durable(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "refsched", "conform", "--system", "durable", "--no-corpus",
         "--examples", "0", *options, "--", sys.executable, "-m", "refsched.serve",
         "--system", "durable"], capture_output=True, text=True, timeout=300)


def test_refsched_conform_runs_the_durable_clauses_phase_and_drives_every_clause() -> None:
    done = _conform_served_durable()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "conforms to the model (full contract)" in lines[0]
    assert lines[1].split()[:2] == ["clauses", "ok"]
    assert f"{len(PROBES)} probes" in lines[1]
    every = len(clauses.clauses("durable"))
    assert lines[2].strip() == f"clauses: {every} of {every} driven"

    done = _conform_served_durable("--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "conforms"
    assert [p["name"] for p in report["phases"]] == ["clauses"]
    coverage = report["coverage"]
    assert set(coverage["driven"]) == {c.id for c in clauses.clauses("durable")}
    assert coverage["not_driven"] == [] and coverage["unclassified"] == {}


# -- due times and priorities -------------------------------------------------------------------

class DelayRefusedWithoutCheck(DurableScheduler):
    """durable.submit.time-refused: a delay below 0 raises ``InvalidArgumentError``.

    Bug: a negative delay is taken as "due now" and the version is stored.
    """

    rule = "durable.submit.time-refused"

    def submit(self, task_id: str, deps: Any = (), **options: Any) -> int:
        delay = options.get("delay")
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay < 0:
            options["delay"] = 0
        return super().submit(task_id, deps, **options)


@pytest.mark.parametrize("cls", [*broken.BROKEN_CLAUSES, DelayRefusedWithoutCheck],
                         ids=lambda c: c.__name__)
def test_each_broken_time_store_is_rejected_naming_its_rule(cls: type[Any]) -> None:
    rule = cls.rule
    report = check(InProcessImplementation(cls, system="durable"), corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "clauses"
    assert example.wire_reason.startswith(f"rule {rule}: "), example.wire_reason


def test_a_profile_without_time_sends_no_priority_delay_or_times() -> None:
    without = dataclasses.replace(FULL, time=False)
    # PriorityIgnored keeps every rule a store without priorities is held to
    report = check(InProcessImplementation(broken.PriorityIgnored, system="durable",
                                           profile=without), corpus=False, examples=0)
    assert report.exit_status == 0, report.format()
    left_out = {p.clause for p in PROBES if "time" in needs_of(p)}
    assert left_out == {"durable.claim.due", "durable.claim.order",
                        "durable.submit.time-refused"}


def test_a_profile_without_edges_sends_no_optional_edge_or_add_deps() -> None:
    from refsched.profile import profile_from_hello

    without = dataclasses.replace(FULL, edges=False)
    # a store that adds optional deps as required ones keeps every other rule
    report = check(InProcessImplementation(broken.AddDepsOptionalAsRequired, system="durable",
                                           profile=without), corpus=False, examples=0)
    assert report.exit_status == 0, report.format()
    left_out = {p.clause for p in PROBES if "edges" in needs_of(p)}
    assert left_out == {c.id for c in clauses.clauses("durable")
                        if c.id.startswith("durable.add_deps.")} | {
        "durable.submit.optional", "durable.input_summary.ok"}
    # a program that declares nothing of edge kinds in its hello is asked none of them
    assert not profile_from_hello("durable", {}).edges
    assert profile_from_hello("durable", {"edges": True}).edges


def test_a_profile_without_provenance_sends_no_provenance_actor_or_reason() -> None:
    from refsched.profile import profile_from_hello

    without = dataclasses.replace(FULL, provenance=False)
    # a store that drops what cancel() is told keeps every other rule
    report = check(InProcessImplementation(broken.CancelNotesDropped, system="durable",
                                           profile=without), corpus=False, examples=0)
    assert report.exit_status == 0, report.format()
    left_out = {p.clause for p in PROBES if "provenance" in needs_of(p)}
    assert left_out == {c.id for c in clauses.clauses("durable")
                        if c.id.startswith("durable.provenance.")}
    # with it, the same store is caught where the record lost what cancel() was told
    report = check(InProcessImplementation(broken.CancelNotesDropped, system="durable"),
                   corpus=False, examples=0)
    assert report.exit_status == 1 and report.counterexample is not None
    assert report.counterexample.wire_reason.startswith("rule durable.provenance.cancelled: ")
    # a program that declares nothing of provenance in its hello is asked none of it
    assert not profile_from_hello("durable", {}).provenance
    assert profile_from_hello("durable", {"provenance": True}).provenance


def test_a_given_up_versions_reason_is_the_stores_own_words_on_the_model() -> None:
    # x is given up after its second lease expired: y's record names x, with no actor and
    # whatever words the store chose (the model's reason is equal to any text, and only to
    # text)
    probe = next(p for p in PROBES if p.clause == "durable.provenance.blocked")
    *_, (method, args, record) = model_answers("durable", probe)
    assert (method, args) == ("provenance", ("y",))
    assert (record.root, record.end.value, record.path, record.actor) == (
        "x", "failed", ("x", "y"), None)
    assert record.reason == "lease expired 2 times" and record.reason != None  # noqa: E711
    assert record._replace(reason="any words") == record
    assert record._replace(reason=None) != record


# -- recurring schedules ------------------------------------------------------------------------

SCHEDULE_CLAUSES = {c.id for c in clauses.clauses("durable") if "schedules" in c.needs}


def test_the_schedule_probes_reach_every_decision_and_a_held_slot_on_the_model() -> None:
    decisions: set[str] = set()
    held = False
    for probe in PROBES:
        for method, _, answer in model_answers("durable", probe):
            if method == "schedules" and isinstance(answer, dict):
                decisions |= {slot.decision for view in answer.values() for slot in view.slots}
                held = held or any(view.held_slot is not None for view in answer.values())
    assert decisions == {"run", "skipped", "missed"} and held


def test_a_profile_without_schedules_asks_no_schedule_clause() -> None:
    without = dataclasses.replace(FULL, schedules=False)
    # SkipRunsOverlapping keeps every rule of a store without schedules
    report = check(InProcessImplementation(broken.SkipRunsOverlapping, system="durable",
                                           profile=without), corpus=False, examples=0)
    assert report.exit_status == 0, report.format()
    assert {p.clause for p in PROBES if "schedules" in needs_of(p)} == SCHEDULE_CLAUSES
    assert len(SCHEDULE_CLAUSES) == 7


def test_huey_declares_no_schedules_and_is_asked_no_schedule_clause() -> None:
    pytest.importorskip("huey")
    done = subprocess.run(
        [sys.executable, "-m", "refsched", "conform", "--system", "durable", "--no-corpus",
         "--examples", "0", "--json", "--", sys.executable, "-m",
         "refsched.conform.durable.huey_adapter"], capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    # Huey's profile leaves out every clause's probe: the clauses phase makes no call
    assert report["verdict"] == "nothing checked", done.stdout + done.stderr
    coverage = report["coverage"]
    assert set(coverage["left_out_by_profile"]) >= SCHEDULE_CLAUSES
    assert not SCHEDULE_CLAUSES & set(coverage["driven"])


def test_a_schedule_request_outside_the_profile_is_answered_unsupported() -> None:
    pytest.importorskip("huey")
    argv = [sys.executable, "-m", "refsched.conform.durable.huey_adapter"]
    with ProtocolImplementation(argv, timeout=20, system="durable") as impl:
        store = RemoteDurable(impl, None, 1, max_attempts=1)
        with pytest.raises(Unsupported, match="schedules is false"):
            store.schedule("report", every=1)
        with pytest.raises(Unsupported, match="schedules is false"):
            store.schedules()
        store.submit("a")  # the store is still there
        assert [lease.task_id for lease in store.claim("w1")] == ["a"]


@pytest.mark.parametrize("cls", [broken.SkipRunsOverlapping, broken.CatchupOneSecondShort],
                         ids=lambda c: c.__name__)
def test_a_slot_decided_otherwise_is_named_by_its_schedule_clause_at_the_tick(
        cls: type[Any]) -> None:
    # the tick's answer agrees; the run it submitted (or did not) is in the snapshot after it
    report = check(InProcessImplementation(cls, system="durable"), corpus=False, examples=0)
    example = report.counterexample
    assert example is not None and example.wire_reason.startswith(f"rule {cls.rule}: ")
    last = example.calls[-1]
    assert last.request["op"] == "tick" and last.model_answer == last.implementation_answer
    assert "snapshots differ" in example.wire_reason and last.diff


class ClockBeginsLater(DurableScheduler):
    """A conforming store whose virtual clock begins at 1000.5 s, not at 0 (set in the store,
    as no step: its history holds no Tick for it)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        with self._store.transaction() as tx:
            if tx.now() == 0:
                tx.meta_add("now", 1000.5)


def test_a_store_whose_clock_begins_later_conforms_in_every_schedule_probe(
        tmp_path: Path) -> None:
    # the runs are named by each side's own slot times, and the model's clock begins where
    # the store's does: slots and run ids agree wherever the clock begins
    report = check(InProcessImplementation(ClockBeginsLater, system="durable"), corpus=False,
                   examples=0)
    assert report.exit_status == 0, report.format()
    store = ClockBeginsLater(f"sqlite:///{tmp_path / 'later.db'}", 1, clock="virtual")
    try:
        assert store.now() == 1000.5
    finally:
        store.release()


def test_the_cron_probe_expects_the_slots_cronsim_gives_across_the_clock_change() -> None:
    (probe,) = [p for p in PROBES if p.clause == "durable.schedule.cron"]
    answers = model_answers("durable", probe)
    listings = [answer for method, _, answer in answers if method == "schedules"]
    (spring_again,) = [answer for method, args, answer in answers
                       if method == "schedule" and args[0] == "london" and answer is False]
    assert spring_again is False and len(listings) == 2
    listed, autumn = listings
    # Europe/London's 01:30 falls at 02:00 BST (01:00 UTC) the night the clocks go forward,
    # then at 01:30 BST (00:30 UTC): the times cronsim gives, each one run
    assert [(slot.task, slot.decision) for slot in listed["london"].slots] == [
        ("london@2024-03-31T01:00:00Z", "run"), ("london@2024-04-01T00:30:00Z", "run")]
    assert not any(slot.task.startswith(("utc@", "hourly@"))  # unscheduled before the tick
                   for slot in listed["london"].slots)
    # the night the clocks go back, 01:30 London comes at 00:30 and at 01:30 UTC: a fixed
    # wall time runs on its first pass only, every :30 on both
    assert [slot.task for slot in autumn["daily"].slots] == ["daily@2024-10-27T00:30:00Z"]
    assert [slot.task for slot in autumn["everyhour"].slots] == [
        "everyhour@2024-10-26T23:30:00Z", "everyhour@2024-10-27T00:30:00Z",
        "everyhour@2024-10-27T01:30:00Z", "everyhour@2024-10-27T02:30:00Z"]


class _WallTimeOnce(Timing):
    """A cron reading that walks wall times: the next slot after 01:30 is the next wall time
    after 01:30, so the repeated hour's second pass of ``30 * * * *`` is lost."""

    def _cron_times(self, t: float) -> Iterator[float]:
        zone = ZoneInfo(self.timezone)
        seen = {datetime.fromtimestamp(t, zone).replace(tzinfo=None)}
        for s in super()._cron_times(t):
            wall = datetime.fromtimestamp(s, zone).replace(tzinfo=None)
            if wall not in seen:
                seen.add(wall)
                yield s


def test_a_store_that_runs_a_repeated_hour_once_is_caught_by_the_cron_probe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the store reads each schedule's timing anew from its row: its reading is replaced there
    monkeypatch.setattr(schedules, "Timing", _WallTimeOnce)
    report = check(InProcessImplementation(DurableScheduler, system="durable"), corpus=False,
                   examples=0)
    example = report.counterexample
    assert report.exit_status == 1 and example is not None, report.format()
    assert example.wire_reason.startswith("rule durable.schedule.cron: "), example.wire_reason
    last = example.calls[-1]
    assert isinstance(last, WireRow) and last.request["op"] == "tick"
    # on the autumn night: the spring one, with no repeated hour, went as the model's
    assert {"op": "unschedule", "name": "london"} in [
        row.request for row in example.calls if isinstance(row, WireRow)]


@pytest.mark.parametrize("cls", [broken.CronStepsByItsFirstGap,
                                 broken.ZoneOffsetFixedAtCreation], ids=lambda c: c.__name__)
def test_a_store_that_reads_cron_wrongly_is_caught_at_the_tick_that_decides_its_slots(
        cls: type[Any]) -> None:
    report = check(InProcessImplementation(cls, system="durable"), corpus=False, examples=0)
    example = report.counterexample
    assert report.exit_status == 1 and example is not None, report.format()
    assert example.wire_reason.startswith("rule durable.schedule.cron: "), example.wire_reason
    last = example.calls[-1]
    assert isinstance(last, WireRow) and last.request["op"] == "tick"
    assert "snapshots differ" in example.wire_reason
    # left out with the schedules: nothing else of the store is wrong
    without = dataclasses.replace(FULL, schedules=False)
    assert check(InProcessImplementation(cls, system="durable", profile=without),
                 corpus=False, examples=0).exit_status == 0
