"""Small checks and renderings of caller values: the in-memory schedulers and the models share them.

The schedulers bind these to module globals (``_r``, ``_is_int``, ``_hashes``), so a per-task
path calls them as it called its own copy: one global lookup, no extra call.
"""

from __future__ import annotations

from refsched.errors import InvalidArgumentError

__all__ = ["check_note", "hashes", "is_int", "shown"]


def shown(value: object) -> str:
    """repr() cut to a length fit for an error message.

    A ``__repr__`` that raises (or recurses too deeply) gives ``object``'s repr instead: the
    error being reported is the caller's, not the repr's.
    """
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_int(value: object) -> bool:
    """Whether ``value`` is an int and no bool (``True`` is no generation, count or priority)."""
    return isinstance(value, int) and not isinstance(value, bool)


def hashes(value: object) -> bool:
    """Whether ``value`` can be hashed, so be a task id (a dict key)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def check_note(call: str, task_id: object, actor: object, reason: object) -> None:
    """Raise ``InvalidArgumentError`` unless ``actor`` and ``reason``, given to a call that
    ends a version (for its provenance), are each None or a str."""
    for name, value in (("actor", actor), ("reason", reason)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(
                f"{call}({shown(task_id)}, {name}={shown(value)}): {name} must be None or a str")
