"""Hypothesis's choices made the same in every process: :func:`stable_labels`.

Hypothesis labels each strategy with a number, and its generator and shrinker use the labels:
the generator copies one part of a run over another part with the same label, the shrinker
tries the parts of a run in the order of their labels. A ``sampled_from`` strategy's label is
computed from ``hash()`` of what it samples, and ``st.builds`` / ``st.composite`` / ``flatmap``
from ``hash()`` of a function. A string's hash changes with each process (``PYTHONHASHSEED``),
and a function's or a lambda's is its address, which changes with what the process allocated
before; a walk that samples freshly made lambdas even gets one label or two for the same
strategy depending on whether the memory of the first was reused. So with one seed two runs
made different calls: the lock-step machines sample ids, workers and rules (whose hash is their
function's), and the durable machine samples a list of fresh lambdas for its bad calls.

Inside :func:`stable_labels` those labels are computed from text instead (what is sampled,
written out; a function's qualified name): the same in every process, and as distinct as
Hypothesis's own, which its shrinker needs to find the parts of a run it can remove.
Hypothesis caches a label on its strategy, and shares strategies between calls
(``st.sampled_from(IDS)`` made twice is one object), so a label computed before the block is not
used in it: the block keeps its own.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from types import FunctionType
from typing import Any

from hypothesis.internal.conjecture import utils as conjecture_utils
from hypothesis.strategies._internal import core as strategies_core
from hypothesis.strategies._internal import flatmapped, strategies

__all__ = ["stable_labels"]


def _stable(value: Any) -> str:
    """``value`` as text that is the same in every process (no hash, no address)."""
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return repr(value)
    if isinstance(value, tuple | list):
        return "(" + ", ".join(map(_stable, value)) + ")"
    if isinstance(value, set | frozenset):
        return "{" + ", ".join(sorted(map(_stable, value))) + "}"
    if isinstance(value, FunctionType | type):
        return f"{value.__module__}.{value.__qualname__}"
    function = getattr(value, "function", None)  # a state machine's rule
    if isinstance(function, FunctionType):
        return f"rule {_stable(function)}"
    text = repr(value)
    return text if " at 0x" not in text else type(value).__qualname__


def _sampled_from_label(self: Any) -> int:
    # What is sampled enters the label as text, not by its hash: the same in two processes.
    label: int = conjecture_utils.combine_labels(
        self.class_label, conjecture_utils.calc_label_from_name(_stable(self.elements)))
    return label


def _callable_label(f: Callable[..., Any]) -> int:
    if isinstance(f, FunctionType | type):
        return conjecture_utils.calc_label_from_name(f"{f.__module__}.{f.__qualname__}")
    return conjecture_utils.calc_label_from_cls(type(f))


_KEY = "_refsched_stable_label"


def _label(self: Any) -> int:
    # Hypothesis's own cache may hold a label computed outside the block: keep another one.
    cached = self.__dict__.get(_KEY)
    if cached is None:
        self.__dict__[_KEY] = 0  # a strategy that refers to itself, as Hypothesis does
        cached = self.__dict__[_KEY] = self.calc_label()
    label: int = cached
    return label


@contextlib.contextmanager
def stable_labels() -> Iterator[None]:
    """Within the block, strategies made and first drawn from get labels that do not depend
    on ``hash()``: the same seed makes the same calls in every process."""
    patched = [(strategies.SearchStrategy, "label", property(_label)),
               (strategies.SampledFromStrategy, "calc_label", _sampled_from_label),
               (conjecture_utils, "calc_label_from_callable", _callable_label),
               (strategies_core, "calc_label_from_callable", _callable_label),
               (flatmapped, "calc_label_from_callable", _callable_label)]
    missing = [f"{getattr(owner, '__name__', owner)}.{name}" for owner, name, _ in patched
               if name not in owner.__dict__]
    if missing:
        # A Hypothesis whose internals moved: run as it is rather than patch what is not there.
        warnings.warn(f"this Hypothesis has no {', '.join(missing)}: the generated phase runs "
                      "with Hypothesis's own labels, and one seed may make other calls in "
                      "another process", RuntimeWarning, stacklevel=3)
        yield
        return
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patched]
    try:
        for owner, name, value in patched:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
