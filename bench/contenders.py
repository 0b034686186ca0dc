"""The contenders: each takes a graph, does the whole job and returns how many nodes it finished.

Each is timed from the first submission to the last completion: building the structure is part
of the cost (for the Runner and its peers, so are starting and stopping the threads). The count
returned is checked against the graph outside the timing.
"""

from __future__ import annotations

import contextlib
import gc
import graphlib
import importlib.metadata
import importlib.util
import queue
import threading
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from graphs import Graph

import refsched.dag.runner
import refsched.dag.scheduler
import refsched.sync
from refsched import Runner, TaskScheduler

Contender = Callable[[Graph], int]


def _noop(*args: Any) -> None:
    return None


# -- core: the dependency bookkeeping alone, one thread ------------------------------------

def core_refsched(graph: Graph) -> int:
    """TaskScheduler: submit, start, then ready() / complete() until nothing is ready."""
    s = build_refsched(graph)
    ready, complete = s.ready, s.complete
    while claims := ready():
        for task_id, generation, _fn in claims:
            complete(task_id, generation)
    return s.stats().succeeded


def core_graphlib(graph: Graph) -> int:
    """graphlib.TopologicalSorter: add, prepare, then get_ready() / done() while active."""
    ts = build_graphlib(graph)
    get_ready, done = ts.get_ready, ts.done
    finished = 0
    while ts.is_active():
        nodes = get_ready()
        finished += len(nodes)
        done(*nodes)
    return finished


def _under(context: Callable[[], contextlib.AbstractContextManager[None]], contender: Contender,
           suffix: str, how: str) -> Contender:
    """``contender`` run inside ``context()``, as a contender of its own: its name with
    ``_suffix``, its doc ``how`` it runs."""
    def run(graph: Graph) -> int:
        with context():
            return contender(graph)
    run.__name__ = run.__qualname__ = f"{contender.__name__}_{suffix}"
    run.__doc__ = f"{contender.__name__} {how}"
    return run


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


core_refsched_gc_off = _under(_gc_paused, core_refsched, "gc_off",
                              "with the cyclic garbage collector paused: the algorithm's own cost.")
core_graphlib_gc_off = _under(_gc_paused, core_graphlib, "gc_off",
                              "with the cyclic garbage collector paused.")


# -- runner: the same graph of no-op functions on 4 threads --------------------------------

def runner_refsched(graph: Graph, workers: int = 4) -> int:
    """refsched.Runner: submit every function, start, wait."""
    with Runner(max_workers=workers) as runner:
        submit = runner.submit
        for node, deps in graph:
            submit(node, _noop, deps)
        runner.start()
        runner.wait()
        return runner.scheduler.stats().succeeded


def runner_graphlib_pool(graph: Graph, workers: int = 4) -> int:
    """The graphlib documentation's parallel loop, with a ThreadPoolExecutor as the workers.

    Ready nodes go to the pool; each worker runs the function and puts the node on the
    finalized queue; the main thread marks one finalized node done per turn of the loop.
    """
    ts: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for node, deps in graph:
        ts.add(node, *deps)
    fns = dict.fromkeys((node for node, _ in graph), _noop)
    finalized: queue.SimpleQueue[int] = queue.SimpleQueue()

    def work(node: int) -> None:
        fns[node]()
        finalized.put(node)

    finished = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        ts.prepare()
        while ts.is_active():
            for node in ts.get_ready():
                pool.submit(work, node)
            ts.done(finalized.get())
            finished += 1
    return finished


def runner_dask(graph: Graph, workers: int = 4) -> int:
    """dask.threaded.get on the same graph: each node a task whose arguments are its deps."""
    import dask.threaded

    dsk = {node: (_noop, *deps) for node, deps in graph}
    return len(dask.threaded.get(dsk, [node for node, _ in graph], num_workers=workers))


def dask_version() -> str | None:
    """dask's version, or None when it is not installed (its contender is then skipped)."""
    if importlib.util.find_spec("dask") is None:
        return None
    return importlib.metadata.version("dask")


# -- memory: what the structure holds once built -------------------------------------------

def build_refsched(graph: Graph) -> TaskScheduler:
    """The started TaskScheduler of ``graph`` (core_refsched builds it so too)."""
    s = TaskScheduler(len(graph))  # max_concurrency never limits a claim
    submit = s.submit
    for node, deps in graph:
        submit(node, deps)
    s.start()
    return s


def build_graphlib(graph: Graph) -> graphlib.TopologicalSorter[int]:
    """The prepared TopologicalSorter of ``graph`` (core_graphlib builds it so too)."""
    ts: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    add = ts.add
    for node, deps in graph:
        add(node, *deps)
    ts.prepare()
    return ts


# -- the injectable primitives: refsched.sync against threading itself ---------------------

@contextlib.contextmanager
def threading_direct() -> Iterator[None]:
    """Make the scheduler and the runner build their primitives from ``threading`` directly.

    Both modules look the primitives up as ``sync.Lock`` & co. when they build an object; with
    a module holding ``threading``'s classes (and ``queue.SimpleQueue``) in the place of
    ``refsched.sync`` they get the same classes without going through refsched.sync.
    ``sync.acquire`` is no seam but the way the Runner's workers take their lock: it comes along.
    """
    direct = types.ModuleType("threading_direct")
    direct.__dict__.update(Lock=threading.Lock, RLock=threading.RLock,
                           Condition=threading.Condition, Event=threading.Event,
                           Thread=threading.Thread, SimpleQueue=queue.SimpleQueue,
                           acquire=refsched.sync.acquire)
    modules = (refsched.dag.scheduler, refsched.dag.runner)
    saved = [m.sync for m in modules]
    try:
        for m in modules:
            setattr(m, "sync", direct)  # noqa: B010 (mypy: a module of another type)
        yield
    finally:
        for m, s in zip(modules, saved, strict=True):
            setattr(m, "sync", s)  # noqa: B010


core_refsched_threading = _under(threading_direct, core_refsched, "threading",
                                 "with its primitives taken from threading directly.")
runner_refsched_threading = _under(threading_direct, runner_refsched, "threading",
                                   "with its primitives taken from threading directly.")
