"""Tests of the production TaskScheduler (refsched/dag/scheduler.py) against docs/semantics.md.

The design document's list, one claim per test: empty graph, independent branches, long chains,
cycles, unknown dependencies, joins, failure propagation, cancel (pending and running), duplicate
callbacks and submissions, zero capacity, close, stale generations, retry, bad input, error
classes, the invariant checker (and that it can fail), and concurrent claims.
"""

from __future__ import annotations

import graphlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from refsched import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    SchedulerError,
    StaleGenerationError,
    TaskRunningError,
    TaskScheduler,
    TaskState,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.dag.scheduler import INVARIANTS, SchedulerStats
from refsched.errors import ConflictError, GraphError, InvariantViolation
from refsched.model.dag.actions import (
    BLOCKED,
    CANCELLED,
    FAILED,
    PENDING,
    READY,
    RUNNING,
    SUCCEEDED,
)


def started(max_concurrency: int, graph: dict[Hashable, tuple[Hashable, ...]],
            **kwargs: Any) -> TaskScheduler:
    """A started scheduler holding ``graph`` (id -> deps), submitted in dict order."""
    s = TaskScheduler(max_concurrency, **kwargs)
    for task_id, deps in graph.items():
        s.submit(task_id, deps)
    s.start()
    s.check_invariants()
    return s


def drain(s: TaskScheduler, check: bool = False) -> list[Hashable]:
    """Claim and complete until nothing is ready; the ids in the order they were claimed."""
    order: list[Hashable] = []
    while True:
        claims = s.ready()
        if not claims:
            return order
        for claim in claims:
            order.append(claim.task_id)
            s.complete(claim.task_id, claim.generation)
            if check:
                s.check_invariants()


def run(s: TaskScheduler, task_id: Hashable) -> int:
    """Claim exactly ``task_id`` (it must be the first ready version); its generation."""
    (claim,) = s.ready(1)
    assert claim.task_id == task_id
    return claim.generation


def states(s: TaskScheduler) -> dict[Hashable, TaskState]:
    return {t: v.state for t, v in s.snapshot().tasks.items()}


def assert_cycle_path(cycle: list[Hashable], deps: dict[Hashable, tuple[Hashable, ...]]) -> None:
    """``cycle`` is ``[a, b, ..., a]`` with each entry a dependency of the next."""
    assert len(cycle) >= 3 and cycle[0] == cycle[-1]
    for a, b in itertools.pairwise(cycle):
        assert a in deps[b], f"{a!r} is not a dependency of {b!r} in {cycle!r}"


# ---------------------------------------------------------------------- graphs


def test_empty_graph_starts_and_has_nothing_to_claim() -> None:
    s = TaskScheduler(4)
    s.start()
    assert s.ready() == []
    assert s.snapshot().tasks == {}
    assert s.close() == s.close()
    s.check_invariants()


def test_independent_branches_are_claimed_in_submission_order() -> None:
    s = started(2, {"a1": (), "b1": (), "a2": ("a1",), "b2": ("b1",)})
    first = s.ready()
    assert [c.task_id for c in first] == ["a1", "b1"]
    s.complete("b1", 1)
    assert [c.task_id for c in s.ready()] == ["b2"]
    s.fail("a1", 1)
    assert states(s) == {"a1": FAILED, "b1": SUCCEEDED, "a2": BLOCKED, "b2": RUNNING}
    s.complete("b2", 1)
    assert s.ready() == []
    s.check_invariants()


def test_ready_respects_limit_and_returns_claims_in_seq_order() -> None:
    s = started(10, {t: () for t in "edcba"})
    assert [c.task_id for c in s.ready(2)] == ["e", "d"]
    assert [c.task_id for c in s.ready(0)] == []
    rest = s.ready()
    assert [(c.task_id, c.generation, c.fn) for c in rest] == [
        ("c", 1, None), ("b", 1, None), ("a", 1, None)]


def test_claim_hands_out_the_stored_function_without_calling_it() -> None:
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)

    s = TaskScheduler(1)
    s.submit("a", (), fn)
    s.start()
    (claim,) = s.ready()
    assert claim.fn is fn and calls == []


def test_long_chain_of_a_million_tasks_blocks_and_retries_without_recursion() -> None:
    n = 1_000_000
    s = TaskScheduler(1)
    began = time.perf_counter()
    s.submit(0)
    for i in range(1, n):
        s.submit(i, (i - 1,))
    s.start()
    g = run(s, 0)
    s.fail(0, g)
    last = s.info(n - 1)
    assert last.state is BLOCKED and last.blocked_by == n - 2
    assert s.stats().blocked == n - 1
    s.retry(0)
    assert s.state(n - 1) is PENDING and s.info(n - 1).generation == 2
    assert s.state(0) is READY
    print(f"1,000,000-chain: submit/start/fail/retry in {time.perf_counter() - began:.2f}s")


def test_chain_submitted_tail_first_is_sealed_by_an_iterative_search() -> None:
    n = 200_000
    s = TaskScheduler(1)
    # Every dependency is absent when named, so start() must run its full cycle search.
    for i in range(n - 1, 0, -1):
        s.submit(i, (i - 1,))
    s.submit(0)
    s.start()
    assert s.state(0) is READY and s.state(n - 1) is PENDING


def test_long_chain_drains_in_order() -> None:
    n = 200_000
    s = TaskScheduler(4)
    for i in range(n):
        s.submit(i, (i - 1,) if i else ())
    s.start()
    assert drain(s) == list(range(n))
    assert s.stats().succeeded == n


def test_wide_random_dag_drains_in_a_topological_order() -> None:
    seed = 20240601
    print(f"seed={seed}")
    rng = random.Random(seed)
    graph: dict[Hashable, tuple[Hashable, ...]] = {
        i: tuple(rng.sample(range(i), min(i, rng.randrange(5)))) for i in range(2000)}
    ids = list(graph)
    rng.shuffle(ids)
    s = TaskScheduler(7)
    for i in ids:
        s.submit(i, graph[i])
    s.start()
    order = drain(s)
    position = {t: k for k, t in enumerate(order)}
    assert len(order) == len(graph)
    assert all(position[d] < position[t] for t, deps in graph.items() for d in deps)


def test_cycle_is_reported_at_start_with_a_path_per_component() -> None:
    graph: dict[Hashable, tuple[Hashable, ...]] = {
        "a": ("c",), "b": ("a",), "c": ("b",),  # a -> b -> c -> a
        "x": ("y",), "y": ("x",),  # a second component
        "z": ("a",),  # behind a cycle, on none
        "free": (),
    }
    s = TaskScheduler(2)
    for t, deps in graph.items():
        s.submit(t, deps)
    before = s.snapshot()
    with pytest.raises(graphlib.CycleError) as caught:
        s.start()
    error = caught.value
    assert isinstance(error, CycleError) and isinstance(error, GraphError)
    assert error.cycle == ["a", "b", "c", "a"]
    assert error.args[1] == error.cycle  # graphlib's convention
    assert len(error.cycles) == 2
    for cycle in error.cycles:
        assert_cycle_path(list(cycle), graph)
    assert {frozenset(c) for c in error.cycles} == {frozenset("abc"), frozenset("xy")}
    assert s.snapshot() == before
    assert s.stats().cycles_reported == 1
    s.check_invariants()


def test_a_hundred_thousand_node_cycle_is_reported_without_recursion() -> None:
    n = 100_000
    s = TaskScheduler(1)
    for i in range(n):
        s.submit(i, ((i - 1) % n,))
    with pytest.raises(CycleError) as caught:
        s.start()
    cycle = caught.value.cycle
    assert len(cycle) == n + 1 and cycle[0] == cycle[-1] == 0
    assert all(cycle[k + 1] == (cycle[k] + 1) % n for k in range(n))
    assert len(caught.value.cycles) == 1


def test_submit_after_start_that_closes_a_cycle_is_refused_with_the_cycle() -> None:
    s = started(1, {"a": (), "b": ("a",), "c": ("b",)})
    before = s.snapshot()
    with pytest.raises(CycleError) as caught:
        s.submit("a", ("c",))
    assert caught.value.cycle == ["a", "b", "c", "a"]
    assert_cycle_path(caught.value.cycle, {"a": ("c",), "b": ("a",), "c": ("b",)})
    assert s.snapshot() == before
    # A resubmission that keeps the graph acyclic is fine.
    assert s.submit("c", ("a",)) == 2
    s.check_invariants()


def test_unknown_dependencies_are_reported_at_start_naming_every_pair() -> None:
    s = TaskScheduler(1)
    s.submit("a", ("ghost", "b"))
    s.submit("b", ("ghost", "phantom"))
    s.submit("c", ("a",))
    with pytest.raises(UnknownDependencyError) as caught:
        s.start()
    assert caught.value.missing == (("a", "ghost"), ("b", "ghost"), ("b", "phantom"))
    assert not s.snapshot().started
    s.submit("ghost")
    s.submit("phantom")
    s.start()
    assert drain(s) == ["ghost", "phantom", "b", "a", "c"]


def test_unknown_dependency_after_start_is_refused() -> None:
    s = started(1, {"a": ()})
    before = s.snapshot()
    with pytest.raises(UnknownDependencyError) as caught:
        s.submit("b", ("a", "nope"))
    assert caught.value.missing == (("b", "nope"),)
    assert s.snapshot() == before


def test_two_dependencies_completing_together_release_the_join_once() -> None:
    s = started(2, {"a": (), "b": (), "c": ("a", "b")})
    claims = s.ready()
    assert [c.task_id for c in claims] == ["a", "b"]
    assert s.info("c").remaining_deps == 2
    s.complete("a", 1)
    assert (s.state("c"), s.info("c").remaining_deps) == (PENDING, 1)
    s.complete("b", 1)
    assert (s.state("c"), s.info("c").remaining_deps) == (READY, 0)
    assert [c.task_id for c in s.ready()] == ["c"]
    assert s.ready() == []


# ---------------------------------------------------------------------- failure, cancel


def test_failure_blocks_every_descendant_and_names_the_smallest_seq_cause() -> None:
    s = started(2, {"a": (), "x": (), "b": ("a",), "c": ("b",), "d": ("x", "c", "b"),
                    "free": ()}, track_endings=True)
    run(s, "a")
    s.fail("a", 1, error="boom")
    assert states(s) == {"a": FAILED, "x": READY, "b": BLOCKED, "c": BLOCKED, "d": BLOCKED,
                         "free": READY}
    assert s.info("a").error == "boom"
    assert s.info("b").blocked_by == "a"
    assert s.info("c").blocked_by == "b"
    assert s.info("d").blocked_by == "b"  # among dead-or-blocked deps b (seq 3) < c (seq 4)
    assert s.info("d").remaining_deps == 3  # frozen when it left pending
    assert s.pop_endings() == [("a", 1, FAILED), ("b", 1, BLOCKED), ("c", 1, BLOCKED),
                               ("d", 1, BLOCKED)]
    assert s.pop_endings() == []
    s.check_invariants()


def test_cancel_of_a_pending_task_blocks_its_descendants_only() -> None:
    s = started(1, {"root": (), "a": ("root",), "b": ("a",), "c": ("b",), "side": ("root",)})
    assert s.cancel("a") is CANCELLED
    assert states(s) == {"root": READY, "a": CANCELLED, "b": BLOCKED, "c": BLOCKED,
                         "side": PENDING}
    assert s.info("a").blocked_by is None
    assert drain(s) == ["root", "side"]
    assert s.cancel("a") is CANCELLED  # terminal: no step
    assert s.stats().cancelled == 1


def test_cancel_of_a_running_version_only_requests_a_cooperative_stop() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    g = run(s, "a")
    before_stats = s.stats()
    assert s.cancel("a") is RUNNING
    assert s.info("a").cancel_requested
    once = s.snapshot()
    assert s.cancel("a", g) is RUNNING  # already requested: no step
    assert s.snapshot() == once
    assert s.acknowledge_cancel("a", g) is CANCELLED
    assert states(s) == {"a": CANCELLED, "b": BLOCKED}
    assert s.info("a").cancel_requested  # kept once the version ended
    assert s.stats().cancelled == before_stats.cancelled + 1
    assert s.stats().run_time.count == 1


def test_running_version_may_acknowledge_a_cancel_nobody_requested() -> None:
    s = started(1, {"a": ()})
    g = run(s, "a")
    assert s.acknowledge_cancel("a", g) is CANCELLED
    assert not s.info("a").cancel_requested


def test_complete_after_a_cancel_request_succeeds() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    g = run(s, "a")
    s.cancel("a")
    assert s.complete("a", g, result=7) is SUCCEEDED
    assert s.state("b") is READY and s.info("a").result == 7


# ---------------------------------------------------------------------- callbacks


def test_duplicate_callbacks_return_the_terminal_state_and_change_nothing() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    g = run(s, "a")
    assert s.complete("a", g, "first") is SUCCEEDED
    after = s.snapshot()
    assert s.complete("a", g, "second") is SUCCEEDED
    assert s.fail("a", g) is SUCCEEDED
    assert s.acknowledge_cancel("a", g) is SUCCEEDED
    assert s.snapshot() == after
    assert s.info("a").result == "first"
    assert s.info("b").remaining_deps == 0  # released once, not twice
    assert s.stats().duplicate_callbacks == 3


def test_stale_generation_late_callback_changes_nothing() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    g1 = run(s, "a")
    s.fail("a", g1)
    g2 = s.retry("a")
    assert g2 == g1 + 1
    before = s.snapshot()
    for call in (s.complete, s.fail, s.acknowledge_cancel, s.cancel):
        with pytest.raises(StaleGenerationError) as caught:
            call("a", g1)
        assert (caught.value.task_id, caught.value.generation, caught.value.current) == (
            "a", g1, g2)
    assert str(caught.value) == "cancel('a', 1): generation 1 is stale, current is 2"
    assert s.snapshot() == before
    assert s.stats().stale_callbacks == 4


def test_stale_message_names_the_call_and_both_generations() -> None:
    s = started(1, {"b": ()})
    for _ in range(3):
        s.cancel("b")
        s.retry("b")
    with pytest.raises(StaleGenerationError, match=r"^complete\('b', 3\): generation 3 is "
                                                   r"stale, current is 4$"):
        s.complete("b", 3)


def test_callback_on_a_pending_or_ready_version_is_an_invalid_transition() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    for call in (s.complete, s.fail, s.acknowledge_cancel):
        for task_id in ("a", "b"):
            with pytest.raises(InvalidTransitionError):
                call(task_id, 1)


# ---------------------------------------------------------------------- resubmission


def test_resubmitting_a_pending_version_replaces_it_with_a_new_generation_and_seq() -> None:
    s = TaskScheduler(1)
    s.submit("a", ("x",))
    s.submit("x")
    s.submit("b")
    assert s.submit("a", ()) == 2
    view = s.snapshot().tasks["a"]
    assert (view.generation, view.seq, view.state, view.deps) == (2, 4, READY, frozenset())
    assert s.snapshot().next_seq == 5
    s.start()
    assert drain(s) == ["x", "b", "a"]


def test_resubmitting_a_succeeded_task_turns_waiting_dependents_back_to_pending() -> None:
    s = started(1, {"a": (), "b": ("a",), "c": ("a",)})
    g = run(s, "a")
    s.complete("a", g)
    run(s, "b")  # b running, c ready
    assert s.submit("a") == 2
    assert s.state("c") is PENDING and s.info("c").remaining_deps == 1
    assert s.state("b") is RUNNING  # running dependents are untouched
    s.complete("b", 1)
    assert drain(s) == ["a", "c"]
    s.check_invariants()


def test_resubmitting_with_a_dead_dependency_blocks_the_new_version_and_its_dependents() -> None:
    s = started(1, {"bad": (), "a": (), "b": ("a",)})
    s.cancel("bad")
    s.submit("a", ("bad",))
    assert states(s) == {"bad": CANCELLED, "a": BLOCKED, "b": BLOCKED}
    assert s.info("a").blocked_by == "bad" and s.info("b").blocked_by == "a"


def test_resubmitting_a_running_version_is_refused() -> None:
    s = started(1, {"a": ()})
    run(s, "a")
    before = s.snapshot()
    with pytest.raises(TaskRunningError):
        s.submit("a")
    assert s.snapshot() == before


# ---------------------------------------------------------------------- capacity, close


def test_zero_capacity_never_claims_and_counts_the_conflict() -> None:
    s = started(0, {"a": (), "b": ()})
    assert s.ready() == []
    assert s.ready(1) == []
    assert s.ready(0) == []  # asked for nothing: no conflict
    assert states(s) == {"a": READY, "b": READY}
    assert s.stats().claim_conflicts == 2


def test_ready_claims_no_more_than_the_free_slots() -> None:
    s = started(2, {t: () for t in "abcde"})
    assert len(s.ready()) == 2
    assert s.ready() == []
    s.complete("a", 1)
    assert [c.task_id for c in s.ready(5)] == ["c"]
    assert s.stats().claim_conflicts == 3


def test_close_cancels_waiting_versions_and_reports_every_id_once() -> None:
    s = started(1, {"a": (), "b": (), "c": ("a",), "d": ("b",)}, track_endings=True)
    run(s, "a")
    s.pop_endings()
    report = s.close()
    assert report.running == ("a",)
    assert report.cancelled == ("b", "c", "d")
    assert s.info("c").blocked_by is None
    assert s.pop_endings() == [("b", 1, CANCELLED), ("c", 1, CANCELLED), ("d", 1, CANCELLED)]
    assert s.ready() == []
    with pytest.raises(SchedulerClosedError):
        s.submit("e")
    with pytest.raises(SchedulerClosedError):
        s.retry("b")
    assert s.complete("a", 1) is SUCCEEDED  # a running version may still report
    again = s.close(cancel_pending=False)
    assert again.succeeded == ("a",) and again.cancelled == ("b", "c", "d")
    s.check_invariants()


def test_close_without_cancelling_keeps_waiting_versions() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    report = s.close(cancel_pending=False)
    assert (report.ready, report.pending) == (("a",), ("b",))
    assert s.ready() == []
    assert s.close() == report  # a second close changes nothing


def test_close_while_threads_are_claiming_stops_claims_and_loses_nothing() -> None:
    n = 3000
    s = started(4, {i: () for i in range(n)})
    claimed: list[Hashable] = []
    after_close: list[Hashable] = []
    closed = threading.Event()
    guard = threading.Lock()

    def worker() -> None:
        while True:
            was_closed = closed.is_set()
            claims = s.ready(2)
            with guard:
                claimed.extend(c.task_id for c in claims)
                if was_closed:
                    after_close.extend(c.task_id for c in claims)
            for c in claims:
                s.complete(c.task_id, c.generation)
            if was_closed:
                return

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.01)
    report = s.close()
    closed.set()
    for t in threads:
        t.join()
    assert after_close == []
    assert len(claimed) == len(set(claimed))
    final = s.close()
    everyone = final.succeeded + final.cancelled
    assert len(everyone) == n and set(everyone) == set(range(n))
    assert set(final.succeeded) == set(claimed)
    assert set(report.cancelled) == set(final.cancelled)
    s.check_invariants()


# ---------------------------------------------------------------------- retry


def test_retry_gives_the_task_and_descendants_it_blocked_new_versions() -> None:
    s = started(1, {"other": (), "a": (), "b": ("a",), "c": ("b",), "d": ("other", "b")},
                track_endings=True)
    s.cancel("other")  # d is blocked by other, not by a
    run(s, "a")
    s.fail("a", 1)
    assert s.info("c").blocked_by == "b" and s.info("d").blocked_by == "other"
    s.pop_endings()
    next_seq = s.snapshot().next_seq
    assert s.retry("a") == 2
    snap = s.snapshot().tasks
    assert [(t, snap[t].generation, snap[t].seq, snap[t].state) for t in "abc"] == [
        ("a", 2, next_seq, READY), ("b", 2, next_seq + 1, PENDING),
        ("c", 2, next_seq + 2, PENDING)]
    assert (snap["d"].state, snap["d"].generation) == (BLOCKED, 1)
    assert snap["b"].remaining_deps == 1 and snap["c"].remaining_deps == 1
    assert s.pop_endings() == []
    assert drain(s) == ["a", "b", "c"]
    assert s.stats().retried == 3
    s.check_invariants()


def test_retry_returns_the_tasks_generation_when_a_blocked_member_is_older() -> None:
    # b's version is older than a's (a was resubmitted), so b comes first among the renewed
    # versions; retry("a") still answers a's new generation, and records a.
    s = TaskScheduler(2)
    s.submit("a")
    s.submit("b", ("a",))
    s.submit("a")
    s.start()
    s.cancel("a")
    assert states(s) == {"b": TaskState.BLOCKED, "a": TaskState.CANCELLED}
    assert s.retry("a") == 3
    assert s.info("b").generation == 2 and s.info("a").generation == 3
    assert [t for t, _ in sorted(s.snapshot().tasks.items(), key=lambda kv: kv[1].seq)] == [
        "b", "a"]


def test_retry_of_a_version_whose_cause_is_still_dead_blocks_it_again() -> None:
    s = started(1, {"bad": (), "a": ("bad",)})
    s.cancel("bad")
    assert s.retry("a") == 2
    assert (s.state("a"), s.info("a").blocked_by) == (BLOCKED, "bad")


def test_retry_of_a_live_version_is_an_invalid_transition() -> None:
    s = started(1, {"a": (), "b": ("a",)})
    for task_id in ("a", "b"):
        with pytest.raises(InvalidTransitionError):
            s.retry(task_id)
    run(s, "a")
    with pytest.raises(InvalidTransitionError):
        s.retry("a")
    s.complete("a", 1)
    with pytest.raises(InvalidTransitionError):
        s.retry("a")


def test_retry_before_start_works_on_cancelled_versions() -> None:
    s = TaskScheduler(1)
    s.submit("a")
    s.submit("b", ("a",))
    s.cancel("a")
    assert s.state("b") is BLOCKED
    s.retry("a")
    s.start()
    assert drain(s) == ["a", "b"]


# ---------------------------------------------------------------------- bad input


def _bad_calls() -> list[tuple[str, Callable[[TaskScheduler], Any]]]:
    return [
        ("unhashable id", lambda s: s.submit(["x"])),
        ("deps not iterable", lambda s: s.submit("n", 5)),
        ("deps a string", lambda s: s.submit("n", "ab")),
        ("unhashable dep", lambda s: s.submit("n", (["x"],))),
        ("duplicate dep", lambda s: s.submit("n", ("a", "a"))),
        ("self dep", lambda s: s.submit("n", ("n",))),
        ("self dep on resubmit", lambda s: s.submit("a", ("b", "a"))),
        ("self dep on resubmit, no dependents", lambda s: s.submit("b", ("a", "b"))),
        ("fn not callable", lambda s: s.submit("n", (), 42)),
        ("generation a str", lambda s: s.complete("a", "1")),
        ("generation a bool", lambda s: s.fail("a", True)),
        ("generation a float", lambda s: s.acknowledge_cancel("a", 1.0)),
        ("cancel generation a bool", lambda s: s.cancel("a", True)),
        ("unhashable complete", lambda s: s.complete({}, 1)),
        ("unhashable cancel", lambda s: s.cancel([], None)),
        ("unhashable retry", lambda s: s.retry([])),
        ("unhashable state", lambda s: s.state([])),
        ("limit negative", lambda s: s.ready(-1)),
        ("limit a float", lambda s: s.ready(1.5)),
        ("limit a bool", lambda s: s.ready(True)),
        ("cancel_pending a str", lambda s: s.close("no")),
        ("cancel_pending an int", lambda s: s.close(0)),
        ("cancel_pending None", lambda s: s.close(None)),
    ]


@pytest.mark.parametrize(("case", "call"), _bad_calls(), ids=[c for c, _ in _bad_calls()])
def test_bad_input_is_an_invalid_argument_and_changes_nothing(
        case: str, call: Callable[[TaskScheduler], Any]) -> None:
    s = started(2, {"a": (), "b": ("a",)})
    run(s, "a")
    before, stats = s.snapshot(), s.stats()
    with pytest.raises(InvalidArgumentError) as caught:
        call(s)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
    assert s.snapshot() == before and s.stats() == stats
    s.check_invariants()


@pytest.mark.parametrize("value", [-1, 1.0, True, "2", None])
def test_bad_max_concurrency_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        TaskScheduler(value)


def test_close_with_a_truthy_cancel_pending_that_is_not_a_bool_cancels_nothing() -> None:
    s = TaskScheduler(1)
    s.submit("a")
    with pytest.raises(InvalidArgumentError, match=r"close\('no'\): cancel_pending"):
        s.close(cancel_pending="no")  # type: ignore[arg-type]
    assert s.state("a") is READY and not s.snapshot().closed
    assert s.close(cancel_pending=False).ready == ("a",)


@pytest.mark.parametrize("kwargs", [{"track_endings": "no"}, {"track_endings": 1},
                                    {"recorder": object()}])
def test_bad_constructor_flags_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        TaskScheduler(1, **kwargs)


# ---------------------------------------------------------------------- ids that raise


class Boom(Exception):
    """What a hostile id raises."""


class HashRaises:
    """An id whose ``__hash__`` raises."""

    def __hash__(self) -> int:
        raise Boom("__hash__")


class EqRaises:
    """An id that hashes as ``twin`` does and whose ``__eq__`` raises ``error``: every lookup
    that meets ``twin`` (or another id of that hash) raises."""

    def __init__(self, twin: Hashable, error: type[Exception] = Boom) -> None:
        self.twin = twin
        self.error = error

    def __hash__(self) -> int:
        return hash(self.twin)

    def __eq__(self, other: object) -> bool:
        raise self.error("__eq__")

    def __repr__(self) -> str:
        return f"EqRaises({self.twin!r})"


def _unstarted() -> TaskScheduler:
    s = TaskScheduler(2)
    s.submit("a")
    s.submit("x", ("m",))  # "m" never submitted: x waits in the dangling index
    s.submit("y", ("a", "x"))
    return s


def _running() -> TaskScheduler:
    s = started(2, {"a": (), "b": ("a",), "c": ()})
    run(s, "a")
    return s


def _raising_calls() -> list[tuple[str, Callable[[], TaskScheduler],
                                   Callable[[TaskScheduler], Any], type[Exception]]]:
    cases: list[tuple[str, Callable[[], TaskScheduler], Callable[[TaskScheduler], Any],
                      type[Exception]]] = []
    for when, setup in (("unstarted", _unstarted), ("started", _running)):
        cases += [
            (f"{when}: id hash", setup, lambda s: s.submit(HashRaises()), Boom),
            (f"{when}: id eq meets a task", setup, lambda s: s.submit(EqRaises("a")), Boom),
            (f"{when}: dep hash", setup, lambda s: s.submit("n", ("a", HashRaises())), Boom),
            (f"{when}: dep eq meets a task", setup,
             lambda s: s.submit("n", (EqRaises("a"),)), Boom),
            (f"{when}: dep eq meets a dep", setup,
             lambda s: s.submit("n", (EqRaises("z"), "z")), Boom),
            (f"{when}: dep TypeError eq meets a dep", setup,
             lambda s: s.submit("n", (EqRaises("z", TypeError), "z")), InvalidArgumentError),
            (f"{when}: resubmission dep eq meets a task", setup,
             lambda s: s.submit("c" if s.snapshot().started else "y", (EqRaises("a"),)), Boom),
            (f"{when}: complete", setup, lambda s: s.complete(EqRaises("a"), 1), Boom),
            (f"{when}: fail", setup, lambda s: s.fail(EqRaises("a"), 1), Boom),
            (f"{when}: cancel", setup, lambda s: s.cancel(EqRaises("a")), Boom),
            (f"{when}: retry", setup, lambda s: s.retry(EqRaises("a")), Boom),
            (f"{when}: state", setup, lambda s: s.state(EqRaises("a")), Boom),
        ]
    cases += [
        ("unstarted: id eq meets a dangling dep", _unstarted,
         lambda s: s.submit(EqRaises("m")), Boom),
        ("unstarted: dep eq meets a dangling dep", _unstarted,
         lambda s: s.submit("n", ("a", "new", EqRaises("m"))), Boom),
        ("unstarted: resubmission dep eq meets a dangling dep", _unstarted,
         lambda s: s.submit("x", ("a", EqRaises("m"))), Boom),
    ]
    return cases


@pytest.mark.parametrize(("case", "setup", "call", "error"), _raising_calls(),
                         ids=[c[0] for c in _raising_calls()])
def test_an_id_whose_hash_or_eq_raises_changes_nothing(
        case: str, setup: Callable[[], TaskScheduler], call: Callable[[TaskScheduler], Any],
        error: type[Exception]) -> None:
    s = setup()
    before, stats = s.snapshot(), s.stats()
    with pytest.raises(error):
        call(s)
    assert s.snapshot() == before and s.stats() == stats
    s.check_invariants()
    # and the scheduler goes on as if the call had never been made
    assert s.submit("later", ("a",)) == 1
    s.check_invariants()


def test_errors_are_instances_of_the_builtins_callers_catch() -> None:
    s = TaskScheduler(1)
    with pytest.raises(KeyError):
        s.state("nobody")
    with pytest.raises(InvalidTransitionError) as not_started:
        s.ready()
    assert isinstance(not_started.value, RuntimeError)
    s.submit("a")
    s.start()
    with pytest.raises(InvalidTransitionError):
        s.start()
    run(s, "a")
    with pytest.raises(TaskRunningError) as running:
        s.submit("a")
    assert isinstance(running.value, ConflictError) and isinstance(running.value, RuntimeError)
    with pytest.raises(StaleGenerationError) as stale:
        s.complete("a", 9)
    assert isinstance(stale.value, RuntimeError)
    with pytest.raises(UnknownDependencyError) as unknown:
        s.submit("b", ("zz",))
    assert isinstance(unknown.value, ValueError)
    with pytest.raises(UnknownTaskError) as missing:
        s.complete("zz", 1)
    assert isinstance(missing.value, KeyError) and str(missing.value) == (
        "complete('zz'): unknown task")
    s.close()
    with pytest.raises(SchedulerClosedError) as closed:
        s.submit("c")
    assert isinstance(closed.value, RuntimeError)
    for error in (not_started, running, stale, unknown, missing, closed):
        assert isinstance(error.value, SchedulerError)


# ---------------------------------------------------------------------- invariants


def test_invariant_names_are_the_spec_and_model_names() -> None:
    from refsched.model import INVARIANTS as MODEL_INVARIANTS

    assert set(INVARIANTS) == set(MODEL_INVARIANTS)
    assert len(INVARIANTS) == 7


def test_invariants_hold_after_every_step_of_random_runs() -> None:
    seed = random.randrange(2**32)
    print(f"replay with seed={seed}")
    rng = random.Random(seed)
    ids = list("abcdefg")
    for _ in range(60):
        s = TaskScheduler(rng.randrange(4))
        for _ in range(80):
            t = rng.choice(ids)
            op = rng.randrange(10)
            try:
                if op < 3:
                    s.submit(t, rng.sample([i for i in ids if i != t], rng.randrange(3)))
                elif op == 3:
                    s.start()
                elif op == 4:
                    s.ready(rng.choice([None, 1, 2]))
                elif op in (5, 6):
                    g = s.info(t).generation + rng.choice([0, 0, 0, -1])
                    rng.choice([s.complete, s.fail, s.acknowledge_cancel])(t, g)
                elif op == 7:
                    s.cancel(t)
                elif op == 8:
                    s.retry(t)
                elif rng.random() < 0.1:
                    s.close(rng.random() < 0.5)
            except SchedulerError:
                pass
            s.check_invariants()


def _corrupt(name: str) -> TaskScheduler:
    """A scheduler whose internal columns break exactly ``name``."""
    s = started(2, {"a": (), "b": ("a",), "c": ("b",)})
    a, b, c = (s._rows[t] for t in "abc")  # the row of each current version
    if name == "TypeOK":
        s._gen[b] = 0
    elif name == "AtMostOneClaimPerVersion":
        run(s, "a")
        s._claims[a] = 2
    elif name == "IndegreeInvariant":
        listed = s._dependents[a]
        assert listed is not None
        listed.remove(b)  # reverse index loses the edge b -> a
    elif name == "ConcurrencyBound":
        s._running += 1
    elif name == "BlockedHasCause":
        s.cancel("a")
        del s._blocked_by[c]
    elif name == "BlockedPropagated":
        run(s, "a")
        s._state[a] = 4  # failed, without Settle
        del s._stamp[a]
        s._running -= 1
    elif name == "SealedGraph":
        for t in "abc":
            s.complete(t, run(s, t))
        s._deps[a] = ("c",)
        s._dependents[c] = [a]
    return s


@pytest.mark.parametrize("name", INVARIANTS)
def test_check_invariants_catches_a_corrupted_structure(name: str) -> None:
    s = _corrupt(name)
    with pytest.raises(InvariantViolation) as caught:
        s.check_invariants()
    assert caught.value.invariant == name
    assert isinstance(caught.value, AssertionError)


def test_check_invariants_catches_a_ready_version_missing_from_the_heap() -> None:
    s = started(1, {"a": ()})
    s._heap.clear()
    with pytest.raises(InvariantViolation, match="IndegreeInvariant"):
        s.check_invariants()


def test_check_invariants_catches_a_cycle_smuggled_into_a_sealed_graph() -> None:
    s = TaskScheduler(1)
    s.submit("b", ("a",))  # names an absent dep: start() runs the full cycle search
    s.submit("a")
    s.start()
    for t in "ab":
        s.complete(t, run(s, t))
    a, b = s._rows["a"], s._rows["b"]
    s._deps[a] = ("b",)
    s._dependents[b] = [a]
    with pytest.raises(InvariantViolation, match=r"SealedGraph.*cycle"):
        s.check_invariants()


# ---------------------------------------------------------------------- memory


def _held(s: TaskScheduler) -> tuple[int, int]:
    """What the columns hold (rows, dependents entries and heap entries, live or not), and
    what of it is live (current versions, their edges, their ready heap entries)."""
    held = len(s._state) + s._entries + len(s._heap)
    edges = sum(len(s._deps[row]) for row in s._rows.values())
    live = len(s._rows) + edges + s._ready_count
    return held, live


@pytest.mark.slow
def test_resubmitting_the_same_ids_a_million_times_keeps_the_rows_bounded() -> None:
    # A chain a <- b <- c whose versions are replaced over and over, ready ones among them:
    # dead rows, dependents entries naming them and stale heap entries are garbage that the
    # compaction gives back, so what is held stays within twice what is live.
    s = started(3, {"a": (), "b": ("a",), "c": ("b",)})
    peak_rows = 0
    for i in range(1_000_000):
        t = "abc"[i % 3]
        s.submit(t, () if t == "a" else ("ab"[i % 3 - 1],))
        rows = len(s._state)
        if rows > peak_rows:
            peak_rows = rows
        if i % 1000 == 0:
            held, live = _held(s)
            assert held <= 2 * live, (i, held, live)
    assert s.stats().submitted == 1_000_003
    assert peak_rows <= 2 * 6  # 3 ids, 2 edges, 1 ready version
    s.check_invariants()


def test_rows_stay_bounded_through_claims_cancels_failures_and_retries() -> None:
    seed = random.randrange(2**32)
    print(f"replay with seed={seed}")
    rng = random.Random(seed)
    ids = [f"t{i}" for i in range(12)]
    s = TaskScheduler(3)
    for i, t in enumerate(ids):
        s.submit(t, rng.sample(ids[:i], min(i, 2)))
    s.start()
    for _ in range(20_000):
        t = rng.choice(ids)
        op = rng.randrange(6)
        try:
            if op == 0:
                s.submit(t, rng.sample(ids[:ids.index(t)], min(ids.index(t), 2)))
            elif op == 1:
                for claim in s.ready():
                    rng.choice([s.complete, s.fail])(claim.task_id, claim.generation)
            elif op == 2:
                s.cancel(t)
            elif op == 3:
                s.retry(t)
            else:
                s.submit(t, s.info(t).deps)
        except SchedulerError:
            continue
        if op in (0, 3, 4):  # a step that made versions also gave back any excess
            held, live = _held(s)
            assert held <= 2 * live, (held, live)
    assert len(s._state) <= 2 * _held(s)[1] + len(ids)  # cancels since add stale heap entries
    s.check_invariants()


def test_a_replaced_version_lets_go_of_its_function_and_result() -> None:
    import gc
    import weakref

    class Fn:
        def __call__(self) -> None:
            return None

    class Result:
        pass

    s = started(1, {"a": ()})
    fn, result = Fn(), Result()
    s.submit("a", (), fn)
    (claim,) = s.ready()
    s.complete("a", claim.generation, result)
    refs = [weakref.ref(fn), weakref.ref(result)]
    del fn, result, claim
    assert all(ref() is not None for ref in refs)
    s.submit("a")  # a new version: the old one's fn and result are no longer the scheduler's
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
    assert s.info("a").generation == 3


# ---------------------------------------------------------------------- threads


def test_concurrent_ready_never_double_claims_or_exceeds_max_concurrency() -> None:
    seed = 7
    rng = random.Random(seed)
    n, limit = 3000, 3
    graph: dict[Hashable, tuple[Hashable, ...]] = {
        i: tuple(rng.sample(range(i), min(i, rng.randrange(4)))) for i in range(n)}
    s = started(limit, graph)
    claimed: list[tuple[Hashable, int]] = []
    in_flight = 0
    peak = 0
    guard = threading.Lock()
    errors: list[BaseException] = []

    def worker(wseed: int) -> None:
        nonlocal in_flight, peak
        local = random.Random(wseed)
        try:
            while s.stats().succeeded < n:
                claims = s.ready(local.choice([None, 1, 2]))
                if not claims:
                    time.sleep(0)
                    continue
                with guard:
                    in_flight += len(claims)
                    peak = max(peak, in_flight)
                    claimed.extend((c.task_id, c.generation) for c in claims)
                for c in claims:
                    with guard:
                        in_flight -= 1
                    s.complete(c.task_id, c.generation)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(seed + k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(claimed) == len(set(claimed)) == n
    assert peak <= limit
    stats = s.stats()
    assert (stats.claimed, stats.succeeded, stats.duplicate_callbacks) == (n, n, 0)
    s.check_invariants()


# ---------------------------------------------------------------------- stats, endings


def test_stats_count_what_happened() -> None:
    s = started(1, {"a": (), "b": ("a",), "c": ()})
    g = run(s, "a")
    time.sleep(0.002)
    s.fail("a", g)
    s.cancel("c")
    stats = s.stats()
    assert isinstance(stats, SchedulerStats)
    assert (stats.submitted, stats.claimed, stats.failed, stats.blocked, stats.cancelled,
            stats.succeeded) == (3, 1, 1, 1, 1, 0)
    assert stats.run_time.count == 1 and stats.run_time.max >= 0.002
    assert stats.run_time.total == stats.run_time.max == stats.run_time.mean
    assert stats.ready_wait.count == 1 and stats.ready_wait.max >= 0
    with pytest.raises(AttributeError):
        stats.claimed = 5  # type: ignore[misc]


def test_pop_endings_is_empty_unless_tracking() -> None:
    s = started(1, {"a": ()})
    s.complete("a", run(s, "a"))
    assert s.pop_endings() == []


def test_endings_follow_the_order_things_happened() -> None:
    s = started(2, {"a": (), "b": ("a",), "c": (), "d": ("c",)}, track_endings=True)
    run(s, "a")
    s.complete("a", 1)
    s.cancel("c")
    run(s, "b")
    s.acknowledge_cancel("b", 1)
    assert s.pop_endings() == [("a", 1, SUCCEEDED), ("c", 1, CANCELLED), ("d", 1, BLOCKED),
                               ("b", 1, CANCELLED)]


def test_retry_follows_a_blocked_by_cycle_of_an_unstarted_graph_once() -> None:
    from refsched.model import ReferenceScheduler

    impl, model = TaskScheduler(1), ReferenceScheduler(1)
    for s in (impl, model):
        s.submit("b", ("a",))
        s.submit("a", ("x", "b"))
        s.submit("x")
        s.cancel("x")
    assert impl.info("a").blocked_by == "b" and impl.info("b").blocked_by == "a"
    assert impl.retry("a") == model.retry("a") == 2
    assert impl.snapshot() == model.snapshot()
    assert impl.info("b").generation == 2
    impl.check_invariants()


class _Steps:
    """A Recorder keeping (action, params, state after) for every spec step."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, dict[str, Any], Any]] = []

    def record(self, action: str, params: dict[str, Any], state: Any) -> None:
        self.steps.append((action, dict(params), state))


def _expected_stats(steps: list[tuple[str, dict[str, Any], Any]]) -> dict[str, int]:
    """The counters stats() must show, counted from the spec steps and the states they reach."""
    from refsched.types import Snapshot

    counts = dict.fromkeys(("submitted", "retried", "claimed", "succeeded", "failed",
                            "cancelled", "blocked", "stale_callbacks", "duplicate_callbacks"), 0)
    before = Snapshot()
    for action, params, after in steps:
        renewed = [t for t, v in after.tasks.items()
                   if t in before.tasks and before.tasks[t].generation != v.generation]
        ended = {t: v.state for t, v in after.tasks.items()
                 if v.state is not (before.tasks[t].state if t in before.tasks else None)
                 or (t in before.tasks and before.tasks[t].generation != v.generation)}
        if action == "Submit":
            counts["submitted"] += 1
        elif action == "Retry":
            counts["retried"] += len(renewed)
        elif action == "Claim":
            counts["claimed"] += params["k"]
        elif action == "StaleCallback":
            counts["stale_callbacks"] += 1
        elif action == "RepeatedCallback":
            counts["duplicate_callbacks"] += 1
        for state in ended.values():
            if state is TaskState.SUCCEEDED:
                counts["succeeded"] += 1
            elif state is TaskState.FAILED:
                counts["failed"] += 1
            elif state is TaskState.CANCELLED:
                counts["cancelled"] += 1
            elif state is TaskState.BLOCKED:
                counts["blocked"] += 1
        before = after
    return counts


def test_stats_count_what_the_spec_steps_did_on_every_corpus_trace() -> None:
    from refsched.verify.corpus import BUNDLE, traces_dir
    from refsched.verify.itf import read_traces
    from refsched.verify.replay import replay

    runs: list[tuple[TaskScheduler, _Steps]] = []

    def recorded(max_concurrency: int) -> TaskScheduler:
        steps = _Steps()
        scheduler = TaskScheduler(max_concurrency, recorder=steps)
        runs.append((scheduler, steps))
        return scheduler

    report = replay(read_traces(traces_dir() / BUNDLE, stride=10), recorded)
    assert report.ok, report.divergences
    assert len(runs) > 1000
    totals: dict[str, int] = {}
    for scheduler, steps in runs:
        stats = scheduler.stats()
        expected = _expected_stats(steps.steps)
        assert {name: getattr(stats, name) for name in expected} == expected, steps.steps
        for name, value in expected.items():
            totals[name] = totals.get(name, 0) + value
    assert all(totals.values()), totals  # every counter was exercised somewhere
