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

import itertools
from collections import Counter
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

from refsched.model import ACTIONS, ReferenceScheduler, violated, violated_by_step
from refsched.types import Snapshot, TaskState

IDS = ("a", "b", "c", "d")
NEVER_SUBMITTED = "z"  # drawn now and then where an id is picked, for the unknown-id refusals
ids = st.sampled_from(IDS)
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


def _valid_cycle(cycle: list[Hashable], edges: dict[Hashable, frozenset[Hashable]]) -> bool:
    """Each entry a dependency of the next (per ``edges``: id -> deps), closing on itself."""
    if len(cycle) < 2 or cycle[0] != cycle[-1]:
        return False
    return all(b in edges and a in edges[b] for a, b in itertools.pairwise(cycle))


class Ledger:
    """What a lock-step run exercised: calls, the spec actions taken, and notable steps.

    A check that never takes an action cannot find a bug in it; the ledger shows which were
    taken and how often.
    """

    EVENTS = (
        "refused call",  # the call raised and the state did not change
        "Settle blocked a chain",  # one step blocked versions at two or more depths
        "Retry renewed several versions",  # the retried task and a blocked descendant
        "Submit re-pended a dependent",  # a succeeded dep was replaced under a ready version
        "cycle refused",  # start() or submit() raised CycleError
    )

    def __init__(self) -> None:
        self.examples = 0
        self.calls = 0
        self.actions: Counter[str] = Counter()
        self.events: Counter[str] = Counter()

    def record(self, before: Snapshot, taken: list[str], after: Snapshot,
               error: BaseException | None) -> None:
        self.calls += 1
        self.actions.update(taken)
        if error is not None:
            self.events["refused call"] += 1
            if type(error).__name__ == "CycleError":
                self.events["cycle refused"] += 1
        newly_blocked = {t for t, v in after.tasks.items() if v.state is TaskState.BLOCKED
                         and (t not in before.tasks or before.tasks[t].state is not v.state)}
        if any(after.tasks[t].blocked_by in newly_blocked for t in newly_blocked):
            self.events["Settle blocked a chain"] += 1
        if "Retry" in taken and sum(1 for t, v in after.tasks.items()
                                    if before.tasks[t].generation != v.generation) > 1:
            self.events["Retry renewed several versions"] += 1
        if "Submit" in taken and any(
                before.tasks[t].state is TaskState.READY and v.state is TaskState.PENDING
                for t, v in after.tasks.items() if t in before.tasks):
            self.events["Submit re-pended a dependent"] += 1

    def missing(self) -> list[str]:
        """Spec actions and notable steps the run never exercised."""
        from refsched.model import ACTIONS

        return ([a for a in ACTIONS if not self.actions[a]]
                + [e for e in self.EVENTS if not self.events[e]])

    def summary(self) -> str:
        actions = ", ".join(f"{name} {count:,}" for name, count in sorted(self.actions.items()))
        events = ", ".join(f"{name} {self.events[name]:,}" for name in self.EVENTS)
        return f"{self.calls:,} calls; actions: {actions}; {events}"


def lockstep_machine(factory: Callable[[int], Any],
                     on_example: Callable[[], None] | None = None,
                     ledger: Ledger | None = None) -> type[RuleBasedStateMachine]:
    """The lock-step machine comparing ``factory(max_concurrency)`` with the reference model.

    ``on_example`` is called as each example starts (for a progress display); ``ledger``, when
    given, records every call.
    """

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: ReferenceScheduler | None = None
            self.impl: Any = None
            self.calls = 0

        @initialize(max_concurrency=st.sampled_from((2, 2, 3, 1, 0)),
                    graph=st.lists(st.tuples(ids, st.lists(ids, unique=True, max_size=2)),
                                   min_size=2, max_size=5),
                    start_now=st.booleans())
        def create(self, max_concurrency: int, graph: list[tuple[str, list[str]]],
                   start_now: bool) -> None:
            """A fresh pair of schedulers, given the same initial graph, started or not."""
            if on_example is not None:
                on_example()
            if ledger is not None:
                ledger.examples += 1
            self.max_concurrency = max_concurrency
            self.model = ReferenceScheduler(max_concurrency)
            self.impl = factory(max_concurrency)
            named = {task_id for task_id, _ in graph}
            for task_id, deps in graph:  # deps among the graph's ids, so start() mostly succeeds
                self.both("submit", task_id, [d for d in deps if d in named and d != task_id])
            if start_now:
                self.both("start")

        # -- the comparison ----------------------------------------------------------------

        def both(self, method: str, *args: Any) -> Any:
            assert self.model is not None
            self.calls += 1
            before = self.model.snapshot()
            history_length = len(self.model.history)
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
                    edges = {t: v.deps for t, v in before.tasks.items()}
                    if method == "submit":  # the cycle runs through the refused new edges
                        edges[args[0]] = frozenset(args[1])
                    assert _valid_cycle(cycle, edges), f"{method}: bad cycle report {cycle!r}"
            else:
                assert expected_error is None, (
                    f"{method}{args!r}: implementation returned {actual!r}, "
                    f"model raised {expected_error!r}")
                assert _comparable(actual) == _comparable(expected), (
                    f"{method}{args!r}: implementation returned {actual!r}, model {expected!r}")
            after = self.model.snapshot()
            if ledger is not None:
                taken = [name for name, _ in self.model.history[history_length:]]
                ledger.record(before, taken, after, expected_error)
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

        def enabled_for(self, action: str) -> list[str]:
            """Ids for which the model's action is enabled (callbacks at the current generation)."""
            if self.model is None:
                return []
            s = self.model.snapshot()
            act = ACTIONS[action]
            if action in ("Complete", "Fail", "AcknowledgeCancel"):
                return sorted(t for t, v in s.tasks.items() if act.enabled(s, t, v.generation))
            return sorted(t for t in s.tasks if act.enabled(s, t))

        # -- rules: one per spec action ----------------------------------------------------
        # Most rules pick among submitted ids so calls do something; a few take any id or
        # malformed arguments so the refusals are compared too. Close is held back until some
        # calls were made, or it would end most runs early.

        def known(self) -> list[str]:
            """Submitted ids, each four times as likely as one never submitted."""
            assert self.model is not None
            return [*sorted(self.model.snapshot().tasks) * 4, NEVER_SUBMITTED]

        @rule(task_id=ids, deps=st.lists(ids, unique=True, max_size=2), with_fn=st.booleans())
        def submit(self, task_id: str, deps: list[str], with_fn: bool) -> None:
            deps = [d for d in deps if d != task_id]  # submit_malformed covers self-dependency
            self.both("submit", task_id, deps, _fn if with_fn else None)

        @rule(task_id=ids, deps=st.lists(ids, min_size=1, max_size=3), self_dep=st.booleans())
        def submit_malformed(self, task_id: str, deps: list[str], self_dep: bool) -> None:
            # a self-dependency, or a dependency listed twice
            self.both("submit", task_id, [task_id] if self_dep else [*deps, deps[0]])

        @precondition(lambda self: self.model is not None and not self.model.snapshot().started)
        @rule()
        def start(self) -> None:  # also when Start is not enabled: its refusals are compared
            self.both("start")

        @rule(limit=st.sampled_from((None, None, 1, 1, 2, 0, 3)))
        def claim(self, limit: int | None) -> None:
            self.both("ready", limit)

        @precondition(lambda self: self.enabled_for("Complete"))
        @rule(data=st.data(), how=st.sampled_from(("complete", "fail", "acknowledge_cancel")))
        def finish_running(self, data: st.DataObject, how: str) -> None:
            task_id = data.draw(st.sampled_from(self.enabled_for("Complete")))
            self.both(how, task_id, self.current_generation(task_id))

        @precondition(lambda self: self.model is not None)
        @rule(data=st.data(), offset=generation_offsets,
              how=st.sampled_from(("complete", "fail", "acknowledge_cancel", "cancel")))
        def callback(self, data: st.DataObject, offset: int, how: str) -> None:
            task_id = data.draw(st.sampled_from(self.known()))
            self.both(how, task_id, self.current_generation(task_id) + offset)

        @precondition(lambda self: self.model is not None)
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            self.both("cancel", data.draw(st.sampled_from(self.known())))

        @precondition(lambda self: self.enabled_for("Retry"))
        @rule(data=st.data())
        def retry(self, data: st.DataObject) -> None:
            self.both("retry", data.draw(st.sampled_from(self.enabled_for("Retry"))))

        @precondition(lambda self: self.model is not None)
        @rule(data=st.data())
        def retry_any(self, data: st.DataObject) -> None:
            self.both("retry", data.draw(st.sampled_from(self.known())))

        @precondition(lambda self: self.calls >= 30)
        @rule(cancel_pending=st.booleans())
        def close(self, cancel_pending: bool) -> None:
            self.both("close", cancel_pending)

        @precondition(lambda self: self.model is not None)
        @rule(data=st.data())
        def introspect(self, data: st.DataObject) -> None:
            task_id = data.draw(st.sampled_from(self.known()))
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
                 on_example: Callable[[], None] | None = None,
                 ledger: Ledger | None = None) -> None:
    """Run the lock-step machine for ``examples`` examples; raise on the first disagreement.

    Hypothesis shrinks a failure to a short sequence of calls and prints it.
    """
    machine = lockstep_machine(factory, on_example, ledger)
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, print_blob=True,
        database=None))
