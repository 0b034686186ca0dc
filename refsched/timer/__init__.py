"""The timer scheduler (run-at, priority, lazy deletion, monotonic clock) and its Runner."""

from refsched.timer.runner import TimerRunner
from refsched.timer.scheduler import TimerScheduler

__all__ = ["TimerRunner", "TimerScheduler"]
