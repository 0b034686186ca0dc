"""Contract tests of ``refsched.TimerScheduler`` (docs/timer.md), on a clock the tests move.

A small reference written from docs/timer.md (``Ref`` below) runs beside the scheduler in the
random runs: after every operation the two snapshots, heaps included, must be equal. Random runs
are seeded and print their seed.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import random
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from refsched import (
    Due,
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    SchedulerClosedError,
    StaleGenerationError,
    TaskRunningError,
    TimerCloseReport,
    TimerEntry,
    TimerScheduler,
    TimerSnapshot,
    TimerState,
    TimerVersionView,
    UnknownTaskError,
    Wait,
)
from refsched.model.timer.actions import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING
from refsched.timer import scheduler as timer_module
from refsched.verify.timer.system import FakeClock


class ListRecorder:
    def __init__(self) -> None:
        self.steps: list[tuple[str, dict[str, Any], TimerSnapshot]] = []

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None:
        self.steps.append((action, params, state))

    def actions(self) -> list[tuple[str, dict[str, Any]]]:
        return [(a, p) for a, p, _ in self.steps]


def make(floor: int = 64, now: float = 0.0,
         recorder: ListRecorder | None = None) -> tuple[TimerScheduler, FakeClock]:
    clock = FakeClock(now)
    return TimerScheduler(clock, rebuild_floor=floor, recorder=recorder), clock


def claim(s: TimerScheduler) -> Due:
    got = s.next()
    assert isinstance(got, Due), got
    return got


def drain(s: TimerScheduler) -> list[Hashable]:
    """Claim and complete everything due now; the ids in claim order."""
    order = []
    while isinstance(got := s.next(), Due):
        order.append(got.task_id)
        s.complete(got.task_id, got.version)
    return order


# ---------------------------------------------------------------------- a reference


@dataclass(frozen=True)
class _V:
    version: int
    state: TimerState
    run_at: float
    priority: int
    seq: int
    cancel_requested: bool = False
    claims: int = 0


class Ref:
    """docs/timer.md, written as plainly as possible: a set for the heap, a scan for its min."""

    def __init__(self, floor: int) -> None:
        self.floor = floor
        self.now: float = 0
        self.closed = False
        self.next_seq = 1
        self.tasks: dict[Hashable, _V] = {}
        self.heap: set[TimerEntry] = set()
        self.rebuilds = 0

    def live(self, e: TimerEntry) -> bool:
        v = self.tasks[e.task_id]
        return v.version == e.version and v.state is PENDING

    def compact(self) -> None:
        stale = sum(1 for e in self.heap if not self.live(e))
        if len(self.heap) > self.floor and 2 * stale > len(self.heap):
            self.heap = {e for e in self.heap if self.live(e)}
            self.rebuilds += 1

    def tick(self, clock: float) -> None:
        self.now = max(self.now, clock)

    def schedule(self, t: Hashable, r: float, p: int) -> int:
        old = self.tasks.get(t)
        version = 1 if old is None else old.version + 1
        seq = self.next_seq
        self.next_seq += 1
        self.tasks[t] = _V(version, PENDING, r, p, seq)
        self.heap.add(TimerEntry(r, p, seq, t, version))
        self.compact()
        return version

    def cancel(self, t: Hashable) -> bool:
        v = self.tasks[t]
        if v.state is PENDING:
            self.tasks[t] = replace(v, state=CANCELLED)
            self.compact()
            return True
        if v.state is RUNNING:
            self.tasks[t] = replace(v, cancel_requested=True)
        return False

    def next(self, clock: float) -> tuple[Hashable, int] | float | None:
        self.tick(clock)
        while self.heap:
            top = min(self.heap, key=lambda e: e.key)
            if not self.live(top):
                self.heap.remove(top)
                continue
            if top.run_at > self.now:
                return top.run_at - self.now
            self.heap.remove(top)
            v = self.tasks[top.task_id]
            self.tasks[top.task_id] = replace(v, state=RUNNING, claims=v.claims + 1)
            self.compact()
            return (top.task_id, top.version)
        return None

    def end(self, t: Hashable, to: TimerState) -> None:
        v = self.tasks[t]
        assert v.state is RUNNING
        self.tasks[t] = replace(v, state=to)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for t, v in self.tasks.items():
            if v.state is PENDING:
                self.tasks[t] = replace(v, state=CANCELLED)
        self.heap = set()

    def snapshot(self) -> TimerSnapshot:
        views = {t: TimerVersionView(v.version, v.state, v.run_at, v.priority, v.seq,
                                     v.cancel_requested, v.claims)
                 for t, v in self.tasks.items()}
        return TimerSnapshot(self.now, self.closed, self.next_seq, views, frozenset(self.heap))


# ---------------------------------------------------------------------- order


def test_next_claims_earliest_then_higher_priority_then_first_scheduled() -> None:
    s, clock = make()
    s.schedule("late", 5.0)
    s.schedule("low", 2.0, priority=0)
    s.schedule("high", 2.0, priority=3)
    s.schedule("low-again", 2.0, priority=0)
    s.schedule("negative", 2.0, priority=-1)
    s.schedule("early", 1.0, priority=-100)
    clock.now = 10.0
    assert drain(s) == ["early", "high", "low", "low-again", "negative", "late"]
    s.check_invariants()


def test_equal_time_and_priority_keep_scheduling_order_even_for_incomparable_ids() -> None:
    s, clock = make()
    ids: list[Hashable] = [("tuple",), 3, "str", frozenset({1}), None, 2.5]
    for t in ids:
        s.schedule(t, 1.0)
    clock.now = 1.0
    assert drain(s) == ids


@pytest.mark.parametrize("times", ["distinct", "ties", "equal ints and floats"])
def test_the_order_holds_across_the_sorted_run_and_the_heap(times: str) -> None:
    # Enough entries for next() to sort the heap into the sorted run, then more pushed onto
    # the heap between claims: next() takes the first of the two, by the whole key.
    rng = random.Random(f"order-{times}")
    s, clock = make()

    def when() -> float:
        if times == "distinct":
            return rng.random() * 10
        if times == "ties":
            return float(rng.randrange(5))
        return rng.choice((1, 1.0, 2, 2.0))

    pending: list[tuple[float, int, int, Hashable]] = []  # (run_at, -priority, seq, id)
    seq = 0

    def schedule(task_id: Hashable) -> None:
        nonlocal seq
        seq += 1
        at, priority = when(), rng.randrange(-2, 3)
        s.schedule(task_id, at, priority)
        pending.append((at, -priority, seq, task_id))

    def first() -> Hashable:
        top = min(pending)
        pending.remove(top)
        return top[3]

    for t in range(3 * timer_module._MERGE_MIN):
        schedule(t)
    clock.now = 100.0
    for k in range(timer_module._MERGE_MIN):  # the first claim sorts; the rest is pushed
        assert claim(s).task_id == first()
        schedule(("later", k))
        s.check_invariants()
    assert s._sorted and s._heap
    assert drain(s) == [first() for _ in range(len(pending))]
    s.check_invariants()


def test_reschedule_moves_the_id_to_its_new_place_in_the_order() -> None:
    s, clock = make()
    s.schedule("a", 1.0)
    s.schedule("b", 2.0)
    s.schedule("a", 3.0)
    clock.now = 5.0
    assert drain(s) == ["b", "a"]


def test_int_float_and_other_real_times_compare_and_non_int_float_are_stored_as_float() -> None:
    s, clock = make()
    s.schedule("int", 2)
    s.schedule("fraction", Fraction(3, 2))  # type: ignore[arg-type]
    s.schedule("float", 2.5)
    assert s.view("fraction").run_at == 1.5 and type(s.view("fraction").run_at) is float
    assert type(s.view("int").run_at) is int
    clock.now = 3
    assert drain(s) == ["fraction", "int", "float"]


# ---------------------------------------------------------------------- versions


def test_each_schedule_makes_a_new_version_with_a_new_seq() -> None:
    s, _ = make()
    assert s.schedule("a", 5.0) == 1
    assert s.schedule("a", 6.0) == 2
    assert s.schedule("b", 1.0) == 1
    assert s.schedule("a", 7.0, 2) == 3
    view = s.view("a")
    assert (view.version, view.state, view.run_at, view.priority, view.seq) == (
        3, PENDING, 7.0, 2, 4)
    assert s.version("a") == 3 and s.version("b") == 1
    assert s.snapshot().next_seq == 5


def test_a_superseded_version_never_runs_and_its_entry_is_stale_until_dropped() -> None:
    s, clock = make()
    ran = []
    s.schedule("a", 1.0, fn=lambda: ran.append(1))
    s.schedule("a", 2.0, fn=lambda: ran.append(2))
    heap = s.snapshot().heap
    assert heap == {TimerEntry(1.0, 0, 1, "a", 1), TimerEntry(2.0, 0, 2, "a", 2)}
    assert s.stats().live == 1 and s.stats().heap == 2
    clock.now = 1.5
    assert s.next() == Wait(0.5)  # the stale entry on top was dropped, not claimed
    assert s.snapshot().heap == {TimerEntry(2.0, 0, 2, "a", 2)}
    clock.now = 2.0
    due = claim(s)
    assert (due.task_id, due.version) == ("a", 2)
    assert due.fn is not None
    due.fn()
    assert ran == [2]
    assert s.next() is None


def test_rescheduling_a_running_version_is_refused_and_changes_nothing() -> None:
    s, _ = make()
    s.schedule("a", 0.0)
    claim(s)
    before = s.snapshot()
    with pytest.raises(TaskRunningError, match=r"schedule\('a', 1\.0\): version 1 is running"):
        s.schedule("a", 1.0)
    assert s.snapshot() == before


def test_rescheduling_a_terminal_version_starts_a_new_one() -> None:
    s, _ = make()
    for t in ("by-complete", "by-fail", "by-cancel"):
        s.schedule(t, 0.0)
    s.cancel("by-cancel")
    s.complete("by-complete", claim(s).version)
    s.fail("by-fail", claim(s).version)
    for t in ("by-complete", "by-fail", "by-cancel"):
        assert s.state(t).is_terminal
        assert s.schedule(t, 0.0) == 2
        view = s.view(t)
        assert (view.state, view.claims, view.cancel_requested) == (PENDING, 0, False)
    assert drain(s) == ["by-complete", "by-fail", "by-cancel"]
    s.check_invariants()


def test_next_hands_out_the_stored_function_without_calling_it() -> None:
    s, _ = make()
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)

    s.schedule("a", 0.0, fn=fn)
    due = claim(s)
    assert due == Due("a", 1, fn) and calls == []


# ---------------------------------------------------------------------- cancel


def test_cancel_of_a_pending_version_cancels_it_and_it_never_runs() -> None:
    s, clock = make()
    s.schedule("a", 1.0)
    s.schedule("b", 2.0)
    assert s.cancel("a") is True
    assert s.state("a") is CANCELLED
    clock.now = 5.0
    assert drain(s) == ["b"]
    assert s.stats().cancelled == 1


def test_cancel_of_a_running_version_only_requests_a_stop_once() -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule("a", 0.0)
    claim(s)
    assert s.cancel("a") is False
    view = s.view("a")
    assert view.state is RUNNING and view.cancel_requested
    before = s.snapshot()
    assert s.cancel("a") is False  # a second request is no step
    assert s.snapshot() == before
    assert [a for a, _ in rec.actions()] == ["Schedule", "Claim", "Cancel"]
    # The version may still end either way; the request stays on the record.
    assert s.complete("a", 1) is COMPLETED
    assert s.view("a").cancel_requested
    s.check_invariants()


def test_cancel_of_a_terminal_version_changes_nothing() -> None:
    s, _ = make()
    s.schedule("a", 0.0)
    s.complete("a", claim(s).version)
    before = s.snapshot()
    assert s.cancel("a") is False
    assert s.snapshot() == before


def test_cancel_of_an_unknown_or_unhashable_id_is_refused() -> None:
    s, _ = make()
    with pytest.raises(UnknownTaskError, match=r"cancel\('x'\): unknown task") as info:
        s.cancel("x")
    assert info.value.task_id == "x"
    with pytest.raises(InvalidArgumentError, match="unhashable"):
        s.cancel(["x"])  # type: ignore[arg-type]


# ---------------------------------------------------------------------- next()


def test_next_returns_due_wait_or_none() -> None:
    s, clock = make(now=10.0)
    assert s.next() is None
    s.schedule("a", 12.5)
    got = s.next()
    assert got == Wait(2.5) and isinstance(got, Wait)
    clock.now = 12.5
    due = s.next()
    assert due == Due("a", 1, None)
    assert s.state("a") is RUNNING and s.view("a").claims == 1
    assert s.next() is None


def test_a_time_in_the_past_is_due_at_once() -> None:
    s, _ = make(now=100.0)
    s.schedule("a", -5.0)
    s.next()
    assert s.state("a") is RUNNING


def test_next_drops_every_stale_entry_off_the_top_before_answering() -> None:
    s, _ = make()
    for t in range(5):
        s.schedule(t, float(t))
    for t in range(4):
        s.cancel(t)
    s.schedule("later", 100.0)
    assert s.stats().heap == 6
    assert s.next() == Wait(4.0)
    assert s.snapshot().heap == {TimerEntry(4.0, 0, 5, 4, 1), TimerEntry(100.0, 0, 6, "later", 1)}
    assert s.stats().heap == 2 and s.stats().live == 2
    assert s.stats().rebuilds == 0


def test_time_never_goes_back_when_the_clock_does() -> None:
    s, clock = make(now=5.0)
    s.schedule("a", 5.0)
    s.schedule("b", 8.0)
    assert claim(s).task_id == "a"
    clock.now = 1.0  # the clock jumps back
    assert s.next() == Wait(3.0)  # measured from 5, not from 1
    assert s.snapshot().now == 5.0
    assert s.now == 5.0
    clock.now = 8.0
    assert claim(s).task_id == "b"
    clock.now = float("nan")  # a clock that misbehaves further changes nothing
    assert s.next() is None and s.now == 8.0


def test_due_entries_stay_due_when_the_clock_goes_back() -> None:
    s, clock = make(now=10.0)
    s.schedule("a", 9.0)
    s.schedule("b", 10.0)
    assert claim(s).task_id == "a"
    clock.now = 0.0
    assert claim(s).task_id == "b"


def test_snapshot_reads_the_clock_as_next_does() -> None:
    s, clock = make()
    assert s.snapshot().now == 0
    clock.now = 3.0
    assert s.snapshot().now == 3.0
    clock.now = 2.0
    assert s.snapshot().now == 3.0


@pytest.mark.parametrize("reading", [
    math.inf, -math.inf, math.nan, Decimal("7"), 10**400, -(10**400), True, "7", None, 7j,
], ids=["inf", "-inf", "nan", "Decimal", "int too large", "-int too large", "bool", "str",
        "None", "complex"])
def test_a_clock_reading_that_is_no_time_is_ignored_as_nan_is(reading: Any) -> None:
    s, clock = make(now=5.0)
    s.schedule("a", 6.0)
    assert s.snapshot().now == 5.0
    clock.now = reading
    assert s.next() == Wait(1.0)
    assert s.snapshot().now == 5.0 and s.now == 5.0
    s.check_invariants()
    clock.now = 6
    assert claim(s).task_id == "a" and s.now == 6
    s.check_invariants()


def test_a_real_clock_reading_is_taken_as_a_float() -> None:
    s, clock = make()
    s.schedule("a", 7.0)
    clock.now = Fraction(13, 2)  # type: ignore[assignment]
    assert s.next() == Wait(0.5)
    assert s.now == 6.5 and type(s.now) is float
    s.check_invariants()


class Interrupted(BaseException):
    """Neither an Exception nor KeyboardInterrupt: what a clock may still raise."""


class FloatRaises:
    """A real number (by registration) whose conversion to float raises."""

    def __float__(self) -> float:
        raise Interrupted("__float__")


numbers.Real.register(FloatRaises)


class RaisingClock:
    """A clock that reads ``now``, or raises ``error`` when it is set."""

    def __init__(self, now: float) -> None:
        self.now: Any = now
        self.error: BaseException | None = None

    def __call__(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.now


@pytest.mark.parametrize("error", [RuntimeError("clock"), KeyboardInterrupt(), Interrupted()],
                         ids=lambda e: type(e).__name__)
def test_a_clock_that_raises_changes_nothing(error: BaseException) -> None:
    clock = RaisingClock(5.0)
    s = TimerScheduler(clock)
    s.schedule("a", 1.0)
    s.schedule("b", 9.0)
    before, stats = s.snapshot(), s.stats()
    clock.error = error
    for call in (s.next, s.snapshot):
        with pytest.raises(type(error)):
            call()
    clock.error = None
    clock.now = FloatRaises()  # the reading raises once the clock has returned
    for call in (s.next, s.snapshot):
        with pytest.raises(Interrupted):
            call()
    clock.now = 5.0
    assert s.snapshot() == before and s.stats() == stats
    s.check_invariants()
    assert claim(s).task_id == "a"  # the lock was not left held


# ---------------------------------------------------------------------- garbage


def test_compaction_happens_exactly_when_stale_entries_pass_half_a_heap_above_the_floor() -> None:
    s, _ = make(floor=4)
    for t in range(4):
        s.schedule(t, 10.0 + t)
    # 4 live; superseding adds one entry and one stale each time.
    s.schedule(0, 20.0)  # heap 5, stale 1
    s.schedule(1, 20.0)  # heap 6, stale 2
    s.schedule(2, 20.0)  # heap 7, stale 3
    assert s.stats().rebuilds == 0 and s.stats().heap == 7
    s.schedule(3, 20.0)  # heap 8, stale 4: 2 * 4 > 8 is false
    assert s.stats().rebuilds == 0 and s.stats().heap == 8
    s.cancel(0)  # heap 8, stale 5: rebuilt from the 3 live entries
    assert s.stats().rebuilds == 1
    assert s.snapshot().heap == {TimerEntry(20.0, 0, 6, 1, 2), TimerEntry(20.0, 0, 7, 2, 2),
                                 TimerEntry(20.0, 0, 8, 3, 2)}
    s.check_invariants()


def test_no_compaction_at_or_below_the_floor_however_stale() -> None:
    s, _ = make(floor=4)
    for _ in range(4):
        s.schedule("a", 1.0)
    assert s.stats().heap == 4 and s.stats().live == 1 and s.stats().rebuilds == 0
    s.schedule("a", 1.0)  # heap 5 > 4 and 2 * 4 > 5
    assert s.stats().heap == 1 and s.stats().rebuilds == 1


def test_a_new_id_pushing_the_heap_over_the_floor_compacts_it() -> None:
    s, _ = make(floor=4)
    for t in range(4):
        s.schedule(t, 1.0)
        s.cancel(t)
    assert s.stats().heap == 4 and s.stats().rebuilds == 0
    s.schedule("new", 1.0)
    assert s.snapshot().heap == {TimerEntry(1.0, 0, 5, "new", 1)}
    assert s.stats().rebuilds == 1


def test_a_claim_can_compact() -> None:
    s, clock = make(floor=2)
    s.schedule("x", 1.0)
    s.schedule("y", 5.0)
    s.schedule("z", 5.0)
    s.schedule("y", 6.0)  # heap 4, stale 1
    assert s.stats().rebuilds == 0
    clock.now = 1.0
    claim(s)  # heap 3, stale 1: no
    assert s.stats().rebuilds == 0
    s.schedule("w", 7.0)  # heap 4, stale 1
    s.schedule("z", 8.0)  # heap 5, stale 2
    clock.now = 7.0
    assert claim(s).task_id == "y"  # the stale y on top dropped, y claimed: heap 3, stale 1
    assert claim(s).task_id == "w"  # heap 2 <= floor
    assert s.stats().rebuilds == 0
    s2, clock2 = make(floor=2)
    for t in "abc":
        s2.schedule(t, 1.0)
    s2.schedule("d", 9.0)
    s2.cancel("d")
    s2.schedule("e", 9.5)
    s2.cancel("e")  # heap 5, stale 2
    clock2.now = 1.0
    claim(s2)  # heap 4, stale 2: no
    assert s2.stats().rebuilds == 0
    claim(s2)  # heap 3, stale 2: 2 * 2 > 3, rebuilt
    assert s2.stats().rebuilds == 1
    assert s2.snapshot().heap == {TimerEntry(1.0, 0, 3, "c", 1)}


def test_random_reschedule_and_cancel_mixes_keep_the_heap_bounded_and_equal_to_the_reference(
) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    for floor in (0, 3, 16):
        rng = random.Random(seed + floor)
        clock = FakeClock()
        s = TimerScheduler(clock, rebuild_floor=floor)
        ref = Ref(floor)
        ids = list(range(40))
        for step in range(3000):
            op = rng.random()
            t = rng.choice(ids)
            where = f"seed={seed} floor={floor} step={step}"
            if op < 0.45:
                if t in ref.tasks and ref.tasks[t].state is RUNNING:
                    with pytest.raises(TaskRunningError):
                        s.schedule(t, 1.0)
                else:
                    r = rng.choice([rng.randrange(50), rng.uniform(0, 50)])
                    p = rng.randrange(-2, 3)
                    assert s.schedule(t, r, p) == ref.schedule(t, r, p), where
            elif op < 0.7:
                if t in ref.tasks:
                    assert s.cancel(t) == ref.cancel(t), where
            elif op < 0.8:
                clock.now += rng.choice([-3.0, 0.5, 2.0])
            elif op < 0.92:
                got = s.next()
                want = ref.next(clock.now)
                if isinstance(want, tuple):
                    assert isinstance(got, Due) and (got.task_id, got.version) == want, where
                elif want is None:
                    assert got is None, where
                else:
                    assert got == Wait(want), where
            else:
                running = [x for x, v in ref.tasks.items() if v.state is RUNNING]
                if running:
                    x = rng.choice(running)
                    v = ref.tasks[x].version
                    if rng.random() < 0.5:
                        assert s.complete(x, v) is COMPLETED
                        ref.end(x, COMPLETED)
                    else:
                        assert s.fail(x, v, "boom") is FAILED
                        ref.end(x, FAILED)
            snap = s.snapshot()
            ref.tick(clock.now)
            assert snap == ref.snapshot(), where
            live = sum(1 for v in snap.tasks.values() if v.state is PENDING)
            assert len(snap.heap) <= 2 * live + floor, where
            assert s.stats().rebuilds == ref.rebuilds, where
            s.check_invariants()


def test_long_reschedule_storm_stays_bounded_and_rebuilds_amortise() -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    s, _ = make(floor=64)
    n = 100_000
    for i in range(n):
        t = rng.randrange(100)
        if rng.random() < 0.3 and s.stats().live:
            with contextlib.suppress(UnknownTaskError):
                s.cancel(t)
        else:
            s.schedule(t, rng.uniform(0, 1000))
        if i % 1000 == 0:
            stats = s.stats()
            assert stats.heap <= 2 * stats.live + 64, f"seed={seed} i={i}"
    stats = s.stats()
    assert stats.heap <= 2 * stats.live + 64
    # Each rebuild removes more than half of at least 65 entries, each removed once.
    assert stats.rebuilds <= n // 32
    s.check_invariants()


# ---------------------------------------------------------------------- close


def test_close_cancels_pending_versions_in_seq_order_and_reports_the_running() -> None:
    s, clock = make()
    s.schedule("b", 5.0)
    s.schedule("a", 1.0)
    s.schedule("run", 0.0)
    s.schedule("done", 0.0)
    s.schedule("b", 6.0)  # b's version now has a later seq than a's
    claim(s)
    s.complete("done", claim(s).version)
    report = s.close()
    assert report == TimerCloseReport(cancelled=("a", "b"), running=("run",))
    snap = s.snapshot()
    assert snap.closed and snap.heap == frozenset()
    assert {t: v.state for t, v in snap.tasks.items()} == {
        "a": CANCELLED, "b": CANCELLED, "run": RUNNING, "done": COMPLETED}
    assert s.stats().cancelled == 2
    clock.now = 100.0
    assert s.next() is None
    # A running version still reports after close.
    assert s.complete("run", 1) is COMPLETED
    second = s.close()
    assert second == TimerCloseReport((), ())
    s.check_invariants()


def test_schedule_after_close_is_refused_and_a_second_close_changes_nothing() -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule("a", 1.0)
    s.close()
    before = s.snapshot()
    with pytest.raises(SchedulerClosedError, match=r"schedule\('b', 1\.0\): the scheduler is "
                                                   "closed"):
        s.schedule("b", 1.0)
    with pytest.raises(SchedulerClosedError):
        s.schedule("a", 1.0)
    assert s.close() == TimerCloseReport()
    assert s.snapshot() == before
    assert [a for a, _ in rec.actions()] == ["Schedule", "Close"]
    assert s.closed


# ---------------------------------------------------------------------- callbacks


def test_complete_and_fail_end_a_running_version_with_its_outcome() -> None:
    s, _ = make()
    s.schedule("a", 0.0)
    s.schedule("b", 0.0)
    assert s.complete("a", claim(s).version, result=42) is COMPLETED
    error = ValueError("no")
    assert s.fail("b", claim(s).version, error) is FAILED
    assert s.outcome("a") == 42 and s.outcome("b") is error
    stats = s.stats()
    assert (stats.claimed, stats.completed, stats.failed, stats.running) == (2, 1, 1, 0)


def test_stale_callback_raises_and_changes_nothing() -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule("a", 0.0)
    old = claim(s)
    s.complete("a", old.version)
    s.schedule("a", 5.0)
    before = s.snapshot()
    for call in (s.complete, s.fail):
        with pytest.raises(StaleGenerationError) as info:
            call("a", 1)
        err = info.value
        assert (err.task_id, err.generation, err.current) == ("a", 1, 2)
        assert f"{call.__name__}('a', 1): version 1 is stale, current is 2" in str(err)
    with pytest.raises(StaleGenerationError):
        s.complete("a", 7)  # never made: not the current one either
    assert s.snapshot() == before
    stale = [(a, p) for a, p in rec.actions() if a == "StaleCallback"]
    assert stale == [("StaleCallback", {"t": "a", "v": 1})] * 2 + [
        ("StaleCallback", {"t": "a", "v": 7})]


def test_repeated_callback_returns_the_terminal_state_and_changes_nothing() -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule("a", 0.0)
    s.schedule("c", 9.0)
    s.complete("a", claim(s).version, "first")
    s.cancel("c")
    before = s.snapshot()
    assert s.fail("a", 1, "late") is COMPLETED
    assert s.complete("a", 1, "again") is COMPLETED
    assert s.complete("c", 1) is CANCELLED
    assert s.outcome("a") == "first"
    assert s.snapshot() == before
    assert rec.actions()[-3:] == [("RepeatedCallback", {"t": "a"}),
                                  ("RepeatedCallback", {"t": "a"}),
                                  ("RepeatedCallback", {"t": "c"})]


def test_callback_on_a_pending_version_is_an_invalid_transition() -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule("a", 5.0)
    before = s.snapshot()
    for call in (s.complete, s.fail):
        with pytest.raises(InvalidTransitionError, match="version 1 is pending, not running"):
            call("a", 1)
    assert s.snapshot() == before
    assert len(rec.steps) == 1


def test_callback_on_an_unknown_id_or_with_a_bad_version_is_refused() -> None:
    s, _ = make()
    s.schedule("a", 0.0)
    claim(s)
    before = s.snapshot()
    with pytest.raises(UnknownTaskError):
        s.complete("nope", 1)
    with pytest.raises(InvalidArgumentError, match="unhashable"):
        s.fail({}, 1)  # type: ignore[arg-type]
    for bad in ("1", 1.0, True, None):
        with pytest.raises(InvalidArgumentError, match="version must be an int"):
            s.complete("a", bad)  # type: ignore[arg-type]
    assert s.snapshot() == before


# ---------------------------------------------------------------------- bad input


def _noop() -> None:
    return None


BAD_SCHEDULES: list[tuple[str, Callable[[TimerScheduler], object], str]] = [
    ("unhashable id", lambda s: s.schedule(["a"], 1.0), "unhashable"),  # type: ignore[arg-type]
    ("unhashable id first", lambda s: s.schedule(["a"], "x"), "unhashable"),  # type: ignore[arg-type]
    ("str time", lambda s: s.schedule("a", "1"), "finite real"),  # type: ignore[arg-type]
    ("None time", lambda s: s.schedule("a", None), "finite real"),  # type: ignore[arg-type]
    ("bool time", lambda s: s.schedule("a", True), "finite real"),
    ("nan time", lambda s: s.schedule("a", math.nan), "finite real"),
    ("inf time", lambda s: s.schedule("a", math.inf), "finite real"),
    ("-inf time", lambda s: s.schedule("a", -math.inf), "finite real"),
    ("complex time", lambda s: s.schedule("a", 1j), "finite real"),  # type: ignore[arg-type]
    # An int no float can hold: Wait(run_at - now) could not be computed.
    ("huge int time", lambda s: s.schedule("a", 10**400), "finite real"),
    ("huge negative int time", lambda s: s.schedule("a", -(10**400)), "finite real"),
    ("float priority", lambda s: s.schedule("a", 1.0, 1.0), "priority"),  # type: ignore[arg-type]
    ("bool priority", lambda s: s.schedule("a", 1.0, True), "priority"),
    ("str priority", lambda s: s.schedule("a", 1.0, "1"), "priority"),  # type: ignore[arg-type]
    ("fn not callable", lambda s: s.schedule("a", 1.0, 0, 42), "callable"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("case", "call", "message"), BAD_SCHEDULES,
                         ids=[c for c, _, _ in BAD_SCHEDULES])
def test_bad_schedule_input_is_an_invalid_argument_and_changes_nothing(
        case: str, call: Callable[[TimerScheduler], object], message: str) -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule("a", 5.0, fn=_noop)  # a pending version the refused call would supersede
    s.schedule("other", 0.0)
    claim(s)
    before = s.snapshot()
    steps = len(rec.steps)
    with pytest.raises(InvalidArgumentError, match=message):
        call(s)
    assert s.snapshot() == before
    assert len(rec.steps) == steps
    s.check_invariants()


def test_bad_input_is_refused_before_the_closed_or_running_checks() -> None:
    s, _ = make()
    s.schedule("a", 0.0)
    claim(s)
    with pytest.raises(InvalidArgumentError):
        s.schedule("a", math.nan)  # running, but the argument is checked first
    s.close()
    with pytest.raises(InvalidArgumentError):
        s.schedule("b", 1.0, fn=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"clock": 5}, {"rebuild_floor": -1}, {"rebuild_floor": 1.5},
                                    {"rebuild_floor": True}, {"recorder": object()}],
                         ids=lambda kwargs: ",".join(f"{k}={type(v).__name__}:{v}"
                                                     if type(v) is not object else f"{k}=object"
                                                     for k, v in kwargs.items()))
def test_bad_constructor_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        TimerScheduler(**kwargs)


def test_queries_refuse_unknown_and_unhashable_ids() -> None:
    s, _ = make()
    for query in (s.state, s.version, s.view, s.outcome):
        with pytest.raises(UnknownTaskError):
            query("x")
        with pytest.raises(InvalidArgumentError):
            query([])  # type: ignore[arg-type]


def test_errors_are_instances_of_the_builtins_callers_catch() -> None:
    s, _ = make()
    with pytest.raises(ValueError):
        s.schedule("a", math.nan)
    with pytest.raises(KeyError):
        s.cancel("x")
    s.schedule("a", 0.0)
    claim(s)
    with pytest.raises(RuntimeError):
        s.schedule("a", 1.0)
    s.close()
    with pytest.raises(RuntimeError):
        s.schedule("b", 1.0)


# ---------------------------------------------------------------------- recorder


def test_recorder_receives_every_step_in_order_with_the_state_after_it() -> None:
    rec = ListRecorder()
    s, clock = make(recorder=rec)
    s.schedule("a", 1.0, 2)
    s.schedule("b", 3.0)
    s.schedule("a", 2.0)
    s.next()  # Idle: Wait
    clock.now = 2.0
    s.next()  # Claim a (drops a's stale entry)
    s.cancel("a")  # a request
    s.cancel("b")
    s.next()  # Idle: None
    s.complete("a", 2)
    s.complete("a", 2)  # RepeatedCallback
    with pytest.raises(StaleGenerationError):
        s.fail("a", 1)
    s.close()
    assert rec.actions() == [
        ("Schedule", {"t": "a", "r": 1.0, "p": 2}),
        ("Schedule", {"t": "b", "r": 3.0, "p": 0}),
        ("Schedule", {"t": "a", "r": 2.0, "p": 0}),
        ("Idle", {}),
        ("Claim", {}),
        ("Cancel", {"t": "a"}),
        ("Cancel", {"t": "b"}),
        ("Idle", {}),
        ("Complete", {"t": "a", "v": 2}),
        ("RepeatedCallback", {"t": "a"}),
        ("StaleCallback", {"t": "a", "v": 1}),
        ("Close", {}),
    ]
    states = [state for _, _, state in rec.steps]
    assert states[3].now == 0 and states[4].now == 2.0
    assert states[4].tasks["a"].state is RUNNING
    assert states[4].heap == {TimerEntry(3.0, 0, 2, "b", 1)}
    assert states[-1] == s.snapshot()
    assert set(a for a, _ in rec.actions()) <= set(timer_module.ACTIONS)


def test_fail_is_recorded_with_its_version() -> None:
    rec = ListRecorder()
    s, _ = make(recorder=rec)
    s.schedule(7, 0.0)
    s.fail(7, claim(s).version)
    assert rec.actions()[-1] == ("Fail", {"t": 7, "v": 1})


# ---------------------------------------------------------------------- invariants


def test_invariant_names_are_the_documented_ones_and_each_has_its_check() -> None:
    assert timer_module.INVARIANTS == ("TypeOK", "HeapHoldsLiveVersions",
                                       "AtMostOneClaimPerVersion", "HeapGarbageBounded",
                                       "CancelRequestOnlyWhileRunning")
    for name in timer_module.INVARIANTS:
        snake = "type_ok" if name == "TypeOK" else "".join(
            "_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
        assert callable(getattr(timer_module._Checker, snake)), snake


def _busy_scheduler() -> TimerScheduler:
    s, _ = make(floor=2)
    s.schedule("p", 5.0)
    s.schedule("r", 0.0)
    s.schedule("c", 0.0)
    s.schedule("x", 6.0)
    s.cancel("x")
    claim(s)
    s.complete("c", claim(s).version)
    s.check_invariants()
    return s


def _slot(s: TimerScheduler, task_id: Hashable) -> int:
    return s._tasks[task_id][5]


def _with_version(s: TimerScheduler, task_id: Hashable, version: Any) -> None:
    """Give task_id's current entry another version (a new tuple: it is in the heap no more)."""
    entry = s._tasks[task_id]
    s._tasks[task_id] = (*entry[:4], version, entry[5])


def _drop_entries_of(s: TimerScheduler, task_id: Hashable) -> None:
    s._heap[:] = [e for e in s._heap if e[3] != task_id]
    s._sorted[:] = [e for e in s._sorted if e[3] != task_id]


def _corrupt_type(s: TimerScheduler) -> None:
    _with_version(s, "p", "one")


def _corrupt_heap_missing_entry(s: TimerScheduler) -> None:
    _drop_entries_of(s, "p")


def _corrupt_claims(s: TimerScheduler) -> None:
    s._marks[_slot(s, "r")] += timer_module._CLAIM  # a second claim of r's version


def _corrupt_garbage(s: TimerScheduler) -> None:
    # Well-formed stale entries of old versions of x, more than the bound allows.
    _drop_entries_of(s, "x")
    _with_version(s, "x", 20)
    slot = _slot(s, "x")
    s._heap.extend((100.0 + i, 0, 1000 + i, "x", 1 + i, slot) for i in range(10))
    s._n_superseded += 2000 - s._next_seq  # the versions those seqs made, counted
    s._next_seq = 2000
    s._stale = len(s._heap) + len(s._sorted) - 1  # p's entry is the one live


def _corrupt_cancel_request(s: TimerScheduler) -> None:
    s._marks[_slot(s, "p")] |= timer_module._CANCEL_REQUESTED


@pytest.mark.parametrize(("corrupt", "invariant"), [
    (_corrupt_type, "TypeOK"),
    (_corrupt_heap_missing_entry, "HeapHoldsLiveVersions"),
    (_corrupt_claims, "AtMostOneClaimPerVersion"),
    (_corrupt_garbage, "HeapGarbageBounded"),
    (_corrupt_cancel_request, "CancelRequestOnlyWhileRunning"),
], ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_check_invariants_catches_a_corrupted_state_and_names_the_invariant(
        corrupt: Callable[[TimerScheduler], None], invariant: str) -> None:
    s = _busy_scheduler()
    corrupt(s)
    with pytest.raises(InvariantViolation) as info:
        s.check_invariants()
    assert info.value.invariant == invariant
    assert str(info.value).startswith(f"{invariant} violated")


def test_check_invariants_catches_a_wrong_stale_count() -> None:
    s = _busy_scheduler()
    s._stale += 1
    with pytest.raises(InvariantViolation) as info:
        s.check_invariants()
    assert info.value.invariant == "HeapHoldsLiveVersions"


def test_check_invariants_catches_a_heap_out_of_order() -> None:
    s, _ = make()
    for t in range(3):
        s.schedule(t, float(t))
    s._heap.reverse()
    with pytest.raises(InvariantViolation) as info:
        s.check_invariants()
    assert info.value.invariant == "TypeOK"


def test_check_invariants_catches_a_sorted_run_out_of_order() -> None:
    s, _ = make()
    for t in range(timer_module._MERGE_MIN + 8):
        s.schedule(t, 1.0 + t)
    assert s.next() == Wait(1.0)  # first sorts the heap into the sorted run
    assert not s._heap and len(s._sorted) == timer_module._MERGE_MIN + 8
    s.check_invariants()
    s._sorted.reverse()
    with pytest.raises(InvariantViolation) as info:
        s.check_invariants()
    assert info.value.invariant == "TypeOK"
    assert "sorted run out of order" in str(info.value)


def test_check_invariants_catches_a_copy_of_a_live_entry() -> None:
    s, _ = make()
    s.schedule("a", 1.0)
    s._heap[0] = tuple(list(s._heap[0]))  # equal, but not the entry next() tells live by
    with pytest.raises(InvariantViolation) as info:
        s.check_invariants()
    assert info.value.invariant == "TypeOK"


def test_check_invariants_catches_a_claimed_version_left_in_the_heap() -> None:
    s, _ = make()
    s.schedule("a", 0.0)
    entry = s._heap[0]
    claim(s)
    s._heap.append(entry)
    s._stale += 1
    with pytest.raises(InvariantViolation) as info:
        s.check_invariants()
    assert info.value.invariant == "HeapHoldsLiveVersions"


# ---------------------------------------------------------------------- stats


def test_stats_count_what_happened() -> None:
    s, _ = make(floor=0)
    s.schedule("a", 0.0)
    s.schedule("b", 0.0)
    s.schedule("b", 0.0)  # supersedes b: heap 3 > 0, stale 1: no rebuild (2 > 3 is false)
    s.schedule("c", 5.0)
    s.cancel("c")  # heap 4, stale 2: no
    assert s.stats().rebuilds == 0
    s.complete("a", claim(s).version)  # heap 3, stale 2: rebuilt
    stats = s.stats()
    assert stats.rebuilds == 1
    s.next()
    stats = s.stats()
    assert (stats.live, stats.heap, stats.running, stats.scheduled, stats.claimed,
            stats.completed, stats.failed, stats.cancelled) == (0, 0, 1, 4, 2, 1, 0, 1)
    s.close()
    assert s.stats().running == 1


# ---------------------------------------------------------------------- threads


def test_concurrent_callers_never_claim_a_version_twice_and_keep_the_invariants() -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    s, clock = make(floor=8)
    claimed: list[tuple[Hashable, int]] = []
    claimed_lock = threading.Lock()
    errors: list[BaseException] = []

    def caller(k: int) -> None:
        rng = random.Random(seed + k)
        try:
            for _ in range(3000):
                t = rng.randrange(30)
                op = rng.random()
                if op < 0.4:
                    with contextlib.suppress(TaskRunningError):
                        s.schedule(t, rng.uniform(0, 5), rng.randrange(3))
                elif op < 0.55:
                    with contextlib.suppress(UnknownTaskError):
                        s.cancel(t)
                else:
                    got = s.next()
                    if isinstance(got, Due):
                        with claimed_lock:
                            claimed.append((got.task_id, got.version))
                        with contextlib.suppress(StaleGenerationError):
                            (s.complete if rng.random() < 0.7 else s.fail)(
                                got.task_id, got.version)
        except BaseException as exc:  # reported below, with the seed
            errors.append(exc)

    clock.now = 2.5
    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, f"seed={seed}: {errors[0]!r}"
    assert len(claimed) == len(set(claimed)), f"seed={seed}"
    s.check_invariants()
    stats = s.stats()
    assert stats.claimed == len(claimed) == stats.completed + stats.failed + stats.running
    assert stats.heap <= 2 * stats.live + 8
