"""Spec traces replay cleanly against the model and the schedulers, and replay catches what breaks.

The traces are walks of the model's state graph over ids ``a``, ``b`` (``MaxConcurrency`` 2, two
generations per id), the graph ``spec/MCSchedulerTraces.cfg`` gives TLC; an edge cover of it
replays every edge once or more. The must-fail tests replay broken schedulers
(``tests/mutants/broken_schedulers.py``, and the miscounting ones of ``test_lockstep``).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler, TaskState
from refsched.dag.scheduler import DurationSummary, SchedulerStats
from refsched.model import ACTIONS, INITIAL, ReferenceScheduler
from refsched.model.dag.actions import EDGE_ACTIONS
from refsched.model.dag.graph import Edge, ModelGraph, action_args, explore
from refsched.types import Snapshot
from refsched.verify.itf import Step, Trace, read_traces, write_traces
from refsched.verify.replay import (
    Divergence,
    ReplayReport,
    StepMismatch,
    apply_step,
    counter_rows,
    format_divergence,
    format_report,
    replay,
)
from refsched.verify.specstate import spec_state
from refsched.verify.tla import Function, ModelValue
from tests.dag.test_lockstep import MiscountsClaims, WaitsLongerThanInTotal
from tests.mutants.broken_schedulers import (
    BROKEN,
    BrokenScheduler,
    CancelIgnoresRunning,
    ClaimsTwice,
    FailReportedAsSuccess,
    RetryWithoutDescendants,
    StaleCallbackAccepted,
)

IDS = ("a", "b")
MAX_CONCURRENCY = 2
CONSTANTS = {"Tasks": list(IDS), "MaxConcurrency": MAX_CONCURRENCY}
SEED = 20240611
FACTORIES = [TaskScheduler, ReferenceScheduler]


# -- Traces from the model --------------------------------------------------------------------

class Tracer:
    """Traces from model edges; each state converted to the spec's variables once."""

    def __init__(self) -> None:
        self.states: dict[Snapshot, dict[str, Any]] = {}

    def spec(self, s: Snapshot) -> dict[str, Any]:
        state = self.states.get(s)
        if state is None:
            state = self.states[s] = spec_state(s, IDS)
        return state

    def trace(self, name: str, edges: Iterable[Edge]) -> Trace:
        steps = [Step(e.action, e.param_map, self.spec(e.target)) for e in edges]
        return Trace(name, CONSTANTS, self.spec(INITIAL), steps)


def scripted(name: str, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> Trace:
    """The trace of ``calls`` (spec action, parameters) taken by the model from Init."""
    s, edges = INITIAL, []
    for action, params in calls:
        args = action_args(ACTIONS[action], params, MAX_CONCURRENCY)
        assert ACTIONS[action].enabled(s, *args), (action, params)
        target = ACTIONS[action].step(s, *args)
        edges.append(Edge(s, action, tuple(params.items()), target))
        s = target
    return Tracer().trace(name, edges)


def edge_cover(graph: ModelGraph) -> list[list[Edge]]:
    """Walks from Init that take every edge of ``graph`` at least once.

    Each walk follows the BFS tree to a state with an edge not yet taken, then takes untaken
    edges while the state it is in has one, its self-loops first (they keep it there).
    """
    parent: dict[Snapshot, Edge] = {}
    for out in graph.edges.values():
        for e in out:
            if e.target != graph.initial and e.target not in parent:
                parent[e.target] = e

    def path_to(s: Snapshot) -> list[Edge]:
        path = []
        while s != graph.initial:
            path.append(parent[s])
            s = parent[s].source
        return path[::-1]

    # untaken[s]: s's edges not yet taken, popped from the end: self-loops sorted last
    untaken = {s: dict.fromkeys(sorted(out, key=lambda e: e.target == e.source))
               for s, out in graph.edges.items()}
    walks = []
    for s in graph.edges:  # breadth-first order
        while untaken[s]:
            walk = path_to(s)
            for e in walk:
                untaken[e.source].pop(e, None)
            here = s
            while untaken[here]:
                e, _ = untaken[here].popitem()
                walk.append(e)
                here = e.target
            walks.append(walk)
    return walks


def random_walks(graph: ModelGraph, count: int, length: int, seed: int) -> list[list[Edge]]:
    rng = random.Random(seed)
    walks = []
    for _ in range(count):
        s, walk = graph.initial, []
        while len(walk) < length and graph.edges[s]:
            e = rng.choice(graph.edges[s])
            walk.append(e)
            s = e.target
        walks.append(walk)
    return walks


@pytest.fixture(scope="module")
def graph() -> ModelGraph:
    return explore(list(IDS), MAX_CONCURRENCY, 2)


@pytest.fixture(scope="module")
def cover(graph: ModelGraph) -> list[Trace]:
    tracer = Tracer()
    return [tracer.trace(f"cover-{i:05d}", walk) for i, walk in enumerate(edge_cover(graph))]


@pytest.fixture(scope="module")
def walks(graph: ModelGraph) -> list[Trace]:
    print(f"random walks: seed {SEED}")
    tracer = Tracer()
    return [tracer.trace(f"walk-{SEED}-{i:03d}", walk)
            for i, walk in enumerate(random_walks(graph, 300, 40, SEED))]


def only_divergence(report: ReplayReport) -> Divergence:
    assert len(report.divergences) == 1, format_report(report)
    return report.divergences[0]


FAIL_A = scripted("fail-a", [
    ("Submit", {"t": "a", "D": frozenset()}),
    ("Submit", {"t": "b", "D": frozenset({"a"})}),
    ("Start", {}),
    ("Claim", {"k": 1}),
    ("Fail", {"t": "a", "g": 1}),
    ("Retry", {"t": "a"}),
])


# -- Clean replays ----------------------------------------------------------------------------

@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_random_walks_replay_cleanly(walks: list[Trace], factory: Any) -> None:
    report = replay(walks, factory, stop_at_first=False)
    assert report.ok, format_report(report)
    assert report.traces == len(walks)
    assert report.steps == sum(len(t.steps) for t in walks)


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_every_edge_of_the_graph_replays_cleanly(graph: ModelGraph, cover: list[Trace],
                                                 factory: Any) -> None:
    report = replay(cover, factory)
    print(f"\n{factory.__name__}: {format_report(report)}")
    assert report.ok, format_report(report)
    assert report.edges == graph.edge_count
    # the traces instance has neither kind of edge step: its gates are off
    assert all(c.edges for name, c in report.coverage.items()
               if name not in EDGE_ACTIONS), format_report(report)


def test_a_bundle_read_back_from_disk_replays_cleanly(walks: list[Trace], tmp_path: Path) -> None:
    bundle = tmp_path / "walks.jsonl.gz"
    write_traces(bundle, walks)
    report = replay(read_traces(bundle))
    assert report.ok, format_report(report)
    assert report.steps == sum(len(t.steps) for t in walks)


def test_ids_written_as_tlc_model_values_replay_cleanly() -> None:
    def tlc(value: Any) -> Any:
        if isinstance(value, str) and value in IDS:
            return ModelValue(value)
        if isinstance(value, frozenset):
            return frozenset(tlc(v) for v in value)
        if isinstance(value, Function):
            return Function({tlc(k): tlc(v) for k, v in value.items()})
        return value

    def as_tlc(state: Mapping[str, Any]) -> dict[str, Any]:
        return {name: tlc(value) for name, value in state.items()}

    trace = Trace(FAIL_A.name, CONSTANTS, as_tlc(FAIL_A.initial), [
        Step(s.action, {k: tlc(v) for k, v in s.params.items()}, as_tlc(s.state))
        for s in FAIL_A.steps])
    report = replay([trace])
    assert report.ok, format_report(report)
    assert report.steps == len(FAIL_A.steps)


def test_progress_is_reported_after_each_trace(walks: list[Trace]) -> None:
    seen: list[tuple[int, int]] = []
    report = replay(walks[:5], on_progress=lambda traces, steps: seen.append((traces, steps)))
    assert [t for t, _ in seen] == [1, 2, 3, 4, 5]
    assert seen[-1][1] == report.steps == sum(len(t.steps) for t in walks[:5])


# -- Broken implementations are caught --------------------------------------------------------

EXPECTED_ACTION = {
    FailReportedAsSuccess: "Fail",
    ClaimsTwice: "Claim",
    CancelIgnoresRunning: "Cancel",
    RetryWithoutDescendants: "Retry",
    StaleCallbackAccepted: "StaleCallback",
}


@pytest.mark.parametrize("broken", BROKEN, ids=lambda cls: cls.__name__)
def test_replay_catches_a_broken_scheduler(cover: list[Trace],
                                           broken: type[BrokenScheduler]) -> None:
    report = replay(cover, broken)
    d = only_divergence(report)
    text = format_divergence(d)
    print(text)
    assert d.side == "implementation"
    assert d.action == EXPECTED_ACTION[broken]
    trace = next(t for t in cover if t.name == d.trace)
    assert trace.steps[d.step - 1].action == d.action
    assert f"trace {d.trace}, step {d.step}: {d.action}(" in text
    assert report.steps == sum(len(t.steps) for t in cover[:report.traces]) - (
        len(trace.steps) - d.step + 1)


def test_without_stop_at_first_each_diverging_trace_is_reported(walks: list[Trace]) -> None:
    report = replay(walks, FailReportedAsSuccess, stop_at_first=False)
    assert report.traces == len(walks)
    failing = [t.name for t in walks if any(s.action == "Fail" for s in t.steps)]
    assert [d.trace for d in report.divergences] == failing
    assert {d.action for d in report.divergences} == {"Fail"}


def test_a_wrong_answer_is_reported_with_the_call() -> None:
    d = only_divergence(replay([FAIL_A], FailReportedAsSuccess))
    assert (d.trace, d.step, d.action, d.side) == ("fail-a", 5, "Fail", "implementation")
    assert "fail('a', 1) returned TaskState.SUCCEEDED, expected TaskState.FAILED" in d.reason


def test_the_diff_shows_the_differing_field_side_by_side() -> None:
    trace = scripted("cancel-running", [
        ("Submit", {"t": "a", "D": frozenset()}),
        ("Start", {}),
        ("Claim", {"k": 1}),
        ("Cancel", {"t": "a"}),
    ])
    d = only_divergence(replay([trace], CancelIgnoresRunning))
    assert (d.step, d.action, d.side) == (4, "Cancel", "implementation")
    assert d.diff.splitlines()[0].split() == ["id", "field", "trace", "implementation"]
    assert re.search(r"^\s*a\s+cancel_requested\s+True\s+False$", d.diff, re.M), d.diff
    assert len(d.diff.splitlines()) == 2  # only the differing field
    assert d.diff in format_divergence(d)


# -- Counters ---------------------------------------------------------------------------------

class CountsFromOne(TaskScheduler):
    """A new scheduler says it took a submission already."""

    def stats(self) -> SchedulerStats:
        counted = super().stats()
        return dataclasses.replace(counted, submitted=counted.submitted + 1)


@pytest.mark.parametrize(("broken", "step", "action", "counter", "values"), [
    (MiscountsClaims, 5, "Fail", "claimed", ("1", "0")),
    (WaitsLongerThanInTotal, 4, "Claim", "ready_wait.max", None),
    (CountsFromOne, 0, "init", "submitted", ("0", "1")),
], ids=["claimed", "ready-wait-max", "at-init"])
def test_a_miscount_is_named_at_the_step_it_shows_at(
        broken: type[TaskScheduler], step: int, action: str, counter: str,
        values: tuple[str, str] | None) -> None:
    d = only_divergence(replay([FAIL_A], broken))
    assert (d.trace, d.step, d.action, d.side) == ("fail-a", step, action, "implementation")
    assert d.reason == f"stats() is not what the trace's steps count: {counter}", d.reason
    # the table snapshot differences are shown in: no id, the counter, trace, implementation
    header, row = d.diff.splitlines()
    assert header.split() == ["id", "field", "trace", "implementation"]
    assert row.split()[0] == f"stats().{counter}", d.diff
    if values is not None:
        assert tuple(row.split()[1:]) == values, d.diff
    assert d.diff in format_divergence(d)


def test_replay_catches_a_miscount_on_the_edge_cover(cover: list[Trace]) -> None:
    d = only_divergence(replay(cover, MiscountsClaims))
    assert d.action in ("Fail", "AcknowledgeCancel"), format_divergence(d)
    assert "stats().claimed" in d.diff


def test_durations_must_stay_within_their_totals() -> None:
    counted = SchedulerStats(claimed=1, ready_wait=DurationSummary(1, 0.5, 0.75),
                             run_time=DurationSummary(0, -0.25, 0.0))
    expected = {"claimed": 1, "ready_wait.count": 1, "run_time.count": 0}
    assert counter_rows(expected, counted) == [
        ("stats().ready_wait.max", "between 0 and the total 0.5", "0.75"),
        ("stats().run_time.total", ">= 0", "-0.25"),
    ]
    sound = dataclasses.replace(counted, ready_wait=DurationSummary(1, 0.5, 0.5),
                                run_time=DurationSummary())
    assert counter_rows(expected, sound) == []
    assert counter_rows({"claimed": 2}, sound) == [("stats().claimed", "2", "1")]
    assert counter_rows({"claimed": 2}, object()) == [("stats().claimed", "2", "missing")]


# -- Traces the model does not accept ---------------------------------------------------------

def tampered(trace: Trace, index: int, **changes: Any) -> Trace:
    """``trace`` with some variables of the state after step ``index`` replaced."""
    steps = list(trace.steps)
    old = steps[index - 1]
    steps[index - 1] = Step(old.action, old.params, {**old.state, **changes})
    return Trace(f"{trace.name}-tampered", trace.constants, trace.initial, steps)


def test_a_tampered_state_is_a_model_divergence() -> None:
    state = FAIL_A.steps[4].state
    trace = tampered(FAIL_A, 5, state=Function({**state["state"], "b": "ready"}))
    d = only_divergence(replay([trace]))
    assert (d.trace, d.step, d.action, d.side) == ("fail-a-tampered", 5, "Fail", "model")
    assert re.search(r"^\s*b\s+state\s+ready\s+blocked$", d.diff, re.M), d.diff
    assert "the model diverges from the trace" in format_divergence(d)


def test_a_tampered_scheduler_variable_is_a_model_divergence() -> None:
    trace = tampered(FAIL_A, 2, nextSeq=7)
    d = only_divergence(replay([trace]))
    assert (d.step, d.action, d.side) == (2, "Submit", "model")
    assert re.search(r"^\s+next_seq\s+7\s+3$", d.diff, re.M), d.diff


def test_a_trace_not_starting_in_init_is_a_model_divergence() -> None:
    initial = {**FAIL_A.initial, "started": True}
    d = only_divergence(replay([Trace("late", CONSTANTS, initial, FAIL_A.steps)]))
    assert (d.step, d.action, d.side) == (0, "init", "model")
    assert "started" in d.diff


def test_a_step_the_model_does_not_enable_is_a_model_divergence() -> None:
    steps = list(FAIL_A.steps)
    del steps[2]  # Claim before Start
    d = only_divergence(replay([Trace("no-start", CONSTANTS, FAIL_A.initial, steps)]))
    assert (d.step, d.action, d.side) == (3, "Claim", "model")
    assert "does not enable" in d.reason


@pytest.mark.parametrize("step", [
    Step("Submit", {"t": "a"}, FAIL_A.steps[0].state),  # no D
    Step("Submit", {"t": "a", "D": frozenset()}, {"started": False}),  # not a state
    Step("Launch", {}, FAIL_A.steps[0].state),  # not an action
], ids=["missing-parameter", "malformed-state", "unknown-action"])
def test_a_malformed_step_is_a_model_divergence(step: Step) -> None:
    d = only_divergence(replay([Trace("bad", CONSTANTS, FAIL_A.initial, [step])]))
    assert (d.step, d.side) == (1, "model")
    assert d.action == step.action


# -- apply_step alone -------------------------------------------------------------------------

def started(factory: Any, *graph: tuple[Hashable, Sequence[Hashable]]) -> Any:
    s = factory(MAX_CONCURRENCY)
    for task_id, deps in graph:
        s.submit(task_id, deps)
    s.start()
    return s


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_apply_step_takes_each_action_through_the_api(factory: Any) -> None:
    s = started(factory, ("b", []), ("a", []))
    apply_step(s, "Claim", {"k": 2})  # b then a: seq order
    apply_step(s, "Complete", {"t": "b", "g": 1})
    apply_step(s, "RepeatedCallback", {"t": "b"})
    apply_step(s, "StaleCallback", {"t": "b", "g": 2})
    apply_step(s, "Cancel", {"t": "a"})
    apply_step(s, "AcknowledgeCancel", {"t": "a", "g": 1})
    apply_step(s, "Retry", {"t": "a"})
    apply_step(s, "Submit", {"t": "b", "D": frozenset({"a"})})
    apply_step(s, "Close", {"cancelPending": True})
    assert s.snapshot().tasks["b"].state is TaskState.CANCELLED


def test_apply_step_insists_on_exactly_k_claims() -> None:
    with pytest.raises(StepMismatch, match=re.escape(
            "Claim(k=1): ready(limit=1) returned [('a', 1), ('b', 1)], expected [('a', 1)]")):
        apply_step(started(ClaimsTwice, ("a", []), ("b", [])), "Claim", {"k": 1})


def test_apply_step_insists_on_the_stale_generation_error() -> None:
    s = StaleCallbackAccepted(MAX_CONCURRENCY)
    s.submit("a")
    s.submit("a")
    with pytest.raises(StepMismatch, match="expected StaleGenerationError naming generation 1, "
                                           "current 2"):
        apply_step(s, "StaleCallback", {"t": "a", "g": 1})


def test_apply_step_reports_an_unexpected_error() -> None:
    s = TaskScheduler(MAX_CONCURRENCY)
    s.submit("a")
    with pytest.raises(StepMismatch, match="raised InvalidTransitionError") as caught:
        apply_step(s, "Complete", {"t": "a", "g": 1}, before=s.snapshot())
    assert caught.value.__cause__ is not None


def test_apply_step_refuses_what_is_not_a_spec_step() -> None:
    with pytest.raises(ValueError, match="not an action of the spec"):
        apply_step(TaskScheduler(1), "Launch", {})
    with pytest.raises(ValueError, match="only 0 ready"):
        apply_step(started(TaskScheduler), "Claim", {"k": 1})
