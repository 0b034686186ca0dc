"""Trace validation of a durable store's recorded history: TLC decides whether it is a behaviour
of ``spec/DurableScheduler.tla``.

A store created with ``record=True`` appends every accepted spec step ``(action, params)`` to its
history in commit order (``DurableScheduler.history()``). :func:`history_module` writes a TLA+
module that extends ``DurableScheduler`` and holds the history as a constant sequence of
records, ``Trace``; TLC 2.15 has no trace post-condition, so the module walks it with a step
counter ``i``::

    TraceInit == Init /\\ i = 0
    TraceNext == \\/ i < Len(Trace) /\\ Step(Trace[i + 1]) /\\ i' = i + 1
                 \\/ Tick /\\ UNCHANGED i

and ``INVARIANT TraceAccepted`` (``i < Len(Trace)``) is violated exactly when TLC took every
step of the history. The free ``Tick`` steps stand for time passing on the store's clock: a run
on the wall clock records no Tick, and an ``Expire`` needs the spec's ``now`` past the lease's
deadline (``docs/durable.md``, Time: the spec's clock counts the ticks that matter). A recorded
``Tick`` (a virtual clock) is a step of the trace that the spec may take or, when no live lease
could notice it, stutter. Worker crashes and refused reports change nothing in the store and
are not recorded: a lease a worker lost simply stays in its ``held``. Nor is a lost answer: a
report or a claim whose answer never reached its worker is recorded as the step it is, and its
repeat, which changes nothing, is not recorded; so the history is walked with ``LoseAnswers``
FALSE, each step as the one its worker heard (``held`` is the worker's, never recorded).

Ids and worker names are any ``str``; they are written as TLA+ strings through
:func:`refsched.verify.tla.render` (a one-to-one ASCII form), and the spec's constants ``Tasks``
and ``Workers`` are the sets of them. The spec's invariants are checked along the way. The
steps of recurring schedules are left out (``history.durable_steps``): they are ``Schedule.tla``'s.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refsched.verify import tlc
from refsched.verify.durable.history import check_history, durable_steps
from refsched.verify.tla import render
from refsched.verify.validate import TLC_INT_LIMIT, TLCInternalError

__all__ = [
    "DURABLE_INVARIANTS",
    "HistoryError",
    "HistoryValidation",
    "history_module",
    "validate_history",
]

DURABLE_INVARIANTS: tuple[str, ...] = (
    "TypeOK", "IndegreeInvariant", "ConcurrencyBound", "BlockedHasCause", "BlockedPropagated",
    "SealedGraph", "AtMostOneEndPerVersion", "AtMostOneLiveLease", "AttemptsBounded",
    "LeaseFitsState", "NoLostVersion", "EndedAttemptFits", "NoFutureLease",
)
"""The spec's state invariants, checked in every state TLC reaches along the history.
(Not CallsTaken and ReportsTaken: they judge the spec's own steps, not a history.)"""

_ACCEPTED = "TraceAccepted"
_LEASE_TIME = 1  # only the order of deadlines and now is read: one tick per lease is enough

# The parameters each recorded action names, in the spec's order, and what kind each is.
_PARAMS: dict[str, tuple[str, ...]] = {
    "Submit": ("t", "D"), "Start": (), "Claim": ("w", "k"), "Reclaim": ("w", "t"),
    "Heartbeat": ("w", "t", "g", "a"), "Complete": ("w", "t", "g", "a"),
    "Fail": ("w", "t", "g", "a"), "AcknowledgeCancel": ("w", "t", "g", "a"),
    "Expire": ("t",), "Cancel": ("t",), "Retry": ("t",), "Close": ("c",), "Tick": (),
}

# How each action is taken from the record e of its step.
_CALLS: dict[str, str] = {
    # The recorded histories submit with neither a priority nor a delay.
    "Submit": "Submit(e.t, e.D, 0, 0)",
    "Start": "Start",
    "Claim": "Claim(e.w, e.k)",
    "Reclaim": "Reclaim(e.w, e.t)",
    "Heartbeat": "Heartbeat(e.w, e.t, e.g, e.a)",
    "Complete": "Complete(e.w, e.t, e.g, e.a)",
    "Fail": "Fail(e.w, e.t, e.g, e.a)",
    "AcknowledgeCancel": "AcknowledgeCancel(e.w, e.t, e.g, e.a)",
    "Expire": "Expire(e.t)",
    "Cancel": "Cancel(e.t)",
    "Retry": "Retry(e.t)",
    "Close": "Close(e.c)",
    # A tick no live lease can notice is no spec step (docs/durable.md, Time).
    "Tick": "(Tick \\/ UNCHANGED vars)",
}


class HistoryError(ValueError):
    """A history that cannot be stated as a trace of the spec (the message says why): a usage
    error, never a verdict."""


@dataclass(frozen=True)
class HistoryValidation:
    """TLC's verdict on one recorded history."""

    accepted: bool  # TLC took every step and no spec invariant broke
    steps: int  # the number of steps in the history
    violated: str | None  # a spec invariant that broke along the history
    reason: str | None  # why not, when rejected: the first problem the step-by-step
    # checker (refsched.verify.durable.history) names, or TLC's invariant
    distinct_states: int | None  # states TLC found (with the free ticks)
    duration: float  # seconds TLC ran
    tlc: tlc.TLCResult | None = field(default=None, repr=False, compare=False)  # all TLC said


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check(history: Sequence[tuple[str, Mapping[str, Any]]], tasks: frozenset[str],
           workers: frozenset[str]) -> None:
    if not history:
        raise HistoryError("the history is empty: there is nothing to validate (was the store "
                           "created with record=True?)")
    for n, entry in enumerate(history, start=1):
        try:
            action, params = entry
        except (TypeError, ValueError):
            raise HistoryError(f"step {n}: {entry!r} is not an (action, params) pair") from None
        if action not in _PARAMS or not isinstance(params, Mapping):
            raise HistoryError(f"step {n}: {action!r} is not a recorded spec action")
        names = _PARAMS[action]
        if set(params) != set(names):
            raise HistoryError(f"step {n} {action}: parameters {sorted(params)}, "
                               f"expected {list(names)}")
        for name in names:
            value = params[name]
            if name == "t":
                ok = isinstance(value, str) and value in tasks
            elif name == "w":
                ok = isinstance(value, str) and value in workers
            elif name == "D":
                ok = (isinstance(value, (list, tuple, set, frozenset))
                      and all(isinstance(d, str) and d in tasks for d in value))
            elif name == "c":
                ok = isinstance(value, bool)
            else:
                ok = _is_int(value) and 0 <= value < TLC_INT_LIMIT
            if not ok:
                raise HistoryError(f"step {n} {action}: {name}={value!r} is not in the instance")


def _record(action: str, params: Mapping[str, Any]) -> str:
    fields = [f"action |-> {render(action)}"]
    for name in _PARAMS[action]:
        value = params[name]
        if name == "D":
            value = frozenset(value)
        fields.append(f"{name} |-> {render(value)}")
    return "[" + ", ".join(fields) + "]"


def history_module(history: Sequence[tuple[str, Mapping[str, Any]]], *, max_concurrency: int,
                   max_attempts: int, tasks: Iterable[str], workers: Iterable[str],
                   module_name: str = "DurableTraceCheck") -> tuple[str, str]:
    """The TLA+ module and TLC config that check ``history`` against the spec.

    ``tasks`` and ``workers`` are the instance's ids and worker names (every one the history
    names must be among them). Raises :class:`HistoryError` for an empty or malformed history.
    """
    task_set = frozenset(tasks)
    worker_set = frozenset(workers)
    for what, values in (("task id", task_set), ("worker name", worker_set)):
        for name in values:
            if not isinstance(name, str) or not name:
                raise HistoryError(f"{what} {name!r}: a non-empty str")
    if not worker_set:
        raise HistoryError("no workers: the spec needs at least one")
    for setting, number in (("max_concurrency", max_concurrency),
                            ("max_attempts", max_attempts)):
        if not _is_int(number) or not 1 <= number < TLC_INT_LIMIT:
            raise HistoryError(f"{setting}={number!r}: an int >= 1")
    history = durable_steps(history)
    _check(history, task_set, worker_set)
    steps = ",\n    ".join(_record(a, p) for a, p in history)
    calls = "\n".join(f"    \\/ e.action = {render(name)} /\\ {call}"
                      for name, call in _CALLS.items())
    module = f"""---- MODULE {module_name} ----
\\* Generated by refsched.verify.durable.validate: a recorded history of a durable store, as a
\\* trace of DurableScheduler. TraceAccepted is violated exactly when every step was taken.
EXTENDS DurableScheduler, Naturals, Sequences

VARIABLE i \\* how many steps of Trace were taken

TraceTasks == {render(task_set)}
TraceWorkers == {render(worker_set)}

Trace == <<
    {steps}
>>

Step(e) ==
{calls}
\\* The spec action a recorded step names, with its parameters.

TraceInit == Init /\\ i = 0

TraceNext ==
    \\/ /\\ i < Len(Trace)
       /\\ Step(Trace[i + 1])
       /\\ i' = i + 1
    \\/ /\\ Tick
       /\\ UNCHANGED i
\\* The next recorded step, or time passing on the store's clock (a wall clock records no Tick).

TraceSpec == TraceInit /\\ [][TraceNext]_<<vars, i>>

TickBound == now <= 2 * i + 2
\\* An Expire needs at most two ticks past the step that set the deadline: no more are tried.

{_ACCEPTED} == i < Len(Trace)
====
"""
    invariants = "\n".join(f"    {name}" for name in (_ACCEPTED, *DURABLE_INVARIANTS))
    config = f"""CONSTANTS
    Tasks <- TraceTasks
    Workers <- TraceWorkers
    MaxConcurrency = {max_concurrency}
    MaxAttempts = {max_attempts}
    LeaseTime = {_LEASE_TIME}
    LoseAnswers = FALSE
    Priorities = {{0}}
    Delays = {{0}}
    Aging = 0
    NoTask = NoTask
    NoWorker = NoWorker

INIT TraceInit
NEXT TraceNext
CONSTRAINT TickBound

INVARIANTS
{invariants}
"""
    return module, config


def _named(history: Sequence[tuple[str, Mapping[str, Any]]], key: str) -> set[str]:
    return {p[key] for _, p in history if isinstance(p, Mapping) and isinstance(p.get(key), str)}


def validate_history(history: Sequence[tuple[str, Mapping[str, Any]]], *,
                     max_concurrency: int, max_attempts: int,
                     tasks: Iterable[str] | None = None, workers: Iterable[str] | None = None,
                     timeout: float = 300, tlc_workers: int = 1) -> HistoryValidation:
    """Ask TLC whether ``history`` (``DurableScheduler.history()``) is a behaviour of the spec.

    ``max_concurrency`` and ``max_attempts`` are the store's; ``tasks`` and ``workers``
    default to the ids and names the history uses. Runs TLC (``tlc_workers`` threads, killed
    after ``timeout`` seconds: :class:`refsched.verify.tlc.TLCTimeoutError`) in a temporary
    folder beside copies of ``DurableScheduler.tla`` and ``Scheduler.tla``. Raises
    :class:`HistoryError` for an empty or malformed history, and
    :class:`refsched.verify.validate.TLCInternalError` when TLC gives no verdict.
    """
    history = durable_steps(history)
    if not history:
        _check(history, frozenset(), frozenset())
    task_set = set(tasks) if tasks is not None else _named(history, "t") | {
        d for a, p in history if a == "Submit" and isinstance(p, Mapping)
        for d in p.get("D", ()) if isinstance(d, str)}
    worker_set = set(workers) if workers is not None else _named(history, "w") or {"w"}
    module_name = "DurableTraceCheck"
    module, config = history_module(history, max_concurrency=max_concurrency,
                                     max_attempts=max_attempts, tasks=task_set,
                                     workers=worker_set, module_name=module_name)
    with tempfile.TemporaryDirectory(prefix="refsched-durable-trace-") as tmp:
        folder = Path(tmp)
        for spec in ("DurableScheduler.tla", "Scheduler.tla"):
            shutil.copy(tlc.spec_dir() / spec, folder / spec)
        (folder / f"{module_name}.tla").write_text(module, encoding="ascii")
        (folder / f"{module_name}.cfg").write_text(config, encoding="ascii")
        result = tlc.run_tlc(f"{module_name}.cfg", f"{module_name}.tla", directory=folder,
                             extra_args=["-deadlock"], workers=tlc_workers, timeout=timeout)
    return _verdict(history, result, max_concurrency, max_attempts)


def _verdict(history: list[tuple[str, Mapping[str, Any]]], result: tlc.TLCResult,
             max_concurrency: int, max_attempts: int) -> HistoryValidation:
    def verdict(accepted: bool, violated: str | None, reason: str | None) -> HistoryValidation:
        return HistoryValidation(accepted, len(history), violated, reason,
                                 result.distinct_states, result.duration, result)

    if result.violation_kind == "invariant" and result.violated == _ACCEPTED:
        return verdict(True, None, None)
    if result.violation_kind == "invariant" and result.violated in DURABLE_INVARIANTS:
        return verdict(False, result.violated,
                       f"a state along the history breaks the spec invariant {result.violated}")
    if result.ok:
        problems = check_history(history, max_concurrency=max_concurrency,
                                 max_attempts=max_attempts).problems
        return verdict(False, None, problems[0] if problems else
                       "TLC could not take every step of the history")
    raise TLCInternalError("TLC gave no verdict on the module generated for the history "
                           f"(exit status {result.returncode}): "
                           + next((line for line in result.output.splitlines()
                                   if line.startswith("Error")), result.output[-500:]))
