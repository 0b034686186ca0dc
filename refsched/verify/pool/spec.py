"""A :class:`~refsched.model.pool.PoolSnapshot` as the variables of ``spec/WorkStealing.tla``.

The spec keeps a value for every worker of ``Workers`` and every task of ``Tasks``: an empty
deque is ``<<>>``, an idle worker runs ``NoTask``, a task never taken has ``runs`` 0, a root
or unsubmitted task has parent ``NoTask``. A PoolSnapshot lists only what differs from that.
:func:`spec_state` adds the rest for given ``Workers`` and ``Tasks``; :func:`snapshot_of`
drops it, and refuses a state that is not of that shape (so a malformed state is an error,
never a silently different snapshot). Ids are model values in TLC (``w1``, ``a``) and their
names in the model (``"w1"``, ``"a"``). :func:`read_instance` reads the constants of a
``MCWorkStealing*.cfg``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from refsched.model.pool.actions import Phase, PoolSnapshot, queued, running_tasks
from refsched.model.pool.blocking import BlockingInstance, BlockingSnapshot, SpareState
from refsched.model.pool.graph import Instance
from refsched.verify import specstate, tlc
from refsched.verify.specstate import NO_TASK, SpecStateError, task_id
from refsched.verify.tla import Function

__all__ = ["BLOCKING_VARIABLES", "SPEC_VARIABLES", "TRACES_CONFIG", "blocking_snapshot_of",
           "blocking_spec_state", "read_blocking_instance", "read_instance", "show", "snapshot_of",
           "spec_state"]

SPEC_VARIABLES = (
    "phase", "deque", "running", "outstanding", "submitted", "finished", "cancelled", "runs",
    "parent",
)
"""The spec's variables of the pool, in the order of its ``VARIABLES`` declaration."""
BLOCKING_VARIABLES = ("blocked", "spare", "blocker")
"""The spec's variables of managed blocking, declared after the pool's: a state of an instance
without it (``Spares = {}``) may leave them out."""

TRACES_CONFIG = "MCWorkStealingTraces.cfg"
"""The model-checking instance whose whole state graph a work-stealing trace corpus covers."""

_SETS = ("Workers", "Tasks", "Children")


def read_instance(config: str | Path) -> Instance:
    """The constants of a ``MCWorkStealing*.cfg`` file (relative paths: under ``spec/``)."""
    path, text, read = tlc.read_config(config, _SETS)
    values = {name: specstate.model_values(path, name, value) for name, value in read.items()}
    if re.search(r"^\s*NoTask\s*=\s*NoTask\s*$", text, re.M) is None:
        raise ValueError(f"{path}: NoTask must be the model value NoTask")
    if not values["Workers"]:
        raise ValueError(f"{path}: Workers must not be empty")
    if not set(values["Children"]) <= set(values["Tasks"]):
        raise ValueError(f"{path}: Children must be a subset of Tasks")
    cap = re.search(r"^\s*StealCap\s*=\s*(\d+)\s*$", text, re.M)
    if cap is None or int(cap.group(1)) < 1:
        raise ValueError(f"{path}: StealCap must be an integer >= 1")
    return Instance(workers=values["Workers"], tasks=values["Tasks"],
                    children=values["Children"], steal_cap=int(cap.group(1)))


def spec_state(snapshot: PoolSnapshot, workers: Iterable[Hashable],
               tasks: Iterable[Hashable]) -> dict[str, Any]:
    """The spec's variables for ``snapshot`` over ``workers`` and ``tasks`` (supersets of the
    ids it names). Ids are written as given: pass ``ModelValue``s to get TLC's model values."""
    worker_ids, task_ids = list(workers), list(tasks)
    specstate.by_name(worker_ids, set(snapshot.deque) | set(snapshot.running), "workers", "Workers")
    t_by_name = specstate.by_name(task_ids, (
        set(snapshot.submitted) | snapshot.finished | snapshot.cancelled | set(snapshot.runs)
        | set(snapshot.parent) | set(snapshot.parent.values()) | queued(snapshot)
        | running_tasks(snapshot)), "tasks", "Tasks")

    def tasks_of(items: Iterable[Hashable]) -> frozenset[Hashable]:
        return frozenset(t_by_name[t] for t in items)

    state: dict[str, Any] = {
        "phase": snapshot.phase.value,
        "deque": Function({w: tuple(t_by_name[t] for t in snapshot.deque.get(task_id(w), ()))
                           for w in worker_ids}),
        "running": Function({w: t_by_name.get(snapshot.running.get(task_id(w)), NO_TASK)
                             for w in worker_ids}),
        "outstanding": snapshot.outstanding,
        "submitted": tasks_of(snapshot.submitted),
        "finished": tasks_of(snapshot.finished),
        "cancelled": tasks_of(snapshot.cancelled),
        "runs": Function({t: snapshot.runs.get(task_id(t), 0) for t in task_ids}),
        "parent": Function({t: t_by_name.get(snapshot.parent.get(task_id(t)), NO_TASK)
                            for t in task_ids}),
    }
    return {name: state[name] for name in SPEC_VARIABLES}


def _function(state: Mapping[str, Any], name: str) -> Mapping[Any, Any]:
    value = state[name]
    if not isinstance(value, Mapping):
        raise SpecStateError(f"{name} is {value!r}, not a function")
    return value


def _task_set(state: Mapping[str, Any], name: str) -> frozenset[Hashable]:
    value = state[name]
    if not isinstance(value, frozenset):
        raise SpecStateError(f"{name} is {value!r}, not a set")
    return frozenset(task_id(t) for t in value)


def snapshot_of(state: Mapping[str, Any]) -> PoolSnapshot:
    """The PoolSnapshot a spec state stands for. Raises :class:`SpecStateError` if malformed."""
    specstate.require_variables(state, SPEC_VARIABLES)
    try:
        phase = Phase(state["phase"])
    except ValueError:
        raise SpecStateError(f"phase is {state['phase']!r}") from None
    deques, running = _function(state, "deque"), _function(state, "running")
    if set(deques) != set(running):
        raise SpecStateError(f"deque and running are not functions over the same workers: "
                             f"{sorted(map(repr, deques))} and {sorted(map(repr, running))}")
    runs, parent = _function(state, "runs"), _function(state, "parent")
    if set(runs) != set(parent):
        raise SpecStateError(f"runs and parent are not functions over the same tasks: "
                             f"{sorted(map(repr, runs))} and {sorted(map(repr, parent))}")
    for w, d in deques.items():
        if not isinstance(d, tuple):
            raise SpecStateError(f"deque[{w!r}] is {d!r}, not a sequence")
    for t, n in runs.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise SpecStateError(f"runs[{t!r}] is {n!r}, not a natural number")
    outstanding = state["outstanding"]
    if not isinstance(outstanding, int) or isinstance(outstanding, bool):
        raise SpecStateError(f"outstanding is {outstanding!r}, not an integer")
    return PoolSnapshot(
        phase=phase,
        deque={task_id(w): tuple(task_id(t) for t in d) for w, d in deques.items()},
        running={task_id(w): task_id(t) for w, t in running.items() if not specstate.is_no_task(t)},
        outstanding=outstanding,
        submitted=_task_set(state, "submitted"),
        finished=_task_set(state, "finished"),
        cancelled=_task_set(state, "cancelled"),
        runs={task_id(t): n for t, n in runs.items()},
        parent={task_id(t): task_id(p) for t, p in parent.items() if not specstate.is_no_task(p)},
    )


def _names(items: Iterable[Hashable]) -> str:
    return "{" + ", ".join(sorted(map(str, items))) + "}"


def show(snapshot: PoolSnapshot) -> str:
    """A readable multi-line rendering of a state, for mismatch messages."""
    s = snapshot
    rows = [f"{s.phase.value} outstanding={s.outstanding} submitted={_names(s.submitted)} "
            f"finished={_names(s.finished)} cancelled={_names(s.cancelled)}"]
    for w in sorted(set(s.deque) | set(s.running), key=str):
        doing = f"running {s.running[w]}" if w in s.running else "idle"
        tasks = ", ".join(map(str, s.deque.get(w, ())))
        rows.append(f"  {w}: {doing}, deque (top first) <<{tasks}>>")
    if s.runs:
        rows.append("  runs: " + ", ".join(f"{t}={n}" for t, n in _by_name(s.runs)))
    if s.parent:
        rows.append("  parent: " + ", ".join(f"{t} spawned by {p}" for t, p in _by_name(s.parent)))
    return "\n".join(rows)


def _by_name(mapping: Mapping[Hashable, Any]) -> list[tuple[Hashable, Any]]:
    return sorted(mapping.items(), key=lambda kv: str(kv[0]))


# -- Managed blocking (spec section "Managed blocking") ------------------------------------------

def read_blocking_instance(config: str | Path) -> tuple[Instance, BlockingInstance]:
    """The constants of a config with managed blocking: the pool's, and Workers, Spares and
    MaxSpares."""
    path, _, read = tlc.read_config(config, ("Workers", "Spares", "MaxSpares"))
    workers = specstate.model_values(path, "Workers", read["Workers"])
    spares = specstate.model_values(path, "Spares", read["Spares"])
    bound = read["MaxSpares"]
    if not isinstance(bound, int) or isinstance(bound, bool) or bound < 0:
        raise ValueError(f"{path}: MaxSpares must be a natural number")
    return read_instance(config), BlockingInstance(frozenset(workers), frozenset(spares), bound)


def blocking_snapshot_of(state: Mapping[str, Any]) -> BlockingSnapshot:
    """The BlockingSnapshot a spec state stands for. Raises :class:`SpecStateError` if
    malformed."""
    pool = snapshot_of(state)
    specstate.require_variables(state, BLOCKING_VARIABLES)
    spare, blocker = _function(state, "spare"), _function(state, "blocker")
    try:
        states = {task_id(s): SpareState(v) for s, v in spare.items()}
    except ValueError:
        raise SpecStateError(f"spare is {spare!r}") from None
    blocked = state["blocked"]
    if not isinstance(blocked, frozenset) or not all(isinstance(b, frozenset)
                                                     for b in blocker.values()):
        raise SpecStateError(f"blocked {blocked!r} or blocker {blocker!r} holds no sets")
    return BlockingSnapshot(
        pool=pool,
        blocked=frozenset(task_id(x) for x in blocked),
        spare={s: v for s, v in states.items() if v is not SpareState.OFF},
        blocker={task_id(s): frozenset(task_id(x) for x in b) for s, b in blocker.items() if b},
    )


def blocking_spec_state(snapshot: BlockingSnapshot, workers: Iterable[Hashable],
                        spares: Iterable[Hashable], tasks: Iterable[Hashable]) -> dict[str, Any]:
    """The spec's variables with managed blocking for ``snapshot``: those of
    :func:`spec_state` over ``Threads`` (``workers`` then ``spares``), and ``blocked``,
    ``spare`` (an off spare ``"off"``) and ``blocker`` (an empty set where none) over
    ``spares``. The inverse of :func:`blocking_snapshot_of`."""
    spare_ids, thread_ids = list(spares), [*workers, *spares]
    state = spec_state(snapshot.pool, thread_ids, tasks)
    by_name = specstate.by_name(thread_ids, snapshot.blocked, "threads", "Threads")

    def threads(names: Iterable[Hashable]) -> frozenset[Hashable]:
        return frozenset(by_name[x] for x in names)

    state["blocked"] = threads(snapshot.blocked)
    state["spare"] = Function({s: snapshot.spare.get(task_id(s), SpareState.OFF).value
                               for s in spare_ids})
    state["blocker"] = Function({s: threads(snapshot.blocker.get(task_id(s), ()))
                                 for s in spare_ids})
    return state
