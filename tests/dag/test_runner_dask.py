"""``Runner(executor=client.get_executor())`` over a dask.distributed LocalCluster.

Two worker processes (one thread each) run the functions of tests/dag/dask_jobs.py; the Runner
decides what runs when. The tests read what happened from the results and from a log the
functions append to (see dask_jobs), never from timing: every wait is bounded (``LONG``), and a
bug fails a test instead of stalling the run. The cluster is module-scoped, closed at the end, and
its processes are checked to be gone.

The executor is made with ``pure=False``: by default dask names a task by a hash of the function
and its arguments, so a second submission of an equal function (a retry, or two tasks with equal
``partial``s) could be served the first one's result instead of running.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from refsched import BlockedError, Runner, TaskState
from tests.dag import dask_jobs

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")  # a dependency of distributed

LONG = 30.0  # seconds: only reached when something is broken

# A diamond (a -> b, c -> d), a chain hanging off it (d -> e -> f -> g), and a separate chain
# (p -> q -> r): 10 tasks, each with the value it adds of its own.
DAG: dict[str, list[str]] = {
    "a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"],
    "e": ["d"], "f": ["e"], "g": ["f"],
    "p": [], "q": ["p"], "r": ["q"],
}
OWN = {task_id: i + 1 for i, task_id in enumerate(DAG)}


def expected_values() -> dict[str, int]:
    """What dask_jobs.node computes for every task of DAG, computed here in dependency order."""
    values: dict[str, int] = {}
    for task_id, deps in DAG.items():  # DAG lists every task after its dependencies
        values[task_id] = OWN[task_id] + 2 * sum(values[d] for d in deps)
    return values


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded by LONG) until ``condition()`` holds: for what another process does."""
    deadline = time.monotonic() + LONG
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None)
    dask_client = distributed.Client(cluster, timeout=LONG)
    try:
        dask_client.wait_for_workers(2, timeout=LONG)
        worker_pids = list(dask_client.run(lambda: __import__("os").getpid()).values())
        yield dask_client
    finally:
        dask_client.close(timeout=LONG)
        cluster.close(timeout=LONG)
    # Nothing left behind: the nannies (children of this process) and the workers are gone.
    _until(lambda: not multiprocessing.active_children(), "the nanny processes to exit")
    for pid in worker_pids:
        _until(lambda pid=pid: not _alive(pid), f"worker process {pid} to exit")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_dag_runs_on_dask_workers_with_right_values_in_dependency_order(
        client: distributed.Client, tmp_path: Path) -> None:
    workdir = str(tmp_path)
    executor = client.get_executor(pure=False)
    with Runner(max_workers=2, executor=executor) as runner:
        futures = {
            task_id: runner.submit(
                task_id, functools.partial(dask_jobs.node, workdir, task_id, deps, OWN[task_id]),
                deps)
            for task_id, deps in DAG.items()
        }
        runner.start()
        assert runner.wait(LONG)
        results = {task_id: f.result(timeout=LONG) for task_id, f in futures.items()}

    assert {t: value for t, (value, _) in results.items()} == expected_values()
    # Run in the worker processes, not here.
    worker_pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert {pid for _, pid in results.values()} <= worker_pids
    assert multiprocessing.current_process().pid not in worker_pids
    assert all(runner.scheduler.info(t).state is TaskState.SUCCEEDED for t in DAG)

    log = dask_jobs.read_log(workdir)
    position = {(event, t): i for i, (event, t, _) in enumerate(log)}
    assert len(position) == len(log) == 2 * len(DAG)  # each ran exactly once, start and end
    for task_id, deps in DAG.items():
        for dep in deps:
            assert position[("end", dep)] < position[("start", task_id)], (dep, task_id, log)


def test_a_failing_function_fails_its_future_and_blocks_its_dependents(
        client: distributed.Client, tmp_path: Path) -> None:
    workdir = str(tmp_path)
    executor = client.get_executor(pure=False)
    with Runner(max_workers=2, executor=executor) as runner:
        ok = runner.submit("ok", functools.partial(dask_jobs.node, workdir, "ok", [], 5))
        bad = runner.submit("bad", functools.partial(dask_jobs.fail, workdir, "bad", "remote boom"),
                            ["ok"])
        child = runner.submit("child", functools.partial(dask_jobs.node, workdir, "child", [], 1),
                              ["bad"])
        grandchild = runner.submit(
            "grandchild", functools.partial(dask_jobs.node, workdir, "grandchild", [], 1),
            ["child"])
        other = runner.submit("other", functools.partial(dask_jobs.node, workdir, "other", [], 7))
        runner.start()
        assert runner.wait(LONG)

        assert ok.result(timeout=LONG)[0] == 5
        assert other.result(timeout=LONG)[0] == 7
        error = bad.exception(timeout=LONG)
        assert isinstance(error, dask_jobs.JobError)
        assert str(error) == "remote boom"
        with pytest.raises(dask_jobs.JobError, match="remote boom"):
            bad.result(timeout=LONG)
        for future, blocked_by in ((child, "bad"), (grandchild, "child")):
            blocked = future.exception(timeout=LONG)
            assert isinstance(blocked, BlockedError)
            assert blocked.task_id == future.task_id
            assert blocked.blocked_by == blocked_by
            assert runner.scheduler.info(future.task_id).state is TaskState.BLOCKED

    started = {t for event, t, _ in dask_jobs.read_log(workdir) if event == "start"}
    assert started == {"ok", "bad", "other"}  # the blocked never ran


def test_cancel_of_a_running_function_cancels_its_future_while_dask_still_runs_it(
        client: distributed.Client, tmp_path: Path) -> None:
    """ClientExecutor's futures stay PENDING until the task ends, so the Runner's withdrawal
    (``remote.cancel()``) succeeds even on a function a worker is running: the version ends
    cancelled at once (dependents blocked), and the function runs on, its result dropped."""
    workdir = str(tmp_path)
    executor = client.get_executor(pure=False)
    with Runner(max_workers=2, executor=executor) as runner:
        held = runner.submit("held", functools.partial(dask_jobs.hold, workdir, "held", LONG))
        after = runner.submit("after", functools.partial(dask_jobs.node, workdir, "after", [], 1),
                              ["held"])
        runner.start()
        _until(lambda: ("start", "held") in {(e, t) for e, t, _ in dask_jobs.read_log(workdir)},
               "the held function to start on a worker")
        assert runner.cancel("held") is TaskState.RUNNING
        with pytest.raises(CancelledError):
            held.result(timeout=LONG)
        assert isinstance(after.exception(timeout=LONG), BlockedError)
        assert runner.wait(LONG)
        assert runner.scheduler.info("held").state is TaskState.CANCELLED
        # The function is still running on its worker: it has not logged its end.
        assert ("end", "held") not in {(e, t) for e, t, _ in dask_jobs.read_log(workdir)}
        Path(workdir, "held.release").touch()
        _until(lambda: ("end", "held") in {(e, t) for e, t, _ in dask_jobs.read_log(workdir)},
               "the held function to return once released")
