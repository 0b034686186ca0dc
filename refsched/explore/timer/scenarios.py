"""The scenarios explored against the production TimerScheduler and TimerRunner.

Each is a factory taking the class under test (a deliberately broken subclass is explored the same
way) and returning a :class:`Scenario`. The runners run on the explorer's virtual clock
(:func:`runtime.clock`): the dispatcher's timed sleep and the scheduler's ``next()`` read the same
time, and a sleep toward an entry ends, when nothing wakes it first, by a timeout that moves the
clock to that entry's time. Every scenario checks the scheduler's ``check_invariants()`` after
every step and says what must hold at its end. ``TIMER_SCENARIOS`` holds them all, built on the
production classes.

Virtual time moves only by a timeout, and the search may let the dispatcher's timeout fire while
other threads could still move (as if they were slow). A property about *when* something happens
is therefore stated against the virtual time read at the step that matters, not assumed.

The thread racing the dispatcher is the scenario's main thread, and the runners are ended by
``close()`` (from main, or from a task's function) rather than by a thread waiting on a future:
with a third thread, or a thread blocked on a future until the last function ran, these
scenarios grow past 20,000 runs within two preemptions, against one to three thousand.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from refsched import sync
from refsched.errors import TaskRunningError
from refsched.explore import runtime
from refsched.explore.context import Context, Scenario, by_name
from refsched.timer.runner import TimerFuture, TimerRunner
from refsched.timer.scheduler import TimerScheduler
from refsched.types import Due, TimerState

__all__ = [
    "TIMER_SCENARIOS",
    "timer_cancel_races_next",
    "timer_close_during_sleep",
    "timer_earlier_while_sleeping",
    "timer_held_slot_runs_when_its_run_ends",
    "timer_next_races_changes",
    "timer_reschedule_races_claim",
]

TimerRunnerClass = type[TimerRunner]
TimerSchedulerClass = type[TimerScheduler]

# Virtual times (seconds on the explorer's clock, which starts at 0).
EARLY = 5.0
LATE = 10.0
FAR = 1000.0
EVERY = 10.0  # a recurring schedule's interval
RUN_LASTS = 15.0  # how long a run that outlasts its interval takes
CLOSE_AT = 25.0  # when main closes a runner with a recurring schedule: its slots are endless


def _runner(ctx: Context, cls: TimerRunnerClass) -> TimerRunner:
    """A one-worker runner on the virtual clock, its scheduler's invariants checked."""
    runner = cls(1, runtime.clock)
    ctx.check("runner.scheduler.check_invariants()", runner.scheduler.check_invariants)
    return runner


def _logs(ran: list[tuple[str, float]], name: str,
          then: Callable[[], object] | None = None) -> Callable[[], str]:
    """A function that notes its name and the virtual time it runs at, calls ``then`` and
    returns its name in capitals."""

    def fn() -> str:
        ran.append((name, runtime.clock()))
        if then is not None:
            then()
        return name.upper()

    return fn


def _names(ran: list[tuple[str, float]]) -> list[str]:
    return [name for name, _ in ran]


def timer_earlier_while_sleeping(cls: TimerRunnerClass = TimerRunner) -> Scenario:
    """The dispatcher sleeps toward late (t=10) while main schedules early (t=5); early's
    function closes the runner."""

    def body(ctx: Context) -> None:
        runner = _runner(ctx, cls)
        ran: list[tuple[str, float]] = []
        late = runner.schedule("late", LATE, _logs(ran, "late"))
        # Closing from inside early's function (which waits for nothing but itself) ends the run
        # once early has run, without a thread waiting on a future: far fewer schedules.
        early = runner.schedule("early", EARLY, _logs(ran, "early", runner.close))
        after = runtime.clock()  # virtual time once the schedule took effect

        def earlier_first_at_its_time() -> None:
            names = _names(ran)
            assert names.count("early") == 1, f"functions run: {ran}"
            assert early.result(timeout=0) == "EARLY", early
            times = dict(ran)
            if after < LATE:  # early was scheduled before late's time came
                assert names == ["early"], f"late ran before early: {ran}"
                assert times["early"] == EARLY, (
                    f"early ran at t={times['early']}, not at its own time t={EARLY}: the "
                    "dispatcher slept on toward late")
                assert late.cancelled(), late  # by the close in early's function
            else:  # late's time came first: early was due at once
                assert EARLY <= times["early"] <= LATE, ran
                assert names in (["early"], ["late", "early"]), ran
                assert late.cancelled() != ("late" in names), (late, ran)
                assert times.get("late", LATE) == LATE, ran

        ctx.at_end("early runs first, at its own time", earlier_first_at_its_time)

    return Scenario("timer_earlier_while_sleeping", body,
                    timer_earlier_while_sleeping.__doc__ or "")


def timer_cancel_races_next(cls: TimerRunnerClass = TimerRunner) -> Scenario:
    """cancel('a') races the dispatcher, which claims a (due at t=1) in next()."""

    def body(ctx: Context) -> None:
        runner = _runner(ctx, cls)
        ran: list[tuple[str, float]] = []
        future = runner.schedule("a", 1.0, _logs(ran, "a"))
        cancelled = runner.cancel("a")
        report = runner.close()

        def ran_or_never_ran() -> None:
            assert future.done(), f"the future is never resolved: {future}"
            assert report.cancelled == () and report.running == (), report
            state = runner.scheduler.state("a")
            if cancelled:  # cancelled while pending: it never runs
                assert not ran, f"cancel() returned True, yet a ran: {ran}"
                assert state is TimerState.CANCELLED, (
                    f"cancel() returned True, yet a was claimed: it is {state.value}")
                assert future.cancelled(), f"cancel() returned True, yet {future}"
            elif ran:  # claimed first: it ran once, at its time
                assert ran == [("a", 1.0)], ran
                assert not future.cancelled(), f"a ran, yet its future is cancelled: {future}"
                assert future.result(timeout=0) == "A" and state is TimerState.COMPLETED, state
            else:  # claimed first, asked to stop before its function started
                assert future.cancelled() and state is TimerState.FAILED, (future, state)

        ctx.at_end("a ran (cancel False) or never runs (cancelled), never both",
                   ran_or_never_ran)

    return Scenario("timer_cancel_races_next", body, timer_cancel_races_next.__doc__ or "")


def timer_close_during_sleep(cls: TimerRunnerClass = TimerRunner) -> Scenario:
    """close() while the dispatcher sleeps toward far (t=1000)."""

    def body(ctx: Context) -> None:
        runner = _runner(ctx, cls)
        ran: list[tuple[str, float]] = []
        future = runner.schedule("far", FAR, _logs(ran, "far"))
        seen: dict[str, float] = {}

        def note_closed() -> None:
            # Between steps: the virtual time once close() has closed the scheduler and let go
            # of the runner lock, so once it has woken every thread it is going to wake. (A
            # timeout may still fire between the Close step and those wake-ups: the time of the
            # Close step itself would not do.) Checks are no steps: this costs no schedules.
            if "closed" not in seen and runner.scheduler.closed and not runner._lock.locked():
                seen["closed"] = runtime.clock()

        ctx.check("note when close() is done with the runner lock", note_closed)
        report = runner.close()  # joins the dispatcher and the worker before it returns
        ended = runtime.clock()

        def closed_at_once() -> None:
            assert report.running == (), report
            at = seen["closed"]
            if at < FAR:  # closed before far's time came: nothing needs to wait for it
                assert ended < FAR, (
                    f"close() was done at t={at} but returned at t={ended}: it waited for the "
                    "dispatcher to wake up at far's time")
            assert ended == at, f"time passed after close() was done: {at} -> {ended}"
            if report.cancelled:  # far was still pending
                assert report.cancelled == ("far",), report
                assert future.cancelled() and not ran, (future, ran)
            else:  # far's time came before the close
                assert ran == [("far", FAR)] and future.result(timeout=0) == "FAR", ran

        ctx.at_end("close() needs no time to pass; far is cancelled or ran at its time",
                   closed_at_once)

    return Scenario("timer_close_during_sleep", body, timer_close_during_sleep.__doc__ or "")


def timer_reschedule_races_claim(cls: TimerRunnerClass = TimerRunner) -> Scenario:
    """schedule('a') again (version 2, t=2) races the dispatcher's claim of version 1 (t=1);
    version 2's function closes the runner."""

    def body(ctx: Context) -> None:
        runner = _runner(ctx, cls)
        ran: list[tuple[str, float]] = []
        first = runner.schedule("a", 1.0, _logs(ran, "v1"))
        second: TimerFuture | None = None
        try:
            second = runner.schedule("a", 2.0, _logs(ran, "v2", runner.close))
        except TaskRunningError:  # version 1 was running
            runner.close()

        def one_run_per_version() -> None:
            names = _names(ran)
            assert all(names.count(v) <= 1 for v in ("v1", "v2")), f"ran twice: {ran}"
            if first.cancelled():  # superseded while pending: version 1 never runs
                assert "v1" not in names, f"superseded version 1 ran: {ran}"
                assert second is not None, "version 1 was cancelled, but not superseded"
            else:
                assert "v1" in names and first.result(timeout=0) == "V1", (first, ran)
            if second is None:  # the reschedule found version 1 running
                assert names == ["v1"], ran
            else:
                assert second.version == 2 and second.result(timeout=0) == "V2", second
                assert names in (["v2"], ["v1", "v2"]), ran
            assert runner.scheduler.version("a") == (1 if second is None else 2)

        ctx.at_end("version 1 ran (reschedule refused, or made after it) or was superseded "
                   "and version 2 ran; each at most once", one_run_per_version)

    return Scenario("timer_reschedule_races_claim", body,
                    timer_reschedule_races_claim.__doc__ or "")


def timer_next_races_changes(cls: TimerSchedulerClass = TimerScheduler) -> Scenario:
    """Two workers call next() and complete() (twice and once) while a third thread reschedules a
    and cancels b (a TimerScheduler alone, everything due at t=0)."""

    def body(ctx: Context) -> None:
        s = cls(runtime.clock)
        ctx.check("scheduler.check_invariants()", s.check_invariants)
        s.schedule("a", 0.0)
        s.schedule("b", 0.0)
        claims: list[tuple[Hashable, int]] = []
        reports: list[TimerState] = []
        got: dict[str, int | bool | None] = {}

        def worker(rounds: int) -> None:
            for _ in range(rounds):
                due = s.next()
                if isinstance(due, Due):
                    claims.append((due.task_id, due.version))
                    reports.append(s.complete(due.task_id, due.version))

        def changer() -> None:
            try:
                got["a"] = s.schedule("a", 0.0)
            except TaskRunningError:
                got["a"] = None  # version 1 of a was running
            got["b"] = s.cancel("b")

        ctx.spawn(worker, 2, name="worker-1")  # can claim a's version 2 after a's version 1
        ctx.spawn(worker, 1, name="worker-2")
        ctx.spawn(changer, name="changer")

        def each_version_ran_at_most_once() -> None:
            assert len(set(claims)) == len(claims), f"a version was claimed twice: {claims}"
            assert reports == [TimerState.COMPLETED] * len(claims), reports
            stats = s.stats()
            assert stats.claimed == len(claims), (stats, claims)
            if got["b"]:
                assert ("b", 1) not in claims, f"b was cancelled, yet claimed: {claims}"
            superseded = (stats.scheduled - stats.live - stats.running - stats.completed
                          - stats.failed - stats.cancelled)
            assert superseded == (1 if got["a"] == 2 and ("a", 1) not in claims else 0), (
                f"{superseded} superseded versions; schedule('a') gave {got['a']}, claims "
                f"{claims}")
            for task_id, version in claims:
                assert version <= s.version(task_id), claims

        ctx.at_end("each version was claimed and completed at most once, never once cancelled "
                   "or superseded", each_version_ran_at_most_once)

    return Scenario("timer_next_races_changes", body, timer_next_races_changes.__doc__ or "")


def timer_held_slot_runs_when_its_run_ends(cls: TimerRunnerClass = TimerRunner) -> Scenario:
    """A buffer_one schedule every 10 s from t=0 whose first run lasts until t=15: slot 10 is
    held, and the end of that run hands it to the schedule thread, asleep toward slot 20, which
    makes its run at once. Main closes the runner at t=25 (a schedule's slots never end, and
    virtual time may pass while a thread that could move does not)."""

    def body(ctx: Context) -> None:
        runner = _runner(ctx, cls)
        made: list[tuple[str, float]] = []  # each run the schedule thread made, and when
        ended: list[float] = []  # when the run of slot 0 ended
        calls = 0

        def run() -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                sync.Event().wait(RUN_LASTS)  # nobody sets it: the run lasts RUN_LASTS
                ended.append(runtime.clock())

        schedule = runner.schedule

        def noted(task_id: Hashable, run_at: float, *args: object) -> TimerFuture:
            # The time a run is made is read here, in the schedule thread: its function may
            # start later, when the search lets the worker move late.
            made.append((str(task_id), runtime.clock()))
            return schedule(task_id, run_at, *args)  # type: ignore[arg-type]

        runner.schedule = noted  # type: ignore[method-assign, assignment]
        runner.recurring("r", run, every=EVERY, overlap="buffer_one", start=0.0)
        sync.Event().wait(CLOSE_AT)
        runner.close()

        def held_slot_made_a_run_when_the_run_ended() -> None:
            if len(made) > 1:  # else the close came before the schedule thread moved
                # the run of slot 0 lasts RUN_LASTS from when its function started, which the
                # search may put off: the time it ended is the one read then
                assert len(ended) == 1, (made, ended)
                assert made[1][1] == ended[0], (
                    f"the held slot {EVERY} was made a run at t={made[1][1]}, not when the run "
                    f"before it ended at t={ended[0]}: it waited for the next slot's time")

        ctx.at_end("the held slot is made a run when the run before it ends",
                   held_slot_made_a_run_when_the_run_ended)

    return Scenario("timer_held_slot_runs_when_its_run_ends", body,
                    timer_held_slot_runs_when_its_run_ends.__doc__ or "")


TIMER_SCENARIOS: dict[str, Scenario] = by_name(
    timer_earlier_while_sleeping(),
    timer_cancel_races_next(),
    timer_close_during_sleep(),
    timer_reschedule_races_claim(),
    timer_next_races_changes(),
    timer_held_slot_runs_when_its_run_ends(),
)
