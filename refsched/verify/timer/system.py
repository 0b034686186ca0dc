"""The timer scheduler as a :class:`~refsched.verify.system.System`.

``spec/TimerQueue.tla``, the model ``refsched.model.timer``, and ``refsched.TimerScheduler``
driven on a fake clock: a replayed trace's ``Tick`` moves the clock to the trace's ``now``, and
every other step is one API call whose answer the step fixes:

==========================  ====================================================================
Schedule(t, r, p)           ``schedule(t, r, p)`` returns the next version of ``t``
Cancel(t)                   ``cancel(t)`` returns True for a pending version, False for a
                            running one
Claim                       ``next()`` returns ``Due`` of the first live entry (id and version)
Idle                        ``next()`` returns ``Wait(run_at - now)`` of the first live entry, or
                            ``None`` when no entry is live
Complete / Fail(t, v)       ``complete`` / ``fail(t, v)`` returns completed / failed
StaleCallback(t, v)         ``complete(t, v)`` raises ``StaleGenerationError`` naming ``v`` and the
                            current version
RepeatedCallback(t)         ``complete(t, current version)`` returns the terminal state
Close                       ``close()`` reports the pending ids as cancelled and the running ids,
                            each in seq order
Tick                        the clock moves on to the trace's time
==========================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from refsched.model.dag.graph import ModelGraph, describe
from refsched.model.timer import ACTIONS, INITIAL, Instance
from refsched.model.timer import explore as explore_model
from refsched.model.timer.actions import live_entries, top
from refsched.timer.scheduler import TimerScheduler
from refsched.types import Due, TimerCloseReport, TimerSnapshot, TimerState, Wait
from refsched.verify.replay import StepMismatch, format_rows, raised
from refsched.verify.system import Fatal, System, count_error
from refsched.verify.timer import spec as timerspec

__all__ = ["SYSTEM", "FakeClock", "TimerSystem"]


class FakeClock:
    """The clock a replayed scheduler reads: it says what the trace's time is."""

    def __init__(self, now: float = 0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _Driven:
    """A timer scheduler under replay, and the clock it reads."""

    def __init__(self, timers: Any, clock: FakeClock) -> None:
        self.timers = timers
        self.clock = clock

    def check_invariants(self) -> None:
        check = getattr(self.timers, "check_invariants", None)
        if check is not None:
            check()


_Plan = tuple[str, tuple[Any, ...], Any]  # method, args, answer


def _plan(action: str, p: Mapping[str, Any], before: TimerSnapshot) -> _Plan:
    """The API call that takes the step, and the answer it must give."""
    view = before.tasks.get(p.get("t"))
    if action == "Schedule":
        return "schedule", (p["t"], p["r"], p["p"]), 1 if view is None else view.version + 1
    if action == "Cancel":
        if view is None:
            raise ValueError(f"Cancel(t={p['t']}): {p['t']!r} has no version before the step")
        return "cancel", (p["t"],), view.state is TimerState.PENDING
    if action in ("Claim", "Idle"):
        first = top(live_entries(before))
        if action == "Claim":
            if first is None:
                raise ValueError("Claim: no live entry before the step")
            return "next", (), ("Due", first.task_id, first.version)
        return "next", (), None if first is None else ("Wait", first.run_at - before.now)
    if action == "Complete":
        return "complete", (p["t"], p["v"]), TimerState.COMPLETED
    if action == "Fail":
        return "fail", (p["t"], p["v"]), TimerState.FAILED
    if action == "Close":
        by_seq = sorted(before.tasks.items(), key=lambda kv: kv[1].seq)
        return "close", (), TimerCloseReport(
            cancelled=tuple(t for t, v in by_seq if v.state is TimerState.PENDING),
            running=tuple(t for t, v in by_seq if v.state is TimerState.RUNNING))
    if view is None:
        raise ValueError(f"{describe(action, p)}: {p['t']!r} has no version before the step")
    if action == "StaleCallback":  # the answer is the error's (version named, current)
        return "complete", (p["t"], p["v"]), (p["v"], view.version)
    return "complete", (p["t"], view.version), view.state  # RepeatedCallback


def _answer(action: str, result: Any) -> Any:
    """The part of an answer the step fixes, comparable with ``_plan``'s answer."""
    if action in ("Claim", "Idle"):
        if isinstance(result, Due):
            return ("Due", result.task_id, result.version)
        if isinstance(result, Wait):
            return ("Wait", result.seconds)
    return result


def _show(answer: Any) -> str:
    if isinstance(answer, tuple) and answer and answer[0] == "Due":
        return f"Due({answer[1]!r}, version {answer[2]})"
    if isinstance(answer, tuple) and answer and answer[0] == "Wait":
        return f"Wait({answer[1]!r})"
    return repr(answer)


class TimerSystem(System):
    name = "timer"
    module = "TimerQueue"
    spec = timerspec
    implementation = TimerScheduler
    label_actions = MappingProxyType({"AnyStaleCallback": "StaleCallback"})
    initial = INITIAL
    actions = ACTIONS
    snapshot_type = TimerSnapshot

    def explore(self, instance: Instance) -> ModelGraph[TimerSnapshot]:
        graph: ModelGraph[TimerSnapshot] = explore_model(instance)
        return graph

    def constants(self, instance: Instance) -> dict[str, Any]:
        return {"Tasks": list(instance.tasks), "RebuildFloor": instance.rebuild_floor}

    def manifest_constants(self, instance: Instance) -> dict[str, Any]:
        return {"Tasks": list(instance.tasks), "MaxTime": instance.max_time,
                "Priorities": list(instance.priorities),
                "RebuildFloor": instance.rebuild_floor, "MaxVersion": instance.max_version,
                "MaxSchedules": instance.max_schedules}

    def spec_state(self, state: TimerSnapshot, instance: Instance) -> dict[str, Any]:
        return timerspec.spec_state(state, instance.tasks)

    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        return count_error(constants, ("RebuildFloor",), 0)

    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> _Driven:
        clock = FakeClock(INITIAL.now)
        return _Driven(factory(clock, rebuild_floor=constants["RebuildFloor"]), clock)

    def model_step(self, action: str, source: Any, args: tuple[Any, ...],
                   constants: Mapping[str, Any]) -> Any:
        return ACTIONS[action].step(source, *args, rebuild_floor=constants["RebuildFloor"])

    def apply(self, implementation: _Driven, action: str, params: Mapping[str, Any],
              before: TimerSnapshot, profile: Any, fatal: Fatal) -> None:
        if action == "Tick":
            implementation.clock.now = before.now + 1
            return
        method, args, answer = _plan(action, params, before)
        call = f"{method}({', '.join(map(repr, args))})"
        step = self.describe(action, params)
        try:
            result = getattr(implementation.timers, method)(*args)
        except fatal:
            raise
        except Exception as error:
            actual = raised(error, answer if action == "StaleCallback" else None, "version")
            if actual is None:
                return
            expected = (f"StaleGenerationError naming version {answer[0]}, current {answer[1]}"
                        if action == "StaleCallback" else _show(answer))
            raise StepMismatch(step, call, expected, actual) from error
        if action == "StaleCallback":
            raise StepMismatch(step, call, f"StaleGenerationError naming version {answer[0]}, "
                               f"current {answer[1]}", f"returned {result!r}")
        got = _answer(action, result)
        if got != answer:
            raise StepMismatch(step, call, _show(answer), f"returned {_show(got)}")

    def read_snapshot(self, implementation: _Driven) -> Any:
        return implementation.timers.snapshot()

    def side_by_side(self, expected: TimerSnapshot, actual: TimerSnapshot, side: str) -> str:
        rows: list[tuple[str, str, str, str]] = []
        for name in ("now", "closed", "next_seq"):
            a, b = getattr(expected, name), getattr(actual, name)
            if a != b:
                rows.append(("", name, str(a), str(b)))
        fields = ("version", "state", "run_at", "priority", "seq", "cancel_requested", "claims")
        for t in sorted(set(expected.tasks) | set(actual.tasks), key=repr):
            mine, theirs = expected.tasks.get(t), actual.tasks.get(t)
            for name in fields:
                a = "absent" if mine is None else _field(mine, name)
                b = "absent" if theirs is None else _field(theirs, name)
                if a != b:
                    rows.append((str(t), name, a, b))
        only_expected = sorted(expected.heap - actual.heap, key=lambda e: e.key)
        only_actual = sorted(actual.heap - expected.heap, key=lambda e: e.key)
        if only_expected or only_actual:
            rows.append(("", "heap", _entries(only_expected), _entries(only_actual)))
        return format_rows(("id", "field", "trace", side), rows)


def _field(view: Any, name: str) -> str:
    value = getattr(view, name)
    return value.value if isinstance(value, TimerState) else str(value)


def _entries(entries: list[Any]) -> str:
    if not entries:
        return "-"
    return "only " + ", ".join(f"<<{e.run_at}, {e.priority}, {e.seq}, {e.task_id}, {e.version}>>"
                               for e in entries)


SYSTEM = TimerSystem()
