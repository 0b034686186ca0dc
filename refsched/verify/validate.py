"""Trace validation: TLC decides whether a recorded trace is a behaviour of its spec's ``Spec``.

A trace (:class:`~refsched.verify.itf.Trace`: recorded from a production class by
:mod:`refsched.verify.dag.recording`, or read from ITF written by any implementation) is of one of
three specs, told by its variables (:func:`refsched.verify.system.by_spec_variables`):
``spec/Scheduler.tla`` (TaskScheduler), ``spec/TimerQueue.tla`` (TimerScheduler) or
``spec/WorkStealing.tla`` (WorkStealingPool). It becomes a TLA+ module that extends that spec
and holds the trace as constants: ``TraceStates`` (one record of spec variables per state),
``TraceActions`` and ``TraceParams`` (the action and parameters of each step). TLC 2.15 has no
trace post-condition, so the module walks the trace with a step counter ``i``::

    TraceInit == i = 1 /\\ Init /\\ state 1 matches
    TraceNext == i < Len(TraceStates) /\\ <action i with its parameters>
                 /\\ state i + 1 matches (primed) /\\ i' = i + 1

and the invariant ``TraceAccepted == i < Len(TraceStates)`` is violated exactly when TLC
reaches the last state, i.e. when the whole trace was accepted. If TLC ends without that
violation, the search depth it reports is the number of states it reached: the step after
them is the first it could not take. The spec's invariants are checked along the way.

A state may omit variables; only those present are matched. Why a step was rejected is told
by the spec's reference model: the action's refusal in the previous state, or how the model's
successor differs from the recorded state.

What differs by spec is a :class:`TraceSpec` (its module, variables and invariants, how each
action is called, the types of parameters and variables, its constants, its model); the
module, the TLC run, the verdict and its explanation are written once.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from refsched.model.dag import invariants as dag_invariants
from refsched.model.dag.graph import describe
from refsched.model.pool import INITIAL, Refusal
from refsched.model.pool import INVARIANTS as POOL_INVARIANTS
from refsched.model.pool.blocking import (
    BLOCKING_ACTIONS,
    BLOCKING_INVARIANTS,
    BlockingInstance,
    BlockingSnapshot,
    blocking_refusal,
    blocking_step,
)
from refsched.model.timer import INVARIANTS as TIMER_INVARIANTS
from refsched.verify import specstate, tlc
from refsched.verify import system as systems
from refsched.verify.itf import Trace, TraceFormatError
from refsched.verify.pool import spec as poolspec
from refsched.verify.specstate import NO_TASK, SpecStateError
from refsched.verify.timer import spec as timerspec
from refsched.verify.tla import render

__all__ = [
    "SPEC_INVARIANTS",
    "TRACE_SPECS",
    "TLCInternalError",
    "TraceError",
    "TraceSpec",
    "Validation",
    "format_validation",
    "shown_name",
    "spec_of",
    "trace_module",
    "validate_trace",
]

SPEC_INVARIANTS: tuple[str, ...] = tuple(dag_invariants.INVARIANTS)
"""Scheduler.tla's invariants (named as in the model and the spec), checked in every state."""

_ACCEPTED = "TraceAccepted"


class TraceError(TraceFormatError):
    """A trace that cannot be stated as a TLA+ module of its spec (the message says why)."""


class TLCInternalError(RuntimeError):
    """TLC ran but gave no verdict on the module generated for a trace (it could not parse
    it, or failed evaluating it): refsched's fault, never a verdict on the trace."""


@dataclass(frozen=True)
class Validation:
    """TLC's verdict on one trace, explained with the reference model when it is negative."""

    name: str  # the trace's name
    accepted: bool  # TLC took every step and no spec invariant broke
    steps: int  # the number of steps in the trace
    first_rejected_step: int | None  # 1-based index of the first step TLC could not take;
    # 0 when the initial state is not the spec's Init; None when accepted
    action: str | None  # the action of that step (None when accepted or for the initial state)
    params: Mapping[str, Any] | None  # its parameters
    reason: str | None  # why, in the model's words (a refusal, or a state difference)
    violated: str | None  # a spec invariant that broke in the state that step reached
    tlc_version: str | None  # TLC's "TLC2 Version ..." line
    duration: float  # seconds TLC ran
    tlc: tlc.TLCResult | None = field(default=None, repr=False, compare=False)  # all TLC said
    system: str = "scheduler"  # the system whose spec judged the trace: a TraceSpec's system


# -- values and their types -----------------------------------------------------------------

TLC_INT_LIMIT = 2**30
"""TLC 2.15's integers are Java ints; integers in a trace stay below this in magnitude, so
that the spec's arithmetic on them (``nextSeq + 1``, ``generation + 1``) cannot overflow."""

Ids = Mapping[str, frozenset[Hashable]]
"""The ids of a trace, by the constant that holds them: ``Tasks``, ``Workers``, ``Children``."""

Kind = Callable[[Any, Ids], bool]
"""Whether a value is of one of the spec's types, given the trace's ids."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: Any, ids: frozenset[Hashable]) -> bool:
    # Equal values of another type (1 and 1.0, True) would be other values in TLA+.
    return value in ids and any(type(value) is type(t) for t in ids)


def _is_no_task(value: Any) -> bool:
    # ITF has no model values: a trace writes NoTask as the string "NoTask".
    return bool(value == NO_TASK or value == NO_TASK.name)


def _integer(value: Any, ids: Ids) -> bool:
    return _is_int(value)


def _natural(value: Any, ids: Ids) -> bool:
    return _is_int(value) and value >= 0


def _boolean(value: Any, ids: Ids) -> bool:
    return isinstance(value, bool)


def _string(value: Any, ids: Ids) -> bool:
    return isinstance(value, str)


def _spare_state(value: Any, ids: Ids) -> bool:
    return value in ("off", "starting", "on")


def _id(of: str) -> Kind:
    return lambda value, ids: _is_id(value, ids[of])


def _id_or_no_task(of: str) -> Kind:
    return lambda value, ids: _is_no_task(value) or _is_id(value, ids[of])


def _set_of(kind: Kind) -> Kind:
    return lambda value, ids: (isinstance(value, frozenset | set)
                               and all(kind(v, ids) for v in value))


def _sequence_of(kind: Kind) -> Kind:
    return lambda value, ids: (isinstance(value, tuple | list)
                               and all(kind(v, ids) for v in value))


def _provenance_record(of: str) -> Kind:
    """A value of the spec's provenance records (``NoRecord`` included)."""
    fields = {"root": _id_or_no_task(of), "generation": _natural, "end": _string,
              "path": _sequence_of(_id(of))}
    return lambda value, ids: (isinstance(value, Mapping) and set(value) == set(fields)
                               and all(kind(value[name], ids) for name, kind in fields.items()))


def _tuple_of(*kinds: Kind) -> Kind:
    return lambda value, ids: (isinstance(value, tuple) and len(value) == len(kinds)
                               and all(k(v, ids) for k, v in zip(kinds, value, strict=True)))


TASK: Final = (_id("Tasks"), "is not in Tasks")
"""A parameter that names a task: its type, and what else it would be."""
INTEGER: Final = (_integer, "is not an integer")
"""A parameter that is an integer."""


@dataclass(frozen=True)
class _Variable:
    """The type of one spec variable: ``kind`` of its value, or of each entry of a function
    over the ids of the constant ``over``."""

    kind: Kind
    over: str | None = None


def _check_ints(where: str, value: Any) -> None:
    """Refuse integers TLC cannot hold anywhere in ``value`` (a decoded ITF value)."""
    if _is_int(value):
        if abs(value) >= TLC_INT_LIMIT:
            shown = (str(value) if abs(value) < 10**30
                     else f"an integer of {value.bit_length()} bits")
            raise TraceError(f"{where}: {shown} is out of TLC's integer range "
                             f"(magnitude below 2^30)")
    elif isinstance(value, Mapping):
        for key, entry in value.items():
            _check_ints(where, key)
            _check_ints(where, entry)
    elif isinstance(value, frozenset | set | tuple | list):
        for entry in value:
            _check_ints(where, entry)


# -- what differs by spec -------------------------------------------------------------------

@dataclass(frozen=True)
class Constants:
    """A trace's constants, checked, as the generated module and the model take them."""

    ids: Ids  # the sets of ids: Tasks (and Workers, Children for the pool)
    defined: Mapping[str, frozenset[Any]]  # every set constant: TraceX == ... and X <- TraceX
    numbers: Mapping[str, int]  # the integer constants, given in the config
    given: Mapping[str, Any]  # the trace's own constants, for the model


class TraceSpec:
    """One spec as trace validation sees it. Each system's is a small subclass."""

    system: str  # the System's name: "scheduler", "timer", "pool"
    invariants: tuple[str, ...]  # its invariants, checked in every state
    params: Mapping[str, tuple[Kind, str]]  # parameter -> its type, and what else it would be
    types: Mapping[str, _Variable]  # variable -> its type
    id_sets: Mapping[str, str]  # constant of ids -> the variable whose keys name them
    no_task: tuple[str, ...] = ()  # variables whose entries may be the model value NoTask
    # integer constant of the config -> the least value the spec assumes, and how it says so
    counts: Mapping[str, tuple[int, str]] = MappingProxyType({})
    # constant of the config no trace records -> its value in TLA+ (the implementation's)
    fixed: Mapping[str, str] = MappingProxyType({})
    # constants of ids that are empty when the trace names none (nor has their variable)
    optional_ids: tuple[str, ...] = ()

    def numbers(self, trace: Trace) -> dict[str, int]:
        """The integer constants of the config (:attr:`counts`), checked."""
        out: dict[str, int] = {}
        for name, (least, assumed) in self.counts.items():
            value = trace.constants.get(name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise TraceError(f"{trace.name}: the constant {name} is {value!r}; the spec "
                                 f"assumes {assumed}")
            out[name] = int(value)
        return out

    def derived(self, trace: Trace, ids: Ids) -> dict[str, frozenset[Any]]:
        """Set constants that are not ids, made from the trace (checked to be well typed)."""
        return {}

    def check_ids(self, trace: Trace, ids: Ids) -> None:
        """Refuse ids the spec's ASSUMEs refuse."""

    def id_unions(self, ids: Ids) -> dict[str, frozenset[Hashable]]:
        """Sets of ids the spec defines from its constants (no constants themselves), which
        parameters and variables may range over."""
        return {}

    def initial_model(self, constants: Constants) -> Any:
        """The model's initial state."""
        return self.system_object.initial

    def model_successor(self, action: str, state: Any, args: tuple[Any, ...],
                        constants: Constants, recorded: Mapping[str, Any],
                        given: Mapping[str, Sequence[Hashable]]) -> Any:
        """The model's state after the step: where the spec leaves a choice, the one closest
        to the ``recorded`` state."""
        return self.system_object.model_step(action, state, args, constants.given)

    def param_value(self, name: str, value: Any) -> Any:
        """A recorded parameter as the spec's value."""
        return value

    @property
    def system_object(self) -> systems.System:
        return systems.get(self.system)

    @property
    def calls(self) -> dict[str, str]:
        """Action -> how the generated module takes it from its recorded parameters ``p``: the
        spec's operator of that name over the model action's parameters, which are the
        operator's, in its order (the scheduler's StaleCallback too: Next reaches that operator
        only through AnyStaleCallback, for some g)."""
        return {name: f"{name}({', '.join(f'p.{x}' for x in action.params)})" if action.params
                else name for name, action in self.system_object.actions.items()}

    @property
    def module(self) -> str:
        """The spec module the generated one extends: the system's."""
        return self.system_object.module

    @property
    def variables(self) -> tuple[str, ...]:
        """The spec's variables, in declaration order: the system's."""
        return self.system_object.variables

    def model_state(self, state: Any, ids: Mapping[str, Sequence[Hashable]]) -> dict[str, Any]:
        """The model's state as the spec's variables over the trace's ids."""
        raise NotImplementedError

    def refusal(self, action: str, state: Any, args: tuple[Any, ...],
                constants: Constants) -> Any:
        """The model's refusal of the step (None: enabled)."""
        return self.system_object.actions[action].refusal(state, *args)


class _SchedulerSpec(TraceSpec):
    system = "scheduler"
    invariants = SPEC_INVARIANTS
    params = MappingProxyType({
        "t": TASK,
        "D": (_sequence_of(_id("Tasks")), "is not a set of ids in Tasks"),
        "O": (_sequence_of(_id("Tasks")), "is not a set of ids in Tasks"),
        "k": INTEGER,
        "g": INTEGER,
        "cancelPending": (_boolean, "is not a boolean"),
    })
    types = MappingProxyType({
        "started": _Variable(_boolean), "closed": _Variable(_boolean),
        "nextSeq": _Variable(_integer),
        **{name: _Variable(_integer, "Tasks")
           for name in ("generation", "remainingDeps", "claims", "seq")},
        "state": _Variable(_string, "Tasks"),
        "deps": _Variable(_set_of(_id("Tasks")), "Tasks"),
        "optional": _Variable(_set_of(_id("Tasks")), "Tasks"),
        "blockedBy": _Variable(_id_or_no_task("Tasks"), "Tasks"),
        "cancelRequested": _Variable(_boolean, "Tasks"),
        "provenance": _Variable(_provenance_record("Tasks"), "Tasks"),
    })
    id_sets = MappingProxyType({"Tasks": "generation"})
    no_task = ("blockedBy", "provenance")
    counts = MappingProxyType({"MaxConcurrency": (1, "an integer >= 1")})
    # The TaskScheduler claims oldest first, and makes both kinds of edge, and adds edges.
    # Its recorded states carry no provenance (a Recorder is given snapshot()'s states).
    fixed = MappingProxyType({"OldestFirst": "TRUE", "OptionalEdges": "TRUE",
                              "AddDepsAllowed": "TRUE", "RecordProvenance": "FALSE"})

    def param_value(self, name: str, value: Any) -> Any:
        # D and O may arrive as a list or tuple (a JSON array); in the spec they are sets.
        return frozenset(value) if name in ("D", "O") else value

    def model_state(self, state: Any, ids: Mapping[str, Sequence[Hashable]]) -> dict[str, Any]:
        return specstate.spec_state(state, ids["Tasks"])


def _times(trace: Trace, index: int, variable: str, param: str) -> frozenset[Any]:
    """Every value of the parameter ``param``, of ``variable``'s entries and of the heap
    entries' field ``index`` in ``trace``, and 0 (the value of an absent id)."""
    found: set[Any] = {0}
    for step in trace.steps:
        if param in step.params:
            found.add(step.params[param])
    for state in trace.states:
        if isinstance(state.get(variable), Mapping):
            found.update(state[variable].values())
        if isinstance(state.get("heap"), frozenset | set):
            found.update(e[index] for e in state["heap"])
    return frozenset(found)


class _TimerSpec(TraceSpec):
    system = "timer"
    invariants = tuple(TIMER_INVARIANTS)
    params = MappingProxyType({
        "t": TASK,
        "r": (_natural, "is not a natural number"),
        "p": INTEGER,
        "v": INTEGER,
    })
    types = MappingProxyType({
        "now": _Variable(_natural), "closed": _Variable(_boolean),
        "nextSeq": _Variable(_integer),
        **{name: _Variable(_integer, "Tasks")
           for name in ("version", "priority", "seq", "claims")},
        "runAt": _Variable(_natural, "Tasks"),
        "state": _Variable(_string, "Tasks"),
        "cancelRequested": _Variable(_boolean, "Tasks"),
        "heap": _Variable(_set_of(_tuple_of(_natural, _integer, _integer, _id("Tasks"),
                                            _integer))),
    })
    id_sets = MappingProxyType({"Tasks": "version"})
    counts = MappingProxyType({"RebuildFloor": (0, "a natural number")})

    def derived(self, trace: Trace, ids: Ids) -> dict[str, frozenset[Any]]:
        # Only TypeOK reads them: the times and priorities the trace uses are enough.
        return {"Times": _times(trace, 0, "runAt", "r"),
                "Priorities": _times(trace, 1, "priority", "p")}

    def model_state(self, state: Any, ids: Mapping[str, Sequence[Hashable]]) -> dict[str, Any]:
        return timerspec.spec_state(state, ids["Tasks"])


class _PoolSpec(TraceSpec):
    system = "pool"
    invariants = (*POOL_INVARIANTS, *BLOCKING_INVARIANTS)
    params = MappingProxyType({
        "t": TASK,
        **{name: (_id("Threads"), "is not in Workers \\cup Spares")
           for name in ("w", "thief", "victim", "x")},
        "s": (_id("Spares"), "is not in Spares"),
    })
    types = MappingProxyType({
        "phase": _Variable(_string),
        "deque": _Variable(_sequence_of(_id("Tasks")), "Threads"),
        "running": _Variable(_id_or_no_task("Tasks"), "Threads"),
        "outstanding": _Variable(_integer),
        **{name: _Variable(_set_of(_id("Tasks")))
           for name in ("submitted", "finished", "cancelled")},
        "runs": _Variable(_integer, "Tasks"),
        "parent": _Variable(_id_or_no_task("Tasks"), "Tasks"),
        "blocked": _Variable(_set_of(_id("Threads"))),
        "spare": _Variable(_spare_state, "Spares"),
        "blocker": _Variable(_set_of(_id("Threads")), "Spares"),
    })
    # Managed blocking is off (Spares = {}, MaxSpares = 0) unless the trace names spares.
    id_sets = MappingProxyType({"Workers": "deque", "Tasks": "runs", "Children": "",
                                "Spares": "spare"})
    optional_ids = ("Spares",)
    no_task = ("running", "parent")

    @property
    def calls(self) -> dict[str, str]:
        """The spec's operators, and SubmitExternal to a worker only: Next takes it for
        ``w \\in Workers``, which the operator leaves to Next (a spare is a thread too)."""
        calls = super().calls
        calls["SubmitExternal"] = f"p.w \\in Workers /\\ {calls['SubmitExternal']}"
        return calls

    def numbers(self, trace: Trace) -> dict[str, int]:
        """``StealCap``, 1 (single steals) when the trace names none; ``MaxSpares``, 0 (managed
        blocking off) when it names none."""
        out = {}
        for name, default, least, assumed in (("StealCap", 1, 1, "StealCap \\in Nat \\ {0}"),
                                              ("MaxSpares", 0, 0, "MaxSpares \\in Nat")):
            value = trace.constants.get(name, default)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise TraceError(f"{trace.name}: the constant {name} is {value!r}; the spec "
                                 f"assumes {assumed}")
            out[name] = value
        return out

    def check_ids(self, trace: Trace, ids: Ids) -> None:
        if not ids["Workers"]:
            raise TraceError(f"{trace.name}: the constant Workers is empty; the spec assumes "
                             "a worker")
        outside = ids["Children"] - ids["Tasks"]
        if outside:
            raise TraceError(f"{trace.name}: the constant Children names "
                             f"{sorted(map(repr, outside))}, not in Tasks")
        both = ids["Workers"] & ids["Spares"]
        if both:
            raise TraceError(f"{trace.name}: {sorted(map(repr, both))} are both in Workers and "
                             "in Spares; the spec assumes Spares \\cap Workers = {} (a trace "
                             "with spares names its Workers)")

    def id_unions(self, ids: Ids) -> dict[str, frozenset[Hashable]]:
        return {"Threads": ids["Workers"] | ids["Spares"]}

    def _blocking(self, constants: Constants) -> BlockingInstance | None:
        """The trace's managed blocking; None when it names no spare."""
        if not constants.ids["Spares"]:
            return None
        return BlockingInstance(constants.ids["Workers"], constants.ids["Spares"],
                                constants.numbers["MaxSpares"])

    def initial_model(self, constants: Constants) -> Any:
        return INITIAL if self._blocking(constants) is None else BlockingSnapshot()

    def model_state(self, state: Any, ids: Mapping[str, Sequence[Hashable]]) -> dict[str, Any]:
        if isinstance(state, BlockingSnapshot):
            return poolspec.blocking_spec_state(state, ids["Workers"], ids["Spares"],
                                                ids["Tasks"])
        return poolspec.spec_state(state, ids["Workers"], ids["Tasks"])

    def refusal(self, action: str, state: Any, args: tuple[Any, ...],
                constants: Constants) -> Any:
        blocking = self._blocking(constants)
        if blocking is None and action in BLOCKING_ACTIONS:
            return Refusal(None, f"{action}: the trace names no Spares: managed blocking is off")
        if blocking is not None:
            refused = blocking_refusal(state, action, args, blocking)
            if refused is not None or action in BLOCKING_ACTIONS:
                return refused
            state = state.pool
        return self.system_object.actions[action].refused(
            state, *args, children=constants.ids["Children"],
            steal_cap=constants.numbers["StealCap"])

    def model_successor(self, action: str, state: Any, args: tuple[Any, ...],
                        constants: Constants, recorded: Mapping[str, Any],
                        given: Mapping[str, Sequence[Hashable]]) -> Any:
        """With managed blocking, Block may start any free spare: the one recorded, if it is
        one of them."""
        blocking = self._blocking(constants)
        if blocking is None:
            return super().model_successor(action, state, args, constants, recorded, given)
        afters = blocking_step(state, action, args, blocking)
        return next((after for after in afters
                     if not _differences(self, recorded, self.model_state(after, given))),
                    afters[0])


TRACE_SPECS: Mapping[str, TraceSpec] = {
    spec.system: spec for spec in (_SchedulerSpec(), _TimerSpec(), _PoolSpec())}
"""The specs whose traces TLC judges, by system name."""


def spec_of(trace: Trace) -> TraceSpec:
    """The spec ``trace`` is of, told by the variables its states hold."""
    names = {name for state in trace.states for name in state}
    try:
        system = systems.by_spec_variables(sorted(names))
    except ValueError:
        raise TraceError(f"{trace.name}: no spec has the variables {sorted(names)}") from None
    spec = TRACE_SPECS.get(system.name)
    if spec is None:
        raise TraceError(
            f"{trace.name}: a trace of {system.title} ({system.mc_module.removeprefix('MC')}); "
            f"validate-trace judges traces of "
            f"{', '.join(systems.get(n).title for n in TRACE_SPECS)}")
    return spec


# -- the constants --------------------------------------------------------------------------

def _id_list(trace: Trace, spec: TraceSpec, name: str) -> list[Hashable]:
    """The ids of the constant ``name``, checked to be expressible as TLA+ values."""
    given = trace.constants.get(name)
    variable = spec.id_sets[name]
    if given is None:
        keys = trace.initial.get(variable) if variable else None
        if not isinstance(keys, Mapping) and name in spec.optional_ids:
            return []
        if not isinstance(keys, Mapping):
            source = f" and no '{variable}' in the initial state to read the ids from" \
                if variable else ""
            raise TraceError(f"{trace.name}: no constant {name}{source}")
        ids = list(keys)
    elif isinstance(given, str) or not isinstance(given, Sequence | frozenset | set):
        raise TraceError(f"{trace.name}: the constant {name} is {given!r}, not a list of ids")
    else:
        ids = list(given)
    if not (all(isinstance(t, str) for t in ids) or all(_is_int(t) for t in ids)):
        kinds = sorted({type(t).__name__ for t in ids})
        raise TraceError(f"{trace.name}: ids must be all strings or all integers, found "
                         f"{', '.join(kinds)}")
    if len(set(ids)) != len(ids):
        raise TraceError(f"{trace.name}: the constant {name} lists an id twice: {ids!r}")
    if spec.no_task and name != "Workers" and NO_TASK.name in ids:
        raise TraceError(f"{trace.name}: an id is named {NO_TASK.name!r}, which ITF uses for "
                         "the spec's NoTask")
    return ids


def _constants(trace: Trace, spec: TraceSpec) -> tuple[Constants, dict[str, list[Hashable]]]:
    """The trace's constants, checked; and the ids of each set in the trace's order."""
    given = {name: _id_list(trace, spec, name) for name in spec.id_sets}
    ids = {name: frozenset(values) for name, values in given.items()}
    spec.check_ids(trace, ids)
    numbers = spec.numbers(trace)
    defined = dict(ids)
    ids = {**ids, **spec.id_unions(ids)}
    for name, values in given.items():
        _check_ints(f"{trace.name}, the constant {name}", values)
    for name, number in numbers.items():
        _check_ints(f"{trace.name}, the constant {name}", number)
    return Constants(ids=ids, defined=defined, numbers=numbers,
                     given=trace.constants), given


def _check_params(trace: Trace, spec: TraceSpec, ids: Ids) -> None:
    actions = spec.system_object.actions
    for index, step in enumerate(trace.steps, start=1):
        where = f"{trace.name}, step {index} ({step.action})"
        action = actions.get(step.action)
        if action is None or step.action not in spec.calls:
            raise TraceError(f"{where}: unknown action; the spec's are {', '.join(spec.calls)}")
        missing = [name for name in action.params if name not in step.params]
        if missing:
            raise TraceError(f"{where}: missing parameters {', '.join(missing)}")
        for name in action.params:
            value = step.params[name]
            kind, otherwise = spec.params[name]
            if name in ("D", "O") and isinstance(value, frozenset | set):
                value = tuple(value)
            if not kind(value, ids):
                raise TraceError(f"{where}: {name} = {value!r} {otherwise}")
        _check_ints(where, dict(step.params))


def _check_state(where: str, state: Mapping[str, Any], spec: TraceSpec, ids: Ids) -> None:
    """Refuse values TLC could not even compare with the spec's (a string for an integer...)."""
    for name in spec.variables:
        if name not in state:
            continue
        value, shape = state[name], spec.types[name]
        if shape.over is None:
            if not shape.kind(value, ids):
                raise TraceError(f"{where}: {name} = {value!r} is not of the spec's type")
            continue
        if not isinstance(value, Mapping):
            raise TraceError(f"{where}: {name} = {value!r} is not a function of the ids")
        for key, entry in value.items():
            if not _is_id(key, ids[shape.over]):
                raise TraceError(f"{where}: {name} has the key {key!r}, not an id of "
                                 f"{shape.over}")
            if not shape.kind(entry, ids):
                raise TraceError(f"{where}: {name}[{key!r}] = {entry!r} is not of the spec's "
                                 "type")
    _check_ints(where, dict(state))


# -- the module -----------------------------------------------------------------------------

def _spec_value(spec: TraceSpec, name: str, value: Any) -> Any:
    """A recorded value as the spec's: ITF writes the model value NoTask as a string."""
    if name in spec.no_task and isinstance(value, Mapping):
        return {k: _no_task_of(v) for k, v in value.items()}
    return value


def _no_task_of(entry: Any) -> Any:
    """An entry of a variable that may hold NoTask, as the spec's: NoTask itself, or a record
    with NoTask in a field (the provenance's NoRecord)."""
    if _is_no_task(entry):
        return NO_TASK
    if isinstance(entry, Mapping):
        return {k: NO_TASK if _is_no_task(v) else v for k, v in entry.items()}
    return entry


def _state_record(spec: TraceSpec, state: Mapping[str, Any]) -> str:
    fields = [f"{name} |-> {render(_spec_value(spec, name, state[name]))}"
              for name in spec.variables if name in state]
    return "[" + ", ".join(fields) + "]" if fields else "<<>>"


def _params_record(spec: TraceSpec, action: str, params: Mapping[str, Any]) -> str:
    names = spec.system_object.actions[action].params
    if not names:
        return "<<>>"
    return "[" + ", ".join(f"{n} |-> {render(spec.param_value(n, params[n]))}"
                           for n in names) + "]"


def _sequence(items: list[str]) -> str:
    return "<<\n    " + ",\n    ".join(items) + "\n>>" if items else "<<>>"


def _stated(trace: Trace) -> tuple[TraceSpec, Constants]:
    """The trace's spec and constants, every value checked to be one TLC can hold."""
    if not trace.initial and not trace.steps:
        raise TraceError(f"{trace.name}: the trace has no states")
    spec = spec_of(trace)
    constants, _ = _constants(trace, spec)
    _check_params(trace, spec, constants.ids)
    for index, recorded in enumerate(trace.states):
        _check_state(f"{trace.name}, state {index + 1}", recorded, spec, constants.ids)
    derived = spec.derived(trace, constants.ids)
    return spec, Constants(ids=constants.ids, defined={**constants.defined, **derived},
                           numbers=constants.numbers, given=constants.given)


def trace_module(trace: Trace, module_name: str = "TraceCheck") -> tuple[str, str]:
    """The TLA+ module (text of ``<module_name>.tla``) and TLC config that check ``trace``.

    Raises :class:`TraceError` for a trace no spec judged here can speak of: no state,
    variables of no such spec, ids of mixed types or named ``NoTask``, a constant the spec
    assumes otherwise (``MaxConcurrency``, ``RebuildFloor``, ``Workers``, ``Children``), an
    unknown action, a missing or ill-typed parameter, a value of the wrong type.
    """
    if not module_name.isidentifier():
        raise ValueError(f"trace_module: {module_name!r} is not a TLA+ module name")
    spec, constants = _stated(trace)
    states = [_state_record(spec, s) for s in trace.states]
    actions = [render(step.action) for step in trace.steps]
    params = [_params_record(spec, step.action, step.params) for step in trace.steps]
    matches = "\n".join(
        f'    /\\ "{name}" \\in DOMAIN s => {name} = s.{name}' for name in spec.variables)
    primed = "\n".join(
        f'    /\\ "{name}" \\in DOMAIN s => {name}\' = s.{name}' for name in spec.variables)
    cases = "\n      [] ".join(f'a = "{name}" -> {call}' for name, call in spec.calls.items())
    invariants = "\n".join(f"    {name}" for name in (*spec.invariants, _ACCEPTED))
    definitions = "\n\n".join(
        f"Trace{name} == {render(value)}\n\\* The constant {name} of the trace."
        for name, value in constants.defined.items())
    substitutions = "\n".join(
        [f"    {name} <- Trace{name}" for name in constants.defined]
        + [f"    {name} = {value}" for name, value in constants.numbers.items()]
        + [f"    {name} = {value}" for name, value in spec.fixed.items()]
        + (["    NoTask = NoTask"] if spec.no_task else []))
    rule = "-" * 77
    # The name as a TLA+ string: one line of plain ASCII, with no "(*", "*)" or "\\*" that
    # would open or close a comment around it.
    title = render(trace.name)
    module = f"""---- MODULE {module_name} ----
(* The trace {title} as a behaviour of {spec.module}: TLC takes its steps one by one. *)
EXTENDS {spec.module}, Integers, Sequences, TLC

{definitions}

TraceStates == {_sequence(states)}
\\* The recorded states, first to last; a state may omit variables.

TraceActions == {_sequence(actions)}
\\* TraceActions[j] is the action of step j, from TraceStates[j] to TraceStates[j + 1].

TraceParams == {_sequence(params)}
\\* The parameters of step j, named as in the action's definition.

{rule}
VARIABLE i
\\* The state of the trace TLC is in.

Matches(s) ==
{matches}
\\* The variables recorded in s hold their recorded values.

MatchesNext(s) ==
{primed}
\\* The variables recorded in s hold their recorded values after the step.

TakeStep(a, p) ==
    CASE {cases}
\\* The action named a with the parameters p.

TraceInit ==
    /\\ i = 1
    /\\ Init
    /\\ Matches(TraceStates[1])

TraceNext ==
    /\\ i < Len(TraceStates)
    /\\ TakeStep(TraceActions[i], TraceParams[i])
    /\\ MatchesNext(TraceStates[i + 1])
    /\\ i' = i + 1

TraceAccepted == i < Len(TraceStates)
\\* Violated exactly when TLC reaches the last recorded state: the whole trace was accepted.
====
"""
    config = f"""\\* Checks the trace {title}: TraceAccepted is violated when it is accepted.
CONSTANTS
{substitutions}

INIT TraceInit
NEXT TraceNext

\\* The spec's invariants first: in a state that breaks one, TLC reports it, not TraceAccepted.
INVARIANTS
{invariants}
"""
    return module, config


# -- running TLC ----------------------------------------------------------------------------

def validate_trace(trace: Trace, *, timeout: float = 300, workers: int = 1) -> Validation:
    """Ask TLC whether ``trace`` is a behaviour of its spec's ``Spec``; explain a rejection.

    Runs TLC (``workers`` threads, its process tree killed after ``timeout`` seconds:
    :class:`refsched.verify.tlc.TLCTimeoutError`) on :func:`trace_module` in a temporary
    folder beside a copy of the spec module (see :func:`spec_of`). Raises
    :class:`TraceError` for a trace that cannot be stated (see :func:`trace_module`),
    ``ValueError`` for ``workers`` < 1 or a ``timeout`` that is not a positive number,
    :class:`refsched.verify.tlc.TLCNotFoundError` without TLC or Java, and
    :class:`TLCInternalError` when TLC gives no verdict on the module (it could not parse it,
    or failed evaluating it).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"validate_trace: workers={workers!r}: must be an integer >= 1")
    if not timeout > 0:  # also refuses NaN
        raise ValueError(f"validate_trace: timeout={timeout!r}: must be a positive number")
    module_name = "TraceCheck"
    spec = spec_of(trace)
    module, config = trace_module(trace, module_name)
    with tempfile.TemporaryDirectory(prefix="refsched-trace-") as tmp:
        folder = Path(tmp)
        shutil.copy(tlc.spec_dir() / f"{spec.module}.tla", folder / f"{spec.module}.tla")
        (folder / f"{module_name}.tla").write_text(module, encoding="ascii")
        (folder / f"{module_name}.cfg").write_text(config, encoding="ascii")
        result = tlc.run_tlc(f"{module_name}.cfg", f"{module_name}.tla", directory=folder,
                             extra_args=["-deadlock"], workers=workers, timeout=timeout)
    return _verdict(spec, trace, result)


def _verdict(spec: TraceSpec, trace: Trace, result: tlc.TLCResult) -> Validation:
    steps = len(trace.steps)

    def verdict(step: int | None, reason: str | None = None,
                violated: str | None = None) -> Validation:
        taken = trace.steps[step - 1] if step is not None and 1 <= step <= steps else None
        return Validation(
            name=trace.name, accepted=step is None, steps=steps, first_rejected_step=step,
            action=None if taken is None else taken.action,
            params=None if taken is None else dict(taken.params),
            reason=reason, violated=violated, tlc_version=result.version,
            duration=result.duration, tlc=result, system=spec.system)

    if result.violation_kind == "invariant" and result.violated == _ACCEPTED:
        return verdict(None)
    if result.violation_kind == "invariant" and result.violated in spec.invariants:
        # The error trace ends in the state that breaks it: state n was reached by step n - 1.
        reached = _trace_length(result)
        return verdict(max(reached - 1, 0), f"state {reached} breaks the spec invariant "
                       f"{result.violated}", result.violated)
    if result.ok and result.depth is not None:
        # TLC reached states 1..depth and no further: step `depth` is the one it could not take.
        step = result.depth if result.distinct_states else 0
        return verdict(step, _explain(spec, trace, step))
    raise TLCInternalError(_internal_error(trace, result))


# TLC's words when SANY cannot read a module: a lexical or a parse error.
_PARSE_FAILURE = re.compile(r"^(Lexical \{?error|Parse Error|\*\*\* Parse Error|Fatal errors while "
                            r"parsing|Semantic errors|Could not parse)", re.M)


# The lines of TLC's output that say where and what, best first.
_ERROR_DETAIL = (re.compile(r"^(Lexical|Encountered|.*\bline \d+, col)"), _PARSE_FAILURE,
                 re.compile(r"^Error: "))


def _internal_error(trace: Trace, result: tlc.TLCResult) -> str:
    """What to tell the user when TLC gave no verdict on the module generated for ``trace``."""
    output = result.output
    lines = output.splitlines()
    first = next((line.strip() for pattern in _ERROR_DETAIL for line in lines
                  if pattern.match(line)), None)
    if _PARSE_FAILURE.search(output):
        what = "TLC could not parse the TLA+ module generated for the trace"
    else:
        what = (f"TLC gave no verdict on the module generated for the trace (exit status "
                f"{result.returncode})")
    return (f"internal error, not a verdict on the trace {shown_name(trace.name)}: "
            f"{what}" + (f": {first}" if first else "")
            + ". Please report it with the trace.")


def _trace_length(result: tlc.TLCResult) -> int:
    """The number of states in TLC's error trace."""
    text = result.trace or ""
    return sum(1 for line in text.splitlines() if line.startswith("State "))


# -- explanations ---------------------------------------------------------------------------

def _differences(spec: TraceSpec, recorded: Mapping[str, Any], model: Mapping[str, Any],
                 limit: int = 6) -> list[str]:
    out: list[str] = []
    for name in spec.variables:
        if name not in recorded:
            continue
        got, want = _spec_value(spec, name, recorded[name]), model[name]
        if isinstance(got, Mapping) and isinstance(want, Mapping):
            for key in [*want, *(k for k in got if k not in want)]:
                if key not in got or key not in want or got[key] != want[key]:
                    out.append(f"{name}[{_show(key)}]: recorded {_show(got.get(key, '-'))}, "
                               f"model {_show(want.get(key, '-'))}")
        elif isinstance(got, frozenset | set) and isinstance(want, frozenset | set):
            only = [*(f"only recorded {_show(e)}" for e in sorted(got - want, key=repr)),
                    *(f"only in the model {_show(e)}" for e in sorted(want - got, key=repr))]
            if only:
                out.append(f"{name}: " + ", ".join(only))
        elif got != want:
            out.append(f"{name}: recorded {_show(got)}, model {_show(want)}")
    if len(out) > limit:
        out = [*out[:limit], f"and {len(out) - limit} more"]
    return out


def _show(value: Any) -> str:
    try:
        return render(value, readable=True)
    except TypeError:
        return repr(value)


def _explain(spec: TraceSpec, trace: Trace, step: int) -> str:
    """Why the model cannot take step ``step`` of ``trace`` (0: the initial state).

    The model replays the steps before it (TLC accepted them, so the model's state is the
    recorded one wherever that was recorded), then either refuses the action or reaches a
    state that differs from the recorded one.
    """
    system = spec.system_object
    try:
        constants, given = _constants(trace, spec)
        state: Any = spec.initial_model(constants)
        if step == 0:
            diff = _differences(spec, trace.initial, spec.model_state(state, given))
            if not diff:
                return ("the initial state matches the model's Init, yet TLC rejects it: the "
                        "model and the spec disagree")
            return "the initial state is not the spec's Init: " + "; ".join(diff)
        for index, taken in enumerate(trace.steps[:step], start=1):
            params = {name: spec.param_value(name, value)
                      for name, value in taken.params.items()}
            args = system.model_args(taken.action, params, trace.constants)
            refusal = spec.refusal(taken.action, state, args, constants)
            if index < step:
                if refusal is not None:
                    return (f"the model refuses the earlier step {index} "
                            f"{describe(taken.action, taken.params)}: {refusal.reason}")
                state = spec.model_successor(taken.action, state, args, constants, taken.state,
                                             given)
                continue
            call = describe(taken.action, taken.params)
            if refusal is not None:
                return f"{call} is not enabled: {refusal.reason}"
            after = spec.model_state(spec.model_successor(
                taken.action, state, args, constants, taken.state, given), given)
            diff = _differences(spec, taken.state, after)
            if not diff:
                return (f"{call} reaches the recorded state in the model, yet TLC rejects it: "
                        "the model and the spec disagree")
            return (f"{call} is enabled, but the state it reaches is not the recorded one: "
                    + "; ".join(diff))
    except (SpecStateError, TraceError, KeyError, TypeError, ValueError) as exc:
        return f"the model cannot replay the trace to step {step}: {exc}"
    return f"the trace has no step {step}"


def _short_version(line: str | None) -> str:
    """``TLC 2.15 rev d5b5a7f`` from TLC's ``TLC2 Version 2.15 of ... (rev: d5b5a7f)``."""
    match = re.search(r"Version (\S+).*?\(rev: (\w+)\)", line or "")
    return f"TLC {match.group(1)} rev {match.group(2)}" if match else (line or "TLC")


def shown_name(name: str) -> str:
    """A trace's name on one line of a report: as it is, or quoted with escapes when it holds
    a line break or another character a terminal would not show as itself."""
    return name if name.isprintable() else repr(name)


def format_validation(v: Validation) -> str:
    """``v`` for people: the verdict, where and why a trace was rejected, and TLC's run."""
    tail = f"({_short_version(v.tlc_version)}, {v.duration:.1f} s)"
    name = shown_name(v.name)
    spec = TRACE_SPECS[v.system].module if v.system in TRACE_SPECS else "its spec"
    of = "Spec" if v.system == "scheduler" else f"{spec}'s Spec"
    if v.accepted:
        return f"{name}: accepted, {v.steps} steps are a behaviour of {of} {tail}"
    if v.first_rejected_step == 0:
        where = "the initial state"
    else:
        call = describe(v.action or "?", v.params or {})
        where = f"step {v.first_rejected_step} of {v.steps}, {call}"
    lines = [f"{name}: rejected at {where} {tail}"]
    if v.violated is not None:
        lines.append(f"  spec invariant {v.violated} is violated")
    if v.reason:
        lines.append(f"  {v.reason}")
    return "\n".join(lines)
