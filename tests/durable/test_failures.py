"""A failure whose text no store can hold as it is reaches the store at the first report, through
real worker processes, on both stores: sanitised, the same text on each, with its traceback,
never re-run until its lease expires max_attempts times."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from refsched.durable import DurableScheduler
from refsched.types import TaskState
from tests.conftest import StoreURL

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "undecodable_byte": "ValueError: bad \\udcff byte",
    "nul": "ValueError: before \\x00 after",
    "unprintable": "Unprintable: <str() of the exception raised RuntimeError>",
}


def test_an_unstorable_failure_is_recorded_once_by_a_real_worker(durable_url: StoreURL) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=3, max_attempts=2)
    for name in EXPECTED:
        db.submit(name, fn=f"tests.durable.failures:{name}")
    db.start()
    worker = subprocess.run([sys.executable, "-m", "refsched", "worker", "--db", url,
                             "--concurrency", "3", "--lease", "2", "--until-done"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert worker.returncode == 0, worker.stderr
    for name, text in EXPECTED.items():
        info = db.info(name)
        assert (info.state, info.error, info.attempts) == (TaskState.FAILED, text, 1), name
        trace = db.view(name).versions[0].traceback or ""
        assert f"in {name}" in trace and "\x00" not in trace, name
    stats = db.stats()
    assert (stats.failed, stats.expired, stats.reclaimed) == (3, 0, 0)
