"""Huey's SQLite queue judged as a durable scheduler by ``refsched conform --system durable``
(refsched.conform.durable.huey_adapter): what it keeps of the corpus, and the two rules it
breaks. A file of its own (the other systems' verdicts are in tests/test_conform_systems.py):
its corpus phase is minutes, and each test file runs on one process.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.test_conform_systems import conform


def test_huey_runs_more_tasks_at_once_than_the_store_allows() -> None:
    # Walks of two calls cannot let a lease run out (the silent worker's divergence, which
    # longer walks find first), so seed 0's find this: Huey has no store-wide bound on running
    # tasks.
    pytest.importorskip("huey")
    done = conform("--system", "durable", "--no-corpus", "--examples", "200", "--steps", "2",
                   "--json", "--", sys.executable, "-m",
                   "refsched.conform.durable.huey_adapter")
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges"), done.stdout
    last = report["counterexample"]["calls"][-1]
    assert last["request"] == {"op": "claim", "worker": "w1", "limit": 3, "lease": 1}
    assert len(last["model"]["ok"]) == 2 and len(last["implementation"]["ok"]) == 3, last
    assert report["counterexample"]["reason"].startswith("rule durable.claim.ok: ")


def test_a_check_that_made_no_call_passes_nothing() -> None:
    # Huey's profile leaves out every clause's probe: with neither corpus nor examples, no
    # call is made, and that is no verdict.
    pytest.importorskip("huey")
    done = conform("--system", "durable", "--no-corpus", "--examples", "0", "--json", "--",
                   sys.executable, "-m", "refsched.conform.durable.huey_adapter")
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"], report["ok"]) == (2, "nothing checked", False)
    assert "no phase made a call" in report["harness"]["message"]


def test_a_huey_task_whose_worker_went_silent_is_never_handed_out_again() -> None:
    # Seed 1's walks claim one task at a time: the first difference is the silent worker's.
    pytest.importorskip("huey")
    done = conform("--system", "durable", "--no-corpus", "--examples", "200", "--seed", "1",
                   "--json", "--", sys.executable, "-m",
                   "refsched.conform.durable.huey_adapter")
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges"), done.stdout
    rows = report["counterexample"]["calls"]
    assert rows[-1]["request"]["op"] == "claim"
    assert {"op": "tick", "seconds": 1} in [row["request"] for row in rows]
    # the model takes the expired attempt over; Huey hands out another task or none
    taken_over = rows[-1]["model"]["ok"]
    assert [(x["task_id"], x["generation"], x["attempt"]) for x in taken_over] == [("a", 1, 2)]
    assert rows[-1]["implementation"] != rows[-1]["model"]
    assert report["counterexample"]["reason"].startswith("rule durable.claim.ok: ")


def test_huey_keeps_what_a_queue_keeps_of_the_corpus() -> None:
    pytest.importorskip("huey")
    done = conform("--system", "durable", "--examples", "0", "--json", "--",
                   sys.executable, "-m", "refsched.conform.durable.huey_adapter")
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (0, "conforms"), done.stdout
    corpus = report["phases"][0]["figures"]
    assert corpus["traces_run"] == corpus["admitted"] + corpus["prefixes"] > 10
