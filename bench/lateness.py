"""How late delayed work runs: the claim time minus the due time, with workers idle beforehand.

``N`` jobs (1,000 by default) are each given a time spread evenly over ``SPREAD`` seconds (2 by
default), starting ``LEAD`` seconds after the last submit can have ended, into a store whose 4
worker processes are already up and idle. A job's lateness is the moment it was taken minus its
due time, both read from the store, on the store's clock:

- refsched: ``claimed_at - due`` of each version (SQLite and PostgreSQL), workers ``refsched
  worker --concurrency 4``, jobs ``submit(..., run_at=...)``;
- Procrastinate (PostgreSQL): the job's ``started`` event minus its ``scheduled_at``, workers
  ``procrastinate worker --concurrency 4`` (its defaults otherwise), jobs
  ``noop.configure(schedule_at=...).defer()``.

Each side's workers are started before the jobs are submitted and stopped after the last job
ended; nothing else runs meanwhile. ``python bench/lateness.py [--jobs N] [--spread S]
[--only sqlite,postgres,procrastinate]`` prints p50, p99 and the worst lateness in ms.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import durable  # noqa: E402  (the PostgreSQL server and the process helpers are shared)

NOOP = durable.NOOP
WORKERS = 4
THREADS = 4  # each worker process runs this many jobs at once, on either side
LEAD = 1.0  # seconds between the end of the submits and the first due time


def _percentiles(lateness: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of ``lateness`` (seconds), in milliseconds."""
    ordered = sorted(lateness)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000, "max_ms": ordered[-1] * 1000,
            "jobs": len(ordered)}


def _due_times(n: int, spread: float, first: datetime) -> list[datetime]:
    return [first + timedelta(seconds=spread * i / max(n - 1, 1)) for i in range(n)]


SUBMIT_SECONDS = {"sqlite": 0.004, "postgres": 0.03, "procrastinate": 0.03}
"""A generous guess of one submit's time on each side (a transaction with its commit flush),
so that the first due time comes after the last submit: a job submitted after its due time
would measure the submit, and the run says so (:class:`SubmittedLate`)."""


class SubmittedLate(RuntimeError):
    """Some jobs were submitted after their due time: their lateness is not the scheduler's."""


def _submit_time(n: int, side: str) -> float:
    return 0.5 + n * SUBMIT_SECONDS[side]


def _check_in_time(late: int, side: str) -> None:
    if late:
        raise SubmittedLate(f"{side}: {late} jobs were submitted after their due time: raise "
                            f"SUBMIT_SECONDS[{side!r}]")


def refsched_lateness(url: str, n: int, spread: float, side: str,
                      wait_for_workers: Callable[[], None]) -> dict[str, float]:
    """The lateness of ``n`` delayed jobs through ``WORKERS`` idle ``refsched worker`` processes
    on the store at ``url``."""
    from refsched.durable import DurableScheduler

    db = DurableScheduler(url, max_concurrency=WORKERS * THREADS)
    db.start()
    workers = [subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url,
                                 "--concurrency", str(THREADS)], cwd=ROOT)
               for _ in range(WORKERS)]
    try:
        wait_for_workers()
        first = datetime.now(UTC) + timedelta(seconds=_submit_time(n, side) + LEAD)
        late = 0
        for i, at in enumerate(_due_times(n, spread, first)):
            db.submit(f"t{i}", fn=NOOP, run_at=at)
            late += datetime.now(UTC) > at
        _check_in_time(late, side)
        end = time.monotonic() + spread + 120
        while db.stats().succeeded < n:
            if time.monotonic() > end:
                raise TimeoutError("the delayed jobs did not all run")
            time.sleep(0.05)
        rows = db._store.read([("SELECT claimed_at - due FROM task", ())])[0]
        return _percentiles([float(r[0]) for r in rows])
    finally:
        durable.stop(workers)
        db.release()


def sqlite_lateness(n: int, spread: float) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="refsched-lateness-"))
    try:
        return refsched_lateness(f"sqlite:///{folder / 'store.db'}", n, spread, "sqlite",
                                 lambda: time.sleep(1.0))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def postgres_lateness(server: durable.PostgresServer, n: int, spread: float) -> dict[str, float]:
    url = server.database("lateness")
    try:
        return refsched_lateness(url, n, spread, "postgres",
                                 lambda: server.wait_for_clients(url, WORKERS))
    finally:
        server.drop(url)


def procrastinate_lateness(server: durable.PostgresServer, n: int,
                           spread: float) -> dict[str, float]:
    """The same jobs through Procrastinate's ``schedule_at``, its workers at their defaults."""
    import psycopg

    url = server.database("procrastinate_lateness")
    env = {**os.environ, "PROCRASTINATE_BENCH_DSN": url, "PYTHONPATH": str(HERE)}
    os.environ["PROCRASTINATE_BENCH_DSN"] = url
    import procrastinate_tasks
    tasks = importlib.reload(procrastinate_tasks)
    cli = [str(Path(sys.executable).parent / "procrastinate"), "--app=procrastinate_tasks.app"]
    subprocess.run([*cli, "schema", "--apply"], env=env, cwd=HERE, check=True,
                   stdout=subprocess.DEVNULL)
    workers = [subprocess.Popen([*cli, "worker", "--concurrency", str(THREADS)], env=env,
                                cwd=HERE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(WORKERS)]
    watch = psycopg.connect(url, autocommit=True)
    try:
        server.wait_for_clients(url, WORKERS)
        with tasks.app.open():
            first = datetime.now(UTC) + timedelta(
                seconds=_submit_time(n, "procrastinate") + LEAD)
            late = 0
            for at in _due_times(n, spread, first):
                tasks.noop.configure(schedule_at=at).defer()
                late += datetime.now(UTC) > at
            _check_in_time(late, "procrastinate")
            end = time.monotonic() + spread + 120
            while True:
                row = watch.execute("SELECT count(*) FROM procrastinate_jobs "
                                    "WHERE status = 'succeeded'").fetchone()
                if row is not None and row[0] >= n:
                    break
                if time.monotonic() > end:
                    raise TimeoutError("the Procrastinate jobs did not all run")
                time.sleep(0.05)
        rows = watch.execute(
            "SELECT EXTRACT(EPOCH FROM e.at - j.scheduled_at) FROM procrastinate_jobs j "
            "JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'started'").fetchall()
        return _percentiles([float(r[0]) for r in rows])
    finally:
        watch.close()
        durable.stop(workers)
        server.drop(url)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="delayed jobs (default 1000)")
    parser.add_argument("--spread", type=float, default=2.0,
                        help="seconds their due times spread over (default 2)")
    parser.add_argument("--only", default="sqlite,postgres,procrastinate",
                        help="comma-separated: sqlite, postgres, procrastinate")
    args = parser.parse_args(argv)
    if args.jobs < 2 or args.spread <= 0:
        parser.error("--jobs must be >= 2 and --spread > 0")
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = only - {"sqlite", "postgres", "procrastinate"}
    if unknown or not only:
        parser.error(f"--only: unknown or empty: {', '.join(sorted(unknown)) or '(none)'}")
    results: dict[str, dict[str, float]] = {}
    if "sqlite" in only:
        results["refsched, SQLite"] = sqlite_lateness(args.jobs, args.spread)
    if only & {"postgres", "procrastinate"}:
        server = durable.PostgresServer.up()
        try:
            print(f"server: {server.describe()}", flush=True)
            if "postgres" in only:
                results["refsched, PostgreSQL"] = postgres_lateness(server, args.jobs,
                                                                    args.spread)
            if "procrastinate" in only:
                results["Procrastinate, PostgreSQL"] = procrastinate_lateness(
                    server, args.jobs, args.spread)
        finally:
            server.down()
    print(f"lateness of {args.jobs:,} jobs due over {args.spread:g} s, {WORKERS} idle worker "
          "processes (claim time - due time, store clock):")
    print("| contender | p50 ms | p99 ms | max ms |\n|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
