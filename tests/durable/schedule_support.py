"""What the schedule tests share: the check of a store's recorded history, durable steps and
schedule steps both (tests/durable/test_schedules.py, tests/durable/test_schedule_faults.py)."""

from __future__ import annotations

from refsched.durable import DurableScheduler
from refsched.verify.durable.history import check_history
from refsched.verify.durable.schedule_history import ScheduleHistoryCheck, check_schedule_history


def checked_history(url: str) -> ScheduleHistoryCheck:
    """Check the recorded history of the store at ``url`` (created with ``record=True``):
    every durable step a spec step, every schedule decision the model's. Fails the test with the
    problems found; returns the schedule check, for what a test asserts beyond it."""
    db = DurableScheduler(url)
    try:
        history = db.timed_history()
        durable = check_history(history, max_concurrency=db.max_concurrency,
                                max_attempts=db.max_attempts, aging=db.aging)
        check = check_schedule_history(history, max_concurrency=db.max_concurrency,
                                       max_attempts=db.max_attempts)
    finally:
        db.release()
    problems = durable.problems + check.problems
    assert not problems, "\n".join(problems[:20])
    return check
