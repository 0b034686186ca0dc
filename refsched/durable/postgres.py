"""The durable scheduler's store on a PostgreSQL server: psycopg 3 and its connection pool.

``postgresql://user@host:port/database?schema=name`` (any libpq URL; ``host=/socket/dir`` for a
unix socket). ``schema`` names the PostgreSQL schema that holds the store's tables, created on
first use ("refsched" by default), so several stores share one database.

What the SQLite store gets from its single writer, this store gets from one transaction-scoped
advisory lock per store schema, taken first by every transaction that writes. The server-side
claim, complete and submit of new ids take it shared, and then the row locks of
spec/DurableRowLocks.tla, so they run beside one another (docs/durable.md, "Writers without one
lock"); every other writer takes it exclusively and runs alone, and ends by fitting the slot
rows of max_concurrency to the versions it left running (:data:`FIT_SLOTS`). The spec's steps
are atomic, a reader never waits (MVCC), and ``step.n`` numbers the history in commit order (a
store that records takes the history lock in its shared steps too). A write transaction runs at
READ COMMITTED, so each statement sees every step committed before it started. Read-only calls
run at REPEATABLE READ, so a ``snapshot()`` of several queries is one consistent state.

Every deadline is read and written on the server's clock (``clock_timestamp()``), whatever the
clocks of the machines the workers run on say.

An exclusive writer waits for the ones holding the lock, so what counts is how long each holds
it. The
common paths of Submit (a batch of ``submit_many``, and each ``submit``, a batch of one), Claim
and Complete are server-side functions (:mod:`.steps_postgres`, installed by
:meth:`PostgresStore.prepare`), one statement and one round trip each: the lock is
held while the server works, not while a client waits for the CPU between statements. Other
steps: the BEGIN that takes the lock also reads the clock, and statements whose result the step
does not read (:meth:`Tx.later`: counters, the history, fan-in) go out in one pipeline with the
next query or with COMMIT.

A transaction that may make a version claimable sends a notification on the store's channel
at commit, if a worker is idle and a claim could then take a step; an idle worker waits on it
with ``LISTEN`` (:meth:`wait_for_work`, whose first wait after :meth:`busy` writes the worker's
row of ``idle_listener``) and drops those that came before its last look
(:meth:`forget_wakeups`), and a wait that hears nothing ends after its timeout, so a
notification lost while a connection was down delays work by one poll and strands none.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import re
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from refsched.durable.store import Row, Store, Tx, schema_statements
from refsched.errors import InvalidArgumentError, StoreError

__all__ = ["PostgresStore", "split_url"]

_T = TypeVar("_T")

#: How many slot rows a store makes up front (:meth:`PostgresStore.make_slots`).
SLOTS_MADE = 1024

#: SQLSTATEs of a call the server aborted whole, sent again (deadlock, serialization failure).
_RETRIED = frozenset({"40P01", "40001"})
_CALL_TRIES = 10

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")
_WALL_NOW = "extract(epoch FROM clock_timestamp())::float8"
_VIRTUAL_NOW = "(SELECT (value #>> '{}')::float8 FROM meta WHERE key = 'now')"


#: What a transaction that holds the store's lock exclusively does last, so that every running
#: version holds exactly one slot row, and no other holds one (docs/durable.md, "Writers
#: without one lock"): a version that left 'running' in it (failed, cancelled, expired for
#: good, closed) frees its row; one that came to run in it (a claim taken here) holds a free
#: row, or a new one numbered at most the count of running versions.
FIT_SLOTS = (
    "UPDATE run_slot SET task = NULL, generation = NULL WHERE task IS NOT NULL AND NOT EXISTS "
    "(SELECT 1 FROM task WHERE task.id = run_slot.task AND task.generation = "
    "run_slot.generation AND task.state = 'running')",
    "INSERT INTO run_slot (n, task, generation) SELECT f.n, w.id, w.generation FROM "
    "(SELECT id, generation, row_number() OVER (ORDER BY id) AS k FROM task WHERE "
    "state = 'running' AND NOT EXISTS (SELECT 1 FROM run_slot WHERE run_slot.task = task.id "
    "AND run_slot.generation = task.generation)) AS w "
    "JOIN (SELECT n, row_number() OVER (ORDER BY n) AS k FROM (SELECT n FROM run_slot "
    "WHERE task IS NULL UNION ALL SELECT g FROM generate_series(1, (SELECT count(*) FROM task "
    "WHERE state = 'running')) AS g WHERE NOT EXISTS (SELECT 1 FROM run_slot WHERE n = g)) "
    "AS c) AS f USING (k) "
    "ON CONFLICT (n) DO UPDATE SET task = excluded.task, generation = excluded.generation")


def split_url(url: str, schema: str | None = None) -> tuple[str, str]:
    """``(libpq URL, schema)``: the ``schema`` query parameter taken out of ``url``."""
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise InvalidArgumentError(f"{url!r}: not a PostgreSQL URL ({e})") from None
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
    __slots__ = ("_always", "_conn", "_cur", "_now", "_now_sql", "_queued", "_wake", "first",
                 "fit_slots", "untouched", "woken")

    META_ADD = ("UPDATE meta SET value = to_jsonb((value #>> '{}')::numeric + ?::numeric) "
                "WHERE key = ?")
    # the shard of the server process: steps that count at once need not share a row
    COUNTER_SHARD = "pg_backend_pid() % 256"

    def __init__(self, conn: Any, cur: Any, now_sql: str, now: float | None,
                 wake: Callable[[int, bool], str]) -> None:
        self._conn = conn
        self._cur = cur
        self._now_sql = now_sql
        self._wake = wake
        self._now = now  # read by the BEGIN that took the lock, on the wall clock
        self._queued: list[tuple[str, Any]] = []  # later(): sent with the next round trip
        self.first: Row | None = None
        self.woken: str | None = None  # wake(): the notification's statement
        self._always = False  # woken notifies whatever the state (a version not yet due)
        self.fit_slots = False  # commit() fits the slot rows first (an exclusive writer's)
        self.untouched = False  # versions_untouched(): no version changed, nothing to fit

    def encode(self, value: Any) -> Any:
        from psycopg.types.json import Jsonb
        return Jsonb(value)

    def _execute(self, sql: str, params: Sequence[Any]) -> Any:
        """Run ``sql`` after the queued statements, in one round trip; its cursor."""
        cur = self._cur
        if not self._queued:
            return cur.execute(_dialect(sql), tuple(params))
        self._send_queued(sql, params)
        return cur

    def _send_queued(self, *last: Any) -> None:
        """The queued statements (then ``last``: sql and params), in one pipeline."""
        queued, self._queued = self._queued, []
        cur = self._cur
        with self._conn.pipeline():
            for sql, params in queued:
                if isinstance(params, list):
                    cur.executemany(sql, params)
                else:
                    cur.execute(sql, params)
            if last:
                cur.execute(_dialect(last[0]), tuple(last[1]))

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row: Row | None = self._execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        rows: list[Row] = self._execute(sql, params).fetchall()
        return rows

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        count: int = self._execute(sql, params).rowcount
        return count

    def later(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._queued.append((_dialect(sql), tuple(params)))

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if batch:
            self._queued.append((_dialect(sql), batch))

    def commit(self) -> None:
        """COMMIT, after the queued statements and the notification, in one round trip."""
        if self.fit_slots:
            self._queued.extend((sql, ()) for sql in FIT_SLOTS)
        if self.woken is not None:
            self._queued.append((self.woken, ()))
        if self._queued:
            self._queued.append(("COMMIT", ()))
            self._send_queued()
        else:
            self._cur.execute("COMMIT")

    def versions_untouched(self) -> None:
        self.untouched = True

    def has_schema(self) -> bool:
        tables = {name for (name,) in self.all(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema()")}
        if tables and "meta" not in tables:
            raise StoreError(f"the schema holds tables of another program "
                             f"({', '.join(sorted(tables))}); it was left untouched")
        return "meta" in tables

    def script(self, sql: str) -> None:
        """Run statements given as one text, without parameters (a function's body holds
        ``;``, ``?`` and ``%``)."""
        if self._queued:
            self._send_queued()
        self._cur.execute(sql)

    def now(self) -> float:
        if self._now is None:
            self._now = float(self.one(f"SELECT {self._now_sql}")[0])  # type: ignore[index]
        return self._now

    def wake(self, max_concurrency: int, always: bool = False) -> None:
        # Judged on the state the step leaves (no other writer runs until COMMIT): a step
        # after which no claim could take a step wakes nobody. Each waking step otherwise woke
        # every idle worker, and all of them queued for the lock to find nothing.
        if self.woken is None or always or not self._always:
            self.woken = self._wake(max_concurrency, always)
            self._always = self._always or always


class PostgresStore(Store):
    """A store in one schema of a PostgreSQL database (see the module docstring)."""

    notifies = True

    def __init__(self, url: str, *, create: bool = True, synchronous: str = "normal",
                 schema: str | None = None, pool_size: int = 4,
                 connect_timeout: float = 30.0, idle_step_timeout: float = 10.0,
                 reconnect_window: float = 5.0, read_only: bool = False) -> None:
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
        self._connect_timeout = connect_timeout
        self._psycopg = psycopg
        self.clock_sql = _WALL_NOW
        digest = hashlib.sha256(f"refsched:{self.schema_name}".encode()).digest()
        self._lock_key = int.from_bytes(digest[:8], "big", signed=True)
        self._channel = f"refsched_{self.schema_name}"
        self._set_path = sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema_name))
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(self._channel))
        self._listener: Any = None  # the connection wait_for_work() listens on
        self._listener_lock = threading.Lock()
        self._idle = False  # the listener's row is in idle_listener (steps_postgres.py)
        self._steps_ready = False  # prepare() found or installed steps_postgres.py
        self._slots_ready = False  # prepare() ran: the store has its run_slot table

        def configure(conn: Any) -> None:
            conn.autocommit = True  # every transaction is an explicit BEGIN ... COMMIT
            conn.execute(self._set_path)
            # A client that stops inside a step (paused, cut off) holds the store's lock, and
            # every writer of the store waits behind it until the server ends its session; a
            # silent peer is noticed through TCP only after hours. A step takes milliseconds.
            conn.execute(f"SET idle_in_transaction_session_timeout = "
                         f"{int(idle_step_timeout * 1000)}")
            if read_only:  # a reader (refsched status) changes nothing, by the server's word
                conn.execute("SET default_transaction_read_only = on")

        # The pool retries a lost connection with a doubling delay, without a cap: after an
        # outage of T seconds the next try could come T seconds after the server was back.
        # Retries end after ``reconnect_window`` seconds instead, and the next step that finds
        # no connection starts a new series, whose first try is at once.
        self._pool = ConnectionPool(self._conninfo, min_size=1, max_size=pool_size,
                                    configure=configure, timeout=connect_timeout, open=False,
                                    reconnect_timeout=reconnect_window,
                                    name=f"refsched-{self.schema_name}")
        self._begin_lock = f"BEGIN; SELECT pg_advisory_xact_lock({self._lock_key})"
        self.use_wall_clock()
        self._probe(connect_timeout)
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as e:
            self._pool.close()
            raise StoreError(f"{self._safe_url()}: cannot connect to the server: {e}") from None

    def _probe(self, timeout: float) -> None:
        """Connect once, before the pool: a server that answers with a refusal (no such role
        or database, a wrong password, an unknown parameter, a host name that resolves to
        nothing) is told at once, in its own words, instead of after the pool's timeout as
        "pool initialization incomplete". A server not up yet (refused, no socket) is left
        to the pool, which waits for it up to ``connect_timeout``."""
        psycopg = self._psycopg
        try:
            conn = psycopg.connect(self._conninfo, connect_timeout=max(1, int(min(timeout, 10))))
        except psycopg.Error as e:
            text = " ".join(str(e).split()) or type(e).__name__
            waiting = ("Connection refused", "No such file or directory", "timeout expired",
                       "the database system is starting up", "server closed the connection")
            if isinstance(e, psycopg.OperationalError) and any(w in text for w in waiting):
                return
            raise StoreError(f"{self._safe_url()}: cannot connect to the server: "
                             f"{text}") from None
        conn.close()

    def prepare(self, tx: Tx) -> None:
        """Install the functions of ``steps_postgres.py`` unless the store has these ones
        (the digest on ``refsched_claim``); under the lock of the caller's transaction."""
        self._slots_ready = True  # the tables are current: each writer keeps the slot rows
        if self._steps_ready:
            return
        from refsched.durable.steps_postgres import SQL, STAMPED
        digest = "refsched steps " + hashlib.sha256(SQL.encode()).hexdigest()[:16]
        (installed,) = tx.one(f"SELECT obj_description(to_regprocedure('{STAMPED}'), "
                              "'pg_proc')") or (None,)
        if installed != digest:
            assert isinstance(tx, _PostgresTx)
            # A role that may not create functions keeps the steps taken by the client.
            tx.script("SAVEPOINT refsched_steps")
            try:
                tx.script(SQL)
                tx.script(f"COMMENT ON FUNCTION {STAMPED} IS '{digest}'")
            except self._psycopg.Error:
                tx.script("ROLLBACK TO SAVEPOINT refsched_steps")
                return
        self._steps_ready = True

    def make_slots(self, tx: Tx, max_concurrency: int) -> None:
        """Slot rows 1 .. max_concurrency, made up front (up to :data:`SLOTS_MADE`): a claim
        that makes one waits for another claim making the same number, where one that takes
        a free row passes over the rows others hold. Past SLOTS_MADE, claims make them."""
        top = min(int(max_concurrency), SLOTS_MADE)
        tx.run("INSERT INTO run_slot (n) SELECT g FROM generate_series(1, ?) AS g "
               "WHERE NOT EXISTS (SELECT 1 FROM run_slot WHERE n = g) "
               "ON CONFLICT (n) DO NOTHING", (top,))

    @property
    def _virtual(self) -> bool:
        """Whether the store's clock is ``meta.now`` (the functions' ``p_virtual``)."""
        return self.clock_sql == _VIRTUAL_NOW

    def _wake_sql(self, max_concurrency: int, always: bool = False) -> str:
        """The statement that notifies the store's channel at commit: if a claim could then
        take a step, with the functions of steps_postgres.py; without them, or ``always``,
        whatever the state."""
        if not self._steps_ready:
            return f"SELECT pg_notify('{self._channel}', '')"
        if always:
            return (f"SELECT pg_notify('{self._channel}', '') "
                    "WHERE EXISTS (SELECT 1 FROM idle_listener)")
        virtual = "true" if self._virtual else "false"
        return f"SELECT refsched_wake({virtual}, '{self._channel}', {int(max_concurrency)})"

    @property
    def has_steps(self) -> bool:
        return self._steps_ready

    def call(self, step: str, *args: Any) -> list[Row] | None:
        """``refsched_<step>(lock, virtual clock, channel, *args)``: one statement, one
        transaction, one round trip (``steps_postgres.py``)."""
        if not self._steps_ready:
            return None
        params = (self._lock_key, self._virtual, self._channel, *args)
        sql = f"SELECT * FROM refsched_{step}({', '.join(['%s'] * len(params))})"
        with self._server_errors():
            for tries in itertools.count(1):
                conn = self._idle_conn()
                try:
                    rows: list[Row] = conn.execute(sql, params).fetchall()
                    return rows
                except self._psycopg.Error as e:
                    # Two steps that lock rows under the shared lock may each wait for the
                    # other (a deadlock the server breaks by aborting one): the aborted call's
                    # transaction was rolled back whole, so it is sent again as it was.
                    sqlstate = getattr(getattr(e, "diag", None), "sqlstate", None)
                    if sqlstate not in _RETRIED or tries >= _CALL_TRIES:
                        raise
                finally:
                    self._release(conn)
        raise AssertionError("unreachable")

    def _idle_conn(self) -> Any:
        """A pooled connection on which the server has said nothing since its last statement.

        A call commits with its one statement, so it cannot be sent again when the connection
        breaks under it, as a BEGIN can (:meth:`_sent`). A server that ended the session (a
        restart, ``pg_terminate_backend``) has told the idle connection so, or closed it:
        its socket is readable. Such a connection is closed, and another taken."""
        for _ in range(self._pool.max_size + 1):
            conn = self._getconn()
            ready, _, _ = select.select([conn.pgconn.socket], [], [], 0)
            if not ready:
                return conn
            with contextlib.suppress(Exception):
                conn.close()
            self._pool.putconn(conn)  # a closed connection leaves the pool
        raise self._psycopg.OperationalError("every pooled connection was ended by the server")

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
        self.clock_sql = _VIRTUAL_NOW
        self._begin_write = self._begin_lock

    def use_wall_clock(self) -> None:
        self.clock_sql = _WALL_NOW
        self._begin_write = f"{self._begin_lock}; SELECT {_WALL_NOW}"

    def _getconn(self) -> Any:
        """A pooled connection, waiting up to ``connect_timeout`` seconds for one. The wait is
        asked for a second at a time: each ask that finds none lets the pool start a new
        series of connection tries once its last one gave up (see ``reconnect_window``), so a
        step waiting through an outage connects within seconds of the server's return."""
        from psycopg_pool import PoolTimeout
        deadline = time.monotonic() + self._connect_timeout
        while True:
            try:
                return self._pool.getconn(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except PoolTimeout:
                if time.monotonic() >= deadline:
                    raise

    def _release(self, conn: Any) -> None:
        """Back to the pool, after ending a transaction left open by an error."""
        if not conn.broken and conn.info.transaction_status != 0:  # not idle
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
        self._pool.putconn(conn)

    def _sent(self, send: Callable[[Any], _T]) -> tuple[Any, _T]:
        """A pooled connection and what ``send(conn)`` returned.

        No check of a pooled connection on each checkout: a connection that broke while idle
        (the server restarted) fails ``send`` before anything reached the server, so ``send``
        is tried once more on another. ``send`` is a step's first statement, or a read."""
        for again in (True, False):
            conn = self._getconn()
            try:
                return conn, send(conn)
            except self._psycopg.OperationalError:
                broken = conn.broken
                self._release(conn)
                if not (again and broken):
                    raise
            except BaseException:
                self._release(conn)
                raise
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def _server_errors(self) -> Iterator[None]:
        """A failure of the server or of the connection to it, as a ``StoreError``."""
        try:
            yield
        except self._psycopg.Error as e:
            raise _store_error(self._safe_url(), e) from None
        except Exception as e:
            if type(e).__module__.startswith("psycopg_pool"):  # PoolTimeout, PoolClosed
                raise StoreError(f"{self._safe_url()}: no connection to the server: "
                                 f"{e}") from None
            raise

    @contextlib.contextmanager
    def transaction(self, write: bool = True, first: str | None = None) -> Iterator[Tx]:
        # The store's one writer at a time: the steps commit in the order they run. In a string
        # of several statements each one reads the state as of its own start (READ COMMITTED),
        # so what follows the lock sees every step committed before it.
        begin = self._begin_write if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        if first is not None:
            begin = f"{begin}; {first}"
        with self._server_errors():
            conn, cur = self._sent(lambda conn: conn.cursor().execute(begin))
            try:
                now = None
                if write:
                    cur.nextset()  # the lock's (void) row
                    if self.clock_sql == _WALL_NOW:  # the clock, read once the lock was granted
                        cur.nextset()
                        now = float(cur.fetchone()[0])
                tx = _PostgresTx(conn, cur, self.clock_sql, now, self._wake_sql)
                if first is not None:
                    cur.nextset()
                    tx.first = cur.fetchone()
                yield tx
                tx.fit_slots = write and self._slots_ready and not tx.untouched
                tx.commit()
            finally:
                self._release(conn)  # rolled back first if the block raised

    def read(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """One pipeline: BEGIN (REPEATABLE READ, READ ONLY), the queries, COMMIT; a single
        query is sent alone (one statement reads one state by itself). Reads change nothing,
        so one sent on a connection that broke while idle is sent again on another."""
        statements = [(_dialect(sql), tuple(params)) for sql, params in queries]

        def send(conn: Any) -> list[list[Row]]:
            if len(statements) == 1:
                return [conn.cursor().execute(*statements[0]).fetchall()]
            cursors = [conn.cursor() for _ in statements]
            with conn.pipeline():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                for cur, statement in zip(cursors, statements, strict=True):
                    cur.execute(*statement)
                conn.execute("COMMIT")
            return [cur.fetchall() for cur in cursors]

        with self._server_errors():
            conn, rows = self._sent(send)
            self._pool.putconn(conn)
        return rows

    def wait_for_work(self, timeout: float, max_concurrency: int | None = None) -> bool:
        """Wait on the store's channel; a dropped connection is reopened on the next wait.

        Steps notify only while a worker is idle (a transaction that notifies commits under a
        database-wide lock): the first wait after :meth:`busy` writes the listener's row of
        ``idle_listener`` under the store's lock (``refsched_idle``), and returns True at once
        if what the steps committed before it can be claimed, or comes due within ``timeout``
        (the caller's last look may have missed it); steps after it see the row."""
        end = time.monotonic() + timeout
        with self._listener_lock:
            try:
                if self._listener is None or self._listener.closed:
                    self._idle = False
                    self._listener = self._psycopg.connect(self._conninfo, autocommit=True,
                                                           connect_timeout=max(1, int(timeout)))
                    self._listener.execute(self._set_path)
                    self._listener.execute(self._listen)
                if not self._idle and self._steps_ready and max_concurrency is not None:
                    try:
                        (found,) = self._listener.execute(
                            "SELECT refsched_idle(%s, %s, %s, %s)",
                            (self._lock_key, self._virtual, int(max_concurrency),
                             float(timeout))).fetchone()
                    except self._psycopg.errors.LockNotAvailable:
                        return False  # the lock was held the whole wait: the next one tries
                    self._idle = True
                    if found:
                        return True
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

    def busy(self) -> None:
        """The caller took work: its listener's row leaves ``idle_listener``, and the steps
        stop notifying for it. (Kept while another thread waits on the listener.)"""
        if not self._idle or not self._listener_lock.acquire(blocking=False):
            return
        try:
            self._idle = False
            if self._listener is not None and not self._listener.closed:
                self._listener.execute("DELETE FROM idle_listener WHERE pid = pg_backend_pid()")
        except self._psycopg.Error:  # its session is gone: the next wait removes the row
            with contextlib.suppress(Exception):
                self._listener.close()
            self._listener = None
        finally:
            self._listener_lock.release()

    def forget_wakeups(self) -> None:
        """Read and drop the notifications that arrived while the worker was busy: each one
        woke the next wait at once, for a look that found what the last look had taken.
        (Skipped while another thread waits on the listener: a stale wake costs a look.)"""
        if not self._listener_lock.acquire(blocking=False):
            return
        try:
            if self._listener is not None and not self._listener.closed:
                for _ in self._listener.notifies(timeout=0.0):
                    pass
        except self._psycopg.Error:  # the next wait opens a new one
            with contextlib.suppress(Exception):
                self._listener.close()
            self._listener = None
        finally:
            self._listener_lock.release()

    def close(self) -> None:
        with self._listener_lock:
            if self._listener is not None:
                with contextlib.suppress(Exception):
                    if self._idle:  # else steps notify for it until the next worker idles
                        self._listener.execute(
                            "DELETE FROM idle_listener WHERE pid = pg_backend_pid()")
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
