"""The TaskScheduler's provenance: what each record says, what a bad argument or clock leaves,
and that a graph where nothing is blocked or cancelled never touches it."""

from __future__ import annotations

import pytest

from refsched import InvalidArgumentError, Runner, TaskScheduler, TaskState
from refsched.model import ReferenceScheduler
from refsched.types import Provenance, ProvenanceView


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def record(s: TaskScheduler | Runner, task_id: str) -> Provenance:
    """The provenance of ``task_id``'s current version, which must have one."""
    scheduler = s.scheduler if isinstance(s, Runner) else s
    found = scheduler.info(task_id).provenance
    assert found is not None, f"{task_id} has no provenance"
    return found


def chain() -> tuple[TaskScheduler, Clock]:
    clock = Clock()
    s = TaskScheduler(2, clock=clock)
    s.submit("a")
    s.submit("b", ["a"])
    s.submit("c", ["b"])
    s.submit("d", ["a"])
    s.start()
    s.ready()
    return s, clock


def test_a_failure_records_its_root_actor_reason_time_and_path_on_each_blocked_version() -> None:
    s, _ = chain()
    s.fail("a", 1, ValueError("x"), actor="worker-1", reason="crashed")
    assert s.info("a").provenance is None  # a failed version keeps no record of its own
    c = s.info("c").provenance
    assert c == Provenance("a", 1, TaskState.FAILED, ("a", "b", "c"), "worker-1", "crashed",
                           101.0)
    assert s.provenance("d") == Provenance("a", 1, TaskState.FAILED, ("a", "d"), "worker-1",
                                           "crashed", 101.0)
    assert s.snapshot().provenance is None
    assert dict(s.snapshot(provenance=True).records) == {
        "b": ProvenanceView("a", 1, TaskState.FAILED, ("a", "b")),
        "c": ProvenanceView("a", 1, TaskState.FAILED, ("a", "b", "c")),
        "d": ProvenanceView("a", 1, TaskState.FAILED, ("a", "d")),
    }


def test_a_cancel_of_a_shared_dependency_is_the_root_of_both_branches() -> None:
    s = TaskScheduler(1, clock=Clock())
    s.submit("shared")
    s.submit("left", ["shared"])
    s.submit("right", ["shared"])
    s.cancel("shared", actor="ops", reason="bad input")
    assert s.info("shared").provenance == Provenance(
        "shared", 1, TaskState.CANCELLED, ("shared",), "ops", "bad input", 101.0)
    assert [record(s, t).path for t in ("left", "right")] == [
        ("shared", "left"), ("shared", "right")]


def test_a_record_never_changes_while_its_version_is_current() -> None:
    s = TaskScheduler(2, clock=Clock())
    s.submit("a")
    s.submit("b")
    s.submit("c", ["a", "b"])
    s.start()
    s.ready()
    s.fail("a", 1, reason="first")
    first = s.info("c").provenance
    s.acknowledge_cancel("b", 1, reason="second")
    assert s.info("c").provenance == first
    s.submit("a")  # the root's id gets a new version: the record still names the old one
    assert s.info("c").provenance == first
    s.retry("c")  # a new version, blocked at once by the cancelled b: a record of its own
    assert (s.info("c").generation, record(s, "c").path) == (2, ("b", "c"))
    s.submit("b")
    s.retry("c")
    assert s.info("c").provenance is None  # waiting again


def test_close_records_its_cancels() -> None:
    s = TaskScheduler(1, clock=Clock())
    s.submit("a")
    s.close()
    assert s.info("a").provenance == Provenance("a", 1, TaskState.CANCELLED, ("a",), None,
                                                "close", 101.0)


@pytest.mark.parametrize("call", ["cancel", "fail", "acknowledge_cancel"])
@pytest.mark.parametrize("note", [{"actor": 1}, {"reason": b"x"}])
def test_a_bad_actor_or_reason_changes_nothing(call: str, note: dict[str, object]) -> None:
    s, clock = chain()
    before, read = s.snapshot(provenance=True), clock.now
    args = ("a",) if call == "cancel" else ("a", 1)
    with pytest.raises(InvalidArgumentError):
        getattr(s, call)(*args, **note)
    with pytest.raises(InvalidArgumentError):
        getattr(ReferenceScheduler(1), call)(*args, **note)
    assert s.snapshot(provenance=True) == before and clock.now == read
    s.check_invariants()


def test_a_clock_that_raises_changes_nothing() -> None:
    def broken() -> float:
        raise RuntimeError("no time")

    s = TaskScheduler(1, clock=broken)
    s.submit("a")
    s.submit("b", ["a"])
    s.start()
    before = s.snapshot(provenance=True)
    with pytest.raises(RuntimeError):
        s.cancel("a")
    (claim,) = s.ready()
    with pytest.raises(RuntimeError):
        s.fail("a", claim.generation)
    assert s.state("a") is TaskState.RUNNING
    assert s.snapshot(provenance=True).replace(tasks=before.tasks) == before
    s.check_invariants()
    with pytest.raises(InvalidArgumentError):
        TaskScheduler(1, clock=3)  # type: ignore[arg-type]


def test_records_survive_compaction() -> None:
    s = TaskScheduler(1, clock=Clock())
    s.submit("root")
    s.submit("child", ["root"])
    s.cancel("root")
    kept = s.info("child").provenance
    for _ in range(200):  # replaced versions: garbage that compaction drops
        s.submit("other")
    assert s.info("child").provenance == kept
    assert s.snapshot(provenance=True).records["child"].path == ("root", "child")


def test_a_run_where_nothing_is_blocked_or_cancelled_touches_no_record() -> None:
    s = TaskScheduler(4)
    for i in range(50):
        s.submit(i, [i - 1] if i else [])
    s.start()
    while (claims := s.ready()):
        for c in claims:
            s.complete(c.task_id, c.generation)
    assert s._provenance == {} and s._failures == {}


def test_a_runner_cancel_passes_actor_and_reason() -> None:
    with Runner(max_workers=1) as runner:
        runner.submit("a", lambda: 1)
        runner.submit("b", lambda: 2, ["a"])
        runner.cancel("a", actor="ops", reason="not needed")
        runner.start()
        runner.wait()
        assert record(runner, "b").path == ("a", "b")
        assert record(runner, "b").actor == "ops"


def test_the_reference_model_gives_the_same_records_but_the_time() -> None:
    both = [TaskScheduler(2, clock=Clock()), ReferenceScheduler(2)]
    for s in both:
        s.submit("a")
        s.submit("b", ["a"])
        s.submit("c")
        s.submit("d", ["c"])
        s.start()
        s.ready()
        s.fail("a", 1, actor="w", reason="boom")
        s.acknowledge_cancel("c", 1, actor="ops")
    mine, model = ([s.info(t) for t in "abcd"] for s in both)
    assert mine == model
    assert model[1].provenance == Provenance("a", 1, TaskState.FAILED, ("a", "b"), "w", "boom")
