"""What the explorer tests of every system assert of a seeded bug: caught, and replayable."""

from __future__ import annotations

from refsched.explore import replay
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
