"""A dependency scheduler written in JavaScript from the docs alone, checked by the oracle as a
user of another language checks theirs: ``refsched conform -- node dag_scheduler.mjs``.

It conforms; and with each of its switchable bugs (``DAG_BUG``) the oracle reports a divergence
(exit 1) with a short counterexample, except the bug that breaks the wire's shape, which is a
protocol violation (exit 3). The bugs are those a scheduler written from the docs gets wrong: the
cases the docs promise the oracle sends and compares.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NODE = shutil.which("node")
IMPLEMENTATION = Path(__file__).parent / "conform_impls" / "js" / "dag_scheduler.mjs"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

# bug -> the exit status refsched conform must give it
BUGS = {
    "duplicate_dep_accepted": 1,
    "negative_limit_accepted": 1,
    "boolean_limit_accepted": 1,
    "fractional_limit_accepted": 1,
    "negative_concurrency_accepted": 1,
    "close_reports_newest_first": 1,
    "missing_pairs_dropped": 1,
    "negative_generation_invalid": 1,
    "third_cancel_ends": 1,
    "claims_newest_first": 1,
    "extra_answer_key": 3,
    "optional_failure_blocks": 1,
    "add_deps_on_ready": 1,
    "add_deps_keeps_count": 1,
    "provenance_path_from_parent": 1,
}
# bug -> the clause the clauses phase alone names: the edge kinds' and add_deps's rules
CLAUSE_BUGS = {
    "optional_failure_blocks": "dag.edge.optional-dead",
    "add_deps_on_ready": "dag.add_deps.not-pending",
    "add_deps_keeps_count": "dag.add_deps.ok",
    "provenance_path_from_parent": "dag.provenance.blocked",
}
LONGEST_COUNTEREXAMPLE = 8  # calls: every bug above shows in a few


def _conform(bug: str | None, *options: str) -> tuple[int, dict]:
    env = dict(os.environ)
    env.pop("DAG_BUG", None)
    if bug is not None:
        env["DAG_BUG"] = bug
    done = subprocess.run(
        [sys.executable, "-m", "refsched", "conform", "--json", "-q", *options,
         "--", str(NODE), str(IMPLEMENTATION)],
        capture_output=True, text=True, env=env, timeout=900)
    return done.returncode, json.loads(done.stdout)


def test_the_bug_list_is_the_implementation_s() -> None:
    listed = re.search(r"const BUGS = new Set\(\[(.*?)\]\);", IMPLEMENTATION.read_text(), re.S)
    assert listed is not None
    assert set(re.findall(r'"(\w+)"', listed.group(1))) == set(BUGS)


def test_it_conforms_with_every_clause_driven() -> None:
    status, report = _conform(None, "--max-traces", "2000", "--examples", "100")
    assert status == 0, report
    assert report["verdict"] == "conforms", report
    # it declares edge kinds, add_deps and provenance, and is asked them
    assert report["profile"]["optional_edges"] and report["profile"]["add_deps"], report
    assert report["profile"]["provenance"], report
    assert report["coverage"]["driven"]["dag.add_deps.ok"] > 0, report["coverage"]
    assert report["coverage"]["driven"]["dag.provenance.blocked"] > 0, report["coverage"]
    assert [phase["name"] for phase in report["phases"]] == ["corpus", "generated", "clauses"]
    assert report["coverage"]["not_driven"] == [], report["coverage"]


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_is_reported_naming_its_rule(bug: str) -> None:
    # The corpus phase is left to the test above: these bugs are of calls it never makes, or
    # of calls the generated phase finds in a few seconds.
    status, report = _conform(bug, "--no-corpus", "--examples", "100")
    assert status == BUGS[bug], report
    if status == 1:
        counterexample = report["counterexample"]
        assert counterexample["reason"].startswith("rule dag."), counterexample["reason"]
        assert 0 < len(counterexample["calls"]) <= LONGEST_COUNTEREXAMPLE, counterexample
    else:
        assert report["verdict"] == "protocol violation", report


@pytest.mark.parametrize("bug", sorted(CLAUSE_BUGS))
def test_each_edge_bug_is_rejected_by_the_clauses_phase_naming_its_clause(bug: str) -> None:
    status, report = _conform(bug, "--no-corpus", "--examples", "0")
    assert status == 1, report
    counterexample = report["counterexample"]
    assert counterexample["phase"] == "clauses", counterexample
    assert counterexample["reason"].startswith(f"rule {CLAUSE_BUGS[bug]}: "), counterexample
