"""Context switches per task of the threaded contenders: what shows a lock convoy, which a
profile does not.

    python bench/switches.py                      # every contender below
    python bench/switches.py runner_refsched flat_pool --runs 5

Each contender runs its workload ``--runs`` times in this process; the voluntary and involuntary
context switches the process made during each run (``getrusage``) are divided by the workload's
tasks, and the medians printed with the median time. A thread that blocks on a lock, a condition
or a queue makes a voluntary switch; a convoy on a lock makes about one per acquisition.
Workloads: the runners' 20,000-node layered DAG (``--nodes``) on 4 threads; the pools' 100,000
flat no-op submissions and fork-join tree of 2**16 leaves (2**17 - 1 tasks) on 4 workers.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable, Sequence

import contenders
import pool
from graphs import layered

FLAT = 100_000  # submissions
DEPTH = 16  # the fork-join tree's depth: 2**16 leaves
WORKERS = 4

# name -> (the workload's task count, a run of it that returns the tasks it finished)
Workload = tuple[int, Callable[[], int]]


def workloads(nodes: int) -> dict[str, Callable[[], Workload]]:
    def runner(name: str) -> Callable[[], Workload]:
        def build() -> Workload:
            graph = layered(nodes)
            return len(graph), lambda: getattr(contenders, name)(graph)
        return build

    tree = 2 ** (DEPTH + 1) - 1
    return {
        "runner_refsched": runner("runner_refsched"),
        "runner_graphlib_pool": runner("runner_graphlib_pool"),
        "runner_dask": runner("runner_dask"),
        "flat_pool": lambda: (FLAT, lambda: pool.flat_pool(FLAT, WORKERS)),
        "flat_tpe": lambda: (FLAT, lambda: pool.flat_tpe(FLAT, WORKERS)),
        # they return the leaves counted: the check is that every leaf was
        "forkjoin_pool": lambda: (tree, lambda: pool.forkjoin_pool(DEPTH, WORKERS) * 2 - 1),
        "forkjoin_tpe": lambda: (tree, lambda: pool.forkjoin_tpe(DEPTH, WORKERS) * 2 - 1),
    }


def switches(name: str, workload: Workload, runs: int) -> tuple[float, float, float]:
    """Median voluntary and involuntary switches per task, and median seconds, over ``runs``."""
    tasks, run = workload
    voluntary, involuntary, seconds = [], [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        finished = run()
        seconds.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_SELF)
        if finished != tasks:
            raise SystemExit(f"{name} finished {finished} of {tasks} tasks")
        voluntary.append((after.ru_nvcsw - before.ru_nvcsw) / tasks)
        involuntary.append((after.ru_nivcsw - before.ru_nivcsw) / tasks)
    return (statistics.median(voluntary), statistics.median(involuntary),
            statistics.median(seconds))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Context switches per task of the threaded contenders.")
    parser.add_argument("--nodes", type=int, default=20_000,
                        help="nodes of the runners' DAG (default 20000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each contender (default 3)")
    parser.add_argument("contenders", nargs="*", metavar="contender",
                        help="contenders to run (default: all): " + ", ".join(workloads(1)))
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.runs < 1:
        parser.error("--nodes and --runs must be at least 1")
    table = workloads(args.nodes)
    names = args.contenders or list(table)
    for name in names:
        if name not in table:
            parser.error(f"no contender {name!r}; choose from {', '.join(table)}")
    print(f"{'contender':<22} {'voluntary/task':>15} {'involuntary/task':>17} {'median s':>9}")
    for name in names:
        if name == "runner_dask" and contenders.dask_version() is None:
            print(f"{name:<22} skipped: dask is not installed")
            continue
        vol, invol, secs = switches(name, table[name](), args.runs)
        print(f"{name:<22} {vol:>15.3f} {invol:>17.3f} {secs:>9.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
