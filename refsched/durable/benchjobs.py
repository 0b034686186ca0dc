"""A no-op task for benchmarks and examples: ``refsched.durable.benchjobs:noop``."""

from typing import Any


def noop(**kwargs: Any) -> int:
    """Do nothing: what is measured is the scheduler's cost per task."""
    return 1
