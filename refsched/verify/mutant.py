"""One seeded bug: a source patch of a production module, and the bug it plants.

Each system's catalogue (``refsched/verify/<system>/mutants.py``) is a tuple of these;
:mod:`refsched.verify.mutants` runs them against the verification layers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Mutant", "PatchError", "mutant"]


class PatchError(ValueError):
    """A mutant whose snippet does not occur exactly once in the current source."""


@dataclass(frozen=True)
class Mutant:
    """One seeded bug: replace ``original`` (found exactly once in ``file``) by ``replacement``."""

    name: str
    file: str  # a key of a catalogue's MODULES: "scheduler", "runner", ..., "durable_store"
    original: str
    replacement: str
    description: str  # the bug, in one line
    # non-empty: no behaviour tells the mutant from the original, and this says why
    equivalent: str = ""
    # non-empty: a known survivor of every layer, and the check that would kill it
    wanted_check: str = ""
    # test files the unit layer runs before its budget's others: the tests written for this
    # part of the code, so that a long list of unit files does not run out the layer's time
    # before it reaches them
    unit_tests: tuple[str, ...] = ()


def mutant(name: str, file: str, description: str, original: str, replacement: str,
           equivalent: str = "", wanted_check: str = "",
           unit_tests: tuple[str, ...] = ()) -> Mutant:
    """A :class:`Mutant`, its arguments in the order a catalogue reads best: what, then how."""
    return Mutant(name, file, original, replacement, description, equivalent, wanted_check,
                  unit_tests)
