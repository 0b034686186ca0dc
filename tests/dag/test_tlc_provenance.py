"""TLC checks of the provenance of spec/Scheduler.tla (``RecordProvenance`` TRUE).

``MCSchedulerProvenance.cfg`` (3 ids, 1 slot, 1 generation) lists the four provenance checks;
their mutants are in ``tests/dag/test_tlc.py`` with the spec's others. TLC's whole state graph
of that instance is the model's, edge for edge, records included: paths through two edges,
and, before start, blame that loops through a cycle. The match fails on a model whose paths
leave the blamed dep where its chain of blame leads to a dead version.

Time on 2 cores: the dump about 100 s, the match 50 s.
"""

from __future__ import annotations

import pytest

from refsched.model.dag import actions as A
from refsched.verify import stategraph
from tests.dag.edges import EDGES_SYSTEM

pytestmark = pytest.mark.slow

PROVENANCE = "MCSchedulerProvenance.cfg"

# (distinct states, edges of the dump, depth) measured with TLC 2.15. With RecordProvenance
# FALSE the instance has as many states: with one generation per id, a record follows from
# the state it is in (on MCSchedulerTraces.cfg's 2 ids and 2 generations: 6,092 states with
# it, 5,784 without).
GRAPH = (68_302, 719_933, 15)


@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    graph, result, _ = stategraph.dump_state_graph(PROVENANCE, system=EDGES_SYSTEM)
    states, _, depth = GRAPH
    assert (result.distinct_states, result.depth) == (states, depth)
    return graph


def test_model_graph_is_tlcs_graph_of_provenance(dumped: stategraph.TLCStateGraph) -> None:
    instance = EDGES_SYSTEM.read_instance(PROVENANCE)
    assert instance.record_provenance
    matched = stategraph.match(dumped, instance, system=EDGES_SYSTEM)
    states, edges, _ = GRAPH
    assert matched.state_count == states and matched.edge_count == edges
    records = [r for s in matched.depth for r in s.records.values()]
    assert any(len(r.path) == 3 for r in records), "no path through two edges"
    looped = [s for s in matched.depth for t, r in s.records.items()
              if len(r.path) >= 2 and r.path[-2] != s.tasks[t].blocked_by]
    assert looped, "no state where blame loops and the path leaves the blamed dep"
    assert not any(s.started for s in looped)  # only an unstarted graph has a cycle


def test_a_model_whose_paths_always_take_the_nearest_dead_version_does_not_match(
        dumped: stategraph.TLCStateGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    # The match can fail: paths through the dep of smallest seq one edge nearer to a dead
    # version, even where the chain of blame leads to one (no version counts as blamed on a
    # dep of its own), are told apart from paths through the blamed dep.
    original = A.blocked_records
    monkeypatch.setattr(A, "blocked_records", lambda tasks, dead, blame, records: original(
        tasks, dead, {x: x for x in blame}, records))
    instance = EDGES_SYSTEM.read_instance(PROVENANCE)
    with pytest.raises(stategraph.GraphMismatch):
        stategraph.match(dumped, instance, system=EDGES_SYSTEM)
