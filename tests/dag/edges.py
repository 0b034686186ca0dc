"""The edge kinds and AddDeps of spec/Scheduler.tla as the verification tools read them.

The TaskScheduler's :class:`~refsched.verify.dag.system.SchedulerSystem` reads a TLC state as
the TaskScheduler's snapshot, which has no optional edges. :data:`EDGES_SYSTEM` reads the
spec's ``optional`` too (a version with optional edges is the model's ``OptionalDepsView``) and
the constants ``OptionalEdges`` and ``AddDepsAllowed``, and explores the model with them: so
TLC's states and graph of an instance with either constant on can be compared with the model.
It reads every config of ``MCScheduler`` (without optional edges its states are the
TaskScheduler's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refsched.model.dag.actions import ACTIONS, EDGE_ACTIONS, optional_of, with_optional
from refsched.model.dag.graph import ModelGraph, explore
from refsched.types import Snapshot
from refsched.verify import specstate, stategraph, tlc
from refsched.verify.dag.system import SchedulerSystem
from refsched.verify.specstate import SpecStateError

__all__ = ["ADD_DEPS_TRACES", "EDGES_SYSTEM", "EDGES_TRACES", "EdgesInstance", "EdgesSystem"]

EDGES_TRACES = "MCSchedulerEdgesTraces.cfg"
"""The instance with both constants on whose whole state graph the model's must equal."""

ADD_DEPS_TRACES = "MCSchedulerAddDepsTraces.cfg"
"""The instance with AddDeps on 3 ids whose whole state graph the model's must equal."""


@dataclass(frozen=True, slots=True)
class EdgesInstance:
    """The constants of a ``MCScheduler*.cfg``, the edge kinds' gates among them."""

    tasks: tuple[str, ...]
    max_concurrency: int
    max_generation: int
    optional_edges: bool  # OptionalEdges
    add_deps: bool  # AddDepsAllowed


def read_instance(config: str | Path) -> EdgesInstance:
    base = stategraph.read_instance(config)
    path, _, values = tlc.read_config(config, ("OptionalEdges", "AddDepsAllowed"))
    gates = values["OptionalEdges"], values["AddDepsAllowed"]
    if not all(isinstance(v, bool) for v in gates):
        raise ValueError(f"{path}: OptionalEdges and AddDepsAllowed must be TRUE or FALSE")
    return EdgesInstance(base.tasks, base.max_concurrency, base.max_generation, *gates)


def snapshot_of(values: Mapping[str, Any]) -> Snapshot:
    """The model's state a TLC state stands for, optional edges included."""
    snapshot = specstate.snapshot_of(values)
    optional = values.get("optional")
    if not isinstance(optional, Mapping):
        raise SpecStateError("the state has no 'optional' function")
    tasks = dict(snapshot.tasks)
    for t, ids in optional.items():
        named = frozenset(specstate.task_id(d) for d in ids)
        key = specstate.task_id(t)
        if key not in tasks:
            if named:
                raise SpecStateError(f"id {key!r} is absent but has optional edges")
            continue
        tasks[key] = with_optional(tasks[key], named)
    return snapshot.replace(tasks=tasks)


def show(state: Snapshot) -> str:
    """A state on a few lines, each version's optional edges too."""
    lines = stategraph.show(state).splitlines()
    extra = [f"  {t}: optional={{{', '.join(sorted(map(str, optional_of(v))))}}}"
             for t, v in sorted(state.tasks.items(), key=lambda kv: str(kv[0]))
             if optional_of(v)]
    return "\n".join([*lines, *extra])


EVERY_ACTION = {**ACTIONS, **EDGE_ACTIONS}
"""The spec's actions, the gated ones too, by name."""


class EdgesSystem(SchedulerSystem):
    """The TaskScheduler's spec with its edge kinds and AddDeps: for TLC's states and graphs."""

    traces_config = EDGES_TRACES
    actions = EVERY_ACTION

    def read_instance(self, config: str | Path) -> EdgesInstance:  # type: ignore[override]
        return read_instance(config)

    def explore(self, instance: EdgesInstance) -> ModelGraph[Snapshot]:  # type: ignore[override]
        return explore(instance.tasks, instance.max_concurrency, instance.max_generation,
                       optional_edges=instance.optional_edges, add_deps=instance.add_deps)

    def snapshot_of(self, values: Mapping[str, Any]) -> Snapshot:
        return snapshot_of(values)

    def show(self, state: Snapshot) -> str:
        return show(state)


EDGES_SYSTEM = EdgesSystem()
