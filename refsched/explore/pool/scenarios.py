"""The scenarios explored against the production WorkStealingPool.

Each is a factory taking the pool class (a deliberately broken subclass is explored the same way)
and returning a :class:`Scenario`. The pool's worker threads are the racing threads; the
scenario's main thread submits a root task from outside (Spec: SubmitExternal), whose function
submits children onto its worker's own deque (Spec: SubmitChild), and the pool is shut down (Spec:
Shutdown) by main or by the root. ``POOL_SCENARIOS`` holds them all, built on the production
class.

What every scenario checks after every step, from ``stats()`` and from what the task functions
themselves report (a :class:`_Ledger`): a task inside its function is taken and not yet finished,
so ``outstanding - sum(queue_lengths)`` (the tasks running) is at least the number inside their
function; ``executed`` (counted at Finish) never runs ahead of the functions that returned; a
draining pool has something outstanding (the Finish that takes it to 0 terminates it); and a
terminated pool has nothing queued, running or unsettled. At its end each scenario says which
tasks must have run, each exactly once, and checks the steals against where the tasks ran: a task
run by a worker other than the owner of the deque it was queued on was stolen, every other one
was popped, so ``stolen`` is the number of the former.

Every scenario is explored depth first within two preemptions, the bound the other scenarios use,
but one whose three workers all scan and park (``pool_waiters_wake_up_as_a_child_is_pushed``),
explored within none: it orders its run with virtual-time sleeps instead.
An idle worker scans twice (a lock round trip each) before it parks, so each worker thread adds
many scheduling points: the scenarios keep to one root task and one or two children.

The partial-order reduction takes two steps on different objects as independent, which holds
when shared data is touched under one lock. A task's future state is not: it is written under
the task's own ``_guard`` and read under the pool lock (a waiting worker checks whether the
future it waits on is done) or under none (``result()``'s fast path). In a scenario where a task
waits on a future the reduction can therefore miss interleavings, so those scenarios say so
(``Scenario.reduction`` False) and ``explore()`` searches them in full.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any

from refsched.errors import SchedulerClosedError
from refsched.explore import runtime
from refsched.explore.context import Context, Scenario, by_name
from refsched.pool.pool import WorkStealingPool

__all__ = [
    "POOL_SCENARIOS",
    "pool_batch_steal_races_last_pop",
    "pool_blocker_returns_while_its_spare_starts",
    "pool_nested_waits",
    "pool_pop_races_steal",
    "pool_shutdown_during_a_blocking_call",
    "pool_shutdown_races_child",
    "pool_two_thieves_one_victim",
    "pool_waiters_wake_up_as_a_child_is_pushed",
]

PoolClass = type[WorkStealingPool]

# The pool names worker w's thread "refsched-pool-worker-<w>": how a task tells where it runs.
_WORKER_THREAD = re.compile(r"refsched-pool-worker-(\d+)")
# and its n-th spare thread (managed blocking) "refsched-pool-spare-<n>"
_SPARE_THREAD = re.compile(r"refsched-pool-spare-(\d+)")


def _this_worker() -> int:
    """The index of the pool worker whose thread calls this; -1 - n on the n-th spare thread."""
    name = runtime.current_thread_name()
    match = _WORKER_THREAD.fullmatch(name)
    if match is not None:
        return int(match.group(1))
    spare = _SPARE_THREAD.fullmatch(name)
    if spare is not None:
        return -1 - int(spare.group(1))
    raise AssertionError(f"a task ran on thread {name!r}, not on a pool worker or spare")


class _Ledger:
    """What the scenario knows without looking inside the pool: the tasks' own reports.

    Task functions report where they run and when they are inside; a root's deque is noted by
    :meth:`note_root_deque` (a check), a child's is its parent's worker's (Spec: SubmitChild).
    """

    def __init__(self) -> None:
        self.runs: dict[str, list[int]] = {}  # task name -> the workers that ran it, in order
        self.queued_on: dict[str, int] = {}  # task name -> the worker whose deque it went to
        self.futures: dict[str, Future[Any]] = {}  # the futures submit() handed out
        self.inside = 0  # tasks inside their function now
        self.returned = 0  # task functions that have returned

    def task(self, name: str, then: Callable[[], object] | None = None) -> Callable[[], object]:
        """A task function: reports itself, calls ``then`` and returns ``then``'s result (or
        its own name)."""

        def fn() -> object:
            self.runs.setdefault(name, []).append(_this_worker())
            self.inside += 1
            try:
                return then() if then is not None else name
            finally:
                self.inside -= 1
                self.returned += 1

        return fn

    def submit_child(self, pool: WorkStealingPool, name: str,
                     then: Callable[[], object] | None = None) -> Future[Any]:
        """From inside a task: submit ``name`` (Spec: SubmitChild, onto this worker's deque)."""
        self.queued_on[name] = _this_worker()
        future = pool.submit(self.task(name, then))
        self.futures[name] = future
        return future

    def submit_root(self, pool: WorkStealingPool, name: str,
                    then: Callable[[], object] | None = None) -> Future[Any]:
        """From outside the pool: submit ``name`` (Spec: SubmitExternal)."""
        future = pool.submit(self.task(name, then))
        self.futures[name] = future
        return future

    def note_root_deque(self, pool: WorkStealingPool, name: str) -> None:
        """A check: note the deque the root ``name`` went to, the first time a deque is seen
        non-empty. Checks run after every step that released the pool lock, so the first
        non-empty deque seen is the root's, before any worker can take it."""
        if name in self.queued_on:
            return
        lengths = pool.stats().queue_lengths
        queued = [w for w, n in enumerate(lengths) if n]
        if not queued:
            return
        assert name not in self.runs and queued == [queued[0]] and lengths[queued[0]] == 1, (
            f"{name} was not seen alone in its deque before it ran: {lengths}, runs {self.runs}")
        self.queued_on[name] = queued[0]


def _watch(ctx: Context, pool: WorkStealingPool, ledger: _Ledger, root: str) -> None:
    """Check the pool's counters against the ledger after every step; note the root's deque."""
    ctx.check(f"note the deque {root} went to", partial(ledger.note_root_deque, pool, root))
    ctx.check("pool counters agree with the tasks' own reports",
              partial(_counters_agree, pool, ledger))


def _counters_agree(pool: WorkStealingPool, ledger: _Ledger) -> None:
    # While a worker holds the pool lock, stats() raises WouldBlock and the check runs later.
    stats = pool.stats()
    queued = sum(stats.queue_lengths)
    running = stats.outstanding - queued
    assert running >= ledger.inside, (
        f"{ledger.inside} tasks are inside their function, yet outstanding - queued = "
        f"{stats.outstanding} - {queued} = {running}: {stats}")
    assert stats.executed <= ledger.returned, (
        f"executed {stats.executed}, yet only {ledger.returned} functions returned: {stats}")
    assert 0 <= stats.parked <= pool.workers + stats.spares, stats
    if stats.state == "draining":
        assert stats.outstanding > 0, f"draining with nothing outstanding: {stats}"
    if stats.state == "terminated":
        assert stats.outstanding == 0 and queued == 0 and ledger.inside == 0, (
            f"terminated while work remains: {stats}, {ledger.inside} inside their function")
        unsettled = [name for name, f in ledger.futures.items() if not f.done()]
        assert not unsettled, f"terminated with futures unsettled: {unsettled}"


def _ran_once_and_steals_add_up(pool: WorkStealingPool, ledger: _Ledger,
                                names: tuple[str, ...]) -> None:
    """Every task in ``names`` ran exactly once and nothing else ran; ``stolen`` counts the tasks
    run by a worker other than the owner of the deque they were queued on; terminated."""
    stats = pool.stats()
    assert sorted(ledger.runs) == sorted(names), f"tasks run: {ledger.runs}"
    twice = {name: workers for name, workers in ledger.runs.items() if len(workers) != 1}
    assert not twice, f"run more than once: {twice}"
    assert stats.executed == len(names) == ledger.returned, (stats, ledger.runs)
    steals = [name for name in names if ledger.runs[name][0] != ledger.queued_on[name]]
    assert stats.stolen == len(steals), (
        f"stolen {stats.stolen}, but {steals} ran off the deque they were queued on "
        f"(queued on {ledger.queued_on}, ran on {ledger.runs})")
    assert (stats.state, stats.outstanding, sum(stats.queue_lengths)) == ("terminated", 0, 0), (
        stats)


def pool_pop_races_steal(cls: PoolClass = WorkStealingPool) -> Scenario:
    """A root pushes one child onto its worker's empty deque and returns: that worker's Finish
    and Pop race the other worker's Steal of the one-element deque (2 workers)."""

    def body(ctx: Context) -> None:
        pool = cls(2)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")
        ledger.submit_root(pool, "root", lambda: ledger.submit_child(pool, "child"))
        pool.shutdown()
        ctx.at_end("each task ran exactly once; stolen counts the steals",
                   partial(_ran_once_and_steals_add_up, pool, ledger, ("root", "child")))

    return Scenario("pool_pop_races_steal", body, pool_pop_races_steal.__doc__ or "")


def pool_two_thieves_one_victim(cls: PoolClass = WorkStealingPool) -> Scenario:
    """A root pushes two children onto its worker's deque, shuts the pool down and returns,
    while the two other workers, idle, steal from that deque's top (3 workers).

    Main only submits the root, and Shutdown comes from inside the root (a task's shutdown()
    does not wait): with main waiting for termination and joining three workers, the search
    passes 20,000 runs within two preemptions without finishing; this way it ends at about
    11,000. Only one deque is ever non-empty (the root's, then its worker's), so where a steal
    starts (the pool's random victim) changes nothing and the runs are deterministic.
    """

    def body(ctx: Context) -> None:
        pool = cls(3)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")

        def root() -> None:
            ledger.submit_child(pool, "first")
            ledger.submit_child(pool, "second")
            pool.shutdown(wait=False)

        ledger.submit_root(pool, "root", root)
        ctx.at_end("each task ran exactly once; stolen counts the steals",
                   partial(_ran_once_and_steals_add_up, pool, ledger,
                           ("root", "first", "second")))

    return Scenario("pool_two_thieves_one_victim", body,
                    pool_two_thieves_one_victim.__doc__ or "")


def pool_shutdown_races_child(cls: PoolClass = WorkStealingPool) -> Scenario:
    """shutdown(wait=False) races a running root's submission of a child; then a submission from
    outside is refused and main awaits termination (2 workers). The child is accepted whenever
    it comes (Spec: SubmitChild while draining), and the pool terminates only after it ran."""

    def body(ctx: Context) -> None:
        pool = cls(2)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")
        root = ledger.submit_root(pool, "root", lambda: ledger.submit_child(pool, "child"))
        pool.shutdown(wait=False)
        refused: list[BaseException] = []
        try:
            pool.submit(ledger.task("late"))
        except SchedulerClosedError as exc:
            refused.append(exc)
        terminated = pool.await_termination()

        def child_accepted_and_run_before_termination() -> None:
            assert refused, "a submission from outside was taken after shutdown()"
            assert terminated, "await_termination() returned False without a timeout"
            child = root.result(timeout=0)
            assert isinstance(child, Future) and child.result(timeout=0) == "child", child
            _ran_once_and_steals_add_up(pool, ledger, ("root", "child"))

        ctx.at_end("the child was accepted after shutdown() and ran before termination; the "
                   "late root was refused", child_accepted_and_run_before_termination)

    return Scenario("pool_shutdown_races_child", body, pool_shutdown_races_child.__doc__ or "")


def pool_nested_waits(cls: PoolClass = WorkStealingPool) -> Scenario:
    """Fork-join inside the pool: a root submits two children and waits on both futures, helping
    (it pops its own deque) while the other worker steals (2 workers). No deadlock, and the
    root's result joins the children's.

    Explored without the reduction (see the module doc): with it, 4 of the 258 orders of the
    pool lock's critical sections that the full search reaches within two preemptions are
    missed, and still missed within three.
    """

    def body(ctx: Context) -> None:
        pool = cls(2)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")

        def fork_join() -> str:
            left = ledger.submit_child(pool, "left")
            right = ledger.submit_child(pool, "right")
            return f"{left.result()}+{right.result()}"

        root = ledger.submit_root(pool, "root", fork_join)
        pool.shutdown()

        def joined() -> None:
            assert root.result(timeout=0) == "left+right", root
            _ran_once_and_steals_add_up(pool, ledger, ("root", "left", "right"))

        ctx.at_end("the root joined both children; each task ran exactly once", joined)

    # a task's future state is written under its own lock and read under the pool lock or
    # none: the reduction cannot order those, so this scenario is searched in full
    return Scenario("pool_nested_waits", body, pool_nested_waits.__doc__ or "", reduction=False)


def _blocking_settled(pool: WorkStealingPool, ledger: _Ledger, names: tuple[str, ...],
                      blocks: int) -> None:
    """Every task in ``names`` ran exactly once; each of ``blocks`` blocking() calls had a spare,
    which retired; terminated."""
    stats = pool.stats()
    assert sorted(ledger.runs) == sorted(names), f"tasks run: {ledger.runs}"
    twice = {name: workers for name, workers in ledger.runs.items() if len(workers) != 1}
    assert not twice, f"run more than once: {twice}"
    assert stats.executed == len(names) == ledger.returned, (stats, ledger.runs)
    assert (stats.compensated, stats.uncompensated) == (blocks, 0), stats
    assert (stats.spares, stats.blocked) == (0, 0), f"a spare did not retire: {stats}"
    assert (stats.state, stats.outstanding, sum(stats.queue_lengths)) == ("terminated", 0, 0), (
        stats)


def _ran_once_and_batches_add_up(pool: WorkStealingPool, ledger: _Ledger,
                                 names: tuple[str, ...]) -> None:
    """Every task in ``names`` ran exactly once and nothing else ran; each steal took one task
    or more, and every task that ran off the deque it was queued on was taken by some steal
    (a task a batch moved may be stolen back, so only a bound holds); terminated."""
    stats = pool.stats()
    assert sorted(ledger.runs) == sorted(names), f"tasks run: {ledger.runs}"
    twice = {name: workers for name, workers in ledger.runs.items() if len(workers) != 1}
    assert not twice, f"run more than once: {twice}"
    assert stats.executed == len(names) == ledger.returned, (stats, ledger.runs)
    moved = [name for name in names if ledger.runs[name][0] != ledger.queued_on[name]]
    assert stats.stolen <= stats.stolen_tasks and len(moved) <= stats.stolen_tasks, (
        f"stolen {stats.stolen}, stolen_tasks {stats.stolen_tasks}, but {moved} ran off the "
        f"deque they were queued on (queued on {ledger.queued_on}, ran on {ledger.runs})")
    assert (stats.state, stats.outstanding, sum(stats.queue_lengths)) == ("terminated", 0, 0), (
        stats)


def pool_batch_steal_races_last_pop(cls: PoolClass = WorkStealingPool) -> Scenario:
    """Batch steals (steal="half", steal_cap 2; 2 workers): a root pushes four children onto
    its worker's deque and returns. The idle worker may take a batch of two (it runs the
    oldest and keeps the next), or single steals once the deque is short; while it runs, the
    root's worker pops the newest children and, its deque empty, steals the one task the
    thief kept, racing the thief's pop of that last task of its deque. Each task runs once.
    """

    def body(ctx: Context) -> None:
        pool = cls(2, steal="half", steal_cap=2)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")

        def root() -> None:
            for name in ("c0", "c1", "c2", "c3"):
                ledger.submit_child(pool, name)
            pool.shutdown(wait=False)

        ledger.submit_root(pool, "root", root)
        ctx.at_end("each task ran exactly once; the steals took every task that moved",
                   partial(_ran_once_and_batches_add_up, pool, ledger,
                           ("root", "c0", "c1", "c2", "c3")))

    return Scenario("pool_batch_steal_races_last_pop", body,
                    pool_batch_steal_races_last_pop.__doc__ or "")


def pool_blocker_returns_while_its_spare_starts(cls: PoolClass = WorkStealingPool) -> Scenario:
    """A root enters blocking() and leaves it at once, racing the start of the spare launched
    for it (Spec: Block, then Unblock and StartSpare in either order); main shuts down and
    waits, spare thread included (1 worker, max_spares 1). The spare, released before or after
    it starts, retires, and the pool terminates."""

    def body(ctx: Context) -> None:
        pool = cls(1, max_spares=1)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")

        def root() -> None:
            with pool.blocking():
                pass

        ledger.submit_root(pool, "root", root)
        pool.shutdown()
        ctx.at_end("the root ran once; its spare retired; terminated",
                   partial(_blocking_settled, pool, ledger, ("root",), 1))

    return Scenario("pool_blocker_returns_while_its_spare_starts", body,
                    pool_blocker_returns_while_its_spare_starts.__doc__ or "")


def pool_shutdown_during_a_blocking_call(cls: PoolClass = WorkStealingPool) -> Scenario:
    """Inside blocking(), a root submits a child (onto its worker's deque, where the spare or,
    once the root ends, the worker takes it) while main calls shutdown(wait=False) and awaits
    termination (1 worker, max_spares 1). The child is taken whenever it comes, runs once, the
    spare retires, and the pool terminates only after both ran."""

    def body(ctx: Context) -> None:
        pool = cls(1, max_spares=1)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")

        def root() -> None:
            with pool.blocking():
                ledger.submit_child(pool, "child")

        ledger.submit_root(pool, "root", root)
        pool.shutdown(wait=False)
        terminated = pool.await_termination()

        def settled() -> None:
            assert terminated, "await_termination() returned False without a timeout"
            _blocking_settled(pool, ledger, ("root", "child"), 1)

        ctx.at_end("both ran once; the spare retired; terminated", settled)

    return Scenario("pool_shutdown_during_a_blocking_call", body,
                    pool_shutdown_during_a_blocking_call.__doc__ or "")


def pool_waiters_wake_up_as_a_child_is_pushed(cls: PoolClass = WorkStealingPool) -> Scenario:
    """Two tasks wait on one child: one worker runs it inside its wait, the other waits parked.
    The child pushes a grandchild, which wakes the parked waiter (the most recently parked), and
    ends, which lets both waiters go back to their tasks. Both tasks then block (on an event,
    outside the pool) until the grandchild has run: the third worker, parked, is the only one
    that can run it, so the waiter woken for the push must pass that wake on as it leaves
    (3 workers). Kept, it leaves the grandchild queued and
    every thread waiting: a lost wake-up.

    Virtual time orders the run without preemptions: main sleeps before it submits the root
    (the workers park first), and the child sleeps before it pushes (the second waiter steals
    its task and parks on the child first). A sleep is a wait nobody ends: its timeout comes
    only when no other thread can move, unless a schedule takes it earlier. The root submits
    the second waiter, then the child, publishes the child's future (an event), waits on it,
    and shuts the pool down at its end. Only one deque is ever non-empty, so where a steal
    starts changes nothing.

    Three workers that scan before they park make many schedules: within no preemption there
    are about 800, within one more than 20,000. The scenario is explored within none.
    """

    def body(ctx: Context) -> None:
        pool = cls(3)
        ledger = _Ledger()
        _watch(ctx, pool, ledger, "root")
        published = runtime.Event()  # the child's future is in ``child``
        grandchild_ran = runtime.Event()
        child: list[Future[Any]] = []

        def push_grandchild() -> None:
            runtime.Event().wait(1.0)  # a sleep: the second waiter parks first
            ledger.submit_child(pool, "grandchild", grandchild_ran.set)

        def second_waiter() -> None:
            published.wait()
            child[0].result()
            grandchild_ran.wait()

        def root() -> None:
            ledger.submit_child(pool, "waiter", second_waiter)
            child.append(ledger.submit_child(pool, "child", push_grandchild))
            published.set()
            child[0].result()
            grandchild_ran.wait()
            pool.shutdown(wait=False)

        runtime.Event().wait(1.0)  # a sleep: the workers park first
        ledger.submit_root(pool, "root", root)
        ctx.at_end("each task ran exactly once; stolen counts the steals",
                   partial(_ran_once_and_steals_add_up, pool, ledger,
                           ("root", "waiter", "child", "grandchild")))

    # tasks wait on a future (see the module doc): searched in full
    return Scenario("pool_waiters_wake_up_as_a_child_is_pushed", body,
                    pool_waiters_wake_up_as_a_child_is_pushed.__doc__ or "", reduction=False)

POOL_SCENARIOS: dict[str, Scenario] = by_name(
    pool_pop_races_steal(),
    pool_two_thieves_one_victim(),
    pool_shutdown_races_child(),
    pool_nested_waits(),
    pool_blocker_returns_while_its_spare_starts(),
    pool_shutdown_during_a_blocking_call(),
    pool_batch_steal_races_last_pop(),
    pool_waiters_wake_up_as_a_child_is_pushed(),
)
