"""Submit the example DAG to a durable store, then start it.

    python submit.py [URL]          # URL defaults to sqlite:///example.db

Run it again and nothing changes: each task is submitted with ``if_absent=True`` (an id the
store already holds keeps its version, whatever its state: a task that succeeded is not run
again), and ``start()`` is called only if the store is not started yet.
"""

from __future__ import annotations

import sys

from refsched.durable import DurableScheduler

url = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///example.db"
slow_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0

# max_concurrency: at most 2 tasks run at once, across every worker process.
with DurableScheduler(url, max_concurrency=2) as db:
    db.submit("fetch", fn="jobs:fetch", args={"url": "https://example.org"}, if_absent=True)
    db.submit("parse", ["fetch"], fn="jobs:parse", args={"pages": 3}, if_absent=True)
    db.submit("slow", fn="jobs:slow", args={"seconds": slow_seconds}, if_absent=True)
    db.submit("broken", ["fetch"], fn="jobs:broken", args={"path": "/no/such/file"},
              if_absent=True)
    db.submit("report", ["parse", "broken", "slow"], fn="jobs:report", if_absent=True)
    if not db.started():
        db.start()
    print(f"submitted to {url}: " + ", ".join(f"{t} {s}" for t, s in sorted(
        (t, db.state(t).value) for t in ("fetch", "parse", "slow", "broken", "report"))))
