"""The timer scheduler's reference model on its own: the contract's cases, and must-fail states.

Every invariant and action property is checked on every state and step of the traces instance's
graph, and each is shown to fail on a hand-made state or step that breaks it.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from refsched.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    StaleGenerationError,
    TaskRunningError,
    UnknownTaskError,
)
from refsched.model.dag.graph import ModelGraph
from refsched.model.timer import (
    ACTION_PROPERTIES,
    ACTIONS,
    INITIAL,
    INVARIANTS,
    Instance,
    ReferenceTimerScheduler,
    explore,
    initial,
    next_steps,
    violated,
    violated_by_step,
    within_bound,
)
from refsched.model.timer import actions as A
from refsched.model.timer.actions import CANCELLED, COMPLETED, FAILED, PENDING, RUNNING
from refsched.types import (
    Due,
    TimerCloseReport,
    TimerEntry,
    TimerSnapshot,
    TimerState,
    TimerVersionView,
    Wait,
)
from refsched.verify.timer.system import FakeClock

# spec/MCTimerQueueTraces.cfg
TRACES = Instance(tasks=("a", "b"), max_time=1, priorities=(0, 1), rebuild_floor=0,
                  max_version=2, max_schedules=2)


def timer(now: float = 0, rebuild_floor: int = 64) -> tuple[ReferenceTimerScheduler, FakeClock]:
    clock = FakeClock(now)
    return ReferenceTimerScheduler(clock, rebuild_floor=rebuild_floor), clock


def drain(m: ReferenceTimerScheduler) -> list[Any]:
    """Every Due next() hands out now, in order."""
    out = []
    while isinstance(due := m.next(), Due):
        out.append(due.task_id)
    return out


@pytest.fixture(scope="module")
def graph() -> ModelGraph[TimerSnapshot]:
    return explore(TRACES)


# -- Order ------------------------------------------------------------------------------------

def test_next_hands_out_by_time_then_higher_priority_then_first_scheduled() -> None:
    m, clock = timer()
    m.schedule("late", 5, priority=9)
    m.schedule("low", 3, priority=0)
    m.schedule("high", 3, priority=2)
    m.schedule("low-again", 3, priority=0)
    m.schedule("negative", 3, priority=-1)
    clock.now = 10
    assert drain(m) == ["high", "low", "low-again", "negative", "late"]
    assert all(m.state(t) is RUNNING for t in m.snapshot().tasks)


def test_next_waits_for_the_earliest_live_entry_and_due_means_run_at_not_after_now() -> None:
    m, clock = timer()
    fn = print
    assert m.schedule("a", 2.5, fn=fn) == 1
    assert m.next() == Wait(2.5)
    clock.now = 2
    assert m.next() == Wait(0.5)
    clock.now = 2.5
    assert m.next() == Due("a", 1, fn)
    assert m.next() is None


def test_run_at_in_the_past_is_due_at_once() -> None:
    m, _ = timer(now=100)
    m.snapshot()  # reads the clock: now = 100
    m.schedule("a", 3)
    assert m.next() == Due("a", 1, None)


def test_a_clock_going_back_never_moves_time_back() -> None:
    m, clock = timer(now=5)
    assert m.snapshot().now == 5
    clock.now = 1
    assert m.snapshot().now == 5
    clock.now = math.nan
    assert m.snapshot().now == 5
    assert [name for name, _ in m.history] == ["Tick"]


# -- Versions ---------------------------------------------------------------------------------

def test_rescheduling_a_pending_id_supersedes_its_version_and_leaves_a_stale_entry() -> None:
    m, clock = timer()
    assert m.schedule("a", 1) == 1
    assert m.schedule("a", 2, priority=3) == 2
    s = m.snapshot()
    assert s.tasks["a"] == TimerVersionView(2, PENDING, 2, 3, 2, False, 0)
    assert s.heap == {TimerEntry(1, 0, 1, "a", 1), TimerEntry(2, 3, 2, "a", 2)}
    assert A.live_entries(s) == {TimerEntry(2, 3, 2, "a", 2)}
    clock.now = 1
    assert m.next() == Wait(1)  # the stale entry on top is dropped, not handed out
    assert m.snapshot().heap == {TimerEntry(2, 3, 2, "a", 2)}
    assert m.stats().heap == 1 and m.stats().live == 1


def test_rescheduling_a_running_id_raises_and_changes_nothing() -> None:
    m, _ = timer()
    m.schedule("a", 0)
    m.next()
    before = m.snapshot()
    with pytest.raises(TaskRunningError):
        m.schedule("a", 0)
    assert m.snapshot() == before


def test_rescheduling_a_terminal_id_starts_a_new_version() -> None:
    m, _ = timer()
    m.schedule("a", 0)
    m.next()
    assert m.complete("a", 1, result="r") is COMPLETED
    assert m.outcome("a") == "r"
    assert m.schedule("a", 0) == 2
    assert m.snapshot().tasks["a"] == TimerVersionView(2, PENDING, 0, 0, 2, False, 0)
    assert m.outcome("a") is None


def test_callbacks_stale_repeated_and_on_pending_versions() -> None:
    m, _ = timer()
    m.schedule("a", 0)
    m.schedule("a", 0)
    with pytest.raises(InvalidTransitionError):
        m.complete("a", 2)
    with pytest.raises(StaleGenerationError) as caught:
        m.fail("a", 1)
    assert (caught.value.generation, caught.value.current) == (1, 2)
    assert str(caught.value) == "fail('a', 1): version 1 is stale, current is 2"
    m.next()
    assert m.fail("a", 2, error="boom") is FAILED
    assert m.complete("a", 2) is FAILED  # repeated: answered, no change
    assert m.outcome("a") == "boom"
    assert [name for name, _ in m.history][-4:] == [
        "StaleCallback", "Claim", "Fail", "RepeatedCallback"]
    with pytest.raises(UnknownTaskError):
        m.complete("zz", 1)


# -- Cancel -----------------------------------------------------------------------------------

def test_cancel_pending_running_terminal_and_unknown() -> None:
    m, _ = timer()
    m.schedule("p", 5)
    m.schedule("r", 0)
    assert m.next() == Due("r", 1, None)
    assert m.cancel("p") is True
    assert m.state("p") is CANCELLED
    assert m.cancel("r") is False
    assert m.snapshot().tasks["r"].cancel_requested and m.state("r") is RUNNING
    before = m.snapshot()
    assert m.cancel("r") is False and m.cancel("p") is False  # no step
    assert m.snapshot() == before
    assert m.complete("r", 1) is COMPLETED
    assert m.snapshot().tasks["r"].cancel_requested  # the request stays with its version
    with pytest.raises(UnknownTaskError):
        m.cancel("zz")
    assert m.stats().cancelled == 1


def test_a_cancelled_entry_is_never_handed_out() -> None:
    m, clock = timer()
    m.schedule("a", 0)
    m.schedule("b", 1)
    m.cancel("a")
    assert m.next() == Wait(1)
    clock.now = 1
    assert m.next() == Due("b", 1, None)
    assert m.next() is None


# -- Lazy deletion and compaction ----------------------------------------------------------------

def test_next_drops_only_the_stale_entries_on_top() -> None:
    m, _ = timer()
    m.schedule("x", 1)
    m.schedule("a", 2)
    m.schedule("y", 3)
    m.cancel("x")
    m.cancel("y")
    assert m.next() == Wait(2)
    # x was before the first live entry, y after it: y stays until it reaches the top.
    assert m.snapshot().heap == {TimerEntry(2, 0, 2, "a", 1), TimerEntry(3, 0, 3, "y", 1)}
    m.cancel("a")
    assert m.next() is None
    assert m.snapshot().heap == frozenset()
    assert m.stats().rebuilds == 0


def test_compaction_runs_only_when_stale_entries_are_more_than_half_of_more_than_floor() -> None:
    m, _ = timer(rebuild_floor=2)
    for t in "abc":
        m.schedule(t, 5)
    m.cancel("a")  # 3 entries, 1 stale
    assert (m.stats().heap, m.stats().rebuilds) == (3, 0)
    m.cancel("b")  # 3 entries, 2 stale: 4 > 3
    assert (m.stats().heap, m.stats().live, m.stats().rebuilds) == (1, 1, 1)
    assert m.snapshot().heap == {TimerEntry(5, 0, 3, "c", 1)}


def test_compaction_does_not_run_at_exactly_half_or_within_the_floor() -> None:
    m, _ = timer(rebuild_floor=2)
    m.schedule("a", 5)
    m.cancel("a")
    m.schedule("b", 5)
    m.cancel("b")  # 2 entries, both stale, but not more than the floor
    assert (m.stats().heap, m.stats().rebuilds) == (2, 0)
    m2, _ = timer(rebuild_floor=1)
    for t in "abcd":
        m2.schedule(t, 5)
    m2.cancel("a")
    m2.cancel("b")  # 4 entries, 2 stale: exactly half
    assert (m2.stats().heap, m2.stats().rebuilds) == (4, 0)


def test_schedule_and_claim_compact_too() -> None:
    m, _ = timer(rebuild_floor=1)
    m.schedule("a", 0)
    m.schedule("b", 5)
    m.cancel("b")  # 2 entries, 1 stale
    m.schedule("a", 0)  # supersede: 3 entries, 2 stale -> rebuilt
    assert (m.stats().heap, m.stats().rebuilds) == (1, 1)
    n, _ = timer(rebuild_floor=0)
    n.schedule("a", 0)
    n.schedule("b", 5)
    n.schedule("b", 6)  # 3 entries, 1 stale
    assert n.stats().rebuilds == 0
    assert n.next() == Due("a", 1, None)  # 2 entries left, 1 stale -> not more than half
    assert n.stats().rebuilds == 0
    n.schedule("c", 0)
    n.cancel("c")  # 3 entries, 2 stale -> rebuilt
    assert (n.stats().heap, n.stats().rebuilds) == (1, 1)


def test_claim_compaction_counts_the_popped_entry_out() -> None:
    m, _ = timer(rebuild_floor=0)
    m.schedule("a", 0)
    m.schedule("b", 9)
    m.schedule("b", 9)  # 3 entries: a, b1 stale, b2
    assert m.next() == Due("a", 1, None)  # 2 left, 1 stale: not more than half
    m.cancel("b")  # 2 entries, 2 stale -> rebuilt to empty
    assert (m.stats().heap, m.stats().rebuilds) == (0, 1)


def test_heap_stays_within_twice_live_plus_floor_under_any_mix() -> None:
    seed = 20_261_130
    print(f"seed {seed}")
    rng = random.Random(seed)
    m, clock = timer(rebuild_floor=3)
    for _ in range(500):
        t = f"t{rng.randrange(7)}"
        known = t in m.snapshot().tasks
        if known and m.state(t) is RUNNING:
            m.complete(t, m.version(t))
        elif known and rng.random() < 0.3:
            m.cancel(t)
        else:
            m.schedule(t, rng.randrange(5), priority=rng.randrange(2))
        if rng.random() < 0.2:
            clock.now += rng.random()
            m.next()
        stats = m.stats()
        assert stats.heap <= 2 * stats.live + 3, f"seed {seed}"
        m.check_invariants()
    assert m.stats().rebuilds > 0


# -- Close ------------------------------------------------------------------------------------

def test_close_cancels_pending_in_seq_order_empties_the_heap_and_keeps_running() -> None:
    m, _ = timer()
    m.schedule("b", 5)
    m.schedule("r", 0)
    m.schedule("a", 5)
    m.next()
    assert m.close() == TimerCloseReport(cancelled=("b", "a"), running=("r",))
    s = m.snapshot()
    assert s.closed and s.heap == frozenset()
    assert (m.state("a"), m.state("b"), m.state("r")) == (CANCELLED, CANCELLED, RUNNING)
    assert m.next() is None
    with pytest.raises(SchedulerClosedError):
        m.schedule("c", 0)
    assert m.close() == TimerCloseReport(cancelled=(), running=("r",))
    assert m.complete("r", 1) is COMPLETED
    assert m.stats().cancelled == 2


# -- Refusals ---------------------------------------------------------------------------------

def test_refused_calls_change_nothing() -> None:
    m, _ = timer()
    m.schedule("a", 0)
    m.schedule("b", 4)
    m.next()
    before = m.snapshot()
    stats = m.stats()
    for call, args, error in [
        ("schedule", ("a", 1), TaskRunningError),
        ("schedule", (["unhashable"], 1), InvalidArgumentError),
        ("schedule", ("c", True), InvalidArgumentError),
        ("schedule", ("c", math.nan), InvalidArgumentError),
        ("schedule", ("c", math.inf), InvalidArgumentError),
        ("schedule", ("c", "1"), InvalidArgumentError),
        ("schedule", ("c", 1, 1.5), InvalidArgumentError),
        ("schedule", ("c", 1, False), InvalidArgumentError),
        ("schedule", ("c", 1, 0, "not callable"), InvalidArgumentError),
        ("cancel", ("zz",), UnknownTaskError),
        ("cancel", ([1],), InvalidArgumentError),
        ("complete", ("b", 1), InvalidTransitionError),
        ("complete", ("a", 2), StaleGenerationError),
        ("complete", ("a", True), InvalidArgumentError),
        ("fail", ("zz", 1), UnknownTaskError),
        ("state", ("zz",), UnknownTaskError),
    ]:
        with pytest.raises(error):
            getattr(m, call)(*args)
        assert m.snapshot() == before, call
        assert m.stats() == stats, call


def test_real_numbers_are_times_and_int_subclasses_are_ints() -> None:
    class Level(int):
        pass

    m, _ = timer()
    m.schedule("f", Fraction(1, 2), priority=Level(3))
    view = m.snapshot().tasks["f"]
    assert (view.run_at, view.priority) == (0.5, 3)
    assert type(view.run_at) is float and type(view.priority) is int


def test_constructor_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidArgumentError):
        ReferenceTimerScheduler(42)  # type: ignore[arg-type]
    for floor in (-1, True, 1.0):
        with pytest.raises(InvalidArgumentError):
            ReferenceTimerScheduler(FakeClock(), rebuild_floor=floor)  # type: ignore[arg-type]


def test_refusals_name_their_error_and_the_call() -> None:
    s = ACTIONS["Schedule"].step(INITIAL, "a", 0, 0, rebuild_floor=0)
    refusal = ACTIONS["Complete"].refusal(s, "a", 3)
    assert refusal is not None and refusal.error_name == "StaleGenerationError"
    assert refusal.reason == "complete('a', 3): version 3 is stale, current is 1"
    closed = ACTIONS["Close"].step(s, rebuild_floor=0)
    refusal = ACTIONS["Schedule"].refusal(closed, "b", 0, 0)
    assert refusal is not None and refusal.error_name == "SchedulerClosedError"
    assert ACTIONS["Close"].refusal(closed) == A.Refusal(None, "close(): already closed")


# -- The graph: every state and step keeps every check --------------------------------------------

def test_every_state_of_the_traces_instance_keeps_every_invariant(
        graph: ModelGraph[TimerSnapshot]) -> None:
    assert len(graph.depth) == 5_308 and graph.edge_count == 34_992
    for s in graph.depth:
        assert not violated(s, TRACES.rebuild_floor), s
        assert not A.compaction_due(s, TRACES.rebuild_floor), s


def test_every_step_of_the_traces_instance_keeps_every_action_property(
        graph: ModelGraph[TimerSnapshot]) -> None:
    for out in graph.edges.values():
        for e in out:
            assert not violated_by_step(e.source, e.target), e


def test_claim_and_idle_exclude_each_other(graph: ModelGraph[TimerSnapshot]) -> None:
    for s in graph.depth:
        assert ACTIONS["Claim"].enabled(s) != ACTIONS["Idle"].enabled(s)


def test_next_steps_respect_the_bounds() -> None:
    s = initial(now=1)
    assert within_bound(s, TRACES)
    assert not within_bound(s.replace(now=2), TRACES)
    ticks = [step for step in next_steps(s, TRACES) if step[0] == "Tick"]
    assert ticks == [("Tick", {}, s.replace(now=2))]  # the constraint, not Tick, stops time


# -- Each check can fail ------------------------------------------------------------------------

def _state(*views: tuple[str, TimerVersionView], heap: set[TimerEntry] | None = None,
           now: float = 0, next_seq: int = 3) -> TimerSnapshot:
    tasks = dict(views)
    if heap is None:
        heap = {A.entry_of(t, v) for t, v in tasks.items() if v.state is PENDING}
    return TimerSnapshot(now=now, next_seq=next_seq, tasks=tasks, heap=frozenset(heap))


def _view(state: TimerState = PENDING, version: int = 1, run_at: float = 0, priority: int = 0,
          seq: int = 1, cancel_requested: bool = False, claims: int = 0) -> TimerVersionView:
    return TimerVersionView(version, state, run_at, priority, seq, cancel_requested, claims)


GOOD = _state(("a", _view(seq=1)), ("b", _view(run_at=1, seq=2)))

# name -> (a state that breaks it, the rebuild floor)
BAD_STATES: dict[str, tuple[TimerSnapshot, int]] = {
    "TypeOK": (GOOD.replace(next_seq=2), 0),  # b's seq 2 is not below next_seq
    # a pending version without its entry
    "HeapHoldsLiveVersions": (GOOD.replace(heap={A.entry_of("b", GOOD.tasks["b"])}), 0),
    "AtMostOneClaimPerVersion": (_state(("a", _view(RUNNING, claims=2)), heap=set()), 0),
    # two stale entries, nothing live: more than 2 * 0 + 1
    "HeapGarbageBounded": (_state(
        ("a", _view(CANCELLED, seq=1)), ("b", _view(CANCELLED, seq=2)),
        heap={TimerEntry(0, 0, 1, "a", 1), TimerEntry(0, 0, 2, "b", 1)}), 1),
    "CancelRequestOnlyWhileRunning": (_state(("a", _view(CANCELLED, cancel_requested=True))), 0),
}


@pytest.mark.parametrize("name", sorted(INVARIANTS))
def test_each_invariant_fails_on_a_state_that_breaks_it(name: str) -> None:
    assert not violated(GOOD, 0)
    state, floor = BAD_STATES[name]
    assert violated(state, floor) == [name]


def test_heap_garbage_bounded_allows_the_floor() -> None:
    state, floor = BAD_STATES["HeapGarbageBounded"]
    assert not violated(state, floor + 1)


def test_heap_holds_live_versions_rejects_an_entry_left_by_a_running_version() -> None:
    s = _state(("a", _view(RUNNING, claims=1)), heap={TimerEntry(0, 0, 1, "a", 1)})
    assert violated(s, 5) == ["HeapHoldsLiveVersions"]
    future = GOOD.replace(heap=GOOD.heap | {TimerEntry(0, 0, 2, "a", 2)})
    assert "HeapHoldsLiveVersions" in violated(future, 5)
    wrong = GOOD.replace(heap={TimerEntry(9, 0, 1, "a", 1), A.entry_of("b", GOOD.tasks["b"])})
    assert "HeapHoldsLiveVersions" in violated(wrong, 5)


def _claimed(s: TimerSnapshot, t: str) -> TimerSnapshot:
    """``s`` with ``t``'s version running and its entry gone: a Claim of ``t``, right or not."""
    v = s.tasks[t]
    return s.replace(tasks={**s.tasks, t: replace(v, state=RUNNING, claims=v.claims + 1)},
                     heap=s.heap - {A.entry_of(t, v)})


BAD_STEPS: dict[str, tuple[TimerSnapshot, TimerSnapshot]] = {
    # b is due at 1, a at 0: claiming b first skips the minimum
    "ClaimTakesMinimum": (GOOD.replace(now=1), _claimed(GOOD.replace(now=1), "b")),
    # a version made running in the step that makes it, never pending
    "NoStaleOrCancelledRun": (
        _state(("a", _view())), _state(("a", _view(RUNNING, version=2, seq=2, claims=1)))),
    "TimeNeverGoesBack": (GOOD.replace(now=1), GOOD),
    "TerminalStaysTerminal": (
        _state(("a", _view(COMPLETED, claims=1))), _state(("a", _view(FAILED, claims=1)))),
    # a running version replaced by a new schedule
    "RunningNeverReplaced": (
        _state(("a", _view(RUNNING, claims=1)), heap=set()),
        _state(("a", _view(version=2, seq=2)))),
}


@pytest.mark.parametrize("name", sorted(ACTION_PROPERTIES))
def test_each_action_property_fails_on_a_step_that_breaks_it(name: str) -> None:
    before, after = BAD_STEPS[name]
    assert violated_by_step(before, after) == [name]


def test_claim_takes_minimum_rejects_a_claim_before_due_and_a_lower_priority() -> None:
    assert not violated_by_step(GOOD, _claimed(GOOD, "a"))
    early = _state(("a", _view(run_at=1)))
    assert violated_by_step(early, _claimed(early, "a")) == ["ClaimTakesMinimum"]
    tie = _state(("a", _view(seq=1)), ("b", _view(priority=1, seq=2)))
    assert violated_by_step(tie, _claimed(tie, "a")) == ["ClaimTakesMinimum"]
    assert not violated_by_step(tie, _claimed(tie, "b"))


def test_no_stale_or_cancelled_run_rejects_a_cancelled_version_made_running() -> None:
    cancelled = _state(("a", _view(CANCELLED)), heap={TimerEntry(0, 0, 1, "a", 1)})
    running = _state(("a", _view(RUNNING, claims=1)))
    assert violated_by_step(cancelled, running) == [
        "NoStaleOrCancelledRun", "TerminalStaysTerminal"]


# -- One vocabulary ------------------------------------------------------------------------------
