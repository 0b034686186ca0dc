"""Each seeded bug of the batch report and of the worker's batches and prefetch is killed: the
mutants of ``refsched/verify/durable/mutants.py`` (section "the batch report and the worker's
batches and prefetch"), each run against the layer that must kill it, with the evidence: the
lock-step machine's ``report_many`` rule for the client's batch, the tests of
tests/durable/test_batch_reports.py for the server's batch complete (which the lock-step
machine, on SQLite, never calls), and the worker-process tests of
tests/durable/test_batch_worker.py for the worker.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.durable.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

LOCKSTEP = ("durable_batch_stops_at_refused_report",)
EVIDENCE = {
    "durable_batch_stops_at_refused_report": "test_a_stale_report_in_the_middle_is_refused_alone",
    "durable_steps_batch_fenced_on_first_lease":
        "test_a_stale_report_in_the_middle_is_refused_alone",
    "durable_worker_batch_lost_on_exit": "test_a_sigterm_sends_the_pending_batch_before_exit",
    "durable_worker_prefetched_not_heartbeated":
        "test_prefetched_leases_are_heartbeated_while_they_wait",
}
BY_NAME = {m.name: m for m in CATALOGUE}
# The unit layer here runs the batch tests alone (the catalogue's run has them among the others).
UNIT_BUDGET = replace(Budget(), durable_unit_files=("tests/durable/test_batch_reports.py",
                                                    "tests/durable/test_batch_worker.py"))

pytestmark = pytest.mark.slow


def test_the_batch_section_has_its_mutants() -> None:
    assert set(LOCKSTEP) | set(EVIDENCE) <= set(BY_NAME)


@pytest.mark.parametrize("name", LOCKSTEP)
def test_lockstep_kills_each_mutant_of_the_clients_batch(name: str) -> None:
    result = run_mutant(BY_NAME[name], ["lockstep"])
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert "report_many" in only.evidence


@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_the_batch_tests_kill_each_mutant(name: str, postgres_url: str) -> None:
    # (postgres_url: the server the PostgreSQL half of the tests, and its mutant, need)
    result = run_mutant(BY_NAME[name], ["unit"], budget=UNIT_BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert EVIDENCE[name] in only.evidence
