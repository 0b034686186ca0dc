"""A Hypothesis state machine that drives the reference model and an implementation in lock-step.

Rules are the spec's actions (through the API calls that take them); ids and dependencies are
drawn from a small pool so collisions, cycles, resubmissions and stale callbacks happen. After
every call the two must agree on the result or on the error's type, and their snapshots must be
equal; the model's invariants, the action properties of the step and the implementation's own
``check_invariants()`` must hold.

``lockstep_machine(factory)`` builds the machine for any factory with the TaskScheduler API, so the
same machine checks refsched's scheduler and, in the must-fail tests, deliberately broken ones.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from refsched.model import ReferenceScheduler, violated, violated_by_step
from refsched.types import Snapshot, TaskState

IDS = ("a", "b", "c", "d")
ids = st.sampled_from(IDS)
dep_lists = st.lists(ids, max_size=3)  # may repeat or name the task itself: errors are checked too
generation_offsets = st.sampled_from((0, 0, 0, 0, -1, 1))


def _fn() -> None:
    """A placeholder task function: the scheduler never calls it."""


def _comparable(value: Any) -> Any:
    """Results as values that compare across implementations (claims by id and generation)."""
    if isinstance(value, list):
        return [(c.task_id, c.generation, c.fn) for c in value]
    if hasattr(value, "by_state"):
        return {state: sorted(map(repr, ids)) for state, ids in value.by_state().items()}
    return value


def _valid_cycle(cycle: list[Hashable], snapshot: Snapshot) -> bool:
    """Each entry a dependency of the next, closing on itself."""
    if len(cycle) < 2 or cycle[0] != cycle[-1]:
        return False
    tasks = dict(snapshot.tasks)
    return all(a in tasks[b].deps for a, b in zip(cycle, cycle[1:], strict=False) if b in tasks)


def lockstep_machine(factory: Callable[[int], Any],
                     on_example: Callable[[], None] | None = None) -> type[RuleBasedStateMachine]:
    """The lock-step machine comparing ``factory(max_concurrency)`` with the reference model.

    ``on_example`` is called as each example starts (for a progress display).
    """

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: ReferenceScheduler | None = None
            self.impl: Any = None

        @initialize(max_concurrency=st.integers(min_value=0, max_value=3))
        def create(self, max_concurrency: int) -> None:
            if on_example is not None:
                on_example()
            self.max_concurrency = max_concurrency
            self.model = ReferenceScheduler(max_concurrency)
            self.impl = factory(max_concurrency)

        # -- the comparison ----------------------------------------------------------------

        def both(self, method: str, *args: Any) -> Any:
            assert self.model is not None
            before = self.model.snapshot()
            expected: Any = None
            expected_error: BaseException | None = None
            try:
                expected = getattr(self.model, method)(*args)
            except Exception as e:  # the error itself is what is compared
                expected_error = e
            try:
                actual = getattr(self.impl, method)(*args)
            except Exception as actual_error:
                assert expected_error is not None, (
                    f"{method}{args!r}: implementation raised {actual_error!r}, "
                    f"model returned {expected!r}")
                assert type(actual_error) is type(expected_error), (
                    f"{method}{args!r}: implementation raised {actual_error!r}, "
                    f"model raised {expected_error!r}")
                cycle = getattr(actual_error, "cycle", None)
                if cycle is not None:
                    graph = self.model.snapshot()
                    assert _valid_cycle(cycle, graph), f"{method}: bad cycle report {cycle!r}"
            else:
                assert expected_error is None, (
                    f"{method}{args!r}: implementation returned {actual!r}, "
                    f"model raised {expected_error!r}")
                assert _comparable(actual) == _comparable(expected), (
                    f"{method}{args!r}: implementation returned {actual!r}, model {expected!r}")
            after = self.model.snapshot()
            assert violated_by_step(before, after) == [], f"{method}{args!r} broke a property"
            return expected

        @invariant()
        def snapshots_agree(self) -> None:
            if self.model is None:
                return
            model_state = self.model.snapshot()
            impl_state = self.impl.snapshot()
            assert impl_state == model_state, _diff(model_state, impl_state)

        @invariant()
        def invariants_hold(self) -> None:
            if self.model is None:
                return
            assert violated(self.model.snapshot(), self.max_concurrency) == []
            self.impl.check_invariants()

        # -- helpers -----------------------------------------------------------------------

        def current_generation(self, task_id: str) -> int:
            assert self.model is not None
            view = self.model.snapshot().tasks.get(task_id)
            return 1 if view is None else view.generation

        def ids_in(self, *states: TaskState) -> list[str]:
            assert self.model is not None
            return sorted(t for t, v in self.model.snapshot().tasks.items() if v.state in states)

        # -- rules: one per spec action ----------------------------------------------------

        @rule(task_id=ids, deps=dep_lists, with_fn=st.booleans())
        def submit(self, task_id: str, deps: list[str], with_fn: bool) -> None:
            self.both("submit", task_id, deps, _fn if with_fn else None)

        @rule()
        def start(self) -> None:
            self.both("start")

        @rule(limit=st.one_of(st.none(), st.integers(min_value=0, max_value=3)))
        def claim(self, limit: int | None) -> None:
            self.both("ready", limit)

        @rule(task_id=ids, offset=generation_offsets, succeed=st.booleans())
        def complete_or_fail(self, task_id: str, offset: int, succeed: bool) -> None:
            g = self.current_generation(task_id) + offset
            if succeed:
                self.both("complete", task_id, g, "result")
            else:
                self.both("fail", task_id, g, "error")

        @precondition(lambda self: self.model is not None and self.ids_in(TaskState.RUNNING))
        @rule(data=st.data(), how=st.sampled_from(("complete", "fail", "acknowledge_cancel")))
        def finish_running(self, data: st.DataObject, how: str) -> None:
            task_id = data.draw(st.sampled_from(self.ids_in(TaskState.RUNNING)))
            self.both(how, task_id, self.current_generation(task_id))

        @rule(task_id=ids, offset=st.one_of(st.none(), generation_offsets))
        def cancel(self, task_id: str, offset: int | None) -> None:
            g = None if offset is None else self.current_generation(task_id) + offset
            self.both("cancel", task_id, g)

        @rule(task_id=ids, offset=generation_offsets)
        def acknowledge_cancel(self, task_id: str, offset: int) -> None:
            self.both("acknowledge_cancel", task_id, self.current_generation(task_id) + offset)

        @precondition(lambda self: self.model is not None and self.ids_in(
            TaskState.FAILED, TaskState.CANCELLED, TaskState.BLOCKED))
        @rule(data=st.data())
        def retry_dead(self, data: st.DataObject) -> None:
            dead = self.ids_in(TaskState.FAILED, TaskState.CANCELLED, TaskState.BLOCKED)
            self.both("retry", data.draw(st.sampled_from(dead)))

        @rule(task_id=ids)
        def retry(self, task_id: str) -> None:
            self.both("retry", task_id)

        @rule(cancel_pending=st.booleans())
        def close(self, cancel_pending: bool) -> None:
            self.both("close", cancel_pending)

        @rule(task_id=ids)
        def introspect(self, task_id: str) -> None:
            self.both("state", task_id)
            self.both("info", task_id)

    return Lockstep


def _diff(expected: Snapshot, actual: Snapshot) -> str:
    """A readable difference between the model's snapshot and the implementation's."""
    lines = ["snapshots differ (model vs implementation):"]
    for name in ("started", "closed", "next_seq"):
        if getattr(expected, name) != getattr(actual, name):
            lines.append(f"  {name}: {getattr(expected, name)!r} vs {getattr(actual, name)!r}")
    for t in sorted(set(expected.tasks) | set(actual.tasks), key=repr):
        a, b = expected.tasks.get(t), actual.tasks.get(t)
        if a != b:
            lines.append(f"  {t!r}:\n    model {a!r}\n    impl  {b!r}")
    return "\n".join(lines)


def run_lockstep(factory: Callable[[int], Any], examples: int = 200, steps: int = 40,
                 on_example: Callable[[], None] | None = None) -> None:
    """Run the lock-step machine for ``examples`` examples; raise on the first disagreement.

    Hypothesis shrinks a failure to a short sequence of calls and prints it.
    """
    machine = lockstep_machine(factory, on_example)
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, print_blob=True,
        database=None))
