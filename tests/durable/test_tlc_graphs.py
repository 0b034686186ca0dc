"""Model = spec on TLC's whole state graph of three durable instances: the traces instance, the
time corpus instance and the edges instance (the last also holds with its recorded count);
each graph equals the model's, state for state and edge for edge, every check holds on every
state and step of it, and a model that breaks one rule differs from it
(tests/durable/test_tlc.py holds the other TLC runs and the spec's mutants). A file of its own:
the dumps and matches are minutes, and each test file runs on one process.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

import pytest

from refsched.model.dag.graph import Edge
from refsched.model.durable import (
    ACTIONS,
    EDGE_ACTIONS,
    DurableSnapshot,
    violated,
    violated_by_step,
)
from refsched.model.durable import actions as durable_actions
from refsched.model.durable.actions import Limits
from refsched.types import TaskState
from refsched.verify import stategraph
from refsched.verify import system as systems
from refsched.verify.durable import spec as durablespec
from refsched.verify.durable.spec import TRACES_CONFIG, read_instance
from refsched.verify.durable.system import EDGES_CONFIG, TIME_CORPUS_CONFIG
from refsched.verify.tlc import TLCResult

pytestmark = pytest.mark.slow

EDGES = EDGES_CONFIG

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
TRACES_DISTINCT_STATES = 6_604  # 1 id, 2 workers, 2 generations, the clock up to 4
TRACES_EDGES = 44_101
TRACES_DEPTH = 18
EDGES_DISTINCT_STATES = 19_410  # a, b, then c with edges to them; OptionalEdges, AddDepsAllowed
EDGES_DEPTH = 15

EdgesRun = tuple[stategraph.TLCStateGraph, TLCResult]  # the edges instance's graph and run

DURABLE: Any = systems.get("durable")  # what stategraph needs to read and match its graph


def test_edges_model_holds_with_recorded_state_count(edges_run: EdgesRun) -> None:
    # the run that dumps the graph (below): the same config and TLC options, checked alike
    _, result = edges_run
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (EDGES_DISTINCT_STATES, EDGES_DEPTH), (
        "the state space changed: update EDGES_DISTINCT_STATES/EDGES_DEPTH and the cfg")



# -- Model = spec on the traces instance --------------------------------------------------------

@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    """TLC's whole state graph of the traces instance, its states read as the model's."""
    graph, result, _ = stategraph.dump_state_graph(TRACES_CONFIG, system=DURABLE)
    assert (result.distinct_states, result.depth) == (TRACES_DISTINCT_STATES, TRACES_DEPTH)
    return graph


@pytest.fixture(scope="module")
def matched(dumped: stategraph.TLCStateGraph) -> stategraph.StateGraph:
    return stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)


def test_tlc_state_graph_equals_the_models(dumped: stategraph.TLCStateGraph,
                                           matched: stategraph.StateGraph) -> None:
    assert matched.state_count == TRACES_DISTINCT_STATES
    assert len(dumped.edges) == matched.edge_count == TRACES_EDGES
    # The instance exercises every action, and the cases that tell the rules apart.
    labels = {durablespec.LABEL_ACTIONS.get(label, label) for _, _, label in dumped.edges}
    assert labels == set(ACTIONS) - set(EDGE_ACTIONS)  # its OptionalEdges and AddDeps are off
    edges = matched.all_edges()

    def some(action: str, where: Callable[[Edge[DurableSnapshot]], object]) -> bool:
        return any(e.action == action and where(e) for e in edges)

    def state(s: DurableSnapshot, t: str) -> TaskState | None:
        view = s.scheduler.tasks.get(t)
        return None if view is None else view.state

    # An expiry that re-opens the lease, and one that fails the version.
    assert some("Expire", lambda e: state(e.target, e.param_map["t"]) is TaskState.RUNNING)
    assert some("Expire", lambda e: state(e.target, e.param_map["t"]) is TaskState.FAILED)
    # A re-claim by the worker that lost the lease, and by the other one.
    assert some("Reclaim", lambda e: (e.param_map["t"], e.source.scheduler.tasks[
        e.param_map["t"]].generation, 1) in e.source.held.get(e.param_map["w"], ()))
    assert some("Reclaim", lambda e: not e.source.held.get(e.param_map["w"]))
    assert some("Reclaim", lambda e: e.source.scheduler.closed)
    # Refusals of a lease that expired, of an older attempt, of an ended version, of an
    # older generation.
    for why in (lambda e: e.source.attempt.get(e.param_map["t"]) == e.param_map["a"]
                and state(e.source, e.param_map["t"]) is TaskState.RUNNING,
                lambda e: e.source.attempt.get(e.param_map["t"], 0) > e.param_map["a"],
                lambda e: state(e.source, e.param_map["t"]) is not TaskState.RUNNING,
                lambda e: e.source.scheduler.tasks[e.param_map["t"]].generation
                > e.param_map["g"]):
        assert some("Refused", why)
    assert some("Heartbeat", lambda e: e.source.deadline[e.param_map["t"]] < e.source.now)


def test_every_check_holds_on_every_state_and_step_of_tlcs_graph(
        matched: stategraph.StateGraph) -> None:
    limits = read_instance(TRACES_CONFIG).limits
    for s, out in matched.edges.items():
        assert violated(s, limits) == [], durablespec.show(s)
        for e in out:
            assert violated_by_step(e.source, e.target, limits) == [], (e.action, e.params)


def test_a_model_whose_reclaim_keeps_the_attempt_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    def reclaim_same_attempt(s: DurableSnapshot, w: str, t: str, *,
                             limits: Limits) -> DurableSnapshot:
        g, a = s.scheduler.tasks[t].generation, s.attempt[t]
        return s.replace(holder={**s.holder, t: w}, deadline={**s.deadline, t: s.now + 1},
                         held={**s.held, w: s.held.get(w, frozenset()) | {(t, g, a)}})

    monkeypatch.setitem(ACTIONS, "Reclaim", replace(ACTIONS["Reclaim"],
                                                    effect=reclaim_same_attempt))
    with pytest.raises(stategraph.GraphMismatch, match="only in"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)


def test_a_model_that_answers_a_repeat_of_any_attempt_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repeat of a report is answered for the attempt that ended the version only: a
    store that answers any attempt of the ended version as a repeat (so a worker whose lease
    expired believes its report was taken) is not the spec's."""
    def any_attempt(s: DurableSnapshot, task: Hashable, generation: int, attempt: int) -> bool:
        view = s.scheduler.tasks.get(task)
        return (view is not None and generation == view.generation
                and task in s.ended_attempt and view.state.is_terminal)

    monkeypatch.setattr(durable_actions, "repeat", any_attempt)
    # w1's expired attempt 1 would not be refused once attempt 2's report ended the version
    with pytest.raises(stategraph.GraphMismatch, match="Refused: model 0 edge"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)


def test_a_model_that_refuses_a_repeated_report_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat of the report that ended the version is answered, not refused: a model whose
    Refused takes that lease too has steps TLC's graph does not."""
    monkeypatch.setattr(durable_actions, "repeat", lambda s, task, generation, attempt: False)
    with pytest.raises(stategraph.GraphMismatch, match="Refused: model 1 edge"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)


# -- Model = spec on the time corpus instance ---------------------------------------------------

TIME_CORPUS_DISTINCT_STATES = 11_478  # a and b, priorities, delays, aging, the clock up to 2
TIME_CORPUS_EDGES = 53_006
TIME_CORPUS_DEPTH = 14


@pytest.fixture(scope="module")
def time_dumped() -> stategraph.TLCStateGraph:
    """TLC's whole state graph of the corpus instance with priorities, delays and aging."""
    graph, result, _ = stategraph.dump_state_graph(TIME_CORPUS_CONFIG, system=DURABLE)
    assert (result.distinct_states, result.depth) == (TIME_CORPUS_DISTINCT_STATES,
                                                      TIME_CORPUS_DEPTH)
    return graph


def test_tlc_state_graph_of_the_time_corpus_equals_the_models(
        time_dumped: stategraph.TLCStateGraph) -> None:
    instance = DURABLE.read_instance(TIME_CORPUS_CONFIG)  # with its fixed graph
    matched = stategraph.match(time_dumped, instance, system=DURABLE)
    assert matched.state_count == TIME_CORPUS_DISTINCT_STATES
    assert len(time_dumped.edges) == matched.edge_count == TIME_CORPUS_EDGES
    limits = instance.limits
    # (source, the version it took, one it left ready): every claim takes one (1 slot)
    left = [(e.source, u, t) for e in matched.all_edges() if e.action == "Claim"
            for u in e.target.scheduler.tasks for t in e.target.scheduler.tasks
            if e.target.scheduler.tasks[u].state is TaskState.RUNNING
            and e.source.scheduler.tasks[u].state is TaskState.READY
            and e.target.scheduler.tasks[t].state is TaskState.READY]
    passed = [(s, u, t) for s, u, t in left if s.due.get(t, 0) <= s.now]
    # A claim while the other version is ready and not yet due; one that takes the higher
    # priority first; one that takes the lower priority first, due long enough before.
    assert any(s.due.get(t, 0) > s.now for s, _, t in left)
    assert any(s.priority.get(u, 0) > s.priority.get(t, 0) for s, u, t in passed)
    assert any(s.priority.get(u, 0) < s.priority.get(t, 0) for s, u, t in passed)
    for s, out in matched.edges.items():
        assert violated(s, limits) == [], durablespec.show(s)
        for e in out:
            assert violated_by_step(e.source, e.target, limits) == [], (e.action, e.params)


def test_a_model_whose_claim_key_ignores_due_times_differs_from_tlc(
        time_dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """Aging that never lifts: a model that orders eligible versions by priority alone claims
    other versions than the spec."""
    monkeypatch.setattr(durable_actions, "_claim_key",
                        lambda s, t, limits: (-s.priority.get(t, 0), s.scheduler.tasks[t].seq))
    with pytest.raises(stategraph.GraphMismatch, match="Claim"):
        stategraph.match(time_dumped, DURABLE.read_instance(TIME_CORPUS_CONFIG), system=DURABLE)


def test_a_model_whose_retry_keeps_the_old_due_time_differs_from_tlc(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """A retried version is due at once, at the retry's now: a model that keeps the dead
    version's due time (0: it no longer waited) has other states than the spec.  No check of
    the spec's sees this on its own (every state stays well formed), the graph does."""
    def retry_keeping_due(s: DurableSnapshot, t: str, *, limits: Limits) -> DurableSnapshot:
        return durable_actions.retry_effect(s, t, limits=limits).replace(due=s.due)

    monkeypatch.setitem(ACTIONS, "Retry", replace(ACTIONS["Retry"], effect=retry_keeping_due))
    with pytest.raises(stategraph.GraphMismatch, match="Retry"):
        stategraph.match(dumped, read_instance(TRACES_CONFIG), system=DURABLE)


# -- Model = spec on the edges instance ----------------------------------------------------------

EDGES_EDGES = 93_518


@pytest.fixture(scope="module")
def edges_run() -> EdgesRun:
    """TLC's run of the edges instance (OptionalEdges, AddDepsAllowed), as :func:`check` runs
    it (its invariants and properties, -deadlock), its state graph dumped: one run for the
    check of its counts and the graph's tests (the dump raises ``GraphMismatch`` unless the
    run is clean)."""
    graph, result, _ = stategraph.dump_state_graph(EDGES, system=DURABLE, workers=1)
    return graph, result


@pytest.fixture(scope="module")
def edges_dumped(edges_run: EdgesRun) -> stategraph.TLCStateGraph:
    """TLC's whole state graph of the edges instance."""
    graph, result = edges_run
    assert (result.distinct_states, result.depth) == (EDGES_DISTINCT_STATES, EDGES_DEPTH)
    return graph


def test_tlc_state_graph_of_the_edges_instance_equals_the_models(
        edges_dumped: stategraph.TLCStateGraph) -> None:
    instance = DURABLE.read_instance(EDGES)  # with its layers
    matched = stategraph.match(edges_dumped, instance, system=DURABLE)
    assert matched.state_count == EDGES_DISTINCT_STATES
    assert len(edges_dumped.edges) == matched.edge_count == EDGES_EDGES
    edges = matched.all_edges()
    assert {"SubmitOptional", "AddDeps"} <= {e.action for e in edges}

    def state(s: DurableSnapshot, t: str) -> TaskState | None:
        view = s.scheduler.tasks.get(t)
        return None if view is None else view.state

    # c ready with its optional parent dead; an edge added to c while its new parent runs.
    assert any(state(e.target, "c") is TaskState.READY and any(
        state(e.target, d) in (TaskState.FAILED, TaskState.CANCELLED)
        for d in getattr(e.target.scheduler.tasks["c"], "optional", ())) for e in edges)
    assert any(e.action == "AddDeps" and any(state(e.source, d) is TaskState.RUNNING
                                             for d in e.param_map["D"]) for e in edges)
    limits = instance.limits
    for s, out in matched.edges.items():
        assert violated(s, limits) == [], durablespec.show(s)
        for e in out:
            assert violated_by_step(e.source, e.target, limits) == [], (e.action, e.params)


def test_a_model_whose_add_deps_keeps_the_count_differs_from_tlc(
        edges_dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edge added and not counted: the version is claimed before its new parent ended."""
    def add_deps_uncounted(s: DurableSnapshot, t: str, deps: frozenset[str],
                           optional: frozenset[str], *, limits: Limits) -> DurableSnapshot:
        after = durable_actions.add_deps_effect(s, t, deps, optional, limits=limits)
        view = after.scheduler.tasks[t]
        if view.state is not TaskState.PENDING:
            return after
        kept = replace(view, remaining_deps=s.scheduler.tasks[t].remaining_deps)
        return after.replace(scheduler=after.scheduler.replace(
            tasks={**after.scheduler.tasks, t: kept}))

    monkeypatch.setitem(ACTIONS, "AddDeps", replace(ACTIONS["AddDeps"],
                                                   effect=add_deps_uncounted))
    with pytest.raises(stategraph.GraphMismatch, match="AddDeps"):
        stategraph.match(edges_dumped, DURABLE.read_instance(EDGES), system=DURABLE)
