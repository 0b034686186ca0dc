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
from refsched.pool import PoolStats, WorkStealingPool
from refsched.runner import CancelToken, Runner, TaskFuture
from refsched.scheduler import Recorder, SchedulerStats, TaskScheduler
from refsched.timer import TimerRecorder, TimerScheduler
from refsched.timer_runner import TimerFuture, TimerRunner
from refsched.types import (
    Claim,
    CloseReport,
    Due,
    Snapshot,
    TaskInfo,
    TaskState,
    TimerCloseReport,
    TimerEntry,
    TimerSnapshot,
    TimerState,
    TimerStats,
    TimerVersionView,
    VersionView,
    Wait,
)

__version__ = "0.1.0"

__all__ = [
    "BlockedError",
    "CancelToken",
    "Cancelled",
    "Claim",
    "CloseReport",
    "ConflictError",
    "CycleError",
    "Due",
    "GraphError",
    "InvalidArgumentError",
    "InvalidTransitionError",
    "InvariantViolation",
    "PoolStats",
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
    "TimerCloseReport",
    "TimerEntry",
    "TimerFuture",
    "TimerRecorder",
    "TimerRunner",
    "TimerScheduler",
    "TimerSnapshot",
    "TimerState",
    "TimerStats",
    "TimerVersionView",
    "UnknownDependencyError",
    "UnknownTaskError",
    "VersionView",
    "Wait",
    "WorkStealingPool",
]
