"""The durable scheduler's commands and Python runner: refsched worker, status, soak, and
DurableRunner, each through real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.runner import DurableRunner, function_name
from refsched.errors import InvalidArgumentError
from refsched.types import TaskState
from tests.durable import jobs

ROOT = Path(__file__).resolve().parents[2]


def refsched(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "refsched", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_worker_runs_a_dag_reports_failures_and_exits_when_done(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=2)
    db.submit("a", fn="tests.durable.jobs:noop", args={"value": [1, "x"]})
    db.submit("b", ["a"], fn="tests.durable.jobs:boom")
    db.submit("c", ["b"], fn="tests.durable.jobs:noop")
    db.submit("d", fn="tests.durable.jobs:exits")
    db.submit("e", fn="tests.durable.jobs:unstorable")
    db.start()
    done = refsched("worker", "--db", url, "--concurrency", "2", "--until-done")
    assert done.returncode == 0, done.stderr
    assert db.result("a") == [1, "x"]
    assert db.state("b") is TaskState.FAILED and "ValueError: boom" in (db.info("b").error or "")
    assert db.state("c") is TaskState.BLOCKED
    assert db.state("d") is TaskState.FAILED and "SystemExit" in (db.info("d").error or "")
    assert db.state("e") is TaskState.FAILED and "cannot be stored" in (db.info("e").error or "")
    status = refsched("status", "--db", url, "--json")
    report = json.loads(status.stdout)
    assert report["by_state"] == {"succeeded": 1, "failed": 3, "blocked": 1}
    assert {p["task"] for p in report["problems"]} == {"b", "c", "d", "e"}
    text = refsched("status", "--db", url).stdout
    assert "blocked 'c': b cannot succeed" in text


@pytest.mark.parametrize("args", [
    ["worker", "--db", "sqlite:///{tmp}/none.db"],
    ["worker", "--db", "sqlite:///{tmp}/s.db", "--concurrency", "0"],
    ["worker", "--db", "sqlite:///{tmp}/s.db", "--lease", "nan"],
    ["worker"],
    ["status", "--db", "sqlite:///{tmp}/none.db"],
    ["status", "--db", "{tmp}/foreign"],
    ["soak", "--runs", "0"],
])
def test_commands_answer_bad_input_with_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "foreign").write_text("not a store")
    done = refsched(*[a.format(tmp=tmp_path) for a in args])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.strip()
    assert (tmp_path / "foreign").read_text() == "not a store"
    assert not (tmp_path / "none.db").exists()


def test_a_worker_sent_sigterm_finishes_what_it_runs(tmp_path: Path) -> None:
    import signal
    import time
    url = f"sqlite:///{tmp_path / 's.db'}"
    log = tmp_path / "log"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("slow", fn="tests.durable.jobs:work",
              args={"task": "slow", "log": str(log), "seconds": 1.0})
    db.submit("next", fn="tests.durable.jobs:noop")
    db.start()
    worker = subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not log.exists() and time.monotonic() < end:
        time.sleep(0.02)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    assert db.state("slow") is TaskState.SUCCEEDED  # finished and reported
    assert db.state("next") is TaskState.READY  # nothing more was claimed


def test_soak_runs_random_dags_under_kills_and_pauses_and_checks_them() -> None:
    done = refsched("soak", "--runs", "1", "--tasks", "12", "--seed", "7", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 runs passed" in done.stdout


def test_durable_runner_runs_module_functions_and_refuses_local_ones(tmp_path: Path) -> None:
    def local() -> None:
        return None

    with pytest.raises(InvalidArgumentError, match="top level"):
        function_name(local)
    with pytest.raises(InvalidArgumentError, match="top level"):
        function_name(lambda: None)
    assert function_name(jobs.noop) == "tests.durable.jobs:noop"
    with DurableRunner(f"sqlite:///{tmp_path / 'r.db'}", processes=2,
                       max_concurrency=2) as runner:
        runner.submit("a", jobs.noop, args={"value": 41})
        runner.submit("b", "tests.durable.jobs:noop", deps=["a"], args={"value": 42})
        runner.start()
        assert runner.wait(timeout=60)
        assert (runner.result("a"), runner.result("b")) == (41, 42)
    assert runner.workers == []
