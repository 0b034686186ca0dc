"""Which of the contract's clauses a check drove the implementation through.

Every call the oracle makes of an implementation, in any phase, passes through an observed
factory (:func:`observed`): each answer is named by the clause that decides it
(:func:`refsched.conform.clauses.decide`) and counted. After the check, :class:`Coverage` says
which clauses of the system were driven, which the profile left out (a clause whose ``needs``
the profile does not have is never asked), and which were admitted but not driven. The report
carries it under ``"coverage"``, and its text a one-line summary.

The answer named is the implementation's: in a conforming run it is the model's (every answer
was compared), and a diverging run's coverage only says how far the check went.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from refsched.conform import clauses

__all__ = ["Coverage", "ObservedImplementation", "observed"]

# what is never counted: harness failures (no answer) and what the oracle itself reads to
# judge (a Python implementation's own invariant check, its introspection)
_LISTED = 8  # the most clauses not driven that the summary names one by one
_NOT_CALLS = frozenset({"check_invariants", "info", "pop_endings", "discard"})


@dataclass
class Coverage:
    """The clauses of ``system`` a check drove, counted."""

    system: str
    driven: collections.Counter[str] = field(default_factory=collections.Counter)
    unclassified: collections.Counter[str] = field(default_factory=collections.Counter)

    def record(self, op: str, args: tuple[Any, ...], answer: Any,
               kwargs: dict[str, Any] | None = None) -> None:
        """Count the clause that decides ``op(*args)`` answered ``answer``."""
        if op not in clauses.PARAMETERS.get(self.system, {}):
            return
        found = clauses.decide(self.system, op, args, answer, kwargs)
        if found is None:
            self.unclassified[f"{op}: {clauses.outcome_of(answer)}"] += 1
        else:
            self.driven[found.id] += 1

    def left_out(self, profile: Any) -> list[str]:
        """The ids of the clauses ``profile`` does not admit, in catalogue order."""
        return [c.id for c in clauses.clauses(self.system) if not c.admitted_by(profile)]

    def not_driven(self, profile: Any) -> list[str]:
        """The ids of the clauses ``profile`` admits that no call drove."""
        return [c.id for c in clauses.clauses(self.system)
                if c.admitted_by(profile) and not self.driven[c.id]]

    def to_json(self, profile: Any) -> dict[str, Any]:
        every = clauses.clauses(self.system)
        return {
            "clauses": len(every),
            "driven": {c.id: self.driven[c.id] for c in every if self.driven[c.id]},
            "left_out_by_profile": self.left_out(profile),
            "not_driven": self.not_driven(profile),
            "unclassified": dict(self.unclassified),
        }

    def summary(self, profile: Any) -> str:
        """One line: ``clauses: 41 of 44 driven; left out by the profile: ...``."""
        every = clauses.clauses(self.system)
        driven = sum(1 for c in every if self.driven[c.id] and c.admitted_by(profile))
        text = f"clauses: {driven} of {len(every)} driven"
        left_out = self.left_out(profile)
        if left_out:
            text += f"; left out by the profile: {', '.join(left_out)}"
        missed = self.not_driven(profile)
        if missed:  # a check that ended early drove few: their number says enough
            text += (f"; not driven: {', '.join(missed)}" if len(missed) <= _LISTED
                     else f"; {len(missed)} not driven")
        return text


class _Observed:
    """An instance whose calls are counted into a :class:`Coverage` as they are answered."""

    def __init__(self, inner: Any, coverage: Coverage, fatal: tuple[type[BaseException], ...]
                 ) -> None:
        self.__dict__["_inner"] = inner
        self.__dict__["_coverage"] = coverage
        self.__dict__["_fatal"] = fatal

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in _NOT_CALLS or name.startswith("_") or not callable(value):
            return value
        coverage, fatal = self._coverage, self._fatal

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                answer = value(*args, **kwargs)
            except fatal:
                raise
            except Exception as error:
                coverage.record(name, args, error, kwargs)
                raise
            coverage.record(name, args, answer, kwargs)
            return answer
        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)


def observed(factory: Callable[..., Any], coverage: Coverage,
             fatal: tuple[type[BaseException], ...] = ()) -> Callable[..., Any]:
    """``factory`` whose instances count their calls into ``coverage``; the factory call
    itself is ``new``. A pool class in this process is returned as it is (the driver unwraps
    it to run it without threads): its calls are not counted."""
    drives_steps = getattr(factory, "drives_steps", False)
    if coverage.system == "pool" and not drives_steps:
        return factory

    @functools.wraps(factory)
    def make(*args: Any, **kwargs: Any) -> Any:
        try:
            instance = factory(*args, **kwargs)
        except fatal:
            raise
        except Exception as error:
            coverage.record("new", args, error, kwargs)
            raise
        coverage.record("new", args, None, kwargs)
        return _Observed(instance, coverage, fatal)
    del make.__wrapped__  # the observed factory is not its inner: nothing unwraps past it
    make.drives_steps = drives_steps  # type: ignore[attr-defined]
    return make


class ObservedImplementation:
    """An implementation whose instances, from :meth:`new` and :meth:`remote`, count their
    calls into ``coverage``; everything else is the implementation's."""

    def __init__(self, implementation: Any, coverage: Coverage,
                 fatal: tuple[type[BaseException], ...] = ()) -> None:
        self._implementation = implementation
        self.coverage = coverage
        self._fatal = fatal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._implementation, name)

    def new(self, *args: Any, **kwargs: Any) -> Any:
        return observed(self._implementation.new, self.coverage, self._fatal)(*args, **kwargs)

    def remote(self) -> Callable[..., Any]:
        return observed(self._implementation.remote(), self.coverage, self._fatal)

    def probed(self) -> Callable[..., Any]:
        """What the clauses phase probes: :meth:`remote`, but a pool class in this process
        stepped here (``stepped_factory``), so that its moves are counted too. (The other
        phases drive the class from its own code paths, which replay compares in full.)"""
        factory = self._implementation.remote()
        if self.coverage.system == "pool" and not getattr(factory, "drives_steps", False):
            from refsched.verify.pool.driver import stepped_factory

            factory = stepped_factory(factory)
        return observed(factory, self.coverage, self._fatal)
