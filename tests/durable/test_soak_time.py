"""The soak's runs submit priorities and delays to stores of each aging, and its history check
judges them: the time properties (``ClaimsOnlyDue``, ``ClaimsInKeyOrder``) under real worker
processes and faults, and a store that breaks one of them is caught by the soak's check."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from refsched.durable import DurableScheduler
from refsched.verify.durable.mutants import CATALOGUE
from refsched.verify.durable.soak import JUDGED_AGINGS, SOAK_AGINGS, soak_run
from refsched.verify.durable.validate import validate_history
from refsched.verify.mutants import KILLED, Budget, run_mutant

BY_NAME = {m.name: m for m in CATALOGUE}


def test_a_soak_run_submits_priorities_and_delays_and_tlc_accepts_its_history(
        tmp_path: Path) -> None:
    report = soak_run(3, tmp_path, tasks=12, workers=3, timeout=120.0)
    assert report.problems == [], report.problems
    assert report.delayed > 0 and report.prioritised > 0
    with DurableScheduler(report.store) as db:
        assert db.aging == report.aging and report.aging in JUDGED_AGINGS
        history = db.timed_history()
        verdict = validate_history(history, max_concurrency=db.max_concurrency,
                                   max_attempts=db.max_attempts, aging=db.aging)
    submits = [params for action, params, _ in history if action == "Submit"]
    assert sum(1 for p in submits if p["d"] > 0) == report.delayed
    assert sum(1 for p in submits if p["p"] != 0) == report.prioritised
    assert any(p["p"] < 0 for p in submits)  # a negative priority, which TLC reads too
    assert verdict.accepted, verdict.reason


def test_a_soak_run_on_a_store_aging_a_level_a_second_passes_its_check(tmp_path: Path) -> None:
    # refsched soak's own agings: under one level a second the delays reorder the claims
    assert 1.0 in SOAK_AGINGS
    report = soak_run(4, tmp_path, tasks=12, workers=3, timeout=120.0, agings=(1.0,))
    assert report.problems == [], report.problems
    assert report.aging == 1.0 and report.delayed > 0 and report.prioritised > 0


@pytest.mark.parametrize(("name", "rule"), [
    ("durable_claim_one_tick_early", "ClaimsOnlyDue"),
    ("durable_claim_priority_reversed", "ClaimsInKeyOrder"),
])
def test_a_store_that_breaks_a_time_rule_is_caught_by_the_soak_check(name: str,
                                                                      rule: str) -> None:
    # A claim one tick early shows only when a worker asks in that tick: timing decides which
    # seeds show it, so the layer may run up to eight (it stops at the first that does).
    # Either judge of the layer may be the first to reject the history: the run's own check,
    # which names the rule, or TLC, which on the wall clock places the ticks itself and
    # rejects a history it finds no placement for without naming one.
    result = run_mutant(BY_NAME[name], ["tlc"], budget=replace(Budget(), soak_runs=8))
    (layer,) = result.layers
    assert layer.status == KILLED, layer.evidence
    assert "soak_run(" in layer.evidence, layer.evidence
    if "history check finds" in layer.evidence:
        assert rule in layer.evidence, layer.evidence
    else:
        assert "TLC rejects it" in layer.evidence, layer.evidence
