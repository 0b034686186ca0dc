"""What the runners share: the scheduler underneath and the pool size (the in-memory schedulers'
runners), their futures and how a settlement resolves them, the cooperative cancel token (the
durable worker hands it to functions too), and the checks of a timeout and of a function's
``token`` parameter.

The TaskScheduler's Runner and the TimerRunner settle their futures alike
(``apply_settlements``), and each of the three runners gives functions a :class:`CancelToken`:
written once here, not in one runner's module that the others would import.
"""

from __future__ import annotations

import concurrent.futures._base as _futures
import inspect
import logging
import math
import numbers
import os
import threading
import types
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any, Final, Generic, TypeVar, cast

from refsched import sync
from refsched.errors import Cancelled, InvalidArgumentError, SchedulerError
from refsched.values import shown as _r

__all__ = ["CancelToken", "SchedulerRunner", "worker_count"]

_Scheduler = TypeVar("_Scheduler")


def worker_count(runner: str, max_workers: int | None) -> int:
    """The ``max_workers`` a runner was given, checked; None is ThreadPoolExecutor's default.

    Errors: not an int >= 1 (a bool is none) -> ``InvalidArgumentError`` naming ``runner``.
    """
    if max_workers is None:
        return min(32, (os.cpu_count() or 1) + 4)
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise InvalidArgumentError(
            f"{runner}(max_workers={max_workers!r}): max_workers must be an int >= 1")
    return max_workers


class SchedulerRunner(Generic[_Scheduler]):
    """A runner driving one scheduler (``_scheduler``) on ``_max_workers`` worker threads."""

    _scheduler: _Scheduler
    _max_workers: int

    @property
    def scheduler(self) -> _Scheduler:
        """The scheduler underneath, for inspection (``state``, ``snapshot``...).

        Change it only through the runner: an action taken on it directly bypasses the futures.
        """
        return self._scheduler

    @property
    def max_workers(self) -> int:
        """The most functions the runner runs at once."""
        return self._max_workers


# How a settlement resolves a future (the second field of a ``_Settlement``).
RESULT = 0  # set_result(value)
ERROR = 1  # set_exception(value)
CANCEL = 2  # cancelled: result() raises CancelledError

# Where a done-callback's error and a runner's own failure are reported: the logger Future itself
# reports a callback's Exception on.
FUTURES_LOGGER: Final = logging.getLogger("concurrent.futures")

# A timeout longer than this (about 146 years) is no limit: a lock cannot time one that long.
LONGEST_TIMEOUT: Final = threading.TIMEOUT_MAX / 2


class CancelToken:
    """A cooperative cancel request for one running version, given to functions with a ``token``.

    A function that declares a ``token`` parameter is called with ``token=`` one of these. When
    ``Runner.cancel()`` (or ``TaskFuture.cancel()``) asks the running version to stop,
    ``cancelled`` becomes true and ``wait()`` returns ``True``; the function then stops by raising
    :class:`refsched.Cancelled` (spec: AcknowledgeCancel), or may ignore the request and return.
    Tokens only work in-process: with an executor other than a ``ThreadPoolExecutor`` (a process
    pool, a cluster) the function is called with ``token=None``.
    """

    __slots__ = ("_event", "generation", "task_id")

    def __init__(self, task_id: Hashable, generation: int) -> None:
        self.task_id = task_id
        self.generation = generation
        self._event = sync.Event()  # set once: a cancel of this version was requested

    @property
    def cancelled(self) -> bool:
        """Whether a cancel of this version was requested."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a cancel is requested or ``timeout`` seconds pass; True if requested."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`refsched.Cancelled` if a cancel was requested (the acknowledgement)."""
        if self._event.is_set():
            raise Cancelled(f"{self.task_id!r} (generation {self.generation}) was cancelled")

    def __repr__(self) -> str:
        return (f"<CancelToken {self.task_id!r} generation={self.generation} "
                f"cancelled={self.cancelled}>")


FUTURE_DONE: Final = frozenset({_futures.CANCELLED, _futures.CANCELLED_AND_NOTIFIED,
                                 _futures.FINISHED})
# The done-callbacks of a future that has none: its list is made by its first add_done_callback().
NO_CALLBACKS: Final[tuple[()]] = ()


class RunnerFuture(Future[Any]):
    """What the futures of both runners (TaskFuture, TimerFuture) share: ``running()``, and
    done-callbacks whose errors, whatever they are, are logged instead of raised."""

    _settled: bool  # guarded by the runner lock: the runner decided the outcome (set once)
    _started: bool  # the function was called (set once; only read by running())
    # Future's, which typeshed omits; NO_CALLBACKS until the first is added
    _done_callbacks: list[Callable[[Future[Any]], object]] | tuple[()]

    def running(self) -> bool:
        """Whether the function of this version has been called and the future is not done."""
        return self._started and not self.done()

    def add_done_callback(self, fn: Callable[[Future[Any]], object]) -> None:
        """Call ``fn(future)`` once the future is done (now, if it is), as ``Future`` does."""
        if self._done_callbacks is NO_CALLBACKS:
            with self._condition:  # made once, however many threads add the first together
                if self._done_callbacks is NO_CALLBACKS:
                    self._done_callbacks = []
        super().add_done_callback(fn)

    def _invoke_callbacks(self) -> None:
        # Future's own catches only Exception: a callback's SystemExit or KeyboardInterrupt would
        # end the runner's thread that settles the future, and skip the callbacks after it.
        for callback in self._done_callbacks:
            try:
                callback(self)
            except BaseException:
                FUTURES_LOGGER.exception("exception calling callback for %r", self)


def apply_settlements(out: Sequence[tuple[RunnerFuture, int, Any]]) -> None:
    """Resolve each future as decided (its done-callbacks run); what a callback raises is logged.

    Both runners settle their futures here, never under their lock.
    """
    for future, kind, value in out:
        try:
            if kind == RESULT:
                future.set_result(value)
            elif kind == ERROR:
                future.set_exception(value)
            else:
                Future.cancel(future)  # the base cancel: the future's own asks the runner
                future.set_running_or_notify_cancel()  # wakes concurrent.futures.wait()
        except InvalidStateError:
            pass  # the caller resolved it by hand; the first outcome stands
        except Exception:
            # A future driven by hand into a state Future refuses to leave (its callbacks'
            # errors never get here): the settlements after it are still applied.
            FUTURES_LOGGER.exception("exception settling %r", future)


def check_timeout(call: str, timeout: object) -> float | None:
    """``timeout`` as the seconds a wait may last, None for no limit; checked for ``call``.

    None, or a real number (bool excluded) that is finite and >= 0, else InvalidArgumentError.
    One longer than a lock can time (``LONGEST_TIMEOUT``, an int beyond the floats) is no limit.
    """
    if timeout is None:
        return None
    if not isinstance(timeout, bool) and isinstance(timeout, numbers.Real):
        try:
            seconds = float(timeout)
        except OverflowError:  # an int no float holds: finite, and no limit unless negative
            if cast(float, timeout) > 0:  # (typeshed's Real declares no comparison with an int)
                return None
        except (TypeError, ValueError):
            pass  # a Real that cannot say its value
        else:
            if 0 <= seconds < math.inf:  # NaN fails both
                return None if seconds > LONGEST_TIMEOUT else seconds
    raise InvalidArgumentError(
        f"{call}(timeout={_r(timeout)}): timeout must be None or a finite number of seconds >= 0")


def stopped_error(runner: str, exc: BaseException) -> SchedulerError:
    """The error the unresolved futures of a runner stopped by ``exc`` (its cause) fail with.

    Called by the failing thread. The message names no value (a repr may raise): the cause has it.
    """
    error = SchedulerError(f"{runner} stopped: its thread {threading.current_thread().name} "
                           f"failed with {type(exc).__qualname__} (the __cause__)")
    error.__cause__ = exc
    return error


def log_failure(runner: str, exc: BaseException) -> None:
    """Log, as ThreadPoolExecutor logs a worker's death, the error that stopped a runner."""
    FUTURES_LOGGER.critical("%s stopped: its thread %s failed", runner,
                     threading.current_thread().name, exc_info=exc)


#: The keywords a runner passes to a function that takes them: bits of :func:`keywords_taken`.
TOKEN: Final = 1  # ``token``: its CancelToken
INPUTS: Final = 2  # ``inputs``: its input summary (how each optional dependency ended)
_BITS: Final = (("token", TOKEN), ("inputs", INPUTS))


def keywords_taken(fn: Callable[..., Any]) -> int:
    """Which of the keywords ``token`` and ``inputs`` ``fn`` takes, as ``TOKEN | INPUTS`` bits
    (checked by name); 0 for most functions. One look at the function for both, as a runner
    asks it once per task."""
    code: types.CodeType | None
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__:
        code = fn.__code__  # the common case, without a failing attribute lookup
    else:
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType) or hasattr(fn, "__wrapped__"):
            code = None
    if code is not None:
        names = code.co_varnames
        # Most functions have neither name at all: that needs no slice.
        if "token" not in names and "inputs" not in names:
            return 0
        params = names[code.co_posonlyargcount:code.co_argcount + code.co_kwonlyargcount]
        return (TOKEN if "token" in params else 0) | (INPUTS if "inputs" in params else 0)
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return 0
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    taken = 0
    for name, bit in _BITS:
        param = parameters.get(name)
        if param is not None and param.kind in kinds:
            taken |= bit
    return taken


def wants_token(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes a ``token`` keyword argument (checked by name)."""
    return bool(keywords_taken(fn) & TOKEN)
