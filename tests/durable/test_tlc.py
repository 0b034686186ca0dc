"""TLC checks of spec/DurableScheduler.tla and must-fail mutants (model = spec on TLC's graphs,
and the edges instance's recorded count: tests/durable/test_tlc_graphs.py).

Each mutant copies ``spec/`` to a temporary folder, breaks ``DurableScheduler.tla`` (or the
``Scheduler.tla`` it reuses) by text substitutions, asserting each original text is there once
so that an edit of the spec cannot silently turn a mutant into the unmodified spec, and asserts
TLC reports exactly the check it breaks, in each config it is listed for. Every check every
durable config names has such a mutant, or is listed in VACUOUS (the instance's shape makes it
impossible to break there); a test reads the cfg files to keep it so. Safety mutants run with
one worker, so the breadth-first search, and so the violation TLC finds first, is the same on
every run. Each liveness mutant drops one fairness condition and must break its temporal
property; TLC 2.15 does not name the temporal property it finds violated, so each run keeps
that one alone in the config.

Time on 2 shared, busy cores (TLC 2.15): the safety model 80-370 s, Pairs 35-125 s,
Generations 120-205 s, the liveness model 17-76 s (all marked big_instance, run by `pytest -m
big_instance`, with the mutants of the safety and Generations configs and most of Pairs', 5-45 s
each); each other mutant 3-15 s, each liveness mutant 10-25 s: the rest about 7 minutes with
-n 2 on a busy machine.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from refsched.model.durable import (
    ACTION_PROPERTIES,
    INVARIANTS,
    violated,
    violated_by_step,
)
from refsched.verify import system as systems
from refsched.verify.durable.spec import TRACES_CONFIG, read_instance, snapshot_of
from refsched.verify.durable.system import EDGES_CONFIG
from refsched.verify.specstate import SpecStateError
from refsched.verify.tla import parse_state
from refsched.verify.tlc import TLCResult, run_tlc, spec_dir

pytestmark = pytest.mark.slow

SPEC = "DurableScheduler.tla"
SAFETY = "MCDurableScheduler.cfg"
LIVENESS = "MCDurableSchedulerLiveness.cfg"
PAIRS = "MCDurableSchedulerPairs.cfg"
GENERATIONS = "MCDurableSchedulerGenerations.cfg"
TIME = "MCDurableSchedulerTime.cfg"
TIME_LIVENESS = "MCDurableSchedulerTimeLiveness.cfg"
EDGES = EDGES_CONFIG

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
SAFETY_DISTINCT_STATES = 47_751  # views: 2 ids, 2 workers, 2 slots, 1 generation, symmetry
SAFETY_DEPTH = 21
LIVENESS_DISTINCT_STATES = 3_892  # views: 1 id, 2 workers, 2 generations, no symmetry
LIVENESS_DEPTH = 20
PAIRS_DISTINCT_STATES = 12_887  # views: 2 ids, 1 worker, 1 slot, 1 generation, symmetry
PAIRS_DEPTH = 23
GENERATIONS_DISTINCT_STATES = 35_232  # views: as PAIRS with 1 attempt and 2 generations
GENERATIONS_DEPTH = 21
TIME_DISTINCT_STATES = 7_514  # views: 2 ids, 1 worker, 1 slot, priorities, delays, aging
TIME_DEPTH = 16
# The same instance without SYMMETRY: 14,828 views.  Under a VIEW, TLC reduces symmetry on the
# whole state (absolute times included) before it takes the view, so which of two symmetric
# views is kept, and so the count with SYMMETRY, depends on the spec's text, not only on its
# behaviours: one unused definition added to DurableScheduler.tla took it from 7,416 to 7,514.
# The count without SYMMETRY is the behaviours' alone; test_time_views_are_the_same_without_
# symmetry keeps it, so a change of the state space is told from a change of the reduction.
TIME_VIEWS_WITHOUT_SYMMETRY = 14_828
TIME_LIVENESS_DISTINCT_STATES = 60  # views: 1 id, 1 worker, delays of 0 and 1 tick
TIME_LIVENESS_DEPTH = 10



DURABLE: Any = systems.get("durable")  # what stategraph needs to read and match its graph


def check(config: str, directory: Path | None = None, workers: int = 2) -> TLCResult:
    # -deadlock: a closed scheduler with nothing running legitimately has no successor.
    return run_tlc(config, DURABLE.module_of(config), directory=directory, workers=workers,
                   extra_args=["-deadlock"])


def mutate(tmp_path: Path, substitutions: list[tuple[str, str, str]]) -> Path:
    """Copy spec/ into tmp_path with (module, old text, new text) edits; return the copy."""
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    for module, old, new in substitutions:
        path = copy / module
        text = path.read_text()
        assert text.count(old) == 1, f"mutant is stale: {old!r} is not in {module} once"
        path.write_text(text.replace(old, new))
    return copy


@pytest.mark.big_instance
def test_safety_model_holds_with_recorded_state_count() -> None:
    result = check(SAFETY)
    assert result.ok, result.output[-4000:]
    assert result.version is not None and "2.15" in result.version
    assert (result.distinct_states, result.depth) == (SAFETY_DISTINCT_STATES, SAFETY_DEPTH), (
        "the state space changed: update SAFETY_DISTINCT_STATES/SAFETY_DEPTH and the cfg"
    )


@pytest.mark.big_instance
@pytest.mark.parametrize(("config", "counts"), [(PAIRS, (PAIRS_DISTINCT_STATES, PAIRS_DEPTH)), (
    GENERATIONS, (GENERATIONS_DISTINCT_STATES, GENERATIONS_DEPTH))])
def test_pairs_models_hold_with_recorded_state_count(config: str, counts: tuple[int, int]) -> None:
    result = check(config)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == counts, (
        "the state space changed: update the recorded counts and the cfg")


def test_time_model_holds_with_recorded_state_count() -> None:
    result = check(TIME, workers=1)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (TIME_DISTINCT_STATES, TIME_DEPTH), (
        "the state space changed: update TIME_DISTINCT_STATES/TIME_DEPTH and the cfg")


def test_time_views_are_the_same_without_symmetry(tmp_path: Path) -> None:
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    config = copy / TIME
    text = config.read_text()
    assert text.count("\nSYMMETRY Symmetry\n") == 1
    # the checks do not change the count: without them it takes a third of the time
    config.write_text(text.replace("\nSYMMETRY Symmetry\n", "\n").split("\nINVARIANTS")[0])
    result = check(TIME, copy, workers=1)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (TIME_VIEWS_WITHOUT_SYMMETRY, TIME_DEPTH)


@pytest.mark.big_instance
def test_liveness_model_holds_with_recorded_state_count() -> None:
    result = check(LIVENESS)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (
        LIVENESS_DISTINCT_STATES, LIVENESS_DEPTH,
    ), "the state space changed: update LIVENESS_DISTINCT_STATES/LIVENESS_DEPTH and the cfg"


# -- Must-fail mutants --------------------------------------------------------------------------

D, S = SPEC, "Scheduler.tla"
TRACES = TRACES_CONFIG
CONFIGS = (SAFETY, PAIRS, GENERATIONS, TRACES, LIVENESS, TIME)  # every check in each
NOT_GENERATIONS = (SAFETY, PAIRS, TRACES, LIVENESS)  # these re-claim; Generations has 1 attempt
LEASE_REPORTS = "\\E w \\in Workers : \\E t \\in Tasks : {}(w, t, generation[t], attempt[t])"
HELD_REPORTS = "\\E w \\in Workers : \\E l \\in held[w] : {}(w, l[1], l[2], l[3])"
SCHEDULER_UNCHANGED_BUT_STATE = (
    "UNCHANGED <<started, closed, nextSeq, generation, deps, optional, remainingDeps,\n"
    "                         blockedBy, cancelRequested, seq, provenance>>\n")
CLAIM_STEP = ("        /\\ UNCHANGED <<now, ends, endedAttempt>>\n"
              "        /\\ k <= Cardinality(Eligible)\n"
              "        /\\ UNCHANGED priority\n"
              "        /\\ Abs!Claim(k)\n")
RECLAIM_GUARD = "    /\\ holder[t] = NoWorker\n    /\\ attempt[t] < MaxAttempts\n"
RECLAIM_ATTEMPT = ("Reclaim(w, t) ==\n    /\\ state[t] = \"running\"\n" + RECLAIM_GUARD
                   + "    /\\ attempt' = [attempt EXCEPT ![t] = @ + 1]\n")
EXPIRE_KEEPS = "    /\\ \\/ /\\ attempt[t] < MaxAttempts\n"
EXPIRE_GIVES_UP = "       \\/ /\\ attempt[t] >= MaxAttempts\n"
COMPLETE_ENDS = ("    /\\ holder' = [holder EXCEPT ![t] = NoWorker]\n"
                 "    /\\ deadline' = [deadline EXCEPT ![t] = 0]\n"
                 "    /\\ ends' = [ends EXCEPT ![t] = @ + 1]\n"
                 "    /\\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]\n"
                 "    /\\ held' = [held EXCEPT ![w] = @ \\ {<<t, g, a>>}]\n"
                 "    /\\ UNCHANGED <<attempt, now>>\n"
                 "    /\\ Abs!Complete(t, g)\n")


def complete_ends(old: str, new: str) -> tuple[str, str, str]:
    """An edit of Complete's lease updates (the text is shared with Fail and AcknowledgeCancel,
    so the edit is anchored on Complete's last line)."""
    assert old in COMPLETE_ENDS
    return (D, COMPLETE_ENDS, COMPLETE_ENDS.replace(old, new))


# name -> (substitutions (module, old, new), {config: (check broken, kind TLC reports)})
MUTANTS: dict[str, tuple[list[tuple[str, str, str]], dict[str, tuple[str, str]]]] = {
    # The store fences a completion by generation and state only, not by attempt and live
    # lease (River's and pg-boss's "state only"): a worker whose lease expired completes.
    "complete_without_attempt_check": (
        [(D, "Complete(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
             "    /\\ Current(w, t, g, a)\n",
          "Complete(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
          "    /\\ g = generation[t]\n    /\\ state[t] = \"running\"\n"),
         (D, LEASE_REPORTS.format("Complete"), HELD_REPORTS.format("Complete"))],
        dict.fromkeys(NOT_GENERATIONS, ("OnlyCurrentAttemptEnds", "action property")),
    ),
    # The rescuer's write is not conditional on the lease it read (River's rescuer that
    # overwrote a job completed between its read and its write): it fails any version out of
    # attempts whose deadline is past, even one that already succeeded.
    "expire_without_conditional_guard": (
        [(D, "Expire(t) ==\n    /\\ Live(t)\n    /\\ deadline[t] < now\n",
          "Expire(t) ==\n    /\\ deadline[t] < now\n"),
         (D, "          /\\ Abs!Fail(t, generation[t])\n",
          "          /\\ state' = [state EXCEPT ![t] = \"failed\"]\n          /\\ "
          + SCHEDULER_UNCHANGED_BUT_STATE)],
        dict.fromkeys(NOT_GENERATIONS, ("AtMostOneEndPerVersion", "invariant")),
    ),
    # A re-claim counts the expiry as an attempt too: the version is given more leases' worth
    # of attempts than MaxAttempts allows.
    "reclaim_counts_the_expiry_too": (
        [(D, RECLAIM_ATTEMPT, RECLAIM_ATTEMPT.replace("@ + 1", "@ + 2")),
         (D, "@ \\cup {<<t, generation[t], attempt[t] + 1>>}]",
          "@ \\cup {<<t, generation[t], attempt[t] + 2>>}]")],
        dict.fromkeys(NOT_GENERATIONS, ("AttemptsBounded", "invariant")),
    ),
    # The expiry of the last attempt re-opens the lease instead of failing the version: it
    # runs with no lease and no attempt left, and nobody may re-claim it.
    "last_expiry_reopens_the_lease": (
        [(D, EXPIRE_KEEPS, "    /\\ \\/ /\\ attempt[t] <= MaxAttempts\n"),
         (D, EXPIRE_GIVES_UP, "       \\/ /\\ attempt[t] > MaxAttempts\n")],
        dict.fromkeys(CONFIGS, ("NoLostVersion", "invariant")),
    ),
    # A re-claim hands out the expired lease's attempt again: no new fencing token, so the
    # paused worker and the new one hold the same live lease.
    "reclaim_reuses_the_attempt": (
        [(D, RECLAIM_ATTEMPT, RECLAIM_ATTEMPT.replace("[attempt EXCEPT ![t] = @ + 1]",
                                                       "attempt")),
         (D, "@ \\cup {<<t, generation[t], attempt[t] + 1>>}]",
          "@ \\cup {<<t, generation[t], attempt[t]>>}]")],
        dict.fromkeys((SAFETY, TRACES, LIVENESS), ("AtMostOneLiveLease", "invariant")),
    ),
    # A heartbeat renews the lease by writing it (holder and deadline) for the running
    # version, checking neither the attempt nor that the lease is still live: a paused
    # worker takes the version back from the one that re-claimed it.
    "heartbeat_extends_a_lost_lease": (
        [(D, "Heartbeat(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
             "    /\\ Current(w, t, g, a)\n"
             "    /\\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]\n"
             "    /\\ UNCHANGED <<attempt, holder, now, held, ends, endedAttempt>>\n",
          "Heartbeat(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
          "    /\\ g = generation[t]\n    /\\ state[t] = \"running\"\n"
          "    /\\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]\n"
          "    /\\ holder' = [holder EXCEPT ![t] = w]\n"
          "    /\\ UNCHANGED <<attempt, now, held, ends, endedAttempt>>\n"),
         (D, LEASE_REPORTS.format("Heartbeat"), HELD_REPORTS.format("Heartbeat"))],
        {SAFETY: ("AtMostOneLiveLease", "invariant")},
    ),
    # A completion leaves the lease in place: the succeeded version keeps a live lease.
    "complete_keeps_the_lease": (
        [complete_ends("    /\\ holder' = [holder EXCEPT ![t] = NoWorker]\n"
                       "    /\\ deadline' = [deadline EXCEPT ![t] = 0]\n",
                       "    /\\ UNCHANGED <<holder, deadline>>\n")],
        dict.fromkeys((PAIRS, GENERATIONS), ("AtMostOneLiveLease", "invariant")),
    ),
    # A completion leaves the lease's deadline in place: a deadline with no live lease.
    "complete_keeps_the_deadline": (
        [complete_ends("    /\\ deadline' = [deadline EXCEPT ![t] = 0]\n",
                       "    /\\ UNCHANGED deadline\n")],
        dict.fromkeys(CONFIGS, ("LeaseFitsState", "invariant")),
    ),
    # A re-claim tells the worker an attempt one past the one the store wrote.
    "reclaim_answers_a_future_attempt": (
        [(D, "@ \\cup {<<t, generation[t], attempt[t] + 1>>}]",
          "@ \\cup {<<t, generation[t], attempt[t] + 2>>}]")],
        dict.fromkeys(NOT_GENERATIONS, ("NoFutureLease", "invariant")),
    ),
    # A claim takes the eligible versions in the reverse of the claim order (without
    # priorities or delays, the largest seq first): Abs!Claim's claims' then does not match,
    # so the step is never taken, and only the enabledness check sees it; with them,
    # Scheduler's Claim may take any, and the claim order's own property sees it.
    "claim_takes_the_newest": (
        [(D, "Chosen(k) == {x \\in Eligible : Cardinality({y \\in Eligible : Before(y, x)}) < k}",
          "Chosen(k) == {x \\in Eligible : Cardinality({y \\in Eligible : Before(x, y)}) < k}")],
        {**dict.fromkeys((SAFETY, PAIRS, GENERATIONS), ("CallsTaken", "invariant")),
         TIME: ("ClaimsInKeyOrder", "action property")},
    ),
    # A submission keeps the attempt of the version it replaces: the new version would count
    # as claimed, so under the mapping the re-submission of a claimed version is no step.
    "submit_keeps_the_old_attempt": (
        [(D, "FreshLease(t, p) ==\n    /\\ attempt' = [attempt EXCEPT ![t] = 0]\n",
          "FreshLease(t, p) ==\n    /\\ attempt' = attempt\n")],
        dict.fromkeys((TRACES, LIVENESS), ("CallsTaken", "invariant")),
    ),
    # A completion clears the attempt with the lease: under the mapping the version would
    # no longer count as claimed, so no completion is ever taken.
    "complete_resets_the_attempt": (
        [complete_ends("    /\\ UNCHANGED <<attempt, now>>\n",
                       "    /\\ attempt' = [attempt EXCEPT ![t] = 0]\n"
                       "    /\\ UNCHANGED now\n")],
        dict.fromkeys(CONFIGS, ("ReportsTaken", "invariant")),
    ),
    # Claim without the slot guard: more versions run than MaxConcurrency allows.
    "claim_without_the_slot_guard": (
        [(S, "        /\\ k <= MaxConcurrency - Cardinality(running)\n", "")],
        dict.fromkeys((PAIRS, GENERATIONS), ("ConcurrencyBound", "invariant")),
    ),
    # An expired version gives up its slot: a claim counts only versions under a live lease,
    # and takes a new version while the expired one waits to be re-claimed.
    "expired_version_gives_up_its_slot": (
        [(D, CLAIM_STEP, "        /\\ UNCHANGED <<now, ends, endedAttempt>>\n"
          "        /\\ UNCHANGED priority\n"
          "        /\\ started /\\ ~closed /\\ 1 <= k\n"
          "        /\\ k <= Cardinality(Abs!InState({\"ready\"}))\n"
          "        /\\ k <= MaxConcurrency - Cardinality({x \\in Tasks : Live(x)})\n"
          "        /\\ state' = [x \\in Tasks |-> IF x \\in C THEN \"running\" ELSE state[x]]\n"
          "        /\\ UNCHANGED <<started, closed, nextSeq, generation, deps, optional,"
          " remainingDeps,\n"
          "                       blockedBy, cancelRequested, seq, provenance>>\n")],
        {PAIRS: ("ConcurrencyBound", "invariant")},
    ),
    # The clock is moved by a signed step the wrong way: time goes below 0.
    "tick_turns_the_clock_back": (
        [(D, "    /\\ now' = now + 1\n", "    /\\ now' = now - 1\n")],
        dict.fromkeys(CONFIGS, ("TypeOK", "invariant")),
    ),
    # Fan-in decides readiness before counting the completed dependency (the pg-boss race
    # in one step: the last parent's completion does not release the child).
    "fan_in_counts_before_the_decrement": (
        [(S, "ELSE IF x \\in waiting /\\ remainingDeps[x] = 1 THEN \"ready\"",
          "ELSE IF x \\in waiting /\\ remainingDeps[x] = 0 THEN \"ready\"")],
        dict.fromkeys((SAFETY, PAIRS, GENERATIONS), ("IndegreeInvariant", "invariant")),
    ),
    # A version submitted before start() waits as pending, though no dep is left to wait for.
    "submit_before_start_is_pending": (
        [(S, "IF x = t THEN (IF rd = 0 THEN \"ready\" ELSE \"pending\")",
          "IF x = t THEN (IF rd = 0 /\\ started THEN \"ready\" ELSE \"pending\")")],
        dict.fromkeys((TRACES, LIVENESS), ("IndegreeInvariant", "invariant")),
    ),
    # close(cancel_pending=True) marks the waiting versions blocked instead of cancelled:
    # blocked, with nothing to blame.
    "close_blocks_pending_work": (
        [(S, "THEN [x \\in Tasks |-> IF state[x] \\in Waiting THEN \"cancelled\" ELSE state[x]]",
          "THEN [x \\in Tasks |-> IF state[x] \\in Waiting THEN \"blocked\" ELSE state[x]]")],
        dict.fromkeys(CONFIGS, ("BlockedHasCause", "invariant")),
    ),
    # A failure does not spread: its waiting dependents keep waiting on a dead dep.
    "fail_without_settle": (
        [(S, "    LET settled == Settle([state EXCEPT ![t] = \"failed\"], deps, optional, seq, "
             "blockedBy,\n                          remainingDeps, {t}, provenance)\n"
             "    IN  /\\ g = generation[t]\n",
          "    LET settled == [state |-> [state EXCEPT ![t] = \"failed\"],\n"
          "                    blockedBy |-> blockedBy, remainingDeps |-> remainingDeps,\n"
          "                    provenance |-> provenance]\n"
          "    IN  /\\ g = generation[t]\n")],
        dict.fromkeys((SAFETY, PAIRS, GENERATIONS), ("BlockedPropagated", "invariant")),
    ),
    # start() seals a graph with a cycle.
    "start_accepts_a_cycle": (
        [(S, "    /\\ Acyclic(deps)\n    /\\ started' = TRUE\n", "    /\\ started' = TRUE\n")],
        dict.fromkeys((SAFETY, PAIRS, GENERATIONS), ("SealedGraph", "invariant")),
    ),
    # retry() re-opens the dead version in place, without a new generation.
    "retry_reuses_the_generation": (
        [(S, "        /\\ generation' = [x \\in Tasks |-> IF x \\in R THEN generation[x] + 1 "
             "ELSE generation[x]]\n",
          "        /\\ generation' = generation\n")],
        dict.fromkeys(CONFIGS, ("NoTerminalToReady", "action property")),
    ),
    # A claim takes pending versions too, before their deps succeeded.
    "claim_takes_pending_versions": (
        [(S, "    LET ready   == InState({\"ready\"})\n", "    LET ready   == InState(Waiting)\n"),
         (D, "    LET ready == Abs!InState({\"ready\"})\n",
          "    LET ready == Abs!InState(Abs!Waiting)\n")],
        dict.fromkeys((SAFETY, PAIRS, GENERATIONS),
                      ("ClaimOnlyAfterDepsSucceeded", "action property")),
    ),
    # A re-claim starts the new attempt afresh and forgets a requested cancel: no step of
    # Scheduler withdraws a cancel request.
    "reclaim_forgets_the_cancel_request": (
        [(D, "    /\\ UNCHANGED <<now, ends, endedAttempt>>\n    /\\ UNCHANGED schedulerVars\n",
          "    /\\ UNCHANGED <<now, ends, endedAttempt>>\n"
          "    /\\ cancelRequested' = [cancelRequested EXCEPT ![t] = FALSE]\n"
          "    /\\ UNCHANGED <<started, closed, nextSeq, generation, state, deps, optional,"
          " remainingDeps,\n"
          "                   blockedBy, seq, provenance>>\n")],
        dict.fromkeys(NOT_GENERATIONS, ("Refinement", "action property")),
    ),
    # A completion is fenced by attempt and live lease but not by generation: a worker that
    # still holds the lease of an older generation with the same attempt number completes
    # the new version.
    "complete_without_generation_check": (
        [(D, "Complete(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
             "    /\\ Current(w, t, g, a)\n",
          "Complete(w, t, g, a) ==\n    /\\ <<t, g, a>> \\in held[w]\n"
          "    /\\ a = attempt[t] /\\ state[t] = \"running\" /\\ holder[t] = w\n"),
         (D, "    /\\ UNCHANGED <<attempt, now>>\n    /\\ Abs!Complete(t, g)\n",
          "    /\\ UNCHANGED <<attempt, now>>\n    /\\ Abs!Complete(t, generation[t])\n"),
         (D, LEASE_REPORTS.format("Complete"), HELD_REPORTS.format("Complete"))],
        {GENERATIONS: ("OnlyCurrentAttemptEnds", "action property")},
    ),
    # The store counts a repeated report on an ended version as one more end: an end with
    # no live lease.
    "repeated_report_counts_an_end": (
        [(D, "RepeatedCallback(t) ==\n    /\\ UNCHANGED leaseVars\n",
          "RepeatedCallback(t) ==\n    /\\ ends' = [ends EXCEPT ![t] = @ + 1]\n"
          "    /\\ UNCHANGED <<attempt, holder, deadline, now, held, endedAttempt>>\n")],
        {GENERATIONS: ("OnlyCurrentAttemptEnds", "action property")},
    ),
    # A completion is counted twice, once for the report and once for the end it records.
    # (With deps, Generations finds expire_without_conditional_guard's missing Settle first.)
    "complete_counts_two_ends": (
        [complete_ends("    /\\ ends' = [ends EXCEPT ![t] = @ + 1]\n",
                       "    /\\ ends' = [ends EXCEPT ![t] = @ + 2]\n")],
        {GENERATIONS: ("AtMostOneEndPerVersion", "invariant")},
    ),
    # A claim writes a first lease as attempt 2: with one attempt allowed, one too many.
    "claim_starts_at_attempt_two": (
        [(D, "    IN  /\\ attempt' = [x \\in Tasks |-> IF x \\in C THEN 1 ELSE attempt[x]]\n",
          "    IN  /\\ attempt' = [x \\in Tasks |-> IF x \\in C THEN 2 ELSE attempt[x]]\n")],
        {GENERATIONS: ("AttemptsBounded", "invariant")},
    ),
    # A claim tells the worker an attempt one past the one the store wrote.
    "claim_answers_a_future_attempt": (
        [(D, "@ \\cup {<<x, generation[x], 1>> : x \\in C}]",
          "@ \\cup {<<x, generation[x], 2>> : x \\in C}]")],
        {GENERATIONS: ("NoFutureLease", "invariant")},
    ),
    # A heartbeat also withdraws a requested cancel (as if the worker's answer cleared it):
    # no step of Scheduler withdraws a cancel request.
    "heartbeat_forgets_the_cancel_request": (
        [(D, "    /\\ UNCHANGED <<attempt, holder, now, held, ends, endedAttempt>>\n"
             "    /\\ UNCHANGED schedulerVars\n",
          "    /\\ UNCHANGED <<attempt, holder, now, held, ends, endedAttempt>>\n"
          "    /\\ cancelRequested' = [cancelRequested EXCEPT ![t] = FALSE]\n"
          "    /\\ UNCHANGED <<started, closed, nextSeq, generation, state, deps, optional,"
          " remainingDeps,\n"
          "                   blockedBy, seq, provenance>>\n")],
        {GENERATIONS: ("Refinement", "action property")},
    ),
    # A completion records the attempt after its own as the one that ended the version: a
    # repeat of the report would be refused, and one of a lease never given would be answered.
    "complete_records_the_next_attempt_as_ended": (
        [complete_ends("    /\\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]\n",
                       "    /\\ endedAttempt' = [endedAttempt EXCEPT ![t] = a + 1]\n")],
        dict.fromkeys(CONFIGS, ("EndedAttemptFits", "invariant")),
    ),
    # A retry keeps the ended attempt of the version it replaces: the new version, waiting,
    # would answer a repeat of the old one's report as its own.
    "retry_keeps_the_ended_attempt": (
        [(D, "        /\\ endedAttempt' = [x \\in Tasks |-> "
             "IF x \\in R THEN 0 ELSE endedAttempt[x]]\n",
          "        /\\ UNCHANGED endedAttempt\n")],
        dict.fromkeys((TRACES, LIVENESS), ("EndedAttemptFits", "invariant")),
    ),
    # The store applies a repeated report again instead of answering it (the fan-in of a
    # success counted twice): a second end of the version.
    "repeated_report_ends_again": (
        [(D, "    /\\ UNCHANGED <<attempt, holder, deadline, now, ends, endedAttempt>>\n"
             "    /\\ Abs!RepeatedCallback(t)\n",
          "    /\\ ends' = [ends EXCEPT ![t] = @ + 1]\n"
          "    /\\ UNCHANGED <<attempt, holder, deadline, now, endedAttempt>>\n"
          "    /\\ Abs!RepeatedCallback(t)\n")],
        dict.fromkeys((TRACES, PAIRS), ("AtMostOneEndPerVersion", "invariant")),
    ),
    # Re-submitting a dependency clears the leases of its dependents too: a dependent that
    # already runs (its dep had succeeded) would count as never claimed, so under the mapping
    # the re-submission is no step.  Only 2 ids with 2 generations re-submit a dependency
    # of a running version.
    "resubmit_clears_the_dependents_leases": (
        [(D, "FreshLease(t, p) ==\n    /\\ attempt' = [attempt EXCEPT ![t] = 0]\n",
          "FreshLease(t, p) ==\n    /\\ attempt' = [x \\in Tasks |-> "
          "IF x = t \\/ t \\in deps[x] THEN 0 ELSE attempt[x]]\n")],
        {GENERATIONS: ("CallsTaken", "invariant")},
    ),
}

# A claim takes a version one tick before it is due.
MUTANTS["claim_one_tick_early"] = (
    [(D, "    IN  {x \\in ready : due[x] <= now}\n",
      "    IN  {x \\in ready : due[x] <= now + 1}\n")],
    {TIME: ("ClaimsOnlyDue", "action property")},
)
# Aging that never lifts, read so everywhere the claim key is written (the contract
# misread, in the claim and in the property that restates it): the key is priority * Aging
# alone, so a low priority waits behind every higher one, however long it has been due.
# Only AgingBound, stated on due times and priorities, sees it.
MUTANTS["aging_never_lifts"] = (
    [(D, "    THEN \\/ priority[x] * Aging - due[x] > priority[y] * Aging - due[y]\n"
         "         \\/ /\\ priority[x] * Aging - due[x] = priority[y] * Aging - due[y]\n",
      "    THEN \\/ priority[x] * Aging > priority[y] * Aging\n"
      "         \\/ /\\ priority[x] * Aging = priority[y] * Aging\n"),
     (D, "              THEN \\/ priority[u] * Aging - due[u] > priority[t] * Aging - due[t]\n"
         "                   \\/ /\\ priority[u] * Aging - due[u] = priority[t] * Aging - due[t]\n",
      "              THEN \\/ priority[u] * Aging > priority[t] * Aging\n"
      "                   \\/ /\\ priority[u] * Aging = priority[t] * Aging\n")],
    {TIME: ("AgingBound", "action property")},
)
# A claim of k takes k + 1 versions when more are eligible: Abs!Claim(k)'s claims' does not
# match, so the step is never taken, and only the enabledness check sees it.
MUTANTS["claim_leases_one_too_many"] = (
    [(D, "Chosen(k) == {x \\in Eligible : Cardinality({y \\in Eligible : Before(y, x)}) < k}",
      "Chosen(k) == {x \\in Eligible : Cardinality({y \\in Eligible : Before(y, x)}) <= k}")],
    {TIME: ("CallsTaken", "invariant")},
)
# The time instance (2 ids, 1 worker, 1 slot, 1 attempt, 1 generation, no lost answers): the
# mutants of other instances that break each of its checks there too.
for _name, _check in {
        "fan_in_counts_before_the_decrement": "IndegreeInvariant",
        "claim_without_the_slot_guard": "ConcurrencyBound",
        "fail_without_settle": "BlockedPropagated",
        "start_accepts_a_cycle": "SealedGraph",
        "complete_counts_two_ends": "AtMostOneEndPerVersion",
        "complete_keeps_the_lease": "AtMostOneLiveLease",
        "claim_starts_at_attempt_two": "AttemptsBounded",
        "claim_answers_a_future_attempt": "NoFutureLease",
        "claim_takes_pending_versions": "ClaimOnlyAfterDepsSucceeded",
        "repeated_report_counts_an_end": "OnlyCurrentAttemptEnds",
        "heartbeat_forgets_the_cancel_request": "Refinement"}.items():
    MUTANTS[_name][1][TIME] = (_check, "invariant" if _check in INVARIANTS
                               else "action property")

# The edges instance (OptionalEdges and AddDepsAllowed TRUE): edge kinds and AddDeps, each
# fault in the store's settle, fan-in or AddDeps transaction (or in Scheduler's, which the
# store's steps are through the mapping) caught by the check it breaks.
ADD_DEPS_GUARD = "        /\\ state[t] = \"pending\"\n        /\\ t \\notin D\n"
ADD_DEPS_SETTLE = ("        settled == Settle(state, newDeps, newOpt, seq, blockedBy, rd1, {}, "
                   "provenance)\n"
                   "    IN  /\\ AddDepsAllowed\n")
EDGE_MUTANTS: dict[str, tuple[list[tuple[str, str, str]], str]] = {
    # The fence is "not ended" rather than "pending": an edge lands on a claimed version.
    "add_deps_lands_on_a_claimed_version": (
        [(S, ADD_DEPS_GUARD, ADD_DEPS_GUARD.replace("state[t] = \"pending\"",
                                                   "state[t] \\in {\"pending\", \"running\"}"))],
        "EdgesAddedOnlyToPending"),
    # Blocking spreads along every edge: an optional parent's failure blocks its child.
    "optional_failure_blocks": (
        [(S, "        req     == [x \\in Tasks |-> dp[x] \\ op[x]]\n",
          "        req     == dp\n")],
        "OptionalParentNeverBlocks"),
    # An optional edge counts as settled from the start: the child is claimed while its
    # optional parent still runs.
    "optional_edge_settled_at_once": (
        [(S, "Settles(s, isOptional) == IF isOptional THEN s \\in TerminalStates ELSE",
          "Settles(s, isOptional) == IF isOptional THEN TRUE ELSE")],
        "ReadyOnlyAfterDepsSettled"),
    # AddDeps adds the edges and leaves the count as it was (flux-core#4405: a dependency
    # added after the job left its dependency state is never enforced).
    "add_deps_does_not_raise_the_count": (
        [(S, "        rd1     == [remainingDeps EXCEPT ![t] = @ + Unsettled(state, D, O)]\n",
          "        rd1     == remainingDeps\n")],
        "IndegreeInvariant"),
    # AddDeps of a dead required parent leaves the version pending: it waits for ever.
    "add_deps_without_settle": (
        [(S, ADD_DEPS_SETTLE,
          "        settled == [state |-> state, blockedBy |-> blockedBy, remainingDeps |-> rd1,\n"
          "                    provenance |-> provenance]\n"
          "    IN  /\\ AddDepsAllowed\n")],
        "BlockedPropagated"),
}
for _name, (_substitutions, _check) in EDGE_MUTANTS.items():
    MUTANTS[_name] = (_substitutions, {EDGES: (_check, "invariant" if _check in INVARIANTS
                                               else "action property")})
MUTANTS["heartbeat_forgets_the_cancel_request"][1][EDGES] = ("Refinement", "action property")

# Checks a config names that no fault can break on its instance: with one id there are no
# deps and no second version to run, so these hold by the instance's shape alone.
# MCDurableSchedulerPairs.cfg (2 ids, 1 slot, 2 generations) checks each of them with a
# mutant that breaks it; MCDurableScheduler.cfg has 2 slots for its 2 ids.  The claim order's
# checks cannot fail without priorities and delays: every version is due at once, and the
# refinement holds the claims to Scheduler's oldest first (OldestFirst); the time instance
# (MCDurableSchedulerTime.cfg) is where they can.
VACUOUS: dict[tuple[str, str], str] = {
    (SAFETY, "ConcurrencyBound"): "2 ids, 2 slots",
    **{(config, name): "1 id" for config in (TRACES, LIVENESS) for name in (
        "ConcurrencyBound", "BlockedPropagated", "SealedGraph", "ClaimOnlyAfterDepsSucceeded")},
    **{(config, name): "no priorities, no delays"
       for config in (SAFETY, PAIRS, GENERATIONS, TRACES, LIVENESS)
       for name in ("ClaimsOnlyDue", "ClaimsInKeyOrder", "AgingBound")},
}


def cfg_checks(config: str) -> dict[str, str]:
    """The checks a config names: name -> "invariant", "action property" or "temporal"."""
    text = re.sub(r"\\\*.*", "", (spec_dir() / config).read_text())
    checks: dict[str, str] = {}
    for keyword in ("INVARIANTS", "PROPERTIES"):
        m = re.search(rf"^{keyword}\n((?:[ \t]+\w+[ \t]*\n?)+)", text, re.M)
        for name in ([] if m is None else m.group(1).split()):
            checks[name] = ("invariant" if keyword == "INVARIANTS"
                            else "temporal" if name in TEMPORAL else "action property")
    return checks


def test_every_check_of_every_config_has_a_mutant_or_is_said_vacuous() -> None:
    caught = {(config, check) for _, by_config in MUTANTS.values()
              for config, (check, _) in by_config.items()}
    caught |= {(LIVENESS, check) for check, _ in LIVENESS_MUTANTS.values()}
    caught |= {(TIME_LIVENESS, check) for check in TIME_LIVENESS_MUTANTS["tick_waits_for_a_lease"]}
    named = {(config, check) for config in (*CONFIGS, TIME_LIVENESS, EDGES)
             for check in cfg_checks(config)}
    assert caught | set(VACUOUS) == named
    assert not caught & set(VACUOUS)
    # Every check is caught somewhere; each vacuous one on a config where it can fail.
    assert {check for _, check in VACUOUS} <= {check for _, check in caught}
    for _, by_config in MUTANTS.values():
        for config, (check, kind) in by_config.items():
            assert cfg_checks(config)[check] == kind


def test_every_lease_check_and_the_refinement_have_a_mutant() -> None:
    checks = {check for _, by_config in MUTANTS.values() for check, _ in by_config.values()}
    assert checks == set(INVARIANTS) | set(ACTION_PROPERTIES)


def trace_states(trace: str) -> list[dict[str, Any]]:
    """The states of a TLC error trace, as variable -> value."""
    blocks = re.split(r"^State \d+: .*$", trace, flags=re.M)[1:]
    return [parse_state(block) for block in blocks]


# TLC names an action property by the innermost definition it evaluates: Scheduler's, for
# the checks this spec reuses as X == Abs!X.
REPORTED_AS = {"NoTerminalToReady": "Abs!NoTerminalToReady",
               "ReadyOnlyAfterDepsSettled": "Abs!ReadyOnlyAfterDepsSettled",
               "EdgesAddedOnlyToPending": "Abs!EdgesAddedOnlyToPending",
               "OptionalParentNeverBlocks": "Abs!OptionalParentNeverBlocks",
               "ClaimOnlyAfterDepsSucceeded": "Abs!ClaimOnlyAfterDepsSucceeded"}

# Checks the model has as predicates of a state but not of the spec's steps: these two are
# about the spec's own actions (a mutant's step is disabled; its states are all fine).
ENABLEDNESS = {"CallsTaken", "ReportsTaken"}


# Mutant runs on 2 ids take 5-45 s each (the enabledness checks evaluate ENABLED on every
# state): those of the safety and Generations configs run with the big instances, under
# -m big_instance, and so do those of Pairs but for the checks that cannot fail with 1 id
# (VACUOUS) and the claim that takes the newest versions.
SLOW_MUTANT_CONFIGS = (SAFETY, GENERATIONS)
PAIRS_ALWAYS = {check for _, check in VACUOUS} | {"CallsTaken"}


def slow(config: str, check: str) -> bool:
    return config in SLOW_MUTANT_CONFIGS or (config == PAIRS and check not in PAIRS_ALWAYS)


@pytest.mark.parametrize(("name", "config"), [
    pytest.param(name, config,
                 marks=[pytest.mark.big_instance] * slow(config, by_config[config][0]))
    for name, (_, by_config) in sorted(MUTANTS.items()) for config in by_config])
def test_mutant_violates_exactly_its_check(name: str, config: str, tmp_path: Path) -> None:
    substitutions, by_config = MUTANTS[name]
    broken, kind = by_config[config]
    result = check(config, mutate(tmp_path, substitutions), workers=1)
    assert not result.ok
    reported = REPORTED_AS.get(broken, broken)
    assert (result.violation_kind, result.violated) == (kind, reported), result.output[-4000:]
    assert result.trace is not None and result.trace.startswith("State 1: <Initial predicate>")
    # The model's predicates agree: the counterexample's last step breaks that check (an
    # invariant alone; an action property perhaps with others the same step breaks).
    *_, before, after = trace_states(result.trace)
    limits = read_instance(config).limits
    if broken == "TypeOK":
        # A value of the wrong type has no DurableSnapshot: the model refuses the state.
        snapshot_of(before)
        with pytest.raises(SpecStateError):
            snapshot_of(after)
        return
    source, target = snapshot_of(before), snapshot_of(after)
    assert violated(source, limits) == []
    if broken in ENABLEDNESS:
        assert violated(target, limits) == []
    elif kind == "invariant":
        assert violated(target, limits) == [broken]
    else:
        assert violated(target, limits) == MODEL_ALSO_SEES.get(name, [])
        assert broken in violated_by_step(source, target, limits)


# Mutants of what a check's words mean in Scheduler.tla itself: the spec's own invariants
# change meaning with them, the model's (written from the contract) do not, so on the
# counterexample's last state the model sees these broken too.  An optional edge settled from
# the start makes the spec's count leave it out; the model's count has it.
MODEL_ALSO_SEES = {"optional_edge_settled_at_once": ["IndegreeInvariant"]}


TEMPORAL = {"EveryVersionEnds", "AbsFairSpec"}
FAIRNESS_CONDITION = {
    "no_fairness_on_expire": "    /\\ \\A t \\in Tasks : WF_vars(Expire(t))\n",
    "no_fairness_on_reclaim": "    /\\ \\A t \\in Tasks : WF_vars(Reclaim(FairWorker, t))\n",
    "other_workers_may_run_for_ever":
        "    /\\ \\A w \\in Workers \\ {FairWorker} : WF_vars(Stop(w))\n",
    "no_fairness_on_tick": "    /\\ WF_vars(Tick)\n",
    "no_fairness_on_claim":
        "    /\\ WF_vars(\\E k \\in 1..MaxConcurrency : Claim(FairWorker, k))\n",
    "the_fair_worker_may_run_for_ever":
        "    /\\ \\A t \\in Tasks : WF_vars(Finish(FairWorker, t))\n",
}

# name -> (temporal property broken, substitutions in DurableScheduler.tla)
LIVENESS_MUTANTS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    # Nobody takes an expired lease away: the version of a crashed worker runs for ever.
    "no_fairness_on_expire": ("EveryVersionEnds", []),
    # The fair worker does not re-claim what others lost.
    "no_fairness_on_reclaim": ("EveryVersionEnds", []),
    # Another worker may heartbeat one version for ever.
    "other_workers_may_run_for_ever": ("EveryVersionEnds", []),
    # The clock may stop while a lease waits to expire.
    "no_fairness_on_tick": ("EveryVersionEnds", []),
    # Nobody claims: a ready version waits for ever.
    "no_fairness_on_claim": ("EveryVersionEnds", []),
    # The fair worker may heartbeat the version it runs for ever.
    "the_fair_worker_may_run_for_ever": ("EveryVersionEnds", []),
    # Nobody claims: every step is still one of Scheduler's (Refinement holds), but the
    # behaviour is not a fair one of Scheduler's: Claim stays enabled and is never taken.
    "unfair_to_schedulers_claim": ("AbsFairSpec", [
        (D, FAIRNESS_CONDITION["no_fairness_on_claim"], "")]),
}
for _name, _condition in FAIRNESS_CONDITION.items():
    LIVENESS_MUTANTS[_name][1].append((D, _condition, ""))


def test_every_fairness_condition_has_a_mutant() -> None:
    text = (spec_dir() / SPEC).read_text()
    fair = text.split("\nFairSpec ==\n", 1)[1].split("\n\\*", 1)[0]
    conditions = {line + "\n" for line in fair.splitlines() if "WF_vars" in line}
    removed = {old for name in FAIRNESS_CONDITION for _, old, new in LIVENESS_MUTANTS[name][1]}
    assert conditions == removed


def only_temporal(copy: Path, config: str, keep: str) -> None:
    """Leave ``keep`` the one temporal property ``config`` names in ``copy``: TLC 2.15 does
    not name the temporal property it finds violated, so a run checks one at a time."""
    path = copy / config
    text = path.read_text()
    for name in TEMPORAL - {keep}:
        assert text.count(f"    {name}\n") == 1
        text = text.replace(f"    {name}\n", "")
    path.write_text(text)


@pytest.mark.parametrize("name", sorted(LIVENESS_MUTANTS))
def test_liveness_mutant_violates_its_temporal_property(name: str, tmp_path: Path) -> None:
    broken, substitutions = LIVENESS_MUTANTS[name]
    copy = mutate(tmp_path, substitutions)
    only_temporal(copy, LIVENESS, broken)
    result = check(LIVENESS, copy)
    assert not result.ok
    assert result.violation_kind == "temporal", result.output[-4000:]
    assert result.trace is not None


def test_time_liveness_model_holds_with_recorded_state_count() -> None:
    result = check(TIME_LIVENESS, workers=1)
    assert result.ok, result.output[-4000:]
    assert (result.distinct_states, result.depth) == (
        TIME_LIVENESS_DISTINCT_STATES, TIME_LIVENESS_DEPTH,
    ), "the state space changed: update TIME_LIVENESS_DISTINCT_STATES/..._DEPTH and the cfg"


# name -> (temporal properties each run breaks, substitutions in DurableScheduler.tla)
TIME_LIVENESS_MUTANTS: dict[str, tuple[str, ...]] = {
    # Tick waits for a live lease, as before due times: a version ready but not yet due, with
    # nothing running, waits for ever (and Scheduler's Claim, enabled all along, is never
    # taken).  No safety check can see it: no state is wrong, the clock just stops.
    "tick_waits_for_a_lease": ("EveryVersionEnds", "AbsFairSpec"),
}
TICK_FOR_DUE = "                   \\/ state[t] \\in Abs!Waiting /\\ due[t] + Lead(t) > now}"


@pytest.mark.parametrize("broken", TIME_LIVENESS_MUTANTS["tick_waits_for_a_lease"])
def test_a_tick_that_waits_for_a_lease_breaks_time_liveness(broken: str, tmp_path: Path) -> None:
    copy = mutate(tmp_path, [(D, TICK_FOR_DUE, "}")])
    only_temporal(copy, TIME_LIVENESS, broken)
    result = check(TIME_LIVENESS, copy, workers=1)
    assert not result.ok
    assert result.violation_kind == "temporal", result.output[-4000:]
    assert result.trace is not None
