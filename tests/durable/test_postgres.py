"""What only the PostgreSQL store does: steps run as server-side functions, notifications that
wake idle workers only when a claim could take a step, connections the server ended, and a
Ctrl-C in the middle of a step.

The store's contract itself is tested on both stores by test_durable.py, the lock-step machine
and corpus replay; the server's faults by tests/durable/test_postgres_faults.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.steps_postgres import STAMPED
from refsched.types import TaskState

if os.environ.get("CI") == "true":
    import psycopg  # required there: a missing psycopg fails rather than skips
else:
    psycopg = pytest.importorskip("psycopg")

NOOP = "tests.durable.jobs:noop"
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "s"


def open_store(postgres_url: str, **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 1)
    return DurableScheduler(f"{postgres_url}&schema={SCHEMA}", **options)


def sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def calls_of(db: DurableScheduler) -> list[tuple[str, bool]]:
    """Each server-side step the store runs from now on, and whether the server took it."""
    seen: list[tuple[str, bool]] = []
    store: Any = db._store
    call: Callable[..., Any] = store.call

    def spy(step: str, *args: Any) -> Any:
        rows = call(step, *args)
        took = rows is not None and rows not in ([(None,)], [(False,)]) and not (
            step == "claim" and rows and rows[0][0])
        seen.append((step, took))
        return rows
    store.call = spy
    return seen


def test_the_common_steps_are_one_call_each_on_the_server(postgres_url: str) -> None:
    db = open_store(postgres_url, max_concurrency=2)
    digest = sql(postgres_url, "SELECT obj_description(to_regprocedure(%s), 'pg_proc')",
                 (f"{SCHEMA}.{STAMPED}",))
    assert digest[0][0].startswith("refsched steps ")
    db.start()
    seen = calls_of(db)
    assert db.submit("a", fn=NOOP) == 1
    (lease,) = db.claim("w")
    assert db.complete(lease, 7) is TaskState.SUCCEEDED
    assert seen == [("submit_many", True), ("claim", True), ("complete", True)]
    # What the functions leave to the client: a repeated report. A submit, with deps or
    # without, is the batch function's, given a batch of one.
    assert db.complete(lease, 7) is TaskState.SUCCEEDED
    assert db.submit("b", ["a"], fn=NOOP) == 1
    assert seen[3:] == [("complete", False), ("submit_many", True)]
    assert db.info("a").result == 7 and db.state("b") is TaskState.READY
    assert db.stats().succeeded == 1 and db.stats().duplicate_callbacks == 1
    db.release()


def test_a_role_that_may_not_create_functions_takes_the_steps_itself(
        postgres_url: str) -> None:
    creator = open_store(postgres_url)
    creator.release()
    sql(postgres_url, f"DROP FUNCTION {SCHEMA}.{STAMPED}")
    role = f"limited_{os.getpid()}"
    sql(postgres_url, f"CREATE ROLE {role} LOGIN")
    sql(postgres_url, f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}")
    sql(postgres_url, f"GRANT ALL ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}")
    sql(postgres_url, f"GRANT ALL ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {role}")
    sql(postgres_url, f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {SCHEMA} TO {role}")
    limited_url = postgres_url.replace("postgres@", f"{role}@", 1)
    assert urlsplit(limited_url).username == role
    db = open_store(limited_url, max_concurrency=None)
    seen = calls_of(db)
    db.start()
    db.submit("a", fn=NOOP)
    (lease,) = db.claim("w")
    assert db.complete(lease) is TaskState.SUCCEEDED
    # the submit builds no call for a store without steps; claim and complete ask, answered
    # None, and take the steps in the client's transactions
    assert not db._store.has_steps
    assert seen == [("claim", False), ("complete", False)]
    assert db.done()
    db.release()
    sql(postgres_url, f"DROP OWNED BY {role}")
    sql(postgres_url, f"DROP ROLE {role}")


def test_idle_workers_are_woken_only_when_a_claim_could_take_a_step(postgres_url: str) -> None:
    db = open_store(postgres_url)  # max_concurrency=1
    idle = open_store(postgres_url, max_concurrency=None)
    db.start()
    assert not idle.wait_for_work(0.01)  # listening from here on
    db.submit("a", fn=NOOP)
    assert idle.wait_for_work(10)  # a is ready and the slot is free
    db.submit("b", fn=NOOP)
    db.submit("c", fn=NOOP)  # two more wake-ups, queued
    # A listening session is sent what was notified before its next round trip at the latest:
    # one now, so that both wake-ups have arrived when the claim looks (a wake-up still on its
    # way would wake the next wait, for a look that finds nothing: harmless, but not this test).
    store: Any = idle._store
    store._listener.execute("SELECT 1")
    (lease,) = idle.claim("w")
    # The claim looked after the queued wake-ups, so they told it nothing new; and with the one
    # slot taken, neither its own step nor a new submit makes anything claimable.
    db.submit("d", fn=NOOP)
    assert not idle.wait_for_work(0.5)
    assert idle.complete(lease) is TaskState.SUCCEEDED  # the slot is free again: b can go
    assert idle.wait_for_work(10)
    db.release()
    idle.release()


def test_a_step_after_the_server_ended_the_idle_connections_is_sent_on_a_new_one(
        postgres_url: str) -> None:
    db = open_store(postgres_url, max_concurrency=2)
    db.start()
    db.submit("a", fn=NOOP)
    dbname = urlsplit(postgres_url).path.lstrip("/")
    ended = sql(postgres_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                              "datname = %s AND pid <> pg_backend_pid()", (dbname,))
    assert ended and all(ok for (ok,) in ended)
    deadline = time.monotonic() + 10
    while sql(postgres_url, "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                            "pid <> pg_backend_pid()", (dbname,))[0][0]:
        assert time.monotonic() < deadline, "the terminated backends did not exit"
        time.sleep(0.02)
    assert db.submit("b", fn=NOOP) == 1  # a step's one statement commits: not sent twice
    assert [lease.task_id for lease in db.claim("w", limit=2)] == ["a", "b"]
    db.release()


SUBMIT_UNTIL_INTERRUPTED = """
import sys
from refsched.durable import DurableScheduler
db = DurableScheduler(sys.argv[1], max_concurrency=1)
print("ready", flush=True)
done = 0
try:
    while True:
        db.submit(f"t{done}", ["a"] if done % 2 else [], fn="tests.durable.jobs:noop")
        done += 1
except KeyboardInterrupt:
    print(done, flush=True)
    sys.exit(3)
"""


def test_ctrl_c_in_a_loop_of_submits_stops_it_and_leaves_every_step_whole(
        postgres_url: str) -> None:
    url = f"{postgres_url}&schema={SCHEMA}"
    DurableScheduler(url, max_concurrency=1).submit("a", fn=NOOP)
    proc = subprocess.Popen([sys.executable, "-c", SUBMIT_UNTIL_INTERRUPTED, url],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # submits both ways: on the server (no deps) and on the client
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, "the loop did not stop on KeyboardInterrupt"
    done = int(out.strip())
    db = DurableScheduler(url)
    db.check_invariants()
    ids = set(db.snapshot().tasks) - {"a"}
    # Every submit that returned is there, and the one interrupted is there whole or not at all.
    assert {f"t{i}" for i in range(done)} <= ids <= {f"t{i}" for i in range(done + 1)}
    assert done > 10
    db.release()
