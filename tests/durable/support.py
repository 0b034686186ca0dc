"""What the durable fault tests share: worker processes, bounded waits, the task functions' logs,
and the accepted ends of a checked history (tests/durable/test_faults.py on SQLite,
tests/durable/test_postgres_faults.py on a PostgreSQL server); and the broken claims of the
lock-step and corpus tests, whose SQL is rewritten."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from refsched.durable import DurableScheduler
from refsched.durable.scheduler import Lease
from refsched.durable.store import Tx
from refsched.verify.durable.history import check_history

ROOT = Path(__file__).resolve().parents[2]
JOBS = "tests.durable.jobs"


def start_worker(url: str, *options: str, name: str | None = None,
                 prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    """``refsched worker --db url`` polling every 0.05 s, run after ``prefix`` (say, in
    another network namespace)."""
    command = [*prefix, sys.executable, "-m", "refsched", "worker", "--db", url,
               "--poll", "0.05", *options]
    if name:
        command += ["--name", name]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def started_hanging_task(url: str, folder: Path, log: Path, seconds: float) -> DurableScheduler:
    """A started store at ``url`` with one slot, recording its history, and one task ``x``
    (``jobs.hang_first``, its marker in ``folder``, logging to ``log``): its first attempt
    holds ``x`` for ``seconds``, longer than the test's leases; a later attempt returns at once."""
    db = DurableScheduler(url, max_concurrency=1, record=True)
    db.submit("x", fn=f"{JOBS}:hang_first",
              args={"task": "x", "marker": str(folder / "marker"), "log": str(log),
                    "seconds": seconds})
    db.start()
    return db


def wait_for(condition: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def log_lines(log: Path) -> list[tuple[str, str, int, float]]:
    """The starts and ends the task functions logged: (what, task, pid, time)."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        what, task, pid, at = line.split()
        rows.append((what, task, int(pid), float(at)))
    return rows


def accepted_ends(db: DurableScheduler) -> dict[tuple[str, int], int]:
    """The accepted ends per version, once the whole history is checked against the spec."""
    check = check_history(db.timed_history(), max_concurrency=db.max_concurrency,
                          max_attempts=db.max_attempts, aging=db.aging, final=db.snapshot())
    assert check.problems == []
    return check.ends


class _RewritingTx:
    """A transaction whose ``all`` queries run with ``old`` replaced by ``new``."""

    def __init__(self, tx: Tx, old: str, new: str) -> None:
        self._tx, self._old, self._new = tx, old, new

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def all(self, sql: str, params: Any = ()) -> Any:
        return self._tx.all(sql.replace(self._old, self._new), params)


class ClaimRewritten(DurableScheduler):
    """A scheduler whose claim() runs its queries with the text ``rewrite[0]`` replaced by
    ``rewrite[1]``: a subclass names the rule it breaks, and how."""

    rewrite: tuple[str, str]  # (old, new): old must be in the claim's query, or nothing breaks

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        store, transaction = self._store, self._store.transaction

        @contextlib.contextmanager
        def rewritten(write: bool = True, first: str | None = None) -> Iterator[Any]:
            with transaction(write, first) as tx:
                yield _RewritingTx(tx, *self.rewrite)

        store.transaction = rewritten  # type: ignore[method-assign]
        try:
            return super().claim(worker, limit, lease)
        finally:
            del store.transaction


#: What takes a store of schema version ``v`` back to ``v - 1`` (the undoing of MIGRATIONS[v]),
#: for the tests that show an older store read as it is and migrated by its first writer.
DOWNGRADES: dict[int, tuple[str, ...]] = {
    # {sum}: the sum of a counter's rows as meta keeps a value, in the store's dialect
    7: ("INSERT INTO meta (key, value) SELECT 'count:' || name, {sum} FROM counter "
        "GROUP BY name", "DROP TABLE counter", "DROP TABLE run_slot"),
    6: (*(f"ALTER TABLE task DROP COLUMN {c}" for c in ("task_type", "tenant", "retried",
                                                         "first_claimed_at", "expiries")),
        "DROP TABLE past_version", "DROP TABLE refusal"),
    5: ("ALTER TABLE task DROP COLUMN provenance",),
    4: ("ALTER TABLE dep DROP COLUMN optional", "ALTER TABLE task DROP COLUMN optional_deps",
        "DROP TABLE input_summary"),
    3: ("DROP INDEX task_claim", "DROP INDEX task_due",
        *(f"ALTER TABLE task DROP COLUMN {c}" for c in ("due", "priority", "claim_key",
                                                          "claim_due")),
        "CREATE INDEX task_ready ON task (seq) WHERE state = 'ready'",
        "DELETE FROM meta WHERE key IN ('aging', 'slot_due')",
        "DROP TABLE slot", "DROP TABLE schedule"),
    2: ("ALTER TABLE task DROP COLUMN traceback",),
}


def downgrade(db: DurableScheduler, url: str, path: Path, version: int) -> None:
    """Release ``db`` and take its store (the SQLite file ``path``, or the PostgreSQL store at
    ``url``) back to schema ``version``, as the code of that version left it."""
    from refsched.durable.store import SCHEMA_VERSION

    statements = [s for v in range(SCHEMA_VERSION, version, -1) for s in DOWNGRADES[v]]
    db.release()
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(path)
        for statement in statements:
            conn.execute(statement.replace("{sum}", "SUM(n)"))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
        conn.commit()
        conn.close()
        return
    import psycopg

    from refsched.durable.postgres import split_url
    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as server:
        server.execute(f"SET search_path TO {schema}")
        for statement in statements:
            server.execute(statement.replace("{sum}", "to_jsonb(SUM(n))"))
        server.execute(f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")
