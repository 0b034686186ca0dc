"""bench/instructions.py answers a bad argument with a usage error, and (where valgrind is
installed) counts the core's instructions, the same count on each run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "instructions.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.parametrize(("args", "says"), [
    (("--n", "ten"), "sizes are ints"),
    (("--n", "0"), "each size is an int >= 1"),
    (("--n", ""), "sizes are ints"),
    (("--tree", "/nonexistent/refsched"), "not a refsched checkout"),
])
def test_a_bad_argument_is_a_usage_error(args: tuple[str, ...], says: str) -> None:
    done = _run(*args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_count_repeats_exactly() -> None:
    first, second = _run("--n", "50"), _run("--n", "50")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout and "instructions" in first.stdout
