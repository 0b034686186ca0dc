"""Named predicates, checked together: the invariants a state violates, the properties a step does.

Each system's ``invariants.py`` keeps its spec's invariants and action properties in tables
under the spec's names; ``violated`` and ``violated_by_step`` are :class:`Violated` over them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, ParamSpec

__all__ = ["Violated"]

_P = ParamSpec("_P")


class Violated(Generic[_P]):
    """Called with what the predicates take: the names of those that do not hold, in the
    table's order."""

    def __init__(self, table: Mapping[str, Callable[_P, bool]]) -> None:
        self.table = table

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> list[str]:
        return [name for name, holds in self.table.items() if not holds(*args, **kwargs)]
