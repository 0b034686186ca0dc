"""TLC judges real runs of the timer scheduler and of the work-stealing pool.

Runs of the TimerRunner (on a clock moved in whole ticks) and of the WorkStealingPool are
recorded at their linearization points, checked against the reference model without TLC for
many seeds, and given to TLC: recorded runs are accepted, and a run altered on purpose (one
state changed, one step dropped) is rejected at the step altered. TLC runs cost seconds each,
so there are few of them; the model checks carry the breadth.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from refsched import TimerScheduler, WorkStealingPool
from refsched.cli import main
from refsched.errors import InvalidArgumentError
from refsched.model.pool import ACTIONS as POOL_ACTIONS
from refsched.model.timer import ACTIONS as TIMER_ACTIONS
from refsched.types import TimerSnapshot
from refsched.verify import system
from refsched.verify.itf import Trace
from refsched.verify.pool.recording import record_pool_run
from refsched.verify.recording import record_run
from refsched.verify.timer.recording import TICK, TimerTraceRecorder, record_timer_run
from refsched.verify.tla import Function
from refsched.verify.validate import (
    TraceError,
    Validation,
    format_validation,
    spec_of,
    trace_module,
    validate_trace,
)


def check(trace: Trace) -> Validation:
    verdict = validate_trace(trace, timeout=120)
    print(format_validation(verdict))
    return verdict


def with_state(trace: Trace, step: int, **changes: Any) -> Trace:
    """``trace`` with variables of the state step ``step`` (1-based) reached changed."""
    steps = list(trace.steps)
    taken = steps[step - 1]
    steps[step - 1] = dataclasses.replace(taken, state={**taken.state, **changes})
    return dataclasses.replace(trace, steps=tuple(steps))


def without_step(trace: Trace, step: int) -> Trace:
    return dataclasses.replace(trace, steps=trace.steps[:step - 1] + trace.steps[step:])


def first(trace: Trace, *actions: str) -> int:
    """The 1-based index of the first step taking one of ``actions``."""
    return next(i for i, s in enumerate(trace.steps, start=1) if s.action in actions)


# -- the recorded runs agree with the model, step by step (no TLC) --------------------------

def replay_on_model(trace: Trace, name: str,
                    refusal: Callable[[Any, Any, tuple[Any, ...]], Any]) -> None:
    """Each step of ``trace`` is one the model of system ``name`` takes: ``refusal(action,
    state, args)`` is None before it, and the model's step reaches the state recorded after it."""
    target = system.get(name)
    state = target.snapshot_of(trace.initial)
    for index, step in enumerate(trace.steps, start=1):
        args = target.model_args(step.action, step.params, trace.constants)
        refused = refusal(target.actions[step.action], state, args)
        assert refused is None, (trace.name, index, step.action, refused)
        state = target.model_step(step.action, state, args, trace.constants)
        assert state == target.snapshot_of(step.state), (trace.name, index, step.action)


def replay_timer(trace: Trace) -> None:
    replay_on_model(trace, "timer", lambda action, state, args: action.refusal(state, *args))


def replay_pool(trace: Trace) -> None:
    children = trace.constants["Children"]
    replay_on_model(trace, "pool", lambda action, state, args: action.refused(
        state, *args, children=children))


@pytest.mark.parametrize("seed", range(12))
def test_recorded_timer_runs_are_behaviours_of_the_model(seed: int) -> None:
    trace = record_timer_run(seed)
    print(f"seed {seed}: {[s.action for s in trace.steps]}")
    assert trace.steps[-1].action in ("Close", "Complete", "Fail")
    assert {"Schedule", "Tick", "Close"} <= {s.action for s in trace.steps}
    replay_timer(trace)


@pytest.mark.parametrize("seed", range(12))
def test_recorded_pool_runs_are_behaviours_of_the_model(seed: int) -> None:
    trace = record_pool_run(seed)
    print(f"seed {seed}: {[s.action for s in trace.steps]}")
    assert trace.steps[-1].state["phase"] == "terminated"
    replay_pool(trace)


@pytest.mark.parametrize(("record", "replay", "dropped"), [
    (record_timer_run, replay_timer, "Schedule"), (record_pool_run, replay_pool, "SubmitExternal"),
], ids=["timer", "pool"])
def test_a_recorded_run_with_a_step_dropped_is_no_behaviour_of_the_model(
        record: Callable[[int], Trace], replay: Callable[[Trace], None], dropped: str) -> None:
    trace = record(0)
    with pytest.raises(AssertionError):
        replay(without_step(trace, first(trace, dropped)))


def test_recordings_over_the_seeds_take_every_action() -> None:
    timer = {s.action for seed in range(12) for s in record_timer_run(seed).steps}
    pool = {s.action for seed in range(12) for s in record_pool_run(seed).steps}
    assert timer == set(TIMER_ACTIONS)
    assert pool == set(POOL_ACTIONS) - {"StealBatch"}  # single steals by default
    batch = {s.action for seed in range(12)
             for s in record_pool_run(seed, tasks=12, steal_cap=3).steps}
    assert batch == set(POOL_ACTIONS)


def _batch_runs(count: int) -> list[Trace]:
    """The first ``count`` recorded runs, from seed 0 on, in which a batch steal happened."""
    runs: list[Trace] = []
    for seed in range(200):
        trace = record_pool_run(seed, tasks=12, steal_cap=3)
        if any(s.action == "StealBatch" for s in trace.steps):
            runs.append(trace)
            if len(runs) == count:
                return runs
    raise AssertionError(f"{len(runs)} runs of 200 had a batch steal")


def test_recorded_runs_with_batch_steals_are_behaviours_of_the_model_and_of_the_spec() -> None:
    runs = _batch_runs(3)
    for trace in runs:
        assert trace.constants["StealCap"] == 3
        replay_pool(trace)
    verdict = check(runs[0])
    assert verdict.accepted, format_validation(verdict)
    # the same run, its first batch steal recorded as a single steal: TLC rejects that step
    step = first(runs[0], "StealBatch")
    renamed = list(runs[0].steps)
    renamed[step - 1] = dataclasses.replace(renamed[step - 1], action="Steal")
    verdict = check(dataclasses.replace(runs[0], steps=tuple(renamed)))
    assert not verdict.accepted and verdict.first_rejected_step == step, (
        format_validation(verdict))


def test_a_time_off_the_tick_grid_is_refused_not_rounded() -> None:
    recorder = TimerTraceRecorder(tick=TICK)
    recorder.record("Idle", {}, TimerSnapshot(now=TICK / 3))
    with pytest.raises(ValueError, match="not a whole number of ticks"):
        recorder.trace(0)


def test_the_clock_moving_shows_as_ticks_just_before_the_step_that_saw_it() -> None:
    recorder = TimerTraceRecorder(tick=TICK)
    recorder.record("Idle", {}, TimerSnapshot(now=3 * TICK))
    trace = recorder.trace(0)
    assert [s.action for s in trace.steps] == ["Tick", "Tick", "Tick", "Idle"]
    assert [s.state["now"] for s in trace.steps] == [1, 2, 3, 3]


def test_a_pool_recorder_without_record_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="recorder"):
        WorkStealingPool(1, recorder=object())  # type: ignore[arg-type]


# -- the spec a trace is of -----------------------------------------------------------------

def timer_trace() -> Trace:
    """Schedule, Claim, Complete on a scheduler whose clock stays at 0."""
    recorder = TimerTraceRecorder()
    timers = TimerScheduler(lambda: 0, rebuild_floor=0, recorder=recorder)
    timers.schedule("a", 0, 1, None)
    timers.next()
    timers.complete("a", 1)
    return recorder.trace(0)


def pool_trace() -> Trace:
    return record_pool_run(6, tasks=4, workers=2)


def test_each_recorded_trace_is_stated_in_its_own_spec() -> None:
    for trace, name, module in ((timer_trace(), "timer", "TimerQueue"),
                                (pool_trace(), "pool", "WorkStealing")):
        assert spec_of(trace).system == name
        text, config = trace_module(trace)
        assert f"EXTENDS {module}, " in text and "Tasks <- TraceTasks" in config


def test_a_durable_trace_is_a_trace_error_not_a_tlc_run() -> None:
    variables = system.get("durable").variables
    trace = Trace(name="durable", constants={}, initial=dict.fromkeys(variables, 0), steps=())
    with pytest.raises(TraceError, match="validate-trace judges traces of"):
        trace_module(trace)


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: dataclasses.replace(t, constants={**t.constants, "Children": ["c", "z"]}),
     "not in Tasks"),
    (lambda t: dataclasses.replace(t, constants={**t.constants, "Workers": []}), "Workers"),
    (lambda t: dataclasses.replace(t, constants={"Workers": ["w1", "w2"],
                                                 "Tasks": ["a", "b", "c", "d"]}),
     "no constant Children"),
    (lambda t: with_state(t, 1, outstanding="1"), "outstanding"),
    (lambda t: with_state(t, 1, deque=Function({"w1": ("x",), "w2": ()})), "deque"),
    (lambda t: dataclasses.replace(t, steps=(dataclasses.replace(t.steps[0], params={}),)),
     "missing parameters t, w"),
])
def test_inexpressible_pool_trace_is_a_trace_error(change: Callable[[Trace], Trace],
                                                   message: str) -> None:
    with pytest.raises(TraceError, match=message):
        trace_module(change(pool_trace()))


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: dataclasses.replace(t, constants={"Tasks": ["a", "b"]}), "RebuildFloor"),
    (lambda t: dataclasses.replace(t, constants={**t.constants, "RebuildFloor": -1}),
     "RebuildFloor"),
    (lambda t: with_state(t, 1, now=-1), "now"),
    (lambda t: with_state(t, 1, heap=frozenset({(0, 0, 1, "z", 1)})), "heap"),
    (lambda t: dataclasses.replace(t, steps=(dataclasses.replace(
        t.steps[0], params={**t.steps[0].params, "r": "soon"}),)), "r = 'soon'"),
])
def test_inexpressible_timer_trace_is_a_trace_error(change: Callable[[Trace], Trace],
                                                    message: str) -> None:
    with pytest.raises(TraceError, match=message):
        trace_module(change(timer_trace()))


# -- TLC's verdicts (a few seconds each) ----------------------------------------------------

def test_a_recorded_pool_run_is_accepted_and_altered_ones_are_rejected_at_the_step() -> None:
    trace = record_pool_run(6)  # three roots, waited for before the shutdown: each is taken
    verdict = check(trace)
    assert verdict.accepted, verdict.tlc.output[-3000:] if verdict.tlc else verdict
    assert format_validation(verdict).startswith(
        f"pool-seed-6: accepted, {len(trace.steps)} steps are a behaviour of WorkStealing's Spec")

    middle = len(trace.steps) // 2
    outstanding = trace.steps[middle - 1].state["outstanding"]
    changed = check(with_state(trace, middle, outstanding=outstanding + 1))
    assert not changed.accepted
    assert (changed.first_rejected_step, changed.action) == (middle,
                                                             trace.steps[middle - 1].action)
    assert changed.reason is not None
    assert f"outstanding: recorded {outstanding + 1}, model {outstanding}" in changed.reason

    taken = first(trace, "Pop", "Steal")
    dropped = check(without_step(trace, taken))
    assert not dropped.accepted
    assert (dropped.first_rejected_step, dropped.action) == (taken, trace.steps[taken].action)
    assert f"rejected at step {taken} of {len(trace.steps) - 1}" in format_validation(dropped)


def test_a_recorded_timer_run_with_a_step_dropped_is_rejected_at_the_next() -> None:
    trace = record_timer_run(2)
    claim = first(trace, "Claim")
    verdict = check(without_step(trace, claim))
    assert not verdict.accepted
    assert (verdict.first_rejected_step, verdict.action) == (claim, trace.steps[claim].action)
    assert verdict.reason


# -- the command line -----------------------------------------------------------------------

def test_record_timer_then_validate_trace_then_a_tampered_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "x.itf.json"
    assert main(["record", "--system", "timer", "--seed", "4", "-o", str(run)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["validate-trace", str(run)]) == 0
    out = capsys.readouterr().out
    assert "timer-seed-4: accepted" in out and "of TimerQueue's Spec" in out
    assert "1 of 1 traces accepted by TLC" in out

    doc = json.loads(run.read_text())
    doc["states"][-1]["nextSeq"] += 1  # a state the spec does not reach
    run.write_text(json.dumps(doc))
    assert main(["validate-trace", str(run)]) == 1
    out = capsys.readouterr().out
    steps = len(doc["states"]) - 1
    assert f"rejected at step {steps} of {steps}" in out
    assert "nextSeq: recorded" in out and "0 of 1 traces accepted" in out


def test_record_and_validate_refuse_bad_input_with_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["record", "--system", "durable", "-o", str(tmp_path / "x.itf.json")])
    assert raised.value.code == 2
    assert "invalid choice: 'durable'" in capsys.readouterr().err
    run = tmp_path / "pool.itf.json"
    assert main(["record", "--system", "pool", "--tasks", "3", "--workers", "2",
                 "-o", str(run)]) == 0
    doc = json.loads(run.read_text())
    del doc["#meta"]["constants"]["Children"]
    run.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["validate-trace", str(run)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("refsched validate-trace: pool-seed-1: no constant Children")
    assert "Traceback" not in captured.err


def test_record_run_names_the_systems_it_records() -> None:
    with pytest.raises(ValueError, match="scheduler, timer, pool"):
        record_run("durable", 1)
