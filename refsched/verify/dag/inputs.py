"""The input summary the model's steps imply: what a task's function is given.

``TaskScheduler.input_summary(task_id)`` is no spec variable: it is read off the states the
spec steps through. For a version not claimed, each optional dependency whose current version
has ended, as it ended; for a claimed one, the same as it was at the claim (a dependency
resubmitted since does not change it). :class:`ReferenceWithInputs` is the reference model
with that method, for the checks that compare it (the lock-step machine, the oracle's
clauses), reading the spec's states and remembering each claimed version's summary.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from refsched.model import ReferenceScheduler
from refsched.model.dag.actions import optional_of
from refsched.types import Claim, ParentOutcome, Provenance, TaskState

__all__ = ["ReferenceWithInputs", "provenance_rows", "show_provenance", "show_summary",
           "summary_rows"]


class ReferenceWithInputs(ReferenceScheduler):  # type: ignore[misc]  # model/ is Any to mypy
    """The reference model with ``input_summary()``, as ``TaskScheduler`` answers it."""

    def __init__(self, max_concurrency: int) -> None:
        super().__init__(max_concurrency)
        # (task id, generation) of each claimed version -> its summary at the claim
        self._kept: dict[tuple[Hashable, int], dict[Hashable, ParentOutcome]] = {}

    def ready(self, limit: int | None = None) -> list[Claim]:
        claims: list[Claim] = super().ready(limit)
        for claim in claims:  # a version is claimed once: its summary is fixed from now on
            self._kept[(claim.task_id, claim.generation)] = self._ended(claim.task_id)
        return claims

    def input_summary(self, task_id: Hashable) -> dict[Hashable, ParentOutcome]:
        """How each optional dependency of the current version of ``task_id`` ended.

        Errors: unhashable id -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
        """
        view = self._view(f"input_summary({task_id!r})", task_id)
        kept = self._kept.get((task_id, view.generation))
        return dict(kept) if kept is not None else self._ended(task_id)

    def provenance(self, task_id: Hashable) -> Provenance | None:
        """How the current version of ``task_id`` came to be blocked or cancelled, or None:
        ``info(task_id).provenance``, as the protocol's ``provenance`` answers it."""
        return self.info(task_id).provenance  # type: ignore[no-any-return]

    def _ended(self, task_id: Hashable) -> dict[Hashable, ParentOutcome]:
        """The optional deps of ``task_id``'s current version whose current version ended."""
        tasks = self.state_value.tasks
        ended: dict[Hashable, ParentOutcome] = {}
        for dep in optional_of(tasks[task_id]):
            parent = tasks.get(dep)
            if parent is None or not parent.state.is_terminal:
                continue
            result, error = self._outcome(dep, parent.state)
            ended[dep] = ParentOutcome(dep, parent.generation, parent.state, result, error,
                                       parent.blocked_by)
        return ended

    def _outcome(self, task_id: Hashable, state: TaskState) -> tuple[Any, Any]:
        """The result given to ``complete()`` or the error given to ``fail()`` of the current
        version of ``task_id``, as ``info()`` reads them."""
        info = self.info(task_id)
        return (info.result if state is TaskState.SUCCEEDED else None,
                info.error if state is TaskState.FAILED else None)


def show_summary(summary: Any) -> str:
    """An input summary as a counterexample's row shows it: ``{a: failed 1, b: blocked 2 by
    c}``, each parent with its state and generation."""
    if not isinstance(summary, dict):
        return repr(summary)[:200]
    parts = []
    for parent, outcome in sorted(summary.items(), key=lambda item: repr(item[0])):
        try:
            text = f"{parent}: {outcome.state.value} {outcome.generation}"
            if outcome.blocked_by is not None:
                text += f" by {outcome.blocked_by}"
        except AttributeError:
            text = f"{parent}: {outcome!r:.60}"
        parts.append(text)
    return "{" + ", ".join(parts) + "}"


def summary_rows(model: ReferenceWithInputs, implementation: Any,
                 fatal: tuple[type[BaseException], ...] = ()) -> list[tuple[str, str, str, str]]:
    """Where the implementation's input summaries differ from the model's: (id, field, model,
    implementation) for each id whose current version has optional edges in the model (the
    others have none to give). An exception of a ``fatal`` type goes through."""
    rows = []
    for task_id, view in model.snapshot().tasks.items():
        if not optional_of(view):
            continue
        expected = model.input_summary(task_id)
        try:
            actual = implementation.input_summary(task_id)
        except fatal:
            raise
        except Exception as error:
            rows.append((str(task_id), "input_summary()", show_summary(expected),
                         f"raised {type(error).__name__}: {error}"[:200]))
            continue
        if actual != expected:
            rows.append((str(task_id), "input_summary()", show_summary(expected),
                         show_summary(actual)))
    return rows


def show_provenance(record: Any) -> str:
    """A provenance as a counterexample's row shows it: ``failed a 1 via a -> b, actor 'w',
    reason 'r'`` (its time is not compared: it is not shown)."""
    if record is None:
        return "none"
    try:
        return (f"{record.end.value} {record.root} {record.generation} via "
                f"{' -> '.join(map(str, record.path))}, actor {record.actor!r}, "
                f"reason {record.reason!r}")
    except AttributeError:
        return repr(record)[:200]


def provenance_rows(model: ReferenceWithInputs, implementation: Any,
                    fatal: tuple[type[BaseException], ...] = ()
                    ) -> list[tuple[str, str, str, str]]:
    """Where the implementation's provenance differs from the model's: (id, field, model,
    implementation) for each id whose current version is blocked or cancelled in the model
    (the others have none to give). An exception of a ``fatal`` type goes through."""
    rows = []
    for task_id, view in model.snapshot().tasks.items():
        if view.state not in (TaskState.BLOCKED, TaskState.CANCELLED):
            continue
        expected = model.provenance(task_id)
        try:
            actual = implementation.provenance(task_id)
        except fatal:
            raise
        except Exception as error:
            rows.append((str(task_id), "provenance()", show_provenance(expected),
                         f"raised {type(error).__name__}: {error}"[:200]))
            continue
        if actual != expected:
            rows.append((str(task_id), "provenance()", show_provenance(expected),
                         show_provenance(actual)))
    return rows
