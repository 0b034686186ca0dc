"""The durable scheduler against the queue a user would pick instead, with real worker processes.

- flat: N no-op tasks through 4 worker processes, from the first submit to the last result:
  refsched's SQLite store with ``refsched worker`` against Huey's ``SqliteHuey`` with
  ``huey_consumer -w 4 -k process`` (its documented multi-process consumer);
- dag: a layered DAG of N tasks through 4 durable worker processes running 4 functions at once
  each, against the in-memory Runner on as many threads (16): the cost of durability;
- claims: claims per second of the store, one process claiming and completing in a loop.

On PostgreSQL (one server for every contender: a throwaway cluster of tests/pgserver.py, or the
server whose base URL REFSCHED_BENCH_POSTGRES gives), each run in a database of its own:

- flat: the same N no-op jobs through 4 worker processes running 4 at once each: refsched's
  PostgreSQL store with ``refsched worker --concurrency 4`` against Procrastinate
  (bench/procrastinate_tasks.py, ``procrastinate worker --concurrency 4``), PgQueuer
  (bench/pgqueuer_tasks.py, ``max_concurrent_tasks=4``) and Graphile Worker
  (bench/graphile/worker.js, ``concurrency: 4``), each completion written alone, and again with
  each side's batching (refsched: ``--report-delay 0.01 --prefetch 4``; PgQueuer: dequeue and
  completion-log batches of 2; Graphile Worker: a local queue of 5 and batched completions);
  every clock stops when the bench process, polling the store, sees the last job done;
- dag: the layered DAG through 4 ``refsched worker --concurrency 4`` processes, on PostgreSQL
  and on SQLite, against the in-memory Runner on 16 threads;
- claims: claims per second over a whole run of 4, 8 or 16 processes claiming 8 at a time and
  completing.

Each contender starts its workers before the clock starts and stops them after it stops.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOOP = "refsched.durable.jobs:noop"
POLL = 0.005  # how often the bench process asks a PostgreSQL store whether the last job is done
ENV_POSTGRES = "REFSCHED_BENCH_POSTGRES"
# The longest one run of a contender may take, from its first submit; past it the run fails with
# TimeoutError (its row says so) instead of holding up the benchmark.
RUN_TIMEOUT = 900.0
# The longest worker processes may take to come up, or to exit once asked.
START_TIMEOUT = 120.0


def _wait_until(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.002)


def _kill_left(processes: Sequence[subprocess.Popen[Any]]) -> None:
    """Kill and reap the processes still running: a run that failed leaves none behind."""
    for p in processes:
        if p.poll() is None:
            p.kill()
            p.wait()


def _through_workers(tasks: dict[str, list[str]], processes: int,
                     server: PostgresServer | None = None, start_first: bool = False,
                     bulk: bool = False, worker_args: Sequence[str] = (),
                     max_concurrency: int | None = None) -> float:
    """Seconds from the first submit of ``tasks`` (id -> deps) to the last completion, through
    ``processes`` worker processes started beforehand.

    On SQLite the clock stops when the last worker has exited (``--until-done``); on PostgreSQL
    (``server``) when the bench process, polling the store every 5 ms, sees every version ended,
    which is how the Procrastinate side is timed; the workers exit after that, off the clock.
    ``start_first``: ``start()`` before the clock, so that each submit is claimable at once, as a
    queue's enqueue is (otherwise the clock covers every submit, then ``start()``). ``bulk``: the
    tasks go in with one ``submit_many()`` call (one transaction), not one ``submit()`` each.
    ``worker_args``: more options of each ``refsched worker``; ``max_concurrency``: the store's
    (default ``processes``).
    """
    from refsched.durable import DurableScheduler

    folder: Path | None = None
    if server is None:
        folder = Path(tempfile.mkdtemp(prefix="refsched-bench-"))
        url = f"sqlite:///{folder / 'store.db'}"
    else:
        url = server.database("refsched")
    db = DurableScheduler(url, max_concurrency=max_concurrency or processes)
    # Started first, an empty store is done at once: those workers run until SIGTERM instead.
    until_done = [] if start_first else ["--until-done"]
    workers = [subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url,
                                 *until_done, "--poll", "0.02", *worker_args], cwd=ROOT)
               for _ in range(processes)]
    try:
        if start_first:
            db.start()
        if server is None:
            time.sleep(1.0)  # the workers are up and polling
        else:
            server.wait_for_clients(url, processes)
        began = time.perf_counter()
        if bulk:
            db.submit_many([{"id": t, "deps": deps, "fn": NOOP} for t, deps in tasks.items()])
        else:
            for t, deps in tasks.items():
                db.submit(t, deps, fn=NOOP)
        if not start_first:
            db.start()
        end = time.monotonic() + RUN_TIMEOUT
        if server is None:
            for w in workers:
                try:
                    w.wait(max(0.1, end - time.monotonic()))
                except subprocess.TimeoutExpired as e:
                    raise TimeoutError(f"the durable workers did not finish {len(tasks)} tasks "
                                       f"in {RUN_TIMEOUT:g} s") from e
        elif not db.wait(RUN_TIMEOUT, poll=POLL):
            raise TimeoutError(f"the durable workers did not finish {len(tasks)} tasks in "
                               f"{RUN_TIMEOUT:g} s")
        elapsed = time.perf_counter() - began
        for w in workers:
            if start_first:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            w.wait(START_TIMEOUT)
        assert db.stats().succeeded == len(tasks)
        return elapsed
    finally:
        _kill_left(workers)
        db.release()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        if server is not None:
            server.drop(url)


def durable_flat(n: int, processes: int = 4) -> float:
    """Seconds from the first submit to the last completion of ``n`` independent tasks."""
    return _through_workers({f"t{i}": [] for i in range(n)}, processes)


def huey_flat(n: int, processes: int = 4) -> float:
    """The same through Huey's SQLite storage and its process consumer.

    Huey's worker loses a task it has taken off the queue when its store answers "database is
    locked" before the task runs (it logs "Unhandled error during execution of task"): that
    task never runs and its result never comes. Its storage is given the busy timeout of
    refsched's store (60 s, not its 5 s) so that it waits for the lock as refsched does, and the
    wait for the results shares one deadline (RUN_TIMEOUT): a lost task fails the run with a
    TimeoutError saying how many results are missing, instead of a wait of 600 s per result.
    """
    from huey.exceptions import HueyException

    folder = Path(tempfile.mkdtemp(prefix="refsched-bench-huey-"))
    env = {**os.environ, "HUEY_DB": str(folder / "huey.db"), "PYTHONPATH": str(HERE)}
    os.environ["HUEY_DB"] = env["HUEY_DB"]
    sys.path.insert(0, str(HERE))
    import importlib

    import huey_tasks
    huey_tasks = importlib.reload(huey_tasks)
    # Its own process group: the consumer's worker processes are stopped with it.
    consumer = subprocess.Popen(
        [str(Path(sys.executable).parent / "huey_consumer"), "huey_tasks.huey", "-w",
         str(processes), "-k", "process", "-d", "0.01", "-m", "0.05", "-q"],
        cwd=folder, env=env, start_new_session=True)
    try:
        time.sleep(1.0)
        _check_alive([consumer], "Huey")
        began = time.perf_counter()
        results = [huey_tasks.noop() for _ in range(n)]
        end = time.monotonic() + RUN_TIMEOUT
        for i, r in enumerate(results):
            try:
                r.get(blocking=True, timeout=max(0.1, end - time.monotonic()))
            except HueyException as e:
                missing = sum(1 for r in results[i:] if r.get() is None)
                raise TimeoutError(f"{missing} of {n} Huey results missing after "
                                   f"{RUN_TIMEOUT:g} s ({type(e).__name__})") from e
        return time.perf_counter() - began
    finally:
        _stop_group(consumer)
        shutil.rmtree(folder, ignore_errors=True)


def _stop_group(leader: subprocess.Popen[Any]) -> None:
    """SIGINT the process group ``leader`` heads (Huey's consumer stops gracefully on it), then
    SIGKILL the group after 30 s; reap the leader."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader.pid, signal.SIGKILL)
    leader.wait()


def _layered(n: int, width: int = 100) -> dict[str, list[str]]:
    """A layered DAG of ``n`` tasks: each depends on two tasks of the layer before."""
    names = [f"t{i}" for i in range(n)]
    deps: dict[str, list[str]] = {}
    for i, t in enumerate(names):
        layer, k = divmod(i, width)
        if layer == 0:
            deps[t] = []
        else:
            before = (layer - 1) * width
            deps[t] = sorted({names[before + k], names[before + (k + 1) % width]})
    return deps


DAG_THREADS = 4  # functions each worker process of the DAG rows runs at once


def durable_dag(n: int, processes: int = 4) -> float:
    """A layered DAG of ``n`` no-op tasks through ``processes`` durable worker processes running
    ``DAG_THREADS`` at once each (the store's ``max_concurrency`` is all of them), submitted
    with one ``submit_many()``: submit to done."""
    return _through_workers(_layered(n), processes, bulk=True,
                            worker_args=("--concurrency", str(DAG_THREADS)),
                            max_concurrency=processes * DAG_THREADS)


def runner_dag(n: int, processes: int = 4) -> float:
    """The same DAG on the in-memory Runner with as many threads as the worker processes run
    functions at once: no durability."""
    from refsched import Runner

    def noop() -> int:
        return 1

    began = time.perf_counter()
    with Runner(max_workers=processes * DAG_THREADS) as runner:
        for t, deps in _layered(n).items():
            runner.submit(t, noop, deps)
        runner.start()
        if not runner.wait(600):
            raise TimeoutError("the Runner did not finish")
    return time.perf_counter() - began


def claims_per_second(n: int = 5_000) -> float:
    """Claims the store hands out per second to one process that claims and completes."""
    from refsched.durable import DurableScheduler

    folder = Path(tempfile.mkdtemp(prefix="refsched-bench-"))
    db = DurableScheduler(f"sqlite:///{folder / 'store.db'}", max_concurrency=8)
    try:
        for i in range(n):
            db.submit(f"t{i}", fn=NOOP)
        db.start()
        claims = 0
        began = time.perf_counter()
        while leases := db.claim("bench", limit=8):
            claims += len(leases)
            for lease in leases:
                db.complete(lease, 1)
        elapsed = time.perf_counter() - began
        assert claims == n
        return n / elapsed
    finally:
        db.release()
        shutil.rmtree(folder, ignore_errors=True)



# -- PostgreSQL ------------------------------------------------------------------------------

class PostgresServer:
    """The PostgreSQL server of the PostgreSQL rows, one database per run.

    :meth:`up` uses the server whose base URL (a database to connect to for ``CREATE DATABASE``)
    is in REFSCHED_BENCH_POSTGRES, or else starts a throwaway cluster of tests/pgserver.py in a
    temporary folder; :meth:`down` stops that cluster and removes the folder.
    """

    def __init__(self, base_url: str, cluster: Any = None, folder: Path | None = None) -> None:
        self.base_url = base_url
        self.cluster = cluster
        self.folder = folder
        self._made = 0
        self.version = "?"

    @classmethod
    def up(cls) -> PostgresServer:
        """A server to use; raises RuntimeError saying why there is none."""
        try:
            import psycopg  # noqa: F401
        except ImportError as e:
            raise RuntimeError(
                f"psycopg is not installed ({e}): pip install -e '.[postgres]'") from e
        base = os.environ.get(ENV_POSTGRES)
        if base:
            server = cls(base)
        else:
            if str(ROOT) not in sys.path:
                sys.path.insert(0, str(ROOT))
            from tests.pgserver import PostgresCluster, PostgresUnavailable

            folder = Path(tempfile.mkdtemp(prefix="rs-bench-pg-"))
            cluster = PostgresCluster(folder)
            try:
                cluster.start()
            except (PostgresUnavailable, OSError, subprocess.SubprocessError) as e:
                cluster.stop() if cluster.running else None
                shutil.rmtree(folder, ignore_errors=True)
                raise RuntimeError(f"no PostgreSQL server could be started: {e}") from e
            server = cls(cluster.base_url, cluster, folder)
        try:
            server.version = server._query(server.base_url, "SHOW server_version")[0][0]
        except Exception as e:
            server.down()
            raise RuntimeError(f"cannot reach PostgreSQL at {server.base_url}: {e}") from e
        return server

    def describe(self) -> str:
        where = ("a throwaway cluster (tests/pgserver.py: unix socket, fsync on)"
                 if self.cluster is not None else f"the server of {ENV_POSTGRES}")
        return f"PostgreSQL {self.version}, {where}"

    def down(self) -> None:
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    @staticmethod
    def _query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def url(self, dbname: str) -> str:
        return urlunsplit(urlsplit(self.base_url)._replace(path=f"/{dbname}"))

    def database(self, prefix: str) -> str:
        """A new, empty database; its URL."""
        self._made += 1
        name = f"bench_{prefix}_{os.getpid()}_{self._made}"
        self._query(self.base_url, f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with contextlib.suppress(Exception):
            self._query(self.base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_for_clients(self, url: str, clients: int, timeout: float = START_TIMEOUT,
                         workers: Sequence[subprocess.Popen[Any]] = ()) -> None:
        """Until ``clients`` other connections are open on ``url``'s database (the workers are up
        and waiting for work), then a second more for them to settle into it. One of ``workers``
        exiting meanwhile fails the wait at once."""
        name = urlsplit(url).path.lstrip("/")
        sql = ("SELECT count(DISTINCT pid) FROM pg_stat_activity WHERE datname = %s "
               "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")

        def up() -> bool:
            _check_alive(workers, "starting")
            return bool(self._query(self.base_url, sql, (name,))[0][0] >= clients)

        _wait_until(up, timeout)
        time.sleep(1.0)


# The worker options of the two flat PostgreSQL rows: every report its own transaction, or the
# worker's batching (reports sent together within 10 ms, 4 claimed ahead into a local queue).
EACH_REPORT = ("--report-delay", "0")
BATCHED = ("--report-delay", "0.01", "--prefetch", "4")


def durable_flat_postgres(server: PostgresServer, n: int, processes: int = 4,
                          concurrency: int = 4, options: Sequence[str] = EACH_REPORT) -> float:
    """``n`` independent no-op tasks through ``processes`` ``refsched worker --concurrency
    concurrency`` processes with ``options``; the store is started before the clock, so that
    each submit is claimable at once, as each of the peers' enqueues is."""
    prefetch = int(options[options.index("--prefetch") + 1]) if "--prefetch" in options else 0
    return _through_workers({f"t{i}": [] for i in range(n)}, processes, server, start_first=True,
                            worker_args=("--concurrency", str(concurrency), *options),
                            max_concurrency=processes * (concurrency + prefetch))


def durable_flat_postgres_batched(server: PostgresServer, n: int) -> float:
    return durable_flat_postgres(server, n, options=BATCHED)


def durable_dag_postgres(server: PostgresServer, n: int, processes: int = 4) -> float:
    """The layered DAG of ``n`` tasks through ``processes`` ``refsched worker`` processes running
    ``DAG_THREADS`` at once each, submitted with one ``submit_many()`` (one call of the
    server's function)."""
    return _through_workers(_layered(n), processes, server, bulk=True,
                            worker_args=("--concurrency", str(DAG_THREADS)),
                            max_concurrency=processes * DAG_THREADS)


def procrastinate_flat(server: PostgresServer, n: int, processes: int = 4,
                       concurrency: int = 4) -> float:
    """``n`` no-op jobs through Procrastinate: ``noop.defer()`` each from a synchronously opened
    app, ``processes`` ``procrastinate worker --concurrency concurrency`` processes
    (LISTEN/NOTIFY on, as by default); the clock stops when the job table says the last one
    succeeded."""
    import importlib

    import psycopg

    url = server.database("procrastinate")
    env = {**os.environ, "PROCRASTINATE_BENCH_DSN": url, "PYTHONPATH": str(HERE)}
    os.environ["PROCRASTINATE_BENCH_DSN"] = url
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import procrastinate_tasks
    tasks = importlib.reload(procrastinate_tasks)
    cli = [str(Path(sys.executable).parent / "procrastinate"), "--app=procrastinate_tasks.app"]
    subprocess.run([*cli, "schema", "--apply"], env=env, cwd=HERE, check=True,
                   stdout=subprocess.DEVNULL)
    # Its CLI logs every job at INFO on stderr by default; that stays on, sent nowhere.
    workers = [subprocess.Popen([*cli, "worker", "--concurrency", str(concurrency)], env=env,
                                cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(processes)]
    watch = psycopg.connect(url, autocommit=True)
    done_sql = ("SELECT count(*) FILTER (WHERE status = 'succeeded'), "
                "count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'aborted')) "
                "FROM procrastinate_jobs")
    try:
        server.wait_for_clients(url, processes, workers=workers)
        with tasks.app.open():
            began = time.perf_counter()
            for _ in range(n):
                tasks.noop.defer()
            end = time.monotonic() + RUN_TIMEOUT
            while True:
                succeeded, failed = watch.execute(done_sql).fetchone() or (0, 0)
                if failed:
                    raise RuntimeError(f"{failed} Procrastinate jobs did not succeed")
                if succeeded >= n:
                    break
                _check_alive(workers, "Procrastinate")
                if time.monotonic() > end:
                    raise TimeoutError(f"the Procrastinate workers did not finish {n} jobs in "
                                       f"{RUN_TIMEOUT:g} s ({succeeded} done)")
                time.sleep(POLL)
            elapsed = time.perf_counter() - began
        return elapsed
    finally:
        watch.close()
        stop(workers)
        server.drop(url)


def _drain_peer(server: PostgresServer, url: str, n: int, processes: int,
                workers: list[subprocess.Popen[Any]], enqueue: Callable[[Any], None],
                done_sql: str, name: str) -> float:
    """Seconds from the first of ``n`` enqueues (``enqueue(connection)``, one statement each on
    one autocommit connection) to the moment the bench process, polling the store every 5 ms,
    sees ``done_sql`` (``(jobs left, jobs failed)``) give no job left. The ``workers`` are up and
    connected before the clock; a worker that exits, a failed job or RUN_TIMEOUT fails the run."""
    import psycopg

    server.wait_for_clients(url, processes, workers=workers)
    with psycopg.connect(url, autocommit=True) as conn, \
            psycopg.connect(url, autocommit=True) as watch:
        began = time.perf_counter()
        for _ in range(n):
            enqueue(conn)
        end = time.monotonic() + RUN_TIMEOUT
        while True:
            left, failed = watch.execute(done_sql).fetchone() or (0, 0)
            if failed:
                raise RuntimeError(f"{failed} {name} jobs failed")
            if not left:
                return time.perf_counter() - began
            _check_alive(workers, name)
            if time.monotonic() > end:
                raise TimeoutError(f"the {name} workers did not finish {n} jobs in "
                                   f"{RUN_TIMEOUT:g} s ({left} left)")
            time.sleep(POLL)


def _check_alive(workers: Sequence[subprocess.Popen[Any]], name: str) -> None:
    for w in workers:
        if w.poll() is not None:
            raise RuntimeError(f"a {name} worker process exited with status {w.returncode}")


# PgQueuer: the most jobs a worker process runs at once (--max-concurrent-tasks, a hard cap
# enforced by its dequeue query), and the batch sizes of its two rows. PgQueuer requires the cap
# to be at least twice the batch size, so 4 at once allows batches of at most 2.
PGQUEUER_BATCH_EACH = 1
PGQUEUER_BATCH_BATCHED = 2


def pgqueuer_flat(server: PostgresServer, n: int, processes: int = 4, concurrency: int = 4,
                  batched: bool = False) -> float:
    """``n`` no-op jobs through PgQueuer (bench/pgqueuer_tasks.py): ``processes`` processes of
    ``PgQueuer.run(max_concurrent_tasks=concurrency)``; ``Queries.enqueue`` each job from the
    bench process (``SyncQueries`` on a psycopg connection). Its completion log is flushed every
    ``--batch-size`` completions or 0.1 s: ``--batch-size 1`` (each job fetched and its
    completion written alone), or ``--batch-size 2`` when ``batched``."""
    from pgqueuer.db import SyncPsycopgDriver
    from pgqueuer.queries import SyncQueries

    url = server.database("pgqueuer")
    env = {**os.environ, "PGQUEUER_BENCH_DSN": url, "PYTHONPATH": str(HERE)}
    pgq = str(Path(sys.executable).parent / "pgq")
    batch = PGQUEUER_BATCH_BATCHED if batched else PGQUEUER_BATCH_EACH
    workers: list[subprocess.Popen[Any]] = []
    try:
        subprocess.run([pgq, "--pg-dsn", url, "install"], env=env, cwd=HERE, check=True,
                       stdout=subprocess.DEVNULL, timeout=120)
        # ``pgq run pgqueuer_tasks:main --batch-size B --max-concurrent-tasks C``, as its module
        # says; its stdout (a line per job at INFO) is sent nowhere.
        workers = [subprocess.Popen([sys.executable, "pgqueuer_tasks.py", str(batch),
                                     str(concurrency)],
                                    env=env, cwd=HERE, stdout=subprocess.DEVNULL)
                   for _ in range(processes)]

        queries: dict[int, Any] = {}

        def enqueue_cached(conn: Any) -> None:
            q = queries.get(id(conn))
            if q is None:
                q = queries[id(conn)] = SyncQueries(SyncPsycopgDriver(conn))
            q.enqueue("noop", None)

        return _drain_peer(server, url, n, processes, workers, enqueue_cached,
                           "SELECT (SELECT count(*) FROM pgqueuer), (SELECT count(*) FROM "
                           "pgqueuer_log WHERE status IN ('exception', 'failed', 'canceled'))",
                           "PgQueuer")
    finally:
        stop(workers)
        server.drop(url)


def pgqueuer_flat_batched(server: PostgresServer, n: int) -> float:
    return pgqueuer_flat(server, n, batched=True)


GRAPHILE = HERE / "graphile"


def graphile_version() -> str:
    """The Graphile Worker version bench/graphile/package.json pins."""
    import json

    pinned = json.loads((GRAPHILE / "package.json").read_text())
    return str(pinned["dependencies"]["graphile-worker"])


def ensure_graphile() -> None:
    """Install Graphile Worker into bench/graphile (``npm ci``, from its package-lock.json) when
    that folder has no node_modules; RuntimeError saying why it cannot."""
    if (GRAPHILE / "node_modules" / "graphile-worker").is_dir():
        return
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise RuntimeError("Node.js and npm are needed for Graphile Worker")
    try:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=GRAPHILE, check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
    except (subprocess.SubprocessError, OSError) as e:
        raise RuntimeError(f"npm ci in {GRAPHILE} failed: {e}") from e


def graphile_flat(server: PostgresServer, n: int, processes: int = 4, concurrency: int = 4,
                  batched: bool = False) -> float:
    """``n`` no-op jobs through Graphile Worker (bench/graphile/worker.js): ``processes`` Node
    processes of ``concurrency`` jobs each, its schema migrated first (``graphile-worker
    --schema-only``); ``SELECT graphile_worker.add_job('noop')`` each job from the bench process
    (its SQL API). Graphile Worker deletes a job once it succeeds: the clock stops when its job
    table is empty. ``batched``: a local queue of ``concurrency + 1`` and completions batched
    (``completeJobBatchDelay``/``failJobBatchDelay`` 0)."""
    ensure_graphile()
    url = server.database("graphile")
    node = shutil.which("node") or "node"
    cli = GRAPHILE / "node_modules" / "graphile-worker" / "dist" / "cli.js"
    workers: list[subprocess.Popen[Any]] = []
    try:
        subprocess.run([node, str(cli), "--connection", url, "--schema-only"], cwd=GRAPHILE,
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        # It logs every job at INFO on stdout by default; that stays on, sent nowhere.
        workers = [subprocess.Popen([node, "worker.js", url, str(concurrency),
                                     "batched" if batched else "each"],
                                    cwd=GRAPHILE, stdout=subprocess.DEVNULL)
                   for _ in range(processes)]

        def enqueue(conn: Any) -> None:
            conn.execute("SELECT graphile_worker.add_job('noop')")

        return _drain_peer(server, url, n, processes, workers, enqueue,
                           "SELECT count(*), count(*) FILTER (WHERE last_error IS NOT NULL) "
                           "FROM graphile_worker.jobs", "Graphile Worker")
    finally:
        stop(workers)
        server.drop(url)


def graphile_flat_batched(server: PostgresServer, n: int) -> float:
    return graphile_flat(server, n, batched=True)


def stop(workers: Sequence[subprocess.Popen[Any]]) -> None:
    """SIGTERM each worker process still running, then reap them all (a kill after 30 s)."""
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.wait(30)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()


_CLAIMER = """
import sys
from refsched.durable import DurableScheduler
db = DurableScheduler(sys.argv[1], create=False)
name = sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
claims = 0
while leases := db.claim(name, limit=8):
    claims += len(leases)
    for lease in leases:
        db.complete(lease, 1)
db.release()
print(claims, flush=True)
"""


def claims_per_second_postgres(server: PostgresServer, n: int = 10_000,
                               processes: int = 16) -> float:
    """Jobs per second over a whole run of ``processes`` processes, each claiming 8 at a time
    and completing each until a claim comes back empty; from the go to the last one's exit."""
    from refsched.durable import DurableScheduler

    url = server.database("claims")
    db = DurableScheduler(url, max_concurrency=8 * processes)
    procs: list[subprocess.Popen[str]] = []
    try:
        for i in range(n):
            db.submit(f"t{i}", fn=NOOP)
        db.start()
        procs = [subprocess.Popen([sys.executable, "-c", _CLAIMER, url, f"bench-{i}"], cwd=ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for i in range(processes)]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        began = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        claims = 0
        for p in procs:
            assert p.stdout is not None
            claims += int(p.stdout.readline())
        elapsed = time.perf_counter() - began
        for p in procs:
            p.wait(60)
        assert claims == n and db.stats().succeeded == n, (claims, n)
        return n / elapsed
    finally:
        _kill_left(procs)
        db.release()
        server.drop(url)

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for _ in range(2):
        ours, theirs = durable_flat(n), huey_flat(n)
        print(f"flat {n}: refsched {ours:.2f} s, huey {theirs:.2f} s, ratio {ours / theirs:.2f}")
