"""The work-stealing pool as a :class:`~refsched.verify.system.System`.

``spec/WorkStealing.tla`` and the model ``refsched.model.pool``: TLC's state graph of
``MCWorkStealingTraces.cfg`` read and matched against the model
(:func:`refsched.verify.stategraph.match`), and a trace replayed through the production
``refsched.WorkStealingPool``, its workers' moves taken step by step
(:class:`~refsched.verify.pool.driver.SteppedPool` says how each action is taken).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from refsched.model.dag.graph import ModelGraph
from refsched.model.pool import ACTIONS, INITIAL, Instance, Phase, PoolSnapshot
from refsched.model.pool import explore as explore_model
from refsched.pool.pool import WorkStealingPool
from refsched.verify.pool import spec as poolspec
from refsched.verify.pool.driver import SteppedPool, StepRefused, driven_pool
from refsched.verify.replay import StepMismatch, format_rows
from refsched.verify.system import Fatal, System

__all__ = ["SYSTEM", "PoolSystem"]


class PoolSystem(System):
    name = "pool"
    module = "WorkStealing"
    spec = poolspec
    implementation = WorkStealingPool
    initial = INITIAL
    actions = ACTIONS
    id_parameters = ("t", "w", "thief", "victim")  # every parameter names a task or a worker

    def explore(self, instance: Instance) -> ModelGraph[PoolSnapshot]:
        graph: ModelGraph[PoolSnapshot] = explore_model(instance)
        return graph

    def constants(self, instance: Instance) -> dict[str, Any]:
        return {"Workers": list(instance.workers), "Tasks": list(instance.tasks),
                "Children": list(instance.children), "StealCap": instance.steal_cap}

    def spec_state(self, state: PoolSnapshot, instance: Instance) -> dict[str, Any]:
        return poolspec.spec_state(state, instance.workers, instance.tasks)

    # -- Replay ------------------------------------------------------------------------------

    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        workers = constants.get("Workers")
        if (not isinstance(workers, list) or not workers
                or len(set(map(str, workers))) != len(workers)):
            return f"the constant Workers is {workers!r}, not a non-empty list of distinct names"
        return None

    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> SteppedPool:
        driven: SteppedPool = driven_pool(factory, constants["Workers"], steal_cap_of(constants))
        return driven

    def model_args(self, action: str, params: Mapping[str, Any],
                   constants: Mapping[str, Any]) -> tuple[Any, ...]:
        """The action's parameters, and the steal actions' ``StealCap`` after them."""
        args = super().model_args(action, params, constants)
        return (*args, steal_cap_of(constants)) if ACTIONS[action].takes_steal_cap else args

    def apply(self, implementation: SteppedPool, action: str, params: Mapping[str, Any],
              before: Any, profile: Any, fatal: Fatal) -> None:
        move, call = _MOVES[action]
        args = tuple(params[name] for name in ACTIONS[action].params)
        try:
            getattr(implementation, move)(*args)
        except fatal:
            raise
        except StepRefused as error:
            raise StepMismatch(self.describe(action, params), call.format(*args),
                               "a task", str(error)) from error
        except Exception as error:
            raise StepMismatch(self.describe(action, params), call.format(*args),
                               "no error", f"raised {type(error).__name__}: {error}") from error

    def side_by_side(self, expected: PoolSnapshot, actual: PoolSnapshot, side: str) -> str:
        return format_rows(("field", "trace", side), [
            (name, _cell(getattr(expected, name)), _cell(getattr(actual, name)))
            for name in _FIELDS if getattr(expected, name) != getattr(actual, name)])


SYSTEM = PoolSystem()


_FIELDS = ("phase", "deque", "running", "outstanding", "submitted", "finished", "cancelled",
           "runs", "parent")

_MOVES: dict[str, tuple[str, str]] = {
    "SubmitExternal": ("submit_external", "submit() from outside, to worker {1}"),
    "SubmitChild": ("submit_child", "submit() from worker {1}'s task"),
    "Pop": ("pop", "worker {0} takes a task"),
    "Steal": ("steal", "worker {0} takes a task, stealing from {1} first"),
    "StealBatch": ("steal", "worker {0} takes tasks, stealing a batch from {1} first"),
    "Finish": ("finish", "worker {0} runs and finishes its task"),
    "Shutdown": ("shutdown", "shutdown()"),
    "CancelQueued": ("cancel_queued", "shutdown(cancel_futures=True)"),
}
"""Per action: the driver's move that takes it (a method of :class:`SteppedPool`), and the
call as a divergence names it."""


def steal_cap_of(constants: Mapping[str, Any]) -> int:
    """A trace's ``StealCap``: 1 (single steals) when the trace names none."""
    cap = constants.get("StealCap", 1)
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1 else 1


def _cell(value: Any) -> str:
    if isinstance(value, Phase):
        return str(value.value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_cell(v)}" for k, v in sorted(value.items(), key=repr)) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(str, value))) + "}"
    if isinstance(value, tuple):
        return "<<" + ", ".join(map(str, value)) + ">>"
    return str(value)
