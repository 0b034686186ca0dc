"""The reference model's edge kinds and AddDeps, through ReferenceScheduler's API.

A dependency edge is required (the child waits for its parent to succeed, and is blocked if
the parent cannot) or optional (the child waits for its parent to end, in any way). The table
of docs/semantics.md, each row a test; then ``add_deps`` and its refusals, each of which
leaves the state as it was; then the action properties of the edge kinds, each shown failing
on a step that breaks it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    SchedulerError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.model import ReferenceScheduler
from refsched.model.dag.actions import optional_of, with_optional
from refsched.model.dag.invariants import (
    EDGE_ACTION_PROPERTIES,
    violated,
    violated_by_edge_step,
)
from refsched.types import Snapshot, TaskState

PENDING, READY, RUNNING, SUCCEEDED, FAILED, BLOCKED, CANCELLED = TaskState


def _parent_ends(end: str, kind: str) -> ReferenceScheduler:
    """g <- p <- c, the edge p <- c of ``kind``; then p ends as ``end`` says."""
    s = ReferenceScheduler(2)
    s.submit("g")
    s.submit("p", ["g"])
    if kind == "required":
        s.submit("c", ["p"])
    else:
        s.submit("c", optional=["p"])
    s.start()
    if end == "blocked":  # p's own required dependency fails
        s.ready()
        s.fail("g", 1)
        return s
    if end == "cancelled":
        s.cancel("p")
        return s
    s.ready()
    s.complete("g", 1)
    s.ready()
    if end == "failed":
        s.fail("p", 1)
    else:
        s.complete("p", 1)
    if end == "replaced":  # a new version of p, ready, is not the one that succeeded
        s.submit("p", ["g"])
    return s


# edge kind x how the parent ended -> the child's state (and what blocked it)
TABLE = [
    ("required", "succeeded", READY),
    ("required", "failed", BLOCKED),
    ("required", "cancelled", BLOCKED),
    ("required", "blocked", BLOCKED),
    ("required", "replaced", PENDING),
    ("optional", "succeeded", READY),
    ("optional", "failed", READY),
    ("optional", "cancelled", READY),
    ("optional", "blocked", READY),
    ("optional", "replaced", PENDING),
]


@pytest.mark.parametrize(("kind", "end", "fate"), TABLE)
def test_the_child_s_fate_by_edge_kind_and_parent_end(kind: str, end: str,
                                                      fate: TaskState) -> None:
    s = _parent_ends(end, kind)
    s.check_invariants()
    info = s.info("c")
    assert info.state is fate
    assert info.blocked_by == ("p" if fate is BLOCKED else None)
    if fate is not BLOCKED:  # a blocked version's count is frozen
        assert info.remaining_deps == (1 if fate is PENDING else 0)


def test_a_retried_optional_parent_is_waited_for_again() -> None:
    s = _parent_ends("failed", "optional")
    assert s.state("c") is READY
    s.retry("p")
    assert (s.state("c"), s.info("c").remaining_deps) == (PENDING, 1)
    s.check_invariants()
    s.ready()
    s.complete("p", 2)
    assert s.state("c") is READY


def test_a_version_blocked_by_settle_settles_its_optional_children() -> None:
    # x <- y (required) <- z (optional): x fails, Settle blocks y, and z becomes ready.
    s = ReferenceScheduler(1)
    s.submit("x")
    s.submit("y", ["x"])
    s.submit("z", optional=["y"])
    s.start()
    s.ready()
    s.fail("x", 1)
    assert (s.state("y"), s.state("z")) == (BLOCKED, READY)
    s.check_invariants()


def test_a_child_with_both_kinds_waits_for_each_kind_s_rule() -> None:
    s = ReferenceScheduler(2)
    s.submit("r")
    s.submit("o")
    s.submit("c", ["r"], optional=["o"])
    s.start()
    assert s.info("c").remaining_deps == 2
    s.ready()
    s.fail("o", 1)
    assert (s.state("c"), s.info("c").remaining_deps) == (PENDING, 1)
    s.complete("r", 1)
    assert s.state("c") is READY
    view = s.snapshot().tasks["c"]
    assert (view.deps, optional_of(view)) == ({"r", "o"}, {"o"})


def test_without_optional_edges_a_version_is_a_plain_version_view() -> None:
    # So the states of a scheduler without them compare equal with TaskScheduler.snapshot().
    s = ReferenceScheduler(1)
    s.submit("a")
    s.submit("b", ["a"])
    assert all(type(v).__name__ == "VersionView" for v in s.snapshot().tasks.values())


# -- add_deps ---------------------------------------------------------------------------------

def _pending_c() -> ReferenceScheduler:
    """a, b and d ready, c pending on a, e pending on c; started."""
    s = ReferenceScheduler(1)
    for t in ("a", "b", "d"):
        s.submit(t)
    s.submit("c", ["a"])
    s.submit("e", ["c"])
    s.start()
    return s


def test_add_deps_raises_the_count_by_the_edges_not_settled() -> None:
    s = _pending_c()
    s.ready()
    s.complete("a", 1)  # c ready
    s.submit("e", ["b"])  # e pending on b
    assert s.add_deps("e", ["a"]) is PENDING  # a succeeded: settled
    assert s.info("e").remaining_deps == 1
    assert s.add_deps("e", ["d"], optional=["c"]) is PENDING
    assert s.info("e").remaining_deps == 3
    assert optional_of(s.snapshot().tasks["e"]) == {"c"}
    s.check_invariants()


def test_add_deps_on_a_dead_required_dependency_blocks_the_version() -> None:
    s = _pending_c()
    s.ready()  # a running
    s.fail("a", 1)  # c blocked
    s.submit("e", ["b"])
    s.submit("f", ["e"])
    assert s.add_deps("e", ["c"]) is BLOCKED
    assert (s.info("e").blocked_by, s.state("f"), s.info("f").blocked_by) == (
        "c", BLOCKED, "e")
    s.check_invariants()


def test_add_deps_on_a_dead_optional_dependency_settles_it_at_once() -> None:
    s = _pending_c()
    s.ready()
    s.fail("a", 1)
    s.submit("e", ["b"])
    assert s.add_deps("e", optional=["a"]) is PENDING
    assert s.info("e").remaining_deps == 1  # b only: a has ended
    s.check_invariants()


def _ready_version() -> ReferenceScheduler:
    return _pending_c()


def _running_version() -> ReferenceScheduler:
    s = _pending_c()
    s.ready()
    return s


REFUSALS = [
    ("unknown task", lambda s: s.add_deps("zz", ["a"]), UnknownTaskError),
    ("no id", lambda s: s.add_deps("c", []), InvalidArgumentError),
    ("itself", lambda s: s.add_deps("c", ["c"]), InvalidArgumentError),
    ("a dep already", lambda s: s.add_deps("c", ["a"]), InvalidArgumentError),
    ("listed twice", lambda s: s.add_deps("c", ["b"], optional=["b"]), InvalidArgumentError),
    ("not an iterable", lambda s: s.add_deps("c", "b"), InvalidArgumentError),
    ("ready", lambda s: s.add_deps("a", ["b"]), InvalidTransitionError),
    ("unknown id after start", lambda s: s.add_deps("c", ["zz"]), UnknownDependencyError),
    ("a cycle", lambda s: s.add_deps("c", ["e"]), CycleError),
]


@pytest.mark.parametrize(("case", "call", "error"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_add_deps_refuses_with_a_typed_error_and_changes_nothing(
        case: str, call: object, error: type[SchedulerError]) -> None:
    s = _pending_c()
    before = (s.snapshot(), list(s.history))
    with pytest.raises(error, match=r"add_deps\('(c|zz|a)'\)"):
        call(s)  # type: ignore[operator]
    assert (s.snapshot(), s.history) == before


@pytest.mark.parametrize("make", [_running_version, _ready_version])
def test_add_deps_refuses_a_version_that_is_not_pending(make: object) -> None:
    s = make()  # type: ignore[operator]
    task = "a"
    before = s.snapshot()
    with pytest.raises(InvalidTransitionError, match="not pending"):
        s.add_deps(task, ["b"])
    assert s.snapshot() == before


def test_add_deps_refuses_an_ended_version_and_a_closed_scheduler() -> None:
    s = _running_version()
    s.complete("a", 1)
    with pytest.raises(InvalidTransitionError, match="succeeded, not pending"):
        s.add_deps("a", ["b"])
    s.submit("e", ["b"])
    s.close(cancel_pending=False)
    before = s.snapshot()
    with pytest.raises(SchedulerClosedError):
        s.add_deps("e", ["d"])
    assert s.snapshot() == before


def test_submit_refuses_an_id_both_required_and_optional() -> None:
    s = ReferenceScheduler(1)
    s.submit("a")
    with pytest.raises(InvalidArgumentError, match="listed twice"):
        s.submit("b", ["a"], optional=["a"])
    with pytest.raises(InvalidArgumentError, match="optional must be an iterable"):
        s.submit("b", optional=3)  # type: ignore[arg-type]
    assert set(s.snapshot().tasks) == {"a"}


def test_optional_edges_before_start_may_name_ids_not_yet_submitted() -> None:
    s = ReferenceScheduler(1)
    s.submit("c", optional=["p"])  # p absent: not ended, so c waits
    assert (s.state("c"), s.info("c").remaining_deps) == (PENDING, 1)
    s.submit("p")
    s.start()
    s.ready()
    s.fail("p", 1)
    assert s.state("c") is READY
    s.check_invariants()


# -- The action properties of the edge kinds can fail -------------------------------------------

def _optional_child() -> Snapshot:
    """p running; c pending on p through an optional edge."""
    s = ReferenceScheduler(1)
    s.submit("p")
    s.submit("c", optional=["p"])
    s.start()
    s.ready()
    return s.snapshot()


def test_a_child_ready_before_its_optional_parent_ended_is_caught() -> None:
    before = _optional_child()
    c = before.tasks["c"]
    after = before.replace(tasks={**before.tasks, "c": replace(c, state=READY, remaining_deps=0)})
    assert violated_by_edge_step(before, after) == ["ReadyOnlyAfterDepsSettled"]


def test_an_edge_added_to_a_ready_version_is_caught() -> None:
    before = _optional_child()
    p = before.tasks["p"]
    after = before.replace(tasks={**before.tasks, "p": replace(p, deps=frozenset({"c"}))})
    assert violated_by_edge_step(before, after) == ["EdgesAddedOnlyToPending"]


def test_a_child_blocked_by_its_optional_parent_is_caught() -> None:
    before = _optional_child()
    p, c = before.tasks["p"], before.tasks["c"]
    after = before.replace(tasks={"p": replace(p, state=FAILED),
                                  "c": replace(c, state=BLOCKED, blocked_by="p")})
    assert violated_by_edge_step(before, after) == ["OptionalParentNeverBlocks"]
    assert violated(after, 1) == []  # no invariant sees it: the step does


def test_a_count_that_forgets_an_optional_edge_is_caught() -> None:
    s = _optional_child()
    c = s.tasks["c"]
    wrong = s.replace(tasks={**s.tasks, "c": with_optional(
        replace(c, state=READY, remaining_deps=0), optional_of(c))})
    assert violated(wrong, 1) == ["IndegreeInvariant"]


def test_every_edge_action_property_has_a_test_here() -> None:
    assert set(EDGE_ACTION_PROPERTIES) == {
        "ReadyOnlyAfterDepsSettled", "EdgesAddedOnlyToPending", "OptionalParentNeverBlocks"}
