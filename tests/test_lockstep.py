"""The production TaskScheduler and the reference model agree, step for step.

The must-fail tests feed the same state machine deliberately broken schedulers and show it
catches each one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from refsched import TaskScheduler
from refsched.types import TaskState
from refsched.verify.lockstep import lockstep_machine

TestSchedulerAgreesWithModel = lockstep_machine(TaskScheduler).TestCase


class _Wrapper:
    """A scheduler that forwards everything to a real one; subclasses break one rule."""

    def __init__(self, max_concurrency: int) -> None:
        self.inner = TaskScheduler(max_concurrency)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FailReportedAsSuccess(_Wrapper):
    """fail() completes the version instead: dependents run after a failure."""

    def fail(self, task_id: Any, generation: int, error: Any = None) -> TaskState:
        return self.inner.complete(task_id, generation)  # type: ignore[no-any-return]


class ClaimsTwice(_Wrapper):
    """ready() claims a second batch on top of the first: over-commits."""

    def ready(self, limit: int | None = None) -> list[Any]:
        first = self.inner.ready(limit)
        return first + (self.inner.ready(limit) if first else [])


class CancelIgnoresRunning(_Wrapper):
    """cancel() of a running version forgets the cooperative stop request."""

    def cancel(self, task_id: Any, generation: int | None = None) -> TaskState:
        if self.inner.state(task_id) is TaskState.RUNNING and generation is None:
            return TaskState.RUNNING
        return self.inner.cancel(task_id, generation)  # type: ignore[no-any-return]


class RetryWithoutDescendants(_Wrapper):
    """retry() resubmits the task alone, leaving its blocked descendants stuck."""

    def retry(self, task_id: Any) -> int:
        info = self.inner.info(task_id)
        if not info.state.is_dead or self.inner.snapshot().closed:
            return self.inner.retry(task_id)  # type: ignore[no-any-return]
        return self.inner.submit(task_id, info.deps)  # type: ignore[no-any-return]


class StaleCallbackAccepted(_Wrapper):
    """A late complete() from an older generation is applied to the current one."""

    def complete(self, task_id: Any, generation: int, result: Any = None) -> TaskState:
        info = self.inner.info(task_id)
        if isinstance(generation, int) and 0 < generation < info.generation:
            generation = info.generation
        return self.inner.complete(task_id, generation, result)  # type: ignore[no-any-return]


BROKEN = [FailReportedAsSuccess, ClaimsTwice, CancelIgnoresRunning, RetryWithoutDescendants,
          StaleCallbackAccepted]


@pytest.mark.parametrize("broken", BROKEN, ids=lambda cls: cls.__name__)
def test_lockstep_catches_a_broken_scheduler(broken: type[_Wrapper]) -> None:
    machine = lockstep_machine(broken)
    # Hypothesis raises an ExceptionGroup when it finds several distinct failures.
    with pytest.raises((AssertionError, ExceptionGroup)):
        run_state_machine_as_test(machine, settings=settings(
            max_examples=1000, stateful_step_count=40, deadline=None, database=None,
            derandomize=True,  # the same search every run: a mutant is caught or it is not
            phases=[Phase.generate],  # finding the failure is the point; shrinking it is not
            suppress_health_check=[HealthCheck.too_slow]))
