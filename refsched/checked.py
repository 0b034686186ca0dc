"""What the in-memory schedulers share around their invariant checks."""

from __future__ import annotations

from typing import Any

__all__ = ["LockChecked"]


class LockChecked:
    """A scheduler whose state one lock (``_lock``) guards, checked whole under that lock."""

    __slots__ = ()
    _lock: Any

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
        raise NotImplementedError
