"""`refsched replay` of the TaskScheduler's committed corpus covers every edge of each instance,
and names the diverging step of a broken scheduler. A file of its own (the rest of the command
line's tests are in tests/test_cli.py): its replay is minutes, and each test file runs on one
process.
"""

from __future__ import annotations

import pytest

from refsched.cli import main


def test_replay_of_the_corpus_covers_every_edge(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "edges replayed (MCSchedulerTraces.cfg): 56,921 of 56,921 (100.0%)" in out
    assert "edges replayed (MCSchedulerCorpusEdges.cfg): 108,981 of 108,981 (100.0%)" in out
    assert "edges replayed (MCSchedulerCorpusAddDeps.cfg): 64,966 of 64,966 (100.0%)" in out
    assert "no divergence" in err


def test_replay_names_the_diverging_step_of_a_broken_scheduler(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--quiet", "--impl", "tests.mutants.broken_schedulers:ClaimsTwice"])
    err = capsys.readouterr().err
    assert code == 1
    assert "the implementation diverges from the trace" in err
    assert "step" in err and "Claim(k=" in err
