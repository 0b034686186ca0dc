"""TLC checks of spec/Scheduler.tla, and must-fail models proving each check can fail.

Each mutant breaks ``Scheduler.tla`` by a text substitution and names the (config, check)
pairs that must report it (tests/spec_mutants.py): every invariant and property each
``MCScheduler*.cfg`` lists is reported, by name, by some mutant in that config, and the
model's predicates find the same check broken on the counterexample's last step.

Time on 2 cores (TLC 2.15, ``-workers 2``): the safety model 80-170 s, the liveness model
35-70 s (both marked big_instance, run by `pytest -m big_instance`); each mutant 3-25 s with
one worker (those on the liveness instance are the slow ones), about 35 runs, and about 30
more on the two instances of the edge kinds and AddDeps (``MCSchedulerEdges*.cfg``, whose
states :data:`tests.dag.edges.EDGES_SYSTEM` reads, optional edges included).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from refsched.model import ACTION_PROPERTIES, INVARIANTS, violated
from refsched.model.dag.invariants import (
    EDGE_ACTION_PROPERTIES,
    PROVENANCE_ACTION_PROPERTIES,
    PROVENANCE_INVARIANTS,
    violated_by_edge_step,
    violated_by_provenance_step,
    violated_provenance,
)
from refsched.verify.tlc import TLCResult, parse_output, run_tlc
from tests.dag.edges import ADD_DEPS_TRACES, EDGES_SYSTEM, EDGES_TRACES
from tests.spec_mutants import (
    Mutant,
    SpecChecks,
    cases,
    cfg_checks,
    check_mutant,
    uncovered,
)
from tests.tlc_support import (
    assert_every_check_has_a_mutant,
    assert_holds_with_recorded_count,
    big_instances,
)

SAFETY = "MCScheduler.cfg"
LIVENESS = "MCSchedulerLiveness.cfg"
TRACES = "MCSchedulerTraces.cfg"
EDGES = "MCSchedulerEdges.cfg"
PROVENANCE = "MCSchedulerProvenance.cfg"

# (distinct states, depth) measured with TLC 2.15. If the spec or the model changes, update
# these and the table in docs/dag.md.
RECORDED_COUNTS = {
    SAFETY: (535_646, 21),  # 3 ids, MaxConcurrency 2, MaxGeneration 2, symmetry on ids
    LIVENESS: (80_494, 15),  # 3 ids, MaxConcurrency 2, MaxGeneration 1, no symmetry
}


def check(config: str, directory: Path | None = None) -> TLCResult:
    # -deadlock: a scheduler closed before any submission legitimately has no successor.
    return run_tlc(config, directory=directory, extra_args=["-deadlock"])


@pytest.mark.parametrize(("config", "counts"), big_instances(RECORDED_COUNTS))
def test_model_holds_with_recorded_state_count(config: str, counts: tuple[int, int]) -> None:
    assert_holds_with_recorded_count(check(config), counts)


S, T, L, E, X, P = SAFETY, TRACES, LIVENESS, EDGES, EDGES_TRACES, PROVENANCE

# Each mutant, and the (config, check) pairs that must report it.
MUTANTS: dict[str, Mutant] = {
    # Claim ignores the slots taken by running versions: over-commits. The traces instance
    # has no more ids than slots, so the bound cannot fail there (see its cfg).
    "claim_ignores_running_slots": Mutant(
        (("        /\\ k <= MaxConcurrency - Cardinality(running)\n", ""),),
        ((S, "ConcurrencyBound"), (L, "ConcurrencyBound"), (E, "ConcurrencyBound")),
    ),
    # Complete forgets to decrement its dependents' counters (but still readies them).
    "complete_keeps_counts": Mutant(
        (("IF x \\in waiting THEN remainingDeps[x] - 1 ELSE remainingDeps[x]",
          "remainingDeps[x]"),),
        ((S, "IndegreeInvariant"), (T, "IndegreeInvariant"), (L, "IndegreeInvariant"),
         (E, "IndegreeInvariant"), (X, "IndegreeInvariant")),
    ),
    # Fail skips Settle: dependents of the failed version stay pending.
    "fail_skips_settle": Mutant(
        (('LET settled == Settle([state EXCEPT ![t] = "failed"], deps, optional, seq, '
          "blockedBy,\n                          remainingDeps, {t}, provenance)",
          'LET settled == [state |-> [state EXCEPT ![t] = "failed"], '
          "blockedBy |-> blockedBy, remainingDeps |-> remainingDeps, "
          "provenance |-> provenance]"),),
        ((S, "BlockedPropagated"), (T, "BlockedPropagated"), (L, "BlockedPropagated"),
         (E, "BlockedPropagated"), (X, "BlockedPropagated")),
    ),
    # Retry puts a dead version back to ready/pending without a new generation.
    "retry_keeps_generation": Mutant(
        (("/\\ generation' = [x \\in Tasks |-> "
          "IF x \\in R THEN generation[x] + 1 ELSE generation[x]]",
          "/\\ generation' = generation"),),
        ((S, "NoTerminalToReady"), (T, "NoTerminalToReady"), (L, "NoTerminalToReady"),
         (E, "NoTerminalToReady"), (X, "NoTerminalToReady")),
    ),
    # Submit keeps the replaced version's claim count: the new version is claimed "twice".
    "submit_keeps_claims": Mutant(
        (("/\\ claims' = [claims EXCEPT ![t] = 0]", "/\\ claims' = claims"),),
        ((S, "AtMostOneClaimPerVersion"), (T, "AtMostOneClaimPerVersion"),
         (X, "AtMostOneClaimPerVersion")),
    ),
    # Claim hands the chosen versions out but leaves them ready: the next claim hands them
    # out again (with one generation per id, as in the liveness instance, a Submit cannot).
    "claim_leaves_versions_ready": Mutant(
        (("              /\\ state' = [x \\in Tasks |-> IF x \\in chosen THEN \"running\" "
          "ELSE state[x]]\n", "              /\\ state' = state\n"),),
        ((L, "AtMostOneClaimPerVersion"), (E, "AtMostOneClaimPerVersion")),
    ),
    # Settle blocks versions without naming the dep that blocked them.
    "settle_names_no_cause": Mutant(
        (("blockedBy |-> [x \\in Tasks |-> IF x \\in B THEN Blame(x) ELSE bb[x]]",
          "blockedBy |-> bb"),),
        ((S, "BlockedHasCause"), (T, "BlockedHasCause"), (L, "BlockedHasCause"),
         (E, "BlockedHasCause"), (X, "BlockedHasCause")),
    ),
    # Submit after Start no longer rejects a dependency that closes a cycle.
    "submit_closes_cycle": Mutant(
        (("    /\\ started => t \\notin ReachFrom(D, deps)\n", ""),),
        ((S, "SealedGraph"), (T, "SealedGraph"), (L, "SealedGraph"), (X, "SealedGraph")),
    ),
    # Claim takes pending versions too.
    "claim_takes_pending": Mutant(
        (('LET ready   == InState({"ready"})', 'LET ready   == InState({"ready", "pending"})'),),
        ((S, "ClaimOnlyAfterDepsSucceeded"), (T, "ClaimOnlyAfterDepsSucceeded"),
         (L, "ClaimOnlyAfterDepsSucceeded"), (E, "ClaimOnlyAfterDepsSucceeded"),
         (X, "ClaimOnlyAfterDepsSucceeded")),
    ),
    # Close(TRUE) writes a state name that does not exist.
    "close_misspells_cancelled": Mutant(
        (('IF state[x] \\in Waiting THEN "cancelled" ELSE state[x]',
          'IF state[x] \\in Waiting THEN "canceled" ELSE state[x]'),),
        ((S, "TypeOK"), (T, "TypeOK"), (L, "TypeOK"), (E, "TypeOK"), (X, "TypeOK")),
    ),
    # Claim(k) takes the k ready versions with the largest seq: newest first.
    "claim_takes_newest": Mutant(
        (("oldest  == {x \\in ready : Cardinality({y \\in ready : seq[y] < seq[x]}) < k}",
          "oldest  == {x \\in ready : Cardinality({y \\in ready : seq[y] > seq[x]}) < k}"),),
        ((S, "ClaimsOldestFirst"), (T, "ClaimsOldestFirst"), (L, "ClaimsOldestFirst"),
         (E, "ClaimsOldestFirst"), (X, "ClaimsOldestFirst")),
    ),
    # Submit replaces a running version: its function runs on, unowned.
    "submit_replaces_running": Mutant(
        (("    /\\ ~closed\n    /\\ state[t] # \"running\"\n", "    /\\ ~closed\n"),),
        ((S, "RunningNeverReplaced"), (T, "RunningNeverReplaced"),
         (L, "RunningNeverReplaced"), (X, "RunningNeverReplaced")),
    ),
    # -- Edge kinds and AddDeps (MCSchedulerEdges*.cfg) --
    # Claim also takes a pending version whose required deps all succeeded: it runs before an
    # optional parent has ended. No invariant sees it (a running version has no count).
    "claim_ignores_optional_parents": Mutant(
        (('LET ready   == InState({"ready"})',
          'LET ready   == InState({"ready"}) \\cup {x \\in InState({"pending"}) : '
          '\\A d \\in deps[x] \\ optional[x] : state[d] = "succeeded"}'),),
        ((E, "ReadyOnlyAfterDepsSettled"), (X, "ReadyOnlyAfterDepsSettled")),
    ),
    # AddDeps adds edges to an ended version too.
    "add_deps_to_ended_version": Mutant(
        (('        /\\ state[t] = "pending"\n',
          '        /\\ state[t] \\in {"pending"} \\cup TerminalStates\n'),),
        ((E, "EdgesAddedOnlyToPending"), (X, "EdgesAddedOnlyToPending")),
    ),
    # AddDeps no longer rejects edges that close a cycle.
    "add_deps_closes_cycle": Mutant(
        (("        /\\ started => Acyclic(newDeps)\n", ""),),
        ((E, "SealedGraph"),),
    ),
    # Settle spreads blocking along optional edges too (and blames them).
    "settle_blocks_through_optional_edges": Mutant(
        (("B       == Grow(dead, live, req) \\ dead", "B       == Grow(dead, live, dp) \\ dead"),
         ("Blame(x) == Nearest(req[x] \\cap (dead \\cup B))",
          "Blame(x) == Nearest(dp[x] \\cap (dead \\cup B))")),
        ((E, "OptionalParentNeverBlocks"), (X, "OptionalParentNeverBlocks")),
    ),
    # Settle forgets that a version it blocks, or one the step ended, settles optional edges.
    "settle_keeps_optional_counts": Mutant(
        (("left    == [x \\in Tasks |-> rd[x] - freed(x)]", "left    == rd"),),
        ((E, "IndegreeInvariant"), (X, "IndegreeInvariant")),
    ),
    # Submit bumps the dependents of a replaced version only if it had succeeded: a replaced
    # failed parent still counts as settled for an optional edge (two generations: X only).
    "submit_bumps_only_succeeded_parents": Mutant(
        (("/\\ Settles(state[t], t \\in optional[x])}", '/\\ state[t] = "succeeded"}'),),
        ((X, "IndegreeInvariant"),),
    ),
    # Close cancels the waiting versions without recording their provenance.
    "close_records_no_provenance": Mutant(
        (("IF cancelPending THEN Recorded(provenance, InState(Waiting), \"cancelled\")\n"
          "                     ELSE provenance", "provenance"),),
        ((P, "ProvenanceRecorded"),),
    ),
    # Settle records a blocked version's path without the version: it stops one level early,
    # at the blamed dep.
    "settle_path_stops_one_level_early": Mutant(
        (("[r EXCEPT !.path = Append(@, x)]", "[r EXCEPT !.path = @]"),),
        ((P, "ProvenancePathsReal"),),
    ),
    # A failed dep is recorded as a cancelled root.
    "settle_records_failed_root_as_cancelled": Mutant(
        (('THEN EndRecord(d, "failed")', 'THEN EndRecord(d, "cancelled")'),),
        ((P, "ProvenanceRootEnded"),),
    ),
    # Cancel of a waiting version records itself as the root of every blocked dependent it
    # has, over the cause each had already: a second cause rewrites a record.
    "cancel_rewrites_blocked_dependents": Mutant(
        (("""{t},
                                 Recorded(provenance, {t}, "cancelled"))""", """{t},
                                 IF RecordProvenance
                                 THEN [x \\in Tasks |->
                                         IF x = t THEN EndRecord(t, "cancelled")
                                         ELSE IF state[x] = "blocked" /\\ t \\in deps[x]
                                         THEN [EndRecord(t, "cancelled")
                                                 EXCEPT !.path = <<t, x>>]
                                         ELSE provenance[x]]
                                 ELSE provenance)"""),),
        ((P, "ProvenanceNeverRewritten"),),
    ),
    # Running functions may run forever: a running version never ends.
    "no_fairness_on_finishing": Mutant(
        (("    /\\ \\A t \\in Tasks : WF_vars(Finish(t))\n", ""),),
        ((L, "EveryVersionEnds"),),
    ),
    # Workers may stop claiming: a ready version waits forever.
    "no_fairness_on_claim": Mutant(
        (("    /\\ WF_vars(\\E k \\in 1..MaxConcurrency : Claim(k))\n", ""),),
        ((L, "EveryVersionEnds"),),
    ),
}

SPEC = SpecChecks(
    module="Scheduler.tla", mc_module="MCScheduler.tla", system=EDGES_SYSTEM,
    invariants=frozenset({*INVARIANTS, *PROVENANCE_INVARIANTS}),
    action_properties=frozenset({*ACTION_PROPERTIES, *EDGE_ACTION_PROPERTIES,
                                 *PROVENANCE_ACTION_PROPERTIES}),
    temporal=frozenset({"EveryVersionEnds"}),
    # Every version blocked or cancelled has a record only where provenance is recorded.
    violated=lambda s, instance: [
        *violated(s, instance.max_concurrency),
        *(violated_provenance(s, instance.max_concurrency) if instance.record_provenance
          else [])],
    violated_by_step=lambda before, after: [*violated_by_edge_step(before, after),
                                            *violated_by_provenance_step(before, after)],
    mutants=MUTANTS,
)


def test_every_check_of_every_config_has_a_mutant_it_reports() -> None:
    assert_every_check_has_a_mutant(
        SPEC, [SAFETY, ADD_DEPS_TRACES, "MCSchedulerCorpusAddDeps.cfg", EDGES_TRACES, EDGES,
               LIVENESS, PROVENANCE, TRACES])


def test_a_check_left_without_its_mutant_is_uncovered() -> None:
    # The coverage rule can fail: drop the one mutant the traces config's ClaimsOldestFirst
    # has, and that pair, alone, is missing.
    fewer = replace(SPEC, mutants={n: m for n, m in MUTANTS.items() if n != "claim_takes_newest"})
    assert uncovered(fewer) == [(SAFETY, "ClaimsOldestFirst"),
                                (EDGES_TRACES, "ClaimsOldestFirst"), (EDGES, "ClaimsOldestFirst"),
                                (LIVENESS, "ClaimsOldestFirst"), (TRACES, "ClaimsOldestFirst")]
    assert "ConcurrencyBound" not in cfg_checks(TRACES)  # cannot fail there: not listed


@pytest.mark.parametrize(("name", "config", "check"), cases(SPEC))
def test_mutant_is_reported_by_name(name: str, config: str, check: str, tmp_path: Path) -> None:
    check_mutant(SPEC, name, config, check, tmp_path)


def test_parse_output_reads_counts_and_violation() -> None:
    output = "\n".join(
        [
            "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)",
            "Error: Invariant ConcurrencyBound is violated.",
            "Error: The behavior up to this point is:",
            "State 1: <Initial predicate>",
            "/\\ closed = FALSE",
            "",
            "State 2: <Claim line 169, col 9 to line 177, col 56 of module Scheduler>",
            "/\\ closed = FALSE",
            "",
            "8,983 states generated, 1,234 distinct states found, 7 states left on queue.",
            "The depth of the complete state graph search is 7.",
        ]
    )
    result = parse_output(output, returncode=12)
    assert not result.ok
    assert (result.violation_kind, result.violated) == ("invariant", "ConcurrencyBound")
    assert (result.states_generated, result.distinct_states, result.depth) == (8983, 1234, 7)
    assert result.version == "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)"
    assert result.trace is not None
    assert result.trace.startswith("State 1:") and result.trace.endswith("/\\ closed = FALSE")


def test_parse_output_ok_needs_tlc_to_say_no_error() -> None:
    assert not parse_output("Finished in 01s\n", returncode=0).ok
    assert parse_output("Model checking completed. No error has been found.\n", returncode=0).ok
