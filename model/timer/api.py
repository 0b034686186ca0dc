"""The reference model behind the timer API: ``ReferenceTimerScheduler``.

It has the methods, arguments, results and errors of ``refsched.TimerScheduler``, and each call
is one step of an action of ``refsched.model.timer.actions`` (or none). Time comes from the
clock it is given (a fake one, in tests) and is read where the production scheduler reads it:
in ``next()`` and ``snapshot()``. It is single-threaded and keeps the action history, so it
serves as the oracle that the implementation is compared with.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Hashable
from typing import Any

from refsched.errors import (
    InvalidArgumentError,
    InvariantViolation,
    StaleGenerationError,
    UnknownTaskError,
)
from refsched.types import (
    Due,
    TimerCloseReport,
    TimerSnapshot,
    TimerState,
    TimerStats,
    TimerVersionView,
    Wait,
)
from refsched.values import hashes as _hashable
from refsched.values import is_int as _is_int

from . import actions as A
from .actions import Action, Refusal
from .counters import Counts
from .invariants import violated

__all__ = ["ReferenceTimerScheduler", "Step"]

Step = tuple[str, tuple[Any, ...]]  # (action name, its arguments)


def as_time(value: object) -> float | None:
    """``value`` as a time: an ``int`` or ``float`` as it is (an ``int`` subclass as ``int``),
    another real number as a ``float``; None for anything else, a bool, NaN, an infinity or an
    int beyond the floats' range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, int):  # one no float can hold could not be compared or waited for
        return int(value) if -sys.float_info.max <= value <= sys.float_info.max else None
    try:
        converted = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return converted if math.isfinite(converted) else None


def _raise(refusal: Refusal, task_id: Hashable = None) -> None:
    error = refusal.error
    if error is None:
        return
    if error is UnknownTaskError:
        raise UnknownTaskError(refusal.reason, task_id)
    raise error(refusal.reason)


class ReferenceTimerScheduler:
    """The TimerScheduler API over the pure model. Not thread-safe: it is the sequential oracle."""

    def __init__(self, clock: Callable[[], float], *, rebuild_floor: int = 64) -> None:
        if not callable(clock):
            raise InvalidArgumentError(f"TimerScheduler({clock!r}): clock must be callable")
        if not _is_int(rebuild_floor) or rebuild_floor < 0:
            raise InvalidArgumentError(f"TimerScheduler(rebuild_floor={rebuild_floor!r}): "
                                       "rebuild_floor must be an int >= 0")
        self.clock = clock
        self.rebuild_floor = int(rebuild_floor)
        self.state_value: TimerSnapshot = A.INITIAL  # time starts at 0, before any reading
        self.history: list[Step] = []
        self._fns: dict[Hashable, Callable[..., Any] | None] = {}
        self._outcomes: dict[Hashable, Any] = {}
        self.counts = Counts()  # of the steps in history

    # -- stepping ---------------------------------------------------------------------------

    def _take(self, action: Action, *args: Any, task_id: Hashable = None) -> bool:
        """Take ``action`` if enabled (raising the refusal's error otherwise); True if taken."""
        s = self.state_value
        refusal = action.refusal(s, *args)
        if refusal is not None:
            _raise(refusal, task_id)
            return False
        after = action.step(s, *args, rebuild_floor=self.rebuild_floor)
        self.counts = self.counts.step(action.name, args, s, after,
                                       rebuild_floor=self.rebuild_floor)
        self.state_value = after
        self.history.append((action.name, args))
        return True

    def _read_clock(self) -> None:
        """Spec: Tick, when the clock has moved on (``now = max(now, clock())``)."""
        reading = self.clock()
        if reading > self.state_value.now:
            self._take(A.Tick, reading)

    def _view(self, call: str, task_id: Hashable) -> TimerVersionView:
        if not _hashable(task_id):
            raise InvalidArgumentError(f"{call}({task_id!r}): task id is unhashable")
        view = self.state_value.tasks.get(task_id)
        if view is None:
            raise UnknownTaskError(f"{call}({task_id!r}): unknown task", task_id)
        return view

    def _callback(self, name: str, action: Action, task_id: Hashable,
                  version: object) -> TimerState:
        view = self._view(name, task_id)
        call = f"{name}({task_id!r}, {version!r})"
        if not _is_int(version):
            raise InvalidArgumentError(f"{call}: version must be an int")
        if version != view.version:
            self._take(A.StaleCallback, task_id, version)
            raise StaleGenerationError(
                f"{call}: version {version} is stale, current is {view.version}",
                task_id, version, view.version)  # type: ignore[arg-type]
        if view.state.is_terminal:
            self._take(A.RepeatedCallback, task_id)
            return view.state
        self._take(action, task_id, version, task_id=task_id)
        self._fns[task_id] = None
        return self.state_value.tasks[task_id].state

    # -- the API ----------------------------------------------------------------------------

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        """Spec: Schedule(t, r, p). Make a new pending version of ``task_id``; return it."""
        call = f"schedule({task_id!r}, {run_at!r})"
        if not _hashable(task_id):
            raise InvalidArgumentError(f"{call}: task id is unhashable")
        at = as_time(run_at)
        if at is None:
            raise InvalidArgumentError(f"{call}: run_at must be a finite real number, "
                                       f"not {run_at!r}")
        if not _is_int(priority):
            raise InvalidArgumentError(f"{call}: priority must be an int, not {priority!r}")
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(f"{call}: fn {fn!r} is neither None nor callable")
        self._take(A.Schedule, task_id, at, int(priority))
        self._fns[task_id] = fn
        self._outcomes.pop(task_id, None)
        return self.state_value.tasks[task_id].version

    def cancel(self, task_id: Hashable) -> bool:
        """Spec: Cancel(t). pending -> cancelled, True; running -> stop requested, False."""
        view = self._view("cancel", task_id)
        if not self._take(A.Cancel, task_id):
            return False  # terminal, or a stop already requested: no step
        if view.state is TimerState.PENDING:
            self._fns[task_id] = None
            return True
        return False

    def next(self) -> Due | Wait | None:
        """Spec: Claim when it returns ``Due``, Idle otherwise (after the clock is read)."""
        self._read_clock()
        s = self.state_value
        if A.Claim.enabled(s):
            first = A.top(A.live_entries(s))
            assert first is not None
            self._take(A.Claim)
            return Due(first.task_id, first.version, self._fns.get(first.task_id))
        self._take(A.Idle)
        s = self.state_value
        first = A.top(A.live_entries(s))
        return None if first is None else Wait(first.run_at - s.now)

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        """Spec: Complete(t, v); StaleCallback(t, v) or RepeatedCallback(t) when refused."""
        state = self._callback("complete", A.Complete, task_id, version)
        if self.history[-1][0] == "Complete":
            self._outcomes[task_id] = result
        return state

    def fail(self, task_id: Hashable, version: int, error: Any = None) -> TimerState:
        """Spec: Fail(t, v); StaleCallback(t, v) or RepeatedCallback(t) when refused."""
        state = self._callback("fail", A.Fail, task_id, version)
        if self.history[-1][0] == "Fail":
            self._outcomes[task_id] = error
        return state

    def close(self) -> TimerCloseReport:
        """Spec: Close. Cancel every pending version; report them and the running ones."""
        tasks = self.state_value.tasks
        pending = sorted((t for t, v in tasks.items() if v.state is TimerState.PENDING),
                         key=lambda t: tasks[t].seq)
        cancelled: tuple[Hashable, ...] = ()
        if self._take(A.Close):
            cancelled = tuple(pending)
            for t in pending:
                self._fns[t] = None
        tasks = self.state_value.tasks
        running = sorted((t for t, v in tasks.items() if v.state is TimerState.RUNNING),
                         key=lambda t: tasks[t].seq)
        return TimerCloseReport(cancelled, tuple(running))

    # -- introspection ----------------------------------------------------------------------

    def state(self, task_id: Hashable) -> TimerState:
        return self._view("state", task_id).state

    def version(self, task_id: Hashable) -> int:
        return self._view("version", task_id).version

    def view(self, task_id: Hashable) -> TimerVersionView:
        return self._view("view", task_id)

    def outcome(self, task_id: Hashable) -> Any:
        """The result given to complete() or the error given to fail() of the current version."""
        self._view("outcome", task_id)
        return self._outcomes.get(task_id)

    def snapshot(self) -> TimerSnapshot:
        """Read the clock as next() does, and return the state."""
        self._read_clock()
        return self.state_value

    def stats(self) -> TimerStats:
        """The counters, as the steps taken so far fix them (:mod:`.counters`)."""
        return TimerStats(**self.counts.expected(self.state_value))

    @property
    def now(self) -> float:
        return self.state_value.now

    @property
    def closed(self) -> bool:
        return self.state_value.closed

    def check_invariants(self) -> None:
        """Raise ``InvariantViolation`` naming the first spec invariant the state breaks."""
        broken = violated(self.state_value, self.rebuild_floor)
        if broken:
            raise InvariantViolation(broken[0])
