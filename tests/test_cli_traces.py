"""`refsched traces --check` passes on the committed corpus of the TaskScheduler: TLC's graph of
each corpus instance is the model's, and the corpus is the one they give. A file of its own
(the rest of the command line's tests are in tests/test_cli.py): it runs TLC and matches
graphs for minutes, and each test file runs on one process.
"""

from __future__ import annotations

import pytest

from refsched.cli import main


def test_traces_check_passes_on_the_committed_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traces", "--check", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert ("ok   model = spec (MCSchedulerTraces.cfg): 5,784 states and 56,921 labelled "
            "edges") in err
    assert "ok   model = spec (MCSchedulerCorpusEdges.cfg): 10,900 states" in err
    assert "ok   model = spec (MCSchedulerCorpusAddDeps.cfg): 6,866 states" in err
    assert err.count("is current") == 3
