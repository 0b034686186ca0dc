"""The throwaway PostgreSQL server of tests/pgserver.py, through the fixtures of conftest.py.

Skipped when no server can be started here, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from tests.conftest import cluster_of_its_own
from tests.pgserver import PostgresCluster

if os.environ.get("CI") == "true":
    import psycopg  # required there: a missing psycopg fails rather than skips
else:
    psycopg = pytest.importorskip("psycopg")

# This module stops, restarts and kills the server.
postgres_cluster = cluster_of_its_own()


def connect(url: str, **kwargs: object) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(url, connect_timeout=10, options="-c statement_timeout=20000",
                           **kwargs)


def test_round_trip(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql://postgres@/test_")
    assert "?host=/" in postgres_url
    with connect(postgres_url) as conn:
        conn.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
        conn.commit()
        assert conn.execute("SELECT v FROM t ORDER BY k").fetchall() == [("one",), ("two",)]
        assert conn.execute("SELECT current_setting('fsync')").fetchone() == ("on",)
        assert conn.execute("SELECT current_setting('listen_addresses')").fetchone() == ("",)
        assert int(conn.execute("SHOW max_connections").fetchone()[0]) >= 200


@pytest.fixture
def second_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    name = f"test_second_{time.monotonic_ns()}"
    url = postgres_cluster.create_database(name)
    yield url
    postgres_cluster.drop_database(name)


def test_databases_are_separate(postgres_url: str, second_url: str) -> None:
    assert postgres_url != second_url
    with connect(postgres_url) as a, connect(second_url) as b:
        a.execute("CREATE TABLE only_in_a (x int)")
        a.commit()
        names = [a.execute("SELECT current_database()").fetchone()[0],
                 b.execute("SELECT current_database()").fetchone()[0]]
        assert names[0] != names[1]
        assert b.execute("SELECT to_regclass('only_in_a')").fetchone() == (None,)
        assert a.execute("SELECT to_regclass('only_in_a')").fetchone() == ("only_in_a",)


def _write_committed(url: str, rows: int) -> None:
    with connect(url) as conn:
        conn.execute("CREATE TABLE kept (k int PRIMARY KEY)")
        conn.execute("INSERT INTO kept SELECT generate_series(1, %s)", (rows,))
        conn.commit()


def _count(url: str) -> int:
    with connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM kept").fetchone()
        assert row is not None
        return int(row[0])


def test_restart_keeps_committed_data(postgres_cluster: PostgresCluster,
                                      postgres_url: str) -> None:
    _write_committed(postgres_url, 100)
    old_conn = connect(postgres_url)
    old_pid = postgres_cluster.pid
    postgres_cluster.restart()
    assert postgres_cluster.running
    assert postgres_cluster.pid != old_pid
    with pytest.raises(psycopg.OperationalError):  # the old connection went with the server
        old_conn.execute("SELECT 1")
    old_conn.close()
    assert _count(postgres_url) == 100


def test_kill_then_start_recovers_committed_data(postgres_cluster: PostgresCluster,
                                                 postgres_url: str) -> None:
    _write_committed(postgres_url, 50)
    # An uncommitted transaction in flight at the crash: it must not survive.
    open_conn = connect(postgres_url)
    open_conn.execute("INSERT INTO kept SELECT generate_series(1001, 1010)")
    postgres_cluster.kill()
    assert not postgres_cluster.running
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(postgres_url, connect_timeout=2)
    with pytest.raises(psycopg.OperationalError):
        open_conn.execute("SELECT 1")
    open_conn.close()
    postgres_cluster.start()
    assert postgres_cluster.running
    assert _count(postgres_url) == 50


def test_terminate_ends_a_live_connection(postgres_cluster: PostgresCluster,
                                          postgres_url: str) -> None:
    dbname = postgres_url.split("/")[3].split("?")[0]
    victim = connect(postgres_url, application_name="victim", autocommit=True)
    bystander = connect(postgres_url, application_name="bystander", autocommit=True)
    victim_pid = victim.info.backend_pid
    # Blocked in a query when terminated: the client sees the error on its current call.
    blocked = connect(postgres_url, application_name="blocked", autocommit=True)
    errors: list[BaseException] = []

    def block() -> None:
        try:
            blocked.execute("SELECT pg_sleep(15)")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=block)
    thread.start()
    deadline = time.monotonic() + 10
    with postgres_cluster.connect(dbname) as probe:
        while not probe.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                "application_name = 'blocked' AND state = 'active'").fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    try:
        assert postgres_cluster.terminate(dbname, application_name="victim") == 1
        with pytest.raises(psycopg.OperationalError):
            victim.execute("SELECT 1")
        assert postgres_cluster.terminate(dbname, pid=blocked.info.backend_pid) == 1
        thread.join(10)
        assert not thread.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], psycopg.OperationalError)
        assert postgres_cluster.terminate(dbname, pid=victim_pid) == 0  # already gone
        assert bystander.execute("SELECT 1").fetchone() == (1,)  # others untouched
    finally:
        for conn in (victim, bystander, blocked):
            conn.close()
