"""TLC checks of spec/DurableRowLocks.tla: the store's transactions statement by statement under
READ COMMITTED with row locks, and the mutants that show each of its checks can fail.

Each mutant copies ``spec/`` to a temporary folder, edits ``DurableRowLocks.tla`` by text
substitutions (each original text must be there once, so an edit of the spec cannot silently
turn a mutant into the unmodified spec), and asserts TLC reports exactly the check it breaks.
Mutants run with one TLC worker, so the breadth-first search, and the violation TLC finds
first, is the same on every run. Three of them are the bugs a row-locked queue is known for: a
claim that reads a row another claimer holds instead of skipping it, a report fenced on a value
read before its lock, and a fan-in that reads the count outside the row's lock.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from refsched.verify.tlc import TLCResult, run_tlc, spec_dir

pytestmark = pytest.mark.slow

SPEC = "DurableRowLocks.tla"
MODULE = "MCDurableRowLocks.tla"
FAN_IN = "MCDurableRowLocks.cfg"
SLOTS = "MCDurableRowLocksSlots.cfg"

# Measured with TLC 2.15. If the spec changes, update these and the comments in the cfg files.
FAN_IN_DISTINCT_STATES = 145_130  # views: time relative to the clock
FAN_IN_DEPTH = 54
SLOTS_DISTINCT_STATES = 2_902
SLOTS_DEPTH = 37


def check(config: str, directory: Path | None = None, workers: int = 2) -> TLCResult:
    # -deadlock: once every version succeeded, no step is left, which is not an error.
    return run_tlc(config, MODULE, directory=directory, workers=workers,
                   extra_args=["-deadlock"])


def mutate(tmp_path: Path, substitutions: list[tuple[str, str]]) -> Path:
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    path = copy / SPEC
    text = path.read_text()
    for old, new in substitutions:
        assert text.count(old) == 1, f"mutant is stale: {old!r} is not in {SPEC} once"
        text = text.replace(old, new)
    path.write_text(text)
    return copy


@pytest.mark.parametrize(("config", "states", "depth"), [
    # 100-530 s on 2 shared cores, most of it evaluating the refinement on every step
    pytest.param(FAN_IN, FAN_IN_DISTINCT_STATES, FAN_IN_DEPTH, marks=pytest.mark.big_instance),
    (SLOTS, SLOTS_DISTINCT_STATES, SLOTS_DEPTH),
])
def test_row_lock_transactions_hold_with_recorded_state_count(config: str, states: int,
                                                              depth: int) -> None:
    result = check(config)
    assert result.ok, result.output[-3000:]
    assert (result.distinct_states, result.depth) == (states, depth)


# The statement a mutant changes, and the check TLC must report, in the config named.
# TLC 2.15 names no property violated by the initial state, only the conjunct of
# DurableScheduler's (Scheduler's) Init it breaks: INITIAL stands for AtomicInit.
INITIAL = "AtomicInit"
OTHERS = ("ClaimTake(w) \\/ ClaimSlot(w)", "CompleteWrite(w) \\/ ClaimTake(w) \\/ ClaimSlot(w)")
COMPLETE_WRITE = '''CompleteWrite(w) ==
    LET t == target[w]
    IN  /\\ pc[w] = "completeWrite"
        /\\ Unlocked(w, t)
        /\\ lock' = [lock EXCEPT ![t] = w]
        /\\ Stage(w, t, [row[t] EXCEPT !.st = "succeeded", !.hold = NoWorker, !.deadline = 0])
        /\\ pc' = [pc EXCEPT ![w] = "completeSlot"]
        /\\ UNCHANGED <<started, now, row, slot, nextSeq, share, slotLock, slotWrites, target,
                       lease, todo, unsettled, held, claims, ends, endedAttempt>>

Next =='''

MUTANTS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    # SELECT ... FOR UPDATE without SKIP LOCKED, in a statement that does not wait for the
    # lock either: it reads the row another claimer holds as it was last committed.
    "claim_reads_a_locked_row_stale": (FAN_IN, "SlotsFit", [
        ("LET open == {t \\in Tasks : Claimable(t) /\\ Unlocked(w, t)}",
         "LET open == {t \\in Tasks : Claimable(t)}"),
        ("IN  /\\ lock' = [lock EXCEPT ![t] = w]", "IN  /\\ lock' = lock"),
    ]),
    # SELECT state, attempt, holder (no lock), checked on the client, then an UPDATE of the
    # row by id alone, which waits for the lock but no longer checks the lease.
    "report_fenced_on_a_value_read_before_the_lock": (FAN_IN, "OnlyLiveLeaseEnds", [
        ("    /\\ Unlocked(w, t)\n    /\\ IF row[t].st = \"running\"",
         "    /\\ IF row[t].st = \"running\""),
        ("       THEN /\\ lock' = [lock EXCEPT ![t] = w]\n"
         "            /\\ Stage(w, t, [row[t] EXCEPT !.st = \"succeeded\", !.hold = NoWorker,"
         " !.deadline = 0])\n",
         "       THEN /\\ UNCHANGED <<lock, writes>>\n"),
        ("/\\ pc' = [pc EXCEPT ![w] = \"completeSlot\"]",
         "/\\ pc' = [pc EXCEPT ![w] = \"completeWrite\"]"),
        ("Next ==", COMPLETE_WRITE),
        OTHERS,
    ]),
    # The fan-in reads a dependent's count, then writes it less one, without holding the
    # dependent's row: two parents that end at once both write the same count.
    "fan_in_reads_the_count_outside_the_row_lock": (FAN_IN, "IndegreeInvariant", [
        ("    /\\ d \\in todo[w]\n    /\\ Unlocked(w, d)\n", "    /\\ d \\in todo[w]\n"),
        ("       THEN /\\ lock' = [lock EXCEPT ![d] = w]\n", "       THEN /\\ UNCHANGED lock\n"),
    ]),
    # The submit reads its dependencies' states without FOR SHARE: a report that commits
    # meanwhile decrements the dependents it sees, which do not yet include this one.
    "submit_reads_its_deps_without_a_share_lock": (FAN_IN, "IndegreeInvariant", [
        ("    /\\ lock[d] \\in {Nobody, Submitter}\n"
         "    /\\ share' = [share EXCEPT ![d] = @ \\cup {Submitter}]\n",
         "    /\\ UNCHANGED share\n"),
    ]),
    # The free slot row is read without a lock, so two claims take the same one.
    "slot_row_taken_without_a_lock": (SLOTS, "ConcurrencyBound", [
        ("LET open == {s \\in Slots : slot[s] = NoTask /\\ slotLock[s] \\in {Nobody, w}}",
         "LET open == {s \\in Slots : slot[s] = NoTask}"),
        ("/\\ slotLock' = [slotLock EXCEPT ![s] = w]", "/\\ UNCHANGED slotLock"),
    ]),
    # The expiry's UPDATE is decided on the row read before a report committed (river#1302: a
    # rescuer overwriting a job that completed after its fetch).
    "expiry_decided_on_a_row_read_before_the_lock": (FAN_IN, "SlotsFit", [
        ("    /\\ Unlocked(w, t)\n    /\\ row[t].st = \"running\"\n",
         "    /\\ row[t].st = \"running\"\n"),
        ("    /\\ lock' = [lock EXCEPT ![t] = w]\n    /\\ Stage(w, t, [row[t] EXCEPT !.hold = "
         "NoWorker, !.deadline = 0])", "    /\\ UNCHANGED lock\n    /\\ Stage(w, t, [row[t] "
         "EXCEPT !.hold = NoWorker, !.deadline = 0])"),
    ]),
    # The claim takes the last claimable version in seq order, not the first.
    "claim_takes_the_last_version": (FAN_IN, "SkipOnlyLocked", [
        ("\\A y \\in open : row[x].seq <= row[y].seq",
         "\\A y \\in open : row[x].seq >= row[y].seq"),
    ]),
    # The fan-in makes a dependent ready while one of its deps still has to end.
    "fan_in_readies_one_dep_early": (FAN_IN, "ReadyOnlyWhenNothingRemains", [
        ("!.st = IF row[d].rem = 1 THEN", "!.st = IF row[d].rem <= 2 THEN"),
    ]),
    # A re-claim starts the attempts again: the fencing token of a lost lease is reused.
    "reclaim_restarts_the_attempt": (FAN_IN, "AtMostOneClaimPerVersion", [
        ('Stage(w, t, [row[t] EXCEPT !.st = "running", !.att = @ + 1, !.hold = w])',
         'Stage(w, t, [row[t] EXCEPT !.st = "running", !.att = 1, !.hold = w])'),
    ]),
    # The report frees no slot row: the version ends holding it.
    "report_keeps_its_slot_row": (FAN_IN, "SlotsFit", [
        ("[s \\in mine |-> NoTask] @@ @", "[s \\in {} |-> NoTask] @@ @"),
    ]),
    # The submit's check that the id is new lets a succeeded version be submitted again (a
    # store without generations): the version goes back to waiting.
    "submit_over_a_succeeded_version": (FAN_IN, "NoTerminalToReady", [
        ("    /\\ row[t].st = \"absent\"\n    /\\ \\A d",
         "    /\\ row[t].st \\in {\"absent\", \"succeeded\"}\n    /\\ \\A d"),
    ]),
    # The claim's commit writes a lease longer than LeaseTime: every invariant holds, the
    # commit is no step of DurableScheduler.
    "claim_writes_a_longer_lease": (SLOTS, "Refinement", [
        ("EXCEPT !.deadline = now + LeaseTime]", "EXCEPT !.deadline = now + LeaseTime + 1]"),
    ]),
    # The store starts out started: not DurableScheduler's initial state.
    "store_starts_out_started": (SLOTS, INITIAL, [
        ("    /\\ started = FALSE\n", "    /\\ started = TRUE\n"),
    ]),
    # An expiry writes a holder that is no worker.
    "expiry_writes_a_bad_holder": (FAN_IN, "TypeOK", [
        ("Stage(w, t, [row[t] EXCEPT !.hold = NoWorker, !.deadline = 0])",
         "Stage(w, t, [row[t] EXCEPT !.hold = Nobody, !.deadline = 0])"),
    ]),
}


def cfg_checks(config: str) -> set[str]:
    text = re.sub(r"\\\*.*", "", (spec_dir() / config).read_text())
    names: set[str] = set()
    for section in re.findall(r"(?:INVARIANTS|PROPERTIES)((?:\s+[A-Za-z]\w*)+)", text):
        names.update(section.split())
    return names - {"CONSTANTS", "SPECIFICATION", "INVARIANTS", "PROPERTIES"}


def test_every_check_of_the_row_lock_configs_has_a_mutant() -> None:
    broken = {check_name for _, check_name, _ in MUTANTS.values()}
    for config in (FAN_IN, SLOTS):
        assert cfg_checks(config) - broken == set(), config


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_row_lock_mutant_violates_exactly_its_check(name: str, tmp_path: Path) -> None:
    config, expected, substitutions = MUTANTS[name]
    copy = mutate(tmp_path, substitutions)
    result = check(config, directory=copy, workers=1)
    assert not result.ok
    if expected == INITIAL:
        assert "is violated by the initial state" in result.output, result.output[-3000:]
        assert "of module Scheduler" in result.output, result.output[-3000:]
        return
    assert result.violated == expected, (result.violated, (result.trace or result.output)[-3000:])
