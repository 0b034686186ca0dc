"""The work-stealing pool as a :class:`~refsched.verify.system.System`: the state-graph parts.

``spec/WorkStealing.tla`` and the model ``refsched.model.pool``: enough for TLC's state graph
of ``MCWorkStealingTraces.cfg`` to be read and matched against the model
(:func:`refsched.verify.stategraph.match`). Replaying a trace through the production
``refsched.WorkStealingPool`` is not wired yet: those methods raise ``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from refsched.model.graph import ModelGraph, describe
from refsched.model.pool import ACTIONS, INITIAL, Instance, PoolSnapshot
from refsched.model.pool import explore as explore_model

from . import poolspec
from .system import Fatal, System

__all__ = ["SYSTEM", "PoolSystem"]


def _no_replay(what: str) -> NoReturn:
    raise NotImplementedError(f"pool system: {what} is not implemented yet (no replay of "
                              "work-stealing traces against an implementation)")


class PoolSystem(System):
    name = "pool"
    title = "WorkStealingPool"
    spec_files = ("WorkStealing.tla", "MCWorkStealing.tla", poolspec.TRACES_CONFIG)
    mc_module = "MCWorkStealing.tla"
    traces_config = poolspec.TRACES_CONFIG
    variables = poolspec.SPEC_VARIABLES
    parameters = ("t", "w", "thief", "victim")
    label_actions: Mapping[str, str] = MappingProxyType({})
    initial = INITIAL
    actions = ACTIONS

    def read_instance(self, config: str | Path) -> Instance:
        return poolspec.read_instance(config)

    def explore(self, instance: Instance) -> ModelGraph[PoolSnapshot]:
        graph: ModelGraph[PoolSnapshot] = explore_model(instance)
        return graph

    def constants(self, instance: Instance) -> dict[str, Any]:
        return {"Workers": list(instance.workers), "Tasks": list(instance.tasks),
                "Children": list(instance.children)}

    def snapshot_of(self, values: Mapping[str, Any]) -> PoolSnapshot:
        return poolspec.snapshot_of(values)

    def spec_state(self, state: PoolSnapshot, instance: Instance) -> dict[str, Any]:
        return poolspec.spec_state(state, instance.workers, instance.tasks)

    def show(self, state: PoolSnapshot) -> str:
        return poolspec.show(state)

    def describe(self, action: str, params: Mapping[str, Any]) -> str:
        return str(describe(action, params))

    # -- Replay: not yet -----------------------------------------------------------------------

    def default_factory(self) -> Callable[..., Any]:
        _no_replay("default_factory")

    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        _no_replay("constants_error")

    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> Any:
        _no_replay("new_implementation")

    def spec_params(self, action: str, params: Mapping[str, Any],
                    before: Any) -> dict[str, Any]:
        _no_replay("spec_params")

    def model_args(self, action: str, params: Mapping[str, Any],
                   constants: Mapping[str, Any]) -> tuple[Any, ...]:
        _no_replay("model_args")

    def apply(self, implementation: Any, action: str, params: Mapping[str, Any], before: Any,
              profile: Any, fatal: Fatal) -> None:
        _no_replay("apply")

    def snapshot(self, implementation: Any, constants: Mapping[str, Any],
                 fatal: Fatal) -> Any:
        _no_replay("snapshot")

    def side_by_side(self, expected: Any, actual: Any, side: str) -> str:
        _no_replay("side_by_side")

    def summary(self, state: Hashable) -> str:
        assert isinstance(state, PoolSnapshot)
        return "\n".join(f"  {line}" for line in poolspec.show(state).splitlines())


SYSTEM = PoolSystem()
