"""The store seam of the durable scheduler: one transaction interface, one class per database.

:class:`DurableScheduler` takes every spec step as one call of :meth:`Store.transaction`, whose
:class:`Tx` runs the step's SQL and reads the store's clock (:meth:`Tx.now`) inside that
transaction. A store knows its database: how to open it, create the schema (``schema.sql``),
serialise writers and tell the time; the scheduler's logic knows nothing of either.

URLs: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, or a plain path, for
:class:`SQLiteStore`; ``postgresql://...`` for :class:`refsched.durable.postgres.PostgresStore`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from refsched.errors import InvalidArgumentError, StoreError

__all__ = ["COUNTERS_READ", "FORMAT", "MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore", "Store", "Tx"]

FORMAT = "refsched-durable"  # meta.format: this file is a refsched store
SCHEMA_VERSION = 7  # meta.schema_version this code reads and writes

#: What brings a store of schema version ``v - 1`` to ``v``, in both dialects (type names both
#: read alike: DOUBLE PRECISION is SQLite's REAL, BIGINT its INTEGER); run by the first writer
#: that opens an older store, inside the transaction that checks its version. Version 3: every
#: version stored before is due at 0 with priority 0, so it keeps its place, by seq, ahead of
#: the versions made since; the scheduler adds the meta key ``aging``. The schedule
#: and slot tables start empty, and the scheduler adds ``slot_due`` (no slot owed). Version 4:
#: every edge stored before is required, no version has optional edges, and no input summary
#: is kept (no version with optional edges was ever claimed). Version 5: every version gains
#: its provenance column; the scheduler then fills it for the versions already dead
#: (``refsched.durable.scheduler``: a record without actor or reason, timed at its end).
#: Version 6: the signal columns and tables; every version stored before is unlabelled and
#: counted as submitted, its first claim taken as its current attempt's, its expiries as the
#: attempts before the current one; no earlier version is kept in past_version, so the
#: partitions count only the versions the store still holds (docs/durable.md, Signals).
#: Version 7: meta's counters ``count:NAME`` move to the table counter, each as shard 0, and
#: the table run_slot starts empty (the first writer of a PostgreSQL store fills it).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: ("ALTER TABLE task ADD COLUMN traceback TEXT",),
    3: ("ALTER TABLE task ADD COLUMN due DOUBLE PRECISION NOT NULL DEFAULT 0",
        "ALTER TABLE task ADD COLUMN priority BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE task ADD COLUMN claim_key DOUBLE PRECISION NOT NULL DEFAULT 0",
        "ALTER TABLE task ADD COLUMN claim_due DOUBLE PRECISION NOT NULL DEFAULT 0",
        "DROP INDEX IF EXISTS task_ready",
        "CREATE INDEX IF NOT EXISTS task_claim ON task (claim_key DESC, claim_due, seq) "
        "WHERE state = 'ready'",
        "CREATE INDEX IF NOT EXISTS task_due ON task (due) WHERE state = 'ready'",
        # the recurring schedules: schema.sql's schedule and slot tables
        "CREATE TABLE IF NOT EXISTS schedule (name TEXT PRIMARY KEY, fn TEXT NOT NULL, "
        "args TEXT NOT NULL, every DOUBLE PRECISION, cron TEXT, timezone TEXT NOT NULL, "
        "start_at DOUBLE PRECISION NOT NULL, overlap TEXT NOT NULL, catchup DOUBLE PRECISION, "
        "priority BIGINT NOT NULL, paused INTEGER NOT NULL DEFAULT 0, next_slot DOUBLE "
        "PRECISION, held_slot DOUBLE PRECISION, unlisted BIGINT NOT NULL DEFAULT 0, open_from "
        "DOUBLE PRECISION, created_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS slot (schedule TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, "
        "decision TEXT NOT NULL, task TEXT, decided_at DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (schedule, at))"),
    4: ("ALTER TABLE dep ADD COLUMN optional INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE task ADD COLUMN optional_deps INTEGER NOT NULL DEFAULT 0",
        # schema.sql's input_summary table
        "CREATE TABLE IF NOT EXISTS input_summary (task TEXT NOT NULL, dep TEXT NOT NULL, "
        "generation BIGINT NOT NULL, state TEXT NOT NULL, result TEXT, error TEXT, "
        "blocked_by TEXT, PRIMARY KEY (task, dep))"),
    5: ("ALTER TABLE task ADD COLUMN provenance TEXT",),
    6: ("ALTER TABLE task ADD COLUMN task_type TEXT",
        "ALTER TABLE task ADD COLUMN tenant TEXT",
        "ALTER TABLE task ADD COLUMN retried INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE task ADD COLUMN first_claimed_at DOUBLE PRECISION",
        "ALTER TABLE task ADD COLUMN expiries BIGINT NOT NULL DEFAULT 0",
        "UPDATE task SET first_claimed_at = claimed_at, expiries = attempt - 1 "
        "WHERE attempt > 0",
        # schema.sql's past_version and refusal tables
        "CREATE TABLE IF NOT EXISTS past_version (task_type TEXT, tenant TEXT, seq BIGINT NOT "
        "NULL, retried INTEGER NOT NULL, state TEXT NOT NULL, attempt BIGINT NOT NULL, "
        "ended_attempt BIGINT, expiries BIGINT NOT NULL, became_ready_at DOUBLE PRECISION, "
        "first_claimed_at DOUBLE PRECISION, ended_at DOUBLE PRECISION)",
        "CREATE TABLE IF NOT EXISTS refusal (task_type TEXT NOT NULL, tenant TEXT NOT NULL, "
        "kind TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (task_type, tenant, kind))"),
    7: ("CREATE TABLE IF NOT EXISTS counter (name TEXT NOT NULL, shard INTEGER NOT NULL, "
        "n BIGINT NOT NULL, PRIMARY KEY (name, shard))",
        "INSERT INTO counter (name, shard, n) SELECT substr(key, 7), 0, CAST(value AS BIGINT) "
        "FROM meta WHERE key LIKE 'count:%'",
        "DELETE FROM meta WHERE key LIKE 'count:%'",
        # schema.sql's run_slot table: its rows are made by the writers of a PostgreSQL store
        "CREATE TABLE IF NOT EXISTS run_slot (n BIGINT PRIMARY KEY, task TEXT, "
        "generation BIGINT)",
        "CREATE INDEX IF NOT EXISTS run_slot_task ON run_slot (task)"),
}

#: The counters as ``name, value`` rows (a read of the store's ``counter`` table).
COUNTERS_READ = "SELECT name, CAST(SUM(n) AS BIGINT) FROM counter GROUP BY name"

Row = tuple[Any, ...]


def schema_statements(name: str = "schema.sql") -> list[str]:
    """The statements of a schema file of this package (``schema.sql``), in order."""
    text = resources.files("refsched.durable").joinpath(name).read_text("utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


class Tx(ABC):
    """One open transaction: SQL with ``?`` placeholders, the ``meta`` table, the store's clock.

    The SQL the scheduler writes is the part of SQL both databases read alike; what differs
    (how ``meta`` keeps values of several types, how to tell that the schema exists) is here,
    in each store's dialect.
    """

    # meta's statements; a store whose meta column is typed overrides them and the codec
    META_ALL = "SELECT key, value FROM meta"
    META_GET = "SELECT value FROM meta WHERE key = ?"
    META_ADD = "UPDATE meta SET value = value + ? WHERE key = ?"
    META_SET = "UPDATE meta SET value = ? WHERE key = ?"
    META_INSERT = "INSERT INTO meta (key, value) VALUES (?, ?)"
    #: The shard of the counter rows this transaction adds to: one writer runs at a time here
    COUNTER_SHARD = "0"

    first: Row | None = None  # the row of transaction(first=...)

    def encode(self, value: Any) -> Any:
        """A meta value as the database takes it."""
        return value

    @abstractmethod
    def has_schema(self) -> bool:
        """Whether the store's tables exist (the ``meta`` table)."""

    def settings(self) -> dict[str, Any]:
        """Every meta key and its value."""
        return dict(self.all(self.META_ALL))

    def meta(self, key: str) -> Any:
        """One meta value, or None."""
        row = self.one(self.META_GET, (key,))
        return None if row is None else row[0]

    def metas(self, *keys: str) -> tuple[Any, ...]:
        """Several meta values in one query, in the order asked (None for a missing key)."""
        marks = ", ".join("?" * len(keys))
        found: dict[str, Any] = dict(self.all(f"SELECT key, value FROM meta WHERE key IN ({marks})",
                                              keys))
        return tuple(found.get(k) for k in keys)

    def meta_add(self, key: str, n: float) -> None:
        """Add ``n`` to a numeric meta value."""
        self.later(self.META_ADD, (n, key))

    def count(self, name: str, n: int) -> None:
        """Add ``n`` to the counter ``name``: to its row of this transaction's shard, made
        if there is none (an upsert, so that writers of different shards never wait for one
        another's row)."""
        self.later("INSERT INTO counter (name, shard, n) VALUES (?, "
                   f"{self.COUNTER_SHARD}, ?) ON CONFLICT (name, shard) DO UPDATE SET "
                   "n = counter.n + excluded.n", (name, n))

    def meta_set(self, key: str, value: Any) -> None:
        self.run(self.META_SET, (self.encode(value), key))

    def meta_insert(self, items: Iterable[tuple[str, Any]]) -> None:
        self.many(self.META_INSERT, ((k, self.encode(v)) for k, v in items))

    def versions_untouched(self) -> None:  # noqa: B027 (a no-op unless a store fits rows)
        """Say that this transaction changes no version's state (an open that migrates
        nothing): a store that fits rows of its own to the running versions at commit
        (PostgreSQL's slot rows) leaves them, and writes nothing a reader's role may not."""

    def wake(self, max_concurrency: int,  # noqa: B027 (a no-op unless it can notify)
             always: bool = False) -> None:
        """This step may make a version claimable: tell idle workers once it commits, if a
        claim could then take a step, or ``always`` (a version not yet due: an idle worker
        reads the next due time again). A store that cannot tell them does nothing; its
        workers poll."""

    @abstractmethod
    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""

    @abstractmethod
    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""

    @abstractmethod
    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; return how many rows it changed."""

    def later(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement whose result the step does not read. A store across a network
        sends it with the transaction's next round trip (the next query, or COMMIT), in
        order; every statement sees the effect of those before it, as with :meth:`run`."""
        self.run(sql, params)

    @abstractmethod
    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run a statement once per parameter row."""

    @abstractmethod
    def now(self) -> float:
        """The store's clock, read once per transaction (seconds)."""


class Store(ABC):
    """A database holding one durable scheduler."""

    url: str

    @abstractmethod
    def transaction(self, write: bool = True,
                    first: str | None = None) -> contextlib.AbstractContextManager[Tx]:
        """One transaction: committed when the block ends, rolled back if it raises.

        ``first``: a query without parameters run before anything else in the transaction
        (after the write lock is granted), its first row in :attr:`Tx.first`; a store across a
        network sends it in the same round trip as BEGIN."""

    @abstractmethod
    def schema(self) -> list[str]:
        """The statements that create the store's tables, in its dialect."""

    @abstractmethod
    def use_virtual_clock(self) -> None:
        """Read the store's clock from ``meta.now`` (a store created with ``clock='virtual'``)."""

    @abstractmethod
    def use_wall_clock(self) -> None:
        """Read the store's clock from the database's (the default)."""

    #: The store's clock as an SQL expression (seconds), for :meth:`read`.
    clock_sql: str

    @abstractmethod
    def read(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """The rows of each read-only query, all of them reading one consistent state of the
        store; a store across a network sends them in one round trip."""

    def peek(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of one read-only query (or None)."""
        rows = self.read([(sql, params)])[0]
        return rows[0] if rows else None

    def prepare(self, tx: Tx) -> None:  # noqa: B027 (a no-op unless the store has such parts)
        """Make the server-side parts of the store current (the scheduler's first transaction
        calls this)."""

    def make_slots(self, tx: Tx,  # noqa: B027 (a no-op unless the store's claims use them)
                   max_concurrency: int) -> None:
        """Make the slot rows of ``max_concurrency`` that do not exist yet (a store whose
        claims take slot rows; the scheduler's first transaction calls this)."""

    def call(self, step: str, *args: Any) -> list[Row] | None:
        """Run ``step`` as the store's server-side function in one round trip: its rows, or
        None when the store has no such function (the scheduler then takes the step itself)."""
        return None

    @property
    def has_steps(self) -> bool:
        """Whether :meth:`call` may run a step (else it answers None to every call): a caller
        with arguments to build skips them when it cannot."""
        return False

    notifies = False  # whether wait_for_work() hears of new work, or only waits

    def wait_for_work(self, timeout: float, max_concurrency: int | None = None) -> bool:
        """Wait up to ``timeout`` seconds for a sign that a version may have become claimable
        (under ``max_concurrency``); True if one came. A store that cannot tell waits the
        whole time (a poll)."""
        time.sleep(timeout)
        return False

    def busy(self) -> None:  # noqa: B027 (a no-op unless the store can notify)
        """The caller took work: it needs no sign until its next :meth:`wait_for_work`."""

    def forget_wakeups(self) -> None:  # noqa: B027 (a no-op unless the store can notify)
        """Drop the signs already received: the caller is about to look at the store, and
        what they told of is what it will see; :meth:`wait_for_work` then waits for new ones."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection (the scheduler's state stays as it is)."""


# -- SQLite ------------------------------------------------------------------------------------

# The store's clock: SQLite's own reading of the time, in Unix seconds. One machine has one
# clock, so every process judges a deadline on the same clock as the one that wrote it.
_WALL_NOW = "(julianday('now') - 2440587.5) * 86400.0"
_VIRTUAL_NOW = "(SELECT value FROM meta WHERE key = 'now')"


class _SQLiteTx(Tx):
    __slots__ = ("_conn", "_now", "_now_sql", "first")

    def __init__(self, conn: sqlite3.Connection, now_sql: str) -> None:
        self._conn = conn
        self._now_sql = now_sql
        self._now: float | None = None
        self.first: Row | None = None

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def has_schema(self) -> bool:
        return self.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                        "name = 'meta'") is not None

    def now(self) -> float:
        if self._now is None:
            row = self._conn.execute(f"SELECT {self._now_sql}").fetchone()
            self._now = float(row[0])
        return self._now


def _sqlite_path(url: str) -> Path:
    if url.startswith("sqlite://"):
        rest = url[len("sqlite://"):]
        if not rest.startswith("/") or rest == "/":
            raise InvalidArgumentError(
                f"{url!r}: a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db")
        return Path(rest[1:])
    return Path(url)


def _read_only_uri(path: Path) -> str:
    """The URI that opens ``path`` without writing or creating a byte.

    While some process has the file open in WAL mode, its -wal and -shm files exist, and a
    read-only connection reads through them as every reader does. Once the last one has closed
    it, they are gone and the file holds everything: it is read as it is (immutable), for
    ``mode=ro`` alone would create both files, which no read-only connection removes. A writer
    that opens it meanwhile only appends to a new -wal; the file itself changes at the first
    checkpoint, long after one short read."""
    wal = (Path(f"{path}-wal"), Path(f"{path}-shm"))
    still = "" if any(p.exists() for p in wal) else "&immutable=1"
    return f"{path.resolve().as_uri()}?mode=ro{still}"


def _is_sqlite_file(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


class SQLiteStore(Store):
    """A store in one SQLite file, shared by every process on the machine.

    WAL mode (readers never wait for the writer), ``synchronous=NORMAL`` (a committed step
    survives the death of any process; ``synchronous="full"`` also survives a power cut), and
    ``BEGIN IMMEDIATE`` for every transaction that writes, so a transaction that reads then writes
    waits for the write lock up front instead of failing when it upgrades. One connection per
    store object, guarded by a lock: SQLite takes one writer at a time anyway.
    """

    def __init__(self, url: str, *, create: bool = True, synchronous: str = "normal",
                 busy_timeout: float = 60.0, read_only: bool = False) -> None:
        if synchronous not in ("normal", "full"):
            raise InvalidArgumentError(f"synchronous={synchronous!r}: 'normal' or 'full'")
        self.url = url
        self.path = _sqlite_path(url)
        self._lock = threading.Lock()  # guards _conn: one transaction at a time per object
        self.clock_sql = _WALL_NOW
        self._check_existing(create and not read_only, read_only)
        try:
            if read_only:  # a reader (refsched status) writes and creates nothing
                conn = sqlite3.connect(_read_only_uri(self.path), uri=True,
                                       timeout=busy_timeout, isolation_level=None,
                                       check_same_thread=False)
            else:
                conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None,
                                       check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"{url}: cannot open the store: {e}") from None
        self._conn = conn
        if read_only:
            return
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{url}: the store needs WAL mode and got {mode!r} "
                                 "(a local filesystem is required)")
            conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        except sqlite3.Error as e:
            conn.close()
            raise StoreError(f"{url}: cannot open the store: {e}") from None

    def _check_existing(self, create: bool, read_only: bool = False) -> None:
        """Refuse, before writing a byte, a file that is not a refsched store."""
        if "\x00" in str(self.path):
            raise InvalidArgumentError(f"{self.url!r}: a path holds no NUL character")
        try:
            self._check_file(create, read_only)
        except OSError as e:  # a name too long, a folder that cannot be searched
            raise StoreError(f"{self.url}: cannot read the store: {e.strerror or e}") from None

    def _check_file(self, create: bool, read_only: bool) -> None:
        path = self.path
        if path.is_dir():
            raise StoreError(f"{self.url}: is a directory, not a store file")
        if not path.exists():
            if not create:
                raise StoreError(f"{self.url}: no store there")
            parent = path.parent if str(path.parent) else Path(".")
            if not parent.is_dir():
                raise StoreError(f"{self.url}: the folder {str(parent)!r} does not exist")
            if os.statvfs(parent).f_flag & os.ST_RDONLY:
                raise StoreError(f"{self.url}: cannot create a store on a read-only filesystem")
            return
        if not read_only and os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            raise StoreError(f"{self.url}: the store is on a read-only filesystem; it needs to "
                             "write (its WAL, and every step)")
        try:
            info = path.stat()
            if not stat.S_ISREG(info.st_mode):
                raise StoreError(f"{self.url}: not a regular file; it was left untouched")
            size = info.st_size
            if size == 0:
                if create:
                    return  # an empty file (a store whose creator died before the first write)
                raise StoreError(f"{self.url}: no store there (an empty file); it was left "
                                 "untouched")
            if not _is_sqlite_file(path):
                raise StoreError(f"{self.url}: not a refsched store (not a SQLite file); "
                                 "it was left untouched")
        except OSError as e:
            raise StoreError(f"{self.url}: cannot read the store: {e}") from None
        # Read-only inspection: a SQLite file of another program must not even get a WAL.
        try:
            ro = sqlite3.connect(_read_only_uri(path), uri=True)
        except sqlite3.Error as e:
            raise StoreError(f"{self.url}: cannot open the store: {e}") from None
        try:
            tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" not in tables:
                if tables:
                    raise StoreError(f"{self.url}: a SQLite file of another program (tables "
                                     f"{', '.join(sorted(tables))}); it was left untouched")
                if create:
                    return
                raise StoreError(f"{self.url}: no store there (a SQLite file without tables); "
                                 "it was left untouched")
            meta = dict(ro.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError as e:
            raise StoreError(f"{self.url}: cannot read the store: {e}") from None
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"{self.url}: not a valid store ({e}); it was left untouched") from None
        finally:
            ro.close()
        check_meta(self.url, meta)

    @contextlib.contextmanager
    def transaction(self, write: bool = True, first: str | None = None) -> Iterator[Tx]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as e:
                raise _store_error(self.url, e) from None
            try:
                tx = _SQLiteTx(conn, self.clock_sql)
                if first is not None:
                    tx.now()  # read before ``first``, as the PostgreSQL store's BEGIN reads it
                    tx.first = conn.execute(first).fetchone()
                yield tx
            except sqlite3.Error as e:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise _store_error(self.url, e) from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise _store_error(self.url, e) from None

    def schema(self) -> list[str]:
        return schema_statements("schema.sql")

    def use_virtual_clock(self) -> None:
        self.clock_sql = _VIRTUAL_NOW

    def use_wall_clock(self) -> None:
        self.clock_sql = _WALL_NOW

    def read(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        with self._lock:
            conn = self._conn
            try:
                if len(queries) == 1:  # one statement reads one state by itself
                    return [conn.execute(*queries[0]).fetchall()]
                conn.execute("BEGIN")
                try:
                    return [conn.execute(sql, params).fetchall() for sql, params in queries]
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as e:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise _store_error(self.url, e) from None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _store_error(url: str, e: sqlite3.Error) -> StoreError:
    text = str(e)
    if "full" in text:
        return StoreError(f"{url}: the disk is full: nothing of this step was written")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{url}: the store is read-only: nothing of this step was written")
    return StoreError(f"{url}: {text}")


def check_meta(url: str, meta: dict[str, Any]) -> None:
    """Refuse a store of another format or of a newer schema."""
    if meta.get("format") != FORMAT:
        raise StoreError(f"{url}: not a refsched store (format {meta.get('format')!r}); "
                         "it was left untouched")
    version = meta.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise StoreError(f"{url}: the store has schema version {version!r}, newer than this "
                         f"refsched's {SCHEMA_VERSION}: upgrade refsched to open it")
