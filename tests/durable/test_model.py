"""The durable scheduler's reference model on its own, and its spec's variables and names.

Each lease action, its refusals (the API's errors) and the claim transaction's composite are
tested on hand-made walks; every invariant and action property holds on every state and step
of the traces instance's graph, and each is shown to fail on a hand-made state or step that
breaks it. No TLC here: tests/durable/test_tlc.py runs it, and matches TLC's graph of the traces
instance against the model's.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from refsched.errors import (
    ConflictError,
    InvalidArgumentError,
    InvalidTransitionError,
    LeaseLostError,
    SchedulerClosedError,
    StaleGenerationError,
    StaleLeaseError,
    UnknownTaskError,
)
from refsched.model.dag.graph import ModelGraph
from refsched.model.dag.invariants import EDGE_ACTION_PROPERTIES
from refsched.model.durable import (
    ACTION_PROPERTIES,
    ACTIONS,
    EDGE_ACTIONS,
    INITIAL,
    INVARIANTS,
    DurableSnapshot,
    Instance,
    Limits,
    Step,
    claim_transaction,
    explore,
    next_steps,
    violated,
    violated_by_step,
    within_bound,
)
from refsched.model.durable import actions as durable_actions
from refsched.model.durable.actions import claim_order, claim_versions, eligible
from refsched.types import Snapshot, TaskState
from refsched.verify.durable.spec import (
    LABEL_ACTIONS,
    SPEC_VARIABLES,
    TRACES_CONFIG,
    read_instance,
    show,
    snapshot_of,
    spec_state,
)
from refsched.verify.specstate import NO_TASK, SpecStateError
from refsched.verify.tla import Function, ModelValue, parse_state, render
from refsched.verify.tlc import spec_dir

RUNNING, SUCCEEDED, FAILED = TaskState.RUNNING, TaskState.SUCCEEDED, TaskState.FAILED
BLOCKED, CANCELLED, READY = TaskState.BLOCKED, TaskState.CANCELLED, TaskState.READY

LIMITS = Limits(max_concurrency=2, max_attempts=2, lease_time=1)
NONE: frozenset[Hashable] = frozenset()

# spec/MCDurableSchedulerTraces.cfg, whose whole graph this file walks (tests/durable/test_tlc.py
# matches it with TLC's), and the other two configs.
TRACES = Instance(tasks=("a",), workers=("w1", "w2"), max_concurrency=1, max_attempts=2,
                  lease_time=1, max_generation=2, max_time=4)
TRACES_STATES, TRACES_EDGES, TRACES_DEPTH = 6_604, 44_101, 18
SAFETY = Instance(tasks=("a", "b"), workers=("w1", "w2"), max_concurrency=2, max_attempts=2,
                  lease_time=1, max_generation=1, max_time=0)
LIVENESS = replace(TRACES, max_time=0)


def step(s: DurableSnapshot, action: str, *args: Any, limits: Limits = LIMITS) -> DurableSnapshot:
    """Take ``action`` in ``s``; it must be enabled."""
    refusal = ACTIONS[action].refused(s, *args, limits=limits)
    assert refusal is None, refusal
    return ACTIONS[action].step(s, *args, limits=limits)


def run(*steps: tuple[Any, ...], s: DurableSnapshot = INITIAL,
        limits: Limits = LIMITS) -> DurableSnapshot:
    for action, *args in steps:
        s = step(s, action, *args, limits=limits)
    return s


def refused(s: DurableSnapshot, action: str, *args: Any, limits: Limits = LIMITS) -> Any:
    refusal = ACTIONS[action].refused(s, *args, limits=limits)
    assert refusal is not None, f"{action}{args} is enabled"
    return refusal


def version(s: DurableSnapshot, task: Hashable) -> Any:
    return s.scheduler.tasks[task]


# a runs under w1's first lease (until 1); b waits for a.
STARTED = run(("Submit", "a", NONE), ("Submit", "b", frozenset({"a"})), ("Start",))
CLAIMED = step(STARTED, "Claim", "w1", 1)
# a's lease is past its deadline (now 2 > 1) but still live: no Expire took it yet.
LATE = run(("Tick",), ("Tick",), s=CLAIMED)
EXPIRED = step(LATE, "Expire", "a")
RECLAIMED = step(EXPIRED, "Reclaim", "w2", "a")


@pytest.fixture(scope="module")
def graph() -> ModelGraph[DurableSnapshot]:
    return explore(TRACES)


# -- Claims and leases ----------------------------------------------------------------------------

def test_claim_leases_the_first_ready_versions_until_now_plus_lease_time() -> None:
    s = run(("Submit", "a", NONE), ("Submit", "b", NONE), ("Submit", "c", NONE), ("Start",))
    s = step(s, "Claim", "w1", 2)
    assert [t for t in "abc" if version(s, t).state is RUNNING] == ["a", "b"]
    assert s.attempt == {"a": 1, "b": 1} and s.holder == {"a": "w1", "b": "w1"}
    assert s.deadline == {"a": 1, "b": 1} and s.held == {"w1": {("a", 1, 1), ("b", 1, 1)}}
    assert version(s, "a").claims == 1 and version(s, "c").claims == 0
    assert "cannot claim 1, 0 claimable" in refused(s, "Claim", "w2", 1).reason
    assert not violated(s, LIMITS)


def test_claim_before_start_raises_and_after_close_is_no_step() -> None:
    s = step(INITIAL, "Submit", "a", NONE)
    refusal = refused(s, "Claim", "w1", 1)
    assert refusal.error is InvalidTransitionError
    assert refusal.reason == "claim('w1'): start() has not been called"
    s = run(("Start",), ("Close", False), s=s)
    refusal = refused(s, "Claim", "w1", 1)
    assert refusal.error is None and "closed" in refusal.reason


def test_an_expired_lease_keeps_the_slot_and_is_reclaimed_with_a_new_attempt() -> None:
    assert "lasts until 1, now is 0" in refused(CLAIMED, "Expire", "a").reason
    assert version(EXPIRED, "a").state is RUNNING and "a" not in EXPIRED.holder
    assert EXPIRED.attempt == {"a": 1} and EXPIRED.ends == {}
    assert EXPIRED.scheduler == CLAIMED.scheduler  # a stuttering step of Scheduler
    assert "no live lease" in refused(EXPIRED, "Expire", "a").reason
    s = RECLAIMED
    assert s.attempt == {"a": 2} and s.holder == {"a": "w2"} and s.deadline == {"a": 3}
    assert s.held == {"w1": {("a", 1, 1)}, "w2": {("a", 1, 2)}}
    assert "'w2' holds its live lease" in refused(s, "Reclaim", "w1", "a").reason
    assert "not running" in refused(s, "Reclaim", "w1", "b").reason
    assert not violated(s, LIMITS)


def test_reclaim_goes_on_after_close_so_admitted_work_finishes() -> None:
    s = step(EXPIRED, "Close", True)
    assert version(s, "b").state is CANCELLED
    s = step(s, "Reclaim", "w1", "a")
    assert s.holder == {"a": "w1"} and s.attempt == {"a": 2}


def test_the_last_attempts_expiry_fails_the_version_and_blocks_its_dependents() -> None:
    s = run(("Tick",), ("Tick",), ("Expire", "a"), s=RECLAIMED)
    assert version(s, "a").state is FAILED and version(s, "b").state is BLOCKED
    assert version(s, "b").blocked_by == "a"
    assert s.ends == {"a": 1} and s.holder == {} and s.attempt == {"a": 2}
    # Every lease the workers still hold is now refused: the version ended.
    assert refused(s, "Complete", "w2", "a", 1, 2).reason == (
        "complete(<<'a', 1, 2>>): the version is failed, not running")
    assert not violated(s, LIMITS)


# -- Lost answers --------------------------------------------------------------------------------

def test_a_report_whose_answer_was_lost_is_repeated_and_answered_with_no_change() -> None:
    lost = step(CLAIMED, "CompleteAnswerLost", "w1", "a", 1, 1)
    # The store's change is Complete's; the worker still holds the lease.
    assert lost == step(CLAIMED, "Complete", "w1", "a", 1, 1).replace(held=CLAIMED.held)
    assert lost.ended_attempt == {"a": 1} and lost.ends == {"a": 1}
    # The lease is neither live nor refused: its report is answered again.
    assert "ended the version" in refused(lost, "Refused", "w1", "a", 1, 1).reason
    assert "not running" in refused(lost, "Complete", "w1", "a", 1, 1).reason
    again = step(lost, "RepeatedReport", "w1", "a", 1, 1)
    assert again == lost.replace(held={})
    assert not violated(lost, LIMITS) and not violated_by_step(CLAIMED, lost, LIMITS)
    assert not violated_by_step(lost, again, LIMITS)
    # Only that lease repeats: not another attempt's.
    other = lost.replace(held={"w1": {("a", 1, 1)}, "w2": {("a", 1, 2)}})
    assert "no report" in refused(other, "RepeatedReport", "w2", "a", 1, 2).reason


def test_an_expiry_that_fails_the_version_is_no_report_so_nothing_repeats() -> None:
    one = Limits(max_concurrency=2, max_attempts=1, lease_time=1)
    s = run(("Tick",), ("Tick",), ("Expire", "a"), s=CLAIMED, limits=one)
    assert version(s, "a").state is FAILED and s.ended_attempt == {}
    assert "no report" in refused(s, "RepeatedReport", "w1", "a", 1, 1, limits=one).reason
    step(s, "Refused", "w1", "a", 1, 1, limits=one)
    # A retry's new version has no ended attempt either.
    done = step(step(CLAIMED, "Fail", "w1", "a", 1, 1), "Retry", "a")
    assert done.ended_attempt == {} and done.attempt == {}


def test_a_claim_whose_answer_was_lost_burns_the_attempt_and_the_lease_expires() -> None:
    s = step(STARTED, "ClaimAnswerLost", "w1", 1)
    assert s == CLAIMED.replace(held={})
    s = run(("Tick",), ("Tick",), ("Expire", "a"), s=s)
    r = step(s, "ReclaimAnswerLost", "w2", "a")
    assert r == step(s, "Reclaim", "w2", "a").replace(held={})
    assert r.attempt == {"a": 2} and r.holder == {"a": "w2"}
    # Without LoseAnswers no answer is lost.
    kept = Limits(max_concurrency=2, max_attempts=2, lease_time=1, lose_answers=False)
    assert "LoseAnswers" in refused(STARTED, "ClaimAnswerLost", "w1", 1, limits=kept).reason
    assert "LoseAnswers" in refused(CLAIMED, "FailAnswerLost", "w1", "a", 1, 1,
                                    limits=kept).reason


def test_a_version_out_of_attempts_is_not_reclaimed() -> None:
    one = Limits(max_concurrency=2, max_attempts=1, lease_time=1)
    s = run(("Tick",), ("Tick",), s=CLAIMED, limits=one)
    s = step(s, "Expire", "a", limits=one)  # its only lease: the version fails at once
    assert version(s, "a").state is FAILED and s.ends == {"a": 1}
    stuck = EXPIRED.replace(attempt={"a": 2})  # not reachable: Expire gives up at the last
    assert "had its 2 attempts" in refused(stuck, "Reclaim", "w1", "a").reason


def test_a_heartbeat_extends_the_live_lease_even_past_its_deadline() -> None:
    s = step(LATE, "Heartbeat", "w1", "a", 1, 1)
    assert s.deadline == {"a": 3} and s.holder == {"a": "w1"}
    assert "lasts until 3, now is 2" in refused(s, "Expire", "a").reason


def test_a_report_after_the_expiry_is_refused_and_the_worker_drops_its_lease() -> None:
    for action, error in [("Heartbeat", LeaseLostError), ("Complete", StaleLeaseError),
                          ("Fail", StaleLeaseError), ("AcknowledgeCancel", StaleLeaseError)]:
        refusal = refused(EXPIRED, action, "w1", "a", 1, 1)
        assert refusal.error is error and refusal.reason.endswith(": the lease expired")
        refusal = refused(RECLAIMED, action, "w1", "a", 1, 1)
        assert refusal.reason.endswith(": attempt 1 is stale, current is 2")
    s = step(RECLAIMED, "Refused", "w1", "a", 1, 1)
    assert s.held == {"w2": {("a", 1, 2)}} and s.replace(held=RECLAIMED.held) == RECLAIMED
    assert "is live" in refused(s, "Refused", "w2", "a", 1, 2).reason
    assert "does not hold" in refused(s, "Refused", "w1", "a", 1, 1).reason


def test_a_completion_committed_first_wins_over_the_expiry() -> None:
    s = step(LATE, "Complete", "w1", "a", 1, 1)
    assert version(s, "a").state is SUCCEEDED and version(s, "b").state is READY
    assert s.ends == {"a": 1} and s.held == {} and s.holder == {} and s.deadline == {}
    assert "no live lease" in refused(s, "Expire", "a").reason


def test_fail_and_acknowledge_cancel_end_the_version_with_the_live_lease() -> None:
    s = step(CLAIMED, "Fail", "w1", "a", 1, 1)
    assert version(s, "a").state is FAILED and version(s, "b").state is BLOCKED
    assert s.ends == {"a": 1} and s.held == {}
    s = run(("Cancel", "a"), ("AcknowledgeCancel", "w1", "a", 1, 1), s=CLAIMED)
    assert version(s, "a").state is CANCELLED and s.ends == {"a": 1}


def test_a_report_needs_the_lease_in_hand() -> None:
    s = step(CLAIMED, "Crash", "w1")
    assert s.held == {} and s.holder == {"a": "w1"}  # the store keeps it until it expires
    refusal = refused(s, "Complete", "w1", "a", 1, 1)
    assert refusal.error is None and "does not hold the lease" in refusal.reason
    assert "holds no lease" in refused(s, "Crash", "w1").reason


def test_reports_on_an_unknown_id_or_an_older_generation_are_refused() -> None:
    refusal = refused(CLAIMED, "Complete", "w1", "z", 1, 1)
    assert refusal.error is UnknownTaskError
    # a fails for good, is retried; w1 kept the first version's lease.
    s = run(("Tick",), ("Tick",), ("Expire", "a"), s=RECLAIMED)
    s = run(("Retry", "a"), ("Claim", "w2", 1), s=s)
    assert s.attempt == {"a": 1} and s.ends == {} and version(s, "a").generation == 2
    refusal = refused(s, "Complete", "w1", "a", 1, 1)
    assert refusal.error is StaleLeaseError
    assert refusal.reason == "complete(<<'a', 1, 1>>): generation 1 is stale, current is 2"
    assert issubclass(StaleLeaseError, StaleGenerationError)
    assert issubclass(LeaseLostError, ConflictError) and issubclass(LeaseLostError, RuntimeError)


def test_submit_replaces_only_a_version_that_is_not_running() -> None:
    refusal = refused(CLAIMED, "Submit", "a", NONE)
    assert refusal.error is not None and "running" in refusal.reason
    s = run(("Complete", "w1", "a", 1, 1), ("Submit", "a", NONE), s=CLAIMED)
    assert version(s, "a").generation == 2 and s.attempt == {} and s.ends == {}
    closed = step(s, "Close", False)
    assert refused(closed, "Submit", "c", NONE).error is SchedulerClosedError


def test_tick_only_while_a_live_lease_has_yet_to_pass_its_deadline() -> None:
    assert "no live lease" in refused(STARTED, "Tick").reason
    s = step(CLAIMED, "Tick")
    assert s.now == 1 and s.deadline == {"a": 1}
    s = step(s, "Tick")
    assert s.now == 2 and "no live lease has yet" in refused(s, "Tick").reason
    assert "no live lease" in refused(EXPIRED, "Tick").reason


def test_a_repeated_callback_on_an_ended_version_changes_nothing() -> None:
    s = step(CLAIMED, "Complete", "w1", "a", 1, 1)
    assert step(s, "RepeatedCallback", "a") == s
    assert refused(CLAIMED, "RepeatedCallback", "a").error is None


# -- The claim transaction ------------------------------------------------------------------------

def steps_of(*steps: tuple[Any, ...]) -> list[Step]:
    return [Step(name, tuple(params.items())) for name, params in steps]


def replay(s: DurableSnapshot, steps: list[Step], limits: Limits = LIMITS) -> DurableSnapshot:
    for st in steps:
        s = step(s, st.action, *st.param_map.values(), limits=limits)
    return s


def test_claim_transaction_expires_then_reclaims_then_claims() -> None:
    s = run(("Submit", "a", NONE), ("Submit", "b", NONE), ("Submit", "c", NONE),
            ("Submit", "d", NONE), ("Start",), ("Claim", "w1", 2), ("Tick",), ("Tick",))
    limits = Limits(max_concurrency=3, max_attempts=2, lease_time=1)
    after, steps = claim_transaction(s, "w2", 3, limits=limits)
    assert steps == steps_of(("Expire", {"t": "a"}), ("Expire", {"t": "b"}),
                             ("Reclaim", {"w": "w2", "t": "a"}),
                             ("Reclaim", {"w": "w2", "t": "b"}),
                             ("Claim", {"w": "w2", "k": 1}))
    assert replay(s, steps, limits) == after
    assert after.holder == {"a": "w2", "b": "w2", "c": "w2"}
    assert after.held["w2"] == {("a", 1, 2), ("b", 1, 2), ("c", 1, 1)}
    assert not violated(after, limits)


def test_claim_transaction_reclaims_at_most_limit_and_then_claims_nothing() -> None:
    s = run(("Submit", "a", NONE), ("Submit", "b", NONE), ("Submit", "c", NONE), ("Start",),
            ("Claim", "w1", 2), ("Tick",), ("Tick",))
    after, steps = claim_transaction(s, "w2", 1, limits=LIMITS)
    assert steps == steps_of(("Expire", {"t": "a"}), ("Expire", {"t": "b"}),
                             ("Reclaim", {"w": "w2", "t": "a"}))
    assert after.holder == {"a": "w2"} and "b" not in after.holder


def test_claim_transaction_gives_up_versions_out_of_attempts_and_claims_in_their_room() -> None:
    s = run(("Tick",), ("Tick",), s=RECLAIMED)  # a's second lease is past its deadline
    s = run(("Submit", "c", NONE), s=s)
    after, steps = claim_transaction(s, "w1", 2, limits=LIMITS)
    assert steps == steps_of(("Expire", {"t": "a"}), ("Claim", {"w": "w1", "k": 1}))
    assert version(after, "a").state is FAILED and version(after, "c").state is RUNNING


def test_claim_transaction_after_close_only_reclaims() -> None:
    s = run(("Submit", "c", NONE), ("Close", False), s=LATE)
    after, steps = claim_transaction(s, "w2", 2, limits=LIMITS)
    assert steps == steps_of(("Expire", {"t": "a"}), ("Reclaim", {"w": "w2", "t": "a"}))
    assert version(after, "c").state is READY


def test_claim_transaction_with_nothing_to_do_takes_no_step() -> None:
    assert claim_transaction(CLAIMED, "w2", 1, limits=LIMITS) == (CLAIMED, [])


def test_claim_transaction_rejects_bad_calls_before_anything_changes() -> None:
    with pytest.raises(InvalidArgumentError, match="limit must be an int >= 1"):
        claim_transaction(STARTED, "w1", 0, limits=LIMITS)
    with pytest.raises(InvalidArgumentError):
        claim_transaction(STARTED, "w1", True, limits=LIMITS)
    with pytest.raises(InvalidTransitionError, match="start"):
        claim_transaction(step(INITIAL, "Submit", "a", NONE), "w1", 1, limits=LIMITS)


# -- The state graph -------------------------------------------------------------------------------

def test_the_traces_graph_has_tlcs_counts_and_every_check_holds_on_it(
        graph: ModelGraph[DurableSnapshot]) -> None:
    assert (len(graph.depth), graph.edge_count, max(graph.depth.values())) == (
        TRACES_STATES, TRACES_EDGES, TRACES_DEPTH)
    limits = TRACES.limits
    for s, out in graph.edges.items():
        assert within_bound(s, TRACES)
        assert violated(s, limits) == [], show(s)
        for e in out:
            assert violated_by_step(e.source, e.target, limits) == [], (e.action, e.params)
    actions = {e.action for out in graph.edges.values() for e in out}
    assert actions == set(ACTIONS) - set(EDGE_ACTIONS)  # its OptionalEdges and AddDeps are off


def test_next_steps_names_every_parameter_in_the_specs_order() -> None:
    instance = replace(TRACES, tasks=("a", "b"))
    s = run(("Submit", "a", NONE), ("Start",), ("Claim", "w1", 1), ("Tick",), ("Tick",),
            limits=instance.limits)
    steps = [(name, params) for name, params, _ in next_steps(s, instance)]
    assert steps == [
        ("Submit", {"t": "b", "D": frozenset(), "p": 0, "d": 0}),
        ("Submit", {"t": "b", "D": frozenset({"a"}), "p": 0, "d": 0}),
        ("Heartbeat", {"w": "w1", "t": "a", "g": 1, "a": 1}),
        ("Complete", {"w": "w1", "t": "a", "g": 1, "a": 1}),
        ("Fail", {"w": "w1", "t": "a", "g": 1, "a": 1}),
        ("AcknowledgeCancel", {"w": "w1", "t": "a", "g": 1, "a": 1}),
        ("Expire", {"t": "a"}), ("Crash", {"w": "w1"}), ("Cancel", {"t": "a"}),
        ("Close", {"cancelPending": False}), ("Close", {"cancelPending": True}),
        ("CompleteAnswerLost", {"w": "w1", "t": "a", "g": 1, "a": 1}),
        ("FailAnswerLost", {"w": "w1", "t": "a", "g": 1, "a": 1}),
        ("AcknowledgeCancelAnswerLost", {"w": "w1", "t": "a", "g": 1, "a": 1}),
    ]


# -- Due times, priorities and the claim order (docs/time.md) -------------------------------------

# 2 priorities, delays of 0 and 2 ticks, one priority level per tick of waiting
TIMED = Limits(max_concurrency=2, max_attempts=2, lease_time=1, priorities=(0, 1), delays=(0, 2),
               aging=1)
STRICT = replace(TIMED, aging=0)
# a (priority 0) due at 0, b (priority 1) due at 2; now 0
DELAYED = run(("Submit", "a", NONE, 0, 0), ("Submit", "b", NONE, 1, 2), ("Start",), limits=TIMED)
# both due, now 2: a's key 0 * 1 - 0 = 0 beats b's 1 * 1 - 2 = -1
BOTH_DUE = run(("Tick",), ("Tick",), s=DELAYED, limits=TIMED)


def test_a_delayed_version_waits_ready_and_the_clock_ticks_until_it_is_due() -> None:
    assert version(DELAYED, "b").state is READY and DELAYED.due == {"b": 2}
    assert DELAYED.priority == {"b": 1} and eligible(DELAYED) == ["a"]
    s = step(DELAYED, "Claim", "w1", 1, limits=TIMED)  # a: no lease, yet the clock ticks
    assert "cannot claim 1, 0 ready and due" in refused(s, "Claim", "w1", 1, limits=TIMED).reason
    s = run(("Complete", "w1", "a", 1, 1), s=s, limits=TIMED)
    assert ACTIONS["Tick"].enabled(s, limits=TIMED)  # no live lease: b's due time alone
    s = run(("Tick",), ("Tick",), s=s, limits=TIMED)
    assert "no waiting version is yet to be due" in refused(s, "Tick", limits=TIMED).reason
    s = step(s, "Claim", "w1", 1, limits=TIMED)
    assert version(s, "b").state is RUNNING and s.due == {}  # a due time only while waiting
    # The break: a claim that ignores due times takes b with a at 0; ClaimsOnlyDue sees it.
    early = claim_versions(DELAYED, "w1", ["a", "b"], limits=TIMED)
    assert violated_by_step(DELAYED, early, TIMED) == ["ClaimsOnlyDue"]


def test_a_claim_takes_the_eligible_versions_in_key_order() -> None:
    # With aging, a (due for 2 ticks) comes before b (one priority level higher, just due).
    assert claim_order(BOTH_DUE, TIMED) == ["a", "b"]
    s = step(BOTH_DUE, "Claim", "w1", 1, limits=TIMED)
    assert version(s, "a").state is RUNNING and violated_by_step(BOTH_DUE, s, TIMED) == []
    # Strict priority: b first, whatever its due time.
    assert claim_order(BOTH_DUE, STRICT) == ["b", "a"]
    # The break: b taken ahead of a, which comes first by the key.
    wrong = claim_versions(BOTH_DUE, "w1", ["b"], limits=TIMED)
    assert "ClaimsInKeyOrder" in violated_by_step(BOTH_DUE, wrong, TIMED)
    assert "ClaimsInKeyOrder" not in violated_by_step(BOTH_DUE, wrong, STRICT)


def test_the_aging_bound_holds_and_a_key_without_due_breaks_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a has waited 2 ticks, b is one priority level higher: the bound lets b pass a only if it
    # was due at most (1 - 0) * 1 tick after a.  (Every claim of TLC's graph of the time
    # corpus instance keeps it: tests/durable/test_tlc.py.)
    s = step(BOTH_DUE, "Claim", "w1", 1, limits=TIMED)
    assert version(s, "a").state is RUNNING and violated_by_step(BOTH_DUE, s, TIMED) == []
    # The break: a key that ignores due times (aging that never lifts) claims b first.
    monkeypatch.setattr(durable_actions, "_claim_key",
                        lambda s, t, limits: (-s.priority.get(t, 0), s.scheduler.tasks[t].seq))
    s = step(BOTH_DUE, "Claim", "w1", 1, limits=TIMED)
    assert version(s, "b").state is RUNNING
    assert violated_by_step(BOTH_DUE, s, TIMED) == ["ClaimsInKeyOrder", "AgingBound"]


def test_retry_makes_the_new_versions_due_now_with_their_priority() -> None:
    s = run(("Submit", "a", NONE, 1, 0), ("Submit", "b", frozenset({"a"}), 0, 2), ("Start",),
            ("Claim", "w1", 1), ("Tick",), ("Fail", "w1", "a", 1, 1), limits=TIMED)
    assert version(s, "b").state is BLOCKED and s.due == {}  # blocked: no longer waits
    s = step(s, "Retry", "a", limits=TIMED)
    # the chain a, b: due now (1), a keeps priority 1, b its 0
    assert s.now == 1 and s.due == {"a": 1, "b": 1} and s.priority == {"a": 1}
    s = run(("Tick",), s=run(("Submit", "c", NONE, 0, 2), s=s, limits=TIMED), limits=TIMED)
    assert s.due == {"a": 1, "b": 1, "c": 3} and eligible(s) == ["a"]  # b waits for a
    assert violated(s, TIMED) == []


def test_submit_refuses_a_priority_or_delay_of_the_wrong_type_and_changes_nothing() -> None:
    for priority, delay in ((True, 0), (1.5, 0), (0, -1), (0, 0.5)):
        assert refused(STARTED, "Submit", "c", NONE, priority, delay).error is (
            InvalidArgumentError)


# the claim order's action properties, on TIMED: (before, after, the checks it breaks)
BAD_TIMED_STEPS: dict[str, tuple[DurableSnapshot, DurableSnapshot, list[str]]] = {
    # b claimed at 0, due at 2
    "ClaimsOnlyDue": (DELAYED, claim_versions(DELAYED, "w1", ["a", "b"], limits=TIMED),
                      ["ClaimsOnlyDue"]),
    # both due at 0 (b submitted with no delay): b, priority 1, is passed over for a
    "ClaimsInKeyOrder": (
        run(("Submit", "a", NONE, 0, 0), ("Submit", "b", NONE, 1, 0), ("Start",), limits=TIMED),
        claim_versions(run(("Submit", "a", NONE, 0, 0), ("Submit", "b", NONE, 1, 0), ("Start",),
                           limits=TIMED), "w1", ["a"], limits=TIMED),
        ["ClaimsInKeyOrder"]),
    # b, due 2 ticks after a, taken ahead of it: more than (1 - 0) * 1 tick
    "AgingBound": (BOTH_DUE, claim_versions(BOTH_DUE, "w1", ["b"], limits=TIMED),
                   ["ClaimsInKeyOrder", "AgingBound"]),
}


# -- Edge kinds and AddDeps (OptionalEdges, AddDepsAllowed) ----------------------------------------

EDGES = Limits(max_concurrency=2, max_attempts=1, lease_time=1, optional_edges=True,
               add_deps=True)
A, B = frozenset({"a"}), frozenset({"b"})
# a runs under w1's lease; b waits for a through an optional edge, c through a required one.
EDGED = run(("Submit", "a", NONE), ("SubmitOptional", "b", A, A), ("Submit", "c", A),
            ("Start",), ("Claim", "w1", 1), limits=EDGES)


def test_an_optional_parents_failure_or_expiry_settles_the_edge_and_blocks_required_ones() -> None:
    failed = step(EDGED, "Fail", "w1", "a", 1, 1, limits=EDGES)
    expired = run(("Tick",), ("Tick",), ("Expire", "a"), s=EDGED, limits=EDGES)
    for s in (failed, expired):
        assert version(s, "a").state is FAILED
        assert version(s, "b").state is READY and version(s, "c").state is BLOCKED
        assert violated(s, EDGES) == []


def test_add_deps_lands_only_on_a_pending_version_and_raises_its_count() -> None:
    s = step(EDGED, "Submit", "d", A, limits=EDGES)  # d waits for a: pending
    s = step(s, "AddDeps", "d", frozenset({"b", "c"}), B, limits=EDGES)
    assert version(s, "d").remaining_deps == 3 and version(s, "d").deps == {"a", "b", "c"}
    assert violated(s, EDGES) == []
    # a ready version, a running one: refused, nothing changes
    ready = step(EDGED, "Submit", "d", NONE, limits=EDGES)
    for task in ("d", "a"):
        assert refused(ready, "AddDeps", task, B, NONE, limits=EDGES).error is (
            InvalidTransitionError)
    # the gates: no step without them
    assert refused(s, "AddDeps", "c", B, NONE, limits=LIMITS).error is None
    assert refused(s, "AddDeps", "c", B, B, limits=replace(EDGES, optional_edges=False)).error is (
        None)
    assert refused(INITIAL, "SubmitOptional", "b", A, A, limits=LIMITS).error is None


def test_add_deps_of_a_dead_required_parent_blocks_a_dead_optional_one_settles() -> None:
    failed = step(EDGED, "Fail", "w1", "a", 1, 1, limits=EDGES)
    s = run(("Submit", "d", B), ("AddDeps", "d", A, NONE), s=failed, limits=EDGES)
    assert version(s, "d").state is BLOCKED and version(s, "d").blocked_by == "a"
    s = run(("Submit", "e", frozenset({"b"})), ("AddDeps", "e", A, A), s=failed, limits=EDGES)
    assert version(s, "e").state.value == "pending" and version(s, "e").remaining_deps == 1


# -- Must-fail: each check catches its own fault ---------------------------------------------------

def with_versions(s: DurableSnapshot, **changes: dict[str, Any]) -> DurableSnapshot:
    """``s`` with fields of some versions of its scheduler part changed."""
    tasks = dict(s.scheduler.tasks)
    for t, fields in changes.items():
        tasks[t] = replace(tasks[t], **fields)
    return s.replace(scheduler=s.scheduler.replace(tasks=tasks))


def all_running(*ids: str) -> DurableSnapshot:
    """Each of ``ids`` running, without deps, under a first lease of w1."""
    view = version(CLAIMED, "a")
    return DurableSnapshot(
        scheduler=Snapshot(started=True, next_seq=len(ids) + 1,
                           tasks={t: replace(view, seq=i) for i, t in enumerate(ids, 1)}),
        attempt={t: 1 for t in ids}, holder={t: "w1" for t in ids},
        deadline={t: 1 for t in ids}, held={"w1": {(t, 1, 1) for t in ids}})


DONE = step(CLAIMED, "Complete", "w1", "a", 1, 1)  # a succeeded, b ready

BAD_STATES: dict[str, DurableSnapshot] = {
    # a was given a lease, but the mapped claims says it was never claimed
    "TypeOK": with_versions(CLAIMED, a={"claims": 0}),
    "IndegreeInvariant": with_versions(CLAIMED, b={"remaining_deps": 0}),
    "ConcurrencyBound": all_running("a", "b", "c"),
    "BlockedHasCause": with_versions(CLAIMED, b={"blocked_by": "a"}),
    # a failed and b still waits for it
    "BlockedPropagated": with_versions(CLAIMED, a={"state": FAILED}).replace(
        holder={}, deadline={}, held={}, ends={"a": 1}),
    "SealedGraph": with_versions(CLAIMED, b={"deps": frozenset({"a", "z"}), "remaining_deps": 2}),
    "AtMostOneEndPerVersion": DONE.replace(ends={"a": 2}),
    # w1 and w2 both hold a's current lease
    "AtMostOneLiveLease": CLAIMED.replace(held={"w1": {("a", 1, 1)}, "w2": {("a", 1, 1)}}),
    "AttemptsBounded": RECLAIMED.replace(attempt={"a": 3}, held={"w2": {("a", 1, 3)}}),
    # b still waits for a, yet it has a deadline
    "LeaseFitsState": CLAIMED.replace(deadline={"a": 1, "b": 1}),
    # a lost its lease after its last attempt and still runs: nobody may re-claim it
    "NoLostVersion": EXPIRED.replace(attempt={"a": 2}),
    # w2 believes it holds a lease of a's next generation
    "NoFutureLease": CLAIMED.replace(held={"w1": {("a", 1, 1)}, "w2": {("a", 2, 1)}}),
    # a succeeded with attempt 1, and the store names attempt 2 as the one that ended it
    "EndedAttemptFits": DONE.replace(ended_attempt={"a": 2}),
}


def claim_newest(s: DurableSnapshot, w: str, k: int, *, limits: Limits) -> DurableSnapshot:
    """A claim that leases the newest ready versions instead of the oldest."""
    chosen = sorted((t for t, v in s.scheduler.tasks.items() if v.state is READY),
                    key=lambda t: -version(s, t).seq)[:k]
    tasks = {t: replace(v, state=RUNNING, claims=1) if t in chosen else v
             for t, v in s.scheduler.tasks.items()}
    return s.replace(scheduler=s.scheduler.replace(tasks=tasks),
                     attempt={**s.attempt, **{t: 1 for t in chosen}},
                     holder={**s.holder, **{t: w for t in chosen}},
                     deadline={**s.deadline, **{t: s.now + 1 for t in chosen}})


def complete_is_a_failure(s: DurableSnapshot, w: str, t: str, g: int, a: int, *,
                          limits: Limits) -> DurableSnapshot:
    """A completion that the store records as a failure."""
    return ACTIONS["Fail"].step(s, w, t, g, a, limits=limits)


# check -> (state, action replaced, its wrong effect): states are fine, a wrong action is not
BAD_ACTIONS: dict[str, tuple[DurableSnapshot, str, Any]] = {
    "CallsTaken": (run(("Submit", "a", NONE), ("Submit", "b", NONE), ("Start",)),
                   "Claim", claim_newest),
    "ReportsTaken": (CLAIMED, "Complete", complete_is_a_failure),
}

BAD_STEPS: dict[str, tuple[DurableSnapshot, DurableSnapshot, list[str]]] = {
    # a succeeded, then failed: Scheduler has no such step either
    "NoTerminalToReady": (
        DONE, with_versions(DONE, a={"state": FAILED},
                            b={"state": BLOCKED, "blocked_by": "a"}),
        ["NoTerminalToReady", "Refinement"]),
    # b claimed while a runs
    "ClaimOnlyAfterDepsSucceeded": (
        CLAIMED, with_versions(CLAIMED, b={"state": RUNNING, "claims": 1}).replace(
            attempt={"a": 1, "b": 1}),
        ["ClaimOnlyAfterDepsSucceeded", "Refinement", "ReadyOnlyAfterDepsSettled"]),
    # the store takes w1's completion after its lease expired
    "OnlyCurrentAttemptEnds": (
        EXPIRED, EXPIRED.replace(scheduler=DONE.scheduler, held={}, ends={"a": 1},
                                 ended_attempt={"a": 1}),
        ["OnlyCurrentAttemptEnds"]),
    # the expiry puts a back in the ready queue (a rescue that re-queues)
    "Refinement": (LATE, with_versions(EXPIRED, a={"state": READY, "claims": 0}).replace(
        attempt={}, held={}), ["Refinement"]),
}


# Scheduler's checks of edge kinds, on EDGES: (before, after, the checks it breaks)
BAD_EDGE_STEPS: dict[str, tuple[DurableSnapshot, DurableSnapshot, list[str]]] = {
    # b is claimed while its optional parent a still runs
    "ReadyOnlyAfterDepsSettled": (
        EDGED, with_versions(EDGED, b={"state": RUNNING, "claims": 1}).replace(
            attempt={"a": 1, "b": 1}, holder={"a": "w1", "b": "w1"}, deadline={"a": 1, "b": 1}),
        ["Refinement", "ReadyOnlyAfterDepsSettled"]),
    # an edge lands on a, which runs
    "EdgesAddedOnlyToPending": (
        step(EDGED, "Submit", "d", NONE, limits=EDGES),
        with_versions(step(EDGED, "Submit", "d", NONE, limits=EDGES),
                      a={"deps": frozenset({"d"})}),
        ["Refinement", "EdgesAddedOnlyToPending"]),
    # a's failure blocks b, whose edge to it is optional
    "OptionalParentNeverBlocks": (
        EDGED,
        with_versions(step(EDGED, "Fail", "w1", "a", 1, 1, limits=EDGES),
                      b={"state": BLOCKED, "blocked_by": "a"}),
        ["Refinement", "OptionalParentNeverBlocks"]),
}


def test_every_check_has_a_must_fail_case() -> None:
    assert set(BAD_STATES) | set(BAD_ACTIONS) == set(INVARIANTS)
    assert not set(BAD_STATES) & set(BAD_ACTIONS)
    assert set(BAD_STEPS) | set(BAD_TIMED_STEPS) | set(BAD_EDGE_STEPS) == set(ACTION_PROPERTIES)
    assert not set(BAD_STEPS) & set(BAD_TIMED_STEPS)
    assert not (set(BAD_STEPS) | set(BAD_TIMED_STEPS)) & set(BAD_EDGE_STEPS)


@pytest.mark.parametrize("name", sorted(BAD_STATES))
def test_a_bad_state_violates_exactly_its_invariant(name: str) -> None:
    assert violated(BAD_STATES[name], LIMITS) == [name]


@pytest.mark.parametrize("name", sorted(BAD_ACTIONS))
def test_a_wrong_action_violates_exactly_its_enabledness_check(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s, action, effect = BAD_ACTIONS[name]
    assert violated(s, LIMITS) == []
    monkeypatch.setitem(ACTIONS, action, replace(ACTIONS[action], effect=effect))
    assert violated(s, LIMITS) == [name]


@pytest.mark.parametrize("name", sorted(BAD_STEPS))
def test_a_bad_step_violates_exactly_its_action_property(name: str) -> None:
    before, after, broken = BAD_STEPS[name]
    assert violated(before, LIMITS) == [] and violated(after, LIMITS) == []
    assert violated_by_step(before, after, LIMITS) == broken


@pytest.mark.parametrize("name", sorted(BAD_EDGE_STEPS))
def test_a_bad_edge_step_violates_its_edge_kind_property(name: str) -> None:
    before, after, broken = BAD_EDGE_STEPS[name]
    assert violated(before, EDGES) == [] and violated(after, EDGES) == []
    assert violated_by_step(before, after, EDGES) == broken


@pytest.mark.parametrize("name", sorted(BAD_TIMED_STEPS))
def test_a_bad_claim_violates_its_claim_order_property(name: str) -> None:
    before, after, broken = BAD_TIMED_STEPS[name]
    assert violated(before, TIMED) == [] and violated(after, TIMED) == []
    assert violated_by_step(before, after, TIMED) == broken


def test_refinement_is_checked_against_schedulers_steps_with_deps_on_new_ids() -> None:
    # Submit(a, {b}) before b exists is a Scheduler step: the check must know of b.
    s = step(INITIAL, "Submit", "a", frozenset({"b"}))
    assert violated_by_step(INITIAL, s, LIMITS) == []


# -- The state value -------------------------------------------------------------------------------

def test_a_snapshot_has_one_normal_form() -> None:
    plain = DurableSnapshot(attempt={"a": 1}, held={"w1": {("a", 1, 1)}})
    padded = DurableSnapshot(attempt={"a": 1, "b": 0}, deadline={"a": 0}, ends={"b": 0},
                             held={"w1": [("a", 1, 1)], "w2": []})
    assert plain == padded and hash(plain) == hash(padded)
    assert padded.held == {"w1": {("a", 1, 1)}} and padded.deadline == {}
    assert plain != plain.replace(now=1)
    with pytest.raises(TypeError):
        plain.attempt["b"] = 1


# -- The spec's variables --------------------------------------------------------------------------

def test_read_instance_reads_every_config() -> None:
    assert read_instance(TRACES_CONFIG) == TRACES
    assert read_instance("MCDurableScheduler.cfg") == SAFETY
    assert read_instance("MCDurableSchedulerLiveness.cfg") == LIVENESS
    pairs = replace(SAFETY, workers=("w1",), max_concurrency=1)
    assert read_instance("MCDurableSchedulerPairs.cfg") == pairs
    assert read_instance("MCDurableSchedulerGenerations.cfg") == replace(
        pairs, max_attempts=1, max_generation=2)


def test_spec_state_and_snapshot_of_are_inverse_through_tla_text(
        graph: ModelGraph[DurableSnapshot]) -> None:
    workers = [ModelValue(w) for w in TRACES.workers]
    tasks = [ModelValue(t) for t in TRACES.tasks]
    for s in graph.depth:
        values = spec_state(s, workers, tasks)
        assert tuple(values) == SPEC_VARIABLES
        assert snapshot_of(values) == s
        text = "\n".join(f"/\\ {name} = {render(value)}" for name, value in values.items())
        assert snapshot_of(parse_state(text)) == s


def test_spec_state_writes_every_worker_and_task() -> None:
    values = spec_state(RECLAIMED, ["w1", "w2", "w3"], ["a", "b", "c"])
    assert values["attempt"] == {"a": 2, "b": 0, "c": 0}
    assert values["holder"] == {"a": "w2", "b": ModelValue("NoWorker"),
                                "c": ModelValue("NoWorker")}
    assert values["deadline"] == {"a": 3, "b": 0, "c": 0} and values["now"] == 2
    assert values["held"] == {"w1": {("a", 1, 1)}, "w2": {("a", 1, 2)}, "w3": frozenset()}
    assert values["ends"] == {"a": 0, "b": 0, "c": 0}
    assert values["state"]["c"] == "absent" and values["blockedBy"]["b"] == NO_TASK
    assert "claims" not in values
    with pytest.raises(SpecStateError, match="not in Tasks"):
        spec_state(RECLAIMED, ["w1", "w2"], ["a"])
    with pytest.raises(SpecStateError, match="not in Workers"):
        spec_state(RECLAIMED, ["w1"], ["a", "b"])


def test_snapshot_of_refuses_states_of_another_shape() -> None:
    good: Mapping[str, Any] = spec_state(CLAIMED, ["w1"], ["a", "b", "c"])
    assert snapshot_of(good) == CLAIMED
    for name, value in [
        ("attempt", Function({"a": 1, "b": 0})),  # not over the ids
        ("attempt", Function({"a": -1, "b": 0, "c": 0})),
        ("attempt", Function({"a": 1, "b": 0, "c": 1})),  # c was never submitted
        ("holder", Function({"a": "w1", "b": "NoWorker", "c": "w1"})),
        ("now", True),
        ("held", Function({"w1": (("a", 1, 1),)})),  # not a set
        ("held", Function({"w1": frozenset({("a", 1)})})),  # not a lease
    ]:
        with pytest.raises(SpecStateError):
            snapshot_of({**good, name: value})
    with pytest.raises(SpecStateError):
        snapshot_of({k: v for k, v in good.items() if k != "ends"})
    # ITF writes NoWorker as a string
    assert snapshot_of({**good, "holder": Function({"a": "w1", "b": "NoWorker",
                                                     "c": "NoWorker"})}) == CLAIMED


def test_show_names_the_clock_every_lease_and_what_each_worker_holds() -> None:
    text = show(step(RECLAIMED, "Crash", "w1"))
    assert text.splitlines()[-3:] == [
        "  now=2",
        "  a: attempt 2, held by w2 until 3, ends 0",
        "  w2 holds <<a, 1, 2>>",
    ]
    assert "a: attempt 1, expired, waiting to be re-claimed, ends 0" in show(EXPIRED)


# -- One vocabulary: spec, configs, model and docs name the same things ----------------------------

SPEC = spec_dir() / "DurableScheduler.tla"
DOC = spec_dir().parent / "docs" / "durable.md"
LIVENESS_PROPERTIES = {"EveryVersionEnds", "AbsFairSpec"}


def cfg_section(config: str, keyword: str) -> set[str]:
    """The names listed under ``keyword`` (INVARIANTS, PROPERTIES) in a TLC config."""
    text = re.sub(r"\\\*.*", "", (spec_dir() / config).read_text())
    m = re.search(rf"^{keyword}\n((?:[ \t]+\w+[ \t]*\n?)+)", text, re.M)
    return set() if m is None else set(m.group(1).split())


def test_spec_and_model_have_the_same_actions() -> None:
    block = SPEC.read_text().split("\nNext ==", 1)[1].split("\n\\*", 1)[0]
    names = re.findall(r"(?:\\/|:)\s*([A-Z]\w*)\b(?!\s*\\in)", block)
    assert {LABEL_ACTIONS.get(n, n) for n in names} == set(ACTIONS)


def test_configs_check_the_models_invariants_and_properties() -> None:
    # Scheduler's checks of edge kinds hold trivially with OptionalEdges and AddDepsAllowed
    # off: the edges instance checks them, with the invariants and the refinement they touch.
    without_edges = set(ACTION_PROPERTIES) - set(EDGE_ACTION_PROPERTIES)
    for config in ("MCDurableScheduler.cfg", "MCDurableSchedulerPairs.cfg", TRACES_CONFIG):
        assert cfg_section(config, "INVARIANTS") == set(INVARIANTS)
        assert cfg_section(config, "PROPERTIES") == without_edges
    # The liveness config checks every safety check too, and the whole refinement.
    assert cfg_section("MCDurableSchedulerLiveness.cfg", "INVARIANTS") == set(INVARIANTS)
    assert cfg_section("MCDurableSchedulerLiveness.cfg", "PROPERTIES") == (
        without_edges | LIVENESS_PROPERTIES)
    assert cfg_section("MCDurableSchedulerEdges.cfg", "PROPERTIES") == (
        set(EDGE_ACTION_PROPERTIES) | {"Refinement"})


def test_every_named_check_is_defined_in_the_spec_and_named_in_the_docs() -> None:
    text, doc = SPEC.read_text(), DOC.read_text()
    for name in [*INVARIANTS, *ACTION_PROPERTIES, *LIVENESS_PROPERTIES, "FairSpec"]:
        assert re.search(rf"^{name} ==", text, re.MULTILINE), name
    for name in [*INVARIANTS, *ACTION_PROPERTIES, *LIVENESS_PROPERTIES, *ACTIONS]:
        assert re.search(rf"\b{name}\b", doc), name
