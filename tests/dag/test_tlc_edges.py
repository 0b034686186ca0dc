"""TLC checks of the edge kinds and AddDeps of spec/Scheduler.tla (both constants TRUE).

``MCSchedulerEdges.cfg`` (3 ids) holds with its recorded state count; its mutants, one for
each check it lists, are in ``tests/dag/test_tlc.py`` with the spec's others. TLC's whole
state graph is the model's, edge for edge (``refsched.verify.stategraph.match``), on two
instances: ``MCSchedulerCorpusEdges.cfg`` (2 ids, 2 generations, both constants TRUE: the
optional edges, their parents ended and replaced; AddDeps has no step there, since a pending
version's one possible dep is already its dep) and ``MCSchedulerAddDepsTraces.cfg`` (3 ids,
AddDeps with required edges). The match fails on a model that forgets a rule.

Time on 2 cores: the 3-id TLC run about 60 s, the 2-id graph 15 s, the 3-id graph 110 s.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from refsched.model.dag import actions as A
from refsched.model.dag.graph import Edge
from refsched.types import Snapshot, TaskState
from refsched.verify import stategraph
from refsched.verify.tlc import run_tlc
from tests.dag.edges import ADD_DEPS_TRACES, EDGES_SYSTEM, EDGES_TRACES
from tests.tlc_support import assert_holds_with_recorded_count

pytestmark = pytest.mark.slow

EDGES = "MCSchedulerEdges.cfg"

# (distinct states, depth) measured with TLC 2.15; the cfg and docs/semantics.md say them too.
RECORDED_COUNTS = {EDGES: (94_148, 15)}  # 3 ids, 1 slot, 1 generation, symmetry on ids

# (distinct states, edges of the dump, depth) of the graphs the model's must equal.
GRAPHS = {EDGES_TRACES: (10_900, 108_981, 15), ADD_DEPS_TRACES: (68_302, 722_027, 15)}
# The actions with no step on an instance (each one has steps on the other).
NO_STEP = {EDGES_TRACES: {"AddDeps"}, ADD_DEPS_TRACES: {"SubmitOptional", "Retry"}}


def test_edges_model_holds_with_recorded_state_count() -> None:
    # -deadlock: a scheduler closed before any submission legitimately has no successor.
    result = run_tlc(EDGES, extra_args=["-deadlock"])
    assert_holds_with_recorded_count(result, RECORDED_COUNTS[EDGES])


@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    return _dump(EDGES_TRACES)


def _dump(config: str) -> stategraph.TLCStateGraph:
    graph, result, _ = stategraph.dump_state_graph(config, system=EDGES_SYSTEM)
    states, _, depth = GRAPHS[config]
    assert (result.distinct_states, result.depth) == (states, depth)
    return graph


def _matched_edges(config: str, dumped: stategraph.TLCStateGraph) -> list[Edge[Snapshot]]:
    """The model's graph of ``config`` is ``dumped``, with the recorded counts, and TLC took
    every action but those that have no step there."""
    instance = EDGES_SYSTEM.read_instance(config)
    matched = stategraph.match(dumped, instance, system=EDGES_SYSTEM)
    states, edges, _ = GRAPHS[config]
    assert matched.state_count == states
    assert len(dumped.edges) == matched.edge_count == edges
    assert {label for _, _, label in dumped.edges} == set(EDGES_SYSTEM.actions) - NO_STEP[config]
    return matched.all_edges()


def _view(s: Snapshot, t: Hashable) -> Any:
    return s.tasks.get(t)


def test_model_graph_is_tlcs_graph_of_optional_edges(dumped: stategraph.TLCStateGraph) -> None:
    edges = _matched_edges(EDGES_TRACES, dumped)

    def some(found: list[Edge[Snapshot]], what: str) -> None:
        assert found, f"the instance has no step where {what}"

    # The instance reaches every rule of the truth table, so the match is a check of each.
    some([e for e in edges if e.action == "Fail" and any(
        _view(e.source, x).state is TaskState.PENDING
        and _view(e.target, x).state is TaskState.READY
        and e.param_map["t"] in A.optional_of(_view(e.target, x))
        for x in e.target.tasks if x != e.param_map["t"])],
        "a failed optional parent makes its child ready")
    some([e for e in edges if e.action in {"Submit", "SubmitOptional"} and any(
        _view(e.source, x).state is TaskState.READY
        and _view(e.target, x).state is TaskState.PENDING
        and e.param_map["t"] in A.optional_of(_view(e.target, x))
        and _view(e.source, e.param_map["t"]).state.is_dead
        for x in e.target.tasks if x != e.param_map["t"])],
        "a dead optional parent replaced by a new version makes its child wait again")
    some([e for e in edges if e.action == "Retry" and any(
        _view(e.source, x).state is TaskState.READY
        and _view(e.target, x).state is TaskState.PENDING
        for x in e.target.tasks if x != e.param_map["t"])],
        "a retried optional parent makes its ready child wait again")


def test_model_graph_is_tlcs_graph_of_add_deps() -> None:
    edges = _matched_edges(ADD_DEPS_TRACES, _dump(ADD_DEPS_TRACES))
    adds = [e for e in edges if e.action == "AddDeps"]
    assert any(_view(e.target, e.param_map["t"]).state is TaskState.BLOCKED for e in adds), (
        "no step where a dead required dependency added blocks the version")
    assert any(_view(e.target, e.param_map["t"]).remaining_deps
               == _view(e.source, e.param_map["t"]).remaining_deps for e in adds), (
        "no step that adds a succeeded dependency (the count stays)")


def test_a_model_that_forgets_an_optional_release_does_not_match(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    # The match can fail: a Settle that does not settle optional edges to the versions that
    # ended (every invariant of the model still speaks of its own states) is told apart.
    original = A.settle
    monkeypatch.setattr(A, "settle",
                        lambda tasks, ended=frozenset(), records=None: original(tasks,
                                                                               records=records))
    instance = EDGES_SYSTEM.read_instance(EDGES_TRACES)
    with pytest.raises(stategraph.GraphMismatch):
        stategraph.match(dumped, instance, system=EDGES_SYSTEM)


def test_instance_constants_are_read_from_the_cfg() -> None:
    instance = EDGES_SYSTEM.read_instance(EDGES_TRACES)
    assert (instance.tasks, instance.max_concurrency, instance.max_generation,
            instance.optional_edges, instance.add_deps) == (("a", "b"), 2, 2, True, True)
    assert not EDGES_SYSTEM.read_instance("MCSchedulerTraces.cfg").optional_edges
