"""refsched: formally modelled reference task schedulers.

The public API is what this module exports; everything else is internal.
"""

from refsched.dag.runner import Runner, TaskFuture
from refsched.dag.scheduler import Recorder, SchedulerStats, TaskScheduler
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
from refsched.pool.pool import PoolStats, WorkStealingPool
from refsched.runners import CancelToken
from refsched.timer.runner import TimerFuture, TimerRunner
from refsched.timer.scheduler import TimerRecorder, TimerScheduler
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
