"""The lock-step machine's ``report_many`` rule on both stores: batches of reports with leases
held (live, lost, or whose answer was lost) and no longer held, each report's step compared
with the model's (refsched/verify/durable/lockstep.py); and the worker lock-step machine with
batched reports (refsched/verify/durable/worker_lockstep.py)."""

from __future__ import annotations

import pytest

from refsched.durable import DurableScheduler
from refsched.verify.durable.lockstep import run_durable_lockstep
from refsched.verify.durable.worker_lockstep import run_durable_worker_lockstep
from tests.conftest import postgres_factory


@pytest.mark.slow
def test_the_batches_agree_with_the_model_on_sqlite() -> None:
    ledger = run_durable_lockstep(DurableScheduler, examples=60, steps=40, seed=0)
    assert ledger.actions["report_many (batches)"] >= 5, ledger.summary()
    assert ledger.actions["report_many (refused reports)"] >= 1, ledger.summary()


@pytest.mark.slow
def test_the_batches_agree_with_the_model_on_postgresql(postgres_url: str) -> None:
    # (seed 1: its 40 walks make 11 batches, 4 of their reports refused; seed 0's made 2)
    # Batches of live completes go through the server's refsched_complete_many; the others
    # (a fail, a stale or repeated report among them) through the client's transaction.
    ledger = run_durable_lockstep(postgres_factory(postgres_url), examples=40, steps=40,
                                  seed=1, bulk=True)
    assert ledger.actions["report_many (batches)"] >= 5, ledger.summary()
    assert ledger.actions["report_many (refused reports)"] >= 1, ledger.summary()


@pytest.mark.slow
def test_the_workers_batches_agree_with_the_model() -> None:
    # The workers queue their reports and send them in batches: each report's step when its
    # batch is sent, its lease held (and heartbeated) until then, a lost batch sent again.
    ledger = run_durable_worker_lockstep(examples=60, steps=40, seed=0, batched=True)
    assert ledger.actions["batches sent"] >= 10, ledger.summary()
    for action in ("Complete", "Fail", "Refused", "CompleteAnswerLost", "RepeatedReport",
                   "Heartbeat"):
        assert ledger.actions[action] >= 1, ledger.summary()
