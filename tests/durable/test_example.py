"""The durable example (examples/durable) runs as its docs say: submitted twice, run by real
worker processes started in its folder, inspected with refsched status, jobs and show; and the
names the durable docs give exist."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import refsched.durable
from tests.conftest import StoreURL

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "durable"


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=EXAMPLE, capture_output=True,
                          text=True, timeout=timeout)


def test_the_example_runs_end_to_end_with_worker_processes(durable_url: StoreURL) -> None:
    url = durable_url("example.db")
    first = run("submit.py", url, "1")
    assert first.returncode == 0, first.stderr
    again = run("submit.py", url, "1")  # a second run changes nothing and says so
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    workers = [subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url,
                                 "--until-done"], cwd=EXAMPLE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for w in workers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
    jobs = run("-m", "refsched", "jobs", "--db", url, "--json")
    states = {r["task"]: (r["state"], r["generation"]) for r in json.loads(jobs.stdout)}
    assert states == {"fetch": ("succeeded", 1), "parse": ("succeeded", 1),
                      "slow": ("succeeded", 1), "broken": ("failed", 1),
                      "report": ("blocked", 1)}
    shown = run("-m", "refsched", "show", "broken", "--db", url)
    assert shown.returncode == 0
    assert "FileNotFoundError" in shown.stdout and "in broken" in shown.stdout
    status = run("-m", "refsched", "status", "--db", url)
    assert "blocked 'report': broken cannot succeed" in status.stdout
    third = run("submit.py", url, "1")  # after the run: nothing is submitted again
    assert "fetch succeeded" in third.stdout
    # The README's first screen shows this run's output as what a newcomer will see: each line
    # the run printed must be there, word for word, with the README's store URL for this one.
    screen = first_screen()
    for line in [first.stdout.splitlines()[0], *status.stdout.splitlines()]:
        assert line.replace(url, README_URL) in screen, line


README_URL = "sqlite:///example.db"


def first_screen() -> str:
    """The README up to its third section: install, the verified run, the first durable DAG."""
    text = (ROOT / "README.md").read_text()
    return text.split("\n## ")[:3][-1]


def test_the_readme_runs_the_example_as_the_test_does() -> None:
    screen = first_screen()
    assert screen.startswith("A first durable DAG")
    for command in ("cd examples/durable", f"python submit.py {README_URL}",
                    f"refsched worker --db {README_URL} --until-done",
                    f"refsched status --db {README_URL}"):
        assert command in screen, command


def test_every_name_the_durable_docs_import_exists() -> None:
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "durable.md").read_text()
    names = set(re.findall(r"refsched\.durable\.([A-Z]\w+)", text))
    names |= {n.strip() for line in re.findall(r"from refsched\.durable import ([\w, ]+)", text)
              for n in line.split(",")}
    assert "DurableRunner" in names
    missing = sorted(n for n in names if not hasattr(refsched.durable, n))
    assert not missing, f"named by the docs, not in refsched.durable: {missing}"


@pytest.mark.parametrize("path", ["examples/durable/jobs.py", "examples/durable/submit.py"])
def test_the_docs_point_at_the_example(path: str) -> None:
    docs = (ROOT / "docs" / "durable.md").read_text()
    first_screen = "\n".join(docs.splitlines()[:40])
    assert path in first_screen
    assert "examples/durable" in (ROOT / "README.md").read_text()


def test_the_later_example_runs_delayed_and_recurring_work(durable_url: StoreURL) -> None:
    """examples/durable/later.py as docs/time.md runs it: declared twice (the second changes
    nothing), a worker started in its folder runs the delayed jobs when due and the schedule's
    slots as they come, and ``refsched schedules`` lists each slot with its run."""
    url = durable_url("later.db")
    first = run("later.py", url)
    assert first.returncode == 0, first.stderr
    assert "schedule 'tidy' declared" in first.stdout
    again = run("later.py", url)
    assert "schedule 'tidy' already declared" in again.stdout, again.stdout + again.stderr
    worker = subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url],
                              cwd=EXAMPLE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        from tests.durable.support import wait_for

        db = refsched.durable.DurableScheduler(url)
        wait_for(lambda: {"remind-ops", "remind-dev"} <= {
            v.task_id for v in db.view().versions if v.state.value == "succeeded"}
            and db.stats().succeeded >= 4, 60, "the delayed jobs and two slots")
        db.release()
    finally:
        worker.terminate()
        worker.communicate(timeout=60)
    listed = run("-m", "refsched", "schedules", "--db", url, "--json")
    assert listed.returncode == 0, listed.stderr
    (tidy,) = json.loads(listed.stdout)
    assert tidy["name"] == "tidy" and tidy["every"] == 3.0 and tidy["overlap"] == "skip"
    ran = [s for s in tidy["slots"] if s["decision"] == "run"]
    assert len(ran) >= 2 and all(s["task"].startswith("tidy@") for s in ran)
