"""The interleaving explorer: every scenario is clean on the production code, seeded concurrency
bugs are each found with an id that replays them, and the parts (runtime, search, linearizability
checker, schedule ids, configuration, command line) do what they say.

Summaries are printed (run with ``-s`` to see the figures).
"""

from __future__ import annotations

import concurrent.futures._base as futures_base
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings

from refsched import CancelToken, Runner, TaskScheduler, TaskState
from refsched import sync as refsched_sync
from refsched.dag import scheduler as scheduler_module
from refsched.dag.scheduler import _READY, _RUNNING
from refsched.explore import (
    SCENARIOS,
    Context,
    ExploreConfig,
    Scenario,
    ScheduleMismatch,
    SchedulePlan,
    compare_reduction,
    discipline,
    explore,
    pct_schedules,
    replay,
    run_schedule,
    schedules,
)
from refsched.explore import runtime as rt
from refsched.explore.__main__ import main
from refsched.explore.dag import scenarios as catalogue
from refsched.explore.discipline import guarded_fields
from refsched.explore.linearizability import (
    History,
    RecordingProxy,
    SchedulerModel,
    check,
    history_key,
)
from refsched.explore.pool.scenarios import POOL_SCENARIOS
from refsched.explore.search import decode_schedule, encode_schedule
from refsched.explore.timer.scenarios import TIMER_SCENARIOS
from refsched.model import ReferenceScheduler
from refsched.types import Claim
from tests.explore_support import assert_caught_and_replays, assert_explores_clean, bug_id

QUICK = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])


# -- seeded concurrency bugs ---------------------------------------------------------------

def _claim(scheduler: TaskScheduler, rows: list[int]) -> list[Claim]:
    """Mark the versions in ``rows`` running and return their claims, taking no lock of its
    own (their heap entries are left behind, stale)."""
    claims = []
    for row in rows:
        scheduler._state[row] = _RUNNING
        scheduler._claims[row] = 1
        scheduler._running += 1
        scheduler._ready_count -= 1
        claims.append(Claim(scheduler._ids[row], scheduler._gen[row], scheduler._fn[row]))
    return claims


def _ready_rows(scheduler: TaskScheduler) -> list[int]:
    """The rows of the ready versions, in seq order."""
    return [row for row, state in enumerate(scheduler._state) if state == _READY]


class SplitClaim(TaskScheduler):
    """ready() picks the ready versions under the lock, then claims them in a second lock region
    without looking again: a check-then-act split, so two callers claim the same versions."""

    def ready(self, limit: int | None = None) -> list[Claim]:
        with self._lock:
            free = self._max - self._running
            picked = _ready_rows(self)[:max(free, 0)]
        with self._lock:
            return _claim(self, picked)


class LateComplete(TaskScheduler):
    """complete() checks the generation, then completes whatever version is current by then: a
    late report from a replaced version lands on its successor."""

    def complete(self, task_id: Any, generation: int, result: Any = None) -> TaskState:
        if self.info(task_id).generation != generation:
            return super().complete(task_id, generation, result)
        return super().complete(task_id, self.info(task_id).generation, result)


class NotifyOneAtClose(Runner):
    """close() wakes one idle worker instead of all: the others wait forever, close() joins them."""

    def _release_idle_locked(self) -> None:
        if self._idle_workers:
            self._idle_workers.pop().put(None)


class ForgetfulToken(Runner):
    """A token made after the cancel request is not set: a lost wake-up of the function."""

    def _new_token(self, task_id: Any, generation: int) -> CancelToken:
        token = CancelToken(task_id, generation)
        with self._lock:
            self._tokens[(task_id, generation)] = token
        return token


class OwnLockClaim(TaskScheduler):
    """ready() claims holding a lock of its own: the claim has no synchronisation operation the
    scheduler's callers contend on, so it runs whole in every schedule and only the lock
    discipline sees it."""

    def ready(self, limit: int | None = None) -> list[Claim]:
        with refsched_sync.Lock():
            free = self._max - self._running
            return _claim(self, _ready_rows(self)[:free])


# (scenario factory, broken class, the kind of failure it shows)
BUGS: list[tuple[Callable[[Any], Scenario], type, str]] = [
    (catalogue.ready_ready, SplitClaim, "invariant"),
    (catalogue.complete_stale, LateComplete, "linearizability"),
    (catalogue.runner_chain, NotifyOneAtClose, "lost wake-up"),
    (catalogue.cooperative_cancel, ForgetfulToken, "lost wake-up"),
    (catalogue.ready_ready, OwnLockClaim, "lock discipline"),
]


# -- the production code is clean ----------------------------------------------------------

# The timer and pool scenarios, in SCENARIOS too, are explored by tests/timer/test_explore.py
# and tests/pool/test_explore.py.
@pytest.mark.parametrize("name", [n for n in SCENARIOS
                                  if n not in TIMER_SCENARIOS and n not in POOL_SCENARIOS])
def test_every_scenario_explores_clean_within_two_preemptions(name: str) -> None:
    report = assert_explores_clean(SCENARIOS[name],
                                   ExploreConfig(max_preemptions=2, reduction=True))
    assert report.schedules >= 2, "a scenario with one schedule explores nothing"


# -- seeded bugs are found and replayed ----------------------------------------------------

@pytest.mark.parametrize("case", BUGS, ids=bug_id)
def test_a_seeded_bug_is_found_with_and_without_the_reduction_and_replays(
        case: tuple[Callable[[Any], Scenario], type, str]) -> None:
    factory, broken, kind = case
    scenario = factory(broken)
    reduced, full = compare_reduction(scenario, ExploreConfig(max_preemptions=2))
    for report in (reduced, full):
        assert_caught_and_replays(scenario, report, kind)
    assert reduced.executions <= full.executions
    print(reduced.failures[0].report(max_steps=12))


@pytest.mark.parametrize("name", ["ready_ready", "ready_cancel", "complete_stale",
                                  "resubmit_claim", "failure_while_claiming",
                                  "cooperative_cancel"])
def test_the_reduction_reaches_every_trace_of_the_full_search_in_fewer_runs(name: str) -> None:
    bounded = ExploreConfig(max_preemptions=2)
    reduced, full = compare_reduction(SCENARIOS[name], bounded)
    unbounded = explore(SCENARIOS[name], ExploreConfig(max_preemptions=None))
    for report in (reduced, full, unbounded):
        print(report.summary())
        assert report.ok and report.exhausted
    assert reduced.traces == full.traces  # the same interleavings, up to independent steps
    assert reduced.executions < full.executions
    # Without a bound every complete run is a new trace, and they include all of the bounded.
    assert unbounded.coverage == "complete" and unbounded.schedules == len(unbounded.traces)
    assert unbounded.traces >= full.traces


@pytest.mark.slow
def test_the_bounded_reduction_keeps_every_trace_of_three_threads_racing_close() -> None:
    # Three threads, where the racing thread must also be tried at the last earlier switch
    # (bounded partial-order reduction): trying it only at the last free switch loses traces.
    reduced, full = compare_reduction(SCENARIOS["close_ready_callbacks"],
                                      ExploreConfig(max_preemptions=2))
    print(reduced.summary())
    print(full.summary())
    assert reduced.traces == full.traces and reduced.executions < full.executions / 2


def _timed_handshake(ctx: Context) -> None:
    cond, done, box = rt.Condition(rt.Lock()), rt.Event(), []

    def waiter() -> None:
        with cond:
            cond.wait_for(lambda: box, timeout=1.0)
        done.set()

    def notifier() -> None:
        done.wait(0.5)
        with cond:
            box.append(1)
            cond.notify()

    ctx.spawn(waiter, name="waiter")
    ctx.spawn(notifier, name="notifier")


def test_with_timeouts_the_reduction_still_reaches_every_trace() -> None:
    # Timeouts go in deadline order, so retiring a timer can let another thread's timeout go
    # first: the steps that do so touch the clock, or the reduction would miss traces.
    scenario = Scenario("timed_handshake", _timed_handshake)
    reduced, full = compare_reduction(scenario, ExploreConfig(max_preemptions=None))
    print(reduced.summary())
    print(full.summary())
    assert full.coverage == "complete" and reduced.traces == full.traces
    assert reduced.executions * 20 < full.executions


def test_the_split_claim_needs_one_preemption() -> None:
    scenario = catalogue.ready_ready(SplitClaim)
    none = explore(scenario, ExploreConfig(max_preemptions=0))
    one = explore(scenario, ExploreConfig(max_preemptions=1))
    assert none.ok and none.coverage == "bounded", none.summary()
    assert not one.ok, one.summary()


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_sampling_strategies_find_the_split_claim(strategy: str) -> None:
    scenario = catalogue.ready_ready(SplitClaim)
    report = explore(scenario, ExploreConfig(strategy=strategy, seed=7, max_schedules=300))
    print(report.summary())
    assert report.failures and report.coverage == "sampled", report.summary()
    again = replay(scenario, report.failures[0].schedule_id)
    assert again.failure is not None and again.failure.kind == report.failures[0].kind


# -- Hypothesis-drawn schedules ------------------------------------------------------------

@QUICK
@given(plan=schedules(horizon=30))
def test_drawn_schedules_of_ready_cancel_are_clean(plan: SchedulePlan) -> None:
    run_schedule(SCENARIOS["ready_cancel"], plan).raise_on_failure()


@QUICK
@given(plan=pct_schedules(depth=3, horizon=60))
def test_pct_schedules_of_close_ready_callbacks_are_clean(plan: Any) -> None:
    run_schedule(SCENARIOS["close_ready_callbacks"], plan).raise_on_failure()


def test_hypothesis_shrinks_a_failing_schedule_to_one_that_replays() -> None:
    scenario = catalogue.complete_stale(LateComplete)
    plan = find(schedules(horizon=30),
                lambda p: run_schedule(scenario, p).failure is not None,
                settings=settings(max_examples=500, database=None, derandomize=True))
    # Shrunk to the switches that matter: into the late worker between the worker's fail() and
    # retry(), and back to the worker between the late worker's check and its act.
    assert len(plan.deviations) <= 2, plan
    result = run_schedule(scenario, plan)
    assert result.failure is not None and result.preemptions <= 2
    again = replay(scenario, result.schedule_id)
    assert again.failure is not None and again.failure.kind == result.failure.kind


# -- lock discipline -----------------------------------------------------------------------

def test_the_guarded_fields_are_those_init_assigns_after_the_lock() -> None:
    scheduler_fields = guarded_fields(TaskScheduler)
    assert {"_running", "_ready_count", "_rows", "_heap", "_closed", "_state", "_dependents",
            "_blocked_by", "_cancel_requested"} <= scheduler_fields
    assert "_max" not in scheduler_fields and "_lock" not in scheduler_fields
    assert {"_inflight", "_resolving", "_queue", "_closed"} <= guarded_fields(Runner)
    with pytest.raises(ValueError, match=r"never assigns self\._lock"):
        guarded_fields(ReferenceScheduler)
    with pytest.raises(ValueError, match="is not Python code"):
        guarded_fields(Claim)


def test_a_claim_under_its_own_lock_fails_the_first_schedule_naming_the_write() -> None:
    report = explore(catalogue.ready_ready(OwnLockClaim))
    failure = report.failures[0]
    assert report.executions == 1
    assert failure.kind == "lock discipline", failure.report()
    assert "wrote TaskScheduler._state[0] (task 'a')" in failure.message
    assert "without holding that TaskScheduler's lock" in failure.message


def test_a_column_written_under_another_schedulers_lock_is_caught() -> None:
    def body(ctx: Context) -> None:
        mine, other = TaskScheduler(1), TaskScheduler(1)
        mine.submit("a")
        mine.start()  # "a" becomes ready under mine's lock
        row = mine._rows["a"]

        def wrong_lock() -> None:
            with other._lock:
                mine._stamp[row] = 1.0

        ctx.spawn(wrong_lock, name="wrong_lock")

    failure = explore(Scenario("wrong_lock", body)).failures[0]
    assert failure.kind == "lock discipline"
    assert "wrong_lock wrote TaskScheduler._stamp[0] (task 'a')" in failure.message
    assert "without holding that TaskScheduler's lock" in failure.message


# Each kind of column written outside the lock, by each kind of write a column allows.
_UNLOCKED_COLUMN_WRITES: list[tuple[str, Callable[[TaskScheduler], Any], str]] = [
    ("item", lambda s: s._state.__setitem__(0, _RUNNING), "._state[0] (task 'a')"),
    ("append", lambda s: s._gen.append(1), "._gen[1]"),
    ("extend", lambda s: s._deps.extend([()]), "._deps.extend()"),
    ("array item", lambda s: s._stamp.__setitem__(0, 7.0), "._stamp[0] (task 'a')"),
    ("slice", lambda s: s._claims.__setitem__(slice(0, 1), [1]), "._claims.__setitem__()"),
    ("sparse dict", lambda s: s._blocked_by.__setitem__(0, 0), "._blocked_by[0] (task 'a')"),
    ("sparse set", lambda s: s._cancel_requested.add(0), "._cancel_requested[0] (task 'a')"),
    ("pop", lambda s: s._fn.pop(), "._fn.pop()"),
]


@pytest.mark.parametrize(("kind", "write", "named"), _UNLOCKED_COLUMN_WRITES,
                         ids=[case[0] for case in _UNLOCKED_COLUMN_WRITES])
def test_every_kind_of_column_write_outside_the_lock_is_caught(
        kind: str, write: Callable[[TaskScheduler], Any], named: str) -> None:
    def body(ctx: Context) -> None:
        scheduler = TaskScheduler(1)
        scheduler.submit("a")
        ctx.spawn(lambda: write(scheduler), name="unlocked")

    failure = explore(Scenario("unlocked_column", body)).failures[0]
    assert failure.kind == "lock discipline", failure.report()
    assert f"unlocked wrote TaskScheduler{named} at test_explore.py" in failure.message


def test_a_runner_counter_written_without_the_runner_lock_is_caught() -> None:
    def body(ctx: Context) -> None:
        runner = Runner(1)

        def unlocked() -> None:
            runner._inflight += 1

        ctx.spawn(unlocked, name="unlocked")

    failure = explore(Scenario("unlocked_counter", body)).failures[0]
    assert failure.kind == "lock discipline"
    assert "unlocked wrote Runner._inflight" in failure.message


def test_a_runner_futures_counter_written_under_the_runner_lock_is_caught() -> None:
    def body(ctx: Context) -> None:
        runner = Runner(1)

        def wrong_lock() -> None:
            with runner._lock:  # the runner lock, not the futures' lock that guards it
                runner._futures_waiting += 1

        ctx.spawn(wrong_lock, name="wrong_lock")

    failure = explore(Scenario("futures_counter", body)).failures[0]
    assert failure.kind == "lock discipline"
    assert "wrong_lock wrote Runner._futures_waiting" in failure.message
    assert "futures lock" in failure.message


def test_the_discipline_hooks_act_only_inside_a_run_and_come_out_after() -> None:
    plain_column = scheduler_module._column
    with discipline.enforced():
        assert "__setattr__" in TaskScheduler.__dict__
        assert scheduler_module._column is not plain_column
        scheduler = TaskScheduler(1)  # outside a run: no thread is controlled, nothing checked
        scheduler.submit("a")
        scheduler.start()
        scheduler._stamp[0] = 2.0
        for column in (scheduler._state, scheduler._stamp, scheduler._cancel_requested):
            assert type(column) not in (list, dict, set), column  # a checked subclass
        with pytest.raises(RuntimeError, match="already"), discipline.enforced():
            pass
    for cls in (TaskScheduler, Runner):
        assert "__setattr__" not in cls.__dict__
    assert scheduler_module._column is plain_column
    assert type(TaskScheduler(1)._state) is list


# -- the runtime -------------------------------------------------------------------------

def _opposite_order(ctx: Context) -> None:
    a, b = rt.Lock(), rt.Lock()

    def one() -> None:
        with a, b:
            pass

    def two() -> None:
        with b, a:
            pass

    ctx.spawn(one, name="one")
    ctx.spawn(two, name="two")


def _notify_before_wait(ctx: Context) -> None:
    cond = rt.Condition(rt.Lock())

    def waiter() -> None:
        with cond:
            cond.wait()  # no predicate: a notify that came first is lost

    def notifier() -> None:
        with cond:
            cond.notify()

    ctx.spawn(waiter, name="waiter")
    ctx.spawn(notifier, name="notifier")


def test_a_lock_order_inversion_is_a_deadlock_naming_both_locks() -> None:
    report = explore(Scenario("opposite_order", _opposite_order))
    failure = report.failures[0]
    assert failure.kind == "deadlock", failure.report()
    assert "one acquires Lock#" in failure.message and "two acquires Lock#" in failure.message


def test_a_notify_before_the_wait_is_a_lost_wake_up() -> None:
    report = explore(Scenario("notify_before_wait", _notify_before_wait))
    failure = report.failures[0]
    assert failure.kind == "lost wake-up" and "waiter waits on Condition#" in failure.message


def test_a_get_from_a_queue_nobody_puts_to_is_a_lost_wake_up() -> None:
    def body(ctx: Context) -> None:
        inbox = rt.SimpleQueue()
        ctx.spawn(inbox.get, name="getter")

    failure = explore(Scenario("get_without_put", body)).failures[0]
    assert failure.kind == "lost wake-up", failure.report()
    assert "getter gets from SimpleQueue#" in failure.message


def test_a_put_before_the_get_is_kept_and_items_come_out_in_order() -> None:
    got: list[list[int]] = []

    def body(ctx: Context) -> None:
        inbox, out = rt.SimpleQueue(), []

        def getter() -> None:
            out.extend((inbox.get(), inbox.get()))

        ctx.spawn(getter, name="getter")
        inbox.put(1)
        inbox.put(2)
        ctx.at_end("record", lambda: got.append(out))

    report = explore(Scenario("put_get", body), ExploreConfig(max_preemptions=None))
    assert report.ok and report.coverage == "complete" and report.schedules >= 2, report.summary()
    assert got and all(out == [1, 2] for out in got)


def test_a_timed_get_takes_virtual_time_and_explores_both_outcomes() -> None:
    outcomes: set[object] = set()

    def body(ctx: Context) -> None:
        inbox, got = rt.SimpleQueue(), []

        def getter() -> None:
            try:
                got.append(inbox.get(timeout=3600.0))
            except queue.Empty:
                got.append("timed out")

        ctx.spawn(getter, name="getter")
        inbox.put("item")
        ctx.at_end("record", lambda: outcomes.add(got[0]))

    report = explore(Scenario("timed_get", body), ExploreConfig(max_preemptions=None))
    assert report.ok and report.coverage == "complete", report.summary()
    assert outcomes == {"item", "timed out"}


def test_a_spin_on_an_event_nobody_sets_hits_the_step_bound() -> None:
    def body(ctx: Context) -> None:
        flag = rt.Event()
        while not flag.is_set():
            pass

    report = explore(Scenario("spin", body), ExploreConfig(max_steps=50))
    assert report.failures[0].kind == "step bound"


def test_an_exception_escaping_a_thread_fails_the_run_with_its_traceback() -> None:
    def body(ctx: Context) -> None:
        ctx.spawn(lambda: 1 // 0, name="divider")

    failure = explore(Scenario("raises", body)).failures[0]
    assert failure.kind == "exception" and "ZeroDivisionError" in failure.message


def test_timed_waits_take_virtual_time_and_explore_both_outcomes() -> None:
    outcomes: set[tuple[bool, bool]] = set()

    def body(ctx: Context) -> None:
        never, go = rt.Event(), rt.Event()
        got: dict[str, bool] = {}

        def waiter() -> None:
            got["waiter"] = go.wait(3600.0)

        def later() -> None:
            got["later"] = never.wait(7200.0)

        ctx.spawn(waiter, name="waiter")
        ctx.spawn(later, name="later")
        go.set()
        ctx.at_end("record", lambda: outcomes.add((got["waiter"], got["later"])))

    started = time.perf_counter()
    report = explore(Scenario("timed", body), ExploreConfig(max_preemptions=None))
    assert report.ok and report.coverage == "complete", report.summary()
    assert time.perf_counter() - started < 10  # an hour of waiting, in no time
    # "later" always times out; "waiter" is woken by set() or times out before it.
    assert outcomes == {(True, False), (False, False)}


def test_installed_swaps_the_primitives_in_and_back_out() -> None:
    before = (refsched_sync.Lock, refsched_sync.Condition, refsched_sync.SimpleQueue,
              refsched_sync.acquire, futures_base.threading)
    with rt.installed():
        assert refsched_sync.Lock is rt.Lock and refsched_sync.Thread is rt.Thread
        assert refsched_sync.SimpleQueue is rt.SimpleQueue
        assert refsched_sync.acquire is rt.acquire
        assert futures_base.threading.Condition is rt.Condition
        assert futures_base.threading.get_ident is threading.get_ident
    assert (refsched_sync.Lock, refsched_sync.Condition, refsched_sync.SimpleQueue,
            refsched_sync.acquire, futures_base.threading) == before


def test_objects_used_outside_a_run_act_directly_and_refuse_to_block() -> None:
    lock, event, inbox = rt.Lock(), rt.Event(), rt.SimpleQueue()
    assert lock.acquire() and lock.locked() and not lock.acquire(blocking=False)
    with pytest.raises(rt.WouldBlock):
        lock.acquire()
    lock.release()
    assert not event.wait(0.1)
    with pytest.raises(rt.WouldBlock):
        event.wait()
    event.set()
    assert event.wait()
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.1)
    with pytest.raises(rt.WouldBlock):
        inbox.get()
    inbox.put("item")
    assert inbox.qsize() == 1 and inbox.get() == "item" and inbox.empty()
    with pytest.raises(RuntimeError):
        rt.Thread(target=print).start()


def test_a_scenario_blocking_on_a_future_is_under_control() -> None:
    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(Runner(1))
        future = runner.submit("a", lambda: 42)
        runner.start()
        assert future.result() == 42  # waits on the Future's own condition
        runner.close()

    report = explore(Scenario("future_result", body))
    report.raise_on_failure()
    result = replay(Scenario("future_result", body), "ae")
    assert any(s.kind == "wait" and "runner.py" in s.target for s in result.steps)


# -- the linearizability checker -----------------------------------------------------------

def _history(*ops: tuple[str, str, tuple[Any, ...], int, int | None, Any]) -> History:
    """A history from (thread, method, args, call, ret, value) rows; events numbered as given."""
    events = sorted([(op[3], "call", i) for i, op in enumerate(ops)]
                    + [(op[4], "ret", i) for i, op in enumerate(ops) if op[4] is not None])
    history = History()
    handles: dict[int, int] = {}
    for _, what, i in events:
        thread, method, args, _, _, value = ops[i]
        if what == "call":
            handles[i] = history.invoke(thread, method, args)
        else:
            history.respond(handles[i], value)
    return history


def _claims(*ids: str) -> list[Claim]:
    return [Claim(t, 1, None) for t in ids]


MODEL = SchedulerModel(lambda: ReferenceScheduler(1))
SETUP = [("main", "submit", ("a",), 1, 2, 1), ("main", "start", (), 3, 4, None)]


def test_overlapping_claims_linearize_in_the_order_that_explains_them() -> None:
    ok = _history(*SETUP, ("T1", "ready", (), 5, 8, []), ("T2", "ready", (), 6, 7, _claims("a")))
    verdict = check(ok.operations(), MODEL)
    assert verdict.ok, verdict.explain()
    assert [op.thread for op in verdict.order[2:]] == ["T2", "T1"]


def test_one_version_claimed_twice_is_not_linearizable() -> None:
    twice = _history(*SETUP, ("T1", "ready", (), 5, 8, _claims("a")),
                     ("T2", "ready", (), 6, 7, _claims("a")))
    verdict = check(twice.operations(), MODEL)
    assert not verdict.ok
    assert "not linearizable" in verdict.explain() and "T2: ready()" in verdict.explain()


def test_a_later_claim_cannot_move_before_an_earlier_return() -> None:
    # T1 returned [] before T2 was invoked: T2's claim cannot be placed before it.
    late = _history(*SETUP, ("T1", "ready", (), 5, 6, []), ("T2", "ready", (), 7, 8, []))
    assert not check(late.operations(), MODEL).ok


def test_a_call_that_never_returned_may_or_may_not_have_taken_effect() -> None:
    pending = _history(*SETUP, ("T1", "ready", (), 5, None, None),
                       ("T2", "ready", (), 6, 7, []))
    assert check(pending.operations(), MODEL).ok  # T1 claimed a first
    alone = _history(*SETUP, ("T1", "ready", (), 5, None, None),
                     ("T2", "ready", (), 6, 7, _claims("a")))
    assert check(alone.operations(), MODEL).ok  # T1 never took effect


def test_histories_recorded_from_real_threads_are_linearizable() -> None:
    history = History()
    s = RecordingProxy(TaskScheduler(2), history)
    for i in range(20):
        s.submit(i, [i - 1] if i % 3 else [])
    s.start()

    def worker() -> None:
        while True:
            claims = s.ready(1)
            if not claims:
                if all(s.state(i).is_terminal for i in range(20)):
                    return
                continue
            for c in claims:
                s.complete(c.task_id, c.generation)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    verdict = check(history.operations(), SchedulerModel(lambda: ReferenceScheduler(2)))
    assert verdict.ok, verdict.explain()


def test_equal_histories_share_a_key_and_different_functions_do_not() -> None:
    def f() -> None: ...

    def g() -> None: ...

    def hist(fn: Callable[[], None]) -> History:
        h = History()
        s = RecordingProxy(TaskScheduler(1), h)
        s.submit("a", (), fn)
        s.start()
        s.ready()
        return h

    assert history_key(hist(f).operations()) == history_key(hist(f).operations())
    assert history_key(hist(f).operations()) == history_key(hist(g).operations())  # by identity
    h = History()
    s = RecordingProxy(TaskScheduler(1), h)
    s.submit("a", (), f)
    s.submit("b", (), g)
    h2 = History()
    s2 = RecordingProxy(TaskScheduler(1), h2)
    s2.submit("a", (), f)
    s2.submit("b", (), f)
    assert history_key(h.operations()) != history_key(h2.operations())


# -- schedule ids and configuration --------------------------------------------------------

def test_schedule_ids_round_trip_and_reject_garbage() -> None:
    for deviations in ((), ((0, 3),), ((2, 5), (300, 1), (301, 8))):
        assert decode_schedule(encode_schedule(deviations)) == deviations
    assert len(encode_schedule([(12, 3)])) <= 6
    for bad in ("", "!!", "aa", "ae5"):
        with pytest.raises(ValueError):
            decode_schedule(bad)


def test_a_schedule_that_does_not_fit_the_scenario_is_refused() -> None:
    with pytest.raises(ScheduleMismatch):
        replay(SCENARIOS["ready_ready"], encode_schedule([(0, 41)]))  # thread #20 never exists
    with pytest.raises(ScheduleMismatch):
        replay(SCENARIOS["ready_ready"], encode_schedule([(5000, 2)]))  # beyond the run


def test_config_fields_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFSCHED_MAX_PREEMPTIONS", "none")
    monkeypatch.setenv("REFSCHED_MAX_SCHEDULES", "17")
    monkeypatch.setenv("REFSCHED_REDUCTION", "0")
    config = ExploreConfig()
    assert (config.max_preemptions, config.max_schedules, config.reduction) == (None, 17, False)
    assert ExploreConfig(max_preemptions=1).max_preemptions == 1  # an explicit value wins
    monkeypatch.setenv("REFSCHED_MAX_STEPS", "many")
    with pytest.raises(ValueError, match="REFSCHED_MAX_STEPS"):
        ExploreConfig()
    with pytest.raises(ValueError, match="strategy"):
        ExploreConfig(strategy="bfs", max_steps=10)


# -- the command line ----------------------------------------------------------------------

def test_the_command_line_explores_lists_and_replays(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    assert "runner_chain" in capsys.readouterr().out
    assert main(["ready_ready", "--compare"]) == 0
    out = capsys.readouterr().out
    assert "[reduced]" in out and "[full]" in out
    assert main(["ready_ready", "--replay", "ae"]) == 0
    assert "claimer-1" in capsys.readouterr().out
    assert main(["ready_ready", "--replay", "nonsense"]) == 2
    assert main(["failure_while_claiming", "--max-preemptions", "none", "--max-schedules",
                 "5"]) == 0
    assert "cut" in capsys.readouterr().out


# -- states inside the TLC instance's bounds are states of TLC's graph ---------------------

class RetrySkipsASeq(TaskScheduler):
    """retry() numbers the next version one too far: every invariant still holds."""

    def retry(self, task_id: Any) -> int:
        generation = super().retry(task_id)
        with self._lock:
            self._next_seq += 1
        return generation


def test_a_state_outside_tlc_graph_is_caught_where_invariants_hold() -> None:
    scenario = catalogue.complete_stale(RetrySkipsASeq)
    report = explore(scenario, ExploreConfig(max_preemptions=2))
    assert report.failures, report.summary()
    failure = report.failures[0]
    assert failure.kind == "invariant"
    assert "state in TLC's graph" in failure.message and "next_seq=4" in failure.message
    again = replay(scenario, failure.schedule_id)
    assert again.failure is not None and "TLC's graph" in again.failure.message


def test_a_scenario_leaving_the_graph_bounds_says_so() -> None:
    def body(ctx: Context) -> None:
        s = ctx.watch(TaskScheduler(1), tlc_graph=True)
        s.submit("z")  # not an id of the instance

    report = explore(Scenario("outside", body), ExploreConfig(max_preemptions=0))
    assert report.failures and "outside MCSchedulerTraces.cfg" in report.failures[0].message
