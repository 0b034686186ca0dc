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
    "Submit": ("t", "D", "p", "d"), "SubmitOptional": ("t", "D", "O", "p", "d"),
    "AddDeps": ("t", "D", "O"), "Start": (), "Claim": ("w", "k"), "Reclaim": ("w", "t"),
    "Heartbeat": ("w", "t", "g", "a"), "Complete": ("w", "t", "g", "a"),
    "Fail": ("w", "t", "g", "a"), "AcknowledgeCancel": ("w", "t", "g", "a"),
    "Expire": ("t",), "Cancel": ("t",), "Retry": ("t",), "Close": ("c",), "Tick": (),
}
# The steps that make a version with a priority and a delay.
_SUBMITS = ("Submit", "SubmitOptional")
# Named when recorded: the ids a claim took (a history recorded before they were has none).
_OPTIONAL: dict[str, tuple[str, ...]] = {"Claim": ("chosen",)}

# How each action is taken from the record e of its step.
_CALLS: dict[str, str] = {
    "Submit": "Submit(e.t, e.D, e.p, e.d)",
    "SubmitOptional": "SubmitOptional(e.t, e.D, e.O, e.p, e.d)",
    "AddDeps": "AddDeps(e.t, e.D, e.O)",
    "Start": "Start",
    # The ids the store took are the spec's: a claim out of the claim order is refused here.
    "Claim": "(\"chosen\" \\in DOMAIN e => Chosen(e.k) = e.chosen) /\\ Claim(e.w, e.k)",
    "Reclaim": "Reclaim(e.w, e.t)",
    "Heartbeat": "Heartbeat(e.w, e.t, e.g, e.a)",
    "Complete": "Complete(e.w, e.t, e.g, e.a)",
    "Fail": "Fail(e.w, e.t, e.g, e.a)",
    "AcknowledgeCancel": "AcknowledgeCancel(e.w, e.t, e.g, e.a)",
    "Expire": "Expire(e.t)",
    "Cancel": "Cancel(e.t)",
    "Retry": "Retry(e.t)",
    "Close": "Close(e.c)",
    # A tick nothing can notice is no spec step (docs/durable.md, Time); one something can
    # notice is taken (on a virtual clock the spec's clock keeps up with the store's).
    "Tick": "(Tick \\/ (Noticing = {} /\\ UNCHANGED vars))",
}

CLOCKS = ("wall", "virtual")


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
    for n, (action, params) in enumerate(history, start=1):
        names = _PARAMS[action]
        for name in (*names, *_OPTIONAL.get(action, ())):
            if name not in params:
                continue
            value = params[name]
            if name == "t":
                ok = isinstance(value, str) and value in tasks
            elif name == "w":
                ok = isinstance(value, str) and value in workers
            elif name in ("D", "O", "chosen"):
                ok = (isinstance(value, (list, tuple, set, frozenset))
                      and all(isinstance(d, str) and d in tasks for d in value))
            elif name == "c":
                ok = isinstance(value, bool)
            elif name == "p":
                ok = _is_int(value) and -TLC_INT_LIMIT < value < TLC_INT_LIMIT
            else:
                ok = _is_int(value) and 0 <= value < TLC_INT_LIMIT
            if not ok:
                raise HistoryError(f"step {n} {action}: {name}={value!r} is not in the instance")


def _entries(history: Sequence[Any]) -> list[tuple[str, Mapping[str, Any], float | None]]:
    """``history()``'s pairs or ``timed_history()``'s triples, each checked for its shape."""
    entries: list[tuple[str, Mapping[str, Any], float | None]] = []
    for n, entry in enumerate(history, start=1):
        if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
            raise HistoryError(f"step {n}: {entry!r} is not an (action, params) pair or an "
                               "(action, params, time) triple")
        action, params = entry[0], entry[1]
        at = entry[2] if len(entry) == 3 else None
        if action not in _PARAMS or not isinstance(params, Mapping):
            raise HistoryError(f"step {n}: {action!r} is not a recorded spec action")
        names, optional = set(_PARAMS[action]), set(_OPTIONAL.get(action, ()))
        if action == "Submit":
            optional |= {"p", "d"}  # a history recorded before due times names neither
            names -= {"p", "d"}
        if not names <= set(params) <= names | optional:
            raise HistoryError(f"step {n} {action}: parameters {sorted(params)}, "
                               f"expected {sorted(names)}"
                               + (f" (and may name {sorted(optional)})" if optional else ""))
        if at is not None and (isinstance(at, bool) or not isinstance(at, (int, float))):
            raise HistoryError(f"step {n} {action}: time {at!r} is not a number")
        entries.append((action, params, at))
    return entries


def _in_ticks(history: Sequence[Any], clock: str, aging: float | None
              ) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The history as the spec's steps, with each Submit's priority and delay in the spec's
    terms, and the spec's Aging.

    On a virtual clock the store's seconds are the spec's ticks: a delay, the aging and each
    tick's advance (from the times of ``timed_history()``; one tick per recorded Tick without
    them) must be whole. On the wall clock the spec's ticks are free (TLC places them), so only
    the order of priorities and whether a delay was given are kept: TLC then judges the order
    of steps and of claims, and ``check_history`` with the store's times how early a claim
    came (a wall-clock history's delay is one tick). With aging, a wall-clock history is
    judged only where the claim order is strict priority's: one priority, or a history shorter
    than the aging (``timed_history()``), where no version waited long enough to gain a
    level."""
    if clock not in CLOCKS:
        raise HistoryError(f"clock={clock!r}: one of {', '.join(CLOCKS)}")
    if aging is not None and (isinstance(aging, bool) or not isinstance(aging, (int, float))
                              or not aging > 0):
        raise HistoryError(f"aging={aging!r}: seconds > 0, or None for strict priority")
    entries = _entries(history)
    priorities = sorted({p.get("p", 0) for a, p, _ in entries if a in _SUBMITS
                         if _is_int(p.get("p", 0))} | {0})
    rank = {q: i - priorities.index(0) for i, q in enumerate(priorities)}
    steps: list[tuple[str, dict[str, Any]]] = []
    last: float | None = None
    for n, (action, params, at) in enumerate(entries, start=1):
        params = dict(params)
        if action in _SUBMITS:
            delay = params.get("d", 0)
            if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
                raise HistoryError(f"step {n} {action}: d={delay!r} is not a delay >= 0")
            params.setdefault("p", 0)
            if clock == "virtual":
                if delay != int(delay):
                    raise HistoryError(f"step {n} {action}: d={delay!r} is not a whole number "
                                       "of ticks (seconds of a virtual clock)")
                params["d"] = int(delay)
            else:
                params["d"] = 1 if delay > 0 else 0
                params["p"] = rank.get(params["p"], params["p"])
        if action == "Tick" and clock == "virtual" and at is not None and last is not None:
            advance = at - last
            if advance != int(advance) or advance < 1:
                raise HistoryError(f"step {n} Tick: the clock moved {advance!r}, not a whole "
                                   "number of ticks")
            steps.extend([(action, params)] * (int(advance) - 1))
        if at is not None:
            last = at
        steps.append((action, params))
    if aging is None:
        return steps, 0
    if clock == "virtual":
        if aging != int(aging):
            raise HistoryError(f"aging={aging!r}: a whole number of ticks on a virtual clock")
        return steps, int(aging)
    times = [at for _, _, at in entries if at is not None]
    if len(priorities) == 1 or (times and max(times) - min(times) < aging):
        # One priority, or no version waited long enough to gain a level: the store's claim
        # key p * aging - due orders by priority, then due, as strict priority does.
        return steps, 0
    raise HistoryError("a wall-clock history with several priorities"
                       f"{' that lasts longer than the aging' if times else ', without times'}"
                       ": TLC cannot place its ticks at the store's seconds; validate "
                       "timed_history(), or a virtual clock's, or judge it with check_history")


def _record(action: str, params: Mapping[str, Any]) -> str:
    fields = [f"action |-> {render(action)}"]
    for name in (*_PARAMS[action], *_OPTIONAL.get(action, ())):
        if name not in params:
            continue
        value = params[name]
        if name in ("D", "O", "chosen"):
            value = frozenset(value)
        fields.append(f"{name} |-> {render(value)}")
    return "[" + ", ".join(fields) + "]"


def history_module(history: Sequence[Any], *, max_concurrency: int, max_attempts: int,
                   tasks: Iterable[str], workers: Iterable[str], aging: float | None = None,
                   clock: str = "wall", lease_time: int = 1,
                   module_name: str = "DurableTraceCheck") -> tuple[str, str]:
    """The TLA+ module and TLC config that check ``history`` against the spec.

    ``history`` is ``history()`` or ``timed_history()``; ``tasks`` and ``workers`` are the
    instance's ids and worker names (every one the history names must be among them);
    ``aging`` is the store's (None: strict priority); ``clock`` the store's (``"wall"``: TLC
    places the ticks; ``"virtual"``: the recorded ticks are all there are, and every claim
    leased for ``lease_time`` ticks). Raises :class:`HistoryError` for an empty or malformed
    history.
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
                            ("max_attempts", max_attempts), ("lease_time", lease_time)):
        if not _is_int(number) or not 1 <= number < TLC_INT_LIMIT:
            raise HistoryError(f"{setting}={number!r}: an int >= 1")
    steps, spec_aging = _in_ticks(durable_steps(history), clock, aging)
    _check(steps, task_set, worker_set)
    priorities = {p["p"] for a, p in steps if a in _SUBMITS} | {0}
    delays = {p["d"] for a, p in steps if a in _SUBMITS} | {0}
    records = ",\n    ".join(_record(a, p) for a, p in steps)
    calls = "\n".join(f"    \\/ e.action = {render(name)} /\\ {call}"
                      for name, call in _CALLS.items())
    if clock == "wall":
        free_ticks = """
    \\/ /\\ Tick
       /\\ UNCHANGED i
\\* The next recorded step, or time passing on the store's clock (a wall clock records no Tick)."""
        bound = f"""
TickBound == now <= {2 + (max(priorities) - min(priorities)) * spec_aging} * (i + 1)
\\* An Expire needs at most two ticks past the step that set the deadline, a due time one, a
\\* version's lead at most (MaxPriority - MinPriority) * Aging: no more are tried.
"""
        constraint = "CONSTRAINT TickBound\n"
        spec_lease = _LEASE_TIME
    else:
        free_ticks = """
\\* The next recorded step: a virtual clock records every tick."""
        bound = constraint = ""
        spec_lease = lease_time
    module = f"""---- MODULE {module_name} ----
\\* Generated by refsched.verify.durable.validate: a recorded history of a durable store, as a
\\* trace of DurableScheduler. TraceAccepted is violated exactly when every step was taken.
EXTENDS DurableScheduler, Naturals, Sequences

VARIABLE i \\* how many steps of Trace were taken

TraceTasks == {render(task_set)}
TraceWorkers == {render(worker_set)}
TracePriorities == {render(frozenset(priorities))}
TraceDelays == {render(frozenset(delays))}
\\* Here, not in the config, whose values cannot be negative numbers.

Trace == <<
    {records}
>>

Step(e) ==
{calls}
\\* The spec action a recorded step names, with its parameters.

TraceInit == Init /\\ i = 0

TraceNext ==
    \\/ /\\ i < Len(Trace)
       /\\ Step(Trace[i + 1])
       /\\ i' = i + 1{free_ticks}

TraceSpec == TraceInit /\\ [][TraceNext]_<<vars, i>>
{bound}
{_ACCEPTED} == i < Len(Trace)
====
"""
    invariants = "\n".join(f"    {name}" for name in (_ACCEPTED, *DURABLE_INVARIANTS))
    config = f"""CONSTANTS
    Tasks <- TraceTasks
    Workers <- TraceWorkers
    MaxConcurrency = {max_concurrency}
    MaxAttempts = {max_attempts}
    LeaseTime = {spec_lease}
    LoseAnswers = FALSE
    Priorities <- TracePriorities
    Delays <- TraceDelays
    Aging = {spec_aging}
    NoTask = NoTask
    NoWorker = NoWorker
    \\* on: a recorded SubmitOptional or AddDeps is judged; a history without one takes neither
    OptionalEdges = TRUE
    AddDepsAllowed = TRUE

INIT TraceInit
NEXT TraceNext
{constraint}
INVARIANTS
{invariants}
"""
    return module, config


def _named(history: Sequence[Any], key: str) -> set[str]:
    return {e[1][key] for e in history if isinstance(e, (tuple, list)) and len(e) > 1
            and isinstance(e[1], Mapping) and isinstance(e[1].get(key), str)}


def validate_history(history: Sequence[Any], *, max_concurrency: int, max_attempts: int,
                     aging: float | None = None, clock: str = "wall", lease_time: int = 1,
                     tasks: Iterable[str] | None = None, workers: Iterable[str] | None = None,
                     timeout: float = 300, tlc_workers: int = 1) -> HistoryValidation:
    """Ask TLC whether ``history`` (``history()`` or ``timed_history()``) is a behaviour of
    the spec.

    ``max_concurrency``, ``max_attempts``, ``aging`` and ``clock`` are the store's
    (``DurableScheduler.aging``, ``.clock``); on a virtual clock every claim leased for
    ``lease_time`` seconds. ``tasks`` and ``workers`` default to the ids and names the history
    uses. Runs TLC (``tlc_workers`` threads, killed after ``timeout`` seconds:
    :class:`refsched.verify.tlc.TLCTimeoutError`) in a temporary folder beside copies of
    ``DurableScheduler.tla`` and ``Scheduler.tla``. Raises :class:`HistoryError` for an empty
    or malformed history, and :class:`refsched.verify.validate.TLCInternalError` when TLC gives
    no verdict.
    """
    history = durable_steps(history)
    if not history:
        _check([], frozenset(), frozenset())
    # (the deps of every step that names some: a dep never submitted is an id of the instance)
    task_set = set(tasks) if tasks is not None else _named(history, "t") | {
        d for e in history if isinstance(e, (tuple, list)) and len(e) > 1
        and e[0] in (*_SUBMITS, "AddDeps")
        and isinstance(e[1], Mapping) for d in e[1].get("D", ()) if isinstance(d, str)}
    worker_set = set(workers) if workers is not None else _named(history, "w") or {"w"}
    module_name = "DurableTraceCheck"
    module, config = history_module(history, max_concurrency=max_concurrency,
                                     max_attempts=max_attempts, tasks=task_set,
                                     workers=worker_set, aging=aging, clock=clock,
                                     lease_time=lease_time, module_name=module_name)
    with tempfile.TemporaryDirectory(prefix="refsched-durable-trace-") as tmp:
        folder = Path(tmp)
        for spec in ("DurableScheduler.tla", "Scheduler.tla"):
            shutil.copy(tlc.spec_dir() / spec, folder / spec)
        (folder / f"{module_name}.tla").write_text(module, encoding="ascii")
        (folder / f"{module_name}.cfg").write_text(config, encoding="ascii")
        result = tlc.run_tlc(f"{module_name}.cfg", f"{module_name}.tla", directory=folder,
                             extra_args=["-deadlock"], workers=tlc_workers, timeout=timeout)
    return _verdict(history, result, max_concurrency, max_attempts, aging)


def _verdict(history: list[Any], result: tlc.TLCResult, max_concurrency: int,
             max_attempts: int, aging: float | None) -> HistoryValidation:
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
                                 max_attempts=max_attempts, aging=aging).problems
        return verdict(False, None, problems[0] if problems else
                       "TLC could not take every step of the history")
    raise TLCInternalError("TLC gave no verdict on the module generated for the history "
                           f"(exit status {result.returncode}): "
                           + next((line for line in result.output.splitlines()
                                   if line.startswith("Error")), result.output[-500:]))
