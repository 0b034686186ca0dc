"""A :class:`~refsched.types.Snapshot` as the variables of ``spec/Scheduler.tla``, and back.

The spec keeps a value for every id of the constant ``Tasks``: an id never submitted has
generation 0, state ``"absent"``, no deps, blockedBy ``NoTask``, provenance ``NoRecord`` and
zeros elsewhere. A
Snapshot lists only submitted ids. :func:`spec_state` adds the absent ids of a given
``Tasks``; :func:`snapshot_of` drops them, and refuses a state that is not of that shape
(so a malformed trace state is an error, never a silently different snapshot).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from refsched.types import OptionalDepsView, ProvenanceView, Snapshot, TaskState, VersionView
from refsched.verify.tla import Function, ModelValue

__all__ = [
    "NO_RECORD",
    "NO_TASK",
    "SPEC_VARIABLES",
    "SpecStateError",
    "by_name",
    "is_no_task",
    "model_values",
    "require_booleans",
    "require_functions",
    "require_variables",
    "rows",
    "snapshot_of",
    "spec_state",
    "state_of",
    "task_id",
    "task_ids",
]

SPEC_VARIABLES = (
    "started", "closed", "nextSeq", "generation", "state", "deps", "optional", "remainingDeps",
    "blockedBy", "cancelRequested", "claims", "seq", "provenance",
)
"""The spec's variables, in the order of its ``VARIABLES`` declaration."""

NO_TASK = ModelValue("NoTask")
"""The spec's ``NoTask``: blockedBy of a version that is not blocked."""

NO_RECORD = Function({"root": NO_TASK, "generation": 0, "end": "none", "path": ()})
"""The spec's ``NoRecord``: the provenance of a version neither blocked nor cancelled."""

_PER_TASK = SPEC_VARIABLES[3:]
_ABSENT = {
    "generation": 0, "state": "absent", "deps": frozenset(), "optional": frozenset(),
    "remainingDeps": 0,
    "blockedBy": NO_TASK, "cancelRequested": False, "claims": 0, "seq": 0,
    "provenance": NO_RECORD,
}


def _record_value(record: ProvenanceView | None) -> Any:
    """A provenance record as the spec writes it."""
    if record is None:
        return NO_RECORD
    return Function({"root": record.root, "generation": record.generation,
                     "end": record.end.value, "path": tuple(record.path)})


def _record_of(t: Hashable, value: Any) -> ProvenanceView | None:
    """The record a spec value of ``provenance[t]`` stands for (None: ``NoRecord``)."""
    try:
        fields = {name: value[name] for name in ("root", "generation", "end", "path")}
    except (KeyError, TypeError):
        raise SpecStateError(f"id {t!r} has provenance {value!r}") from None
    if is_no_task(fields["root"]):
        if (fields["generation"], fields["end"], fields["path"]) != (0, "none", ()):
            raise SpecStateError(f"id {t!r} has provenance {value!r}")
        return None
    if not isinstance(fields["path"], tuple):
        raise SpecStateError(f"id {t!r} has provenance {value!r}")
    return ProvenanceView(task_id(fields["root"]), fields["generation"],
                          state_of(TaskState, t, fields["end"]),
                          tuple(task_id(x) for x in fields["path"]))


class SpecStateError(ValueError):
    """A state that is not a value of the spec's variables (a missing variable, a bad value)."""


def is_no_task(value: Any) -> bool:
    """Whether ``value`` is the spec's ``NoTask``."""
    # ITF has no model values: traces write NoTask as the string "NoTask".
    return bool(value == NO_TASK or value == NO_TASK.name)


_is_no_task = is_no_task


def model_values(path: Path, name: str, value: Any) -> tuple[str, ...]:
    """The names of a ``.cfg``'s constant ``name``, a set of model values (``ValueError`` if
    it is not one), sorted."""
    if not isinstance(value, frozenset) or not all(isinstance(v, ModelValue) for v in value):
        raise ValueError(f"{path}: {name} must be a set of model values")
    return tuple(sorted(v.name for v in value))


def by_name(ids: Sequence[Hashable], named: Collection[Hashable], what: str,
            constant: str) -> dict[Hashable, Hashable]:
    """Each of ``ids`` (as a spec state writes them: model values or names) by its name.
    Raises :class:`SpecStateError` if a state names one (``named``) that is not among them."""
    names = {task_id(i): i for i in ids}
    unknown = sorted(map(repr, set(named) - set(names)))
    if unknown:
        raise SpecStateError(f"{what} {unknown} are not in {constant} {list(ids)!r}")
    return names


def require_variables(state: Mapping[str, Any], variables: Iterable[str]) -> None:
    """Raise :class:`SpecStateError` unless ``state`` has every one of ``variables``."""
    missing = [name for name in variables if name not in state]
    if missing:
        raise SpecStateError(f"the state lacks the variables {missing}")


def require_functions(state: Mapping[str, Any], names: Iterable[str],
                      ids: Collection[Hashable]) -> None:
    """Raise :class:`SpecStateError` unless each variable of ``names`` is a function over
    ``ids``."""
    for name in names:
        if not isinstance(state[name], Mapping) or set(state[name]) != set(ids):
            raise SpecStateError(f"{name} is not a function over the ids {list(ids)!r}")


def rows(state: Mapping[str, Any], names: Sequence[str],
         ids: Iterable[Hashable]) -> list[tuple[Hashable, dict[str, Any]]]:
    """Each id with its row: the value at it of each per-id variable of ``names``."""
    return [(t, {name: state[name][t] for name in names}) for t in ids]


_Enum = TypeVar("_Enum", bound=Enum)


def state_of(kind: type[_Enum], t: Hashable, value: Any) -> _Enum:
    """The state ``value`` of the id ``t`` names, one of ``kind``'s. Raises
    :class:`SpecStateError` if it names none."""
    try:
        return kind(value)
    except ValueError:
        raise SpecStateError(f"id {t!r} has state {value!r}") from None


def require_booleans(state: Mapping[str, Any], names: Iterable[str]) -> None:
    """Raise :class:`SpecStateError` unless each variable of ``names`` is a boolean."""
    for name in names:
        if not isinstance(state[name], bool):
            raise SpecStateError(f"{name} is {state[name]!r}, not a boolean")


def spec_state(snapshot: Snapshot, tasks: Iterable[Hashable]) -> dict[str, Any]:
    """The spec's variables for ``snapshot`` over the ids ``tasks`` (a superset of its ids)."""
    ids = list(tasks)
    unknown = [t for t in snapshot.tasks if t not in ids]
    if unknown:
        raise SpecStateError(f"ids {unknown!r} are not in Tasks {ids!r}")
    per_task: dict[str, dict[Hashable, Any]] = {name: {} for name in _PER_TASK}
    for t in ids:
        view = snapshot.tasks.get(t)
        if view is None:
            for name in _PER_TASK:
                per_task[name][t] = _ABSENT[name]
            continue
        per_task["generation"][t] = view.generation
        per_task["state"][t] = view.state.value
        per_task["deps"][t] = frozenset(view.deps)
        per_task["optional"][t] = (view.optional if isinstance(view, OptionalDepsView)
                                   else frozenset())
        per_task["remainingDeps"][t] = view.remaining_deps
        per_task["blockedBy"][t] = NO_TASK if view.blocked_by is None else view.blocked_by
        per_task["cancelRequested"][t] = view.cancel_requested
        per_task["claims"][t] = view.claims
        per_task["seq"][t] = view.seq
        per_task["provenance"][t] = _record_value(snapshot.records.get(t))
    state: dict[str, Any] = {
        "started": snapshot.started, "closed": snapshot.closed, "nextSeq": snapshot.next_seq,
    }
    state.update({name: Function(per_task[name]) for name in _PER_TASK})
    return {name: state[name] for name in SPEC_VARIABLES}


def task_ids(state: Mapping[str, Any]) -> list[Hashable]:
    """The ids a spec state speaks of (the domain of its per-id variables)."""
    generation = state.get("generation")
    if not isinstance(generation, Mapping):
        raise SpecStateError("the state has no 'generation' function")
    return list(generation)


def task_id(value: Any) -> Hashable:
    """An id as the model and the API name it: a TLC model value becomes its name."""
    # TLC prints the ids of a model-checking instance as model values; the model uses names.
    return value.name if isinstance(value, ModelValue) else value


def snapshot_of(state: Mapping[str, Any]) -> Snapshot:
    """The Snapshot a spec state stands for. Raises :class:`SpecStateError` if malformed."""
    if "provenance" not in state:
        # a state of a trace recorded before the spec had provenance: none is recorded
        state = {**state, "provenance": {t: NO_RECORD for t in task_ids(state)}}
    require_variables(state, SPEC_VARIABLES)
    ids = task_ids(state)
    require_functions(state, _PER_TASK, ids)
    tasks: dict[Hashable, VersionView] = {}
    records: dict[Hashable, ProvenanceView] = {}
    for t, row in rows(state, _PER_TASK, ids):
        record = _record_of(t, row["provenance"])
        if record is not None:
            records[task_id(t)] = record
        if row["generation"] == 0:
            absent = {**_ABSENT, "blockedBy": row["blockedBy"], "provenance": row["provenance"]}
            if row != absent or not _is_no_task(row["blockedBy"]) or record is not None:
                raise SpecStateError(f"id {t!r} has generation 0 but is not absent: {row}")
            continue
        blocked_by = row["blockedBy"]
        optional = frozenset(task_id(d) for d in row["optional"])
        deps = frozenset(task_id(d) for d in row["deps"])
        if not optional <= deps:
            raise SpecStateError(f"id {t!r} has optional edges {sorted(map(repr, optional))} "
                                 "that are not among its deps")
        fields = dict(
            generation=row["generation"],
            state=state_of(TaskState, t, row["state"]),
            deps=deps,
            remaining_deps=row["remainingDeps"],
            blocked_by=None if _is_no_task(blocked_by) else task_id(blocked_by),
            cancel_requested=row["cancelRequested"],
            claims=row["claims"],
            seq=row["seq"],
        )
        tasks[task_id(t)] = (OptionalDepsView(**fields, optional=optional) if optional
                             else VersionView(**fields))
    require_booleans(state, ("started", "closed"))
    return Snapshot(started=state["started"], closed=state["closed"],
                    next_seq=state["nextSeq"], tasks=tasks, provenance=records or None)
