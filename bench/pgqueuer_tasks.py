"""PgQueuer's side of the durable benchmark on PostgreSQL: a no-op entrypoint, as its docs do.

``main()`` builds the ``PgQueuer`` on the database in PGQUEUER_BENCH_DSN (a libpq URL) through its
psycopg driver, the factory ``pgq run pgqueuer_tasks:main`` takes. The benchmark runs it with
``python pgqueuer_tasks.py BATCH_SIZE MAX_CONCURRENT_TASKS`` instead, which makes the same
``PgQueuer.run(batch_size=..., max_concurrent_tasks=...)`` call and stops it on SIGTERM as ``pgq
run`` does: PgQueuer 1.6.0's ``pgq run`` exits at start-up in its log set-up (``AttributeError:
'str' object has no attribute 'name'``). Its schema is installed first with ``pgq install``.
"""

import asyncio
import os
import signal
import sys

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.models import Job


async def main() -> PgQueuer:
    conn = await psycopg.AsyncConnection.connect(
        os.environ.get("PGQUEUER_BENCH_DSN", ""), autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    return pgq


async def serve(batch_size: int, max_concurrent_tasks: int) -> None:
    pgq = await main()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, pgq.shutdown.set)
    await pgq.run(batch_size=batch_size, max_concurrent_tasks=max_concurrent_tasks)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2])))
