"""TLC checks of the provenance of spec/DurableScheduler.tla (``RecordProvenance`` TRUE).

``MCDurableSchedulerProvenance.cfg`` (on ``MCDurableSchedulerCorpus.tla`` with LayeredGraph:
a, then b, then c, each with edges to earlier ids; 1 worker, 1 slot, 1 attempt, no time) lists
Scheduler's four provenance checks through the mapping, TypeOK and the refinement of
Scheduler, whose provenance is the store's. Each check has a mutant TLC reports by name here,
and the model's predicates find the same check broken on the counterexample's last step.
TLC's whole state graph of the instance is the model's (``refsched.model.durable`` from
``RECORDING``), edge for edge, records included.

With ``RecordProvenance`` left out (every other config), the store's provenance is ``NoRecord``
at every id: each recorded state count stays as it was.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from refsched.model.dag.graph import search
from refsched.model.durable import (
    INITIAL,
    PROVENANCE_ACTION_PROPERTIES,
    PROVENANCE_INVARIANTS,
    RECORDING,
    Instance,
    next_steps,
    violated,
    violated_by_provenance_step,
    violated_by_step,
    violated_provenance,
    within_bound,
)
from refsched.verify import stategraph
from refsched.verify.durable.spec import read_instance, snapshot_of
from refsched.verify.durable.system import FixedGraphInstance
from refsched.verify.specstate import SpecStateError
from refsched.verify.tlc import TLCResult, run_tlc
from tests.durable.test_tlc import DURABLE, mutate, trace_states

pytestmark = pytest.mark.slow

PROVENANCE = "MCDurableSchedulerProvenance.cfg"
MODULE = "MCDurableSchedulerCorpus.tla"  # its LayeredGraph keeps the instance small
# (distinct states, edges of the dump, depth), TLC 2.15
GRAPH = (5_278, 0, 15)

D, S = "DurableScheduler.tla", "Scheduler.tla"

# name -> (substitutions, the check TLC reports, its kind)
MUTANTS: dict[str, tuple[list[tuple[str, str, str]], str, str]] = {
    # A crashed worker's store forgets every provenance record with the leases it held.
    "crash_forgets_the_provenance": (
        [(D, "    /\\ held' = [held EXCEPT ![w] = {}]\n"
             "    /\\ UNCHANGED <<attempt, holder, deadline, now, ends, endedAttempt>>\n"
             "    /\\ UNCHANGED schedulerVars\n",
          "    /\\ held' = [held EXCEPT ![w] = {}]\n"
          "    /\\ UNCHANGED <<attempt, holder, deadline, now, ends, endedAttempt>>\n"
          "    /\\ provenance' = [x \\in Tasks |-> Abs!NoRecord]\n"
          "    /\\ UNCHANGED <<started, closed, nextSeq, generation, state, deps, optional,"
          " remainingDeps,\n"
          "                   blockedBy, cancelRequested, seq>>\n")],
        "ProvenanceRecorded", "invariant"),
    # Close cancels the waiting versions without recording their provenance.
    "close_records_no_provenance": (
        [(S, "IF cancelPending THEN Recorded(provenance, InState(Waiting), \"cancelled\")\n"
             "                     ELSE provenance", "provenance")],
        "ProvenanceRecorded", "invariant"),
    # A failed dep is recorded as a cancelled root.
    "settle_records_failed_root_as_cancelled": (
        [(S, 'THEN EndRecord(d, "failed")', 'THEN EndRecord(d, "cancelled")')],
        "ProvenanceRootEnded", "invariant"),
    # Settle records a blocked version's path without the version: it stops at the blamed dep.
    "settle_path_stops_one_level_early": (
        [(S, "[r EXCEPT !.path = Append(@, x)]", "[r EXCEPT !.path = @]")],
        "ProvenancePathsReal", "action property"),
    # Cancel of a waiting version records itself as the root of every blocked dependent it
    # has, over the cause each had already: a second cause rewrites a record.
    "cancel_rewrites_blocked_dependents": (
        [(S, """{t},
                                 Recorded(provenance, {t}, "cancelled"))""", """{t},
                                 IF RecordProvenance
                                 THEN [x \\in Tasks |->
                                         IF x = t THEN EndRecord(t, "cancelled")
                                         ELSE IF state[x] = "blocked" /\\ t \\in deps[x]
                                         THEN [EndRecord(t, "cancelled")
                                                 EXCEPT !.path = <<t, x>>]
                                         ELSE provenance[x]]
                                 ELSE provenance)""")],
        "ProvenanceNeverRewritten", "action property"),
    # A version that ended itself is recorded as having ended in no state a record may name.
    "end_record_names_no_end": (
        [(S, "end |-> end, path |-> <<t>>]", "end |-> \"ended\", path |-> <<t>>]")],
        "TypeOK", "invariant"),
    # A heartbeat also withdraws a requested cancel: no step of Scheduler does.
    "heartbeat_forgets_the_cancel_request": (
        [(D, "    /\\ UNCHANGED <<attempt, holder, now, held, ends, endedAttempt>>\n"
             "    /\\ UNCHANGED schedulerVars\n",
          "    /\\ UNCHANGED <<attempt, holder, now, held, ends, endedAttempt>>\n"
          "    /\\ cancelRequested' = [cancelRequested EXCEPT ![t] = FALSE]\n"
          "    /\\ UNCHANGED <<started, closed, nextSeq, generation, state, deps, optional,"
          " remainingDeps,\n"
          "                   blockedBy, seq, provenance>>\n")],
        "Refinement", "action property"),
}


def run(directory: Path | None = None, extra: tuple[str, ...] = ()) -> TLCResult:
    # -deadlock: a closed scheduler with nothing running legitimately has no successor.
    return run_tlc(PROVENANCE, MODULE, directory=directory, workers=1,
                   extra_args=["-deadlock", *extra])


def instance() -> FixedGraphInstance:
    """The config's constants, its layers, and RecordProvenance (which the durable reader of
    a config leaves out: it is a definition of the spec the config overrides)."""
    base = read_instance(PROVENANCE)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(Instance)}
    return FixedGraphInstance(**{**fields, "record_provenance": True},
                              layers=(("a",), ("b",), ("c",)), layered=True)


def test_every_check_of_the_config_has_a_mutant() -> None:
    from tests.spec_mutants import cfg_checks

    assert {check for _, check, _ in MUTANTS.values()} == set(cfg_checks(PROVENANCE))
    # one vocabulary: the config's provenance checks are the model's, by name
    named = set(cfg_checks(PROVENANCE)) - {"TypeOK", "Refinement"}
    assert named == {*PROVENANCE_INVARIANTS, *PROVENANCE_ACTION_PROPERTIES}


@pytest.fixture(scope="module")
def dumped(tmp_path_factory: pytest.TempPathFactory) -> stategraph.TLCStateGraph:
    dump = tmp_path_factory.mktemp("provenance") / "graph.dot"
    result = run(extra=("-dump", "dot,actionlabels", str(dump.with_suffix(""))))
    assert result.ok, result.output[-4000:]
    states, _, depth = GRAPH
    assert (result.distinct_states, result.depth) == (states, depth)
    return stategraph.load_dot(dump, DURABLE)


def test_tlc_state_graph_of_the_provenance_instance_equals_the_models(
        dumped: stategraph.TLCStateGraph) -> None:
    fixed = instance()
    model = search(RECORDING, lambda s: next_steps(s, fixed),
                   lambda s: within_bound(s, fixed) and fixed.fixed_graph(s))
    matched = stategraph.match(dumped, fixed, model=model, system=DURABLE)
    assert matched.state_count == GRAPH[0]
    records = [r for s in matched.depth for r in s.scheduler.records.values()]
    assert any(len(r.path) == 3 for r in records), "no path through a blocked version"
    assert any(r.end.value == "failed" for r in records)
    limits = fixed.limits
    for s, out in matched.edges.items():
        assert violated_provenance(s, limits) == []
        for e in out:
            assert violated_by_provenance_step(e.source, e.target, limits) == []


def test_a_model_that_records_nothing_differs_from_tlc(
        dumped: stategraph.TLCStateGraph) -> None:
    fixed = dataclasses.replace(instance(), record_provenance=False)
    model = search(INITIAL, lambda s: next_steps(s, fixed),
                   lambda s: within_bound(s, fixed) and fixed.fixed_graph(s))
    with pytest.raises(stategraph.GraphMismatch):
        stategraph.match(dumped, fixed, model=model, system=DURABLE)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_violates_exactly_its_check(name: str, tmp_path: Path) -> None:
    substitutions, broken, kind = MUTANTS[name]
    result = run(mutate(tmp_path, substitutions))
    assert not result.ok, f"{name} passes {PROVENANCE}"
    assert result.violation_kind == kind, result.output[-4000:]
    assert result.violated in (broken, f"Abs!{broken}"), result.output[-4000:]
    assert result.trace is not None and result.trace.startswith("State 1: <Initial predicate>")
    *_, before, after = trace_states(result.trace)
    if broken == "TypeOK":  # a record of no type the model can hold
        snapshot_of(before)
        with pytest.raises(SpecStateError):
            snapshot_of(after)
        return
    limits = instance().limits
    source, target = snapshot_of(before), snapshot_of(after)
    assert violated_provenance(source, limits) == []
    if kind == "invariant":
        assert violated_provenance(target, limits) == [broken]
    elif broken == "Refinement":
        assert broken in violated_by_step(source, target, limits)
        assert violated(target, limits) == []
    else:
        assert broken in violated_by_provenance_step(source, target, limits)
