"""The durable scheduler's store on a PostgreSQL server: psycopg 3 and its connection pool.

``postgresql://user@host:port/database?schema=name`` (any libpq URL; ``host=/socket/dir`` for a
unix socket). ``schema`` names the PostgreSQL schema that holds the store's tables, created on
first use ("refsched" by default), so several stores share one database.

What the SQLite store gets from its single writer, this store gets from one transaction-scoped
advisory lock per store schema, taken first by every transaction that writes: the spec's steps
are atomic and serial, a reader never waits (MVCC), and ``step.n`` numbers the history in commit
order. Inside that lock a write transaction runs at READ COMMITTED, so each statement sees every
step committed before the lock was granted. Read-only calls run at REPEATABLE READ, so a
``snapshot()`` of several queries is one consistent state.

Every deadline is read and written on the server's clock (``clock_timestamp()``), whatever the
clocks of the machines the workers run on say.

A transaction that makes a version claimable or frees a slot sends a notification on the
store's channel at commit; an idle worker waits on it with ``LISTEN`` (:meth:`wait_for_work`),
and a wait that hears nothing ends after its timeout, so a notification lost while a
connection was down delays work by one poll and strands none.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from refsched.errors import InvalidArgumentError, StoreError

from .store import Row, Store, Tx, schema_statements

__all__ = ["PostgresStore", "split_url"]

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")
_WALL_NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"
_VIRTUAL_NOW = "SELECT (value #>> '{}')::float8 FROM meta WHERE key = 'now'"


def split_url(url: str, schema: str | None = None) -> tuple[str, str]:
    """``(libpq URL, schema)``: the ``schema`` query parameter taken out of ``url``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [v for k, v in query if k == "schema"]
    if len(named) > 1:
        raise InvalidArgumentError(f"{url!r}: schema given {len(named)} times")
    if named and schema is not None and named[0] != schema:
        raise InvalidArgumentError(f"{url!r}: schema={schema!r} differs from the URL's")
    chosen = schema if schema is not None else (named[0] if named else "refsched")
    if not isinstance(chosen, str) or not _SCHEMA.match(chosen):
        raise InvalidArgumentError(
            f"schema={chosen!r}: a lower-case PostgreSQL name (letters, digits, _; at most 63)")
    # The other parameters go to libpq as they were written: decoded and encoded again by
    # urlencode, a space became "+", which libpq does not decode ("options=-c%20x%3Dy" reached
    # the server as "-c+x=y" and every connection was refused).
    rest = "&".join(p for p in parts.query.split("&")
                    if p and unquote(p.split("=", 1)[0]) != "schema")
    return urlunsplit(parts._replace(query=rest)), chosen


@functools.lru_cache(maxsize=512)
def _dialect(sql: str) -> str:
    """The scheduler's ``?`` placeholders as psycopg's ``%s`` (a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _PostgresTx(Tx):
    __slots__ = ("_cur", "_now", "_now_sql", "woken")

    META_ADD = ("UPDATE meta SET value = to_jsonb((value #>> '{}')::numeric + ?::numeric) "
                "WHERE key = ?")

    def __init__(self, cur: Any, now_sql: str) -> None:
        self._cur = cur
        self._now_sql = now_sql
        self._now: float | None = None
        self.woken = False

    def encode(self, value: Any) -> Any:
        from psycopg.types.json import Jsonb
        return Jsonb(value)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row: Row | None = self._cur.execute(_dialect(sql), tuple(params)).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        rows: list[Row] = self._cur.execute(_dialect(sql), tuple(params)).fetchall()
        return rows

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        count: int = self._cur.execute(_dialect(sql), tuple(params)).rowcount
        return count

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(r) for r in rows]
        if rows:
            self._cur.executemany(_dialect(sql), rows)

    def has_schema(self) -> bool:
        tables = {name for (name,) in self.all(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()")}
        if tables and "meta" not in tables:
            raise StoreError(f"the schema holds tables of another program "
                             f"({', '.join(sorted(tables))}); it was left untouched")
        return "meta" in tables

    def now(self) -> float:
        if self._now is None:
            self._now = float(self._cur.execute(self._now_sql).fetchone()[0])
        return self._now

    def wake(self) -> None:
        self.woken = True


class PostgresStore(Store):
    """A store in one schema of a PostgreSQL database (see the module docstring)."""

    notifies = True

    def __init__(self, url: str, *, create: bool = True, synchronous: str = "normal",
                 schema: str | None = None, pool_size: int = 4,
                 connect_timeout: float = 30.0, idle_step_timeout: float = 10.0) -> None:
        if synchronous not in ("normal", "full"):
            raise InvalidArgumentError(f"synchronous={synchronous!r}: 'normal' or 'full'")
        try:
            import psycopg
            from psycopg import sql
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreError(f"{url}: a PostgreSQL store needs psycopg 3 and psycopg_pool: "
                             "pip install 'refsched[postgres]'") from None
        self.url = url
        self._conninfo, self.schema_name = split_url(url, schema)
        self._create = create
        self._psycopg = psycopg
        self._now_sql = _WALL_NOW
        digest = hashlib.sha256(f"refsched:{self.schema_name}".encode()).digest()
        self._lock_key = int.from_bytes(digest[:8], "big", signed=True)
        self._channel = f"refsched_{self.schema_name}"
        self._set_path = sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema_name))
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(self._channel))
        self._listener: Any = None  # the connection wait_for_work() listens on
        self._listener_lock = threading.Lock()

        def configure(conn: Any) -> None:
            conn.autocommit = True  # every transaction is an explicit BEGIN ... COMMIT
            conn.execute(self._set_path)
            # A client that stops inside a step (paused, cut off) holds the store's lock, and
            # every writer of the store waits behind it until the server ends its session; a
            # silent peer is noticed through TCP only after hours. A step takes milliseconds.
            conn.execute(f"SET idle_in_transaction_session_timeout = "
                         f"{int(idle_step_timeout * 1000)}")

        # A step's whole transaction is a few round trips: BEGIN with the lock, its statements,
        # COMMIT with the notification. No check of a pooled connection on each checkout: a
        # connection that broke while idle (the server restarted) fails the first statement,
        # before anything of the step was sent, and the step is begun again on another.
        self._pool = ConnectionPool(self._conninfo, min_size=1, max_size=pool_size,
                                    configure=configure, timeout=connect_timeout, open=False,
                                    name=f"refsched-{self.schema_name}")
        self._begin_write = f"BEGIN; SELECT pg_advisory_xact_lock({self._lock_key})"
        self._commit_notify = f"SELECT pg_notify('{self._channel}', ''); COMMIT"
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as e:
            self._pool.close()
            raise StoreError(f"{self._safe_url()}: cannot connect to the server: {e}") from None

    def _safe_url(self) -> str:
        parts = urlsplit(self.url)
        if parts.password:
            host = parts.netloc.rsplit("@", 1)[-1]
            return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
        return self.url

    def schema(self) -> list[str]:
        if not self._create:
            raise StoreError(f"{self._safe_url()}: no store in schema {self.schema_name!r}")
        return [f'CREATE SCHEMA IF NOT EXISTS "{self.schema_name}"',
                *schema_statements("schema_postgres.sql")]

    def use_virtual_clock(self) -> None:
        self._now_sql = _VIRTUAL_NOW

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[Tx]:
        psycopg = self._psycopg
        # The store's one writer at a time: the steps commit in the order they run.
        begin = (self._begin_write if write
                 else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn = None
        try:
            conn = self._pool.getconn()
            cur = conn.cursor()
            try:
                cur.execute(begin)
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
                # Broken while it sat in the pool (the server restarted); nothing of the step
                # was sent, so it is begun again on a new connection.
                self._pool.putconn(conn)
                conn = None
                conn = self._pool.getconn()
                cur = conn.cursor()
                cur.execute(begin)
            yield from self._body(conn, cur)
        except psycopg.Error as e:
            raise _store_error(self._safe_url(), e) from None
        except Exception as e:
            if type(e).__module__.startswith("psycopg_pool"):  # PoolTimeout, PoolClosed
                raise StoreError(f"{self._safe_url()}: no connection to the server: "
                                 f"{e}") from None
            raise
        finally:
            if conn is not None:
                self._pool.putconn(conn)

    def _body(self, conn: Any, cur: Any) -> Iterator[Tx]:
        """The transaction begun on ``conn``: the caller's statements, then COMMIT (with the
        notification when the step asked for one), or ROLLBACK if anything raised."""
        tx = _PostgresTx(cur, self._now_sql)
        try:
            yield tx
        except BaseException:
            if not conn.broken:
                with contextlib.suppress(Exception):
                    cur.execute("ROLLBACK")
            raise
        cur.execute(self._commit_notify if tx.woken else "COMMIT")

    def wait_for_work(self, timeout: float) -> bool:
        """Wait on the store's channel; a dropped connection is reopened on the next wait."""
        end = time.monotonic() + timeout
        with self._listener_lock:
            try:
                if self._listener is None or self._listener.closed:
                    self._listener = self._psycopg.connect(self._conninfo, autocommit=True,
                                                           connect_timeout=max(1, int(timeout)))
                    self._listener.execute(self._listen)
                for _ in self._listener.notifies(timeout=max(0.0, timeout), stop_after=1):
                    return True
                return False
            except self._psycopg.Error:
                with contextlib.suppress(Exception):
                    if self._listener is not None:
                        self._listener.close()
                self._listener = None
        time.sleep(max(0.0, end - time.monotonic()))  # the fallback: a plain poll
        return False

    def close(self) -> None:
        with self._listener_lock:
            if self._listener is not None:
                with contextlib.suppress(Exception):
                    self._listener.close()
                self._listener = None
        self._pool.close()


def _store_error(url: str, e: Exception) -> StoreError:
    sqlstate = getattr(getattr(e, "diag", None), "sqlstate", None)
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if sqlstate == "57014":
        return StoreError(f"{url}: a statement timed out: nothing of this step was written")
    if sqlstate in ("40001", "40P01"):
        return StoreError(f"{url}: the server aborted the step ({text}): nothing of it was "
                          "written; it may be retried")
    return StoreError(f"{url}: {text}")
