"""The dependency-aware TaskScheduler and its threaded Runner."""

from refsched.dag.runner import Runner
from refsched.dag.scheduler import TaskScheduler

__all__ = ["Runner", "TaskScheduler"]
