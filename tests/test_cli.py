"""The refsched command line behaves like other Python CLIs and its verdicts can go both ways."""

from __future__ import annotations

import subprocess
import sys

import pytest

import refsched
from refsched.cli import main


def test_verify_passes_for_the_production_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--skip-tlc", "--examples", "40", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "1 of 1 checks passed" in out
    assert "snapshots equal after every call" in err


def test_verify_fails_for_a_broken_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--skip-tlc", "--examples", "200", "--quiet",
                 "--impl", "mutants.broken_schedulers:FailReportedAsSuccess"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "0 of 1 checks passed" in out
    assert "FAIL lock-step" in err and "disagreement found" in err


@pytest.mark.parametrize("impl", ["nope", "no_such_module:X", "refsched:NoSuchFactory"])
def test_verify_rejects_a_bad_impl_with_usage_status(impl: str) -> None:
    assert main(["verify", "--skip-tlc", "--impl", impl]) == 2


def test_version_and_usage_errors_follow_argparse_conventions() -> None:
    run = subprocess.run([sys.executable, "-m", "refsched", "--version"], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0 and run.stdout.strip() == f"refsched {refsched.__version__}"
    run = subprocess.run([sys.executable, "-m", "refsched", "frobnicate"], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 2 and "invalid choice" in run.stderr
    run = subprocess.run([sys.executable, "-m", "refsched"], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 2 and "usage:" in run.stderr
