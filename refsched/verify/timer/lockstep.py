"""A Hypothesis state machine that drives the timer's reference model and an implementation in
lock-step.

The timer counterpart of :mod:`refsched.verify.dag.lockstep`, for ``spec/TimerQueue.tla``: the
reference model (``refsched.model.timer``'s ``ReferenceTimerScheduler``) and any implementation
of the ``TimerScheduler`` API are built by ``factory(clock, rebuild_floor=n)`` around one shared
:class:`FakeClock`, and every rule makes the same call on both. Rules are the spec's actions
(through the API calls that take them): Schedule, Cancel, Next (Claim or Idle), Complete and
Fail (of the current version, of stale versions, repeated), Close, and Tick (the clock moves on,
and now and then back, which the schedulers must not follow). Ids come from a small pool, times
from a few values around the clock (the past included, ties often) and priorities from
``{-1, 0, 1, 2}``; ``rebuild_floor`` is drawn once per example from ``{0, 1, 2, 4}`` so the heap
is compacted often. Bad arguments now and then must be refused by both with the same error;
a ``run_at`` that is a real number but no ``int`` or ``float`` (a ``Fraction``) must be taken.

After every call the two must agree on the answer or on the error's type, and their
``snapshot()`` and ``stats()`` must be equal (every field of ``TimerStats``, the model's counted
from its steps: :mod:`refsched.model.timer.counters`); the model's invariants must hold on its
state, the action properties on each step, the implementation's own ``check_invariants()`` must
pass, and ``stats().heap <= 2 * stats().live + rebuild_floor``; a refused call must leave the
model's state as it was, and the steps the model logs in its ``history`` must be the ones the
contract makes of the call. Anything else raises a :class:`Disagreement` carrying the calls of
the run (after Hypothesis shrank it, those of the shortest run it found) and showing them as
Python calls. A :class:`Ledger` counts the spec actions the calls took and a few notable steps
(compactions among them), so an action a run never took is visible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from fractions import Fraction
from typing import Any, NoReturn

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from refsched.errors import InvalidArgumentError, StaleGenerationError
from refsched.model.timer import (
    ACTIONS,
    INITIAL,
    ReferenceTimerScheduler,
    violated,
    violated_by_step,
)
from refsched.model.timer.actions import dropped_on_top, live_entries
from refsched.types import (
    Due,
    TimerCloseReport,
    TimerEntry,
    TimerSnapshot,
    TimerState,
    TimerStats,
    TimerVersionView,
    Wait,
)
from refsched.verify.dag.lockstep import states_at
from refsched.verify.lockstep import CallLedger, run_machine
from refsched.verify.replay import counter_rows
from refsched.verify.system import Fatal

__all__ = [
    "IDS",
    "NEVER_SCHEDULED",
    "REBUILD_FLOORS",
    "Call",
    "Disagreement",
    "FakeClock",
    "Ledger",
    "run_timer_lockstep",
    "timer_lockstep_machine",
]

IDS = ("a", "b", "c")
NEVER_SCHEDULED = "z"  # drawn now and then where an id is picked, for the unknown-id refusals
REBUILD_FLOORS = (0, 1, 2, 4)
ids = st.sampled_from(IDS)
# run_at relative to the clock: the past, now (often, for ties), and a little later
offsets = st.sampled_from((-1, 0, 0, 0, 0.5, 1, 1, 2))
priorities = st.sampled_from((-1, 0, 0, 1, 2))  # 0, the default, twice as often
ticks = st.sampled_from((0, 0.5, 1, 3))
version_offsets = st.sampled_from((0, 0, -1, 1, -2))
# Calls every scheduler must refuse, as (method, args, kwargs), "t" standing for a drawn id: bad
# arguments (InvalidArgumentError), or an id never scheduled (UnknownTaskError, checked first by
# the callbacks).
UNHASHABLE = ["a"]
BAD_CALLS: tuple[tuple[str, tuple[Any, ...], dict[str, Any]], ...] = (
    ("schedule", (UNHASHABLE, 0), {}),
    ("schedule", ("t", math.nan), {}),
    ("schedule", ("t", math.inf), {}),
    ("schedule", ("t", -math.inf), {}),
    ("schedule", ("t", 10**400), {}),  # an int no float can hold
    ("schedule", ("t", True), {}),
    ("schedule", ("t", "1"), {}),
    ("schedule", ("t", Decimal(1)), {}),  # a number, but no numbers.Real
    ("schedule", ("t", 0), {"priority": True}),
    ("schedule", ("t", 0), {"priority": 1.0}),
    ("schedule", ("t", 0), {"priority": 1.5}),
    ("schedule", ("t", 0), {"fn": 42}),
    ("schedule", (UNHASHABLE, math.nan), {"priority": True, "fn": 42}),
    ("cancel", (UNHASHABLE,), {}),
    ("state", (UNHASHABLE,), {}),
    ("complete", (UNHASHABLE, 1), {}),
    ("fail", (UNHASHABLE, 1), {}),
    ("complete", ("t", True), {}),  # a version that is no int (bool excluded)
    ("fail", ("t", 1.0), {}),
    ("fail", ("t", 1.5), {}),
    ("complete", ("t", "1"), {}),
)
class _Has:
    """The parts of the contract a timer profile keeps (all of them for None)."""

    def __init__(self, profile: Any) -> None:
        for flag in ("versions", "callbacks", "cancel", "close", "snapshot", "stats",
                     "validates"):
            setattr(self, flag, True if profile is None else bool(getattr(profile, flag)))

    versions: bool
    callbacks: bool
    cancel: bool
    close: bool
    snapshot: bool
    stats: bool
    validates: bool


def _carried(call: tuple[str, tuple[Any, ...], dict[str, Any]]) -> bool:
    # A whole float (a priority or version of 1.0) is left out too: many JSON libraries read
    # 1.0 as the integer 1, so the wire cannot say it is no int.
    _, args, kwargs = call
    return UNHASHABLE not in args and "fn" not in kwargs and not any(
        isinstance(a, Decimal) or (isinstance(a, float) and not math.isfinite(a))
        or (isinstance(a, float) and a.is_integer())
        or (isinstance(a, int) and abs(a) > 2 ** 53) for a in (*args, *kwargs.values()))


WIRE_BAD_CALLS = tuple(call for call in BAD_CALLS if _carried(call))
"""The bad calls JSON can carry: ids that are strings, numbers that are finite and not whole
floats, no function."""
CLOSE_AFTER = 30  # calls made before close() may be called, or it would end most runs early


class FakeClock:
    """A clock moved by hand, shared by both schedulers: ``clock()`` reads ``now``."""

    def __init__(self, now: float = 0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock by ``seconds`` (back when negative: a misbehaving clock)."""
        self.now += seconds

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now!r})"


def _fn() -> None:
    """A placeholder task function: the schedulers only store it and hand it back."""


def _py(value: Any) -> str:
    """A value as Python source, as far as it goes (functions by name)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "math.nan" if math.isnan(value) else ("math.inf" if value > 0 else "-math.inf")
    if callable(value) and hasattr(value, "__name__"):
        return str(value.__name__)
    return repr(value)


def _show_answer(value: Any, error: BaseException | None) -> str:
    """An answer as the calls listing shows it: a value, or the error's type and text."""
    if error is not None:
        return f"{type(error).__name__}: {error}"
    if isinstance(value, Due):
        fn = "" if value.fn is None else f", fn={_py(value.fn)}"
        return f"Due({value.task_id!r}, {value.version!r}{fn})"
    if isinstance(value, TimerSnapshot):
        return f"<snapshot at now={value.now!r}>"
    return repr(value)


def _comparable(value: Any) -> Any:
    """An answer as a value that compares across implementations."""
    if isinstance(value, Due | Wait):
        return (type(value).__name__, *value)
    if isinstance(value, TimerCloseReport):
        # close() lists the cancelled ids in seq order; the running ones in no promised order
        return ("TimerCloseReport", tuple(value.cancelled), sorted(map(repr, value.running)))
    if isinstance(value, tuple):  # a tuple that is no Due or Wait is not an answer of the API
        return ("tuple", *value)
    return value


def _show_entry(e: TimerEntry) -> str:
    return f"({e.run_at!r}, {e.priority!r}, {e.seq!r}, {e.task_id!r}, {e.version!r})"


def _entries(heap: Iterable[TimerEntry]) -> str:
    return "{" + ", ".join(_show_entry(e) for e in sorted(heap, key=lambda e: e.seq)) + "}"


Row = tuple[str, str, str]  # a field, the model's value, the implementation's value


def snapshot_rows(model: TimerSnapshot, implementation: Any) -> list[Row]:
    """One row per field where the implementation's ``snapshot()`` differs from the model's."""
    if not isinstance(implementation, TimerSnapshot):
        return [("snapshot()", "a TimerSnapshot", f"{implementation!r:.200}")]
    rows: list[Row] = []
    for name in ("now", "closed", "next_seq"):
        a, b = getattr(model, name), getattr(implementation, name)
        if a != b:
            rows.append((name, repr(a), repr(b)))
    for t in sorted(set(model.tasks) | set(implementation.tasks), key=repr):
        mine, theirs = model.tasks.get(t), implementation.tasks.get(t)
        if mine == theirs:
            continue
        if mine is None or theirs is None:
            rows.append((f"tasks[{t!r}]", repr(mine), repr(theirs)))
            continue
        for f in fields(TimerVersionView):
            a, b = getattr(mine, f.name), getattr(theirs, f.name)
            if a != b:
                shown = (a.value, b.value) if isinstance(a, TimerState) and isinstance(
                    b, TimerState) else (repr(a), repr(b))
                rows.append((f"tasks[{t!r}].{f.name}", *shown))
    if model.heap != implementation.heap:
        rows.append(("heap (entries only in)", _entries(model.heap - implementation.heap),
                     _entries(implementation.heap - model.heap)))
    return rows


def stats_rows(model: TimerStats, implementation: Any) -> list[Row]:
    """One row per counter where the implementation's ``stats()`` differs from the model's."""
    if not isinstance(implementation, TimerStats):
        return [("stats()", "a TimerStats", f"{implementation!r:.200}")]
    return counter_rows({f.name: getattr(model, f.name) for f in fields(TimerStats)},
                        implementation)


def format_rows(rows: Sequence[Row]) -> str:
    """The rows as an indented table under a header, or "" when there are none."""
    if not rows:
        return ""
    table = [("field", "model", "implementation"), *rows]
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    return "\n".join(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}".rstrip()
                     for r in table)


@dataclass(frozen=True)
class Call:
    """One call of a lock-step run: what was asked, what each side answered, what followed.

    ``method`` is an API method (``schedule``, ``next``, ...), or ``advance`` for the fake
    clock moving (no scheduler is called; its answers are empty).
    """

    method: str
    args: tuple[Any, ...]
    model: str  # the model's answer: a value's repr, or "ErrorType: message"
    implementation: str  # the implementation's answer, shown the same way
    agrees: bool  # False only for the failing call
    # the fields of snapshot() / stats() that differ after the call ("" when equal)
    diff: str = ""
    # the spec actions the model took for the call: none (a refusal), one, or Tick and one
    steps: tuple[str, ...] = ()
    state: TimerSnapshot = INITIAL  # the model's state after the call
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The call as Python: ``timer.schedule('a', 1, priority=2)``, ``clock.advance(3)``."""
        shown = [_py(a) for a in self.args] + [f"{k}={_py(v)}" for k, v in self.kwargs.items()]
        owner = "clock" if self.method == "advance" else "timer"
        return f"{owner}.{self.method}({', '.join(shown)})"

    def to_json(self) -> dict[str, Any]:
        return {"call": self.text, "method": self.method, "args": [_py(a) for a in self.args],
                "kwargs": {k: _py(v) for k, v in self.kwargs.items()},
                "model": self.model, "implementation": self.implementation,
                "agrees": self.agrees, "diff": self.diff, "steps": list(self.steps)}


def format_calls(calls: Sequence[Call], rebuild_floor: int) -> str:
    """The calls as a Python script, each with its answer (both when they differ)."""
    lines = ["clock = FakeClock()",
             f"timer = factory(clock, rebuild_floor={rebuild_floor})"]
    width = max((len(c.text) for c in calls), default=0)
    for call in calls:
        if call.method == "advance":
            lines.append(call.text)
            continue
        if call.agrees:
            answer = f"# {call.model}"
        elif call.model == call.implementation:
            answer = f"# {call.model} (both)  <--"
        else:
            answer = f"# model: {call.model} | implementation: {call.implementation}  <--"
        lines.append(f"{call.text:<{width}}  {answer}")
        if call.diff:
            lines.append(call.diff)
    return "\n".join(lines)


class Disagreement(AssertionError):
    """The implementation and the model disagree (or one of them broke the contract).

    ``reason`` says how, in a sentence naming the call; ``calls`` are the run's calls up to and
    including the failing one (after Hypothesis has shrunk the run, the shortest failing run it
    found); ``rebuild_floor`` is the one both schedulers were built with. The message is the
    reason followed by the calls as Python.
    """

    def __init__(self, reason: str, calls: Sequence[Call], rebuild_floor: int,
                 states: tuple[Any, Any] = (None, None)) -> None:
        self.reason = reason
        self.calls = tuple(calls)
        self.rebuild_floor = rebuild_floor
        self.states = states  # (the model's, the implementation's) where they parted
        super().__init__(f"{reason}\n{format_calls(self.calls, rebuild_floor)}")


class Ledger(CallLedger):
    """What lock-step runs exercised: calls, the spec actions taken, and notable steps."""

    ACTIONS = tuple(ACTIONS)
    EVENTS = (
        "refused call",  # the call raised (and the state did not change)
        "bad argument refused",  # InvalidArgumentError
        "compaction",  # a step ended by rebuilding the heap from its live entries
        "reschedule superseded a pending version",
        "run_at in the past",  # a Schedule whose time was already over
        "next() dropped stale entries",  # Claim or Idle popped stale entries off the top
        "priority broke a tie",  # a Claim among due live entries of the same run_at
        "seq broke a tie",  # ... of the same run_at and priority
        "stop requested while running",  # Cancel of a running version
        "close left a version running",
        "clock went back",  # the clock read less than the schedulers' time
    )

    def record(self, method: str, taken: Iterable[str], events: Iterable[str]) -> None:
        self.calls += 1
        self.methods[method] += 1
        self.actions.update(taken)
        self.events.update(events)

    def summary(self) -> str:
        actions = ", ".join(f"{name} {self.actions[name]:,}" for name in ACTIONS)
        return (f"{self.examples:,} examples, {self.calls:,} calls; actions: {actions}; "
                f"{self.events_summary()}")


def _steps(method: str, args: tuple[Any, ...], previous: TimerSnapshot, before: TimerSnapshot,
           after: TimerSnapshot, answer: Any, error: BaseException | None) -> tuple[str, ...]:
    """The spec actions the model took for a call, by the contract (docs/timer.md).

    ``previous`` is the model's state after the last call, ``before`` the state the call's own
    step starts from (later than ``previous`` when the clock moved in between: a Tick), ``after``
    its state after the call.
    """
    taken: list[str] = []
    if after.now > previous.now:
        taken.append("Tick")
    if isinstance(error, StaleGenerationError) and method in ("complete", "fail"):
        return (*taken, "StaleCallback")
    if error is not None:  # a refusal: no step
        return tuple(taken)
    view = before.tasks.get(args[0]) if method in ("cancel", "complete", "fail") else None
    if method == "schedule":
        taken.append("Schedule")
    elif method == "cancel" and view is not None and (
            view.state is TimerState.PENDING
            or (view.state is TimerState.RUNNING and not view.cancel_requested)):
        taken.append("Cancel")
    elif method == "next":
        taken.append("Claim" if isinstance(answer, Due) else "Idle")
    elif method in ("complete", "fail") and view is not None:
        if view.state.is_terminal:
            taken.append("RepeatedCallback")
        elif view.state is TimerState.RUNNING:
            taken.append(method.capitalize())
    elif method == "close" and not before.closed:
        taken.append("Close")
    return tuple(taken)


def _events(taken: Sequence[str], args: tuple[Any, ...], before: TimerSnapshot,
            after: TimerSnapshot, answer: Any, error: BaseException | None,
            rebuild_floor: int) -> list[str]:
    """The notable steps (``Ledger.EVENTS``) of a call."""
    events: list[str] = []
    if error is not None:
        events.append("refused call")
        if isinstance(error, InvalidArgumentError):
            events.append("bad argument refused")
    for name in taken:
        if name == "Schedule":
            action_args: tuple[Any, ...] = (args[0], after.tasks[args[0]].run_at,
                                            after.tasks[args[0]].priority)
            old = before.tasks.get(args[0])
            if old is not None and old.state is TimerState.PENDING:
                events.append("reschedule superseded a pending version")
            if action_args[1] < before.now:
                events.append("run_at in the past")
        elif name == "Cancel":
            action_args = (args[0],)
            if before.tasks[args[0]].state is TimerState.RUNNING:
                events.append("stop requested while running")
        elif name in ("Claim", "Idle"):
            action_args = ()
            if dropped_on_top(before):
                events.append("next() dropped stale entries")
            if name == "Claim":
                events.extend(_tie_events(before, answer))
        elif name == "Close":
            action_args = ()
            if any(v.state is TimerState.RUNNING for v in after.tasks.values()):
                events.append("close left a version running")
        else:
            continue
        if ACTIONS[name].rebuilds(before, *action_args, rebuild_floor=rebuild_floor):
            events.append("compaction")
    return events


def _tie_events(before: TimerSnapshot, due: Due) -> list[str]:
    """How a Claim's entry was told from other due live entries of the same run_at."""
    live = live_entries(before)
    claimed = [e for e in live if (e.task_id, e.version) == (due.task_id, due.version)]
    if not claimed:
        return []
    e = claimed[0]
    rivals = [f for f in live if f != e and f.run_at == e.run_at]
    events = []
    if any(f.priority != e.priority for f in rivals):
        events.append("priority broke a tie")
    if any(f.priority == e.priority for f in rivals):
        events.append("seq broke a tie")
    return events


def timer_lockstep_machine(factory: Callable[..., Any], ledger: Ledger | None = None, *,
                           python_api: bool = True, fatal: Fatal = (),
                           profile: Any = None) -> type[RuleBasedStateMachine]:
    """The lock-step machine comparing ``factory(clock, rebuild_floor=n)`` with the model.

    ``factory`` builds an implementation of the ``TimerScheduler`` API reading time from
    ``clock`` (``refsched.TimerScheduler`` itself is one); ``ledger``, when given, records every
    call. ``python_api`` false keeps to the calls the conformance protocol carries: no task
    function, and only :data:`WIRE_BAD_CALLS`. An error of a ``fatal`` type the implementation
    raises (a harness failure, not an answer) propagates as it is. ``profile`` (a
    :class:`~refsched.profile.TimerProfile`; None: the full contract) narrows the calls
    to what the implementation keeps: without ``versions`` each id is scheduled once and every
    callback names its version; without ``callbacks``, ``cancel`` or ``close`` those calls are
    not made; without ``snapshot`` (or ``stats``) the states (or counters) are not compared and
    ``state()`` is not asked; without ``validates`` no bad argument is sent. The machine's
    ``TestCase`` runs it under pytest or unittest.
    """
    has = _Has(profile)
    with_fns = st.booleans() if python_api else st.just(False)
    bad_calls = BAD_CALLS if python_api else WIRE_BAD_CALLS
    readings = ("snapshot", "next") if has.snapshot else ("next",)
    offsets_of_versions = version_offsets if has.versions else st.just(0)

    class TimerLockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clock = FakeClock()
            self.model: Any = None
            self.impl: Any = None
            self.rebuild_floor = 0
            self.last = INITIAL  # the model's state after the last call
            self.log: list[Call] = []
            self.closes = 0

        @initialize(rebuild_floor=st.sampled_from(REBUILD_FLOORS),
                    initial=st.lists(st.tuples(ids, offsets, priorities), max_size=5))
        def create(self, rebuild_floor: int, initial: list[tuple[str, float, int]]) -> None:
            """A fresh pair of schedulers on one fake clock, with the same rebuild floor, and
            the same first few schedules (so that runs soon have entries to claim, and ties)."""
            if ledger is not None:
                ledger.examples += 1
            self.rebuild_floor = rebuild_floor
            self.model = ReferenceTimerScheduler(clock=self.clock, rebuild_floor=rebuild_floor)
            self.impl = factory(self.clock, rebuild_floor=rebuild_floor)
            self.last = self.model.snapshot()
            for task_id, offset, priority in initial:
                if has.versions or task_id not in self.last.tasks:
                    self.schedule_at(task_id, offset, priority, None)

        # -- the comparison ----------------------------------------------------------------

        def fail(self, reason: str) -> NoReturn:
            raise Disagreement(reason, self.log, self.rebuild_floor,
                               states_at(self.last, lambda: self.impl.snapshot()))

        def both(self, method: str, *args: Any, must_refuse: bool = False,
                 **kwargs: Any) -> None:
            """Make the call on both; compare the answers, the states, and check the contract.

            ``must_refuse``: the arguments are bad, and the model must refuse them too.
            """
            previous = self.last
            # Both read the clock in the call (next(), snapshot()) or in the snapshot() after
            # it; moved since the last call, it makes a Tick step first: its state is
            # ``before``, the state the call's own step starts from.
            reading = self.clock()
            before = previous.replace(now=reading) if reading > previous.now else previous
            history = getattr(self.model, "history", None)  # the model's steps, if it keeps them
            mark = len(history) if isinstance(history, list) else 0
            expected: Any = None
            expected_error: BaseException | None = None
            try:
                expected = getattr(self.model, method)(*args, **kwargs)
            except Exception as e:  # the error itself is what is compared
                expected_error = e
            actual: Any = None
            actual_error: BaseException | None = None
            try:
                actual = getattr(self.impl, method)(*args, **kwargs)
            except fatal:
                raise
            except Exception as e:
                actual_error = e
            after: TimerSnapshot = self.model.snapshot()
            self.last = after
            problem = self.disagreement(expected, expected_error, actual, actual_error)
            if problem is None and must_refuse and expected_error is None:
                problem = "the model accepted arguments the contract refuses"
            if problem is None and expected_error is not None and after != before:
                problem = (f"the model changed its state though it raised "
                           f"{type(expected_error).__name__}")
            rows = self.state_rows(after)
            if rows and problem is None:
                problem = f"the states differ after the call: {', '.join(r[0] for r in rows)}"
            taken = _steps(method, args, previous, before, after, expected, expected_error)
            if problem is None and isinstance(history, list):
                logged = tuple(str(step[0]) for step in history[mark:])
                if logged != taken:
                    problem = (f"the model logged the steps {list(logged)}, the contract "
                               f"makes them {list(taken)}")
            call = Call(method, args, _show_answer(expected, expected_error),
                        _show_answer(actual, actual_error), problem is None, format_rows(rows),
                        taken, after, kwargs)
            self.log.append(call)
            if problem is not None:
                self.fail(f"{call.text}: {problem}")
            self.check(call.text, previous, before, after)
            if ledger is not None:
                ledger.record(method, taken,
                              _events(taken, args, before, after, expected, expected_error,
                                      self.rebuild_floor))

        def disagreement(self, expected: Any, expected_error: BaseException | None,
                         actual: Any, actual_error: BaseException | None) -> str | None:
            """How the two answers disagree, in a sentence, or None when they agree."""
            if actual_error is not None:
                if expected_error is None:
                    return (f"the implementation raised {_show_answer(None, actual_error)}, "
                            f"the model returned {_show_answer(expected, None)}")
                if type(actual_error) is not type(expected_error):
                    return (f"the implementation raised {type(actual_error).__name__}, "
                            f"the model {type(expected_error).__name__}")
                return None
            if expected_error is not None:
                return (f"the implementation returned {_show_answer(actual, None)}, "
                        f"the model raised {_show_answer(None, expected_error)}")
            try:
                same = bool(_comparable(actual) == _comparable(expected))
            except Exception:  # not an answer of the right shape
                same = False
            return None if same else (f"the implementation returned "
                                      f"{_show_answer(actual, None)}, the model "
                                      f"{_show_answer(expected, None)}")

        def state_rows(self, model_state: TimerSnapshot) -> list[Row]:
            """Where the implementation's snapshot() and stats() differ from the model's."""
            if not has.snapshot:
                return self.stats_rows() if has.stats else []
            try:
                rows = snapshot_rows(model_state, self.impl.snapshot())
            except Exception as error:
                rows = [("snapshot()", "a TimerSnapshot", f"raised {type(error).__name__}: "
                                                          f"{error}")]
            return [*rows, *self.stats_rows()] if has.stats else rows

        def stats_rows(self) -> list[Row]:
            try:
                impl_stats = self.impl.stats()
            except Exception as error:
                return [("stats()", "a TimerStats", f"raised {type(error).__name__}: {error}")]
            return stats_rows(self.model.stats(), impl_stats)

        def check(self, text: str, previous: TimerSnapshot, before: TimerSnapshot,
                  after: TimerSnapshot) -> None:
            """The contract's invariants and action properties after the call ``text``."""
            broken = violated(after, self.rebuild_floor)
            if broken:
                self.fail(f"after {text}: the model's state breaks {', '.join(broken)}")
            # the clock may have moved since the last call: a Tick, then the call's step
            for start, end in ((previous, before), (before, after)):
                broken = violated_by_step(start, end)
                if broken:
                    self.fail(f"{text}: the model's step breaks {', '.join(broken)}")
            try:
                check = getattr(self.impl, "check_invariants", None)  # an implementation's own
                if check is not None:
                    check()
            except Exception as error:
                self.fail(f"after {text}: check_invariants() raised "
                          f"{type(error).__name__}: {error}")
            if not has.stats:
                return
            counts = self.impl.stats()
            if counts.heap > 2 * counts.live + self.rebuild_floor:
                self.fail(f"after {text}: the implementation's heap holds {counts.heap} entries "
                          f"for {counts.live} live ones (rebuild_floor {self.rebuild_floor})")

        # -- helpers -----------------------------------------------------------------------

        def known(self) -> list[Hashable]:
            """Scheduled ids, each four times as likely as one never scheduled."""
            return [*sorted(self.last.tasks, key=repr) * 4, NEVER_SCHEDULED]

        def in_state(self, state: TimerState) -> list[Hashable]:
            return sorted((t for t, v in self.last.tasks.items() if v.state is state), key=repr)

        def version(self, task_id: Hashable) -> int:
            view = self.last.tasks.get(task_id)
            return 1 if view is None else view.version

        # -- rules: one per spec action ----------------------------------------------------
        # Most rules pick among scheduled ids so calls do something; a few take any id or bad
        # arguments so the refusals are compared too. Close is held back until some calls were
        # made, or it would end most runs early.

        def schedule_at(self, task_id: Hashable, offset: float, priority: int,
                        fn: Callable[..., Any] | None) -> None:
            """schedule() at ``offset`` from the clock's reading; defaults left out."""
            options: dict[str, Any] = {}
            if priority:
                options["priority"] = priority
            if fn is not None:
                options["fn"] = fn
            self.both("schedule", task_id, self.clock.now + offset, **options)

        @rule(task_id=ids, offset=offsets, priority=priorities, with_fn=with_fns)
        def schedule(self, task_id: str, offset: float, priority: int, with_fn: bool) -> None:
            if has.versions or task_id not in self.last.tasks:
                self.schedule_at(task_id, offset, priority, _fn if with_fn else None)

        @precondition(lambda self: has.versions and bool(self.in_state(TimerState.PENDING)))
        @rule(data=st.data(), offset=offsets, priority=priorities)
        def reschedule(self, data: st.DataObject, offset: float, priority: int) -> None:
            """Schedule a pending id again: its old entry turns stale."""
            task_id = data.draw(st.sampled_from(self.in_state(TimerState.PENDING)))
            self.schedule_at(task_id, offset, priority, None)

        @precondition(lambda self: has.cancel)
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            self.both("cancel", data.draw(st.sampled_from(self.known())))

        @rule()
        def next(self) -> None:
            self.both("next")

        @precondition(lambda self: has.callbacks and bool(self.in_state(TimerState.RUNNING)))
        @rule(data=st.data(), how=st.sampled_from(("complete", "fail")))
        def finish_running(self, data: st.DataObject, how: str) -> None:
            task_id = data.draw(st.sampled_from(self.in_state(TimerState.RUNNING)))
            self.both(how, task_id, self.version(task_id))

        @precondition(lambda self: has.callbacks)
        @rule(data=st.data(), offset=offsets_of_versions,
              how=st.sampled_from(("complete", "fail")))
        def callback(self, data: st.DataObject, offset: int, how: str) -> None:
            """A callback on any id and version: stale, repeated, pending or unknown."""
            task_id = data.draw(st.sampled_from(self.known()))
            self.both(how, task_id, self.version(task_id) + offset)

        @precondition(lambda self: has.close and len(self.log) >= CLOSE_AFTER
                      and self.closes < 2)
        @rule()
        def close(self) -> None:
            """Close, and now and then close again (which changes nothing)."""
            self.closes += 1
            self.both("close")

        @rule(seconds=ticks, then=st.sampled_from(readings))
        def tick(self, seconds: float, then: str) -> None:
            """The clock moves on; both read it in the next call (snapshot() or next())."""
            self.clock.advance(seconds)
            self.log.append(Call("advance", (seconds,), "", "", True, state=self.last))
            self.both(then)

        @precondition(lambda self: self.clock.now > 0)
        @rule()
        def clock_goes_back(self) -> None:
            """A misbehaving clock reads less than before: the schedulers' time must not."""
            self.clock.advance(-1)
            self.log.append(Call("advance", (-1,), "", "", True, state=self.last))
            self.both(readings[0])
            if ledger is not None and self.clock.now < self.last.now:
                ledger.events["clock went back"] += 1

        @rule(task_id=ids, offset=offsets)
        def schedule_other_number(self, task_id: str, offset: float) -> None:
            """A run_at that is a real number but no int or float: both take it as a float."""
            if has.versions or task_id not in self.last.tasks:
                self.both("schedule", task_id, Fraction(self.clock.now + offset))

        @precondition(lambda self: has.snapshot)
        @rule(data=st.data())
        def state(self, data: st.DataObject) -> None:
            self.both("state", data.draw(st.sampled_from(self.known())))

        @precondition(lambda self: has.validates)
        @rule(call=st.sampled_from(bad_calls), task_id=ids)
        def bad_arguments(self, call: tuple[str, tuple[Any, ...], dict[str, Any]],
                          task_id: str) -> None:
            method, args, kwargs = call
            args = tuple(task_id if a == "t" else a for a in args)
            self.both(method, *args, must_refuse=True, **kwargs)

    return TimerLockstep


def run_timer_lockstep(factory: Callable[..., Any], examples: int = 200, steps: int = 50,
                       seed: int | None = None, *, ledger: Ledger | None = None,
                       hypothesis_settings: Mapping[str, Any] | None = None,
                       python_api: bool = True, fatal: Fatal = (),
                       profile: Any = None) -> Ledger:
    """Run the lock-step machine for ``examples`` examples; return what the run exercised.

    Raises :class:`Disagreement` on the first failure, after Hypothesis shrank the run to the
    shortest failing sequence of calls it found (they are in its message, as Python calls).
    ``seed`` fixes Hypothesis's random choices (a run with the same seed makes the same calls);
    ``ledger`` accumulates into an existing ledger; ``hypothesis_settings`` overrides the
    settings chosen here; ``python_api`` false keeps to the calls the conformance protocol
    carries.
    """
    ledger = Ledger() if ledger is None else ledger
    machine = timer_lockstep_machine(factory, ledger, python_api=python_api, fatal=fatal,
                                     profile=profile)
    run_machine(machine, examples=examples, steps=steps, seed=seed,
                overrides=hypothesis_settings, slow=True)
    return ledger
