"""The work-stealing pool as a :class:`~refsched.verify.system.System`.

``spec/WorkStealing.tla`` and the model ``refsched.model.pool``: TLC's state graph of each
corpus instance read and matched against the model
(:func:`refsched.verify.stategraph.match`), and a trace replayed through the production
``refsched.WorkStealingPool``, its workers' moves taken step by step
(:class:`~refsched.verify.pool.driver.SteppedPool` says how each action is taken).

The corpus instances (:attr:`PoolSystem.corpus_configs`): ``MCWorkStealingTraces.cfg`` and
``MCWorkStealingCorpusBatch.cfg`` (batch steals, ``StealCap`` 2), without managed blocking
(``Spares = {}``), with
:class:`~refsched.model.pool.PoolSnapshot` states and whose traces leave out the variables of
managed blocking; and ``MCWorkStealingCorpusBlocking.cfg``, with one spare (``MaxSpares`` 1),
whose states are :class:`~refsched.model.pool.blocking.BlockingSnapshot` values: its traces also
take ``Block``, ``StartSpare``, ``Unblock`` and ``Retire``, driven on a stepped pool with
``max_spares`` as the lock-step machine drives them, and the pool's ``blocked``, ``spare`` and
``blocker`` are compared after every step. A trace is of managed blocking when its constant
``Spares`` names a spare, a state when its ``spare`` does. One spare, so that the spare
``Block`` picks is the one the pool picks (a released spare, else the lowest off one): with
more the spec may pick another, and a trace naming more is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from refsched.model.dag.graph import ModelGraph
from refsched.model.pool import ACTIONS, INITIAL, Instance, Phase, PoolSnapshot, Refusal
from refsched.model.pool import explore as explore_model
from refsched.model.pool.blocking import (
    BlockingInstance,
    BlockingSnapshot,
    SpareState,
    blocking_explore,
    blocking_refusal,
    blocking_step,
)
from refsched.pool.pool import WorkStealingPool
from refsched.verify import tlc
from refsched.verify.pool import spec as poolspec
from refsched.verify.pool.driver import SteppedPool, StepRefused, driven_pool
from refsched.verify.replay import StepMismatch, format_rows
from refsched.verify.system import Fatal, System

__all__ = ["BATCH_CONFIG", "BLOCKING_CONFIG", "BLOCKING_VARIABLES", "CORPUS_CONFIGS", "SYSTEM",
           "BlockingCorpusInstance", "PoolSystem", "is_blocking"]

BLOCKING_CONFIG = "MCWorkStealingCorpusBlocking.cfg"
"""The corpus instance with managed blocking: one spare, MaxSpares 1."""
BATCH_CONFIG = "MCWorkStealingCorpusBatch.cfg"
"""The corpus instance with batch steals: StealCap 2, a deque of four roots."""
CORPUS_CONFIGS = (poolspec.TRACES_CONFIG, BLOCKING_CONFIG, BATCH_CONFIG)
BLOCKING_VARIABLES = poolspec.BLOCKING_VARIABLES


@dataclass(frozen=True)
class BlockingSpecAction:
    """An action of managed blocking: its name and parameters, as the system lists actions
    (the model's refusal and step are :func:`blocking_refusal` and :func:`blocking_step`)."""

    name: str
    params: tuple[str, ...]
    takes_children = False
    takes_steal_cap = False


BLOCKING_SPEC_ACTIONS = {a.name: a for a in (
    BlockingSpecAction("Block", ("x",)), BlockingSpecAction("StartSpare", ("s",)),
    BlockingSpecAction("Unblock", ("x",)), BlockingSpecAction("Retire", ("s",)))}


@dataclass(frozen=True)
class BlockingCorpusInstance:
    """The constants of an instance with managed blocking: the pool's, and ``Spares`` (in
    order: spare i is the pool's slot ``len(Workers) + i``) and ``MaxSpares``."""

    pool: Instance
    spares: tuple[str, ...]
    max_spares: int

    @property
    def blocking(self) -> BlockingInstance:
        return BlockingInstance(frozenset(self.pool.workers), frozenset(self.spares),
                                self.max_spares)


def is_blocking(constants: Mapping[str, Any]) -> bool:
    """Whether a trace's constants turn managed blocking on: ``Spares`` names a spare."""
    return bool(constants.get("Spares"))


def _blocking_of(constants: Mapping[str, Any]) -> BlockingInstance:
    return BlockingInstance(frozenset(map(str, constants["Workers"])),
                            frozenset(map(str, constants["Spares"])), constants["MaxSpares"])


class PoolSystem(System):
    name = "pool"
    module = "WorkStealing"
    spec = poolspec
    implementation = WorkStealingPool
    corpus_configs = CORPUS_CONFIGS
    initial = INITIAL
    actions = MappingProxyType({**ACTIONS, **BLOCKING_SPEC_ACTIONS})
    optional_variables = BLOCKING_VARIABLES
    # every parameter names a task, a thread or a spare
    id_parameters = ("t", "w", "thief", "victim", "x", "s")

    @property
    def protocol_instances(self) -> tuple[str, ...]:
        """The instance without managed blocking: every implementation takes its moves."""
        return (poolspec.TRACES_CONFIG,)

    def protocol_instances_for(self, profile: Any) -> tuple[str, ...]:
        """With the ``managed_blocking`` profile flag (or no profile: the full contract), the
        instance with managed blocking too: its moves are ``block``, ``start_spare``,
        ``unblock`` and ``retire``. With ``batch_steals`` (or no profile), the instance with
        batch steals: ``new`` takes ``steal_cap`` 2."""
        full = profile is None
        instances = self.protocol_instances
        if full or getattr(profile, "managed_blocking", False):
            instances = (*instances, BLOCKING_CONFIG)
        if full or getattr(profile, "batch_steals", False):
            instances = (*instances, BATCH_CONFIG)
        return instances

    @property
    def variables(self) -> tuple[str, ...]:
        return (*poolspec.SPEC_VARIABLES, *BLOCKING_VARIABLES)

    def read_instance(self, config: str | Path) -> Instance | BlockingCorpusInstance:
        """The constants of a config: with ``MaxSpares`` above 0, managed blocking's too."""
        path = tlc.spec_dir() / config if not Path(config).is_absolute() else Path(config)
        bound = re.search(r"^\s*MaxSpares\s*=\s*(\d+)\s*$", path.read_text(encoding="utf-8"),
                          re.M)
        if bound is None or int(bound.group(1)) == 0:
            return poolspec.read_instance(config)
        pool, blocking = poolspec.read_blocking_instance(config)
        return BlockingCorpusInstance(pool, tuple(sorted(map(str, blocking.spares))),
                                      blocking.max_spares)

    def explore(self, instance: Instance | BlockingCorpusInstance) -> ModelGraph[Any]:
        if isinstance(instance, BlockingCorpusInstance):
            graph: ModelGraph[Any] = blocking_explore(instance.pool, instance.blocking)
            return graph
        return explore_model(instance)

    def constants(self, instance: Instance | BlockingCorpusInstance) -> dict[str, Any]:
        if isinstance(instance, BlockingCorpusInstance):
            return {**self.constants(instance.pool), "Spares": list(instance.spares),
                    "MaxSpares": instance.max_spares}
        return {"Workers": list(instance.workers), "Tasks": list(instance.tasks),
                "Children": list(instance.children), "StealCap": instance.steal_cap}

    def snapshot_of(self, values: Mapping[str, Any]) -> PoolSnapshot | BlockingSnapshot:
        """A state with a spare (``spare`` not empty) as a BlockingSnapshot; else, without
        managed blocking, as a PoolSnapshot."""
        if values.get("spare"):
            return poolspec.blocking_snapshot_of(values)
        return poolspec.snapshot_of(values)

    def spec_state(self, state: PoolSnapshot | BlockingSnapshot,
                   instance: Instance | BlockingCorpusInstance) -> dict[str, Any]:
        """The spec's variables over the instance's ids (with managed blocking: a
        BlockingCorpusInstance, or anything with ``workers``, ``spares`` and ``tasks``)."""
        if isinstance(instance, BlockingCorpusInstance):
            assert isinstance(state, BlockingSnapshot)
            return poolspec.blocking_spec_state(state, instance.pool.workers, instance.spares,
                                                instance.pool.tasks)
        if isinstance(state, BlockingSnapshot):
            return poolspec.blocking_spec_state(state, instance.workers,
                                                getattr(instance, "spares", ()), instance.tasks)
        return poolspec.spec_state(state, instance.workers, instance.tasks)

    def show(self, state: Any) -> str:
        if isinstance(state, BlockingSnapshot):
            return show_blocking(state)
        return poolspec.show(state)

    # -- Replay ------------------------------------------------------------------------------

    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        workers = constants.get("Workers")
        if (not isinstance(workers, list) or not workers
                or len(set(map(str, workers))) != len(workers)):
            return f"the constant Workers is {workers!r}, not a non-empty list of distinct names"
        if is_blocking(constants):
            spares, bound = constants.get("Spares"), constants.get("MaxSpares")
            if not isinstance(spares, list) or len(spares) != 1:
                return (f"the constant Spares is {spares!r}: a replay drives one spare, the "
                        "one the pool picks")
            if not isinstance(bound, int) or isinstance(bound, bool) or bound < 1:
                return f"the constant MaxSpares is {bound!r}, not an int >= 1"
        return None

    def initial_state(self, constants: Mapping[str, Any]) -> PoolSnapshot | BlockingSnapshot:
        return BlockingSnapshot() if is_blocking(constants) else INITIAL

    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> SteppedPool:
        if is_blocking(constants):  # a pool in another process takes the moves itself
            blocking: SteppedPool = driven_pool(
                factory, constants["Workers"], steal_cap_of(constants),
                spares=constants["Spares"], max_spares=constants["MaxSpares"])
            return blocking
        driven: SteppedPool = driven_pool(factory, constants["Workers"], steal_cap_of(constants))
        return driven

    def model_args(self, action: str, params: Mapping[str, Any],
                   constants: Mapping[str, Any]) -> tuple[Any, ...]:
        """The action's parameters, and the steal actions' ``StealCap`` after them."""
        args = super().model_args(action, params, constants)
        return (*args, steal_cap_of(constants)) if self.actions[action].takes_steal_cap else args

    def model_refusal(self, action: str, source: Any, args: tuple[Any, ...],
                      constants: Mapping[str, Any]) -> Any:
        if isinstance(source, BlockingSnapshot):
            return blocking_refusal(source, action, args, _blocking_of(constants))
        if action in BLOCKING_SPEC_ACTIONS:
            return Refusal(None, f"{action}: the trace's constants leave managed blocking off")
        return ACTIONS[action].refusal(source, *args)

    def model_step(self, action: str, source: Any, args: tuple[Any, ...],
                   constants: Mapping[str, Any]) -> Any:
        if isinstance(source, BlockingSnapshot):
            return blocking_step(source, action, args, _blocking_of(constants))[0]
        return ACTIONS[action].step(source, *args)

    def apply(self, implementation: SteppedPool, action: str, params: Mapping[str, Any],
              before: Any, profile: Any, fatal: Fatal) -> None:
        move, call = MOVES[action]
        args = tuple(params[name] for name in self.actions[action].params)
        try:
            getattr(implementation, move)(*args)
        except fatal:
            raise
        except StepRefused as error:
            raise StepMismatch(self.describe(action, params), call.format(*args),
                               "a task" if action in ACTIONS else "the move taken",
                               str(error)) from error
        except Exception as error:
            raise StepMismatch(self.describe(action, params), call.format(*args),
                               "no error", f"raised {type(error).__name__}: {error}") from error

    def snapshot(self, implementation: Any, constants: Mapping[str, Any],
                 fatal: Fatal) -> Any:
        """The pool's state; with managed blocking, its ``blocking_snapshot()``."""
        if not is_blocking(constants):
            return super().snapshot(implementation, constants, fatal)
        try:
            return implementation.blocking_snapshot()
        except fatal:
            raise
        except Exception:  # one broken enough not to answer: the divergence says the rest
            return None

    def side_by_side(self, expected: Any, actual: Any, side: str) -> str:
        return format_rows(("field", "trace", side), difference_rows(expected, actual))


SYSTEM = PoolSystem()


def difference_rows(expected: Any, actual: Any) -> list[tuple[str, str, str]]:
    """(variable, expected, actual) of each variable two states (both PoolSnapshots or both
    BlockingSnapshots) differ in."""
    if isinstance(expected, BlockingSnapshot) and isinstance(actual, BlockingSnapshot):
        return [*difference_rows(expected.pool, actual.pool),
                *((name, _cell(getattr(expected, name)), _cell(getattr(actual, name)))
                  for name in BLOCKING_VARIABLES
                  if getattr(expected, name) != getattr(actual, name))]
    return [(name, _cell(getattr(expected, name)), _cell(getattr(actual, name)))
            for name in _FIELDS if getattr(expected, name) != getattr(actual, name)]


def show_blocking(state: BlockingSnapshot) -> str:
    """A state with managed blocking on a few lines: the pool's, then the spares'."""
    rows = [poolspec.show(state.pool)]
    if state.blocked:
        rows.append("  blocked: " + ", ".join(sorted(map(str, state.blocked))))
    for sp, on in sorted(state.spare.items(), key=lambda kv: str(kv[0])):
        stands = state.blocker.get(sp)
        rows.append(f"  spare {sp} {on.value}"
                    + (f", standing in for {_cell(stands)}" if stands else ", released"))
    return "\n".join(rows)


SYSTEM = PoolSystem()


_FIELDS = ("phase", "deque", "running", "outstanding", "submitted", "finished", "cancelled",
           "runs", "parent")

MOVES: dict[str, tuple[str, str]] = {
    "SubmitExternal": ("submit_external", "submit() from outside, to worker {1}"),
    "SubmitChild": ("submit_child", "submit() from worker {1}'s task"),
    "Pop": ("pop", "worker {0} takes a task"),
    "Steal": ("steal", "worker {0} takes a task, stealing from {1} first"),
    "StealBatch": ("steal", "worker {0} takes tasks, stealing a batch from {1} first"),
    "Finish": ("finish", "worker {0} runs and finishes its task"),
    "Shutdown": ("shutdown", "shutdown()"),
    "CancelQueued": ("cancel_queued", "shutdown(cancel_futures=True)"),
    "Block": ("block", "blocking() entered in the task thread {0} runs"),
    "StartSpare": ("start_spare", "spare {0}'s thread starts to serve"),
    "Unblock": ("unblock", "blocking() returns in the task thread {0} runs"),
    "Retire": ("retire", "spare {0} retires"),
}
"""Per action: the driver's move that takes it (a method of :class:`SteppedPool`), and the
call as a divergence names it."""


def steal_cap_of(constants: Mapping[str, Any]) -> int:
    """A trace's ``StealCap``: 1 (single steals) when the trace names none."""
    cap = constants.get("StealCap", 1)
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1 else 1


def _cell(value: Any) -> str:
    if isinstance(value, (Phase, SpareState)):
        return str(value.value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_cell(v)}" for k, v in sorted(value.items(), key=repr)) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(str, value))) + "}"
    if isinstance(value, tuple):
        return "<<" + ", ".join(map(str, value)) + ">>"
    return str(value)
