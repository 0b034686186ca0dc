"""The worker's bookkeeping agrees with the model's worker steps, move for move
(refsched.verify.durable.worker_lockstep), and the machine catches a planted bookkeeping bug."""

from __future__ import annotations

import time

import pytest
from hypothesis import Phase

from refsched.verify.durable.worker_lockstep import (
    WorkerDisagreement,
    run_durable_worker_lockstep,
)
from tests.mutants.broken_worker import DeafHeld, TaskKeyedHeld

FIND = {"phases": [Phase.generate]}  # a mutant need only be caught, not shrunk


def test_the_worker_holds_what_the_model_holds_and_takes_every_worker_step() -> None:
    started = time.perf_counter()
    ledger = run_durable_worker_lockstep(examples=120, steps=50, seed=0)
    print(f"{ledger.summary()} in {time.perf_counter() - started:.1f}s")
    # Each at least once, self re-claims among them; how often depends on the walks drawn.
    assert ledger.missing() == [], ledger.summary()


def test_held_leases_keyed_by_task_are_caught_at_a_self_reclaim() -> None:
    """The old bookkeeping: the re-claim of a version whose lost lease the worker still holds
    replaces that lease; the model holds both."""
    with pytest.raises(WorkerDisagreement) as caught:
        run_durable_worker_lockstep(examples=300, steps=50, seed=0, held=TaskKeyedHeld,
                                    hypothesis_settings=FIND)
    reason = caught.value.reason
    assert reason.startswith("worker w") and "the model's held[" in reason, reason
    assert any(m.startswith("claim(") for m in caught.value.moves)


def test_a_lost_lease_whose_function_is_not_told_is_caught() -> None:
    # A lost lease must meet a heartbeat while its function still runs: a walk finds it only
    # now and then, so a few seeds are walked (each the same walk on every run) until one
    # does. The check is that the machine can catch it, with the reason it gives.
    for seed in range(6):
        try:
            run_durable_worker_lockstep(examples=300, steps=50, seed=seed, held=DeafHeld,
                                        hypothesis_settings=FIND)
        except WorkerDisagreement as e:
            assert "lost and its function was not told" in e.reason, e.reason
            return
    pytest.fail("no walk of seeds 0-5 caught a lost lease whose function is not told")
