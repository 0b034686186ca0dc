"""A system under verification: one spec, its reference model, and the API that implements it.

The verification chain (TLC's state graph matched against the model, the trace corpus that
covers it, replay of that corpus against an implementation) is the same for every scheduler;
what differs is said here once per system: which spec and model-checking files, how a TLC
state reads as the model's state and back, the model's actions, and how a spec step is taken
through the implementation's API. :func:`get` returns a system by name:

- ``"scheduler"``: the dependency-aware TaskScheduler (``spec/Scheduler.tla``);
- ``"timer"``: the timer scheduler (``spec/TimerQueue.tla``);
- ``"pool"``: the work-stealing pool (``spec/WorkStealing.tla``);
- ``"durable"``: the durable scheduler (``spec/DurableScheduler.tla``).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from refsched.model.dag.graph import ModelGraph, describe
from refsched.verify.specstate import task_id

__all__ = ["NAMES", "REPLAYABLE", "Fatal", "System", "count_error", "get"]

Fatal = tuple[type[BaseException], ...]
"""Exceptions that end a replay as they are rather than as a divergence (a harness failure)."""

_MODULES = {
    "scheduler": "refsched.verify.dag.system",
    "timer": "refsched.verify.timer.system",
    "pool": "refsched.verify.pool.system",
    "durable": "refsched.verify.durable.system",
}
NAMES = tuple(_MODULES)
"""Every system's name, the first the default."""
REPLAYABLE = NAMES
"""The systems with a trace corpus replayed against their implementation: every one."""


class System(ABC):
    """What the generic verification tools need to know of one system."""

    name: str  # "scheduler", "timer": the prefix of its files under traces/
    module: str  # the spec's module: "TimerQueue" (spec/TimerQueue.tla)
    implementation: Callable[..., Any]  # the production implementation replay drives
    # every instance with a corpus, the traces config first: each has a bundle and a manifest
    corpus_configs: tuple[str, ...] = ()  # () means (traces_config,)
    # the model-checking module of an instance, where it is not mc_module
    corpus_modules: Mapping[str, str] = {}
    # TLC dump labels that are not the model's action name (none: every label is one)
    label_actions: Mapping[str, str] = MappingProxyType({})
    initial: Hashable  # the model's initial state (spec Init)
    actions: Mapping[str, Any]  # action name -> the model's Action (refusal, step, params)
    # the module that reads its configs and turns its states into the spec's variables and
    # back (read_instance, snapshot_of, show); None where the methods below say it themselves
    spec: Any = None
    # the parameters that name an id (a task, a worker): TLC writes them as model values
    id_parameters: tuple[str, ...] = ("t",)
    # what the implementation's snapshot() must return to be compared (else it cannot say)
    snapshot_type: type = object
    # variables some instances' states leave out (the pool's managed blocking, off): a state's
    # value of one is None where it has none
    optional_variables: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        """What people call the implementation: its class's name (``TaskScheduler``)."""
        return getattr(self.implementation, "__name__", self.name)

    # -- The spec's files, by default named after its module ----------------------------------

    @property
    def mc_module(self) -> str:
        """The model-checking module TLC runs: ``MC<module>.tla``."""
        return f"MC{self.module}.tla"

    @property
    def traces_config(self) -> str:
        """The instance whose state graph the corpus covers (the first): the spec module's
        ``TRACES_CONFIG``."""
        return str(self.spec.TRACES_CONFIG)

    @property
    def spec_files(self) -> tuple[str, ...]:
        """The files under ``spec/`` its corpus is made from: the spec, the model-checking
        module and the traces config."""
        return (f"{self.module}.tla", self.mc_module, self.traces_config)

    @property
    def variables(self) -> tuple[str, ...]:
        """The spec's variables, in declaration order: the spec module's ``SPEC_VARIABLES``."""
        return tuple(self.spec.SPEC_VARIABLES)

    @property
    def bundle(self) -> str:
        """The corpus file under ``traces/``."""
        return f"{self.name}-cover.jsonl.gz"

    @property
    def manifest(self) -> str:
        """The corpus manifest under ``traces/``."""
        return f"{self.name}-manifest.json"

    # -- Several corpus instances ------------------------------------------------------------
    # The traces config's corpus keeps the names above; each other instance's files are named
    # after its config: MCDurableSchedulerCorpusClaims.cfg -> durable-claims-cover.jsonl.gz.

    @property
    def instances(self) -> tuple[str, ...]:
        """The configs of every corpus instance, :attr:`traces_config` first."""
        return self.corpus_configs or (self.traces_config,)

    @property
    def protocol_instances(self) -> tuple[str, ...]:
        """The corpus instances the conformance protocol carries (an implementation in another
        language is replayed on): by default every one."""
        return self.instances

    def protocol_instances_for(self, profile: Any) -> tuple[str, ...]:
        """The corpus instances replayed on an implementation with ``profile`` (None: the
        full contract): by default :attr:`protocol_instances`."""
        return self.protocol_instances

    def instance_name(self, config: str) -> str:
        """``""`` for :attr:`traces_config`, else the config's own part of its name:
        ``MCDurableSchedulerCorpusClaims.cfg`` -> ``claims``."""
        if config == self.traces_config:
            return ""
        if config not in self.instances:
            raise ValueError(f"{config!r} is not a corpus instance of the {self.title}; they "
                             f"are {', '.join(self.instances)}")
        stem = config.removesuffix(".cfg").removeprefix(Path(self.mc_module).stem)
        return stem.removeprefix("Corpus").lower()

    def bundle_of(self, config: str) -> str:
        """The corpus file of the instance ``config`` under ``traces/``."""
        name = self.instance_name(config)
        return f"{self.name}-{name}-cover.jsonl.gz" if name else self.bundle

    def manifest_of(self, config: str) -> str:
        """The manifest of the instance ``config`` under ``traces/``."""
        name = self.instance_name(config)
        return f"{self.name}-{name}-manifest.json" if name else self.manifest

    def module_of(self, config: str) -> str:
        """The model-checking module TLC runs with ``config``."""
        return self.corpus_modules.get(config, self.mc_module)

    def spec_files_of(self, config: str) -> tuple[str, ...]:
        """The files under ``spec/`` the corpus of ``config`` is made from."""
        files = [f for f in self.spec_files if f != self.traces_config]
        module = self.module_of(config)
        if module not in files:
            files.append(module)
        return (*files, config)

    # -- The model and TLC's states ----------------------------------------------------------

    def read_instance(self, config: str | Path) -> Any:
        """The constants of a ``.cfg`` of :attr:`mc_module`."""
        return self.spec.read_instance(config)

    @abstractmethod
    def explore(self, instance: Any) -> ModelGraph[Any]:
        """The model's state graph over ``instance``, as TLC explores the spec."""

    @abstractmethod
    def constants(self, instance: Any) -> dict[str, Any]:
        """The constants a trace of ``instance`` records (plain JSON values)."""

    def manifest_constants(self, instance: Any) -> dict[str, Any]:
        """The constants the corpus manifest records (by default the traces' constants)."""
        return self.constants(instance)

    def snapshot_of(self, values: Mapping[str, Any]) -> Hashable:
        """A state as the spec's variables (TLC's or a trace's) -> the model's state."""
        snapshot: Hashable = self.spec.snapshot_of(values)
        return snapshot

    @abstractmethod
    def spec_state(self, state: Any, instance: Any) -> dict[str, Any]:
        """The model's state -> the spec's variables over ``instance``'s ids."""

    def show(self, state: Any) -> str:
        """A state for people, on a few lines."""
        return str(self.spec.show(state))

    def describe(self, action: str, params: Mapping[str, Any]) -> str:
        """``Schedule(t=a, r=1, p=0)``: an action instance as people read it."""
        return str(describe(action, params))

    # -- Replay ------------------------------------------------------------------------------

    def default_factory(self) -> Callable[..., Any]:
        """The production implementation replay drives unless told otherwise."""
        return self.implementation

    @abstractmethod
    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        """Why a trace's constants cannot be replayed, or None."""

    @abstractmethod
    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> Any:
        """A fresh implementation for a trace with ``constants``."""

    def spec_params(self, action: str, params: Mapping[str, Any],
                    before: Any) -> dict[str, Any]:
        """A step's parameters as the model and the API take them (``ValueError`` if wrong):
        each of the action's, through :meth:`spec_value`."""
        out: dict[str, Any] = {}
        for name in self.actions[action].params:
            if name not in params:
                raise ValueError(f"{action} needs the parameter {name!r}; the step gives "
                                 f"{sorted(params)}")
            out[name] = self.spec_value(name, params[name])
        return out

    def spec_value(self, name: str, value: Any) -> Any:
        """One parameter's value as the model takes it: an id (:attr:`id_parameters`) by its
        name, a set of ids (``D``) as a frozenset of names, anything else as it is."""
        if name in self.id_parameters:
            return task_id(value)
        if name == "D":
            return frozenset(task_id(d) for d in value)
        return value

    def model_args(self, action: str, params: Mapping[str, Any],
                   constants: Mapping[str, Any]) -> tuple[Any, ...]:
        """The arguments of the model's ``refusal`` / ``step`` for the step: by default the
        action's parameters, in its order."""
        return tuple(params[name] for name in self.actions[action].params)

    def initial_state(self, constants: Mapping[str, Any]) -> Hashable:
        """The model's initial state for a trace with ``constants``: by default
        :attr:`initial`."""
        return self.initial

    def model_refusal(self, action: str, source: Any, args: tuple[Any, ...],
                      constants: Mapping[str, Any]) -> Any:
        """Why the model does not enable the step (its ``Refusal``), or None."""
        return self.actions[action].refusal(source, *args)

    def model_step(self, action: str, source: Any, args: tuple[Any, ...],
                   constants: Mapping[str, Any]) -> Any:
        """The model's state after the step (it must be enabled)."""
        return self.actions[action].step(source, *args)

    @abstractmethod
    def apply(self, implementation: Any, action: str, params: Mapping[str, Any], before: Any,
              profile: Any, fatal: Fatal) -> None:
        """Take the step through the implementation's API; raise ``StepMismatch`` on a wrong
        answer, ``ValueError`` for a step the calls cannot take."""

    def snapshot(self, implementation: Any, constants: Mapping[str, Any],
                 fatal: Fatal) -> Any:
        """The implementation's state as the model's, or None when it cannot say: by default
        what :meth:`read_snapshot` reads, if it is a :attr:`snapshot_type`."""
        try:
            snapshot = self.read_snapshot(implementation)
        except fatal:
            raise
        except Exception:  # one broken enough not to answer: the divergence says the rest
            return None
        return snapshot if isinstance(snapshot, self.snapshot_type) else None

    def read_snapshot(self, implementation: Any) -> Any:
        """The implementation's own ``snapshot()``."""
        return implementation.snapshot()

    @abstractmethod
    def side_by_side(self, expected: Any, actual: Any, side: str) -> str:
        """One line per differing field; ``""`` when the states are equal."""

    def summary(self, state: Any) -> str:
        """A state on a few indented lines, as a divergence shows where a step started: by
        default :meth:`show`'s, indented."""
        return "\n".join(f"  {line}" for line in self.show(state).splitlines())


def count_error(constants: Mapping[str, Any], names: Sequence[str], least: int) -> str | None:
    """Why the constants ``names`` of a trace are not each an int >= ``least``, or None."""
    for name in names:
        value = constants.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            return f"the constant {name} is {value!r}, not an int >= {least}"
    return None


def get(name: str = "scheduler") -> System:
    """The system called ``name`` (one of :data:`NAMES`)."""
    try:
        module = _MODULES[name]
    except KeyError:
        raise ValueError(f"no system {name!r}; the systems are {', '.join(NAMES)}") from None
    system: System = importlib.import_module(module).SYSTEM
    return system


def by_spec_variables(names: Sequence[str]) -> System:
    """The system whose spec has these variables (how an ITF trace says what it is of)."""
    wanted = set(names)
    for name in NAMES:
        system = get(name)
        if wanted <= set(system.variables):
            return system
    raise ValueError(f"no system has the variables {sorted(wanted)}")
