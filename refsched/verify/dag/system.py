"""The dependency-aware TaskScheduler as a :class:`~refsched.verify.system.System`.

``spec/Scheduler.tla``, the model ``refsched.model``, and ``refsched.TaskScheduler`` driven by
:func:`refsched.verify.replay.apply_step`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from refsched.dag.scheduler import TaskScheduler
from refsched.model.dag.actions import ACTIONS, INITIAL, RECORDING
from refsched.model.dag.graph import ModelGraph, action_args, explore
from refsched.types import Snapshot, TaskState
from refsched.verify import replay, specstate, stategraph
from refsched.verify.system import Fatal, System, count_error

__all__ = ["SYSTEM", "SchedulerSystem"]


CORPUS_CONFIGS = (stategraph.TRACES_CONFIG, "MCSchedulerCorpusEdges.cfg",
                  "MCSchedulerCorpusAddDeps.cfg")
"""Every corpus instance, the traces config first: then the edge kinds on 2 ids and 2
generations (parents that succeed, fail, are cancelled or replaced), then AddDeps and the edge
kinds on 3 ids under ``CorpusBound`` (parents blocked by a cancelled grandparent)."""


def corpus_bound(s: Snapshot) -> bool:
    """``MCSchedulerCorpus.tla``'s ``CorpusBound``: not closed, nothing running or failed, at
    most two edges and one of them optional."""
    views = s.tasks.values()
    return (not s.closed
            and all(v.state not in (TaskState.RUNNING, TaskState.FAILED) for v in views)
            and sum(len(v.deps) for v in views) <= 2
            and sum(len(getattr(v, "optional", ())) for v in views) <= 1)


class SchedulerSystem(System):
    name = "scheduler"
    module = "Scheduler"
    implementation = TaskScheduler
    traces_config = stategraph.TRACES_CONFIG
    corpus_configs = CORPUS_CONFIGS
    corpus_modules = MappingProxyType({"MCSchedulerCorpusAddDeps.cfg": "MCSchedulerCorpus.tla"})
    variables = specstate.SPEC_VARIABLES
    label_actions = stategraph.LABEL_ACTIONS
    initial = INITIAL
    actions = ACTIONS
    snapshot_type = Snapshot

    # The corpus was published under this name before there was a second system.
    manifest = "MANIFEST.json"

    def read_instance(self, config: str | Path) -> stategraph.Instance:
        return stategraph.read_instance(config)

    def explore(self, instance: stategraph.Instance) -> ModelGraph[Snapshot]:
        return explore(instance.tasks, instance.max_concurrency, instance.max_generation,
                       initial=RECORDING if instance.record_provenance else INITIAL,
                       optional_edges=instance.optional_edges, add_deps=instance.add_deps,
                       constraint=corpus_bound if instance.corpus_bound else None)

    def constants(self, instance: stategraph.Instance) -> dict[str, Any]:
        return {"Tasks": list(instance.tasks), "MaxConcurrency": instance.max_concurrency}

    def manifest_constants(self, instance: stategraph.Instance) -> dict[str, Any]:
        return {**self.constants(instance), "MaxGeneration": instance.max_generation,
                "OptionalEdges": instance.optional_edges, "AddDepsAllowed": instance.add_deps}

    def snapshot_of(self, values: Mapping[str, Any]) -> Snapshot:
        return specstate.snapshot_of(values)

    def spec_state(self, state: Snapshot, instance: stategraph.Instance) -> dict[str, Any]:
        return specstate.spec_state(state, instance.tasks)

    def show(self, state: Snapshot) -> str:
        return stategraph.show(state)

    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        return count_error(constants, ("MaxConcurrency",), 1)

    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> Any:
        return factory(constants["MaxConcurrency"])

    def model_args(self, action: str, params: Mapping[str, Any],
                   constants: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(action_args(ACTIONS[action], params, constants["MaxConcurrency"]))

    def apply(self, implementation: Any, action: str, params: Mapping[str, Any],
              before: Snapshot, profile: Any, fatal: Fatal) -> None:
        replay.apply_normalised(implementation, action, params, before, profile, fatal)

    def side_by_side(self, expected: Snapshot, actual: Snapshot, side: str) -> str:
        return replay.side_by_side(expected, actual, side)

    def summary(self, state: Hashable) -> str:
        assert isinstance(state, Snapshot)
        return replay.summary(state)


SYSTEM = SchedulerSystem()
