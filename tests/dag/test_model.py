"""The reference model on its own: the design document's cases, and the must-fail models."""

from __future__ import annotations

import graphlib
import itertools
from dataclasses import replace

import pytest

from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    StaleGenerationError,
    TaskRunningError,
    UnknownDependencyError,
)
from refsched.model import ACTIONS, ReferenceScheduler, violated, violated_by_step
from refsched.model.dag import actions as A
from refsched.types import TaskState


def states(m: ReferenceScheduler) -> dict[str, str]:
    return {t: v.state.value for t, v in m.snapshot().tasks.items()}


def diamond() -> ReferenceScheduler:
    m = ReferenceScheduler(2)
    m.submit("a")
    m.submit("b", ["a"])
    m.submit("c", ["a"])
    m.submit("d", ["b", "c"])
    m.start()
    return m


def test_two_dependencies_completing_together_release_the_join_once() -> None:
    m = diamond()
    (a,) = m.ready()
    m.complete("a", a.generation)
    assert [c.task_id for c in m.ready()] == ["b", "c"]
    m.complete("b", 1)
    assert states(m)["d"] == "pending"
    m.complete("c", 1)
    assert states(m)["d"] == "ready"
    assert m.snapshot().tasks["d"].remaining_deps == 0


def test_failure_blocks_every_unclaimed_descendant_with_its_cause() -> None:
    m = diamond()
    m.ready()
    m.fail("a", 1)
    tasks = m.snapshot().tasks
    assert {t: (v.state.value, v.blocked_by) for t, v in tasks.items()} == {
        "a": ("failed", None), "b": ("blocked", "a"), "c": ("blocked", "a"),
        "d": ("blocked", "b"),  # b and c both blocked: the one submitted first is the cause
    }


def test_retry_renews_the_failed_task_and_the_versions_it_blocked() -> None:
    m = diamond()
    m.ready()
    m.fail("a", 1)
    assert m.retry("a") == 2
    assert {t: (v.generation, v.state.value) for t, v in m.snapshot().tasks.items()} == {
        "a": (2, "ready"), "b": (2, "pending"), "c": (2, "pending"), "d": (2, "pending")}


def test_retry_leaves_versions_blocked_by_another_cause() -> None:
    m = ReferenceScheduler(2)
    m.submit("a")
    m.submit("x")
    m.submit("b", ["x"])
    m.start()
    m.ready()
    m.fail("x", 1)  # blocks b by x
    m.fail("a", 1)
    m.retry("a")
    assert states(m) == {"a": "ready", "x": "failed", "b": "blocked"}


def test_cycle_report_names_a_concrete_path() -> None:
    m = ReferenceScheduler(1)
    m.submit("a", ["c"])
    m.submit("b", ["a"])
    m.submit("c", ["b"])
    with pytest.raises(CycleError) as caught:
        m.start()
    cycle = caught.value.cycle
    assert isinstance(caught.value, graphlib.CycleError)
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["a", "b", "c"]
    tasks = m.snapshot().tasks
    assert all(x in tasks[y].deps for x, y in itertools.pairwise(cycle))
    assert not m.snapshot().started


def test_unknown_dependency_names_every_pair() -> None:
    m = ReferenceScheduler(1)
    m.submit("a", ["x", "y"])
    with pytest.raises(UnknownDependencyError) as caught:
        m.start()
    assert sorted(caught.value.missing) == [("a", "x"), ("a", "y")]


def test_refused_calls_change_nothing() -> None:
    m = diamond()
    (_a,) = m.ready()
    before = m.snapshot()
    for call, args, error in [
        ("submit", ("a",), TaskRunningError),
        ("submit", ("e", ["e"]), InvalidArgumentError),
        ("submit", ("e", ["a", "a"]), InvalidArgumentError),
        ("submit", ("e", ["zz"]), UnknownDependencyError),
        ("submit", (["unhashable"],), InvalidArgumentError),
        ("complete", ("a", 2), StaleGenerationError),
        ("complete", ("b", 1), InvalidTransitionError),
        ("start", (), InvalidTransitionError),
    ]:
        with pytest.raises(error):
            getattr(m, call)(*args)
        assert m.snapshot() == before, call


def test_zero_capacity_never_claims() -> None:
    m = ReferenceScheduler(0)
    m.submit("a")
    m.start()
    assert m.ready() == []
    assert states(m) == {"a": "ready"}


def test_close_cancels_waiting_versions_and_keeps_running_ones() -> None:
    m = diamond()
    m.ready()
    report = m.close()
    assert report.running == ("a",) and set(report.cancelled) == {"b", "c", "d"}
    assert m.ready() == []
    assert m.complete("a", 1) is TaskState.SUCCEEDED


def test_action_table_matches_the_spec_action_names() -> None:
    assert set(ACTIONS) == {"Submit", "SubmitOptional", "AddDeps", "Start", "Claim",
                            "Complete", "Fail", "Cancel", "AcknowledgeCancel", "Retry", "Close",
                            "StaleCallback", "RepeatedCallback"}


def test_a_model_without_settle_breaks_blocked_propagated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(A, "settle",
                        lambda tasks, ended=frozenset(), records=None: (dict(tasks), records))
    m = diamond()
    m.ready()
    m.fail("a", 1)
    assert "BlockedPropagated" in violated(m.snapshot(), 2)


def test_a_claim_of_the_newest_ready_version_breaks_claims_oldest_first() -> None:
    m = ReferenceScheduler(1)
    m.submit("a")
    m.submit("b")
    m.start()
    before = m.snapshot()
    m.ready()  # a, the oldest
    assert violated_by_step(before, m.snapshot()) == []
    b = before.tasks["b"]
    newest = replace(before, tasks={**before.tasks, "b": replace(
        b, state=TaskState.RUNNING, claims=1)})
    assert violated_by_step(before, newest) == ["ClaimsOldestFirst"]


def test_a_new_version_of_a_running_one_breaks_running_never_replaced() -> None:
    m = ReferenceScheduler(1)
    m.submit("a")
    m.start()
    m.ready()
    before = m.snapshot()
    a = before.tasks["a"]
    replaced = replace(before, next_seq=before.next_seq + 1, tasks={"a": replace(
        a, generation=2, state=TaskState.READY, claims=0, seq=before.next_seq)})
    assert violated(replaced, 1) == []
    assert violated_by_step(before, replaced) == ["RunningNeverReplaced"]
