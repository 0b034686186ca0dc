"""What the in-memory schedulers share: the invariant checks (the call, the checker) and the
lookup of a task id with its typed errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar, Generic, NoReturn, TypeVar

from refsched.errors import InvalidArgumentError, InvariantViolation, UnknownTaskError
from refsched.values import shown

__all__ = ["Checker", "LockChecked", "check_method", "checker_of", "find_current"]


class LockChecked:
    """A scheduler whose state one lock (``_lock``) guards, checked whole under that lock, and
    whose steps an optional recorder (``_recorder``) is given with the state after each."""

    __slots__ = ()
    _lock: Any
    _recorder: Any

    def _record(self, action: str, params: dict[str, Any]) -> None:
        """Give the step just taken to the recorder. Lock held, recorder set."""
        assert self._recorder is not None
        self._recorder.record(action, params, self._snapshot_locked())

    def _snapshot_locked(self) -> Any:
        """The spec variables now. Lock held."""
        raise NotImplementedError

    def check_invariants(self) -> None:
        """Check the spec invariants against the internal data structures.

        Scans everything (a checker, not an operation). Errors: a broken invariant ->
        ``InvariantViolation`` (an ``AssertionError``) whose ``invariant`` is its name in
        ``INVARIANTS``.
        """
        with self._lock:
            self._check_locked()

    def _check_locked(self) -> None:
        """Raise ``InvariantViolation`` for the first invariant broken. Lock held."""
        self._checker(self).run()

    # The scheduler's Checker: set by ``checker_of`` where the checker is defined, after the
    # scheduler's class, since it reads the scheduler's internals.
    _checker: ClassVar[type[Checker[Any]]]


_S = TypeVar("_S")


def check_method(invariant: str) -> str:
    """The checker method of ``invariant``: its name in snake_case (``TypeOK`` -> ``type_ok``)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", invariant).lower()


class Checker(Generic[_S]):
    """check_invariants(): recompute every invariant from the raw state of ``s``. Lock held.

    A subclass names its invariants (the spec's names, in the order they are checked) and has a
    method per invariant, named by ``check_method``; the first broken one raises.
    """

    invariants: ClassVar[tuple[str, ...]]

    def __init__(self, scheduler: _S) -> None:
        self.s = scheduler

    @staticmethod
    def fail(invariant: str, detail: str) -> NoReturn:
        raise InvariantViolation(invariant, detail)

    def run(self) -> None:
        for invariant in self.invariants:
            getattr(self, check_method(invariant))()


_C = TypeVar("_C", bound=type[Checker[Any]])


def checker_of(scheduler: type[LockChecked]) -> Callable[[_C], _C]:
    """Class decorator: the decorated Checker is what ``scheduler.check_invariants()`` runs."""
    def register(checker: _C) -> _C:
        scheduler._checker = checker
        return checker
    return register


_V = TypeVar("_V")


def find_current(table: Mapping[Hashable, _V], call: str, task_id: Hashable) -> _V:
    """What ``table`` keeps of ``task_id``'s current version. Errors: an unhashable id ->
    ``InvalidArgumentError``; an unknown one -> ``UnknownTaskError``, both naming ``call``."""
    try:
        found = table.get(task_id)
    except TypeError:
        raise InvalidArgumentError(f"{call}({shown(task_id)}): task id is unhashable") from None
    if found is None:
        raise UnknownTaskError(f"{call}({shown(task_id)}): unknown task", task_id)
    return found
