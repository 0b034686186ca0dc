"""CrossHair finds no counterexample to the model's contracts, and finds one in a broken Settle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MUTANTS = Path(__file__).parents[1] / "mutants"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("crosshair") is None and not Path(sys.executable).with_name(
        "crosshair").exists(), reason="crosshair-tool is not installed (pip install -e '.[test]')"),
]


def crosshair(*args: str) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).with_name("crosshair")
    command = str(executable) if executable.exists() else "crosshair"
    return subprocess.run([command, "check", "--per_condition_timeout=10", *args],
                          capture_output=True, text=True, timeout=600)


def test_model_contracts_hold() -> None:
    run = crosshair("refsched.model.dag.contracts")
    assert run.returncode == 0, run.stdout + run.stderr


def test_crosshair_finds_the_chain_a_shallow_settle_leaves_waiting() -> None:
    run = crosshair(str(MUTANTS / "crosshair_shallow_settle.py"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "false when calling settle_graph_shallow" in run.stdout
