"""The PostgreSQL store's writers without one lock (docs/durable.md, "Writers without one
lock"; spec/DurableRowLocks.tla): claims, completes and submits of new ids hold the store's lock
shared and the rows they decide on, so they run at once; max_concurrency holds through the slot
rows however many claim at once; completes that share dependents do not lose a fan-in; a submit
and a report of its dependency, whichever locks the row first, leave the count right.

A wait is turned into a failure by ``lock_timeout``: a statement that would queue for a lock
fails at once instead, so nothing here depends on how long anything takes.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.postgres import split_url
from refsched.types import TaskState

if os.environ.get("CI") == "true":
    import psycopg  # required there: a missing psycopg fails rather than skips
else:
    psycopg = pytest.importorskip("psycopg")

NOOP = "tests.durable.jobs:noop"
SCHEMA = "rl"
CLAIM = "SELECT o_fallback, o_id FROM refsched_claim(%s, %s, %s, %s, %s, %s, %s, %s)"


def open_store(postgres_url: str, **options: Any) -> DurableScheduler:
    return DurableScheduler(f"{postgres_url}&schema={SCHEMA}", **options)


def session(postgres_url: str, autocommit: bool = True) -> Any:
    """A connection of its own to the store's schema; a lock it would wait for fails it."""
    conninfo, _ = split_url(f"{postgres_url}&schema={SCHEMA}")
    conn = psycopg.connect(conninfo, autocommit=autocommit)
    conn.execute(f"SET search_path TO {SCHEMA}")
    conn.execute("SET lock_timeout = '200ms'")
    if not autocommit:
        conn.commit()
    return conn


def claim_args(db: DurableScheduler, worker: str, k: int = 1) -> tuple[Any, ...]:
    store: Any = db._store
    return (store._lock_key, False, store._channel, False, db.max_concurrency, worker, k, 30.0)


def test_a_claim_takes_another_version_while_a_claim_holds_one_without_waiting(
        postgres_url: str) -> None:
    db = open_store(postgres_url, max_concurrency=4)
    for t in "abc":
        db.submit(t, fn=NOOP)
    db.start()
    first, second = session(postgres_url, autocommit=False), session(postgres_url)
    try:
        # The first claim's transaction stays open: it holds the store's lock shared, a
        # slot row and a's row.
        assert first.execute(CLAIM, claim_args(db, "w1")).fetchall() == [(False, "a")]
        # Another claim neither waits for it (lock_timeout would fail it) nor takes a.
        assert second.execute(CLAIM, claim_args(db, "w2")).fetchall() == [(False, "b")]
        (lease,) = [x for x in db.claim("w3") if x.task_id == "c"]
        db.complete(lease)  # a complete runs beside the open claim too
        # A step that takes the lock exclusively still waits for the open claim.
        with pytest.raises(psycopg.errors.LockNotAvailable):
            second.execute("SELECT pg_advisory_xact_lock(%s)", (claim_args(db, "w")[0],))
        first.commit()
        running = {v.task_id: v.holder for v in db.view().versions if v.state is TaskState.RUNNING}
        assert running == {"a": "w1", "b": "w2"}
        db.check_invariants()
    finally:
        first.close()
        second.close()


COMPLETE = "SELECT refsched_complete(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"


def complete_args(db: DurableScheduler, lease: Any) -> tuple[Any, ...]:
    store: Any = db._store
    return (store._lock_key, False, store._channel, False, db.max_concurrency, lease.task_id,
            lease.generation, lease.attempt, lease.worker, "null")


def blocked_behind(holder: Any, waiter: Any) -> None:
    """Return once the server process of ``waiter`` waits for a lock ``holder`` holds (the
    server's own account of it: pg_blocking_pids), or fail after a bound."""
    pid = waiter.info.backend_pid
    for _ in range(10_000):
        (blockers,) = holder.execute("SELECT pg_blocking_pids(%s)", (pid,)).fetchone()
        if holder.info.backend_pid in blockers:
            return
    raise AssertionError(f"server process {pid} never waited for {holder.info.backend_pid}")


def in_thread(conn: Any, statement: str, params: tuple[Any, ...]) -> tuple[threading.Thread,
                                                                       list[Any]]:
    """Run ``statement`` on ``conn`` in a thread of its own (it is to wait for a lock)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(conn.execute(statement, params).fetchall())
        except BaseException as e:  # told by the caller's assertion
            out.append(e)
    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def queued_behind(postgres_url: str, holder: tuple[str, tuple[Any, ...]],
                  waiter: tuple[str, tuple[Any, ...]]) -> tuple[list[Any], Any]:
    """Run ``holder``'s statement in a transaction left open, then ``waiter``'s on another
    session, which must wait for a lock the first holds (the server says so); commit the
    first. The holder's rows, and the waiter's rows (or what it raised) once it went on."""
    first, second = session(postgres_url, autocommit=False), session(postgres_url)
    second.execute("SET lock_timeout = 0")  # this one is to wait
    try:
        held = first.execute(*holder).fetchall()
        thread, out = in_thread(second, *waiter)
        blocked_behind(first, second)
        first.commit()
        thread.join()
        return held, out[0]
    finally:
        first.close()
        second.close()


def test_a_repeated_complete_waiting_for_the_first_is_fenced_on_the_row_it_then_reads(
        postgres_url: str) -> None:
    # The second report of one lease queues behind the first's row lock; once the first
    # commits, its fence is judged on the row as the first left it: no second success, no
    # second fan-in.
    db = open_store(postgres_url, max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.submit("b", fn=NOOP)
    db.submit("d", ["a", "b"], fn=NOOP)
    db.start()
    (lease,) = [x for x in db.claim("w", 2) if x.task_id == "a"]
    held, queued = queued_behind(postgres_url, (COMPLETE, complete_args(db, lease)),
                                 (COMPLETE, complete_args(db, lease)))
    assert held == [(True,)]
    assert queued == [(False,)]
    (d,) = db.view("d").versions
    assert (d.state, d.remaining_deps) == (TaskState.PENDING, 1)
    assert db.stats().succeeded == 1


def test_a_fan_in_waiting_for_another_counts_down_from_the_row_it_then_reads(
        postgres_url: str) -> None:
    # Two completes of two deps of d: the second's fan-in waits for the first's lock on d's
    # row, then takes one from the count the first left: d is ready.
    db = open_store(postgres_url, max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.submit("b", fn=NOOP)
    db.submit("d", ["a", "b"], fn=NOOP)
    db.start()
    leases = {x.task_id: x for x in db.claim("w", 2)}
    held, queued = queued_behind(postgres_url, (COMPLETE, complete_args(db, leases["a"])),
                                 (COMPLETE, complete_args(db, leases["b"])))
    assert held == [(True,)]
    assert queued == [(True,)]
    (d,) = db.view("d").versions
    assert (d.state, d.remaining_deps) == (TaskState.READY, 0)
    db.check_invariants()


def _running_within_bound(conn: Any, bound: int) -> tuple[int, list[Any]]:
    """One REPEATABLE READ snapshot: the count of running versions, and what breaks the slot
    rows' contract in it (a running version without exactly one slot row, a slot row held by
    no running version, a slot row numbered past the bound)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        (running,) = conn.execute(
            "SELECT count(*) FROM task WHERE state = 'running'").fetchone()
        broken = conn.execute(
            "SELECT 'unslotted', t.id FROM task t WHERE t.state = 'running' AND "
            "(SELECT count(*) FROM run_slot s WHERE s.task = t.id "
            " AND s.generation = t.generation) <> 1 "
            "UNION ALL SELECT 'stale', s.task FROM run_slot s WHERE s.task IS NOT NULL AND "
            "NOT EXISTS (SELECT 1 FROM task t WHERE t.id = s.task AND "
            "t.generation = s.generation AND t.state = 'running') "
            "UNION ALL SELECT 'past the bound', s.n::text FROM run_slot s WHERE s.n > %s",
            (bound,)).fetchall()
    return int(running), broken


def _hammer(url: str, worker: str, rounds: int) -> int:
    """Claim and complete (some fail) until ``rounds`` claims found nothing; the versions
    this worker ended."""
    db = DurableScheduler(url)
    ended = idle = 0
    try:
        while idle < rounds:
            leases = db.claim(worker, 2)
            if not leases:
                idle += 1
                continue
            for lease in leases:
                if hash(lease.task_id) % 5 == 0:
                    db.fail(lease, ValueError("failed on purpose"))
                else:
                    db.complete(lease)
                ended += 1
    finally:
        db.release()
    return ended


def test_max_concurrency_holds_under_many_claimers_of_threads_and_processes(
        postgres_url: str) -> None:
    bound, n = 3, 240
    db = open_store(postgres_url, max_concurrency=bound)
    for i in range(n):
        db.submit(f"t{i:03}", fn=NOOP)
    db.start()
    url = db.url
    checker = session(postgres_url)
    done = threading.Event()
    seen: list[int] = []
    broken: list[Any] = []

    def check() -> None:
        while not done.is_set():
            running, wrong = _running_within_bound(checker, bound)
            seen.append(running)
            broken.extend(wrong)

    watch = threading.Thread(target=check)
    watch.start()
    context = multiprocessing.get_context("spawn")
    try:
        with context.Pool(2) as processes:
            far = [processes.apply_async(_hammer, (url, f"p{i}", 3)) for i in range(2)]
            results: list[int] = []
            threads = [threading.Thread(target=lambda i=i: results.append(
                _hammer(url, f"t{i}", 3))) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results += [f.get(timeout=300) for f in far]
    finally:
        done.set()
        watch.join()
    final, wrong = _running_within_bound(checker, bound)
    checker.close()
    assert broken == [] and wrong == []
    assert seen and max(seen) <= bound and final == 0
    stats = db.stats()
    assert sum(results) == n == stats.succeeded + stats.failed
    assert stats.claimed == n and stats.by_state.get("running", 0) == 0


def test_completes_that_share_dependents_lose_no_fan_in(postgres_url: str) -> None:
    roots, tops = 24, 6
    db = open_store(postgres_url, max_concurrency=roots)
    for i in range(roots):
        db.submit(f"r{i:02}", fn=NOOP)
    for j in range(tops):
        db.submit(f"top{j}", [f"r{i:02}" for i in range(roots)], fn=NOOP)
    db.start()
    leases = db.claim("w", roots)
    assert len(leases) == roots
    # Four threads report at once, two one report at a time and two in batches (one call of
    # refsched_complete_many each): each report's fan-in updates every top's row.
    batches = [leases[k::4] for k in range(4)]
    errors: list[BaseException] = []

    def report(batch: list[Any]) -> None:
        try:
            mine = DurableScheduler(db.url)
            if batch is batches[0] or batch is batches[1]:
                for lease in batch:
                    mine.complete(lease)
            else:
                assert mine.report_many([("complete", x, None) for x in batch]) == [
                    TaskState.SUCCEEDED] * len(batch)
            mine.release()
        except BaseException as e:  # told by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=report, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    tops_now = {v.task_id: (v.state, v.remaining_deps) for v in db.view().versions
                if v.task_id.startswith("top")}
    assert tops_now == {f"top{j}": (TaskState.READY, 0) for j in range(tops)}
    assert db.stats().succeeded == roots


SUBMIT = ("SELECT refsched_submit_many(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
          "%s)")


def submit_args(db: DurableScheduler, task_id: str, deps: tuple[str, ...] = ()) -> tuple[Any,
                                                                                     ...]:
    """The server-side submit of one version of ``task_id`` running NOOP, with ``deps``."""
    store: Any = db._store
    return (store._lock_key, False, store._channel, False, db.max_concurrency, None,
            [task_id], [NOOP], ["{}"], [None], [None], [0], [1] * len(deps), list(deps),
            [False] * len(deps))


def seq_of(db: DurableScheduler, task_id: str) -> int:
    row = db._store.peek("SELECT seq FROM task WHERE id = ?", (task_id,))
    assert row is not None
    return int(row[0])


def test_a_submit_of_a_new_id_runs_beside_an_open_claim_and_complete(postgres_url: str) -> None:
    db = open_store(postgres_url, max_concurrency=4)
    for t in "abc":
        db.submit(t, fn=NOOP)
    db.start()
    (done,) = [x for x in db.claim("w0") if x.task_id == "a"]
    claiming, completing, submitting = (session(postgres_url, autocommit=False),
                                        session(postgres_url, autocommit=False),
                                        session(postgres_url))
    try:
        # An open claim (of b, its row and a slot row) and an open complete (of a, its row).
        assert claiming.execute(CLAIM, claim_args(db, "w1")).fetchall() == [(False, "b")]
        assert completing.execute(COMPLETE, complete_args(db, done)).fetchall() == [(True,)]
        # Submits of new ids, one depending on c (ready, no lock on it), wait for neither
        # (lock_timeout would fail them).
        assert submitting.execute(SUBMIT, submit_args(db, "x")).fetchall() == [([1],)]
        assert submitting.execute(SUBMIT, submit_args(db, "y", ("c",))).fetchall() == [([1],)]
        claiming.commit()
        completing.commit()
    finally:
        for conn in (claiming, completing, submitting):
            conn.close()
    states = {v.task_id: (v.state, v.remaining_deps) for v in db.view().versions}
    assert states["x"] == (TaskState.READY, 0) and states["y"] == (TaskState.PENDING, 1)
    assert seq_of(db, "x") < seq_of(db, "y")
    db.check_invariants()


def test_a_submit_waiting_for_a_report_of_its_dep_reads_the_state_the_report_left(
        postgres_url: str) -> None:
    # The report holds a's row; the submit's FOR SHARE waits for it, then reads a succeeded:
    # the new version is ready at once (read stale, it would wait for a fan-in already past).
    db = open_store(postgres_url, max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    held, queued = queued_behind(postgres_url, (COMPLETE, complete_args(db, lease)),
                                 (SUBMIT, submit_args(db, "d", ("a",))))
    assert held == [(True,)]
    assert queued == [([1],)]
    (d,) = db.view("d").versions
    assert (d.state, d.remaining_deps) == (TaskState.READY, 0)
    db.check_invariants()


def test_a_report_waiting_for_a_submit_of_a_dependent_counts_down_its_new_edge(
        postgres_url: str) -> None:
    # The submit holds a's row FOR SHARE (a running: one dep to wait for); the report of a
    # waits for it, and its fan-in then sees the new edge: d is ready.
    db = open_store(postgres_url, max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    held, queued = queued_behind(postgres_url, (SUBMIT, submit_args(db, "d", ("a",))),
                                 (COMPLETE, complete_args(db, lease)))
    assert held == [([1],)]
    assert queued == [(True,)]
    (d,) = db.view("d").versions
    assert (d.state, d.remaining_deps) == (TaskState.READY, 0)
    db.check_invariants()


def test_a_claim_that_passed_over_a_dep_a_submit_holds_is_woken_at_its_commit(
        postgres_url: str) -> None:
    # a is ready and the only claimable version; an open submit of d (depending on a) holds
    # a's row FOR SHARE, so a claim passes over it and finds nothing. The worker that made
    # that claim waits for a notification: the submit's commit must send one (the listener
    # went idle before the submit began, as refsched_idle records it).
    db = open_store(postgres_url, max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.start()
    store: Any = db._store
    first, claimer, listener = (session(postgres_url, autocommit=False), session(postgres_url),
                                session(postgres_url))
    try:
        listener.execute("SELECT refsched_idle(%s, false, 2, 0)", (store._lock_key,))
        listener.execute(f'LISTEN "{store._channel}"')
        assert first.execute(SUBMIT, submit_args(db, "d", ("a",))).fetchall() == [([1],)]
        assert claimer.execute(CLAIM, claim_args(db, "w")).fetchall() == []
        first.commit()
        heard = list(listener.notifies(timeout=10, stop_after=1))
        assert [n.channel for n in heard] == [store._channel]
        assert claimer.execute(CLAIM, claim_args(db, "w")).fetchall() == [(False, "a")]
    finally:
        for conn in (first, claimer, listener):
            conn.close()


def test_submits_draw_seq_numbers_one_at_a_time_in_commit_order(postgres_url: str) -> None:
    # A second submit waits for the first's lock on the seq row: two versions never share a
    # seq, and the one committed later has the larger.
    db = open_store(postgres_url, max_concurrency=2)
    db.start()
    held, queued = queued_behind(postgres_url, (SUBMIT, submit_args(db, "x")),
                                 (SUBMIT, submit_args(db, "y")))
    assert held == [([1],)]
    assert queued == [([1],)]
    assert seq_of(db, "x") < seq_of(db, "y")
    assert db.snapshot().next_seq == seq_of(db, "y") + 1
    db.check_invariants()


def test_a_submit_of_an_id_stored_meanwhile_is_left_to_the_client_unchanged(
        postgres_url: str) -> None:
    # Two submits of one new id at once: the second, once the first commits, finds the id
    # stored and changes nothing (NULL); submit() then replaces the version under the
    # exclusive lock, as any resubmit.
    db = open_store(postgres_url, max_concurrency=2)
    db.start()
    held, queued = queued_behind(postgres_url, (SUBMIT, submit_args(db, "x")),
                                 (SUBMIT, submit_args(db, "x")))
    assert held == [([1],)]
    assert queued == [(None,)]
    assert db.snapshot().next_seq == seq_of(db, "x") + 1
    assert db.submit("x", fn=NOOP) == 2
    assert [v.generation for v in db.view("x").versions] == [2]
    db.check_invariants()


# -- what a claim and a complete read -----------------------------------------------------------

COMPLETE_MANY = "SELECT refsched_complete_many(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
READS = ("SELECT pg_stat_get_xact_numscans('task'::regclass), "
         "pg_stat_get_xact_numscans('run_slot'::regclass), "
         "pg_stat_get_xact_tuples_returned('task_running'::regclass)")


def reads_of(probe: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> tuple[int, int, int]:
    """Run each call in one transaction of ``probe``: the server's own count of what they read,
    as (scans of task whole, scans of run_slot whole, task_running entries). (Its counts of a
    transaction go on from those not yet sent to the statistics: taken before and after.)"""
    with probe.transaction():
        before = probe.execute(READS).fetchone()
        for statement, params in calls:
            assert probe.execute(statement, params).fetchall()
        after = probe.execute(READS).fetchone()
    return (after[0] - before[0], after[1] - before[1], after[2] - before[2])


def test_claims_and_completes_read_rows_by_key_whatever_the_planner_counted(
        postgres_url: str) -> None:
    # Statistics taken while nothing ran cost task_running (the running versions' index) as
    # empty and run_slot as one page: a plan made on them (and kept for the session) reads a
    # complete's row through every running version's entry and the slot rows whole, a cost
    # that grows with the versions running, and the ready versions' check reads the table past
    # every version claimed so far. In a new session, six of each step (the sixth on the plan
    # kept), each kind in a transaction of its own: none reads a table whole, and a complete
    # reads no running version's entry.
    db = open_store(postgres_url, max_concurrency=200)
    db.submit_many({"id": f"t{i:04}", "fn": NOOP} for i in range(5000))
    probe = session(postgres_url)
    try:
        probe.execute("ANALYZE")
        db.start()
        leases = [lease for _ in range(15) for lease in db.claim("w", limit=10)]
        assert len(leases) == 150
        # as an idle worker and a wake-up ask it, before a claim (which asks it too) has
        claimable = ("SELECT refsched_claimable(false, %s)", (db.max_concurrency,))
        assert reads_of(probe, [claimable] * 6)[:2] == (0, 0)
        assert reads_of(probe, [(COMPLETE, complete_args(db, lease))
                                for lease in leases[:6]]) == (0, 0, 0)
        batch = leases[6:12]  # a batch of six reports, one call
        assert reads_of(probe, [(COMPLETE_MANY, (*complete_args(db, batch[0])[:5],
                                                 *([getattr(x, f) for x in batch] for f in (
                                                     "task_id", "generation", "attempt",
                                                     "worker")), ["null"] * 6))]) == (0, 0, 0)
        assert reads_of(probe, [(CLAIM, claim_args(db, f"v{i}", 8)) for i in range(6)])[:2] \
            == (0, 0)
        db.check_invariants()
        assert db.stats().succeeded == 12 and db.stats().claimed == 150 + 48
    finally:
        probe.close()
        db.release()
