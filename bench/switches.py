"""Context switches per task of the runners: what shows a lock convoy, which a profile does not.

    python bench/switches.py --nodes 20000 --runs 3

Each contender runs the same layered DAG ``--runs`` times in this process; the voluntary and
involuntary context switches the process made during each run (``getrusage``) are divided by
the graph's size and the median printed. A thread that blocks on a lock or a queue makes a
voluntary switch; a convoy on a lock makes about one per acquisition.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Sequence

import contenders
from graphs import layered

RUNNERS = ("runner_refsched", "runner_graphlib_pool", "runner_dask")


def switches(name: str, nodes: int, runs: int) -> tuple[float, float, float]:
    """Median voluntary and involuntary switches per task, and median seconds, over ``runs``."""
    contender = getattr(contenders, name)
    graph = layered(nodes)
    voluntary, involuntary, seconds = [], [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        finished = contender(graph)
        seconds.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_SELF)
        if finished != nodes:
            raise SystemExit(f"{name} finished {finished} of {nodes} tasks")
        voluntary.append((after.ru_nvcsw - before.ru_nvcsw) / nodes)
        involuntary.append((after.ru_nivcsw - before.ru_nivcsw) / nodes)
    return (statistics.median(voluntary), statistics.median(involuntary),
            statistics.median(seconds))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000, help="tasks in the DAG (20000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each contender (3)")
    parser.add_argument("contenders", nargs="*", default=RUNNERS,
                        help=f"functions of bench/contenders.py (default: {' '.join(RUNNERS)})")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.runs < 1:
        parser.error("--nodes and --runs must be at least 1")
    for name in args.contenders:
        if not callable(getattr(contenders, name, None)):
            parser.error(f"no contender {name!r} in bench/contenders.py")
    print(f"{'contender':<24} {'voluntary/task':>15} {'involuntary/task':>17} {'median s':>9}")
    for name in args.contenders:
        if name == "runner_dask" and contenders.dask_version() is None:
            print(f"{name:<24} skipped: dask is not installed")
            continue
        vol, invol, secs = switches(name, args.nodes, args.runs)
        print(f"{name:<24} {vol:>15.3f} {invol:>17.3f} {secs:>9.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
