"""The durable worker's batch paths against its one-report-per-transaction path, from one run.

Flat N no-op jobs (default 10,000), submitted with one ``submit_many()``, through 4 ``refsched
worker`` processes of ``--concurrency 4`` each, on SQLite and on PostgreSQL (a throwaway cluster
of tests/pgserver.py, or the server of REFSCHED_BENCH_POSTGRES), timed from the submit to the
last completion as bench/durable.py times its flat rows. Three workers' settings:

- ``each``: ``--report-delay 0``: every report its own transaction (one commit each);
- ``batched``: ``--report-delay 0.01``: reports sent in batches (``report_many``: one commit);
- ``batched + prefetch``: the same and ``--prefetch 4``: claims fetch ahead into a local queue.

The figures are ratios against ``each`` of the same store, from one run: ``python
bench/durable_batch.py [--n 10000]``; the text goes to bench/results/durable-batch.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import durable

HERE = Path(__file__).resolve().parent
PROCESSES, THREADS, PREFETCH = 4, 4, 4
SETTINGS = (("each", ("--report-delay", "0")),
            ("batched", ("--report-delay", "0.01")),
            ("batched + prefetch", ("--report-delay", "0.01", "--prefetch", str(PREFETCH))))


def one(n: int, options: tuple[str, ...], server: durable.PostgresServer | None) -> float:
    return durable._through_workers(
        {f"t{i}": [] for i in range(n)}, PROCESSES, server, start_first=server is not None,
        bulk=True, worker_args=("--concurrency", str(THREADS), *options),
        max_concurrency=PROCESSES * (THREADS + PREFETCH))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="jobs per run (default 10,000)")
    args = parser.parse_args(argv)
    lines = [f"flat {args.n:,} no-op jobs, {PROCESSES} worker processes x {THREADS} threads, "
             "one run each; seconds, and the speed-up over 'each' of the same store"]
    server = None
    try:
        server = durable.PostgresServer.up()
        stores: list[tuple[str, durable.PostgresServer | None]] = [
            ("SQLite", None), (f"PostgreSQL ({server.describe()})", server)]
    except RuntimeError as e:
        print(f"PostgreSQL skipped: {e}", file=sys.stderr)
        stores = [("SQLite", None)]
    try:
        for store, where in stores:
            seconds = {}
            for name, options in SETTINGS:
                seconds[name] = one(args.n, options, where)
                print(f"{store}: {name}: {seconds[name]:.2f} s", flush=True)
            base = seconds["each"]
            lines.append(f"{store}: " + "; ".join(
                f"{name} {s:.2f} s (x{base / s:.2f})" for name, s in seconds.items()))
    finally:
        if server is not None:
            server.down()
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (HERE / "results" / "durable-batch.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
