"""``refsched status --db URL [--json]``: what a durable store holds, for people and scripts.

Counts by state, the live leases (worker, attempt, seconds left on the store's clock), and the
blocked and failed versions with their causes. Exit codes: 0 shown, 2 usage or store error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from refsched.errors import SchedulerError

from .scheduler import DurableScheduler

__all__ = ["main", "status"]


def status(db: DurableScheduler) -> dict[str, Any]:
    """The store's state as plain JSON values."""
    stats = db.stats()
    now = db.now()
    snapshot = db.snapshot()
    leases = db.leases()
    live = [{"task": t, "worker": v.holder, "attempt": v.attempt,
             "seconds_left": None if v.deadline is None else round(v.deadline - now, 3)}
            for t, v in sorted(leases.items(), key=lambda kv: snapshot.tasks[kv[0]].seq)
            if v.holder is not None]
    expired = [t for t, v in leases.items() if v.holder is None
               and snapshot.tasks[t].state.value == "running"]
    problems = []
    for t, view in sorted(snapshot.tasks.items(), key=lambda kv: kv[1].seq):
        if view.state.value == "blocked":
            problems.append({"task": t, "state": "blocked", "cause": f"{view.blocked_by} "
                             "cannot succeed", "blocked_by": view.blocked_by})
        elif view.state.value == "failed":
            problems.append({"task": t, "state": "failed", "cause": db.info(str(t)).error,
                             "attempts": leases[t].attempt if t in leases else 0})
    return {"store": db.url, "max_concurrency": db.max_concurrency,
            "max_attempts": db.max_attempts, "started": snapshot.started,
            "closed": snapshot.closed, "by_state": stats.by_state or {}, "live_leases": live,
            "awaiting_reclaim": expired, "problems": problems,
            "counters": {k: getattr(stats, k) for k in (
                "submitted", "retried", "claimed", "reclaimed", "expired", "succeeded",
                "failed", "cancelled", "blocked")}}


def _text(report: dict[str, Any]) -> str:
    lines = [f"store {report['store']}: max_concurrency {report['max_concurrency']}, "
             f"max_attempts {report['max_attempts']}, "
             + ("closed" if report["closed"] else "started" if report["started"]
                else "not started")]
    states = report["by_state"]
    lines.append("versions: " + (", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                                 or "none"))
    for lease in report["live_leases"]:
        lines.append(f"  lease {lease['task']!r}: {lease['worker']} attempt {lease['attempt']}, "
                     f"{lease['seconds_left']} s left")
    for t in report["awaiting_reclaim"]:
        lines.append(f"  {t!r}: lease expired, waiting for a worker to take it over")
    for p in report["problems"]:
        lines.append(f"  {p['state']} {p['task']!r}: {p['cause']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="refsched status",
        description="Show a durable store: versions by state, live leases, blocked and failed "
                    "versions with their causes. Exit codes: 0 shown, 2 usage or store error.")
    parser.add_argument("--db", required=True, metavar="URL", help="the store: sqlite:///path.db or postgresql://user@host/db?schema=name")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    try:
        with DurableScheduler(args.db, create=False) as db:
            report = status(db)
    except SchedulerError as e:
        print(f"refsched status: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else _text(report))
    return 0
