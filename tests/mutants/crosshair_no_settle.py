"""The reference model with Settle switched off: CrossHair must find a sequence that breaks it."""

from __future__ import annotations

from refsched.model import actions
from refsched.model.contracts import apply_operations


def apply_operations_without_settle(ops: list[int]) -> bool:
    """The same contract as ``apply_operations``, over a model whose Settle does nothing.

    pre: len(ops) <= 8
    pre: all(0 <= op < 10_000 for op in ops)
    post: __return__
    """
    original = actions.settle
    actions.settle = lambda tasks: dict(tasks)
    try:
        return apply_operations(ops)
    finally:
        actions.settle = original
