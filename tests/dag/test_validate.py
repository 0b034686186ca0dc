"""Trace validation: TLC judges traces recorded from the production scheduler.

The recorder must see exactly the reference model's steps; TLC must accept what real threaded
runs of the Runner record, and reject, at the right step, traces that were tampered with or
recorded from a broken scheduler. Each TLC run takes 1-3 s; this module runs ten.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler
from refsched.conform.dag.broken import CompleteForgetsDependents
from refsched.dag import scheduler as scheduler_module
from refsched.errors import SchedulerError
from refsched.model import ACTIONS, INITIAL, ReferenceScheduler
from refsched.model.dag.graph import action_args
from refsched.verify.dag.recording import TraceRecorder, record_runner_run
from refsched.verify.itf import Step, Trace, trace_from_itf, trace_to_itf
from refsched.verify.specstate import snapshot_of
from refsched.verify.tla import Function
from refsched.verify.tlc import spec_dir
from refsched.verify.validate import (
    TLCInternalError,
    TraceError,
    Validation,
    format_validation,
    trace_module,
    validate_trace,
)

IDS = ("a", "b", "c", "d")


def check(trace: Trace) -> Validation:
    verdict = validate_trace(trace, timeout=120)
    print(format_validation(verdict))
    return verdict


def model_divergence(trace: Trace) -> int | None:
    """The first step the reference model cannot take as recorded (None: it takes them all)."""
    state = INITIAL
    max_concurrency = trace.constants["MaxConcurrency"]
    for index, step in enumerate(trace.steps, start=1):
        action = ACTIONS[step.action]
        args = action_args(action, step.params, max_concurrency)
        if action.refusal(state, *args) is not None:
            return index
        state = action.step(state, *args)
        if state != snapshot_of(step.state):
            return index
    return None


# -- the recorder sees the model's steps ----------------------------------------------------

def random_calls(rng: random.Random, n: int) -> list[tuple[str, tuple[Any, ...]]]:
    """API calls on ids drawn from a small pool: refusals, stale and repeated callbacks happen."""
    def task() -> Hashable:
        return rng.choice((*IDS, *IDS, "z"))

    def generation() -> Any:
        return rng.choice((1, 1, 1, 2, 2, 3, 0, "1"))

    calls: list[tuple[str, tuple[Any, ...]]] = []
    for _ in range(n):
        kind = rng.choice(("submit", "submit", "start", "ready", "ready", "complete", "complete",
                           "fail", "acknowledge_cancel", "cancel", "retry", "close"))
        if kind == "submit":
            calls.append((kind, (task(), rng.sample(IDS, rng.randint(0, 2)))))
        elif kind == "start":
            calls.append((kind, ()))
        elif kind == "ready":
            calls.append((kind, (rng.choice((None, None, 0, 1, 2)),)))
        elif kind in ("complete", "fail", "acknowledge_cancel"):
            calls.append((kind, (task(), generation())))
        elif kind == "cancel":
            calls.append((kind, (task(), rng.choice((None, None, 1, 2)))))
        elif kind == "retry":
            calls.append((kind, (task(),)))
        elif rng.random() < 0.2:  # close rarely: nothing but callbacks follow it
            calls.append((kind, (rng.random() < 0.5,)))
    return calls


def outcome(call: Callable[[], Any]) -> Any:
    try:
        value = call()
    except SchedulerError as exc:
        return type(exc).__name__
    if isinstance(value, list):  # claims: compare ids and generations
        return [(c.task_id, c.generation) for c in value]
    return value if not hasattr(value, "by_state") else value.by_state()


@pytest.mark.parametrize("seed", range(40))
def test_recorder_steps_are_the_reference_models_history(seed: int) -> None:
    print(f"seed {seed}")
    rng = random.Random(seed)
    max_concurrency = rng.choice((1, 2, 3))
    recorder = TraceRecorder()
    impl = TaskScheduler(max_concurrency, recorder=recorder)
    model = ReferenceScheduler(max_concurrency)
    for name, args in random_calls(rng, 60):
        got = outcome(lambda: getattr(impl, name)(*args))  # noqa: B023 (called at once)
        want = outcome(lambda: getattr(model, name)(*args))  # noqa: B023
        assert got == want, (name, args)
    history = [(name, dict(zip(ACTIONS[name].params, args, strict=False)))
               for name, args in model.history]
    assert recorder.actions() == history
    # Each recorded state is the model's state after the same step.
    state = INITIAL
    for (name, args), (_, _, recorded) in zip(model.history, recorder.steps, strict=True):
        state = ACTIONS[name].step(state, *args)
        assert recorded == state, name


def test_no_recorder_records_nothing_and_changes_nothing() -> None:
    plain, recorded = TaskScheduler(2), TaskScheduler(2, recorder=TraceRecorder())
    for s in (plain, recorded):
        s.submit("a")
        s.submit("b", ["a"])
        s.start()
        s.complete("a", s.ready()[0].generation)
    assert plain.snapshot() == recorded.snapshot()


# -- TLC accepts what real runs record ------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2])
def test_recorded_runner_runs_are_accepted(seed: int) -> None:
    trace = record_runner_run(seed)
    print(f"seed {seed}: {[step.action for step in trace.steps]}")
    verdict = check(trace)
    assert verdict.accepted, verdict.tlc.output[-3000:] if verdict.tlc else verdict
    assert verdict.steps == len(trace.steps) > 10
    assert verdict.first_rejected_step is None and verdict.violated is None
    assert "accepted" in format_validation(verdict)


def test_itf_trace_with_omitted_variables_is_accepted() -> None:
    """Read back from ITF (NoTask as a string), with variables left out of some states."""
    trace = trace_from_itf(json.loads(json.dumps(trace_to_itf(record_runner_run(3)))))
    assert any(v == "NoTask" for v in trace.steps[-1].state["blockedBy"].values())
    thinned = [Step(s.action, s.params,
                    {k: v for k, v in s.state.items() if index % 2 or k not in ("seq", "claims")})
               for index, s in enumerate(trace.steps)]
    verdict = check(dataclasses.replace(trace, steps=tuple(thinned)))
    assert verdict.accepted, verdict


# -- TLC rejects tampered traces at the step tampered with ----------------------------------

def sequential_trace() -> Trace:
    """A fixed sequence of calls on one scheduler, recorded: every action, known step numbers."""
    recorder = TraceRecorder()
    s = TaskScheduler(2, recorder=recorder)
    s.submit("a")                      # 1
    s.submit("b", ["a"])               # 2
    s.submit("c", ["a"])               # 3
    s.submit("d", ["b", "c"])          # 4
    s.start()                          # 5
    assert [c.task_id for c in s.ready()] == ["a"]  # 6 Claim(1)
    s.complete("a", 1)                 # 7
    s.ready()                          # 8 Claim(2): b, c
    s.cancel("c")                      # 9 Cancel: a stop request
    s.fail("b", 1)                     # 10 Fail: d blocked
    s.acknowledge_cancel("c", 1)       # 11
    s.retry("b")                       # 12 Retry
    with pytest.raises(SchedulerError):
        s.complete("a", 0)             # 13 StaleCallback
    s.ready()                          # 14 Claim(1): b
    s.complete("b", 2)                 # 15
    s.complete("b", 2)                 # 16 RepeatedCallback
    s.submit("e", ["b"], optional=["d"])  # 17 SubmitOptional: d blocked, so e is ready
    s.submit("f", ["e"])               # 18
    s.add_deps("f", ["d"])             # 19 AddDeps: a dead required dep blocks f
    s.close(cancel_pending=True)       # 20
    return recorder.trace(2, name="sequential")


def replace_step(trace: Trace, index: int, **changes: Any) -> Trace:
    steps = list(trace.steps)
    steps[index - 1] = dataclasses.replace(steps[index - 1], **changes)
    return dataclasses.replace(trace, steps=tuple(steps))


def with_value(state: Any, name: str, key: Hashable, value: Any) -> dict[str, Any]:
    return {**state, name: Function({**state[name], key: value})}


def test_sequential_trace_takes_every_action() -> None:
    trace = sequential_trace()
    assert {step.action for step in trace.steps} == set(ACTIONS)
    assert model_divergence(trace) is None


def test_changed_state_value_is_rejected_at_its_step() -> None:
    trace = sequential_trace()
    assert trace.steps[7].state["state"]["b"] == "running"
    tampered = replace_step(trace, 8, state=with_value(trace.steps[7].state, "state", "b",
                                                       "ready"))
    verdict = check(tampered)
    assert not verdict.accepted
    assert (verdict.first_rejected_step, verdict.action, verdict.params) == (8, "Claim", {"k": 2})
    assert verdict.reason is not None and 'state["b"]: recorded "ready", model "running"' \
        in verdict.reason
    assert "rejected at step 8 of 20, Claim(k=2)" in format_validation(verdict)


def test_swapped_steps_are_rejected_at_the_first() -> None:
    trace = sequential_trace()
    steps = list(trace.steps)
    steps[8], steps[9] = steps[9], steps[8]  # Fail(b) now comes before Cancel(c)
    verdict = check(dataclasses.replace(trace, steps=tuple(steps)))
    assert (verdict.first_rejected_step, verdict.action) == (9, "Fail")
    assert verdict.reason is not None and 'cancelRequested["c"]' in verdict.reason


def test_changed_parameter_is_rejected_at_its_step() -> None:
    trace = sequential_trace()
    assert trace.steps[6].params == {"t": "a", "g": 1}
    verdict = check(replace_step(trace, 7, params={"t": "a", "g": 2}))
    assert (verdict.first_rejected_step, verdict.action, verdict.params) == (
        7, "Complete", {"t": "a", "g": 2})
    assert verdict.reason is not None and "not enabled" in verdict.reason
    assert "generation 2 is stale" in verdict.reason


def test_changed_initial_state_is_rejected_before_any_step() -> None:
    trace = sequential_trace()
    verdict = check(dataclasses.replace(trace, initial={**trace.initial, "nextSeq": 2}))
    assert verdict.first_rejected_step == 0 and verdict.action is None
    assert verdict.reason is not None and "nextSeq: recorded 2, model 1" in verdict.reason
    assert "rejected at the initial state" in format_validation(verdict)


# -- TLC rejects what broken schedulers record ----------------------------------------------
# (the schedulers that break one rule each are those the conformance oracle is tested with)

def test_mutant_complete_without_dependents_is_rejected_at_the_complete() -> None:
    recorder = TraceRecorder()
    s = CompleteForgetsDependents(2, recorder=recorder)
    s.submit("a")
    s.submit("b", ["a"])
    s.start()
    s.ready()
    s.complete("a", 1)  # step 5
    assert s.ready() == []  # b never becomes ready: no step
    verdict = check(recorder.trace(2, name="complete-forgets-dependents"))
    assert (verdict.first_rejected_step, verdict.action, verdict.params) == (
        5, "Complete", {"t": "a", "g": 1})
    assert verdict.reason is not None
    assert 'state["b"]: recorded "pending", model "ready"' in verdict.reason


def test_mutant_ready_out_of_seq_order_in_a_runner_is_rejected_at_the_claim(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ready() pops the newest ready version first; the threaded Runner records it claiming."""
    def newest_first(heap: list[int]) -> int:
        return heap.pop(heap.index(max(heap)))

    monkeypatch.setattr(scheduler_module, "_heappop", newest_first)
    trace = record_runner_run(4, tasks=6, workers=1, max_deps=1)
    monkeypatch.undo()
    wrong = model_divergence(trace)
    assert wrong is not None and trace.steps[wrong - 1].action == "Claim"
    verdict = check(trace)
    assert (verdict.first_rejected_step, verdict.action) == (wrong, "Claim")
    assert verdict.reason is not None and "is enabled, but the state it reaches" in verdict.reason


def test_spec_invariant_broken_along_the_trace_is_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a spec whose Claim ignores running versions, a trace over-claiming is a behaviour
    of it, and ConcurrencyBound names the state it breaks."""
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    module = copy / "Scheduler.tla"
    guard = "        /\\ k <= MaxConcurrency - Cardinality(running)\n"
    assert module.read_text().count(guard) == 1
    module.write_text(module.read_text().replace(guard, ""))
    monkeypatch.setenv("REFSCHED_SPEC_DIR", str(copy))
    recorder = TraceRecorder()
    s = TaskScheduler(2, recorder=recorder)
    s.submit("a")
    s.submit("b")
    s.start()
    s.ready()  # Claim(2): over the bound of the trace's MaxConcurrency = 1
    verdict = check(recorder.trace(1))
    assert not verdict.accepted
    assert (verdict.violated, verdict.first_rejected_step, verdict.action) == (
        "ConcurrencyBound", 4, "Claim")
    assert "ConcurrencyBound" in format_validation(verdict)


# -- traces the spec cannot speak of --------------------------------------------------------

def small_trace() -> Trace:
    recorder = TraceRecorder()
    s = TaskScheduler(1, recorder=recorder)
    s.submit("a")
    s.start()
    return recorder.trace(1)


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: dataclasses.replace(t, constants={**t.constants, "Tasks": ["a", 1]}),
     "all strings or all integers"),
    (lambda t: dataclasses.replace(t, constants={**t.constants, "Tasks": ["a", "NoTask"]}),
     "NoTask"),
    (lambda t: dataclasses.replace(t, constants={**t.constants, "MaxConcurrency": 0}),
     "MaxConcurrency"),
    (lambda t: replace_step(t, 2, action="Begin"), "unknown action"),
    (lambda t: replace_step(t, 1, params={"t": "a"}), "missing parameters D"),
    (lambda t: replace_step(t, 1, params={"t": "x", "D": frozenset()}), "not in Tasks"),
    (lambda t: replace_step(t, 1, state={**t.steps[0].state, "nextSeq": "2"}), "nextSeq"),
    (lambda t: dataclasses.replace(t, initial={}, steps=()), "no states"),
])
def test_inexpressible_trace_is_a_trace_error(change: Callable[[Trace], Trace],
                                               message: str) -> None:
    with pytest.raises(TraceError, match=message):
        trace_module(change(small_trace()))


def test_trace_module_names_its_parts() -> None:
    module, config = trace_module(small_trace(), "Check")
    assert module.startswith("---- MODULE Check ----")
    assert "EXTENDS Scheduler" in module and 'TraceActions == <<\n    "Submit",' in module
    assert "Tasks <- TraceTasks" in config and "MaxConcurrency = 1" in config
    assert config.rstrip().endswith("TraceAccepted")


# -- any string is an id: TLC reads it, equal exactly when equal -----------------------------

HOSTILE_IDS = ("中文", "a\rb", "a\nb", "a\u2028b", "%41", "A", 'say "hi"', "back\\slash", "(*",
               "*)", "\\*", "tab\there")
HOSTILE_NAME = 'run (* not a comment *) \\* "quoted" \r\n\u2028 中 (*'


def hostile_trace() -> Trace:
    """Every action but Close over ids TLC 2.15 could not lex as string literals, if written
    as they are: CJK letters, line breaks, quotes, backslashes, comment delimiters."""
    a, b, c, d, *rest = HOSTILE_IDS
    recorder = TraceRecorder()
    s = TaskScheduler(2, recorder=recorder)
    s.submit(a)
    s.submit(b, [a])
    s.submit(c, [a])
    s.submit(d, [b, c])
    for t in rest:
        s.submit(t)
    s.start()
    claimed = [x.task_id for x in s.ready()]
    assert claimed == [a, rest[0]]
    s.complete(a, 1)
    s.fail(rest[0], 1)
    s.retry(rest[0])
    s.cancel(rest[1])
    with pytest.raises(SchedulerError):
        s.complete(a, 0)
    return recorder.trace(2, name=HOSTILE_NAME)


def test_trace_module_is_ascii_and_no_user_text_opens_or_closes_a_comment() -> None:
    module, config = trace_module(hostile_trace())
    assert module.isascii() and config.isascii()
    assert "\r" not in module and "\r" not in config
    assert module.count("(*") == module.count("*)") == 1  # the module's own comment
    assert "(*" not in config and "*)" not in config
    assert all(line.startswith("\\*") for line in config.splitlines() if "\\*" in line)


def test_ids_and_names_of_any_characters_are_accepted_by_tlc() -> None:
    trace = hostile_trace()
    verdict = check(trace)
    assert verdict.accepted, verdict.tlc.output[-3000:] if verdict.tlc else verdict
    assert format_validation(verdict).startswith(repr(HOSTILE_NAME) + ": accepted")


def test_ids_of_any_characters_keep_apart_when_tlc_rejects_a_step() -> None:
    """'%41' and 'A' must stay two ids: a Claim recorded with the other one is rejected."""
    trace = hostile_trace()
    claim = next(i for i, s in enumerate(trace.steps, start=1) if s.action == "Claim")
    state = trace.steps[claim - 1].state
    assert state["state"]["%41"] == "running" and state["state"]["A"] == "ready"
    swapped = with_value(with_value(state, "state", "%41", "ready"), "state", "A", "running")
    verdict = check(replace_step(trace, claim, state=swapped))
    assert (verdict.first_rejected_step, verdict.action) == (claim, "Claim")
    assert verdict.reason is not None and 'state["%41"]: recorded "ready"' in verdict.reason


def test_integers_tlc_cannot_hold_are_a_trace_error() -> None:
    trace = small_trace()
    with pytest.raises(TraceError, match="out of TLC's integer range"):
        trace_module(replace_step(trace, 1, state={**trace.steps[0].state,
                                                   "nextSeq": 2**40}))
    with pytest.raises(TraceError, match="out of TLC's integer range"):
        trace_module(dataclasses.replace(trace, constants={**trace.constants,
                                                           "MaxConcurrency": 2**31}))


# -- no verdict is not a verdict ------------------------------------------------------------

def test_a_module_tlc_cannot_parse_is_an_internal_error_not_a_rejection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import refsched.verify.validate as validate

    stated = validate.trace_module

    def broken(trace: Trace, module_name: str = "TraceCheck") -> tuple[str, str]:
        module, config = stated(trace, module_name)
        return module.replace("====\n", "(* never closed\n====\n"), config

    monkeypatch.setattr(validate, "trace_module", broken)
    with pytest.raises(TLCInternalError, match="internal error, not a verdict on the trace "
                       "sequential: TLC could not parse") as caught:
        validate_trace(small_trace_named("sequential"))
    assert "TLC2 Version" not in str(caught.value) and "\n" not in str(caught.value)


def small_trace_named(name: str) -> Trace:
    return dataclasses.replace(small_trace(), name=name)


@pytest.mark.parametrize(("options", "message"), [
    ({"workers": 0}, "workers"), ({"timeout": 0}, "timeout"),
    ({"timeout": float("nan")}, "timeout"),
])
def test_validate_trace_refuses_options_tlc_cannot_take(options: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_trace(small_trace(), **options)


@pytest.mark.parametrize("options", [{"tasks": 0}, {"workers": 0}, {"max_deps": -1}])
def test_record_runner_run_refuses_a_run_it_cannot_make(options: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        record_runner_run(1, **options)
