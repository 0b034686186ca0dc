"""The durable scheduler against the queue a user would pick instead, with real worker processes.

- flat: N no-op tasks through 4 worker processes, from the first submit to the last result:
  refsched's SQLite store with ``refsched worker`` against Huey's ``SqliteHuey`` with
  ``huey_consumer -w 4 -k process`` (its documented multi-process consumer);
- dag: a layered DAG of N tasks through durable workers against the in-memory Runner on as
  many threads: the cost of durability;
- claims: claims per second of the store, one process claiming and completing in a loop.

Each contender starts its workers before the clock starts and stops them after it stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOOP = "refsched.durable.jobs:noop"


def _wait_until(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.002)


def _through_workers(tasks: dict[str, list[str]], processes: int) -> float:
    """Seconds from the first submit of ``tasks`` (id -> deps) to the last completion, through
    ``processes`` worker processes started beforehand."""
    from refsched.durable import DurableScheduler

    folder = Path(tempfile.mkdtemp(prefix="refsched-bench-"))
    url = f"sqlite:///{folder / 'store.db'}"
    db = DurableScheduler(url, max_concurrency=processes)
    workers = [subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url,
                                 "--until-done", "--poll", "0.02"], cwd=ROOT)
               for _ in range(processes)]
    try:
        time.sleep(1.0)  # the workers are up and polling
        began = time.perf_counter()
        for t, deps in tasks.items():
            db.submit(t, deps, fn=NOOP)
        db.start()
        for w in workers:
            w.wait(1800)
        elapsed = time.perf_counter() - began
        assert db.stats().succeeded == len(tasks)
        return elapsed
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        db.release()
        shutil.rmtree(folder, ignore_errors=True)


def durable_flat(n: int, processes: int = 4) -> float:
    """Seconds from the first submit to the last completion of ``n`` independent tasks."""
    return _through_workers({f"t{i}": [] for i in range(n)}, processes)


def huey_flat(n: int, processes: int = 4) -> float:
    """The same through Huey's SQLite storage and its process consumer."""
    folder = Path(tempfile.mkdtemp(prefix="refsched-bench-huey-"))
    env = {**os.environ, "HUEY_DB": str(folder / "huey.db"), "PYTHONPATH": str(HERE)}
    os.environ["HUEY_DB"] = env["HUEY_DB"]
    sys.path.insert(0, str(HERE))
    import importlib

    import huey_tasks
    huey_tasks = importlib.reload(huey_tasks)
    consumer = subprocess.Popen(
        [str(Path(sys.executable).parent / "huey_consumer"), "huey_tasks.huey", "-w",
         str(processes), "-k", "process", "-d", "0.01", "-m", "0.05", "-q"],
        cwd=folder, env=env)
    try:
        time.sleep(1.0)
        began = time.perf_counter()
        results = [huey_tasks.noop() for _ in range(n)]
        for r in results:
            r.get(blocking=True, timeout=600)
        return time.perf_counter() - began
    finally:
        consumer.send_signal(signal.SIGINT)
        try:
            consumer.wait(30)
        except subprocess.TimeoutExpired:
            consumer.kill()
        shutil.rmtree(folder, ignore_errors=True)


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


def durable_dag(n: int, processes: int = 4) -> float:
    """A layered DAG of ``n`` no-op tasks through durable worker processes: submit to done."""
    return _through_workers(_layered(n), processes)


def runner_dag(n: int, processes: int = 4) -> float:
    """The same DAG on the in-memory Runner with as many threads: no durability."""
    from refsched import Runner

    def noop() -> int:
        return 1

    began = time.perf_counter()
    with Runner(max_workers=processes) as runner:
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


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for _ in range(2):
        ours, theirs = durable_flat(n), huey_flat(n)
        print(f"flat {n}: refsched {ours:.2f} s, huey {theirs:.2f} s, ratio {ours / theirs:.2f}")
