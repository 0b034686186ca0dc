"""Trace validation: TLC decides whether a recorded trace is a behaviour of ``Spec``.

A trace (:class:`~refsched.verify.itf.Trace`: recorded from refsched's TaskScheduler by
:mod:`refsched.verify.recording`, or read from ITF written by any implementation) becomes a
TLA+ module that extends ``spec/Scheduler.tla`` and holds the trace as constants:
``TraceStates`` (one record of spec variables per state), ``TraceActions`` and
``TraceParams`` (the action and parameters of each step). TLC 2.15 has no trace
post-condition, so the module walks the trace with a step counter ``i``::

    TraceInit == i = 1 /\\ Init /\\ state 1 matches
    TraceNext == i < Len(TraceStates) /\\ <action i with its parameters>
                 /\\ state i + 1 matches (primed) /\\ i' = i + 1

and the invariant ``TraceAccepted == i < Len(TraceStates)`` is violated exactly when TLC
reaches the last state, i.e. when the whole trace was accepted. If TLC ends without that
violation, the search depth it reports is the number of states it reached: the step after
them is the first it could not take. The spec's invariants are checked along the way.

A state may omit variables; only those present are matched. Why a step was rejected is told
by the reference model (``refsched.model``): the action's refusal in the previous state, or
how the model's successor differs from the recorded state.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refsched.model.actions import ACTIONS, INITIAL
from refsched.model.graph import action_args, describe
from refsched.model.invariants import INVARIANTS
from refsched.types import Snapshot

from . import tlc
from .itf import Trace, TraceFormatError
from .specstate import NO_TASK, SPEC_VARIABLES, SpecStateError, spec_state, task_ids
from .tla import render

__all__ = [
    "SPEC_INVARIANTS",
    "TLCInternalError",
    "TraceError",
    "Validation",
    "format_validation",
    "shown_name",
    "trace_module",
    "validate_trace",
]

SPEC_INVARIANTS: tuple[str, ...] = tuple(INVARIANTS)
"""The spec's invariants (named as in the model and the spec), checked in every trace state."""

_ACCEPTED = "TraceAccepted"

# How each action is taken from its recorded parameters ``p``. StaleCallback is the spec's
# parametric operator (Next only reaches it through AnyStaleCallback, for some g).
_CALLS = {
    "Submit": "Submit(p.t, p.D)",
    "Start": "Start",
    "Claim": "Claim(p.k)",
    "Complete": "Complete(p.t, p.g)",
    "Fail": "Fail(p.t, p.g)",
    "Cancel": "Cancel(p.t)",
    "AcknowledgeCancel": "AcknowledgeCancel(p.t, p.g)",
    "Retry": "Retry(p.t)",
    "Close": "Close(p.cancelPending)",
    "StaleCallback": "StaleCallback(p.t, p.g)",
    "RepeatedCallback": "RepeatedCallback(p.t)",
}
assert set(_CALLS) == set(ACTIONS)


class TraceError(TraceFormatError):
    """A trace that cannot be stated as a TLA+ module of the spec (the message says why)."""


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


# -- the module -----------------------------------------------------------------------------

def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


TLC_INT_LIMIT = 2**30
"""TLC 2.15's integers are Java ints; integers in a trace stay below this in magnitude, so
that the spec's arithmetic on them (``nextSeq + 1``, ``generation + 1``) cannot overflow."""


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


def _tasks_of(trace: Trace) -> list[Hashable]:
    """The ids of the spec's ``Tasks``, checked to be expressible as TLA+ values."""
    given = trace.constants.get("Tasks")
    if given is None:
        try:
            ids = task_ids(trace.initial)
        except SpecStateError:
            raise TraceError(f"{trace.name}: no constant Tasks and no 'generation' in the "
                             "initial state to read the ids from") from None
    elif isinstance(given, str) or not isinstance(given, Sequence | frozenset | set):
        raise TraceError(f"{trace.name}: the constant Tasks is {given!r}, not a list of ids")
    else:
        ids = list(given)
    if not all(isinstance(t, str) or _is_int(t) for t in ids):
        kinds = sorted({type(t).__name__ for t in ids})
        raise TraceError(f"{trace.name}: ids must be all strings or all integers, found "
                         f"{', '.join(kinds)}")
    if len(set(ids)) != len(ids):
        raise TraceError(f"{trace.name}: the constant Tasks lists an id twice: {ids!r}")
    if all(isinstance(t, str) for t in ids):
        if NO_TASK.name in ids:
            raise TraceError(f"{trace.name}: an id is named {NO_TASK.name!r}, which ITF uses "
                             "for the spec's NoTask")
    elif not all(_is_int(t) for t in ids):
        kinds = sorted({type(t).__name__ for t in ids})
        raise TraceError(f"{trace.name}: ids must be all strings or all integers, found "
                         f"{', '.join(kinds)}")
    return ids


def _max_concurrency(trace: Trace) -> int:
    value = trace.constants.get("MaxConcurrency")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TraceError(f"{trace.name}: the constant MaxConcurrency is {value!r}; the spec "
                         "assumes an integer >= 1")
    return int(value)


def _check_params(trace: Trace, ids: list[Hashable]) -> None:
    known = frozenset(ids)
    for index, step in enumerate(trace.steps, start=1):
        where = f"{trace.name}, step {index} ({step.action})"
        action = ACTIONS.get(step.action)
        if action is None:
            raise TraceError(f"{where}: unknown action; the spec's are {', '.join(ACTIONS)}")
        missing = [name for name in action.params if name not in step.params]
        if missing:
            raise TraceError(f"{where}: missing parameters {', '.join(missing)}")
        for name in action.params:
            value = step.params[name]
            if name == "t" and not _is_id(value, known):
                raise TraceError(f"{where}: t = {value!r} is not in Tasks")
            if name == "D" and (not isinstance(value, frozenset | set | list | tuple)
                                or not all(_is_id(d, known) for d in value)):
                raise TraceError(f"{where}: D = {value!r} is not a set of ids in Tasks")
            if name in ("k", "g") and not _is_int(value):
                raise TraceError(f"{where}: {name} = {value!r} is not an integer")
            if name == "cancelPending" and not isinstance(value, bool):
                raise TraceError(f"{where}: cancelPending = {value!r} is not a boolean")


def _is_id(value: Any, ids: frozenset[Hashable]) -> bool:
    # Equal values of another type (1 and 1.0, True) would be other values in TLA+.
    return value in ids and any(type(value) is type(t) for t in ids)


def _kind_ok(name: str, value: Any, ids: frozenset[Hashable]) -> bool:
    """Whether ``value`` is of the type the spec gives one entry of the variable ``name``."""
    if name in ("started", "closed", "cancelRequested"):
        return isinstance(value, bool)
    if name in ("nextSeq", "generation", "remainingDeps", "claims", "seq"):
        return _is_int(value)
    if name == "state":
        return isinstance(value, str)
    if name == "deps":
        return isinstance(value, frozenset | set) and all(_is_id(d, ids) for d in value)
    return value == NO_TASK or value == NO_TASK.name or _is_id(value, ids)  # blockedBy


def _check_state(where: str, state: Mapping[str, Any], ids: frozenset[Hashable]) -> None:
    """Refuse values TLC could not even compare with the spec's (a string for an integer...)."""
    for name in SPEC_VARIABLES:
        if name not in state:
            continue
        value = state[name]
        if name in ("started", "closed", "nextSeq"):
            if not _kind_ok(name, value, ids):
                raise TraceError(f"{where}: {name} = {value!r} is not of the spec's type")
            continue
        if not isinstance(value, Mapping):
            raise TraceError(f"{where}: {name} = {value!r} is not a function of the ids")
        for key, entry in value.items():
            if not _is_id(key, ids):
                raise TraceError(f"{where}: {name} has the key {key!r}, not an id of Tasks")
            if not _kind_ok(name, entry, ids):
                raise TraceError(f"{where}: {name}[{key!r}] = {entry!r} is not of the spec's "
                                 "type")


def _spec_value(name: str, value: Any) -> Any:
    """A recorded value as the spec's: ITF writes the model value NoTask as a string."""
    if name == "blockedBy" and isinstance(value, Mapping):
        return {k: NO_TASK if v == NO_TASK.name else v for k, v in value.items()}
    return value


def _state_record(state: Mapping[str, Any]) -> str:
    fields = [f"{name} |-> {render(_spec_value(name, state[name]))}"
              for name in SPEC_VARIABLES if name in state]
    return "[" + ", ".join(fields) + "]" if fields else "<<>>"


def _params_record(action: str, params: Mapping[str, Any]) -> str:
    names = ACTIONS[action].params
    if not names:
        return "<<>>"
    return "[" + ", ".join(f"{n} |-> {render(_param_value(n, params[n]))}" for n in names) + "]"


def _param_value(name: str, value: Any) -> Any:
    # D may arrive as a list or tuple (a JSON array); in the spec it is a set.
    return frozenset(value) if name == "D" else value


def _sequence(items: list[str]) -> str:
    return "<<\n    " + ",\n    ".join(items) + "\n>>" if items else "<<>>"


def trace_module(trace: Trace, module_name: str = "TraceCheck") -> tuple[str, str]:
    """The TLA+ module (text of ``<module_name>.tla``) and TLC config that check ``trace``.

    Raises :class:`TraceError` for a trace the spec cannot speak of: no state, ids of mixed
    types or named ``NoTask``, a ``MaxConcurrency`` that is not a positive integer, an
    unknown action, a missing or ill-typed parameter.
    """
    if not module_name.isidentifier():
        raise ValueError(f"trace_module: {module_name!r} is not a TLA+ module name")
    if not trace.initial and not trace.steps:
        raise TraceError(f"{trace.name}: the trace has no states")
    ids = _tasks_of(trace)
    max_concurrency = _max_concurrency(trace)
    _check_params(trace, ids)
    id_set = frozenset(ids)
    _check_ints(f"{trace.name}, the constant Tasks", ids)
    _check_ints(f"{trace.name}, the constant MaxConcurrency", max_concurrency)
    for index, recorded in enumerate(trace.states):
        _check_state(f"{trace.name}, state {index + 1}", recorded, id_set)
        _check_ints(f"{trace.name}, state {index + 1}", dict(recorded))
    for index, step in enumerate(trace.steps, start=1):
        _check_ints(f"{trace.name}, step {index} ({step.action})", dict(step.params))
    states = [_state_record(s) for s in trace.states]
    actions = [render(step.action) for step in trace.steps]
    params = [_params_record(step.action, step.params) for step in trace.steps]
    matches = "\n".join(
        f'    /\\ "{name}" \\in DOMAIN s => {name} = s.{name}' for name in SPEC_VARIABLES)
    primed = "\n".join(
        f'    /\\ "{name}" \\in DOMAIN s => {name}\' = s.{name}' for name in SPEC_VARIABLES)
    cases = "\n      [] ".join(f'a = "{name}" -> {call}' for name, call in _CALLS.items())
    invariants = "\n".join(f"    {name}" for name in (*SPEC_INVARIANTS, _ACCEPTED))
    rule = "-" * 77
    # The name as a TLA+ string: one line of plain ASCII, with no "(*", "*)" or "\\*" that
    # would open or close a comment around it.
    title = render(trace.name)
    module = f"""---- MODULE {module_name} ----
(* The trace {title} as a behaviour of Scheduler: TLC takes its steps one by one. *)
EXTENDS Scheduler, Integers, Sequences, TLC

TraceTasks == {render(frozenset(ids))}
\\* The ids of the trace: the constant Tasks.

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
    Tasks <- TraceTasks
    MaxConcurrency = {max_concurrency}
    NoTask = NoTask

INIT TraceInit
NEXT TraceNext

\\* The spec's invariants first: in a state that breaks one, TLC reports it, not TraceAccepted.
INVARIANTS
{invariants}
"""
    return module, config


# -- running TLC ----------------------------------------------------------------------------

def validate_trace(trace: Trace, *, timeout: float = 300, workers: int = 1) -> Validation:
    """Ask TLC whether ``trace`` is a behaviour of ``Spec``; explain a rejection.

    Runs TLC (``workers`` threads, its process tree killed after ``timeout`` seconds:
    :class:`refsched.verify.tlc.TLCTimeoutError`) on :func:`trace_module` in a temporary
    folder beside a copy of ``Scheduler.tla``. Raises :class:`TraceError` for a trace that
    cannot be stated (see :func:`trace_module`), ``ValueError`` for ``workers`` < 1 or a
    ``timeout`` that is not a positive number, :class:`refsched.verify.tlc.TLCNotFoundError`
    without TLC or Java, and :class:`TLCInternalError` when TLC gives no verdict on the
    module (it could not parse it, or failed evaluating it).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"validate_trace: workers={workers!r}: must be an integer >= 1")
    if not timeout > 0:  # also refuses NaN
        raise ValueError(f"validate_trace: timeout={timeout!r}: must be a positive number")
    module_name = "TraceCheck"
    module, config = trace_module(trace, module_name)
    with tempfile.TemporaryDirectory(prefix="refsched-trace-") as tmp:
        folder = Path(tmp)
        shutil.copy(tlc.spec_dir() / "Scheduler.tla", folder / "Scheduler.tla")
        (folder / f"{module_name}.tla").write_text(module, encoding="ascii")
        (folder / f"{module_name}.cfg").write_text(config, encoding="ascii")
        result = tlc.run_tlc(f"{module_name}.cfg", f"{module_name}.tla", directory=folder,
                             extra_args=["-deadlock"], workers=workers, timeout=timeout)
    return _verdict(trace, result)


def _verdict(trace: Trace, result: tlc.TLCResult) -> Validation:
    steps = len(trace.steps)

    def rejected(step: int, reason: str, violated: str | None = None) -> Validation:
        taken = trace.steps[step - 1] if 1 <= step <= steps else None
        return Validation(
            name=trace.name, accepted=False, steps=steps, first_rejected_step=step,
            action=None if taken is None else taken.action,
            params=None if taken is None else dict(taken.params),
            reason=reason, violated=violated, tlc_version=result.version,
            duration=result.duration, tlc=result)

    if result.violation_kind == "invariant" and result.violated == _ACCEPTED:
        return Validation(name=trace.name, accepted=True, steps=steps, first_rejected_step=None,
                          action=None, params=None, reason=None, violated=None,
                          tlc_version=result.version, duration=result.duration, tlc=result)
    if result.violation_kind == "invariant" and result.violated in SPEC_INVARIANTS:
        # The error trace ends in the state that breaks it: state n was reached by step n - 1.
        reached = _trace_length(result)
        return rejected(max(reached - 1, 0), f"state {reached} breaks the spec invariant "
                        f"{result.violated}", result.violated)
    if result.ok and result.depth is not None:
        # TLC reached states 1..depth and no further: step `depth` is the one it could not take.
        step = result.depth if result.distinct_states else 0
        return rejected(step, _explain(trace, step))
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

def _differences(recorded: Mapping[str, Any], model: Mapping[str, Any],
                 limit: int = 6) -> list[str]:
    out: list[str] = []
    for name in SPEC_VARIABLES:
        if name not in recorded:
            continue
        got, want = _spec_value(name, recorded[name]), model[name]
        if isinstance(got, Mapping) and isinstance(want, Mapping):
            for key in [*want, *(k for k in got if k not in want)]:
                if key not in got or key not in want or got[key] != want[key]:
                    out.append(f"{name}[{_show(key)}]: recorded {_show(got.get(key, '-'))}, "
                               f"model {_show(want.get(key, '-'))}")
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


def _explain(trace: Trace, step: int) -> str:
    """Why the model cannot take step ``step`` of ``trace`` (0: the initial state).

    The model replays the steps before it (TLC accepted them, so the model's state is the
    recorded one wherever that was recorded), then either refuses the action or reaches a
    state that differs from the recorded one.
    """
    try:
        ids = _tasks_of(trace)
        max_concurrency = _max_concurrency(trace)
        state: Snapshot = INITIAL
        if step == 0:
            diff = _differences(trace.initial, spec_state(INITIAL, ids))
            if not diff:
                return ("the initial state matches the model's Init, yet TLC rejects it: the "
                        "model and the spec disagree")
            return "the initial state is not the spec's Init: " + "; ".join(diff)
        for index, taken in enumerate(trace.steps[:step], start=1):
            action = ACTIONS[taken.action]
            args = action_args(action, taken.params, max_concurrency)
            if action.name == "Submit":
                args = (args[0], frozenset(args[1]))
            refusal = action.refusal(state, *args)
            if index < step:
                if refusal is not None:
                    return (f"the model refuses the earlier step {index} "
                            f"{describe(taken.action, taken.params)}: {refusal.reason}")
                state = action.step(state, *args)
                continue
            call = describe(taken.action, taken.params)
            if refusal is not None:
                return f"{call} is not enabled: {refusal.reason}"
            after = spec_state(action.step(state, *args), ids)
            diff = _differences(taken.state, after)
            if not diff:
                return (f"{call} reaches the recorded state in the model, yet TLC rejects it: "
                        "the model and the spec disagree")
            return (f"{call} is enabled, but the state it reaches is not the recorded one: "
                    + "; ".join(diff))
    except (SpecStateError, KeyError, TypeError, ValueError) as exc:
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
    if v.accepted:
        return f"{name}: accepted, {v.steps} steps are a behaviour of Spec {tail}"
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

