"""Delayed, prioritised and recurring work in a durable store.

    python later.py [URL]          # URL defaults to sqlite:///later.db

Submits two delayed jobs and declares one recurring schedule, then exits: worker processes
(`refsched worker --db URL`, started in this folder) run each job when its time comes, and each
slot of the schedule as it comes. Run it again and nothing changes: the jobs are submitted with
``if_absent=True``, and declaring a schedule that exists, unchanged, is a no-op.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

from refsched.durable import DurableScheduler

url = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///later.db"

with DurableScheduler(url, max_concurrency=2) as db:
    if not db.started():
        db.start()
    # Due in two seconds, on the store's clock; the higher priority is claimed first among
    # versions that are due (aging lifts the lower one by one level per minute it waits).
    db.submit("remind-ops", fn="jobs:remind", args={"who": "ops"}, delay=2.0, priority=5,
              if_absent=True)
    db.submit("remind-dev", fn="jobs:remind", args={"who": "dev"},
              run_at=datetime.now(UTC) + timedelta(seconds=2), if_absent=True)
    # Every 3 seconds; a slot whose run is still unfinished is skipped, and after downtime
    # only the slots of the last 30 seconds are decided by the policy (older ones are missed).
    created = db.schedule("tidy", fn="jobs:tidy", every=3.0, overlap="skip", catchup=30.0)
    (info,) = [s for s in db.schedules() if s.name == "tidy"]
    print(f"{url}: remind-ops and remind-dev due in 2 s; schedule 'tidy' "
          f"{'declared' if created else 'already declared'}, every 3 s, "
          f"{len(info.slots)} slot(s) decided so far")
