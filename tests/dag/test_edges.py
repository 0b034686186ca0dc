"""Edge kinds and ``add_deps`` on the TaskScheduler and the Runner: every cell of the truth
table (edge kind x parent end state -> the child's fate), the input summary, and add_deps's
refusals, on the production code (lock-step compares it with the model on random runs; these
pin each cell by name)."""

from __future__ import annotations

import threading

import pytest

from refsched import Runner, TaskScheduler
from refsched.errors import (
    BlockedError,
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import TaskState

S = TaskState


def _ended(sched: TaskScheduler, parent: str, how: str) -> None:
    """Bring the running or waiting ``parent`` to the end state ``how``."""
    if how == "succeeded":
        (claim,) = sched.ready(1)
        sched.complete(parent, claim.generation)
    elif how == "failed":
        (claim,) = sched.ready(1)
        sched.fail(parent, claim.generation, ValueError("parent"))
    elif how == "cancelled":
        sched.cancel(parent)
    elif how == "blocked":
        (claim,) = sched.ready(1)
        sched.fail("root", claim.generation, ValueError("root"))
    else:  # replaced after succeeding: the child waits for the new version
        (claim,) = sched.ready(1)
        sched.complete(parent, claim.generation)
        sched.submit(parent)


# (edge kind, parent's end) -> the child's state after it
TRUTH_TABLE = {
    ("required", "succeeded"): S.READY,
    ("required", "failed"): S.BLOCKED,
    ("required", "cancelled"): S.BLOCKED,
    ("required", "blocked"): S.BLOCKED,
    ("required", "replaced"): S.PENDING,
    ("optional", "succeeded"): S.READY,
    ("optional", "failed"): S.READY,
    ("optional", "cancelled"): S.READY,
    ("optional", "blocked"): S.READY,
    ("optional", "replaced"): S.PENDING,
}


@pytest.mark.parametrize(("kind", "end"), TRUTH_TABLE, ids=lambda v: str(v))
def test_truth_table_cell(kind: str, end: str) -> None:
    sched = TaskScheduler(1)
    if end == "blocked":
        sched.submit("root")
        sched.submit("parent", ["root"])
    else:
        sched.submit("parent")
    if kind == "required":
        sched.submit("child", ["parent"])
    else:
        sched.submit("child", optional=["parent"])
    sched.start()
    _ended(sched, "parent", end)
    assert sched.state("child") is TRUTH_TABLE[kind, end]
    info = sched.info("child")
    assert info.optional == (frozenset({"parent"}) if kind == "optional" else frozenset())
    assert info.blocked_by == ("parent" if TRUTH_TABLE[kind, end] is S.BLOCKED else None)
    sched.check_invariants()


def test_an_optional_failure_reaches_the_input_summary_and_a_required_edge_still_waits() -> None:
    sched = TaskScheduler(2)
    sched.submit("opt")
    sched.submit("req")
    sched.submit("child", ["req"], optional=["opt"])
    sched.start()
    claims = {c.task_id: c for c in sched.ready()}
    error = ValueError("optional parent failed")
    sched.fail("opt", claims["opt"].generation, error)
    assert sched.state("child") is S.PENDING  # the required parent has not succeeded
    assert sched.input_summary("child")["opt"].error is error
    sched.complete("req", claims["req"].generation)
    (claim,) = sched.ready()
    assert claim.task_id == "child"
    summary = sched.input_summary("child")
    assert summary["opt"].state is S.FAILED and summary["opt"].error is error
    sched.submit("opt")  # a new version of the parent: the running child's summary stays
    assert sched.input_summary("child")["opt"].state is S.FAILED


def test_blocking_passes_an_optional_edge_by_and_goes_on_through_required_ones() -> None:
    # root -> a (required) -> b (optional on a) -> c (required on b)
    sched = TaskScheduler(1)
    sched.submit("root")
    sched.submit("a", ["root"])
    sched.submit("b", optional=["a"])
    sched.submit("c", ["b"])
    sched.submit("d", ["a"])  # required all the way: blocked two levels down
    sched.submit("e", ["d"])
    sched.start()
    (claim,) = sched.ready()
    sched.fail("root", claim.generation)
    assert [sched.state(t) for t in "abcde"] == [S.BLOCKED, S.READY, S.PENDING, S.BLOCKED,
                                                 S.BLOCKED]
    assert sched.info("e").blocked_by == "d"


def test_add_deps_raises_the_count_and_refuses_what_is_not_pending() -> None:
    sched = TaskScheduler(1)
    sched.submit("a")
    sched.submit("b")
    sched.submit("c", ["a"])
    sched.start()
    assert sched.add_deps("c", ["b"]) is S.PENDING
    assert sched.info("c").remaining_deps == 2
    (claim,) = sched.ready(1)  # a
    sched.complete("a", claim.generation)
    assert sched.state("c") is S.PENDING  # still waits for b
    before = sched.snapshot()
    with pytest.raises(InvalidTransitionError, match="not pending"):
        sched.add_deps("b", ["a"])  # ready
    with pytest.raises(UnknownTaskError):
        sched.add_deps("nobody", ["a"])
    with pytest.raises(InvalidArgumentError, match="no dependency"):
        sched.add_deps("c")
    with pytest.raises(InvalidArgumentError, match="already"):
        sched.add_deps("c", ["a"])
    with pytest.raises(InvalidArgumentError, match="itself"):
        sched.add_deps("c", ["c"])
    with pytest.raises(InvalidArgumentError):
        sched.add_deps("c", ["b"], optional=["b"])
    with pytest.raises(InvalidArgumentError):
        sched.add_deps("c", "b")
    with pytest.raises(UnknownDependencyError):
        sched.add_deps("c", ["zz"])
    sched.submit("d", ["c"])
    before = sched.snapshot()
    with pytest.raises(CycleError) as raised:
        sched.add_deps("c", ["d"])
    assert raised.value.cycle[0] == raised.value.cycle[-1]
    assert sched.snapshot() == before
    sched.close()
    with pytest.raises(SchedulerClosedError):
        sched.add_deps("d", ["a"])
    sched.check_invariants()


def test_add_deps_of_a_dead_required_parent_blocks_and_of_a_dead_optional_one_does_not() -> None:
    sched = TaskScheduler(1)
    sched.submit("gone")
    sched.submit("x")
    sched.submit("y", ["x"])
    sched.submit("z", ["x"])
    sched.cancel("gone")
    assert sched.add_deps("y", ["gone"]) is S.BLOCKED
    assert sched.info("y").blocked_by == "gone"
    assert sched.add_deps("z", optional=["gone"]) is S.PENDING
    assert sched.info("z").remaining_deps == 1
    sched.check_invariants()


def test_runner_runs_the_table_and_hands_functions_their_inputs() -> None:
    seen: dict[str, object] = {}

    def boom() -> None:
        raise ValueError("optional parent")

    def child(inputs: dict) -> str:  # type: ignore[type-arg]
        seen.update(inputs)
        return "ran"

    with Runner(2) as runner:
        runner.submit("opt", boom)
        runner.submit("req", lambda: 1)
        runner.submit("child", child, ["req"], optional=["opt"])
        blocked = runner.submit("blocked", lambda: 2, ["opt"])
        runner.start()
        assert runner.wait(10)
        assert runner.future("child").result() == "ran"
        assert isinstance(blocked.exception(), BlockedError)
    outcome = seen["opt"]
    assert outcome.state is S.FAILED  # type: ignore[attr-defined]
    assert str(outcome.error) == "optional parent"  # type: ignore[attr-defined]


class _Inputs:
    """A callable object that takes ``inputs`` (the runner reads its signature, not its code)."""

    def __init__(self) -> None:
        self.seen: dict[str, object] = {}

    def __call__(self, *, inputs: dict) -> None:  # type: ignore[type-arg]
        self.seen.update(inputs)


def test_runner_hands_token_and_inputs_each_to_the_functions_that_take_them() -> None:
    got: dict[str, object] = {}

    def both(token: object, inputs: dict) -> None:  # type: ignore[type-arg]
        got["both"] = (type(token).__name__, sorted(inputs))

    def token_only(token: object) -> None:
        got["token_only"] = type(token).__name__

    def neither(*args: object, **kwargs: object) -> None:  # takes them only as **kwargs
        got["neither"] = (args, kwargs)

    obj = _Inputs()
    with Runner(2) as runner:
        runner.submit("p", lambda: 1)
        runner.submit("both", both, optional=["p"])
        runner.submit("token_only", token_only, optional=["p"])
        runner.submit("neither", neither, optional=["p"])
        runner.submit("obj", obj, optional=["p"])
        runner.start()
        assert runner.wait(10)
        for t in ("both", "token_only", "neither", "obj"):
            runner.future(t).result()
    assert got == {"both": ("CancelToken", ["p"]), "token_only": "CancelToken",
                   "neither": ((), {})}
    assert list(obj.seen) == ["p"] and obj.seen["p"].state is S.SUCCEEDED  # type: ignore[attr-defined]


def test_runner_add_deps_is_refused_once_a_worker_claimed_the_version() -> None:
    release = threading.Event()
    started = threading.Event()

    def hold() -> None:
        started.set()
        release.wait(10)

    with Runner(1) as runner:
        runner.submit("held", hold)
        runner.submit("later", lambda: None)
        runner.start()
        assert started.wait(10)
        with pytest.raises(InvalidTransitionError):
            runner.add_deps("held", ["later"])  # running
        release.set()
        assert runner.wait(10)


def test_runner_add_deps_blocks_the_future_when_the_new_parent_is_dead() -> None:
    with Runner(1) as runner:
        runner.submit("dead", lambda: None)
        runner.submit("first", lambda: None)
        waiting = runner.submit("waiting", lambda: None, ["first"])
        runner.cancel("dead")
        assert runner.add_deps("waiting", ["dead"]) is S.BLOCKED
        assert isinstance(waiting.exception(timeout=5), BlockedError)
        runner.start()
        assert runner.wait(10)
