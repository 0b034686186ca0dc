"""Task functions for benchmarks, `refsched soak` and examples: `refsched.durable.jobs:NAME`."""

import time
from typing import Any, Final

NOOP: Final = "refsched.durable.jobs:noop"
""":func:`noop` as a task names its function: for a check whose tasks never run."""


def noop(**kwargs: Any) -> int:
    """Do nothing: what is measured is the scheduler's cost per task."""
    return 1


def sleep(seconds: float = 0.0, **kwargs: Any) -> float:
    """Sleep ``seconds`` and return them: a task that takes time, so faults land mid-task."""
    time.sleep(seconds)
    return seconds
