"""Shared test configuration: Hypothesis profiles.

``ci`` (chosen when CI is set) runs more examples; ``dev`` keeps local runs quick. Failures print
the blob that replays them (``@reproduce_failure``), and the seed is printed with ``-s``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from tests.pgserver import PostgresCluster

settings.register_profile(
    "ci", max_examples=300, stateful_step_count=40, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=100, stateful_step_count=30, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# -- A real PostgreSQL server (tests/pgserver.py) ---------------------------------------------
# Only tests that ask for these fixtures start (or attach to) a server. In CI, .ci/run starts one
# and names it in REFSCHED_TEST_PGDATA / REFSCHED_TEST_PGHOST; elsewhere the session starts its own
# in a temporary directory. No server: the tests are skipped, but under CI=true they fail.

_pg_database_numbers = itertools.count(1)


def _postgres_unavailable(reason: object) -> NoReturn:
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"no PostgreSQL server (required when CI=true): {reason}")
    pytest.skip(f"no PostgreSQL server: {reason}")


def _import_pgserver() -> type[PostgresCluster]:
    try:
        import psycopg  # noqa: F401  (the SQL helpers and the tests need it)

        from tests.pgserver import PostgresCluster
    except ImportError as exc:
        _postgres_unavailable(exc)
    return PostgresCluster


@contextlib.contextmanager
def own_postgres_cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own in a temporary directory, started, then stopped and removed."""
    cluster_type = _import_pgserver()
    base = tempfile.mkdtemp(prefix="refsched-pg-")
    cluster = cluster_type(base)
    try:
        try:
            cluster.start()
        except Exception as exc:
            _postgres_unavailable(exc)
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop()
        if cluster.running:
            with contextlib.suppress(Exception):
                cluster.kill()
        shutil.rmtree(base, ignore_errors=True)


def cluster_of_its_own() -> Any:
    """A ``postgres_cluster`` fixture for a test module that stops, restarts or kills the server:
    a cluster for that module alone, so that tests running beside it (pytest-xdist) keep theirs.
    The module overrides the session's fixture with it: ``postgres_cluster = cluster_of_its_own()``.
    """
    @pytest.fixture(scope="module")
    def postgres_cluster() -> Iterator[PostgresCluster]:
        with own_postgres_cluster() as cluster:
            yield cluster

    return postgres_cluster


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A running :class:`pgserver.PostgresCluster` for the whole session, shared by every test
    (and every pytest-xdist worker). A test module that stops, restarts or kills the server
    overrides this fixture with :func:`own_postgres_cluster`, so that it never takes the server
    from under tests running beside it."""
    cluster_type = _import_pgserver()
    attached = cluster_type.from_env()
    if attached is not None:
        try:
            attached.start()  # no-op when running, as it should be
        except Exception as exc:
            _postgres_unavailable(exc)
        yield attached
        return
    with own_postgres_cluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """The URL of a fresh database (``test_<pid>_<n>``), dropped after the test."""
    if not postgres_cluster.running:  # an earlier test stopped or killed it
        postgres_cluster.start()
    name = f"test_{os.getpid()}_{next(_pg_database_numbers)}"
    url: str = postgres_cluster.create_database(name)
    yield url
    with contextlib.suppress(Exception):
        if not postgres_cluster.running:
            postgres_cluster.start()
        postgres_cluster.drop_database(name)  # terminates its backends first


StoreURL = Callable[[str], str]  # a store's name -> the URL of that store


def sqlite_stores(folder: Path) -> StoreURL:
    """Stores as SQLite files in ``folder``."""
    return lambda name="s.db": f"sqlite:///{folder / name}"


def postgres_stores(database_url: str) -> StoreURL:
    """Stores as schemas of one PostgreSQL database: the name ``s.db`` is the schema ``s_db``."""
    def url(name: str = "s.db") -> str:
        schema = "".join(c if c.isalnum() else "_" for c in name.lower())
        return f"{database_url}{'&' if '?' in database_url else '?'}schema={schema}"
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreURL:
    """The URL of a fresh durable store by name, on each kind of store: a SQLite file, and a
    schema of a database on a real PostgreSQL server."""
    if request.param == "sqlite":
        return sqlite_stores(tmp_path)
    return postgres_stores(request.getfixturevalue("postgres_url"))


_STORE_TABLES = ("meta", "task", "dep", "step", "schedule", "slot", "input_summary",
                 "past_version", "refusal", "counter", "run_slot")


def postgres_factory(database_url: str) -> Callable[..., Any]:
    """A ``DurableScheduler`` factory for replay and lock-step, which name a SQLite file: each
    call makes a fresh store in the schema ``store`` of the PostgreSQL database instead, after
    emptying the one the previous call made. Emptied, not dropped, and every scheduler on one
    open store: thousands of replayed traces would spend most of their time creating tables and
    starting server sessions (each new session reads the catalogue anew). The meta rows a new
    store of the same settings was created with are put back in the same statement, so the
    scheduler opens a store as it was created rather than creating it again (a round trip for
    each table and index)."""
    import psycopg

    from refsched.durable import DurableScheduler
    from refsched.durable.urls import open_store

    url = postgres_stores(database_url)("store")
    # Replay and lock-step check what each step does, not that it survives a crash (the fault
    # tests do): commits here do not wait for the disk, the emptying of a store's neither.
    conn = psycopg.connect(database_url, autocommit=True, options="-c synchronous_commit=off")
    # a store an older schema version made, and the meta rows of its new stores
    conn.execute("DROP SCHEMA IF EXISTS store CASCADE; DROP SCHEMA IF EXISTS store_meta CASCADE;"
                 "CREATE SCHEMA store_meta")
    store = open_store(f"{url}&options=-c%20synchronous_commit%3Doff")

    made = itertools.count()
    created: dict[str, str] = {}  # the arguments of a new store -> the table of its meta rows

    def fresh(_sqlite_url: str, *args: Any, **kwargs: Any) -> DurableScheduler:
        settings = repr((args, sorted(kwargs.items())))
        if created or conn.execute("SELECT to_regclass('store.meta')").fetchone()[0]:
            empty = "".join(f"DELETE FROM store.{table};" for table in _STORE_TABLES)
            if settings in created:
                empty += f"INSERT INTO store.meta SELECT * FROM {created[settings]};"
            conn.execute(empty)
            if next(made) % 64 == 63:  # the deleted rows, before every query scans them
                conn.execute(f"VACUUM {', '.join(f'store.{t}' for t in _STORE_TABLES)}")
        scheduler = DurableScheduler(store, *args, **kwargs)
        if settings not in created:
            table = created[settings] = f"store_meta.m{len(created)}"
            conn.execute(f"CREATE TABLE {table} AS SELECT * FROM store.meta")
        return scheduler

    return fresh


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    """Worker processes a test starts (append them): whatever is left running at its end is
    resumed if paused, killed and reaped."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
            p.communicate(timeout=30)


# -- refsched.sync.acquire's hand-off (tests/test_sync.py, tests/test_wakeups_sync.py) ---------

@pytest.fixture
def lock_let_go_at_the_yield(monkeypatch: pytest.MonkeyPatch
                             ) -> tuple[threading.Lock, list[float]]:
    """A held lock whose holder lets it go when ``sync.acquire`` yields its turn (its
    ``_sleep``), and the list of the yields made (the seconds asked for each)."""
    from refsched import sync

    lock = threading.Lock()
    lock.acquire()
    yields: list[float] = []

    def holder_runs(seconds: float) -> None:  # the turn handed over: the holder lets go
        yields.append(seconds)
        lock.release()

    monkeypatch.setattr(sync, "_sleep", holder_runs)
    return lock, yields


# -- TLC's state graphs, dumped once per run (tests/tlc_dumps.py) -------------------------------

@pytest.fixture(scope="session", autouse=True)
def _tlc_dumps_once_per_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from refsched.verify import stategraph
    from tests.tlc_dumps import dumping_once

    base = tmp_path_factory.getbasetemp()
    # the workers of pytest-xdist have folders of their own in the run's folder
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "tlc-dumps"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stategraph, "dump_state_graph", dumping_once(folder))
        yield
