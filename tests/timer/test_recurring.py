"""Tests of ``TimerRunner.recurring``: a schedule's slots decided once each, on the runner's clock.

The clock the tests inject flows with real time and can jump (``Clock.jump``), which stands for
a process that stood still or a clock stepped forward. Slots are tens of milliseconds apart;
every wait is for a condition, with a generous timeout, so a bug fails a test rather than hangs
it. Nothing here asserts on speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from refsched import InvalidArgumentError, SchedulerClosedError, TimerRunner, UnknownTaskError
from refsched.schedule import slot_task_id
from refsched.timer.runner import RecurringView
from tests.user_code_support import BASE_EXCEPTIONS

SOON = 10.0  # seconds: a generous bound for what must happen shortly
TICK = 0.03  # seconds between two slots of the fast schedules


class Clock:
    """Real time plus an offset a test may move forward (or back)."""

    def __init__(self) -> None:
        self.offset = 1000.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def jump(self, seconds: float) -> None:
        self.offset += seconds


def wait_until(condition: Callable[[], bool], timeout: float = SOON) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def view(runner: TimerRunner, name: str = "s") -> RecurringView:
    return runner.schedules()[name]


def decisions(runner: TimerRunner, name: str = "s") -> list[str]:
    return [d for _, d in view(runner, name).decisions]


class Gate:
    """A function that blocks until opened, counting how many of its calls run at once."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def __call__(self) -> None:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        try:
            assert self.open.wait(SOON)
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def runner(clock: Clock) -> Any:
    with TimerRunner(max_workers=4, clock=clock) as r:
        yield r


def test_each_slot_runs_as_a_version_named_after_it(runner: TimerRunner, clock: Clock) -> None:
    seen: list[tuple[int, str]] = []
    start = clock() + TICK
    runner.recurring("s", lambda x, y: seen.append((x, y)), args=(1,), kwargs={"y": "k"},
                     every=TICK, start=start)
    wait_until(lambda: len(seen) >= 3)
    v = view(runner)
    slots = [slot for slot, _ in v.decisions[:3]]
    assert slots == [start + k * TICK for k in range(3)]
    assert [d for _, d in v.decisions[:3]] == ["run"] * 3
    assert seen[:3] == [(1, "k")] * 3
    assert v.runs[0].task_id == slot_task_id("s", start)
    assert v.runs[0].result(SOON) is None


def test_skip_skips_slots_while_a_run_is_unfinished(runner: TimerRunner) -> None:
    gate = Gate()
    runner.recurring("s", gate, every=TICK, overlap="skip")
    wait_until(lambda: decisions(runner).count("skipped") >= 3)
    assert gate.calls == 1 and len(view(runner).unfinished) == 1
    gate.open.set()
    wait_until(lambda: gate.calls >= 3)
    assert gate.most == 1
    assert decisions(runner)[0] == "run"


def test_buffer_one_holds_one_slot_and_runs_it_when_the_run_ends(runner: TimerRunner) -> None:
    gate = Gate()
    runner.recurring("s", gate, every=TICK, overlap="buffer_one")
    wait_until(lambda: decisions(runner).count("skipped") >= 2)
    v = view(runner)
    assert v.held is not None and gate.calls == 1
    assert v.held not in [slot for slot, _ in v.decisions]  # held: not decided yet
    held = v.held
    gate.open.set()
    wait_until(lambda: any(slot == held and d == "run" for slot, d in view(runner).decisions))
    assert gate.most == 1
    # The held slot ran as its own version, after the first run and before any later slot.
    tasks = [f.task_id for f in view(runner).runs]
    assert tasks[1] == slot_task_id("s", held)


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_slots_owed_at_once_start_one_run_at_a_time(runner: TimerRunner, clock: Clock,
                                                    overlap: str) -> None:
    gate = Gate()
    runner.recurring("s", gate, every=TICK, overlap=overlap, start=clock() - 30 * TICK)
    wait_until(lambda: len(view(runner).decisions) >= 30)
    time.sleep(3 * TICK)
    assert gate.calls == 1 and len(view(runner).unfinished) == 1
    assert decisions(runner)[0] == "run" and set(decisions(runner)[1:]) == {"skipped"}
    assert (view(runner).held is not None) == (overlap == "buffer_one")
    gate.open.set()
    wait_until(lambda: gate.calls >= 3)
    assert gate.most == 1


def test_a_held_slot_runs_as_soon_as_the_run_before_it_ends(runner: TimerRunner,
                                                             clock: Clock) -> None:
    every = 0.5
    started: list[float] = []
    gate = Gate()

    def fn() -> None:
        started.append(clock())
        if len(started) == 1:
            gate()

    runner.recurring("s", fn, every=every, overlap="buffer_one")
    wait_until(lambda: view(runner).held is not None)
    held = view(runner).held
    assert held is not None
    gate.open.set()
    wait_until(lambda: len(started) == 2)
    # Released when the first run ended, not at the next slot's time.
    assert started[1] < held + every
    assert view(runner).decisions[-1] == (held, "run")


def test_allow_lets_runs_overlap(runner: TimerRunner) -> None:
    gate = Gate()
    runner.recurring("s", gate, every=TICK, overlap="allow")
    wait_until(lambda: gate.most >= 3)
    assert "skipped" not in decisions(runner)
    gate.open.set()


def test_after_a_clock_jump_old_slots_are_missed_and_recent_ones_decided_by_policy(
        runner: TimerRunner, clock: Clock) -> None:
    gate = Gate()
    runner.recurring("s", gate, every=0.01, catchup=0.5, overlap="skip")
    wait_until(lambda: gate.calls == 1)
    gate.open.set()
    wait_until(lambda: gate.calls >= 2)
    gate.open.clear()
    before = time.monotonic()
    clock.jump(60.0)  # 6000 slots owed: too many to list
    wait_until(lambda: view(runner).unlisted > 0)
    v = view(runner)
    jumped = clock.offset
    recent = [(slot, d) for slot, d in v.decisions if slot > before + jumped - 0.6]
    # Every slot more than 0.5 s late is missed; the others by the policy: one run at most.
    assert all(d == "missed" for slot, d in v.decisions if slot < before + jumped - 0.6)
    assert v.unlisted >= 4000
    assert [d for _, d in recent].count("run") <= 1
    assert len(v.decisions) <= 100  # the history is bounded
    gate.open.set()


def test_a_clock_that_goes_back_decides_no_slot_twice(runner: TimerRunner,
                                                      clock: Clock) -> None:
    runner.recurring("s", lambda: None, every=TICK)
    wait_until(lambda: len(view(runner).decisions) >= 2)
    clock.jump(-1.0)
    time.sleep(5 * TICK)
    clock.jump(1.0)
    wait_until(lambda: len(view(runner).decisions) >= 6)
    slots = [slot for slot, _ in view(runner).decisions]
    assert slots == sorted(set(slots))


def test_pause_skips_slots_until_resume(runner: TimerRunner) -> None:
    calls: list[float] = []
    runner.recurring("s", lambda: calls.append(1.0), every=TICK)
    wait_until(lambda: len(calls) >= 1)
    runner.pause("s")
    assert view(runner).paused
    wait_until(lambda: decisions(runner)[-3:] == ["skipped"] * 3)
    during = len(calls)
    time.sleep(3 * TICK)
    assert len(calls) == during
    runner.resume("s")
    wait_until(lambda: len(calls) >= during + 2)
    assert not view(runner).paused


def test_unschedule_stops_the_schedule_and_frees_its_name(runner: TimerRunner) -> None:
    calls: list[int] = []
    runner.recurring("s", lambda: calls.append(1), every=TICK)
    wait_until(lambda: len(calls) >= 1)
    runner.unschedule("s")
    assert "s" not in runner.schedules()
    time.sleep(2 * TICK)  # a decision already made may still run
    settled = len(calls)
    time.sleep(5 * TICK)
    assert len(calls) == settled
    runner.recurring("s", lambda: calls.append(2), every=TICK)
    wait_until(lambda: 2 in calls)


@pytest.mark.parametrize("call", ["unschedule", "pause", "resume"])
def test_an_unknown_name_is_an_unknown_task_error(runner: TimerRunner, call: str) -> None:
    with pytest.raises(UnknownTaskError, match="no schedule"):
        getattr(runner, call)("nope")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": ""}, "non-empty str"),
    ({"name": 3}, "non-empty str"),
    ({"fn": 3}, "callable"),
    ({"args": "ab"}, "args="),
    ({"kwargs": {1: 2}}, "kwargs="),
    ({"priority": 1.5}, "priority="),
    ({"every": None}, "exactly one of every and cron"),
    ({"every": 0}, "every=0"),
    ({"overlap": "queue"}, "overlap="),
    ({"catchup": -1}, "catchup="),
    ({"every": None, "cron": "* * * * *"}, "needs a clock of UTC seconds"),
    ({"timezone": "Nowhere/Land"}, "no such IANA time zone"),
    ({"start": "later"}, "start="),
])
def test_bad_arguments_are_typed_errors_and_change_nothing(runner: TimerRunner, clock: Clock,
                                                           kwargs: dict[str, Any],
                                                           match: str) -> None:
    runner.recurring("kept", lambda: None, every=3600.0, start=clock() + 3600.0)
    before = runner.schedules()
    call: dict[str, Any] = {"name": "s", "fn": lambda: None, "every": 1.0, **kwargs}
    with pytest.raises(InvalidArgumentError, match=match):
        runner.recurring(call.pop("name"), call.pop("fn"), **call)
    assert runner.schedules() == before


def test_a_name_in_use_is_refused_and_the_schedule_kept(runner: TimerRunner,
                                                        clock: Clock) -> None:
    runner.recurring("s", lambda: None, every=3600.0, start=clock() + 3600.0)
    before = runner.schedules()
    with pytest.raises(InvalidArgumentError, match="exists"):
        runner.recurring("s", lambda: None, every=1.0)
    assert runner.schedules() == before


def test_cron_runs_on_a_wall_clock() -> None:
    with TimerRunner(max_workers=1, clock=time.time) as runner:
        runner.recurring("s", lambda: None, cron="0 0 1 1 *", timezone="Europe/London")
        nxt = view(runner).next
        assert nxt is not None and nxt > time.time()
    with TimerRunner(max_workers=1, clock=lambda: 0.0, wall_clock=True) as runner:
        runner.recurring("s", lambda: None, cron="30 1 * * *", timezone="Europe/London",
                         start=1774742400.0)  # 2026-03-29 00:00 UTC
        assert view(runner).next == 1774746000.0  # 01:30 is skipped: 02:00 BST


def test_recurring_on_a_closed_runner_is_refused(clock: Clock) -> None:
    runner = TimerRunner(max_workers=1, clock=clock)
    runner.close()
    with pytest.raises(SchedulerClosedError):
        runner.recurring("s", lambda: None, every=1.0)


@BASE_EXCEPTIONS
def test_a_run_that_raises_leaves_the_runner_running(runner: TimerRunner,
                                                     raised: type[BaseException]) -> None:
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise raised("from user code")

    runner.recurring("s", fn, every=TICK)
    wait_until(lambda: len(calls) >= 3)
    first = view(runner).runs[0]
    assert isinstance(first.exception(SOON), raised)
    assert view(runner).runs[1].exception(SOON) is None


def test_close_cancels_what_is_pending_and_stops_deciding(clock: Clock) -> None:
    runner = TimerRunner(max_workers=1, clock=clock)
    gate = Gate()
    runner.recurring("s", gate, every=TICK, overlap="allow")
    wait_until(lambda: len(view(runner).unfinished) >= 3)  # one runs, the others wait
    gate.open.set()
    runner.close()
    runs = view(runner).runs
    assert all(f.done() for f in runs)
    count = len(view(runner).decisions)
    time.sleep(3 * TICK)
    assert len(view(runner).decisions) == count


def test_a_clock_that_fails_stops_the_runner_and_fails_what_is_unsettled() -> None:
    failing = threading.Event()
    base = time.monotonic

    def clock() -> float:
        if failing.is_set():
            raise OSError("clock gone")
        return base()

    runner = TimerRunner(max_workers=1, clock=clock)
    gate = Gate()
    runner.recurring("s", gate, every=TICK, overlap="allow")
    wait_until(lambda: len(view(runner).unfinished) >= 2)
    failing.set()
    pending = view(runner).runs[-1]
    gate.open.set()
    with pytest.raises(Exception, match="stopped"):
        pending.result(SOON)
    runner.close()
