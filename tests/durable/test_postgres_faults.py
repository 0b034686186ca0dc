"""Real faults against the PostgreSQL store: the server restarted and crashed under running
workers, a worker's backends terminated while it holds a lease, sixteen worker processes on one
ready queue, a statement timeout inside a step, a worker on another network namespace cut
off mid-task, and sixteen workers on two other namespaces, one cut off mid-run.

Everything is real: worker processes (``python -m refsched worker``), the throwaway server of
``tests/pgserver.py`` (the ``postgres_cluster`` / ``postgres_url`` fixtures of conftest.py), and
for the last tests a second throwaway server listening on veth pairs. Every wait is bounded; a
regression fails instead of hanging. Task functions log their starts and ends with the pid and
the time (``tests/durable/jobs.py``), and every store is made with ``record=True`` so that
``check_history`` can check each accepted step against the spec.

Skipped when no server can be started here, except under CI=true, where they fail (conftest).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.scheduler import Lease
from refsched.errors import StoreError
from refsched.types import TaskState
from refsched.verify.durable.history import HistoryCheck
from tests.conftest import cluster_of_its_own
from tests.durable.support import (
    JOBS,
    accepted_ends,
    log_lines,
    start_worker,
    started_hanging_task,
    wait_for,
)
from tests.pgserver import PostgresCluster

if os.environ.get("CI") == "true":
    import psycopg  # required there: a missing psycopg fails rather than skips
else:
    psycopg = pytest.importorskip("psycopg")

# This module stops, restarts and kills the server.
postgres_cluster = cluster_of_its_own()



def claims_per_version(db: DurableScheduler) -> dict[str, list[tuple[str, str]]]:
    """``task -> [(Claim or Reclaim, worker), ...]`` from the history.

    A Claim step names only the worker and ``k``: which versions it took is what the spec says
    (the ``k`` ready versions with the smallest seq), so the history is walked with the same
    checker, and a Claim took the versions whose lease record it replaced.
    """
    check = HistoryCheck(db.max_concurrency, db.max_attempts)
    taken: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for action, params in db.history():
        before = {t: id(lease) for t, lease in check.leases.items()}
        check.step(action, params)
        if action == "Claim":
            fresh = [t for t, lease in check.leases.items()
                     if before.get(t) != id(lease) and lease.attempt == 1]
            assert len(fresh) == params["k"], (action, params, fresh)
            for t in fresh:
                taken[t].append(("Claim", params["w"]))
        elif action == "Reclaim":
            taken[params["t"]].append(("Reclaim", params["w"]))
    assert check.problems == []
    return dict(taken)


def dbname_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def finish(p: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    """Wait for a worker to exit; its exit code and stderr."""
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate(timeout=30)
        raise AssertionError(
            f"worker {p.pid} did not exit in {timeout} s; stderr:\n{err}") from None
    return p.returncode, err


# -- 1. the server restarted, then crashed, under running workers ------------------------------

def _advisory_key(schema: str = "refsched") -> int:
    """The store's advisory lock key, as refsched/durable/postgres.py computes it."""
    digest = hashlib.sha256(f"refsched:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _fault_with_writes_in_flight(cluster: PostgresCluster, dbname: str, mine: DurableScheduler,
                                 lease: Lease, blocker: str,
                                 fault: Callable[[], None]) -> tuple[int, str]:
    """Block a complete() of this process, and with it whatever the workers write, then
    ``fault()``: every one of those writes is in flight when the server goes.

    ``blocker`` "advisory lock": another session holds the store's lock, so the complete()
    waits in its first round trip (BEGIN and the lock), before any statement of the step.
    "row lock": another session's open transaction holds the version's row, so the complete()
    holds the store's lock and waits inside the step, after its first statements.
    Returns how many backends were queued on a lock, and what the complete() came to.
    """
    holder = cluster.connect(dbname)
    if blocker == "advisory lock":
        holder.execute("SELECT pg_advisory_lock(%s)", (_advisory_key(),))
    else:
        holder.execute("BEGIN")
        holder.execute("UPDATE refsched.task SET seq = seq WHERE id = %s", (lease.task_id,))
    outcome: dict[str, object] = {}

    def report() -> None:
        try:
            outcome["state"] = mine.complete(lease, "in flight")
        except StoreError as e:
            outcome["error"] = e

    def queued() -> int:
        return int(holder.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'").fetchone()[0])

    thread = threading.Thread(target=report)
    thread.start()
    with contextlib.suppress(AssertionError):  # the workers' writes join when they come
        wait_for(lambda: queued() >= 3, timeout=5)
    waiting = queued()
    assert waiting >= 1  # this process's complete() at least
    fault()
    thread.join(60)
    assert not thread.is_alive()
    with contextlib.suppress(Exception):
        holder.close()
    if "error" in outcome:  # refused: nothing of it was written; the caller retries
        assert mine.info(lease.task_id).state is TaskState.RUNNING
        assert mine.complete(lease, "retried") is TaskState.SUCCEEDED
        return waiting, f"refused ({outcome['error']}), then retried and committed"
    # Waiting for the lock, it had sent nothing of the step: the store began it again on a
    # connection to the new server, and it committed once.
    assert blocker == "advisory lock", outcome
    assert outcome["state"] is TaskState.SUCCEEDED
    return waiting, "begun again by the store on a new connection, committed"


def test_workers_ride_out_a_server_restart_and_a_crash(
        postgres_cluster: PostgresCluster, postgres_url: str, tmp_path: Path,
        workers: list[subprocess.Popen[str]]) -> None:
    log = tmp_path / "log"
    db = DurableScheduler(postgres_url, max_concurrency=5, record=True)
    db.submit("mine0", fn=f"{JOBS}:noop")  # claimed by this process: its reports are in
    db.submit("mine1", fn=f"{JOBS}:noop")  # flight at the restart and at the crash
    layers = [[f"L{layer}n{i}" for i in range(6)] for layer in range(5)]
    deps: dict[str, list[str]] = {}
    for layer, names in enumerate(layers):
        for i, t in enumerate(names):
            deps[t] = [] if layer == 0 else [layers[layer - 1][i], layers[layer - 1][(i + 1) % 6]]
            seconds = (0.05, 0.1, 0.15, 0.2)[(layer + i) % 4]
            db.submit(t, deps[t], fn=f"{JOBS}:work",
                      args={"task": t, "log": str(log), "seconds": seconds})
    total = sum(len(names) for names in layers)
    db.start()
    mine = {lease.task_id: lease for lease in db.claim("tester", limit=2, lease=300)}
    assert sorted(mine) == ["mine0", "mine1"]
    for k in range(3):
        workers.append(start_worker(postgres_url, "--lease", "5", "--until-done", name=f"w{k}"))

    def ends() -> int:
        return sum(1 for r in log_lines(log) if r[0] == "end")

    dbname = dbname_of(postgres_url)
    wait_for(lambda: ends() >= 5, what="five ends before the restart")
    at_restart = ends()
    # fast shutdown: every backend terminated, then a new server
    queued_restart, error_restart = _fault_with_writes_in_flight(
        postgres_cluster, dbname, db, mine["mine0"], "advisory lock", postgres_cluster.restart)
    wait_for(lambda: ends() >= at_restart + 4, timeout=90, what="four ends after the restart")
    at_crash = ends()

    def crash() -> None:
        postgres_cluster.kill()  # SIGKILL of every server process
        time.sleep(0.5)  # the workers find no server for a while
        postgres_cluster.start()  # crash recovery

    queued_crash, error_crash = _fault_with_writes_in_flight(
        postgres_cluster, dbname, db, mine["mine1"], "row lock", crash)
    assert at_crash < total, "the run ended before the crash: nothing was shown"
    outcomes = [finish(p, timeout=180) for p in workers]
    errors = "".join(err for _, err in outcomes)
    assert [code for code, _ in outcomes] == [0, 0, 0], errors  # none died: they reconnected

    try:
        assert all(db.state(t) is TaskState.SUCCEEDED for names in layers for t in names)
        assert db.result("mine1") == "retried"  # broken inside the step: refused, retried
        assert db.result("mine0") in ("in flight", "retried")
        ended = accepted_ends(db)
        assert len(ended) == total + 2 and set(ended.values()) == {1}
        db.check_invariants()
        history = db.history()
        completes = collections.Counter(p["t"] for a, p in history if a == "Complete")
        assert completes == {t: 1 for t in [*mine, *deps]}
        reclaims = [p["t"] for a, p in history if a == "Reclaim"]
        # deps ran first, whichever attempt ran them
        rows = log_lines(log)
        last_end = {task: at for what, task, _, at in rows if what == "end"}
        for what, task, _, at in rows:
            if what == "start":
                assert all(last_end[d] <= at for d in deps[task]), task
        retried = errors.count("store error, retrying the report")
        refused = errors.count("report refused")
        print(f"\nrestart after {at_restart} ends with {queued_restart} writers queued on the "
              f"store's lock; crash after {at_crash} of {total} with {queued_crash} queued; "
              f"this process's complete() at the restart: {error_restart}; at the crash: "
              f"{error_crash}; workers' reports retried after a store error: {retried}, "
              f"refused (committed before the error, or taken over): {refused}, "
              f"re-claims: {len(reclaims)}, "
              f"function runs: {sum(1 for r in rows if r[0] == 'start')}")
    finally:
        db.release()


def test_until_done_workers_outlast_an_outage_longer_than_the_pool_wait(
        postgres_cluster: PostgresCluster, postgres_url: str, tmp_path: Path,
        workers: list[subprocess.Popen[str]]) -> None:
    """The store waits up to 30 s for a pooled connection, then raises StoreError; a worker
    must treat that as any store error (retry later), not exit."""
    log = tmp_path / "log"
    db = DurableScheduler(postgres_url, max_concurrency=2, record=True)
    for i in range(8):
        db.submit(f"t{i}", fn=f"{JOBS}:work", args={"task": f"t{i}", "log": str(log),
                                                   "seconds": 0.3})
    db.start()
    db.release()
    for k in range(2):
        workers.append(start_worker(postgres_url, "--lease", "2", "--until-done", name=f"w{k}"))
    # both running (connected), not still starting: a worker that cannot connect at start exits
    wait_for(lambda: len({r[2] for r in log_lines(log)}) == 2, what="both workers running")
    postgres_cluster.stop()
    time.sleep(36)  # longer than the pool's 30 s wait for a connection
    dead = [(p.returncode, p.communicate(timeout=30)[1]) for p in workers if p.poll() is not None]
    assert dead == [], dead
    postgres_cluster.start()
    back_at = time.monotonic()
    outcomes = [finish(p, timeout=120) for p in workers]
    finished_after = time.monotonic() - back_at
    assert [code for code, _ in outcomes] == [0, 0], "".join(e for _, e in outcomes)
    db = DurableScheduler(postgres_url, create=False)
    try:
        assert all(db.state(f"t{i}") is TaskState.SUCCEEDED for i in range(8))
        ended = accepted_ends(db)
        assert len(ended) == 8 and set(ended.values()) == {1}
        db.check_invariants()
        print(f"\nthe workers finished {finished_after:.1f} s after the server was back; "
              f"re-claims after the outage: {sum(1 for a, _ in db.history() if a == 'Reclaim')}")
        # What is left of 8 tasks of 0.3 s on 2 workers takes about a second; the pool's own
        # backoff alone (no cap) would wait up to the outage's length before reconnecting.
        assert finished_after < 20, finished_after
    finally:
        db.release()


# -- 2. a worker's backends terminated, then the worker paused past its lease ------------------

def test_a_worker_whose_backends_are_terminated_and_who_pauses_is_refused(
        postgres_cluster: PostgresCluster, postgres_url: str, tmp_path: Path,
        workers: list[subprocess.Popen[str]]) -> None:
    log = tmp_path / "log"
    db = started_hanging_task(postgres_url, tmp_path, log, seconds=3.0)
    # libpq takes application_name from the URL: A's backends are found by it
    a = start_worker(f"{postgres_url}&application_name=worker_a", "--lease", "1",
                     "--until-done", name="A")
    workers.append(a)
    wait_for(lambda: any(r[0] == "start" for r in log_lines(log)), what="A's start")
    (lease,) = [v for v in db.leases().values() if v.holder is not None]
    assert lease.holder == "A" and lease.attempt == 1
    killed = postgres_cluster.terminate(dbname_of(postgres_url), application_name="worker_a")
    assert killed >= 1
    os.kill(a.pid, signal.SIGSTOP)  # its heartbeats stop with it: the lease runs out
    b = start_worker(postgres_url, "--lease", "1", "--until-done", name="B")
    workers.append(b)
    code_b, err_b = finish(b, timeout=60)
    assert code_b == 0, err_b
    assert db.result("x") == b.pid
    os.kill(a.pid, signal.SIGCONT)  # A wakes, reconnects, finishes its sleep, reports: refused
    code_a, err_a = finish(a, timeout=60)
    assert code_a == 0, err_a
    assert "report refused" in err_a, err_a
    assert db.result("x") == b.pid
    assert db.info("x").attempts == 2
    assert accepted_ends(db) == {("x", 1): 1}
    steps = [(s, p.get("w")) for s, p in db.history() if s not in ("Submit", "Start")]
    assert steps == [("Claim", "A"), ("Expire", None), ("Reclaim", "B"), ("Complete", "B")]
    assert [r[2] for r in log_lines(log) if r[0] == "end"] == [b.pid, a.pid]
    db.check_invariants()
    print(f"\nterminated {killed} backend(s) of A; A's stderr:\n{err_a.strip()}")
    db.release()


# -- 3. sixteen worker processes on one ready queue --------------------------------------------

def test_sixteen_workers_on_one_ready_queue_claim_each_version_once(
        postgres_cluster: PostgresCluster, postgres_url: str,
        workers: list[subprocess.Popen[str]]) -> None:
    n_workers, n_tasks = 16, 400
    db = DurableScheduler(postgres_url, max_concurrency=16, record=True)
    for i in range(n_tasks):
        db.submit(f"t{i}", fn=f"{JOBS}:noop")
    db.start()
    for k in range(n_workers):
        workers.append(start_worker(postgres_url, "--lease", "30", "--until-done",
                                    name=f"w{k:02d}"))
    waits: collections.Counter[tuple[str, str]] = collections.Counter()
    samples = busy_samples = 0
    with postgres_cluster.connect(dbname_of(postgres_url)) as watcher:
        end = time.monotonic() + 180
        while any(p.poll() is None for p in workers):
            assert time.monotonic() < end, "the workers did not finish in 180 s"
            rows = watcher.execute(
                "SELECT wait_event_type, wait_event FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend' AND state = 'active'").fetchall()
            samples += 1
            busy_samples += bool(rows)
            for kind, event in rows:
                if kind == "Lock":
                    waits[(kind, event)] += 1
            time.sleep(0.01)
    outcomes = [finish(p) for p in workers]
    assert [code for code, _ in outcomes] == [0] * n_workers, "".join(e for _, e in outcomes)
    row_waits = waits[("Lock", "tuple")] + waits[("Lock", "transactionid")]
    print(f"\n{samples} samples of pg_stat_activity ({busy_samples} with an active backend): "
          f"lock waits {dict(waits)}; backends queued on the advisory lock "
          f"{waits[('Lock', 'advisory')]} times in all")
    assert row_waits == 0, f"a claimer waited on another's row lock: {dict(waits)}"
    assert samples >= 3
    claims = claims_per_version(db)
    assert sorted(claims) == sorted(f"t{i}" for i in range(n_tasks))
    twice = {t: c for t, c in claims.items() if len(c) != 1 or c[0][0] != "Claim"}
    assert twice == {}, f"versions claimed more than once: {twice}"
    ended = accepted_ends(db)
    assert len(ended) == n_tasks and set(ended.values()) == {1}
    assert db.stats().succeeded == n_tasks
    by_worker = collections.Counter(c[0][1] for c in claims.values())
    print(f"versions claimed per worker: {sorted(by_worker.values())}")
    db.check_invariants()
    db.release()


# -- 4. a statement timeout inside a step ------------------------------------------------------

@pytest.mark.parametrize("blocker", ["advisory lock", "row lock"])
def test_a_statement_timeout_writes_nothing_and_the_step_succeeds_later(
        postgres_url: str, blocker: str) -> None:
    db = DurableScheduler(postgres_url, max_concurrency=1, record=True)
    db.submit("x", fn=f"{JOBS}:noop")
    db.submit("y", ["x"], fn=f"{JOBS}:noop")
    db.start()
    (lease,) = db.claim("w", lease=300)
    timed = DurableScheduler(f"{postgres_url}&options=-c%20statement_timeout%3D50",
                             create=False)
    holder = psycopg.connect(postgres_url, autocommit=True, connect_timeout=10)
    try:
        assert timed.info("x").state is TaskState.RUNNING  # the setting took: reads still work
        if blocker == "advisory lock":
            holder.execute("SELECT pg_advisory_lock(%s)", (_advisory_key(),))
        else:  # an open transaction holds the version's row: the step waits inside its lock
            holder.execute("BEGIN")
            holder.execute("UPDATE refsched.task SET seq = seq WHERE id = 'x'")
        before = (db.snapshot(), db.history(), db.stats(), db.leases())
        started = time.monotonic()
        with pytest.raises(StoreError, match="timed out") as refused:
            timed.complete(lease, "first")
        took = time.monotonic() - started
        assert "nothing of this step was written" in str(refused.value)
        assert (db.snapshot(), db.history(), db.stats(), db.leases()) == before
        assert db.info("x").state is TaskState.RUNNING and db.info("y").state is TaskState.PENDING
        if blocker == "advisory lock":
            holder.execute("SELECT pg_advisory_unlock(%s)", (_advisory_key(),))
        else:
            holder.execute("ROLLBACK")
        assert timed.complete(lease, "second") is TaskState.SUCCEEDED
        assert db.result("x") == "second"
        assert db.info("y").state is TaskState.READY
        assert accepted_ends(db) == {("x", 1): 1}
        db.check_invariants()
        print(f"\n{blocker}: complete() refused after {took:.3f} s: {refused.value}")
    finally:
        holder.close()
        timed.release()
        db.release()


# -- 5. a worker on another host (a network namespace) cut off mid-task ------------------------

def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                          check=check)


@pytest.fixture
def other_host() -> Iterator[dict[str, str]]:
    """A network namespace joined to this one by a veth pair (needs root and ``ip netns``)."""
    with _host(0) as host:
        yield host


@pytest.fixture
def two_hosts() -> Iterator[list[dict[str, str]]]:
    """Two network namespaces, each joined to this one by a veth pair of its own."""
    with _host(1) as first, _host(2) as second:
        yield [first, second]


@contextlib.contextmanager
def _host(index: int) -> Iterator[dict[str, str]]:
    """The ``index``-th network namespace of this process, joined to this one by a veth pair
    on a subnet of its own (skips the test where that cannot be made)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and the ip command")
    tag = f"rsf{os.getpid() % 100000}{'abc'[index]}"
    net = f"10.{200 + os.getpid() % 50}.{(os.getpid() + 83 * index) % 250}"
    ns, here, there = tag, f"{tag}a", f"{tag}b"
    made = _ip("netns", "add", ns, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
    try:
        for args in (("link", "add", here, "type", "veth", "peer", "name", there),
                     ("link", "set", there, "netns", ns),
                     ("addr", "add", f"{net}.1/24", "dev", here),
                     ("link", "set", here, "up"),
                     ("-n", ns, "addr", "add", f"{net}.2/24", "dev", there),
                     ("-n", ns, "link", "set", there, "up"),
                     ("-n", ns, "link", "set", "lo", "up")):
            done = _ip(*args, check=False)
            if done.returncode != 0:
                pytest.skip(f"ip {' '.join(args)}: {done.stderr.strip()}")
        ping = subprocess.run(["ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "2",
                               f"{net}.1"], capture_output=True, text=True, timeout=30)
        if ping.returncode != 0 and shutil.which("ping") is not None:
            pytest.skip(f"the veth pair carries nothing: {ping.stdout}{ping.stderr}")
        yield {"ns": ns, "link": here, "server": f"{net}.1", "subnet": f"{net}.0/24"}
    finally:
        _ip("link", "del", here, check=False)
        _ip("netns", "del", ns, check=False)


@pytest.fixture
def tcp_cluster(postgres_cluster: PostgresCluster,
                other_host: dict[str, str]) -> Iterator[PostgresCluster]:
    """A second throwaway server that also listens on the veth's address (trust for its
    subnet), with no setting of its own for idle transactions: the store's sessions bring one."""
    with _listening(postgres_cluster, [other_host]) as cluster:
        yield cluster


@contextlib.contextmanager
def _listening(postgres_cluster: PostgresCluster,
               hosts: list[dict[str, str]]) -> Iterator[PostgresCluster]:
    """A throwaway server listening on the veth address of each of ``hosts`` (trust for their
    subnets), beside the unix socket."""
    cls = type(postgres_cluster)
    base = tempfile.mkdtemp(prefix="refsched-pgnet-")
    cluster = cls(base)
    try:
        cluster.init()
        with (cluster.datadir / "postgresql.conf").open("a") as f:
            f.write("\n# tests/durable/test_postgres_faults.py: workers on other hosts\n"
                    f"listen_addresses = '{','.join(h['server'] for h in hosts)}'\n"
                    # sixteen workers, each with a connection pool, and the test's own
                    "max_connections = 200\n")
        with (cluster.datadir / "pg_hba.conf").open("a") as f:
            for host in hosts:
                f.write(f"host all all {host['subnet']} trust\n")
        cluster.start()
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop("immediate")
        if cluster.running:
            with contextlib.suppress(Exception):
                cluster.kill()
        shutil.rmtree(base, ignore_errors=True)


def remote_worker_running_x(tcp_cluster: PostgresCluster, other_host: dict[str, str],
                            tmp_path: Path, workers: list[subprocess.Popen[str]],
                            ) -> tuple[DurableScheduler, str, subprocess.Popen[str]]:
    """A store with one task ``x`` (3 s, leases of 1 s) that a worker in the other network
    namespace has started: the store, its local URL, and that worker."""
    local_url = tcp_cluster.create_database("netfaults")
    remote_url = f"postgresql://postgres@{other_host['server']}:5432/netfaults?connect_timeout=5"
    log = tmp_path / "log"
    log.touch()
    log.chmod(0o666)
    db = started_hanging_task(local_url, tmp_path, log, seconds=3.0)
    remote = start_worker(remote_url, "--lease", "1", "--until-done", name="remote",
                          prefix=("ip", "netns", "exec", other_host["ns"]))
    workers.append(remote)
    wait_for(lambda: any(r[0] == "start" for r in log_lines(log)), timeout=60,
             what="the remote worker's start")
    return db, local_url, remote


def test_a_worker_on_another_host_cut_off_mid_task_loses_it(
        tcp_cluster: PostgresCluster, other_host: dict[str, str], tmp_path: Path,
        workers: list[subprocess.Popen[str]]) -> None:
    db, local_url, remote = remote_worker_running_x(tcp_cluster, other_host, tmp_path, workers)
    with tcp_cluster.connect("netfaults") as conn:
        addrs = {str(a) for (a,) in conn.execute(
            "SELECT client_addr FROM pg_stat_activity WHERE datname = 'netfaults'"
            " AND client_addr IS NOT NULL").fetchall()}
    assert addrs == {other_host["server"].rsplit(".", 1)[0] + ".2"}, addrs
    _ip("link", "set", other_host["link"], "down")  # the cable is cut: no RST, only silence
    cut_at = time.time()
    local = start_worker(local_url, "--lease", "1", "--until-done", name="local")
    workers.append(local)
    code, err_local = finish(local, timeout=60)
    assert code == 0, err_local
    assert db.result("x") == local.pid
    info = db.info("x")
    assert info.state is TaskState.SUCCEEDED and info.attempts == 2
    # (a heartbeat of either worker is a step too, as the threads' timing gives it: left out)
    steps = [(s, p.get("w")) for s, p in db.history()
             if s not in ("Submit", "Start", "Heartbeat")]
    assert steps == [("Claim", "remote"), ("Expire", None), ("Reclaim", "local"),
                     ("Complete", "local")]
    reclaimed_after = time.time() - cut_at
    _ip("link", "set", other_host["link"], "up")  # the remote worker hears again: refused
    code, err_remote = finish(remote, timeout=120)
    assert code == 0, err_remote
    assert "report refused" in err_remote, err_remote
    assert accepted_ends(db) == {("x", 1): 1}
    assert db.result("x") == local.pid
    db.check_invariants()
    pids = [r[2] for r in log_lines(tmp_path / "log") if r[0] == "start"]
    assert pids[1] == local.pid and len(pids) == 2
    print(f"\nre-claimed and completed {reclaimed_after:.2f} s after the cut; the remote "
          f"worker's stderr:\n{err_remote.strip()}")
    db.release()


def test_a_worker_cut_off_inside_a_step_holds_the_store_lock_until_the_server_ends_it(
        tcp_cluster: PostgresCluster, other_host: dict[str, str], tmp_path: Path,
        workers: list[subprocess.Popen[str]]) -> None:
    """The hazard of one lock for every writer: a client cut off *inside* a step holds the
    store's advisory lock, and every other writer of the store waits, until the server ends
    that session. The server notices a silent peer through TCP only after hours (keepalives'
    default), so the store sets ``idle_in_transaction_session_timeout`` on each of its sessions
    (``idle_step_timeout``, 10 s): the lost session ends then, and the writers go on."""
    db, local_url, remote = remote_worker_running_x(tcp_cluster, other_host, tmp_path, workers)
    remote_addr = other_host["server"].rsplit(".", 1)[0] + ".2"
    # idle now (the lease is live), claiming at every poll: each claim is a write of the store
    local = start_worker(local_url, "--lease", "1", "--until-done", name="local")
    workers.append(local)
    with tcp_cluster.connect("netfaults") as watch, tcp_cluster.connect("netfaults") as holder:
        def remote_backends(condition: str) -> int:
            return int(watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE client_addr = %s::inet AND "
                + condition, (remote_addr,)).fetchone()[0])

        # The task table locked by another transaction: the remote worker's next heartbeat
        # takes the store's lock, then waits for the table (its read of the lease), inside
        # its step.
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE refsched.task IN ACCESS EXCLUSIVE MODE")
        wait_for(lambda: remote_backends("wait_event_type = 'Lock'") == 1, timeout=30,
                 what="the remote heartbeat waiting inside its step")
        _ip("link", "set", other_host["link"], "down")  # cut off inside the step
        cut_at = time.monotonic()
        holder.execute("ROLLBACK")  # its read runs; the answer goes nowhere
        wait_for(lambda: remote_backends("state = 'idle in transaction'") == 1, timeout=10,
                 what="the remote backend idle in its transaction")
        (lock_holder,) = watch.execute(
            "SELECT a.client_addr::text FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.granted").fetchone() or (None,)
        assert lock_holder is not None and lock_holder.split("/")[0] == remote_addr
        # every write of the store waits behind the lost client: here, the local claims
        wait_for(lambda: int(watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'"
            " AND client_addr IS NULL").fetchone()[0]) >= 1, timeout=30,
                 what="a local writer queued behind the lost client")
        code, err_local = finish(local, timeout=60)
        freed_after = time.monotonic() - cut_at
    assert code == 0, err_local
    assert 9.0 <= freed_after < 60  # when the store's 10 s setting ended the lost session
    assert "idle-in-transaction timeout" in tcp_cluster.logfile.read_text()
    assert db.result("x") == local.pid and db.info("x").attempts == 2
    _ip("link", "set", other_host["link"], "up")
    code, err_remote = finish(remote, timeout=120)
    assert code == 0, err_remote
    assert "report refused" in err_remote, err_remote
    assert accepted_ends(db) == {("x", 1): 1}
    db.check_invariants()
    print(f"\nthe store's writers waited {freed_after:.2f} s behind the client cut off inside "
          "its step (the store's idle_in_transaction_session_timeout is 10 s)")
    db.release()


# -- 6. sixteen workers on two other hosts, one host cut off mid-run ---------------------------

def test_sixteen_workers_on_two_hosts_one_cut_off_mid_run_end_each_version_once(
        postgres_cluster: PostgresCluster, two_hosts: list[dict[str, str]], tmp_path: Path,
        workers: list[subprocess.Popen[str]]) -> None:
    n_tasks, per_host = 320, 8
    with _listening(postgres_cluster, two_hosts) as cluster:
        local_url = cluster.create_database("twohosts")
        log = tmp_path / "log"
        log.touch()
        log.chmod(0o666)
        db = DurableScheduler(local_url, max_concurrency=16, record=True)
        db.submit_many([{"id": f"t{i:03d}", "fn": f"{JOBS}:work",
                         "args": {"task": f"t{i:03d}", "log": str(log), "seconds": 0.3}}
                        for i in range(n_tasks)])
        db.start()
        hosts: dict[str, list[subprocess.Popen[str]]] = {"h0": [], "h1": []}
        for name, host in zip(hosts, two_hosts, strict=True):
            url = f"postgresql://postgres@{host['server']}:5432/twohosts?connect_timeout=5"
            for k in range(per_host):
                worker = start_worker(url, "--lease", "2", "--until-done", name=f"{name}w{k}",
                                      prefix=("ip", "netns", "exec", host["ns"]))
                hosts[name].append(worker)
                workers.append(worker)

        def holders() -> set[str]:
            return {v.holder[:2] for v in db.view().versions
                    if v.state is TaskState.RUNNING and v.holder is not None}
        # both hosts at work, and a part of the work done
        wait_for(lambda: holders() == {"h0", "h1"} and db.stats().succeeded >= n_tasks // 8,
                 timeout=120, what="both hosts running versions")
        _ip("link", "set", two_hosts[1]["link"], "down")  # h1's cable is cut: only silence
        cut_at = time.time()
        held_at_cut = {v.task_id for v in db.view().versions
                       if v.state is TaskState.RUNNING and (v.holder or "").startswith("h1")}
        # h0's workers take over h1's versions once their leases run out, and finish all
        outcomes = [finish(p, timeout=240) for p in hosts["h0"]]
        assert [code for code, _ in outcomes] == [0] * per_host, "".join(e for _, e in outcomes)
        done_after = time.time() - cut_at
        _ip("link", "set", two_hosts[1]["link"], "up")  # h1 hears again: its reports refused
        outcomes = [finish(p, timeout=240) for p in hosts["h1"]]
        assert [code for code, _ in outcomes] == [0] * per_host, "".join(e for _, e in outcomes)
        assert db.stats().succeeded == n_tasks
        ended = accepted_ends(db)
        assert len(ended) == n_tasks and set(ended.values()) == {1}, "a version ended twice"
        claims = claims_per_version(db)  # every step of the history checked against the spec
        first = {t: c[0] for t, c in claims.items()}
        assert set(first) == {f"t{i:03d}" for i in range(n_tasks)}
        assert all(action == "Claim" for action, _ in first.values())
        assert all(sum(1 for action, _ in c if action == "Claim") == 1 for c in claims.values())
        # the cut mattered: h1's versions were taken over by h0, each after its lease expired
        taken_over = {t for t, c in claims.items()
                      if c[0][1].startswith("h1") and any(a == "Reclaim" and w.startswith("h0")
                                                          for a, w in c)}
        assert held_at_cut and taken_over, (held_at_cut, taken_over)
        db.check_invariants()
        per_host_claims = collections.Counter(w[:2] for c in claims.values() for _, w in c)
        print(f"\n{n_tasks} versions on 16 workers of two hosts; h1 cut off holding "
              f"{len(held_at_cut)}, {len(taken_over)} taken over by h0; h0 done "
              f"{done_after:.1f} s after the cut; claims per host {dict(per_host_claims)}")
        db.release()
