"""WorkStealingPool against ThreadPoolExecutor, measured side by side in one process.

    python bench/pool.py [--rounds N] [--workers W] [--flat N] [--depth D] [--hang-timeout S]
                         [--burst N] [--only-steals]

Workloads, each with ``W`` workers (default 4) on both sides:

- flat: ``N`` (default 100,000) no-op submissions from one outside thread, then
  ``concurrent.futures.wait()`` on all of them.
- fork-join: a full binary tree with ``2**D`` leaves (default D = 16), counted recursively. On
  the pool each node submits its two children and waits on their futures from inside the task
  (nested waits). ThreadPoolExecutor deadlocks on that code (every worker ends up blocked in
  ``result()`` on a child queued behind it), so its side runs the same tree restructured without
  nested waits: each node submits its two children and returns, and a leaf reports its count up
  the tree through per-node join counters; the last child of a node to report carries the sum on
  to the parent. Both sides run one task per node, 2**(D+1) - 1 in all.
- the deadlock itself: the nested-wait tree on ThreadPoolExecutor, in a subprocess killed after
  ``--hang-timeout`` seconds (default 5).
- fork-join with blocking: a tree of ``--blocking-tasks`` tasks (default 2,000), each of which
  sleeps ``--block-ms`` (default 5 ms) inside ``pool.blocking()``, then submits its children (two
  subtrees splitting the rest) and waits on them. Three contenders: the pool (managed blocking:
  spares stand in for the sleepers), an ideal pool with unlimited threads
  (``ThreadPoolExecutor(max_workers=tasks)``, a thread per task, nested waits included), and the
  same pool without managed blocking (``max_spares=0``: ``blocking()`` does nothing, and four
  threads sleep in turn). Ratios: pool / ideal (target <= 1.2) and pool / no managed blocking.
- steals: an unbalanced tree (a long spine, each node forking one slow leaf) on the pool; its
  ``stats().stolen`` must be above 0.
- batch steals: the pool with ``steal="half"`` (``steal_cap`` 32) against the same pool with
  ``steal="single"`` and against ThreadPoolExecutor, three contenders in one run, on the
  fork-join tree above (cheap leaves: batch stealing must be no slower) and on a burst (one
  task submits ``--burst`` tasks of 100 µs each, I/O-like: they sleep, the GIL let go, then
  waits on them all; the same code on both executors). Ratios are half / single and half /
  ThreadPoolExecutor within one round.

The contenders of a comparison run interleaved, round after round, their order alternated each
round, with a full garbage collection before each run; the collector stays on while timing. Each
time includes starting and shutting down the workers. A ratio is pool / ThreadPoolExecutor within
one round; the table gives the median ratio over the rounds and its range.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gc
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

from refsched import WorkStealingPool

Executor = cf.Executor

# The standard sizes, shared with bench/run.py's pool section.
WORKERS = 4
ROUNDS = 5
FLAT_SUBMISSIONS = 100_000
TREE_DEPTH = 16  # fork-join: 2**TREE_DEPTH leaves
HANG_TIMEOUT = 5.0  # seconds the deadlocking ThreadPoolExecutor gets before it is killed
STEAL_SPINE = 64  # spine nodes of the unbalanced tree
BURST_TASKS = 4_000  # tasks one task submits densely in the batch-steal burst
BURST_COST = 0.0001  # seconds each burst task sleeps
STEAL_CAP = 32  # the batch pool's steal_cap


def _noop() -> None:
    return None


# -- flat ----------------------------------------------------------------------------------

def flat_pool(n: int, workers: int) -> int:
    with WorkStealingPool(workers=workers) as pool:
        futures = [pool.submit(_noop) for _ in range(n)]
        cf.wait(futures)
    return len(futures)


def flat_tpe(n: int, workers: int) -> int:
    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_noop) for _ in range(n)]
        cf.wait(futures)
    return len(futures)


# -- fork-join -----------------------------------------------------------------------------

def tree_nested(pool: Executor, depth: int) -> int:
    """Leaves of a full binary tree of ``depth``, by fork-join with nested waits."""
    if depth == 0:
        return 1
    left = pool.submit(tree_nested, pool, depth - 1)
    right = pool.submit(tree_nested, pool, depth - 1)
    return int(left.result()) + int(right.result())


def forkjoin_pool(depth: int, workers: int) -> int:
    with WorkStealingPool(workers=workers) as pool:
        return pool.submit(tree_nested, pool, depth).result()


class _Join:
    """A tree node waiting for its children's counts (ThreadPoolExecutor's restructured tree)."""

    __slots__ = ("lock", "parent", "pending", "total")

    def __init__(self, parent: _Join | None, pending: int) -> None:
        self.parent = parent  # the node to report to once both children have; None: the root
        self.pending = pending  # children that have not reported yet
        self.total = 0  # the sum of the counts reported so far
        self.lock = threading.Lock()  # guards pending and total


def forkjoin_tpe(depth: int, workers: int) -> int:
    done: cf.Future[int] = cf.Future()

    def report(node: _Join | None, count: int) -> None:
        while node is not None:
            with node.lock:
                node.total += count
                node.pending -= 1
                last = node.pending == 0
            if not last:
                return
            count, node = node.total, node.parent
        done.set_result(count)

    def expand(parent: _Join | None, d: int) -> None:
        if d == 0:
            report(parent, 1)
            return
        node = _Join(parent, 2)
        pool.submit(expand, node, d - 1)
        pool.submit(expand, node, d - 1)

    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        pool.submit(expand, None, depth)
        return done.result()


_HANG = textwrap.dedent("""
    import concurrent.futures as cf, sys
    sys.path.insert(0, {here!r})
    from pool import tree_nested
    pool = cf.ThreadPoolExecutor(max_workers={workers})
    print(pool.submit(tree_nested, pool, {depth}).result(), flush=True)
""")


def tpe_nested_hangs(depth: int, workers: int, timeout: float) -> str:
    """Run the nested-wait tree on ThreadPoolExecutor in a subprocess; describe the outcome."""
    code = _HANG.format(here=os.path.dirname(os.path.abspath(__file__)), workers=workers,
                        depth=depth)
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"deadlocked: no result after {timeout:g} s (killed)"
    took = time.perf_counter() - start
    return f"finished in {took:.2f} s: {done.stdout.strip() or done.stderr.strip()[-200:]}"


# -- fork-join with blocking ----------------------------------------------------------------

BLOCKING_TASKS = 2_000
BLOCK_MS = 5.0


def blocking_tree(ex: Executor, blocking: Callable[[], Any], n: int, block_s: float) -> int:
    """A node of ``n`` tasks: block, then fork the other ``n - 1`` as two subtrees and join."""
    with blocking():
        time.sleep(block_s)
    rest = n - 1
    if rest == 0:
        return 1
    halves = [h for h in (rest // 2, rest - rest // 2) if h]
    futures = [ex.submit(blocking_tree, ex, blocking, h, block_s) for h in halves]
    return 1 + sum(f.result() for f in futures)


def blocking_pool(n: int, block_s: float, workers: int, max_spares: int | None = None) -> int:
    kwargs = {} if max_spares is None else {"max_spares": max_spares}
    with WorkStealingPool(workers, **kwargs) as pool:
        return int(pool.submit(blocking_tree, pool, pool.blocking, n, block_s).result())


def blocking_ideal(n: int, block_s: float) -> int:
    import contextlib
    with cf.ThreadPoolExecutor(max_workers=n) as ex:
        return int(ex.submit(blocking_tree, ex, contextlib.nullcontext, n, block_s).result())


def compare_blocking(n: int, block_s: float, workers: int, rounds: int) -> dict[str, Any]:
    """The three contenders, interleaved round by round; median times and per-round ratios."""
    names = ("pool", "ideal", "no managed blocking")
    runs: dict[str, Callable[[], int]] = {
        "pool": lambda: blocking_pool(n, block_s, workers),
        "ideal": lambda: blocking_ideal(n, block_s),
        "no managed blocking": lambda: blocking_pool(n, block_s, workers, max_spares=0),
    }
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = list(names) if r % 2 == 0 else list(reversed(names))
        for name in order:
            took, value = _timed(runs[name])
            if value != n:
                raise AssertionError(f"blocking tree, {name}: got {value!r}, expected {n}")
            times[name].append(took)
        print(f"  blocking tree round {r + 1}: "
              + ", ".join(f"{name} {times[name][-1]:.3f} s" for name in names), flush=True)
    ideal = [a / b for a, b in zip(times["pool"], times["ideal"], strict=True)]
    unmanaged = [a / b for a, b in zip(times["pool"], times["no managed blocking"], strict=True)]
    return {"times": {name: statistics.median(t) for name, t in times.items()},
            "ideal": (statistics.median(ideal), min(ideal), max(ideal)),
            "unmanaged": (statistics.median(unmanaged), min(unmanaged), max(unmanaged))}


# -- steals --------------------------------------------------------------------------------

def _slow_leaf() -> int:
    time.sleep(0.0005)
    return 1


def skewed(pool: Executor, depth: int) -> int:
    """A spine of ``depth`` nodes, each also forking one slow leaf."""
    if depth == 0:
        return _slow_leaf()
    spine = pool.submit(skewed, pool, depth - 1)
    leaf = pool.submit(_slow_leaf)
    return int(spine.result()) + int(leaf.result())


def steals_on_unbalanced_tree(depth: int, workers: int) -> tuple[int, int, int]:
    with WorkStealingPool(workers=workers) as pool:
        leaves = pool.submit(skewed, pool, depth).result()
    stats = pool.stats()
    return leaves, stats.stolen, stats.executed


# -- batch steals --------------------------------------------------------------------------

# (workload, steal policy) -> (steals, tasks they took) of its last run: a mean batch of 1
# means the policy took no batch there.
LAST_STEALS: dict[tuple[str, str], tuple[int, int]] = {}


def _steals_of(pool: WorkStealingPool, workload: str, steal: str) -> None:
    stats = pool.stats()
    LAST_STEALS[workload, steal] = (stats.stolen, stats.stolen_tasks)


def forkjoin_pool_steal(depth: int, workers: int, steal: str) -> int:
    with WorkStealingPool(workers=workers, steal=steal, steal_cap=STEAL_CAP) as pool:
        value = pool.submit(tree_nested, pool, depth).result()
    _steals_of(pool, "fork-join", steal)
    return value


def _burst_task(cost: float) -> int:
    time.sleep(cost)
    return 1


def _burst_root(pool: Executor, tasks: int, cost: float) -> int:
    futures = [pool.submit(_burst_task, cost) for _ in range(tasks)]
    return sum(f.result() for f in futures)


def burst_pool(tasks: int, cost: float, workers: int, steal: str) -> int:
    with WorkStealingPool(workers=workers, steal=steal, steal_cap=STEAL_CAP) as pool:
        value = pool.submit(_burst_root, pool, tasks, cost).result()
    _steals_of(pool, "burst", steal)
    return value


def burst_tpe(tasks: int, cost: float, workers: int) -> int:
    # the root holds one worker while it waits; the other workers run the burst
    with cf.ThreadPoolExecutor(max_workers=workers) as pool:
        return pool.submit(_burst_root, pool, tasks, cost).result()


def compare_steals(name: str, half: Callable[[], Any], single: Callable[[], Any],
                   peer: Callable[[], Any], expected: Any, rounds: int) -> dict[str, Any]:
    """Three contenders interleaved, the order rotated each round; per-round ratios."""
    contenders = [("half", half), ("single", single), ("ThreadPoolExecutor", peer)]
    times: dict[str, list[float]] = {label: [] for label, _ in contenders}
    for r in range(rounds):
        for label, fn in contenders[r % 3:] + contenders[:r % 3]:
            took, value = _timed(fn)
            if value != expected:
                raise AssertionError(f"{name}: {label} got {value!r}, expected {expected!r}")
            times[label].append(took)
        print(f"  {name} round {r + 1}: "
              + ", ".join(f"{label} {times[label][-1]:.3f} s" for label, _ in contenders),
              flush=True)
    vs_single = [a / b for a, b in zip(times["half"], times["single"], strict=True)]
    vs_tpe = [a / b for a, b in zip(times["half"], times["ThreadPoolExecutor"], strict=True)]
    return {"name": name, **{label: statistics.median(t) for label, t in times.items()},
            "vs_single": statistics.median(vs_single), "single_range": (min(vs_single),
                                                                        max(vs_single)),
            "vs_tpe": statistics.median(vs_tpe), "tpe_range": (min(vs_tpe), max(vs_tpe))}


def batch_steal_table(depth: int, burst: int, workers: int, rounds: int) -> list[str]:
    """The batch-steal comparison, as Markdown table lines."""
    rows = [
        compare_steals(f"fork-join: 2**{depth} cheap leaves (ThreadPoolExecutor: restructured)",
                       lambda: forkjoin_pool_steal(depth, workers, "half"),
                       lambda: forkjoin_pool_steal(depth, workers, "single"),
                       lambda: forkjoin_tpe(depth, workers), 2 ** depth, rounds),
        compare_steals(f"burst: one task submits {burst:,} tasks of {BURST_COST * 1e6:g} µs "
                       "(sleeping) and waits on them",
                       lambda: burst_pool(burst, BURST_COST, workers, "half"),
                       lambda: burst_pool(burst, BURST_COST, workers, "single"),
                       lambda: burst_tpe(burst, BURST_COST, workers), burst, rounds),
    ]
    lines = ["| workload | half | single | ThreadPoolExecutor | half / single: median [range] "
             "| half / ThreadPoolExecutor | steals (tasks taken), last round: half; single |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    for row, workload in zip(rows, ("fork-join", "burst"), strict=True):
        lo, hi = row["single_range"]
        tlo, thi = row["tpe_range"]
        steals = "; ".join(f"{n:,} ({k:,})" for n, k in (LAST_STEALS[workload, "half"],
                                                        LAST_STEALS[workload, "single"]))
        lines.append(f"| {row['name']} | {row['half']:.3f} s | {row['single']:.3f} s | "
                     f"{row['ThreadPoolExecutor']:.3f} s | **{row['vs_single']:.2f}** "
                     f"[{lo:.2f}-{hi:.2f}] | {row['vs_tpe']:.2f} [{tlo:.2f}-{thi:.2f}] | "
                     f"{steals} |")
    return lines


# -- driver --------------------------------------------------------------------------------

def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def compare(name: str, ours: Callable[[], Any], peer: Callable[[], Any], expected: Any,
            rounds: int, target: float) -> dict[str, Any]:
    ours_s: list[float] = []
    peer_s: list[float] = []
    for r in range(rounds):
        order = [(ours, ours_s), (peer, peer_s)]
        if r % 2:
            order.reverse()
        for fn, times in order:
            took, value = _timed(fn)
            if value != expected:
                raise AssertionError(f"{name}: got {value!r}, expected {expected!r}")
            times.append(took)
        print(f"  {name} round {r + 1}: pool {ours_s[-1]:.3f} s, "
              f"ThreadPoolExecutor {peer_s[-1]:.3f} s, ratio {ours_s[-1] / peer_s[-1]:.2f}",
              flush=True)
    ratios = [a / b for a, b in zip(ours_s, peer_s, strict=True)]
    return {"name": name, "ours": statistics.median(ours_s), "peer": statistics.median(peer_s),
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios),
            "target": target}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--flat", type=int, default=FLAT_SUBMISSIONS,
                        help="flat no-op submissions")
    parser.add_argument("--depth", type=int, default=TREE_DEPTH,
                        help="fork-join tree: 2**depth leaves")
    parser.add_argument("--hang-timeout", type=float, default=HANG_TIMEOUT)
    parser.add_argument("--blocking-tasks", type=int, default=BLOCKING_TASKS,
                        help="fork-join with blocking: tasks in the tree")
    parser.add_argument("--block-ms", type=float, default=BLOCK_MS,
                        help="fork-join with blocking: each task's sleep inside blocking()")
    parser.add_argument("--burst", type=int, default=BURST_TASKS,
                        help="tasks of the batch-steal burst")
    parser.add_argument("--only-steals", action="store_true",
                        help="run only the batch-steal comparison")
    args = parser.parse_args(argv)
    w = args.workers
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}; "
          f"load average {' / '.join(f'{x:.2f}' for x in load)}; {w} workers, "
          f"{args.rounds} rounds")
    if args.only_steals:
        print("\n".join(["", *batch_steal_table(args.depth, args.burst, w, args.rounds)]))
        return 0

    rows = [
        compare(f"flat: {args.flat:,} no-op submissions",
                lambda: flat_pool(args.flat, w), lambda: flat_tpe(args.flat, w), args.flat,
                args.rounds, 1.0),
        compare(f"fork-join: 2**{args.depth} leaves (pool: nested waits; "
                "ThreadPoolExecutor: restructured, no nested waits)",
                lambda: forkjoin_pool(args.depth, w), lambda: forkjoin_tpe(args.depth, w),
                2 ** args.depth, args.rounds, 1.0),
    ]
    print()
    print("| workload | pool (median) | ThreadPoolExecutor (median) | pool / TPE: median [range] "
          "| target |")
    print("|---|--:|--:|--:|---|")
    for row in rows:
        ok = "✓" if row["ratio"] <= row["target"] else "✗"
        print(f"| {row['name']} | {row['ours']:.3f} s | {row['peer']:.3f} s | "
              f"**{row['ratio']:.2f}** [{row['low']:.2f}-{row['high']:.2f}] | "
              f"≤ {row['target']:g} {ok} |")
    n, block_ms = args.blocking_tasks, args.block_ms
    blocked = compare_blocking(n, block_ms / 1000, w, args.rounds)
    t = blocked["times"]
    print()
    print(f"| fork-join with blocking: {n:,} tasks, each {block_ms:g} ms in blocking(), {w} "
          "workers | median time | pool / it: median [range] | target |")
    print("|---|--:|--:|---|")
    print(f"| pool (managed blocking) | {t['pool']:.3f} s | | |")
    r, lo, hi = blocked["ideal"]
    print(f"| ideal pool, unlimited threads (ThreadPoolExecutor({n})) | {t['ideal']:.3f} s | "
          f"**{r:.2f}** [{lo:.2f}-{hi:.2f}] | ≤ 1.2 {'✓' if r <= 1.2 else '✗'} |")
    r, lo, hi = blocked["unmanaged"]
    print(f"| the same pool without managed blocking (max_spares=0) | "
          f"{t['no managed blocking']:.3f} s | **{r:.2f}** [{lo:.2f}-{hi:.2f}] | |")
    print()
    print(f"ThreadPoolExecutor({w}) on the nested-wait tree (2**{args.depth} leaves): "
          f"{tpe_nested_hangs(args.depth, w, args.hang_timeout)}")
    leaves, stolen, executed = steals_on_unbalanced_tree(STEAL_SPINE, w)
    print(f"Unbalanced tree ({STEAL_SPINE} spine nodes, each forking a slow leaf) on the pool: "
          f"{leaves} leaves, {executed} tasks, {stolen} steals "
          f"{'✓' if stolen > 0 else '✗ (expected > 0)'}")
    print("\nBatch steals (steal=\"half\", steal_cap 32) against single steals and "
          "ThreadPoolExecutor:")
    print("\n".join(batch_steal_table(args.depth, args.burst, w, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
