"""Replay of spec traces against the reference model and an implementation of the system's API.

A trace (:mod:`refsched.verify.itf`) is a behaviour of a spec (``spec/Scheduler.tla`` by
default; any :mod:`refsched.verify.system`): an initial state and steps, each naming the action
taken, its parameters and the state it led to. Replaying it drives a fresh implementation
through the same actions, one API call per step (for the TaskScheduler :func:`apply_step`),
checks each call's answer against what the step implies, and after every step compares three
states: the trace's, the reference model's (``refsched.model.dag.actions``) and the
implementation's ``snapshot()``; then every counter of the implementation's ``stats()`` with
what the trace's steps so far count (``refsched.model.dag.counters`` and its timer and pool
twins: :func:`counter_rows`). The first disagreement in a trace is a :class:`Divergence`:

* ``side == "model"``: the trace and the model disagree (the trace is malformed, takes a step
  the model does not enable, or records a state the model does not reach): the corpus or the
  model is wrong, and the implementation is not consulted for that step;
* ``side == "implementation"``: the implementation answered the call differently, raised, did
  not raise, reached another state, broke one of its own invariants (``check_invariants()``),
  or counted the steps differently (``stats()``).

Entry points::

    report = replay(read_traces("traces/scheduler-cover.jsonl.gz"))  # against TaskScheduler
    report = replay(traces, ReferenceScheduler, stop_at_first=False)
    report = replay(read_traces("traces/timer-cover.jsonl.gz"), system=system.get("timer"))
    print(format_report(report))                                      # divergences included

The model is pure, so each distinct edge (source state, action, parameters, target state) is
checked against it once per replay; the implementation is driven through every step of every
trace, since its state is built call by call.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from refsched.errors import StaleGenerationError
from refsched.model.dag import counters as scheduler_counters
from refsched.model.dag.actions import ACTIONS, WAITING, ready_order
from refsched.model.dag.graph import describe
from refsched.model.durable import counters as durable_counters
from refsched.model.pool import counters as pool_counters
from refsched.model.timer import counters as timer_counters
from refsched.pool.pool import PoolStats
from refsched.profile import FULL, Profile
from refsched.types import Snapshot, TaskState, VersionView
from refsched.verify import system as systems
from refsched.verify.itf import Trace
from refsched.verify.specstate import task_id
from refsched.verify.system import Fatal

__all__ = [
    "ApiCall",
    "Coverage",
    "Divergence",
    "ReplayReport",
    "StepMismatch",
    "apply_step",
    "counter_rows",
    "format_divergence",
    "format_report",
    "format_rows",
    "replay",
    "side_by_side",
    "snapshot_rows",
    "spec_params",
    "step_call",
    "summary",
]

Side = Literal["model", "implementation"]


class StepMismatch(AssertionError):
    """The scheduler's answer to a spec step is not the one the step implies.

    ``step`` is the action instance (``Fail(t=a, g=1)``), ``call`` the API call made for it,
    ``expected`` and ``actual`` describe the answers.
    """

    def __init__(self, step: str, call: str, expected: str, actual: str) -> None:
        super().__init__(f"{step}: {call} {actual}, expected {expected}")
        self.step = step
        self.call = call
        self.expected = expected
        self.actual = actual


# -- One step through the API -----------------------------------------------------------------

def spec_params(action: str, params: Mapping[str, Any], before: Snapshot) -> dict[str, Any]:
    """The parameters of ``action`` as the model and the API take them.

    Raises ``ValueError`` when one is missing.
    """
    out: dict[str, Any] = {}
    for name in ACTIONS[action].params:
        if name in params:
            value = params[name]
            if name == "t":
                value = task_id(value)
            elif name in ("D", "O"):
                value = frozenset(task_id(d) for d in value)
            out[name] = value
        else:
            raise ValueError(f"{action} needs the parameter {name!r}; the step gives "
                             f"{sorted(params)}")
    return out


def _version(name: str, p: Mapping[str, Any], before: Snapshot) -> VersionView:
    view = before.tasks.get(p["t"])
    if view is None:
        raise ValueError(f"{describe(name, p)}: {p['t']!r} has no version before the step")
    return view


_Plan = tuple[str, tuple[Any, ...], dict[str, Any], Any]  # method, args, kwargs, answer


def _plan(name: str, p: Mapping[str, Any], before: Snapshot, profile: Profile = FULL) -> _Plan:
    """The API call that takes the step, and the answer it must give, as ``_answer`` shows it.

    Under a profile without ``limit`` a Claim is ``ready()``, which claims every ready version:
    a Claim of fewer cannot be taken that way (``ValueError``).
    """
    if name == "Submit":
        t = p["t"]
        view = before.tasks.get(t)
        # A sorted tuple: the same call, in the same order, whatever the hash seed.
        deps = tuple(sorted(p["D"], key=repr))
        return "submit", (t, deps), {}, 1 if view is None else view.generation + 1
    if name == "SubmitOptional":
        t = p["t"]
        view = before.tasks.get(t)
        optional = tuple(sorted(p["O"], key=repr))
        required = tuple(sorted(p["D"] - p["O"], key=repr))
        return ("submit", (t, required), {"optional": optional},
                1 if view is None else view.generation + 1)
    if name == "AddDeps":
        optional = tuple(sorted(p["O"], key=repr))
        required = tuple(sorted(p["D"] - p["O"], key=repr))
        dead_required = any(before.tasks[d].state.is_dead for d in required
                            if d in before.tasks)
        return ("add_deps", (p["t"], required), {"optional": optional},
                TaskState.BLOCKED if dead_required else TaskState.PENDING)
    if name == "Start":
        return "start", (), {}, None
    if name == "Claim":
        k = p["k"]
        order = ready_order(before.tasks)
        if not profile.limit and len(order) != k:
            raise ValueError(f"Claim(k={k}): {len(order)} versions are ready, and without a "
                             "limit ready() claims them all")
        order = order[:k]
        if len(order) != k:
            raise ValueError(f"Claim(k={k}): only {len(order)} ready versions before the step")
        kwargs = {"limit": k} if profile.limit else {}
        return "ready", (), kwargs, [(t, before.tasks[t].generation) for t in order]
    if name == "Complete":
        return "complete", (p["t"], p["g"]), {}, TaskState.SUCCEEDED
    if name == "Fail":
        return "fail", (p["t"], p["g"]), {}, TaskState.FAILED
    if name == "AcknowledgeCancel":
        return "acknowledge_cancel", (p["t"], p["g"]), {}, TaskState.CANCELLED
    if name == "Cancel":
        state = _version(name, p, before).state
        return "cancel", (p["t"],), {}, TaskState.CANCELLED if state in WAITING else state
    if name == "Retry":
        return "retry", (p["t"],), {}, _version(name, p, before).generation + 1
    if name == "Close":
        cancel_pending = bool(p["cancelPending"])
        return "close", (), {"cancel_pending": cancel_pending}, {
            t: TaskState.CANCELLED if cancel_pending and v.state in WAITING else v.state
            for t, v in before.tasks.items()}
    if name == "StaleCallback":  # the answer is the error's (generation, current)
        return "complete", (p["t"], p["g"]), {}, (p["g"], _version(name, p, before).generation)
    view = _version(name, p, before)  # RepeatedCallback
    return "complete", (p["t"], view.generation), {}, view.state


def _answer(name: str, result: Any, profile: Profile = FULL) -> Any:
    """The part of an API answer the step fixes, comparable with ``_plan``'s answer."""
    if name == "Claim":
        claims = [(c.task_id, c.generation) for c in result]
        # "any": the profile leaves the order of one batch of claims to the implementation
        return claims if profile.ready_order == "seq" else sorted(claims, key=repr)
    if name == "Close":
        # The contract names the list each id is in, not the order within a list.
        by_id: dict[Hashable, TaskState] = {}
        for state, ids in result.by_state().items():
            for t in ids:
                if t in by_id:
                    return None  # listed twice: no answer of the step
                by_id[t] = state
        return by_id
    return result


def _show_answer(name: str, answer: Any) -> str:
    if name == "StaleCallback":
        return f"StaleGenerationError naming generation {answer[0]}, current {answer[1]}"
    if name == "Close":
        return "{" + ", ".join(f"{t}: {s.value}"
                               for t, s in sorted(answer.items(), key=repr)) + "}"
    if name == "Start":
        return "no error"
    return repr(answer)


def _show_call(plan: _Plan) -> str:
    method, args, kwargs, _ = plan
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{method}({', '.join(shown)})"


def _mismatch(name: str, p: Mapping[str, Any], plan: _Plan, actual: str) -> StepMismatch:
    return StepMismatch(describe(name, p), _show_call(plan), _show_answer(name, plan[3]), actual)


class ApiCall(NamedTuple):
    """The API call that takes a spec step, and the answer it must give, shown as text."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    answer: str


def step_call(action: str, params: Mapping[str, Any], before: Snapshot, *,
              profile: Profile = FULL) -> ApiCall:
    """The call :func:`apply_step` makes for the step ``action(params)`` from ``before``.

    ``ApiCall("ready", (), {"limit": 1}, "[('a', 1)]")``. Errors: as :func:`apply_step`'s
    ``ValueError``.
    """
    if action not in ACTIONS:
        raise ValueError(f"{action!r} is not an action of the spec")
    p = spec_params(action, params, before)
    method, args, kwargs, answer = _plan(action, p, before, profile)
    return ApiCall(method, args, kwargs, _show_answer(action, answer))


_MALFORMED = object()  # an answer of the wrong shape (not claims, not a close report)


def raised(error: Exception, stale: Any, word: str) -> str | None:
    """What a call that raised ``error`` answered, as a divergence shows it; None when the
    step is a stale callback (``stale``: the (version named, current) its error must give)
    and ``error`` is that ``StaleGenerationError``. ``word``: what the system calls a version."""
    if stale is not None and isinstance(error, StaleGenerationError):
        if (error.generation, error.current) == stale:
            return None
        return (f"raised StaleGenerationError naming {word} {error.generation}, "
                f"current {error.current}")
    return f"raised {type(error).__name__}: {error}"


def apply_normalised(scheduler: Any, name: str, p: Mapping[str, Any], before: Snapshot,
                     profile: Profile = FULL, fatal: Fatal = ()) -> None:
    """apply_step for a spec action name and normalised parameters (:func:`spec_params`)."""
    plan = _plan(name, p, before, profile)
    method, args, kwargs, answer = plan
    if name == "Claim" and profile.ready_order != "seq":
        answer = sorted(answer, key=repr)  # as _answer gives claims under this profile
        plan = (method, args, kwargs, answer)
    try:
        result = getattr(scheduler, method)(*args, **kwargs)
    except fatal:
        raise
    except Exception as error:
        if name == "StaleCallback" and not profile.error_types:
            return  # refused: all this profile compares
        actual = raised(error, answer if name == "StaleCallback" else None, "generation")
        if actual is None:
            return
        raise _mismatch(name, p, plan, actual) from error
    if name == "Start":
        return
    shown = repr(result)
    if name != "StaleCallback":
        try:
            got = _answer(name, result, profile)
        except (AttributeError, TypeError):
            got = _MALFORMED
        if got == answer:
            return
        if got is not _MALFORMED and got is not None:  # shown as the expected answer is
            shown = _show_answer(name, got)
    raise _mismatch(name, p, plan, f"returned {shown}")


def apply_step(scheduler: Any, action: str, params: Mapping[str, Any], *,
               before: Snapshot | None = None, profile: Profile = FULL,
               fatal: Fatal = ()) -> None:
    """Take the spec step ``action(params)`` through the public API of ``scheduler``.

    ``scheduler`` is anything with the TaskScheduler API (``TaskScheduler``,
    ``ReferenceScheduler``, ...). ``before`` is the state the step starts from, by default
    ``scheduler.snapshot()``; the step must be enabled in it. The calls, and the answers each
    must give:

    ==========================  ===================================================================
    Submit(t, D)                ``submit(t, D)`` returns the next generation of ``t``
    SubmitOptional(t, D, O)     ``submit(t, D - O, optional=O)`` returns the next generation
    AddDeps(t, D, O)            ``add_deps(t, D - O, optional=O)`` returns blocked when a dep of
                                ``D - O`` is dead, else pending
    Start                       ``start()`` returns
    Claim(k)                    ``ready(limit=k)`` returns exactly the ``k`` ready versions with
                                the smallest seq, in seq order, with their generations
    Complete / Fail /           ``complete`` / ``fail`` / ``acknowledge_cancel(t, g)`` returns
    AcknowledgeCancel(t, g)     succeeded / failed / cancelled
    Cancel(t)                   ``cancel(t)`` returns cancelled (waiting) or running (a request)
    Retry(t)                    ``retry(t)`` returns the next generation of ``t``
    Close(cancelPending)        ``close(cancel_pending=...)`` reports every id under its new state
    StaleCallback(t, g)         ``complete(t, g)`` raises ``StaleGenerationError`` naming ``g`` and
                                the current generation
    RepeatedCallback(t)         ``complete(t, current generation)`` returns the terminal state
    ==========================  ===================================================================

    ``profile`` (default: the full contract) changes two of these: without ``limit`` a Claim
    is ``ready()``, which must claim every ready version; with ``ready_order`` "any" the
    claims are compared as a set.

    Errors: another answer, or any exception from the call -> :class:`StepMismatch` (the
    exception as its cause), except one of the ``fatal`` types, which propagates as it is; an
    action that is not the spec's, a missing parameter or a step not enabled in ``before`` (an
    id with no version, too few ready versions) or that the profile cannot take ->
    ``ValueError``. The resulting state is not checked here: compare ``scheduler.snapshot()``
    with the step's target.
    """
    name = action
    if name not in ACTIONS:
        raise ValueError(f"{action!r} is not an action of the spec")
    if before is None:
        before = scheduler.snapshot()
    apply_normalised(scheduler, name, spec_params(name, params, before), before, profile, fatal)


# -- Records ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Divergence:
    """The first step of a trace on which the trace and one side disagree."""

    trace: str  # the trace's name
    step: int  # 1 for the trace's first step (the ITF state index it leads to); 0: its start
    action: str  # the spec action ("init" for the initial state)
    params: Mapping[str, Any]
    side: Side  # "model": trace vs model; "implementation": trace vs implementation
    reason: str  # what disagreed, in a sentence
    source: Snapshot | None  # the state the step starts from (None at step 0)
    expected: Snapshot | None  # the trace's state after the step (None: not a spec state)
    actual: Snapshot | None  # the side's state after the step (None: it has none)
    diff: str  # the differing fields side by side ("" when the states are equal)
    # the implementation's answer when it is not the one the step implies ("" otherwise)
    answer: str = ""
    system: str = "scheduler"  # the name of the system the trace is a behaviour of


@dataclass
class Coverage:
    """What a replay exercised of one action."""

    steps: int = 0  # steps of the action replayed without divergence
    edges: int = 0  # distinct edges among them


@dataclass
class ReplayReport:
    """The outcome of :func:`replay`."""

    traces: int = 0  # traces replayed (to their end or to a divergence)
    steps: int = 0  # steps replayed without divergence
    edges: int = 0  # distinct (source, action, parameters, target) among those steps
    coverage: dict[str, Coverage] = field(
        default_factory=lambda: {name: Coverage() for name in ACTIONS})
    seconds: float = 0.0
    divergences: list[Divergence] = field(default_factory=list)  # at most one per trace

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        """No divergence."""
        return not self.divergences


# -- Side-by-side differences -----------------------------------------------------------------

_FIELDS = ("generation", "state", "deps", "remaining_deps", "blocked_by", "cancel_requested",
           "claims", "seq")
# An id the snapshot lacks holds the spec's values for an id never submitted.
_ABSENT_ROW: tuple[Any, ...] = (0, "absent", frozenset(), 0, None, False, 0, 0)


def _show(value: Any) -> str:
    if isinstance(value, TaskState):
        return value.value
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(map(str, value))) + "}"
    return str(value)


def _row(view: VersionView | None) -> tuple[Any, ...]:
    if view is None:
        return _ABSENT_ROW
    return tuple(getattr(view, name) for name in _FIELDS)


Row = tuple[str, ...]  # the cells of one line of a differences table


def snapshot_rows(expected: Snapshot, actual: Snapshot) -> list[Row]:
    """One row per differing field: id ("" for the scheduler's own), field, the two values."""
    rows: list[Row] = []
    for name in ("started", "closed", "next_seq"):
        a, b = getattr(expected, name), getattr(actual, name)
        if a != b:
            rows.append(("", name, _show(a), _show(b)))
    for t in sorted(set(expected.tasks) | set(actual.tasks), key=repr):
        mine, theirs = _row(expected.tasks.get(t)), _row(actual.tasks.get(t))
        for name, a, b in zip(_FIELDS, mine, theirs, strict=True):
            if a != b:
                rows.append((str(t), name, _show(a), _show(b)))
    return rows


def format_rows(header: Row, rows: Iterable[Row]) -> str:
    """The rows as an indented table under ``header``, columns aligned; ``""`` without rows."""
    table = [header, *rows]
    if len(table) == 1:
        return ""
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    return "\n".join(
        ("  " + "".join(f"{cell:<{w}}  " for cell, w in zip(r, widths, strict=False))
         + r[-1]).rstrip()
        for r in table)


def side_by_side(expected: Snapshot, actual: Snapshot, side: str, *,
                 reference: str = "trace") -> str:
    """One line per differing field: id, field, ``reference``'s value, ``side``'s value.

    ``""`` when the two are equal.
    """
    return format_rows(("id", "field", reference, side), snapshot_rows(expected, actual))


# Replay compares stats() after every step, so the common case (they agree) is made cheap:
# the fields to read, per set of counters expected, and the duration summaries, per stats type.
_READERS: dict[tuple[str, ...], Callable[[Any], Any]] = {}
_SUMMARIES: dict[type, tuple[str, ...]] = {}


def _counters_hold(expected: Mapping[str, Any], stats: Any) -> bool:
    """Whether :func:`counter_rows` finds nothing to report (quickly, when it does not)."""
    names = tuple(expected)
    read = _READERS.get(names)
    if read is None:
        getter = operator.attrgetter(*names)
        read = _READERS[names] = getter if len(names) > 1 else lambda x: (getter(x),)
    summaries = _SUMMARIES.get(type(stats))
    if summaries is None:
        summaries = _SUMMARIES[type(stats)] = tuple(
            name for name in getattr(stats, "__dataclass_fields__", ())
            if all(hasattr(getattr(stats, name), part) for part in ("count", "total", "max")))
    try:
        if read(stats) != tuple(expected.values()):
            return False
        return all(0 <= s.max <= s.total for s in map(stats.__getattribute__, summaries))
    except (AttributeError, TypeError):
        return False


def counter_rows(expected: Mapping[str, Any], stats: Any) -> list[tuple[str, str, str]]:
    """One row per counter of ``stats`` (an implementation's ``stats()``) that is not what
    ``expected`` says: the counter (``stats().claimed``), the expected value, the actual one.

    ``expected`` maps a field, or a field of a field (``ready_wait.count``), to its value. A
    duration summary (a field with ``count``, ``total`` and ``max``), whose durations no model
    fixes, must still hold ``0 <= max <= total``.
    """
    if _counters_hold(expected, stats):
        return []
    rows: list[tuple[str, str, str]] = []
    for name, value in expected.items():
        try:
            actual = operator.attrgetter(name)(stats)
        except AttributeError:
            rows.append((f"stats().{name}", repr(value), "missing"))
            continue
        if actual != value:
            rows.append((f"stats().{name}", repr(value), repr(actual)))
    for name in getattr(stats, "__dataclass_fields__", ()):
        summary = getattr(stats, name)
        if not all(hasattr(summary, part) for part in ("count", "total", "max")):
            continue
        total, longest = summary.total, summary.max
        if not total >= 0:
            rows.append((f"stats().{name}.total", ">= 0", repr(total)))
        if not 0 <= longest <= max(total, 0):
            rows.append((f"stats().{name}.max", f"between 0 and the total {total!r}",
                         repr(longest)))
    return rows


def summary(s: Snapshot) -> str:
    """A state on a few lines: the scheduler flags, then one line per id."""
    lines = [f"  started={s.started} closed={s.closed} next_seq={s.next_seq}"]
    for t in sorted(s.tasks, key=repr):
        v = s.tasks[t]
        extra = "".join([
            f" blocked_by={v.blocked_by}" if v.blocked_by is not None else "",
            " cancel_requested" if v.cancel_requested else "",
        ])
        lines.append(f"  {t}: generation {v.generation} {v.state.value} deps={_show(v.deps)} "
                     f"remaining={v.remaining_deps} claims={v.claims} seq={v.seq}{extra}")
    return "\n".join(lines)


def format_divergence(d: Divergence) -> str:
    """The divergence for people: where, which step, what disagreed, the differing fields."""
    system = systems.get(d.system)
    who = "the model" if d.side == "model" else "the implementation"
    lines = [f"trace {d.trace}, step {d.step}: {system.describe(d.action, d.params)}",
             f"{who} diverges from the trace: {d.reason}"]
    if d.source is not None:
        lines += ["state before the step:", system.summary(d.source)]
    if d.diff:
        lines += ["differing fields after the step:", d.diff]
    return "\n".join(lines)


def format_report(r: ReplayReport) -> str:
    """The report for people: totals, speed, the ledger per action, then each divergence."""
    lines = [f"replayed {r.traces:,} traces, {r.steps:,} steps, {r.edges:,} distinct edges in "
             f"{r.seconds:.2f}s ({r.steps_per_second:,.0f} steps/s)"]
    width = max(len(name) for name in r.coverage)
    lines.append(f"  {'action':<{width}}  {'steps':>9}  {'edges':>9}")
    for name, c in r.coverage.items():
        never = "  never replayed" if not c.steps else ""
        lines.append(f"  {name:<{width}}  {c.steps:>9,}  {c.edges:>9,}{never}")
    if r.ok:
        lines.append("no divergence")
    else:
        lines.append(f"{len(r.divergences)} diverging trace(s):")
        lines += [format_divergence(d) for d in r.divergences]
    return "\n".join(lines)


# -- Counters ---------------------------------------------------------------------------------

class _Tally:
    """How a TaskScheduler's ``stats()`` is held against the counts of the steps of one trace
    (:mod:`refsched.model.dag.counters`); the other systems' tallies below differ where their
    counts do."""

    header: Row = ("id", "field")  # the first columns of the system's differences table

    def __init__(self, constants: Mapping[str, Any]) -> None:
        self.constants = constants
        self.zero: Any = scheduler_counters.Counts()  # the counts at Init

    def step(self, counts: Any, action: str, args: tuple[Any, ...], before: Any,
             after: Any) -> Any:
        """The counts after the step (``args``: the model action's arguments)."""
        return counts.step(action, args, before, after)

    def expected(self, counts: Any, state: Any) -> Mapping[str, Any]:
        """What ``stats()`` must show once the counted steps reached ``state``."""
        shown: Mapping[str, Any] = counts.expected()
        return shown

    def stats(self, implementation: Any) -> Callable[[], Any] | None:
        """The implementation's ``stats``, or None when it has none (nothing to compare)."""
        return getattr(implementation, "stats", None)


class _TimerTally(_Tally):
    """A TimerScheduler's (:mod:`refsched.model.timer.counters`), driven on a fake clock."""

    def __init__(self, constants: Mapping[str, Any]) -> None:
        super().__init__(constants)
        self.zero = timer_counters.Counts()

    def step(self, counts: Any, action: str, args: tuple[Any, ...], before: Any,
             after: Any) -> Any:
        return counts.step(action, args, before, after,
                           rebuild_floor=self.constants["RebuildFloor"])

    def expected(self, counts: Any, state: Any) -> Mapping[str, Any]:
        shown: Mapping[str, Any] = counts.expected(state)
        return shown

    def stats(self, implementation: Any) -> Callable[[], Any] | None:
        return getattr(getattr(implementation, "timers", None), "stats", None)


class _PoolTally(_Tally):
    """A WorkStealingPool's (:mod:`refsched.model.pool.counters`), its workers' moves taken
    step by step: no worker thread ever parks."""

    header = ("field",)

    def __init__(self, constants: Mapping[str, Any]) -> None:
        super().__init__(constants)
        self.spares = tuple(constants.get("Spares") or ())  # managed blocking on: its counts
        self.zero = pool_counters.BlockingCounts() if self.spares else pool_counters.Counts()
        self.remote = False  # a pool over the protocol: its stats() leave some counters out

    def stats(self, implementation: Any) -> Callable[[], Any] | None:
        self.remote = bool(getattr(implementation, "drives_steps", False))
        return super().stats(implementation)

    def expected(self, counts: Any, state: Any) -> Mapping[str, Any]:
        workers = self.constants["Workers"]
        shown = (counts.expected(state, workers, self.spares) if self.spares
                 else counts.expected(state, workers))
        if self.remote:  # managed blocking's counters stay off the wire (PoolStats)
            shown = {name: value for name, value in shown.items() if name not in _OFF_WIRE}
        return {**shown, "parked": 0}


# The PoolStats fields the conformance protocol does not carry.
_OFF_WIRE: Final = frozenset(f.name for f in dataclasses.fields(PoolStats)
                             if f.metadata.get("wire") is False)


class _DurableTally(_Tally):
    """A DurableScheduler's store-wide counters (:mod:`refsched.model.durable.counters`); the
    refused and repeated reports one object answered depend on the calls the harness makes."""

    header = ("field",)

    def __init__(self, constants: Mapping[str, Any]) -> None:
        super().__init__(constants)
        self.zero = durable_counters.Counts()

    def expected(self, counts: Any, state: Any) -> Mapping[str, Any]:
        return {**counts.expected(state), "cycles_reported": 0}

    def stats(self, implementation: Any) -> Callable[[], Any] | None:
        return getattr(getattr(implementation, "store", None), "stats", None)


_TALLIES: dict[str, type[_Tally]] = {"scheduler": _Tally, "timer": _TimerTally,
                                     "pool": _PoolTally, "durable": _DurableTally}


# -- Replay -----------------------------------------------------------------------------------

class _Diverged(Exception):
    """Ends the replay of one trace; carries its divergence."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.reason)
        self.divergence = divergence


EdgeKey = tuple[int, str, frozenset[tuple[str, Any]], int]


class _Replayer:
    """The state shared by the traces of one replay: state and edge caches, the ledger."""

    def __init__(self, system: systems.System, factory: Callable[..., Any],
                 report: ReplayReport, profile: Profile = FULL, fatal: Fatal = (),
                 checks_each_step: bool = True) -> None:
        self.system = system
        # False: check_invariants() and stats() are compared after a trace's last step only
        self.checks_each_step = checks_each_step
        self.factory = factory
        self.report = report
        self.profile = profile
        self.fatal = fatal
        required = operator.itemgetter(
            *(v for v in system.variables if v not in system.optional_variables))
        optional = system.optional_variables
        self.values_of: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            (lambda values: (*required(values), *(values.get(v) for v in optional)))
            if optional else required)
        # a trace state's values (in the spec's variable order) -> (state number, model state):
        # corpus traces share most of their states, and converting one costs more than
        # hashing it
        self.by_values: dict[tuple[Any, ...], tuple[int, Hashable]] = {}
        # each distinct model state -> its state number: the ids edges are made of
        self.numbers: dict[Hashable, int] = {}
        self.edges: set[EdgeKey] = set()
        # (constants, edge) the model was found to take; the model is pure, so once is enough
        self.model_checked: set[tuple[str, EdgeKey]] = set()
        # (constants, edge) -> the counts the step adds; the same for every trace that takes it
        self.counted: dict[tuple[str, EdgeKey], Any] = {}

    def state(self, values: Mapping[str, Any]) -> tuple[int, Any]:
        """The number and model state of a trace state.

        Raises ``ValueError`` (``SpecStateError`` is one) or ``TypeError`` if it is malformed.
        """
        snapshot_of = self.system.snapshot_of
        try:
            key = self.values_of(values)
            known = self.by_values.get(key)
        except (KeyError, TypeError, AttributeError):  # not a state, or an unhashable value:
            # let snapshot_of say
            try:
                snapshot = snapshot_of(values)
            except KeyError as missing:
                raise ValueError(f"no variable {missing}") from None
            return self.numbers.setdefault(snapshot, len(self.numbers)), snapshot
        if known is None:
            snapshot = snapshot_of(values)
            known = self.by_values[key] = (
                self.numbers.setdefault(snapshot, len(self.numbers)), snapshot)
        return known

    def run(self, trace: Trace) -> Divergence | None:
        try:
            self._run(trace)
        except _Diverged as stop:
            return stop.divergence
        return None

    def _run(self, trace: Trace) -> None:
        name = trace.name
        system = self.system

        def diverge(step: int, action: str, params: Mapping[str, Any], side: Side, reason: str,
                    source: Any, expected: Any, actual: Any, answer: str = "",
                    diff: str | None = None) -> _Diverged:
            if diff is None:
                diff = ("" if expected is None or actual is None
                        else system.side_by_side(expected, actual, side))
            return _Diverged(Divergence(name, step, action, dict(params), side, reason, source,
                                        expected, actual, diff, answer, system.name))

        profile, fatal = self.profile, self.fatal
        constants = trace.constants
        wrong = system.constants_error(constants)
        if wrong is not None:
            raise diverge(0, "init", {}, "model", wrong, None, None, None)
        constants_key = json.dumps(constants, sort_keys=True, default=repr)
        try:
            source_number, source = self.state(trace.initial)
        except (ValueError, TypeError) as error:  # SpecStateError is a ValueError
            raise diverge(0, "init", {}, "model", f"the initial state is not a state of the "
                          f"spec: {error}", None, None, None) from None
        initial = system.initial_state(constants)
        if source != initial:
            raise diverge(0, "init", {}, "model", "the initial state is not Init",
                          None, source, initial)
        impl = system.new_implementation(self.factory, constants)
        if profile.snapshot:
            actual = system.snapshot(impl, constants, fatal)
            if actual != initial:
                raise diverge(0, "init", {}, "implementation",
                              f"a new {system.title} is not in Init", None, initial,
                              actual)
        check = getattr(impl, "check_invariants", None)
        report, coverage = self.report, self.report.coverage
        edges, model_checked, actions = self.edges, self.model_checked, system.actions
        # Counters are compared where states are, for an implementation that has stats()
        tally = (_TALLIES[system.name](constants)
                 if profile.snapshot and getattr(profile, "stats", True)
                 and system.name in _TALLIES else None)
        stats = None if tally is None else tally.stats(impl)
        counts = None if tally is None else tally.zero

        def miscounted(index: int, action: str, params: Mapping[str, Any], source: Any,
                       target: Any) -> _Diverged | None:
            """The divergence of ``stats()`` from ``counts`` in ``target``, if it diverges."""
            assert tally is not None and stats is not None
            expected = tally.expected(counts, target)
            try:
                rows = counter_rows(expected, stats())
            except fatal:
                raise
            except Exception as error:
                rows = [("stats()", "the counters", f"raised {type(error).__name__}: {error}")]
            if not rows:
                return None
            blank = ("",) * (len(tally.header) - 1)
            table = format_rows((*tally.header, "trace", "implementation"),
                                [(*blank, *row) for row in rows])
            names = ", ".join(row[0].removeprefix("stats().") for row in rows)
            return diverge(index, action, params, "implementation",
                           f"stats() is not what the trace's steps count: {names}", source,
                           target, target, diff=table)

        if stats is not None:
            miscount = miscounted(0, "init", {}, None, initial)
            if miscount is not None:
                raise miscount

        last = len(trace.steps)
        each_step = self.checks_each_step
        for index, step in enumerate(trace.steps, start=1):
            checked_here = each_step or index == last
            action = step.action
            if action not in actions:
                raise diverge(index, step.action, step.params, "model",
                              f"{step.action!r} is not an action of the spec", source, None, None)
            try:
                params = system.spec_params(action, step.params, source)
                target_number, target = self.state(step.state)
                edge: EdgeKey = (source_number, action, frozenset(params.items()),
                                 target_number)
            except (ValueError, TypeError) as error:  # SpecStateError is a ValueError
                raise diverge(index, action, step.params, "model",
                              f"the step is not a step of the spec: {error}",
                              source, None, None) from None

            if (constants_key, edge) not in model_checked:
                args = system.model_args(action, params, constants)
                refusal = system.model_refusal(action, source, args, constants)
                if refusal is not None:
                    raise diverge(index, action, params, "model",
                                  f"the model does not enable the step: {refusal.reason}",
                                  source, target, None)
                reached = system.model_step(action, source, args, constants)
                if reached != target:
                    raise diverge(index, action, params, "model",
                                  "the model's step reaches another state than the trace's",
                                  source, target, reached)
                model_checked.add((constants_key, edge))

            try:
                system.apply(impl, action, params, source, profile, fatal)
            except StepMismatch as error:
                raise diverge(index, action, params, "implementation",
                              f"{error.call} {error.actual}, expected {error.expected}",
                              source, target,
                              system.snapshot(impl, constants, fatal)
                              if profile.snapshot else None,
                              error.actual) from None
            except ValueError as error:  # a step the profile's calls cannot take
                raise diverge(index, action, params, "model", str(error), source, target,
                              None) from None
            if profile.snapshot:
                actual = system.snapshot(impl, constants, fatal)
                if actual != target:
                    raise diverge(index, action, params, "implementation",
                                  "the state after the step is not the trace's", source, target,
                                  actual)
            else:  # only the answers are compared
                actual = None
            if check is not None and checked_here:
                try:
                    check()
                except fatal:
                    raise
                except Exception as error:  # InvariantViolation is an AssertionError
                    raise diverge(index, action, params, "implementation",
                                  f"check_invariants() raised {type(error).__name__}: {error}",
                                  source, target, actual) from None
            if stats is not None:
                assert tally is not None
                delta = self.counted.get((constants_key, edge))
                if delta is None:
                    delta = self.counted[constants_key, edge] = tally.step(
                        tally.zero, action, system.model_args(action, params, constants),
                        source, target)
                counts = counts + delta
                if checked_here:
                    miscount = miscounted(index, action, params, source, target)
                    if miscount is not None:
                        raise miscount

            report.steps += 1
            coverage[action].steps += 1
            if edge not in edges:
                edges.add(edge)
                report.edges += 1
                coverage[action].edges += 1
            source_number, source = target_number, target


def replay(traces: Iterable[Trace], factory: Callable[..., Any] | None = None, *,
           stop_at_first: bool = True,
           on_progress: Callable[[int, int], None] | None = None,
           profile: Profile = FULL, fatal: Fatal = (),
           system: systems.System | None = None,
           checks_each_step: bool = True) -> ReplayReport:
    """Replay each trace against the reference model and a fresh implementation.

    ``system`` says which spec the traces are behaviours of (default: the TaskScheduler's,
    whose implementation is ``factory(MaxConcurrency)``, ``TaskScheduler`` unless given); the
    rest of this describes the TaskScheduler's replay, and other systems do the same with
    their own constants and calls.

    For each trace: its constant ``MaxConcurrency`` must be an int >= 1 and its initial state
    the empty snapshot (spec ``Init``), as must the new scheduler's; then each step is checked
    against the model, taken through the scheduler's API (:func:`apply_step`), and the
    scheduler's ``snapshot()`` compared with the trace's state, followed by its
    ``check_invariants()`` when it has one. A trace stops at its first :class:`Divergence`;
    with ``stop_at_first`` the replay stops there too, else it goes on with the next trace.
    ``on_progress(traces, steps)`` is called after each trace with the totals so far.

    ``profile`` says what the implementation keeps of the contract (default: all of it).
    Without ``snapshot`` only the answers of the calls are compared (the trace's states are
    still checked against the model); ``limit`` and ``ready_order`` change how a Claim is
    taken and compared (see :func:`apply_step`). The traces must be ones the profile admits:
    a step its calls cannot take is a divergence on the model's side. An exception of a
    ``fatal`` type raised by the implementation (a harness failure, not an answer) ends the
    replay and propagates.

    With ``checks_each_step`` false, ``check_invariants()`` and the counters of ``stats()`` are
    compared after the last step of each trace instead of after every step (the state is still
    compared at every step): for a store where each of those reads is a round of queries.
    """
    system = system or systems.get()
    report = ReplayReport(coverage={name: Coverage() for name in system.actions})
    replayer = _Replayer(system, factory or system.default_factory(), report, profile, fatal,
                         checks_each_step)
    started = time.perf_counter()
    try:
        for trace in traces:
            divergence = replayer.run(trace)
            report.traces += 1
            if on_progress is not None:
                on_progress(report.traces, report.steps)
            if divergence is not None:
                report.divergences.append(divergence)
                if stop_at_first:
                    break
    finally:
        report.seconds = time.perf_counter() - started
    return report
