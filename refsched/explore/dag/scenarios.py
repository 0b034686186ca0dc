"""The scenarios explored against the production TaskScheduler and Runner.

Each is a factory taking the class under test (so a deliberately broken subclass can be explored
the same way) and returning a :class:`Scenario` of two or three threads. Every TaskScheduler is
watched: its invariants are checked after every step and its history of calls must be
linearizable against ``ReferenceScheduler``; each scenario adds what must hold at its end.
``SCENARIOS`` holds them all, built on the production classes, and the timer scenarios of
:mod:`refsched.explore.timer.scenarios` too, so ``scenario(name)`` and the command line know them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable

from refsched.dag.runner import CancelToken, Runner, TaskFuture
from refsched.dag.scheduler import TaskScheduler
from refsched.errors import Cancelled, InvalidTransitionError, SchedulerError, TaskRunningError
from refsched.explore import runtime
from refsched.explore.context import Context, Scenario, by_name
from refsched.explore.pool.scenarios import POOL_SCENARIOS
from refsched.explore.timer.scenarios import TIMER_SCENARIOS
from refsched.types import Claim, TaskState

__all__ = [
    "SCENARIOS",
    "add_deps_claim",
    "close_ready_callbacks",
    "complete_stale",
    "cooperative_cancel",
    "failure_while_claiming",
    "ready_cancel",
    "ready_ready",
    "resubmit_claim",
    "runner_chain",
    "runner_close_timeout",
    "runner_fan_out",
    "runner_result_wait",
    "scenario",
    "shared_dep_cancel_complete",
]

SchedulerClass = Callable[[int], TaskScheduler]
RunnerClass = Callable[[int], Runner]


def _runner(cls: RunnerClass, workers: int) -> Runner:
    return cls(workers)


def _states(s: TaskScheduler, *ids: Hashable) -> dict[Hashable, TaskState]:
    return {t: s.state(t) for t in ids}


def _claimer(s: TaskScheduler, answers: list[TaskState] | None = None) -> Callable[[], None]:
    """A thread's body: claim what is ready and complete each claim, keeping each answer in
    ``answers``."""

    def claimer() -> None:
        for claim in s.ready():
            state = s.complete(claim.task_id, claim.generation)
            if answers is not None:
                answers.append(state)

    return claimer


def ready_ready(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """Two concurrent ready() calls share two slots among three ready versions."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(2))
        for t in ("a", "b", "c"):
            s.submit(t)
        s.start()
        got: dict[str, list[Claim]] = {}

        def claim(name: str) -> None:
            got[name] = s.ready()

        ctx.spawn(claim, "claimer-1", name="claimer-1")
        ctx.spawn(claim, "claimer-2", name="claimer-2")

        def each_claimed_once() -> None:
            versions = [(c.task_id, c.generation) for claims in got.values() for c in claims]
            assert sorted(versions) == [("a", 1), ("b", 1)], f"claims handed out: {got}"

        ctx.at_end("a and b are claimed once each, c waits", each_claimed_once)

    return Scenario("ready_ready", body, ready_ready.__doc__ or "")


def ready_cancel(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """ready() claims a while cancel('a') cancels it; b depends on a."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(1), tlc_graph=True)
        s.submit("a")
        s.submit("b", ["a"])
        s.start()
        ctx.spawn(s.ready, name="claimer")
        ctx.spawn(s.cancel, "a", name="canceller")

        def one_of_two_outcomes() -> None:
            a = s.info("a")
            if a.state is TaskState.RUNNING:  # claimed first: the cancel is a request
                assert a.cancel_requested and s.state("b") is TaskState.PENDING, a
            else:  # cancelled first: b can never run
                assert a.state is TaskState.CANCELLED, a
                assert s.info("b").blocked_by == "a", s.info("b")

        ctx.at_end("a is running with a cancel request, or cancelled with b blocked",
                   one_of_two_outcomes)

    return Scenario("ready_cancel", body, ready_cancel.__doc__ or "")


def complete_stale(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """A worker fails a, retries it and completes the new version; a late worker completes the
    first version."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(1), tlc_graph=True)
        s.submit("a")
        s.start()
        s.ready()  # version 1 of a runs

        def worker() -> None:
            s.fail("a", 1, "error")
            try:
                s.retry("a")
            except InvalidTransitionError:
                return  # the late complete() came first: a succeeded
            (claim,) = s.ready()
            s.complete("a", claim.generation, "fresh")

        def late_worker() -> None:
            with contextlib.suppress(SchedulerError):  # stale by now: the report is refused
                s.complete("a", 1, "late")

        ctx.spawn(worker, name="worker")
        ctx.spawn(late_worker, name="late-worker")

        def the_right_result() -> None:
            a = s.info("a")
            assert a.state is TaskState.SUCCEEDED, a
            expected = "late" if a.generation == 1 else "fresh"
            assert a.result == expected, f"generation {a.generation} has the result {a.result!r}"

        ctx.at_end("a succeeded with its own version's result", the_right_result)

    return Scenario("complete_stale", body, complete_stale.__doc__ or "")


def resubmit_claim(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """submit('a') again (a new version) while another thread claims and completes a."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(1), tlc_graph=True)
        s.submit("a")
        s.start()
        done: list[TaskState] = []

        def resubmitter() -> None:
            with contextlib.suppress(TaskRunningError):  # a is running: it cannot be replaced
                s.submit("a")

        ctx.spawn(resubmitter, name="resubmitter")
        ctx.spawn(_claimer(s, done), name="claimer")

        def claimed_version_stays_current() -> None:
            assert done in ([], [TaskState.SUCCEEDED]), f"complete() of the claim gave {done}"

        ctx.at_end("a claimed version is never replaced under its worker",
                   claimed_version_stays_current)

    return Scenario("resubmit_claim", body, resubmit_claim.__doc__ or "")


def close_ready_callbacks(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """close() against ready() against the callbacks of the running a and b; c depends on a."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(2))
        s.submit("a")
        s.submit("b")
        s.submit("c", ["a"])
        s.start()
        s.ready()  # a and b run

        def reporter() -> None:
            s.complete("a", 1)
            s.fail("b", 1, "error")

        ctx.spawn(s.close, name="closer")
        ctx.spawn(_claimer(s), name="claimer")
        ctx.spawn(reporter, name="reporter")

        def everything_ended() -> None:
            states = _states(s, "a", "b", "c")
            assert states["a"] is TaskState.SUCCEEDED and states["b"] is TaskState.FAILED, states
            assert states["c"] in (TaskState.SUCCEEDED, TaskState.CANCELLED), states
            assert s.snapshot().closed

        ctx.at_end("closed, a and b reported, c ran or was cancelled", everything_ended)

    return Scenario("close_ready_callbacks", body, close_ready_callbacks.__doc__ or "")


def failure_while_claiming(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """a is resubmitted onto the failed z, blocking its ready dependent d while d is claimed."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(2))
        s.submit("z")
        s.submit("a")
        s.submit("d", ["a"])
        s.start()
        s.ready()  # z and a run
        s.fail("z", 1, "error")
        s.complete("a", 1)  # d is ready
        ran: list[TaskState] = []

        def resubmitter() -> None:
            s.submit("a", ["z"])  # born blocked: blocking spreads to d unless d runs

        ctx.spawn(resubmitter, name="resubmitter")
        ctx.spawn(_claimer(s, ran), name="claimer")

        def d_ran_or_blocked() -> None:
            d = s.info("d")
            assert s.info("a").blocked_by == "z", s.info("a")
            if ran:
                assert ran == [TaskState.SUCCEEDED] and d.state is TaskState.SUCCEEDED, (ran, d)
            else:
                assert d.state is TaskState.BLOCKED and d.blocked_by == "a", d

        ctx.at_end("d ran before the resubmission or is blocked by a", d_ran_or_blocked)

    return Scenario("failure_while_claiming", body, failure_while_claiming.__doc__ or "")


def add_deps_claim(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """add_deps('x', ['c']) while another thread completes x's one dep and claims x."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(2))
        s.submit("a")
        s.submit("c", ["a"])
        s.submit("x", ["a"])
        s.start()
        (claim,) = s.ready()  # a runs
        refused: list[BaseException] = []

        def claimer() -> None:
            s.complete("a", claim.generation)
            s.ready()  # c and x, unless x waits for c by now

        def adder() -> None:
            try:
                s.add_deps("x", ["c"])
            except InvalidTransitionError as error:  # x was claimed (or ready) first
                refused.append(error)

        ctx.spawn(claimer, name="claimer")
        ctx.spawn(adder, name="adder")

        def added_only_to_pending() -> None:
            x = s.info("x")
            if refused:
                assert x.deps == {"a"} and x.state is not TaskState.PENDING, x
            else:
                assert x.deps == {"a", "c"} and x.state is TaskState.PENDING, x

        ctx.at_end("x runs on its old deps and add_deps is refused, or x waits for c too",
                   added_only_to_pending)

    return Scenario("add_deps_claim", body, add_deps_claim.__doc__ or "")


def shared_dep_cancel_complete(cls: SchedulerClass = TaskScheduler) -> Scenario:
    """cancel('s') of a dependency shared by x (required) and y (optional) while another
    thread claims s and completes it."""

    def body(ctx: Context) -> None:
        s = ctx.watch(cls(2))
        s.submit("s")
        s.submit("x", ["s"])
        s.submit("y", optional=["s"])
        s.start()

        def worker() -> None:
            for claim in s.ready():
                s.complete(claim.task_id, claim.generation)

        ctx.spawn(worker, name="worker")
        ctx.spawn(s.cancel, "s", name="canceller")

        def only_the_shared_dep_ends() -> None:
            shared = s.state("s")
            if shared is TaskState.CANCELLED:  # cancelled before the claim
                assert s.info("x").blocked_by == "s", s.info("x")
                # y no longer waits: ready, or claimed by the worker's ready() and completed
                assert s.state("y") in (TaskState.READY, TaskState.SUCCEEDED), s.info("y")
            else:  # claimed first: the cancel was a request, and s succeeded
                assert shared is TaskState.SUCCEEDED, shared
                assert s.state("x") is s.state("y") is TaskState.READY, (s.info("x"),
                                                                         s.info("y"))

        ctx.at_end("x is blocked and y runs, or s succeeded and both are ready",
                   only_the_shared_dep_ends)

    return Scenario("shared_dep_cancel_complete", body, shared_dep_cancel_complete.__doc__ or "")


def runner_close_timeout(cls: RunnerClass = Runner) -> Scenario:
    """Runner.close(timeout=0.5) while its one function waits up to 1 s for another thread."""

    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(_runner(cls, 1))
        gate = runtime.Event()

        def slow() -> str:
            gate.wait(1.0)
            return "done"

        future = runner.submit("a", slow)
        runner.start()
        ctx.spawn(gate.set, name="opener")
        report = runner.close(timeout=0.5)

        def finished_after_all() -> None:
            assert report.running in ((), ("a",)), report
            assert future.result(timeout=0) == "done"
            assert runner.scheduler.state("a") is TaskState.SUCCEEDED

        ctx.at_end("a finished, during close() or after it gave up waiting", finished_after_all)

    return Scenario("runner_close_timeout", body, runner_close_timeout.__doc__ or "")


def cooperative_cancel(cls: RunnerClass = Runner) -> Scenario:
    """TaskFuture.cancel() of a function that waits on its token until asked to stop."""

    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(_runner(cls, 1))

        def stoppable(token: CancelToken) -> None:
            token.wait()
            raise Cancelled("asked to stop")

        future = runner.submit("a", stoppable)
        runner.start()
        ctx.spawn(future.cancel, name="canceller")
        finished = runner.wait()
        runner.close()

        def cancelled() -> None:
            assert finished, "Runner.wait() returned False"
            assert future.cancelled(), future
            assert runner.scheduler.state("a") is TaskState.CANCELLED

        ctx.at_end("the function stopped and its future is cancelled", cancelled)

    return Scenario("cooperative_cancel", body, cooperative_cancel.__doc__ or "")


def runner_chain(cls: RunnerClass = Runner) -> Scenario:
    """The worker loop: two workers run the chain a -> b -> c and the independent d."""

    def body(ctx: Context) -> None:
        _run_to_results(ctx, cls, {"a": [], "b": ["a"], "c": ["b"], "d": []})

    return Scenario("runner_chain", body, runner_chain.__doc__ or "")


def _run_to_results(ctx: Context, cls: RunnerClass, deps: dict[str, list[str]]) -> None:
    """Run ``deps`` (id -> its deps) on a 2-worker runner, each function returning its id in
    upper case; at the end every future must hold its function's result."""
    runner = ctx.watch_runner(_runner(cls, 2))
    futures: dict[str, TaskFuture] = {t: runner.submit(t, _returns(t), ds)
                                      for t, ds in deps.items()}
    runner.start()
    finished = runner.wait()
    runner.close()

    def all_results() -> None:
        assert finished, "Runner.wait() returned False"
        results = {t: f.result(timeout=0) for t, f in futures.items()}
        assert results == {t: t.upper() for t in deps}, results

    ctx.at_end("every function ran once, each future has its result", all_results)


def runner_fan_out(cls: RunnerClass = Runner) -> Scenario:
    """The hand-off: a worker's report of a readies b and c; it runs one, and the other goes to
    the second worker, through its inbox if it is idle by then, else through the shared queue."""

    def body(ctx: Context) -> None:
        _run_to_results(ctx, cls, {"a": [], "b": ["a"], "c": ["a"]})

    return Scenario("runner_fan_out", body, runner_fan_out.__doc__ or "")


def runner_result_wait(cls: RunnerClass = Runner) -> Scenario:
    """Two threads block in a's ``result()`` (no timeout) while the worker runs a and settles
    its future: the settlement wakes each, whenever it began to wait."""

    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(_runner(cls, 1))
        future = runner.submit("a", _returns("a"))
        runner.start()
        got: dict[str, str] = {}

        def waiter() -> None:
            got["waiter"] = future.result()

        ctx.spawn(waiter, name="waiter")
        got["main"] = future.result()
        runner.close()

        def both_woken() -> None:
            assert got == {"main": "A", "waiter": "A"}, got

        ctx.at_end("both threads got a's result", both_woken)

    return Scenario("runner_result_wait", body, runner_result_wait.__doc__ or "")


def _returns(value: str) -> Callable[[], str]:
    def fn() -> str:
        return value.upper()

    return fn


SCENARIOS: dict[str, Scenario] = by_name(
    ready_ready(),
    ready_cancel(),
    complete_stale(),
    resubmit_claim(),
    close_ready_callbacks(),
    failure_while_claiming(),
    add_deps_claim(),
    shared_dep_cancel_complete(),
    runner_close_timeout(),
    cooperative_cancel(),
    runner_chain(),
    runner_fan_out(),
    runner_result_wait(),
)
SCENARIOS.update(TIMER_SCENARIOS)  # the TimerScheduler and TimerRunner scenarios
SCENARIOS.update(POOL_SCENARIOS)  # the WorkStealingPool scenarios


def scenario(name: str) -> Scenario:
    """The scenario called ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"no scenario {name!r}; known: {', '.join(SCENARIOS)}") from None

