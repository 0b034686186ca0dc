"""A :class:`~refsched.types.TimerSnapshot` as the variables of ``spec/TimerQueue.tla``, and back.

The spec keeps a value for every id of the constant ``Tasks``: an id never scheduled has
version 0, state ``"absent"`` and zeros elsewhere. A TimerSnapshot lists only scheduled ids.
:func:`spec_state` adds the absent ids of a given ``Tasks``; :func:`snapshot_of` drops them,
and refuses a state that is not of that shape (so a malformed state is an error, never a
silently different snapshot). Ids are model values in TLC (``a``) and their names in the
model (``"a"``). :func:`read_instance` reads the constants of a ``MCTimerQueue*.cfg``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from refsched.model.timer.graph import Instance
from refsched.types import TimerEntry, TimerSnapshot, TimerState, TimerVersionView
from refsched.verify import specstate, tlc
from refsched.verify.specstate import SpecStateError, task_id
from refsched.verify.tla import Function, ModelValue

__all__ = ["SPEC_VARIABLES", "TRACES_CONFIG", "read_instance", "show", "snapshot_of", "spec_state"]

SPEC_VARIABLES = (
    "now", "closed", "nextSeq", "version", "state", "runAt", "priority", "seq",
    "cancelRequested", "claims", "heap",
)
"""The spec's variables, in the order of its ``VARIABLES`` declaration."""

TRACES_CONFIG = "MCTimerQueueTraces.cfg"
"""The model-checking instance whose state graph the timer trace corpus covers."""

_PER_TASK = ("version", "state", "runAt", "priority", "seq", "cancelRequested", "claims")
_ABSENT: dict[str, Any] = {
    "version": 0, "state": "absent", "runAt": 0, "priority": 0, "seq": 0,
    "cancelRequested": False, "claims": 0,
}
_CONSTANTS = ("Tasks", "Priorities", "RebuildFloor", "MaxTime", "MaxVersion", "MaxSchedules")


def read_instance(config: str | Path) -> Instance:
    """The constants of a ``MCTimerQueue*.cfg`` file (relative paths: under ``spec/``)."""
    path, text, values = tlc.read_config(config, _CONSTANTS)
    if re.search(r"^\s*Times\s*<-\s*MCTimes\s*$", text, re.M) is None:
        raise ValueError(f"{path}: Times must be MCTimes (0..MaxTime)")
    tasks, priorities = values["Tasks"], values["Priorities"]
    if not isinstance(tasks, frozenset) or not all(isinstance(t, ModelValue) for t in tasks):
        raise ValueError(f"{path}: Tasks must be a set of model values")
    if not isinstance(priorities, frozenset) or not all(isinstance(p, int) for p in priorities):
        raise ValueError(f"{path}: Priorities must be a set of integers")
    for name in ("RebuildFloor", "MaxTime", "MaxVersion", "MaxSchedules"):
        if not isinstance(values[name], int) or isinstance(values[name], bool):
            raise ValueError(f"{path}: {name} must be an integer")
    return Instance(
        tasks=tuple(sorted(t.name for t in tasks)),
        max_time=values["MaxTime"],
        priorities=tuple(sorted(priorities)),
        rebuild_floor=values["RebuildFloor"],
        max_version=values["MaxVersion"],
        max_schedules=values["MaxSchedules"],
    )


def spec_state(snapshot: TimerSnapshot, tasks: Iterable[Hashable]) -> dict[str, Any]:
    """The spec's variables for ``snapshot`` over the ids ``tasks`` (a superset of its ids).

    Ids are written as given: pass ``ModelValue``s to get TLC's model values.
    """
    ids = list(tasks)
    named = specstate.by_name(ids, snapshot.tasks, "ids", "Tasks")
    per_task: dict[str, dict[Hashable, Any]] = {name: {} for name in _PER_TASK}
    for t in ids:
        view = snapshot.tasks.get(task_id(t))
        row = _ABSENT if view is None else {
            "version": view.version, "state": view.state.value, "runAt": view.run_at,
            "priority": view.priority, "seq": view.seq,
            "cancelRequested": view.cancel_requested, "claims": view.claims,
        }
        for name in _PER_TASK:
            per_task[name][t] = row[name]
    heap = frozenset((e.run_at, e.priority, e.seq, named[e.task_id], e.version)
                     for e in snapshot.heap)
    state: dict[str, Any] = {
        "now": snapshot.now, "closed": snapshot.closed, "nextSeq": snapshot.next_seq,
        "heap": heap,
    }
    state.update({name: Function(per_task[name]) for name in _PER_TASK})
    return {name: state[name] for name in SPEC_VARIABLES}


def _entry(value: Any) -> TimerEntry:
    if not isinstance(value, tuple) or len(value) != 5:
        raise SpecStateError(f"heap entry {value!r} is not a 5-tuple")
    run_at, priority, seq, t, version = value
    return TimerEntry(run_at, priority, seq, task_id(t), version)


def snapshot_of(state: Mapping[str, Any]) -> TimerSnapshot:
    """The TimerSnapshot a spec state stands for. Raises :class:`SpecStateError` if malformed."""
    specstate.require_variables(state, SPEC_VARIABLES)
    versions = state["version"]
    if not isinstance(versions, Mapping):
        raise SpecStateError("the state has no 'version' function")
    ids = list(versions)
    specstate.require_functions(state, _PER_TASK, ids)
    tasks: dict[Hashable, TimerVersionView] = {}
    for t, row in specstate.rows(state, _PER_TASK, ids):
        if row["version"] == 0:
            if row != _ABSENT:
                raise SpecStateError(f"id {t!r} has version 0 but is not absent: {row}")
            continue
        tasks[task_id(t)] = TimerVersionView(
            version=row["version"], state=specstate.state_of(TimerState, t, row["state"]),
            run_at=row["runAt"], priority=row["priority"], seq=row["seq"],
            cancel_requested=row["cancelRequested"], claims=row["claims"],
        )
    specstate.require_booleans(state, ("closed",))
    if not isinstance(state["heap"], frozenset):
        raise SpecStateError(f"heap is {state['heap']!r}, not a set")
    return TimerSnapshot(now=state["now"], closed=state["closed"], next_seq=state["nextSeq"],
                         tasks=tasks, heap=frozenset(_entry(e) for e in state["heap"]))


def show(snapshot: TimerSnapshot) -> str:
    """A readable multi-line rendering of a state, for mismatch messages."""
    s = snapshot
    rows = [f"now={s.now} closed={s.closed} nextSeq={s.next_seq}"]
    if not s.tasks:
        rows[0] += " (no task scheduled)"
    for t, v in sorted(s.tasks.items(), key=lambda kv: str(kv[0])):
        rows.append(f"  {t}: v{v.version} {v.state.value} runAt={v.run_at} "
                    f"priority={v.priority} seq={v.seq} cancelRequested={v.cancel_requested} "
                    f"claims={v.claims}")
    live = {e for e in s.heap if (view := s.tasks.get(e.task_id)) is not None
            and view.version == e.version and view.state is TimerState.PENDING}
    entries = [f"{'live' if e in live else 'stale'} <<{e.run_at}, {e.priority}, {e.seq}, "
               f"{e.task_id}, {e.version}>>" for e in sorted(s.heap, key=lambda e: e.key)]
    rows.append("  heap: " + (", ".join(entries) if entries else "empty"))
    return "\n".join(rows)
