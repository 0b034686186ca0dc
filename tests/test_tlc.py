"""TLC checks of spec/Scheduler.tla, and must-fail models proving each check can fail.

Each mutant copies ``spec/`` to a temporary folder, breaks ``Scheduler.tla`` by one text
substitution (asserting the original text is there, so an edit of the spec cannot silently
turn a mutant into the unmodified spec) and asserts TLC reports exactly the check it breaks.

Time on 2 cores (TLC 2.15, ``-workers 2``): the safety model 80-170 s, the liveness model
35-70 s (both marked big_instance, run by `pytest -m big_instance`), each mutant 2-9 s.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from refsched.model import ACTION_PROPERTIES, INVARIANTS
from refsched.verify.tlc import TLCResult, parse_output, run_tlc, spec_dir

# Measured with TLC 2.15 on MCScheduler.cfg (3 ids, MaxConcurrency 2, MaxGeneration 2,
# symmetry on ids). If the spec or the model changes, update these and the README table.
SAFETY_DISTINCT_STATES = 535_646
SAFETY_DEPTH = 21
# Measured on MCSchedulerLiveness.cfg (3 ids, MaxConcurrency 2, MaxGeneration 1, no symmetry).
LIVENESS_DISTINCT_STATES = 80_494
LIVENESS_DEPTH = 15

SAFETY = "MCScheduler.cfg"
LIVENESS = "MCSchedulerLiveness.cfg"



def check(config: str, directory: Path | None = None) -> TLCResult:
    # -deadlock: a scheduler closed before any submission legitimately has no successor.
    return run_tlc(config, directory=directory, extra_args=["-deadlock"])


def mutate(tmp_path: Path, substitutions: list[tuple[str, str]]) -> Path:
    """Copy spec/ into tmp_path with Scheduler.tla edited; return the copy's folder."""
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    module = copy / "Scheduler.tla"
    text = module.read_text()
    for old, new in substitutions:
        assert text.count(old) == 1, f"mutant is stale: {old!r} is not in Scheduler.tla once"
        text = text.replace(old, new)
    module.write_text(text)
    return copy


@pytest.mark.slow
@pytest.mark.big_instance
def test_safety_model_holds_with_recorded_state_count() -> None:
    result = check(SAFETY)
    assert result.ok, result.output[-4000:]
    assert result.version is not None and "2.15" in result.version
    assert (result.distinct_states, result.depth) == (SAFETY_DISTINCT_STATES, SAFETY_DEPTH), (
        "the state space changed: update SAFETY_DISTINCT_STATES/SAFETY_DEPTH and the README"
    )


@pytest.mark.slow
@pytest.mark.big_instance
def test_liveness_model_holds_with_recorded_state_count() -> None:
    result = check(LIVENESS)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (
        LIVENESS_DISTINCT_STATES,
        LIVENESS_DEPTH,
    ), "the state space changed: update LIVENESS_DISTINCT_STATES/LIVENESS_DEPTH and the README"


# (check broken, kind TLC reports, substitutions in Scheduler.tla)
SAFETY_MUTANTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    # Claim ignores the slots taken by running versions: over-commits.
    "ConcurrencyBound": (
        "invariant",
        [("        /\\ k <= MaxConcurrency - Cardinality(running)\n", "")],
    ),
    # Complete forgets to decrement its dependents' counters (but still readies them).
    "IndegreeInvariant": (
        "invariant",
        [
            (
                "IF x \\in waiting THEN remainingDeps[x] - 1 ELSE remainingDeps[x]",
                "remainingDeps[x]",
            )
        ],
    ),
    # Fail skips Settle: dependents of the failed version stay pending.
    "BlockedPropagated": (
        "invariant",
        [
            (
                'LET settled == Settle([state EXCEPT ![t] = "failed"], deps, seq, blockedBy)',
                'LET settled == [state |-> [state EXCEPT ![t] = "failed"], '
                "blockedBy |-> blockedBy]",
            )
        ],
    ),
    # Retry puts a dead version back to ready/pending without a new generation.
    "NoTerminalToReady": (
        "action property",
        [
            (
                "/\\ generation' = [x \\in Tasks |-> "
                "IF x \\in R THEN generation[x] + 1 ELSE generation[x]]",
                "/\\ generation' = generation",
            )
        ],
    ),
    # Submit keeps the replaced version's claim count: the new version is claimed "twice".
    "AtMostOneClaimPerVersion": (
        "invariant",
        [("/\\ claims' = [claims EXCEPT ![t] = 0]", "/\\ claims' = claims")],
    ),
    # Settle blocks versions without naming the dep that blocked them.
    "BlockedHasCause": (
        "invariant",
        [
            (
                "blockedBy |-> [x \\in Tasks |-> IF x \\in B THEN Blame(x) ELSE bb[x]]",
                "blockedBy |-> bb",
            )
        ],
    ),
    # Submit after Start no longer rejects a dependency that closes a cycle.
    "SealedGraph": (
        "invariant",
        [("    /\\ started => t \\notin ReachFrom(D, deps)\n", "")],
    ),
    # Claim takes pending versions too.
    "ClaimOnlyAfterDepsSucceeded": (
        "action property",
        [('LET ready   == InState({"ready"})', 'LET ready   == InState({"ready", "pending"})')],
    ),
    # Close(TRUE) writes a state name that does not exist.
    "TypeOK": (
        "invariant",
        [
            (
                'IF state[x] \\in Waiting THEN "cancelled" ELSE state[x]',
                'IF state[x] \\in Waiting THEN "canceled" ELSE state[x]',
            )
        ],
    ),
}


def test_every_invariant_and_action_property_has_a_mutant() -> None:
    assert set(SAFETY_MUTANTS) == set(INVARIANTS) | set(ACTION_PROPERTIES)


@pytest.mark.parametrize("name", sorted(SAFETY_MUTANTS))
def test_mutant_violates_exactly_its_check(name: str, tmp_path: Path) -> None:
    kind, substitutions = SAFETY_MUTANTS[name]
    result = check(SAFETY, mutate(tmp_path, substitutions))
    assert not result.ok
    assert (result.violation_kind, result.violated) == (kind, name), result.output[-4000:]
    assert result.trace is not None and result.trace.startswith("State 1: <Initial predicate>")


LIVENESS_MUTANTS: dict[str, list[tuple[str, str]]] = {
    # Running functions may run forever: a running version never ends.
    "no_fairness_on_finishing": [("    /\\ \\A t \\in Tasks : WF_vars(Finish(t))\n", "")],
    # Workers may stop claiming: a ready version waits forever.
    "no_fairness_on_claim": [("    /\\ WF_vars(\\E k \\in 1..MaxConcurrency : Claim(k))\n", "")],
}


@pytest.mark.parametrize("name", sorted(LIVENESS_MUTANTS))
def test_liveness_mutant_violates_every_version_ends(name: str, tmp_path: Path) -> None:
    result = check(LIVENESS, mutate(tmp_path, LIVENESS_MUTANTS[name]))
    assert not result.ok
    assert result.violation_kind == "temporal", result.output[-4000:]
    assert result.trace is not None


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
