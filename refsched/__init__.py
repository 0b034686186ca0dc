"""refsched: formally modelled reference task schedulers.

The public API is what this module exports; everything else is internal.
"""

from refsched.errors import (
    BlockedError,
    Cancelled,
    ConflictError,
    CycleError,
    GraphError,
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    SchedulerClosedError,
    SchedulerError,
    StaleGenerationError,
    TaskRunningError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.runner import CancelToken, Runner, TaskFuture
from refsched.scheduler import Recorder, SchedulerStats, TaskScheduler
from refsched.types import Claim, CloseReport, Snapshot, TaskInfo, TaskState, VersionView

__version__ = "0.1.0"

__all__ = [
    "BlockedError",
    "CancelToken",
    "Cancelled",
    "Claim",
    "CloseReport",
    "ConflictError",
    "CycleError",
    "GraphError",
    "InvalidArgumentError",
    "InvalidTransitionError",
    "InvariantViolation",
    "Recorder",
    "Runner",
    "SchedulerClosedError",
    "SchedulerError",
    "SchedulerStats",
    "Snapshot",
    "StaleGenerationError",
    "TaskFuture",
    "TaskInfo",
    "TaskRunningError",
    "TaskScheduler",
    "TaskState",
    "UnknownDependencyError",
    "UnknownTaskError",
    "VersionView",
]
