"""Procrastinate's side of the durable benchmark on PostgreSQL: a no-op task, as its docs write one.

The app's connector is a ``PsycopgConnector`` on the database in PROCRASTINATE_BENCH_DSN (a libpq
URL); the benchmark applies Procrastinate's schema to that database of its own, and runs
``procrastinate --app=procrastinate_tasks.app worker`` processes with this folder on PYTHONPATH.
"""

import os

import procrastinate

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(
        conninfo=os.environ.get("PROCRASTINATE_BENCH_DSN", "")))


@app.task
def noop() -> int:
    return 1
