"""Lock discipline: every write to guarded state is made holding the lock that guards it.

The runtime interleaves threads only at synchronisation operations, so a write made outside the
lock that should guard it runs whole and unseen: no schedule can interleave it, and a scheduler
that claims under the wrong lock passes every schedule. This check closes that gap by testing the
discipline the code states in its own comments:

- ``TaskScheduler``: "_lock guards every attribute below, and every item of every column";
- ``Runner``: "the runner lock guards every field below", and its futures' lock guards
  ``_futures_waiting`` (declared above the runner lock);
- ``TimerScheduler``: "_lock guards every attribute below, and every item of every column";
- ``TimerRunner``: "the runner lock guards every field below";
- ``WorkStealingPool``: "the pool lock guards every field below that is not Final" (a Final
  field is assigned once, by ``__init__``, which is exempt), and a pool task's ``_joiners``,
  "guarded by the pool lock".

"Below" is read from the class's ``__init__``: the attributes it assigns after ``self._lock``.
While :func:`enforced` is active, assigning one of them, or a pool ``_Task``'s ``_joiners``,
or writing an item of a ``TaskScheduler`` or ``TimerScheduler`` column, from a controlled thread
that does not hold the guarding lock fails the run as ``lock discipline``, naming the thread, the
field (for a column, the row and its task) and the line. Writes made by an ``__init__`` of the
object are exempt (it is not shared yet).

Both schedulers keep their per-version (per-id, for the timer) fields in columns (lists and an
array, and dicts and a set keyed by row), which they make through their module's ``_column``
(``refsched.dag.scheduler._column``, ``refsched.timer.scheduler._column``); :func:`enforced`
swaps those factories for one making subclasses of the same types whose every writing method (item
assignment, ``append``, ``extend``, ``pop``, ``add``, ...) checks, after writing, that the writing
thread holds the lock of the scheduler that made the column. A column knows its scheduler, so its
guard is that scheduler's lock. A pool task knows its pool (``_pool``), so its guard is that
pool's lock. A pool task's other fields are not the pool lock's: its future's state is guarded by
the task's own ``_guard`` or its ``Future`` condition.

Only attribute assignment and the writes of a column are seen, not the mutation of other
containers an attribute holds (a dict's ``pop``, a heap's ``heappush``, a dependents list's
``append``); the columns and the counters cover every step of the specs, so a step taken outside
the lock always writes one of them.
"""

from __future__ import annotations

import contextlib
import dis
import os
import sys
from array import array
from collections.abc import Callable, Iterator
from typing import Any, Final

from refsched.dag import runner as _runner_module
from refsched.dag import scheduler as _scheduler_module
from refsched.explore import runtime
from refsched.pool import pool as _pool_module
from refsched.timer import runner as _timer_runner_module
from refsched.timer import scheduler as _timer_module

__all__ = ["enforced", "guarded_fields"]

_LOCK: Final = "_lock"
# The Runner's fields that its futures' lock (``_futures_lock``) guards, not its runner lock.
_RUNNER_FUTURES_FIELDS: Final = frozenset({"_futures_waiting"})
# The fields of a pool task that its pool's lock guards (the rest are its future's).
_POOL_TASK_FIELDS: Final = frozenset({"_joiners"})


# The writing methods of the column types (list, bytearray, array, dict, set) a checked column
# hooks; each type has some of them.
_COLUMN_WRITES: Final = (
    "__setitem__", "__delitem__", "__iadd__", "__imul__", "__ior__", "__iand__", "__isub__",
    "__ixor__", "append", "extend", "insert", "pop", "popitem", "remove", "clear", "reverse",
    "sort", "byteswap", "frombytes", "fromlist", "fromunicode", "fromfile", "add", "discard",
    "update", "setdefault", "difference_update", "intersection_update",
    "symmetric_difference_update",
)


def guarded_fields(cls: type, lock: str = _LOCK) -> frozenset[str]:
    """The attributes ``cls.__init__`` assigns after ``self.<lock>``: those the lock guards.

    Read from the compiled ``__init__`` (its ``STORE_ATTR`` instructions in order), so it holds
    for a class built from source that is not on disk too.
    """
    code = getattr(cls.__init__, "__code__", None)  # type: ignore[misc]
    if code is None:
        raise ValueError(f"{cls.__qualname__}.__init__ is not Python code")
    fields: list[str] = []
    seen_lock = False
    for instruction in dis.get_instructions(code):
        if instruction.opname != "STORE_ATTR":
            continue
        if instruction.argval == lock:
            seen_lock = True
        elif seen_lock:
            fields.append(instruction.argval)
    if not seen_lock:
        raise ValueError(f"{cls.__qualname__}.__init__ never assigns self.{lock}")
    return frozenset(fields)


def _constructing(frame: Any, obj: object) -> bool:
    """Whether ``frame`` is an ``__init__`` of ``obj`` (its class's or a subclass's): the object
    is not shared yet, so its fields need no lock."""
    code = frame.f_code
    return (code.co_name == "__init__" and code.co_argcount > 0
            and frame.f_locals.get(code.co_varnames[0]) is obj)


def _shared_write(obj: object) -> tuple[Any, runtime.Execution, Any] | None:
    """For a write to ``obj`` made by the caller of the ``__setattr__`` hook calling this: the
    writing frame, the run and its thread, when the write is one to check (made by a
    controlled thread, outside the object's ``__init__``); else None."""
    frame = sys._getframe(2)
    if _constructing(frame, obj):
        return None
    here = runtime.controlled_thread()
    if here is None:
        return None
    return frame, here[0], here[1]


def _site(frame: Any) -> str:
    return (f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} "
            f"in {frame.f_code.co_name}()")


class _Monitor:
    """The hooks installed for one :func:`enforced` block."""

    def own_lock_hook(self, cls: type, fields: frozenset[str]) -> Callable[[Any, str, Any], None]:
        """``__setattr__`` for a class whose fields below ``_lock`` are guarded by it."""
        return _guarded_hook(cls, fields, lambda obj: getattr(obj, _LOCK, None),
                             f"that {cls.__name__}'s lock")

    def owner_lock_hook(self, cls: type, fields: frozenset[str], owner_attr: str,
                        owner: type) -> Callable[[Any, str, Any], None]:
        """``__setattr__`` for a record that knows its ``owner`` (in its ``owner_attr``):
        ``fields`` are guarded by that owner's ``_lock``."""
        return _guarded_hook(cls, fields,
                             lambda obj: getattr(getattr(obj, owner_attr, None), _LOCK, None),
                             f"its {owner.__name__}'s lock")


def _guarded_hook(cls: type, fields: frozenset[str], lock_of: Callable[[Any], Any], whose: str,
                  ) -> Callable[[Any, str, Any], None]:
    """``__setattr__`` failing the run when a controlled thread writes one of ``fields`` of a
    ``cls`` without holding the lock ``lock_of(obj)`` (``whose`` names it in the failure)."""
    plain = object.__setattr__

    def __setattr__(obj: Any, name: str, value: Any) -> None:
        plain(obj, name, value)
        if name not in fields:
            return
        write = _shared_write(obj)
        if write is None:
            return
        frame, ex, t = write
        lock = lock_of(obj)
        if isinstance(lock, runtime.Lock) and not lock._is_owned(t):
            ex.fail("lock discipline",
                    f"{t.name} wrote {cls.__name__}.{name} at {_site(frame)} without "
                    f"holding {whose} ({lock._label})")

    return __setattr__


def _runner_hook(cls: type) -> Callable[[Any, str, Any], None]:
    """``__setattr__`` for a Runner: the fields below ``_lock`` are guarded by that lock, and
    ``_RUNNER_FUTURES_FIELDS`` by ``_futures_lock``; as :func:`_guarded_hook` with two locks."""
    plain = object.__setattr__
    by_field = {**dict.fromkeys(guarded_fields(cls), (_LOCK, "lock")),
                **dict.fromkeys(_RUNNER_FUTURES_FIELDS, ("_futures_lock", "futures lock"))}

    def __setattr__(obj: Any, name: str, value: Any) -> None:
        plain(obj, name, value)
        guard = by_field.get(name)
        if guard is None:
            return
        write = _shared_write(obj)
        if write is None:
            return
        frame, ex, t = write
        lock = obj.__dict__.get(guard[0])
        if isinstance(lock, runtime.Lock) and not lock._is_owned(t):
            ex.fail("lock discipline",
                    f"{t.name} wrote {cls.__name__}.{name} at {_site(frame)} without "
                    f"holding that {cls.__name__}'s {guard[1]} ({lock._label})")

    return __setattr__


def _checked_column_kinds(owner: str) -> dict[type, type]:
    """For each column type, a subclass whose writing methods check the owner's lock; the
    failure names the owner's class as ``owner``."""

    def hook(plain: Callable[..., Any]) -> Callable[..., Any]:
        def write(column: Any, *args: Any) -> Any:
            result = plain(column, *args)
            _check_column_write(column, owner, args, plain.__name__)
            return result

        write.__name__ = plain.__name__
        return write

    kinds: dict[type, type] = {}
    for base in (list, bytearray, array, dict, set):
        namespace: dict[str, Any] = {"__slots__": ("_owner", "_name")}
        for method in _COLUMN_WRITES:
            plain = base.__dict__.get(method)
            if plain is not None:
                namespace[method] = hook(plain)
        kinds[base] = type(f"Checked{base.__name__.capitalize()}", (base,), namespace)
    return kinds


def _check_column_write(column: Any, owner_name: str, args: tuple[Any, ...],
                        method: str) -> None:
    """Fail the run if a controlled thread wrote ``column`` without holding its owner's lock."""
    here = runtime.controlled_thread()
    if here is None:
        return
    ex, t = here
    owner = column._owner
    lock = getattr(owner, _LOCK, None)
    if not isinstance(lock, runtime.Lock) or lock._is_owned(t):
        return
    frame = sys._getframe(2)  # the writer: past this check and the hook
    if method == "append":
        row: Any = len(column) - 1
    else:
        row = args[0] if args and type(args[0]) is int else None
    what = f"{owner_name}.{column._name}"
    if row is None:
        what += f".{method}()"
    else:
        what += f"[{row}]"
        ids = getattr(owner, "_ids", None)
        if ids is not None and 0 <= row < len(ids) and ids[row] is not None:
            what += f" (task {ids[row]!r})"
    ex.fail("lock discipline",
            f"{t.name} wrote {what} at {_site(frame)} without holding that {owner_name}'s "
            f"lock ({lock._label})")


def _checked_column_factory(owner_name: str) -> Callable[[Any, str, Any], Any]:
    """A stand-in for ``refsched.dag.scheduler._column`` making checked columns."""
    kinds = _checked_column_kinds(owner_name)

    def _column(owner: Any, name: str, empty: Any) -> Any:
        kind = kinds[type(empty)]
        column = kind(empty.typecode, empty) if isinstance(empty, array) else kind(empty)
        column._owner = owner
        column._name = name
        return column

    _column.checked = True  # type: ignore[attr-defined]
    return _column


@contextlib.contextmanager
def enforced() -> Iterator[None]:
    """Check the lock discipline of TaskScheduler and TimerScheduler and their columns, Runner,
    TimerRunner, WorkStealingPool and its tasks' joiners while the block runs.

    A TaskScheduler built inside the block has checked columns (it keeps them after the block).
    Outside a controlled run (no :class:`runtime.Execution` active, or a thread it does not
    manage) the hooks only write; production code never runs them.
    """
    monitor = _Monitor()
    task_scheduler = _scheduler_module.TaskScheduler
    runner = _runner_module.Runner
    timer_scheduler = _timer_module.TimerScheduler
    timer_runner = _timer_runner_module.TimerRunner
    pool = _pool_module.WorkStealingPool
    pool_task = _pool_module._Task
    hooks = [
        (task_scheduler, monitor.own_lock_hook(task_scheduler, guarded_fields(task_scheduler))),
        (runner, _runner_hook(runner)),
        (timer_scheduler, monitor.own_lock_hook(timer_scheduler, guarded_fields(timer_scheduler))),
        (timer_runner, monitor.own_lock_hook(timer_runner, guarded_fields(timer_runner))),
        (pool, monitor.own_lock_hook(pool, guarded_fields(pool))),
        (pool_task, monitor.owner_lock_hook(pool_task, _POOL_TASK_FIELDS, "_pool", pool)),
    ]
    for cls, _ in hooks:
        if "__setattr__" in cls.__dict__:
            raise RuntimeError(f"{cls.__qualname__} already has a __setattr__ of its own")
    plain_columns = (_scheduler_module._column, _timer_module._column)
    if any(getattr(c, "checked", False) for c in plain_columns):
        raise RuntimeError("a scheduler module's _column already makes checked columns")
    try:
        for cls, hook in hooks:
            cls.__setattr__ = hook  # type: ignore[assignment]
        _scheduler_module._column = _checked_column_factory(  # type: ignore[assignment]
            task_scheduler.__name__)
        _timer_module._column = _checked_column_factory(  # type: ignore[assignment]
            timer_scheduler.__name__)
        yield
    finally:
        _scheduler_module._column = plain_columns[0]
        _timer_module._column = plain_columns[1]
        for cls, _ in hooks:
            if "__setattr__" in cls.__dict__:
                delattr(cls, "__setattr__")
