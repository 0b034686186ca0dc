"""TLC judges real runs of the work-stealing pool whose tasks block inside ``pool.blocking()``.

Runs recorded by :func:`refsched.verify.pool.recording.record_blocking_run` take ``Block``
(compensated and at the bound), ``StartSpare``, ``Unblock`` and ``Retire``, their spares named
``s1``, ``s2`` as the spec's ``Spares``. Each is checked step by step against the model for
several seeds (no TLC), and a few are given to TLC: a recorded run is accepted, and broken
recordings (an ``Unblock`` the recorder drops; a spare started beyond the bound the trace
states) are rejected at the step that breaks the spec, named with its action. TLC runs cost
seconds each, so there are few of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from refsched.model.pool.blocking import BlockingInstance, blocking_refusal, blocking_step
from refsched.pool.pool import PoolView, WorkStealingPool
from refsched.verify import system
from refsched.verify.itf import Trace
from refsched.verify.pool import recording
from refsched.verify.pool.recording import PoolTraceRecorder, record_blocking_run
from refsched.verify.validate import (
    TraceError,
    Validation,
    format_validation,
    trace_module,
    validate_trace,
)

POOL = system.get("pool")


def check(trace: Trace) -> Validation:
    verdict = validate_trace(trace, timeout=120)
    print(format_validation(verdict))
    return verdict


def actions(trace: Trace) -> list[str]:
    return [step.action for step in trace.steps]


def uncompensated_blocks(trace: Trace) -> int:
    """Block steps that left every spare as it was: at the bound."""
    before = [trace.initial, *(step.state for step in trace.steps)]
    return sum(1 for i, step in enumerate(trace.steps)
               if step.action == "Block" and step.state["spare"] == before[i]["spare"]
               and step.state["blocker"] == before[i]["blocker"])


def replay_blocking(trace: Trace) -> None:
    """Each step is one the model with managed blocking takes, and reaches the recorded state
    (for Block, one of the states it may reach: the spare the pool picked)."""
    constants = trace.constants
    blocking = BlockingInstance(frozenset(constants["Workers"]), frozenset(constants["Spares"]),
                                constants["MaxSpares"])
    state = POOL.snapshot_of(trace.initial)
    for index, step in enumerate(trace.steps, start=1):
        args = POOL.model_args(step.action, step.params, constants)
        refused = blocking_refusal(state, step.action, args, blocking)
        assert refused is None, (trace.name, index, step.action, refused)
        recorded = POOL.snapshot_of(step.state)
        assert recorded in blocking_step(state, step.action, args, blocking), (
            trace.name, index, step.action)
        state = recorded


@pytest.mark.parametrize(("seed", "workers", "max_spares"),
                         [(seed, 2, 1) for seed in range(4)] + [(seed, 1, 2) for seed in range(4)]
                         + [(seed, 2, 2) for seed in range(4)])
def test_recorded_blocking_runs_are_behaviours_of_the_model(seed: int, workers: int,
                                                           max_spares: int) -> None:
    trace = record_blocking_run(seed, workers=workers, max_spares=max_spares)
    print(f"seed {seed}: {actions(trace)}")
    assert {"Block", "StartSpare", "Unblock", "Retire"} <= set(actions(trace))
    assert trace.constants["MaxSpares"] == max_spares
    assert len(trace.constants["Spares"]) <= max_spares
    assert uncompensated_blocks(trace) >= workers - 1  # every thread blocked, the bound reached
    assert all(on == "off" for on in trace.steps[-1].state["spare"].values())
    assert trace.steps[-1].state["phase"] == "terminated"
    replay_blocking(trace)


def test_a_run_that_never_blocks_is_recorded_without_spares() -> None:
    trace = recording.record_pool_run(3, tasks=4, workers=2)
    assert "Spares" not in trace.constants and "spare" not in trace.initial


def test_spares_name_one_slot_more_than_used_while_the_bound_allows() -> None:
    # One blocker, bound 3: s1 stands in for it; the late blocker adopts s1 once it is free,
    # or starts s2 when it comes first (the threads decide). One slot more than those used is
    # named (off), so that a Block below the bound has an off spare to start in the spec, as
    # the pool must.
    trace = record_blocking_run(0, workers=1, max_spares=3, blockers=1)
    started = {step.params["s"] for step in trace.steps if step.action == "StartSpare"}
    assert started in ({"s1"}, {"s1", "s2"})
    assert trace.constants["Spares"] == [f"s{i}" for i in range(1, len(started) + 2)]
    assert trace.constants["MaxSpares"] == 3


def test_record_blocking_run_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_spares=0"):
        record_blocking_run(0, max_spares=0)
    with pytest.raises(ValueError, match=r"blockers=4: must be an integer in 1\.\.3"):
        record_blocking_run(0, workers=2, max_spares=1, blockers=4)


def test_the_trace_of_a_run_that_blocked_needs_the_bound() -> None:
    recorder = PoolTraceRecorder()
    pool = WorkStealingPool(1, recorder=recorder, max_spares=1)

    def blocks() -> None:
        with pool.blocking():
            pass
    pool.submit(blocks).result(30)
    pool.shutdown(wait=True)
    with pytest.raises(ValueError, match="max_spares must be the pool's"):
        recorder.trace(1)
    assert recorder.trace(1, max_spares=1).constants["Spares"] == ["s1"]


# -- traces TLA+ cannot state ---------------------------------------------------------------

def blocking_trace() -> Trace:
    return record_blocking_run(1, workers=1, max_spares=1)


def test_spares_overlapping_workers_are_a_trace_error() -> None:
    trace = blocking_trace()
    changed = dataclasses.replace(trace, constants={**trace.constants, "Spares": ["w1"]})
    with pytest.raises(TraceError, match="both in Workers and in Spares"):
        trace_module(changed)


def test_a_spare_parameter_outside_spares_is_a_trace_error() -> None:
    trace = blocking_trace()
    steps = list(trace.steps)
    at = actions(trace).index("StartSpare")
    steps[at] = dataclasses.replace(steps[at], params={"s": "s9"})
    with pytest.raises(TraceError, match="s = 's9' is not in Spares"):
        trace_module(dataclasses.replace(trace, steps=tuple(steps)))


def test_a_blocking_trace_is_stated_with_its_spares() -> None:
    module, config = trace_module(blocking_trace())
    assert "Spares <- TraceSpares" in config and "MaxSpares = 1" in config
    assert "CompensationBounded" in config
    assert 'p.w \\in Workers /\\ SubmitExternal(p.t, p.w)' in module


# -- TLC's verdicts (a few seconds each) ----------------------------------------------------

def test_a_recorded_run_that_blocks_is_accepted_by_tlc() -> None:
    trace = record_blocking_run(0, workers=2, max_spares=2)
    taken = actions(trace)
    assert taken.count("StartSpare") >= 2 and taken.count("Retire") >= 2
    assert uncompensated_blocks(trace) >= 1
    verdict = check(trace)
    assert verdict.accepted, verdict.tlc.output[-3000:] if verdict.tlc else verdict
    assert format_validation(verdict).startswith(
        f"pool-blocking-seed-0: accepted, {len(trace.steps)} steps are a behaviour of "
        "WorkStealing's Spec")


class _DropsUnblock(PoolTraceRecorder):
    """A broken recording: the pool's Unblock steps are lost."""

    dropped: int | None = None  # how many steps were recorded when the first was dropped

    def record(self, action: str, params: dict[str, Any], state: PoolView) -> None:
        if action != "Unblock":
            super().record(action, params, state)
        elif self.dropped is None:
            self.dropped = len(self.steps)


def test_a_recording_that_drops_an_unblock_is_rejected_at_the_next_step() -> None:
    recorder = _DropsUnblock()
    pool = WorkStealingPool(1, recorder=recorder, max_spares=1)

    def blocks() -> str:
        with pool.blocking():
            pass
        return "done"
    assert pool.submit(blocks).result(30) == "done"
    pool.shutdown(wait=True)
    trace = recorder.trace(1, name="drops-unblock", max_spares=1)
    assert "Block" in actions(trace) and "Unblock" not in actions(trace)
    assert recorder.dropped is not None
    # The next step (StartSpare, or the blocker's Finish) reaches a state the pool's Unblock
    # left: w1 no longer blocked, without the step that unblocked it.
    after = trace.steps[recorder.dropped]
    verdict = check(trace)
    assert not verdict.accepted
    assert (verdict.first_rejected_step, verdict.action) == (recorder.dropped + 1, after.action)
    assert verdict.reason is not None
    if after.action == "Finish":
        assert verdict.reason == ("Finish(w=w1) is not enabled: w1 is blocked inside "
                                  "blocking(): its task cannot finish")
    else:
        assert 'blocked: only in the model "w1"' in verdict.reason, verdict.reason


def test_a_spare_started_beyond_the_bound_is_rejected_at_its_block() -> None:
    trace = record_blocking_run(0, workers=2, max_spares=2)
    # The run's pool had two spares; the trace says the bound was one.
    broken = dataclasses.replace(trace, name="beyond-the-bound",
                                 constants={**trace.constants, "MaxSpares": 1})
    second = next(i for i, step in enumerate(trace.steps, start=1)
                  if step.state["spare"]["s2"] != "off")
    verdict = check(broken)
    assert not verdict.accepted
    assert (verdict.first_rejected_step, verdict.action) == (second, "Block")
    assert verdict.reason is not None
    assert 'spare["s2"]: recorded "starting", model "off"' in verdict.reason
