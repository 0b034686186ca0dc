"""What the explorer tests of every system assert: a production scenario explores clean, and a
seeded bug is caught and replays."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from refsched.explore import ExploreConfig, explore, replay
from refsched.explore.context import Scenario
from refsched.explore.search import ExploreReport, Failure


def assert_caught_and_replays(scenario: Scenario, report: ExploreReport, kind: str,
                              words: str = "") -> Failure:
    """The report's first failure is of ``kind`` and says ``words``; replaying its schedule id
    fails the same way, step for step. Returns that failure."""
    print(report.summary())
    assert report.failures, f"{scenario.name}: the bug went unnoticed: {report.summary()}"
    failure = report.failures[0]
    assert failure.kind == kind, failure.report()
    assert words in failure.message, failure.report()
    text = failure.report()
    assert failure.schedule_id in text and "replay" in text
    again = replay(scenario, failure.schedule_id)
    assert again.failure is not None and again.failure.kind == kind
    assert again.schedule_id == failure.schedule_id
    assert again.steps == failure.steps  # the same schedule, step for step
    return failure


# A seeded bug: (scenario factory, broken class, failure kind, a piece of the failure's message).
# The factory builds the scenario on the broken class in place of the production one.
SeededBug = tuple[Callable[[Any], Scenario], type, str, str]


def bug_id(case: tuple[Any, ...]) -> str:
    """A seeded bug's test id: the name of its broken class."""
    return str(case[1].__name__)


def assert_explores_clean(scenario: Scenario, config: ExploreConfig) -> ExploreReport:
    """No schedule within ``config`` fails, and every one was run (all, or all within the
    bound). Returns the report, for what a system asserts of how much was explored."""
    report = explore(scenario, config)
    print(report.summary())
    report.raise_on_failure()
    assert report.exhausted and report.coverage in ("complete", "bounded"), report.summary()
    return report


def assert_seeded_bug_caught(case: SeededBug, config: ExploreConfig) -> None:
    """The scenario run on the broken class fails within ``config`` as the case says, and
    the failure replays (:func:`assert_caught_and_replays`)."""
    factory, broken, kind, words = case
    scenario = factory(broken)
    failure = assert_caught_and_replays(scenario, explore(scenario, config), kind, words)
    print(failure.report(max_steps=12))


def assert_hooks_come_out(scenario: Scenario, classes: Iterable[type]) -> None:
    """After a run of ``scenario``, no class the explorer instruments keeps its write hook."""
    explore(scenario, ExploreConfig(max_preemptions=0))
    for cls in classes:
        assert "__setattr__" not in cls.__dict__, cls
