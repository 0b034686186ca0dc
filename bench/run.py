"""Benchmarks of refsched against the peers users would pick instead, measured side by side.

    python bench/run.py [--quick] [--out bench/results] [--only core,runner,memory,sync,timer,pool]

(the sections durable and durable-postgres too; durable-postgres starts a throwaway PostgreSQL
server of tests/pgserver.py, or uses the one whose base URL REFSCHED_BENCH_POSTGRES gives, and is
skipped when there is none; its peers are Procrastinate and PgQueuer, from `pip install -e
".[bench]"`, and Graphile Worker, which it installs into bench/graphile with `npm ci` when that
folder has no node_modules).

The durable sections' contenders run worker processes; each run has a deadline
(bench/durable.py RUN_TIMEOUT), and a run that fails or passes it ends its row's rounds, the
row saying why, so that a run of the benchmark always ends.

Every contender gets the same graph objects (bench/graphs.py: fixed seeds) in one process. The
contenders of a comparison run interleaved, round after round, their order rotated each round,
with a full garbage collection before each run (garbage left by one contender is not charged to
the next). The collector stays on while timing, since its cost is part of the real cost, except in
the ``*_gc_off`` contenders, which pause it to show the algorithms' own cost. A ratio is ours /
peer within one round; the table gives the median ratio over the rounds and
its range, next to each side's best and median time.

Writes RESULTS.md and results.json (the raw times) to the output folder, and scaling.png (and
durable-postgres.png for that section) when matplotlib is installed. --quick (about a minute)
stops at V = 100,000 and runs fewer rounds.
A run of some sections (--only) writes only to a folder named with --out, and otherwise prints
its report: bench/results holds the report of a full run, which a partial one would cut short.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import contenders as c
import durable
import graphs
import pool
import timers
from graphs import Graph

HERE = Path(__file__).resolve().parent


@dataclass
class Comparison:
    """Times of refsched and one peer on one workload, one entry per round."""

    section: str
    workload: str
    nodes: int
    edges: int
    ours: str
    peer: str
    ours_s: list[float]
    peer_s: list[float]
    target: float | None = None  # the ratio ours / peer must not exceed this
    failed: str = ""  # why a run of the row failed (its times then stop there)

    @property
    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.ours_s, self.peer_s, strict=True)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


@dataclass
class Memory:
    workload: str
    nodes: int
    ours_bytes: int
    peer_bytes: int
    target: float

    @property
    def ratio(self) -> float:
        return self.ours_bytes / self.peer_bytes


@dataclass
class Garbage:
    """The timer heap's worst size against its live entries over a random run."""

    workload: str
    calls: int
    worst_excess: int  # the most heap - 2 * live seen after any call
    rebuild_floor: int

    @property
    def met(self) -> bool:
        return self.worst_excess <= self.rebuild_floor


@dataclass
class Deadlock:
    """What ThreadPoolExecutor did with nested waits, in a subprocess killed after a timeout."""

    workload: str
    workers: int
    timeout: float
    outcome: str  # "deadlocked: no result after ...", or "finished in ...: <its output>"


@dataclass
class Steals:
    """Steals the pool took on an unbalanced tree; balancing it takes at least one."""

    spine: int
    workers: int
    leaves: int
    executed: int
    stolen: int

    @property
    def met(self) -> bool:
        return self.stolen > 0


@dataclass
class Results:
    quick: bool
    environment: dict[str, str]
    comparisons: list[Comparison] = field(default_factory=list)
    memory: list[Memory] = field(default_factory=list)
    garbage: list[Garbage] = field(default_factory=list)
    deadlocks: list[Deadlock] = field(default_factory=list)
    steals: list[Steals] = field(default_factory=list)
    claims_per_s: list[float] = field(default_factory=list)  # the durable store, one process
    # The durable store on PostgreSQL: claims/s of 16 processes over a whole run, the server it
    # ran on, or why the section was skipped.
    postgres_claims_per_s: list[float] = field(default_factory=list)
    # The same with 4, 8 and 16 processes (keys: the number of processes), and why one failed.
    postgres_claims_by_processes: dict[str, list[float]] = field(default_factory=dict)
    postgres_claims_failed: dict[str, str] = field(default_factory=dict)
    postgres_server: str = ""
    postgres_skipped: str = ""
    sections: list[str] = field(default_factory=list)  # as given to --only, for the report
    durable_rounds: int | None = None  # as given to --durable-rounds, for the report


# -- measuring -----------------------------------------------------------------------------

# The pool workloads run bench/pool.py's functions, which take sizes rather than data. compare()
# hands each contender one workload and checks that it returns len(workload), so a pool workload
# carries the sizes and, as its len(), the count a correct run returns.

@dataclass(frozen=True)
class FlatWork:
    submissions: int
    workers: int

    def __len__(self) -> int:
        return self.submissions  # both sides return how many futures they waited for


@dataclass(frozen=True)
class TreeWork:
    depth: int
    workers: int

    def __len__(self) -> int:
        return 2 ** self.depth  # both sides return the tree's leaves, counted


PoolWork = FlatWork | TreeWork


# A graph for the DAG contenders, entries for the timers, sizes for the pools.
Work = Graph | timers.Workload | PoolWork
Contender = Callable[[Any], int]


def timed(fn: Contender, graph: Work) -> float:
    gc.collect()
    start = time.perf_counter()
    finished = fn(graph)
    elapsed = time.perf_counter() - start
    if finished != len(graph):
        raise SystemExit(f"{fn.__name__} finished {finished} of {len(graph)} nodes")
    return elapsed


def interleaved(fns: Sequence[Contender], graph: Work, rounds: int) -> list[list[float]]:
    """Run each of ``fns`` once per round, the order rotated each round; the times per fn."""
    times: list[list[float]] = [[] for _ in fns]
    for r in range(rounds):
        for i in range(len(fns)):
            k = (i + r) % len(fns)
            times[k].append(timed(fns[k], graph))
    return times


# The report section, ours, the peer, and the most ours / peer may be (None: no target).
Pair = tuple[str, Contender, Contender, float | None]


def compare(results: Results, workload: str, graph: Work, rounds: int,
            pairs: Sequence[Pair], edges: int | None = None) -> None:
    """Time every contender of ``pairs`` interleaved on ``graph``; one row per pair."""
    fns = list(dict.fromkeys(fn for _, ours, peer, _ in pairs for fn in (ours, peer)))
    times = dict(zip(fns, interleaved(fns, graph, rounds), strict=True))
    for section, ours, peer, target in pairs:
        row = Comparison(section, workload, len(graph),
                         graphs.edges(graph) if edges is None else edges,
                         ours.__name__, peer.__name__, times[ours], times[peer], target)
        results.comparisons.append(row)
        print(f"  {workload:<30} {row.ours} / {row.peer}: {row.ratio:.2f} "
              f"[{min(row.ratios):.2f}-{max(row.ratios):.2f}] over {rounds} rounds "
              f"(median {statistics.median(row.ours_s):.3f}s vs "
              f"{statistics.median(row.peer_s):.3f}s)", flush=True)


def retained_bytes(build: Callable[[Graph], object], graph: Graph) -> int:
    """Bytes allocated by building the structure that are still held once it is built."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        built = build(graph)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del built
    return after - before


def rounds_for(nodes: int, quick: bool) -> int:
    if quick:
        return max(3, min(9, 300_000 // nodes))
    return max(5, min(31, 3_000_000 // nodes))


# -- the sections --------------------------------------------------------------------------

def run_core(results: Results, sizes: Sequence[int], others: int, quick: bool) -> None:
    print("core: TaskScheduler vs graphlib.TopologicalSorter, one thread", flush=True)
    warm = graphs.layered(10_000)
    interleaved([c.core_refsched, c.core_graphlib], warm, 1)
    for n in sizes:
        graph = graphs.layered(n)
        gc.collect()
        compare(results, f"layered DAG, V={n:,}", graph, rounds_for(n, quick), [
            ("core", c.core_refsched, c.core_graphlib, 1.0 if n >= 200_000 else None),
            ("gc-off", c.core_refsched_gc_off, c.core_graphlib_gc_off, None),
        ])
        del graph
    for name, build in (("chain", graphs.chain), ("fan-out and fan-in", graphs.fan)):
        graph = build(others)
        gc.collect()
        compare(results, f"{name}, V={others:,}", graph, rounds_for(others, quick),
                [("core", c.core_refsched, c.core_graphlib, None)])
        del graph


def run_runner(results: Results, nodes: int, rounds: int) -> None:
    print(f"runner: {nodes:,} no-op functions on 4 threads", flush=True)
    pairs: list[Pair] = [("runner", c.runner_refsched, c.runner_graphlib_pool, 0.7)]
    if c.dask_version() is None:
        print("  dask is not installed: its contender is skipped (pip install dask)")
    else:
        pairs.append(("runner", c.runner_refsched, c.runner_dask, 0.1))
    interleaved([c.runner_refsched] + [p for _, _, p, _ in pairs], graphs.layered(1_000), 1)
    compare(results, f"layered DAG, V={nodes:,}", graphs.layered(nodes), rounds, pairs)


def run_memory(results: Results, sizes: Sequence[int]) -> None:
    print("memory: bytes held per task once built and started/prepared (tracemalloc)",
          flush=True)
    for n in sizes:
        graph = graphs.layered(n)
        ours = min(retained_bytes(c.build_refsched, graph) for _ in range(2))
        peer = min(retained_bytes(c.build_graphlib, graph) for _ in range(2))
        row = Memory(f"layered DAG, V={n:,}", n, ours, peer, 1.5)
        results.memory.append(row)
        print(f"  {row.workload:<28} {ours / n:.0f} vs {peer / n:.0f} bytes per task: "
              f"{row.ratio:.2f}", flush=True)
        del graph


def run_sync(results: Results, core_nodes: int, runner_nodes: int, rounds: int) -> None:
    print("sync: primitives built through refsched.sync vs threading directly", flush=True)
    compare(results, f"core, layered DAG, V={core_nodes:,}", graphs.layered(core_nodes), rounds,
            [("sync", c.core_refsched, c.core_refsched_threading, None)])
    compare(results, f"runner, layered DAG, V={runner_nodes:,}", graphs.layered(runner_nodes),
            rounds, [("sync", c.runner_refsched, c.runner_refsched_threading, None)])


def run_timer(results: Results, drain_entries: int, cancel_entries: int, rounds: int) -> None:
    print("timer: TimerScheduler vs sched.scheduler, fake clock, one thread", flush=True)
    warm = timers.entries(1_000)
    interleaved([timers.drain_refsched, timers.drain_sched], warm, 1)
    compare(results, f"schedule and run, {drain_entries:,} entries",
            timers.entries(drain_entries), rounds,
            [("timer", timers.drain_refsched, timers.drain_sched, 1.0)], edges=0)
    heavy = timers.entries(cancel_entries)
    compare(results, f"half cancelled, {cancel_entries:,} entries", heavy, max(3, rounds // 3),
            [("timer", timers.cancel_half_refsched, timers.cancel_half_sched, 0.02)], edges=0)
    # sched pays O(n) per cancel, four times per id here: 5,000 ids already take it seconds.
    rescheduled = min(cancel_entries, 5_000)
    compare(results, f"rescheduled {timers.RESCHEDULES} times, {rescheduled:,} entries",
            timers.entries(rescheduled), max(3, rounds // 3),
            [("timer", timers.reschedule_refsched, timers.reschedule_sched, 0.02)], edges=0)
    for n in (cancel_entries, drain_entries):
        calls, worst, floor = timers.worst_garbage(timers.entries(n))
        row = Garbage(f"{n:,} ids", calls, worst, floor)
        results.garbage.append(row)
        print(f"  garbage over {calls:,} random calls on {n:,} ids: heap - 2 * live at most "
              f"{worst} (rebuild_floor {floor})", flush=True)


# Named after the bench/pool.py functions they call, since the report shows these names.
def flat_pool(work: FlatWork) -> int:
    return pool.flat_pool(work.submissions, work.workers)


def flat_tpe(work: FlatWork) -> int:
    return pool.flat_tpe(work.submissions, work.workers)


def forkjoin_pool(work: TreeWork) -> int:
    return pool.forkjoin_pool(work.depth, work.workers)


def forkjoin_tpe(work: TreeWork) -> int:
    return pool.forkjoin_tpe(work.depth, work.workers)


def run_pool(results: Results, submissions: int, depth: int, rounds: int,
             hang_timeout: float) -> None:
    workers = pool.WORKERS
    print(f"pool: WorkStealingPool vs ThreadPoolExecutor, {workers} workers each", flush=True)
    # One small run of each first, so round one is not charged for first-call costs.
    interleaved([flat_pool, flat_tpe], FlatWork(1_000, workers), 1)
    interleaved([forkjoin_pool, forkjoin_tpe], TreeWork(8, workers), 1)
    compare(results, f"flat, {submissions:,} no-op submissions",
            FlatWork(submissions, workers), rounds, [("pool", flat_pool, flat_tpe, 1.0)],
            edges=0)
    compare(results, f"fork-join, 2**{depth} leaves", TreeWork(depth, workers), rounds,
            [("pool", forkjoin_pool, forkjoin_tpe, 1.0)], edges=0)
    record_deadlock(results, depth, workers, hang_timeout)
    record_steals(results, workers)


def record_deadlock(results: Results, depth: int, workers: int, timeout: float) -> None:
    outcome = pool.tpe_nested_hangs(depth, workers, timeout)
    row = Deadlock(f"2**{depth} leaves", workers, timeout, outcome)
    results.deadlocks.append(row)
    print(f"  ThreadPoolExecutor({workers}) on the nested-wait fork-join tree, {row.workload}: "
          f"{outcome}", flush=True)


def record_steals(results: Results, workers: int) -> None:
    leaves, stolen, executed = pool.steals_on_unbalanced_tree(pool.STEAL_SPINE, workers)
    row = Steals(pool.STEAL_SPINE, workers, leaves, executed, stolen)
    results.steals.append(row)
    print(f"  unbalanced tree, {row.spine} spine nodes each forking a slow leaf: "
          f"{executed:,} tasks, {stolen:,} steals {'✓' if row.met else '✗ (expected > 0)'}",
          flush=True)


def run_durable(results: Results, flat: int, dag: int, rounds: int) -> None:
    """The durable store against Huey (flat) and against the in-memory Runner (a DAG).

    These contenders start worker processes, so each returns the seconds it measured itself,
    from the first submit to the last result, without the workers' start-up.
    """
    print(f"durable: 4 worker processes; {rounds} rounds, order alternating", flush=True)
    rows = [(f"flat, {flat:,} no-op tasks", flat, durable.durable_flat, durable.huey_flat, 1.0),
            (f"layered DAG, {dag:,} tasks", dag, durable.durable_dag, durable.runner_dag, None)]
    _alternate(results, "durable", rows, rounds)
    results.claims_per_s = [durable.claims_per_second() for _ in range(rounds)]
    print(f"  claims/s, one process claiming 8 at a time and completing: "
          f"{statistics.median(results.claims_per_s):,.0f}", flush=True)


# What a run of a contender that starts processes may raise for a reason of its own (a timeout,
# a worker that exited, a failed job, a tool missing): the row records it and the run goes on.
RUN_FAILURES = (TimeoutError, RuntimeError, OSError, AssertionError, subprocess.SubprocessError)

Timed = Callable[[int], float]


def _alternate(results: Results, section: str,
               rows: Sequence[tuple[str, int, Timed, Timed | Sequence[Timed], float | None]],
               rounds: int) -> None:
    """Each row's contenders, ``rounds`` times, the order rotated each round; each returns the
    seconds it measured itself. A row of several peers gives one comparison per peer, of the
    rounds both ran. A peer whose run fails sits out the later rounds, and its comparison says
    why; ours failing ends the row's rounds."""
    for workload, n, ours, peers, target in rows:
        peers = [peers] if callable(peers) else list(peers)
        fns = [ours, *peers]
        paired: list[tuple[list[float], list[float]]] = [([], []) for _ in peers]
        failed = ["" for _ in fns]
        for r in range(rounds):
            got: dict[int, float] = {}
            for i in range(len(fns)):
                k = (i + r) % len(fns)
                if failed[k]:
                    continue
                try:
                    got[k] = fns[k](n)
                except RUN_FAILURES as e:
                    failed[k] = f"{type(e).__name__}: {e}".splitlines()[0]
                    print(f"  {workload}: round {r + 1}: {fns[k].__name__} failed: {failed[k]}",
                          flush=True)
            if 0 in got:
                for k in got.keys() - {0}:
                    paired[k - 1][0].append(got[0])
                    paired[k - 1][1].append(got[k])
            if failed[0]:
                break
        for i, peer in enumerate(peers):
            why = "; ".join(f"{fns[k].__name__}: {failed[k]}" for k in (0, i + 1) if failed[k])
            row = Comparison(section, workload, n, 0, ours.__name__, peer.__name__,
                             paired[i][0], paired[i][1], target, why)
            results.comparisons.append(row)
            if not row.ratios:
                print(f"  {workload:<30} {row.ours} / {row.peer}: failed ({why})", flush=True)
                continue
            print(f"  {workload:<30} {row.ours} / {row.peer}: {row.ratio:.2f} "
                  f"[{min(row.ratios):.2f}-{max(row.ratios):.2f}] (median "
                  f"{statistics.median(row.ours_s):.2f}s vs "
                  f"{statistics.median(row.peer_s):.2f}s)", flush=True)


POSTGRES_CLAIMERS = (4, 8, 16)  # the claims/s rows' numbers of processes


def run_durable_postgres(results: Results, flat: int, dag: int, claims: int,
                         rounds: int, dag_rounds: int) -> None:
    """The durable store on PostgreSQL against Procrastinate, PgQueuer and Graphile Worker (flat,
    each report alone and batched), a layered DAG on PostgreSQL and on SQLite against the
    in-memory Runner, and its claims/s with 4, 8 and 16 processes; all on one PostgreSQL server,
    started here (tests/pgserver.py) unless REFSCHED_BENCH_POSTGRES names one. No server:
    skipped."""
    try:
        server = durable.PostgresServer.up()
    except RuntimeError as e:
        results.postgres_skipped = str(e).splitlines()[0]
        print(f"durable-postgres: skipped: {results.postgres_skipped}", flush=True)
        return
    try:
        results.postgres_server = server.describe()
        results.environment.update(peer_versions())
        print(f"durable-postgres: {results.postgres_server}; 4 worker processes x 4; {rounds} "
              "rounds, order rotated", flush=True)

        # Named as the report shows them.
        def durable_flat_postgres(n: int) -> float:
            return durable.durable_flat_postgres(server, n)

        def durable_flat_postgres_batched(n: int) -> float:
            return durable.durable_flat_postgres_batched(server, n)

        def procrastinate_flat(n: int) -> float:
            return durable.procrastinate_flat(server, n)

        def pgqueuer_flat(n: int) -> float:
            return durable.pgqueuer_flat(server, n)

        def pgqueuer_flat_batched(n: int) -> float:
            return durable.pgqueuer_flat_batched(server, n)

        def graphile_flat(n: int) -> float:
            return durable.graphile_flat(server, n)

        def graphile_flat_batched(n: int) -> float:
            return durable.graphile_flat_batched(server, n)

        def durable_dag_postgres(n: int) -> float:
            return durable.durable_dag_postgres(server, n)

        _alternate(results, "durable-postgres", [
            (f"flat, {flat:,} no-op jobs, each completion alone", flat, durable_flat_postgres,
             [procrastinate_flat, pgqueuer_flat, graphile_flat], 1.0),
            (f"flat, {flat:,} no-op jobs, batched", flat, durable_flat_postgres_batched,
             [pgqueuer_flat_batched, graphile_flat_batched], 1.0)], rounds)
        # A 10,000-task DAG takes minutes through this store on 2 shared cores: fewer rounds.
        _alternate(results, "durable-postgres", [
            (f"layered DAG, {dag:,} tasks, PostgreSQL", dag, durable_dag_postgres,
             durable.runner_dag, None),
            (f"layered DAG, {dag:,} tasks, SQLite", dag, durable.durable_dag,
             durable.runner_dag, None)], dag_rounds)
        for processes in POSTGRES_CLAIMERS:
            try:
                got = [durable.claims_per_second_postgres(server, claims, processes)
                       for _ in range(rounds)]
            except RUN_FAILURES as e:
                results.postgres_claims_failed[str(processes)] = str(e).splitlines()[0]
                print(f"  claims/s, {processes} processes: failed: {e}", flush=True)
                continue
            results.postgres_claims_by_processes[str(processes)] = got
            print(f"  claims/s, {processes} processes claiming 8 at a time and completing, "
                  f"{claims:,} tasks: {statistics.median(got):,.0f} "
                  f"[{min(got):,.0f}-{max(got):,.0f}]", flush=True)
        results.postgres_claims_per_s = results.postgres_claims_by_processes.get(
            str(POSTGRES_CLAIMERS[-1]), [])
    finally:
        server.down()


def peer_versions() -> dict[str, str]:
    """The versions of the PostgreSQL section's peers, as installed (Graphile Worker: as pinned
    in bench/graphile/package.json)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("procrastinate", "pgqueuer"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    found["graphile-worker"] = durable.graphile_version()
    return found


# -- the report ----------------------------------------------------------------------------

def _s(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def _verdict(row: Comparison | Memory) -> str:
    if row.target is None:
        return ""
    met = row.ratio <= row.target
    return f"≤ {row.target:g} {'✓' if met else '✗'}"


def _comparison_table(rows: Sequence[Comparison]) -> list[str]:
    lines = [
        "| workload | ours | best | median | peer | best | median | ours / peer: median [range] "
        "| rounds | target |",
        "|---|---|--:|--:|---|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        if not r.ratios:
            lines.append(f"| {r.workload} | `{r.ours}` | | | `{r.peer}` | | | failed: "
                         f"{r.failed} | 0 | |")
            continue
        lines.append(
            f"| {r.workload} | `{r.ours}` | {_s(min(r.ours_s))} | "
            f"{_s(statistics.median(r.ours_s))} | `{r.peer}` | {_s(min(r.peer_s))} | "
            f"{_s(statistics.median(r.peer_s))} | **{r.ratio:.2f}** "
            f"[{min(r.ratios):.2f}-{max(r.ratios):.2f}] | {len(r.ratios)} | {_verdict(r)}"
            f"{'; a round failed: ' + r.failed if r.failed else ''} |")
    return lines


def scaling_rows(results: Results, section: str = "core") -> list[Comparison]:
    """The layered-DAG rows of ``section`` ("core", or "gc-off": the collector paused)."""
    return sorted((r for r in results.comparisons
                   if r.section == section and r.workload.startswith("layered")),
                  key=lambda r: r.nodes)


def scaling_summary(rows: Sequence[Comparison]) -> tuple[int, int, float, float] | None:
    """refsched's time per node at the largest V over that at V = 10,000 (medians, bests)."""
    base = next((r for r in rows if r.nodes == 10_000), None)
    if base is None:
        return None
    top = rows[-1]
    per = [statistics.median(r.ours_s) / r.nodes for r in (base, top)]
    best = [min(r.ours_s) / r.nodes for r in (base, top)]
    return base.nodes, top.nodes, per[1] / per[0], best[1] / best[0]


def _ns(times: Sequence[float], nodes: int) -> str:
    return f"{min(times) / nodes * 1e9:,.0f} / {statistics.median(times) / nodes * 1e9:,.0f}"


def _scaling_section(results: Results) -> list[str]:
    on = scaling_rows(results)
    if not on:
        return []
    off = {r.nodes: r for r in scaling_rows(results, "gc-off")}
    lines = [
        "## Scaling: time per node as V grows",
        "",
        "![time per node](scaling.png)",
        "",
        "Nanoseconds per node, best / median, from the core runs above; the last three columns "
        "time the same graphs with the cyclic garbage collector paused (`gc.disable()` around "
        "each run), which leaves the algorithms' own cost.",
        "",
        "| V | E | refsched | graphlib | ratio | refsched, collector paused "
        "| graphlib, collector paused | ratio |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in on:
        o = off.get(r.nodes)
        paused = (f"{_ns(o.ours_s, o.nodes)} | {_ns(o.peer_s, o.nodes)} | {o.ratio:.2f}"
                  if o is not None else " | | ")
        lines.append(f"| {r.nodes:,} | {r.edges:,} | {_ns(r.ours_s, r.nodes)} | "
                     f"{_ns(r.peer_s, r.nodes)} | {r.ratio:.2f} | {paused} |")
    lines.append("")
    for label, rows, target in (("", on, True),
                                (", collector paused", sorted(off.values(),
                                                              key=lambda r: r.nodes), False)):
        summary = scaling_summary(rows)
        if summary is None:
            continue
        base, top, median_ratio, best_ratio = summary
        verdict = f"; target ≤ 1.2 {'✓' if median_ratio <= 1.2 else '✗'}" if target else ""
        lines += [
            f"refsched's time per node at V = {top:,} over that at V = {base:,}{label}: "
            f"**{median_ratio:.2f}** (medians; bests: {best_ratio:.2f}){verdict}.",
            "",
        ]
    return lines


def _rows(results: Results, section: str) -> list[Comparison]:
    return [r for r in results.comparisons if r.section == section]


def render_markdown(results: Results) -> str:
    """RESULTS.md: the header, then a part for each section that ran, in the usual order."""
    parts = [_header(results), _core_section(results), _runner_section(results),
             _memory_section(results), _scaling_section(results), _sync_section(results),
             _timer_section(results), _pool_section(results), _durable_section(results),
             _durable_postgres_section(results)]
    return "\n".join(line for part in parts for line in part)


def write_markdown(results: Results, out: Path) -> None:
    (out / "RESULTS.md").write_text(render_markdown(results), encoding="utf-8")


def _command(results: Results) -> str:
    only = "" if set(results.sections) == set(SECTIONS) else f" --only {','.join(results.sections)}"
    rounds = f" --durable-rounds {results.durable_rounds}" if results.durable_rounds else ""
    return f"python bench/run.py{' --quick' if results.quick else ''}{only}{rounds}"


def _header(results: Results) -> list[str]:
    env = results.environment
    return [
        "# refsched benchmarks",
        "",
        f"`{_command(results)}` on {env['date']}: "
        f"Python {env['python']}, {env['cpus']} CPUs, {env['platform']}; load average "
        f"{env['load_before']} before, {env['load_after']} after; dask {env['dask']}.",
        "",
        "Each comparison runs its contenders interleaved in one process, the order rotated each "
        "round; a ratio is ours / peer within one round, given as the median over the rounds and "
        "its range. Times include building the graph structure (and starting and stopping the "
        "threads for the runners). Graphs: `bench/graphs.py` (layered random DAGs with a fixed "
        f"seed, about sqrt(V) layers, {graphs.FAN_IN} dependencies per node on the previous "
        "layer; a chain; one root, V - 2 middle nodes and one sink).",
        "",
    ]


def _comparison_section(results: Results, section: str, title: str, *intro: str,
                        after: Sequence[str] = ()) -> list[str]:
    """A section of the report: its title, what it times (lines), the comparison table, what
    follows; none when the run timed no such section."""
    rows = _rows(results, section)
    if not rows:
        return []
    return [title, "", *intro, "", *_comparison_table(rows), "", *after]


def _core_section(results: Results) -> list[str]:
    return _comparison_section(
        results, "core",
        "## Core: `TaskScheduler` against `graphlib.TopologicalSorter`",
        "`TaskScheduler(max_concurrency=V)`: `submit` every node, `start()`, then `ready()` and "
        "`complete()` each claim until nothing is ready; `graphlib`: `add`, `prepare()`, then "
        "`get_ready()` and `done(*nodes)` while active. One thread.")


def _runner_section(results: Results) -> list[str]:
    dask = ([] if results.environment["dask"] != "not installed" else
            ["dask is not installed: its contender was skipped (`pip install dask`).", ""])
    return _comparison_section(
        results, "runner",
        "## Runner: no-op functions on 4 threads",
        "`Runner(max_workers=4)`: `submit` every function, `start()`, `wait()`, close. "
        "`runner_graphlib_pool`: the parallel loop of the graphlib documentation with a "
        "`ThreadPoolExecutor(4)` as its workers and a `queue.SimpleQueue` of finalized nodes. "
        "`runner_dask`: `dask.threaded.get(dsk, keys, num_workers=4)`, each node a task whose "
        "arguments are its dependencies.",
        after=dask)


def _memory_section(results: Results) -> list[str]:
    if not results.memory:
        return []
    return [
        "## Memory per task",
        "",
        "Bytes allocated while building the structure (every node submitted and `start()`; "
        "every node added and `prepare()`) and still held once built, measured with "
        "`tracemalloc`; the graph itself is allocated before and not counted.",
        "",
        "| workload | refsched bytes/task | graphlib bytes/task | ratio | target |",
        "|---|--:|--:|--:|---|",
        *(f"| {m.workload} | {m.ours_bytes / m.nodes:,.0f} | {m.peer_bytes / m.nodes:,.0f} | "
          f"**{m.ratio:.2f}** | {_verdict(m)} |" for m in results.memory),
        "",
    ]


def _sync_section(results: Results) -> list[str]:
    return _comparison_section(
        results, "sync",
        "## The injectable primitives (`refsched.sync`)",
        "The scheduler and the runner build every lock, condition, event, queue and thread "
        "through `refsched.sync`, which by default holds the `threading` classes (and "
        "`queue.SimpleQueue`) themselves "
        f"(`refsched.sync.Lock is threading.Lock`: {results.environment['sync_is_threading']}). "
        "The same runs with those classes put in the place of `refsched.sync`:")


def _timer_section(results: Results) -> list[str]:
    return _comparison_section(
        results, "timer",
        "## Timer: `TimerScheduler` against `sched.scheduler`",
        "Both on a fake clock set past every entry once all are scheduled, so nothing sleeps; "
        "every function that comes due is called (a no-op). `TimerScheduler`: `schedule` each "
        "entry, then `next()` and `complete()` until nothing is due. `sched.scheduler`: "
        "`enterabs` each entry, then `run()`. Half cancelled: every other entry is cancelled "
        "before the run (`cancel(task_id)`; `sched.cancel(event)`). Rescheduled: each id is "
        f"scheduled again {timers.RESCHEDULES} times before the run (a new version supersedes "
        "the old; for `sched`, `cancel` then `enterabs`, since it has no reschedule). "
        "Workloads: `bench/timers.py` (times uniform in [0, 1000), priorities 0 to 3, fixed "
        "seed).",
        after=[
            "Garbage: random schedules, reschedules, cancels and claims over the ids, with "
            "`stats()` read after every call; the heap may hold at most `2 * live + rebuild_floor` "
            "entries.",
            "",
            "| ids | calls | most `heap - 2 * live` seen | `rebuild_floor` | bound |",
            "|--:|--:|--:|--:|---|",
            *(f"| {g.workload} | {g.calls:,} | {g.worst_excess} | {g.rebuild_floor} | "
              f"{'✓' if g.met else '✗'} |" for g in results.garbage),
            "",
        ])


def _pool_section(results: Results) -> list[str]:
    return _comparison_section(
        results, "pool",
        "## Work-stealing pool: `WorkStealingPool` against `concurrent.futures.ThreadPoolExecutor`",
        f"Both with {pool.WORKERS} workers; a time includes starting and shutting down the "
        "workers. Workloads: `bench/pool.py`.",
        "",
        "- Flat: no-op functions submitted one by one from the main thread, then "
        "`concurrent.futures.wait()` on all their futures, which times handing a task to a "
        "worker and its result back.",
        "- Fork-join: a full binary tree counted recursively, one task per node; on the pool each "
        "node submits its two children and waits on their futures inside its task (nested "
        "waits), and since `ThreadPoolExecutor` deadlocks on that code, its side runs the same "
        "tree restructured without nested waits, each leaf reporting its count up the tree "
        "through per-node join counters.",
        after=[
            *(line for d in results.deadlocks for line in _deadlock_lines(d)),
            *(line for s in results.steals for line in _steals_lines(s)),
        ])


def _durable_section(results: Results) -> list[str]:
    if not _rows(results, "durable"):
        return []  # and no claims were counted
    claims = (f"Claims per second of the store, one process claiming 8 at a time and completing "
              f"each: **{statistics.median(results.claims_per_s):,.0f}** (median).")
    return _comparison_section(
        results, "durable",
        "## Durable scheduler: `DurableScheduler` on SQLite against Huey's `SqliteHuey`, and "
        "against the in-memory `Runner`",
        "Four worker processes each side (`refsched worker --until-done` and "
        "`huey_consumer -w 4 -k process`), started before the clock; a time runs from the first "
        "submit (enqueue) to the last result. The DAG row is the cost of durability: the same "
        "layered DAG (each task depends on two of the layer before) through durable workers "
        "and through `Runner(4)` in memory. Workloads: `bench/durable.py`.",
        after=[claims, ""])


def _durable_postgres_section(results: Results) -> list[str]:
    if "durable-postgres" not in results.sections:
        return []
    title = ("## Durable scheduler on PostgreSQL: `DurableScheduler` against Procrastinate, "
             "PgQueuer and Graphile Worker, and against the in-memory `Runner`")
    if results.postgres_skipped:
        return [title, "", f"Skipped: {results.postgres_skipped}.", ""]
    env = results.environment
    claims = [
        f"| {p} | **{statistics.median(got):,.0f}** | {min(got):,.0f}-{max(got):,.0f} |"
        for p, got in results.postgres_claims_by_processes.items()]
    claims += [f"| {p} | failed: {why} | |" for p, why in results.postgres_claims_failed.items()]
    return _comparison_section(
        results, "durable-postgres", title,
        f"One server for every contender: {results.postgres_server}; each run in a fresh "
        "database. Four worker processes each, started (and seen connected) before the clock, "
        "each running 4 jobs at once; each job is a no-op. A flat time runs from the first "
        "enqueue (one statement each, autocommit, from the bench process) to the moment the "
        "bench process, polling the store every 5 ms, sees the last job done; refsched's store is "
        "started before the clock, so that each submit is claimable at once, as an enqueued job "
        "is. The contenders:",
        "",
        "- refsched: `refsched worker --concurrency 4`, with `--report-delay 0` (each completion "
        "its own transaction) in the first flat row, `--report-delay 0.01 --prefetch 4` (reports "
        "batched within 10 ms, 4 claimed ahead) in the batched row; `DurableScheduler.submit()` "
        "each task;",
        f"- Procrastinate {env.get('procrastinate', '?')}: `procrastinate "
        "--app=procrastinate_tasks.app worker --concurrency 4` (LISTEN/NOTIFY on, its defaults "
        "otherwise; schema from `procrastinate schema --apply`); `noop.defer()` each job; done: "
        "`procrastinate_jobs` rows `succeeded`;",
        f"- PgQueuer {env.get('pgqueuer', '?')}: `PgQueuer.run(batch_size=B, "
        "max_concurrent_tasks=4)` in each process (`bench/pgqueuer_tasks.py`, the call `pgq run "
        "pgqueuer_tasks:main --batch-size B --max-concurrent-tasks 4` makes: that command of "
        "PgQueuer 1.6.0 exits at start-up in its log set-up; `max_concurrent_tasks` is its "
        "per-process cap; schema from `pgq install`, durable tables), "
        f"B = {durable.PGQUEUER_BATCH_EACH} in the first row (each job dequeued and its "
        f"completion logged alone), B = {durable.PGQUEUER_BATCH_BATCHED} in the batched row (jobs "
        "dequeued two at a time, completions flushed every two or after 0.1 s: PgQueuer requires "
        "`max_concurrent_tasks` to be at least twice the batch size, so 2 is the largest batch "
        "that keeps 4 jobs at once per process); `SyncQueries.enqueue('noop', None)` each job; "
        "done: the `pgqueuer` table empty;",
        f"- Graphile Worker {env.get('graphile-worker', '?')} (Node.js, `bench/graphile`): "
        "`run({concurrency: 4})` in each process, `pollInterval` at its default 2 s (LISTEN/NOTIFY "
        "wakes the workers), in the batched row `localQueue: {size: 5}` (concurrency + 1, as its "
        "docs suggest) and `completeJobBatchDelay: 0`, `failJobBatchDelay: 0` (completions of "
        "the same tick sent in one statement); schema from `graphile-worker --schema-only`; "
        "`SELECT graphile_worker.add_job('noop')` each job; done: `graphile_worker.jobs` empty "
        "(a job that succeeds is deleted).",
        "",
        "The DAG rows submit the layered DAG (each task depends on two of the layer before) with "
        "one `submit_many()`, then start, through 4 `refsched worker --until-done` processes (one "
        "function at a time each), on PostgreSQL and on SQLite, against `Runner(4)` in memory. "
        "A run that fails or passes its time limit (`durable.RUN_TIMEOUT`) ends its row's rounds "
        "and the row says why. Workloads: `bench/durable.py`, `bench/procrastinate_tasks.py`, "
        "`bench/pgqueuer_tasks.py`, `bench/graphile/worker.js`.",
        after=[
            "Claims per second of the store, N processes each claiming 8 at a time and "
            "completing each until a claim comes back empty, over the whole run (median over "
            "the rounds, and the range):",
            "",
            "| processes | claims/s | range |",
            "|--:|--:|--:|",
            *claims,
            "",
            "![the first flat row by round, and claims per second](durable-postgres.png)",
            "",
        ])


def _deadlock_lines(d: Deadlock) -> list[str]:
    return [
        f"Deadlock: `ThreadPoolExecutor({d.workers})` running the pool's side of fork-join "
        f"(nested waits, {d.workload}) in a subprocess killed after {d.timeout:g} s: "
        f"**{d.outcome}**. Its workers end up blocked in `result()` on children queued behind "
        "them; the pool's `result()` runs queued tasks while it waits.",
        "",
    ]


def _steals_lines(s: Steals) -> list[str]:
    return [
        f"Steals: an unbalanced tree on the pool, a spine of {s.spine} nodes each forking one "
        "slow leaf; a task submitted from a task goes onto its own worker's deque, so another "
        f"worker gets it only by stealing it: {s.leaves} leaves, {s.executed:,} tasks, "
        f"**{s.stolen:,} steals** (`stats().stolen`; must be above 0 {'✓' if s.met else '✗'}).",
        "",
    ]


def write_plot(results: Results, out: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = scaling_rows(results)
    if not rows:
        return False
    paused = scaling_rows(results, "gc-off")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    series = [
        ("refsched TaskScheduler", rows, True, "tab:blue", "o-"),
        ("graphlib.TopologicalSorter", rows, False, "tab:orange", "o-"),
        ("refsched, collector paused", paused, True, "tab:blue", "s--"),
        ("graphlib, collector paused", paused, False, "tab:orange", "s--"),
    ]
    for label, these, ours, colour, style in series:
        if not these:
            continue
        v = [r.nodes for r in these]
        per_node = [[t / r.nodes * 1e9 for t in (r.ours_s if ours else r.peer_s)]
                    for r in these]
        left.plot(v, [statistics.median(p) for p in per_node], style, color=colour, label=label)
        left.fill_between(v, [min(p) for p in per_node], [max(p) for p in per_node],
                          color=colour, alpha=0.15)
    left.set_xscale("log")
    left.set_ylim(bottom=0)
    left.set_xlabel("V (nodes; E ≈ 4 V)")
    left.set_ylabel("ns per node (median; band: min to max)")
    left.set_title("Submit and drain a layered DAG: time per node")
    left.legend(fontsize="small")
    for label, these, style in (("collector on", rows, "o-"), ("collector paused", paused, "s--")):
        if not these:
            continue
        v = [r.nodes for r in these]
        right.plot(v, [r.ratio for r in these], style, color="tab:blue", label=label)
        right.fill_between(v, [min(r.ratios) for r in these], [max(r.ratios) for r in these],
                           color="tab:blue", alpha=0.15)
    right.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    right.set_xscale("log")
    right.set_ylim(bottom=0)
    right.set_xlabel("V (nodes)")
    right.set_ylabel("time ratio refsched / graphlib")
    right.set_title("refsched / graphlib, same graph, same round")
    right.legend(fontsize="small")
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)
    return True


PEER_LABELS = {"procrastinate_flat": "Procrastinate, 4 worker processes",
               "pgqueuer_flat": "PgQueuer, 4 worker processes",
               "graphile_flat": "Graphile Worker, 4 Node processes"}


def write_durable_plot(results: Results, out: Path) -> bool:
    """durable-postgres.png: the flat row's time in each round, both sides, and the claims per
    second of each claims round."""
    flat = [c for c in results.comparisons
            if c.section == "durable-postgres" and c.ours == "durable_flat_postgres"
            and c.ratios]
    if not flat and not results.postgres_claims_by_processes:
        return False
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    if flat:
        rounds = range(1, len(flat[0].ours_s) + 1)
        bars = [("refsched, 4 refsched worker processes", flat[0].ours_s)]
        bars += [(PEER_LABELS.get(row.peer, row.peer), row.peer_s) for row in flat]
        width = 0.8 / len(bars)
        for i, (label, times) in enumerate(bars):
            left.bar([r - 0.4 + width * (i + 0.5) for r in rounds[:len(times)]], times, width,
                     label=label)
        left.set_xticks(list(rounds))
        left.set_xlabel("round (contenders interleaved)")
        left.set_ylabel("seconds, first enqueue to last job done")
        left.set_title(flat[0].workload)
        left.set_ylim(0, max(t for _, times in bars for t in times) * 1.45)  # room for the legend
        left.legend(fontsize="small", loc="upper left")
    claims = results.postgres_claims_by_processes
    if claims:
        processes = list(claims)
        right.bar(range(len(processes)), [statistics.median(c) for c in claims.values()], 0.5,
                  color="tab:blue")
        right.errorbar(range(len(processes)), [statistics.median(c) for c in claims.values()],
                       yerr=[[statistics.median(c) - min(c) for c in claims.values()],
                             [max(c) - statistics.median(c) for c in claims.values()]],
                       fmt="none", color="black", capsize=4)
        right.set_xticks(range(len(processes)), processes)
        right.set_xlabel("processes, each claiming 8 at a time and completing")
        right.set_ylabel("claims per second (median; bars: range over rounds)")
        right.set_title("The store's claims per second")
    fig.savefig(out / "durable-postgres.png", dpi=110)
    plt.close(fig)
    return True


def environment() -> dict[str, str]:
    import refsched.sync

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "cpus": str(os.cpu_count()),
        "load_before": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "dask": c.dask_version() or "not installed",
        "sync_is_threading": str(refsched.sync.Lock is __import__("threading").Lock),
    }


SECTIONS = ("core", "runner", "memory", "sync", "timer", "pool", "durable",
            "durable-postgres")
DEFAULT_OUT = HERE / "results"


def output_folder(out: Path | None, sections: Sequence[str]) -> Path | None:
    """Where to write; None: print the report instead.

    A report of some sections written over bench/results would silently drop the others' figures
    from the full run's report, so a partial run writes only where --out says.
    """
    if out is not None:
        return out
    return DEFAULT_OUT if set(sections) == set(SECTIONS) else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for RESULTS.md, results.json and scaling.png (default: "
                             "bench/results for a run of every section; a run of some sections "
                             "prints its report and writes nothing without --out)")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="comma-separated sections to run (default: all)")
    parser.add_argument("--durable-rounds", type=int, default=None, metavar="N",
                        help="rounds of the durable sections' rows (default 3, 1 with --quick; "
                             "their DAG rows take one round)")
    args = parser.parse_args(argv)
    sections = list(dict.fromkeys(args.only.split(",")))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    out = output_folder(args.out, sections)
    if out is None:
        print(f"--only {args.only} without --out: the report is printed at the end and not "
              f"written ({DEFAULT_OUT.relative_to(HERE.parent)} keeps the full run's)", flush=True)
    else:
        out.mkdir(parents=True, exist_ok=True)
    quick = bool(args.quick)
    results = Results(quick, environment(), sections=sections,
                      durable_rounds=args.durable_rounds)
    started = time.perf_counter()
    if quick:
        sizes, others, memory_sizes = [1_000, 10_000, 100_000], 100_000, [100_000]
        sync_nodes = 100_000
    else:
        sizes = [1_000, 3_000, 10_000, 30_000, 100_000, 200_000, 1_000_000]
        others, memory_sizes, sync_nodes = 1_000_000, [200_000, 1_000_000], 200_000
    runner_rounds = 3 if quick else 9
    if "core" in sections:
        run_core(results, sizes, others, quick)
    if "runner" in sections:
        run_runner(results, 20_000, runner_rounds)
    if "memory" in sections:
        run_memory(results, memory_sizes)
    if "sync" in sections:
        run_sync(results, sync_nodes, 20_000, 3 if quick else 7)
    if "timer" in sections:
        run_timer(results, 20_000 if quick else 100_000, 5_000 if quick else 20_000,
                  3 if quick else 9)
    if "pool" in sections:
        run_pool(results, 20_000 if quick else pool.FLAT_SUBMISSIONS,
                 12 if quick else pool.TREE_DEPTH, 3 if quick else pool.ROUNDS,
                 2.0 if quick else pool.HANG_TIMEOUT)
    durable_rounds = args.durable_rounds or (1 if quick else 3)
    if "durable" in sections:
        run_durable(results, 2_000, 2_000 if quick else 10_000, durable_rounds)
    if "durable-postgres" in sections:
        run_durable_postgres(results, 2_000 if quick else 10_000, 2_000 if quick else 10_000,
                             2_000 if quick else 5_000, durable_rounds, 1)
    results.environment["load_after"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    if out is None:
        print(render_markdown(results))
        print(f"ran in {time.perf_counter() - started:.0f}s; nothing written (no --out)")
        return 0
    write_markdown(results, out)
    with open(out / "results.json", "w", encoding="utf-8") as f:
        json.dump(asdict(results), f, indent=1)
    plots = [name for name, wrote in (("scaling.png", write_plot(results, out)),
                                      ("durable-postgres.png", write_durable_plot(results, out)))
             if wrote]
    print(f"wrote {out / 'RESULTS.md'}, results.json{''.join(', ' + p for p in plots)} "
          f"in {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
