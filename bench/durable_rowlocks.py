"""The PostgreSQL store's claims per second with 4, 8 and 16 claiming processes, and flat
no-op jobs through 4 ``refsched worker`` processes: the figures of docs/durable.md's "Writers
without one lock", one run each.

``python bench/durable_rowlocks.py [--n 4000] [--flat 10000]`` prints one line per figure, on
the server of REFSCHED_BENCH_POSTGRES (or a throwaway cluster of tests/pgserver.py). Run it from
two checkouts on one server (each process imports the refsched of the checkout it runs in) and
divide: the ratios of docs/durable.md are this code's figures over those of the code before.
"""

from __future__ import annotations

import argparse

import durable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4_000, help="claims per run (default 4,000)")
    parser.add_argument("--flat", type=int, default=10_000,
                        help="flat jobs through 4 workers (default 10,000; 0: none)")
    parser.add_argument("--processes", default="4,8,16", help="claiming processes per run")
    args = parser.parse_args(argv)
    server = durable.PostgresServer.up()
    try:
        print(f"server: {server.describe()}", flush=True)
        for processes in (int(p) for p in args.processes.split(",")):
            rate = durable.claims_per_second_postgres(server, args.n, processes)
            print(f"claims {processes} processes: {rate:.0f} claims/s", flush=True)
        if args.flat:
            seconds = durable.durable_flat_postgres(server, args.flat, 4)
            print(f"flat {args.flat} through 4 workers: {seconds:.2f} s", flush=True)
    finally:
        server.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
