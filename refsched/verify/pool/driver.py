"""A WorkStealingPool whose workers' moves are taken by the caller, one spec step at a time.

The pool's ``Pop``, ``Steal`` and ``Finish`` are moves of its worker threads, not calls a user
makes, so a trace of ``spec/WorkStealing.tla`` cannot be replayed through the public API alone.
:class:`SteppedPool` builds the pool under test without its threads (its ``_start_workers``
starts none) and takes each step through the code path the worker loop itself runs:

==========================  ====================================================================
SubmitExternal(t, w)        ``submit()`` from outside the pool, its round-robin turn set to ``w``
                            (with no worker parked, that is the deque an outside task goes to)
SubmitChild(t, w)           ``submit()`` on a thread that the pool takes for worker ``w`` (its
                            thread-local worker index set, as inside a task ``w`` runs)
Pop(w), Steal(thief, v),    ``_take_locked(w, v)`` under the pool lock: what a worker with
StealBatch(thief, v)        nothing in hand calls, the steal trying ``v`` first (the pool's
                            policy decides whether it takes one task or a batch)
Finish(w)                   the task's function called and its future settled (``_run``), then
                            ``_finish_locked`` under the pool lock, as the worker loop does
Shutdown                    ``shutdown(wait=False)``
CancelQueued                ``shutdown(wait=False, cancel_futures=True)`` while draining
Block(x)                    what entering ``blocking()`` does in the task ``x`` runs:
                            ``_block_locked(x)`` under the pool lock (a new spare's thread is
                            made but does nothing: its moves are the caller's)
StartSpare(s)               what the spare's thread does when it begins to serve slot ``s``
Unblock(x)                  what leaving ``blocking()`` does: ``_unblock_locked(x)``
Retire(s)                   ``_may_retire_locked(s)`` and ``_retire_locked(s)``, as the spare's
                            loop does, on behalf of the thread serving ``s``
==========================  ====================================================================

With managed blocking on (``spares``, the spec's ``Spares``, and ``max_spares``, its
``MaxSpares``), spare ``spares[i]`` is the pool's slot ``len(workers) + i``: the pool gives a
blocker the lowest off slot, one of those the spec lets ``Block`` pick.

:meth:`SteppedPool.snapshot` reads the pool's state as a
:class:`~refsched.model.pool.PoolSnapshot`: phase, deques and ``outstanding`` from the pool,
``submitted``/``finished``/``cancelled`` from the futures ``submit()`` returned, and
``running``/``runs``/``parent`` from the tasks the pool handed to the driver's workers.
:meth:`SteppedPool.check_invariants` holds the pool's counters (``stats()``) and its tasks'
calls against that; :meth:`SteppedPool.stats` is the pool's ``stats()``, which the lock-step
machine and replay hold against the counts of the model's steps.
"""

from __future__ import annotations

import inspect
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from types import MappingProxyType
from typing import Any

from refsched.model.pool import Phase, PoolSnapshot
from refsched.model.pool.blocking import BlockingSnapshot, SpareState
from refsched.pool import pool as pool_module
from refsched.pool.blocking import SpareThread

__all__ = ["StepRefused", "SteppedPool", "driven_pool", "stepped_class", "stepped_factory"]

PoolFactory = Callable[..., pool_module.WorkStealingPool]

_STEPPED: dict[type, type] = {}


class StepRefused(Exception):
    """A worker's move was not taken: it took nothing, took a task it was not given, or had no
    task to finish."""


def stepped_class(factory: PoolFactory) -> type[pool_module.WorkStealingPool]:
    """``factory`` (``WorkStealingPool`` or a subclass of it) without worker threads."""
    factory = inspect.unwrap(factory)  # a factory guarded by the command line wraps the class
    if not (isinstance(factory, type) and issubclass(factory, pool_module.WorkStealingPool)):
        raise TypeError(f"a stepped pool needs WorkStealingPool or a subclass of it, not "
                        f"{factory!r}")
    cls = _STEPPED.get(factory)
    if cls is None:
        def _start_workers(self: Any) -> tuple[Any, ...]:
            return ()  # the caller takes every worker's moves

        def _spare_thread(self: Any, spare: SpareThread) -> threading.Thread:
            return _IdleThread()  # the caller takes every spare's moves

        cls = _STEPPED[factory] = type(f"Stepped{factory.__name__}", (factory,),
                                       {"_start_workers": _start_workers,
                                        "_spare_thread": _spare_thread})
    return cls


class _IdleThread(threading.Thread):
    """A spare's thread in a stepped pool: never runs, so starting and joining it do nothing."""

    def start(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> None:
        pass


def driven_pool(factory: Callable[..., Any], workers: Sequence[Hashable],
                steal_cap: int = 1, *, spares: Sequence[Hashable] = (),
                max_spares: int | None = None) -> Any:
    """A pool driven by spec steps: :class:`SteppedPool` around ``factory`` (a pool class), or,
    for a factory marked ``drives_steps`` (a pool in another process, which takes each move
    itself when asked: :class:`refsched.conform.pool.wire.RemotePool`), what it makes of the
    workers. Either has the moves and readings of :class:`SteppedPool`. ``steal_cap`` above 1
    (the spec's ``StealCap``) asks for batch steals of at most that many tasks; ``spares``
    (the spec's ``Spares``) and ``max_spares`` (its ``MaxSpares``), for managed blocking."""
    if getattr(factory, "drives_steps", False):
        extra: dict[str, Any] = {} if steal_cap == 1 else {"steal_cap": steal_cap}
        if spares:
            extra.update(spares=spares, max_spares=max_spares)
        return factory(workers, **extra)
    return SteppedPool(factory, workers, steal_cap, spares=spares, max_spares=max_spares)


def stepped_factory(factory: PoolFactory) -> Callable[..., SteppedPool]:
    """``factory`` (a pool class) as a maker of :class:`SteppedPool` taking the arguments of
    :func:`driven_pool`, marked ``drives_steps``: each pool it makes takes its moves when
    asked, as a pool over the protocol does, so a wrapper around the maker sees every move."""

    def make(workers: Sequence[Hashable], steal_cap: int = 1, *,
             spares: Sequence[Hashable] = (), max_spares: int | None = None) -> SteppedPool:
        return SteppedPool(factory, workers, steal_cap, spares=spares, max_spares=max_spares)
    make.drives_steps = True  # type: ignore[attr-defined]
    return make


class SteppedPool:
    """A pool without threads, driven by spec steps; workers and tasks named as in the spec."""

    def __init__(self, factory: PoolFactory, workers: Sequence[Hashable],
                 steal_cap: int = 1, *, spares: Sequence[Hashable] = (),
                 max_spares: int | None = None) -> None:
        self.workers = tuple(workers)  # the spec's Workers; worker i of the pool is workers[i]
        self.spares = tuple(spares)  # the spec's Spares; slot len(workers) + i is spares[i]
        self.threads = self.workers + self.spares  # the spec's Threads, by the pool's index
        self._index = {w: i for i, w in enumerate(self.threads)}
        # StealCap 1 leaves the policy to the factory's default (a single-steal pool's);
        # max_spares None, the pool's default bound
        cls = stepped_class(factory)
        kwargs: dict[str, Any] = {} if steal_cap == 1 else {"steal": "half",
                                                             "steal_cap": steal_cap}
        if max_spares is not None:
            kwargs["max_spares"] = max_spares
        self.pool = cls(workers=len(self.workers), **kwargs)
        self.futures: dict[Hashable, Future[Any]] = {}  # task -> the future submit() returned
        self._name: dict[int, Hashable] = {}  # id(future) -> task; the futures keep them alive
        self.running: dict[Hashable, Future[Any]] = {}  # worker -> the task it took, not finished
        self.runs: Counter[Hashable] = Counter()  # task -> times a worker took it
        self.parent: dict[Hashable, Hashable] = {}  # child -> the task its worker ran
        self.calls: Counter[Hashable] = Counter()  # task -> times its function was called
        self.steals = 0  # Steal and StealBatch steps taken
        self.stolen_tasks = 0  # the tasks they took: the one run, and those the thief keeps

    # -- the spec's actions ----------------------------------------------------------------

    def submit_external(self, task: Hashable, worker: Hashable) -> Future[Any]:
        self.pool._next = self._index[worker]  # the pool's own choice, steered to the step's
        return self._submitted(task, self.pool.submit(self._function(task)))

    def submit_child(self, task: Hashable, worker: Hashable) -> Future[Any]:
        parent = self.running.get(worker)
        if parent is None:
            raise ValueError(f"SubmitChild({task!r}, {worker!r}): the worker runs no task")
        local = self.pool._local
        local.worker = self._index[worker]
        try:
            future = self.pool.submit(self._function(task))
        finally:
            local.worker = None
        self.parent[task] = self._name[id(parent)]
        return self._submitted(task, future)

    def pop(self, worker: Hashable) -> None:
        self._take(worker, None)

    def steal(self, thief: Hashable, victim: Hashable) -> None:
        self._take(thief, victim)
        self.steals += 1
        with self.pool._lock:
            self.stolen_tasks += 1 + len(self.pool._deques[self._index[thief]])

    def finish(self, worker: Hashable) -> None:
        task = self.running.pop(worker, None)
        if task is None:
            raise StepRefused(f"worker {worker!r} runs no task to finish")
        ran = pool_module._run(task)  # type: ignore[arg-type]
        with self.pool._lock:
            self.pool._finish_locked(task, ran)  # type: ignore[arg-type]

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False)

    def cancel_queued(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def block(self, thread: Hashable) -> None:
        """Spec: Block(x): the task ``thread`` runs enters ``blocking()``."""
        if thread not in self.running:
            raise StepRefused(f"thread {thread!r} runs no task to block")
        pool, x = self.pool, self._index[thread]
        with pool._lock:
            if x in pool._spares.blocked or pool._spares.bound == 0:
                raise StepRefused(f"blocking() in the task {thread!r} runs did not block")
            pool._block_locked(x)

    def start_spare(self, spare: Hashable) -> None:
        """Spec: StartSpare(s): the thread given slot ``s`` begins to serve it."""
        pool, s = self.pool, self._index[spare]
        with pool._lock:
            slot = pool._spares.slots.get(s)
            if slot is None or slot.state != "starting" or self._thread_of(s) is None:
                raise StepRefused(f"spare {spare!r} has no thread starting")
            pool._spares.start(s)
            if pool._recorder is not None:
                pool._record("StartSpare", {"s": s})

    def unblock(self, thread: Hashable) -> None:
        """Spec: Unblock(x): the blocking call in the task ``thread`` runs returns."""
        pool, x = self.pool, self._index[thread]
        with pool._lock:
            if x not in pool._spares.blocked:
                raise StepRefused(f"thread {thread!r} is not blocked")
            pool._unblock_locked(x)

    def retire(self, spare: Hashable) -> None:
        """Spec: Retire(s): the spare, idle, retires if the pool lets it."""
        if spare in self.running:
            raise ValueError(f"spare {spare!r} runs a task")
        pool, s = self.pool, self._index[spare]
        local = pool._local
        with pool._lock:
            thread = self._thread_of(s)
            if thread is None or not pool._may_retire_locked(s):
                raise StepRefused(f"spare {spare!r} may not retire")
            local.spare = thread  # the spare's own thread retires it
            try:
                pool._retire_locked(s)
            finally:
                local.spare = None

    # -- reading the pool ------------------------------------------------------------------

    def blocking_snapshot(self) -> BlockingSnapshot:
        """The pool's state as the model's, with managed blocking."""
        pool, name = self.pool, self._thread_name
        snapshot = self.snapshot()
        with pool._lock:
            spares = pool._spares
            states = {name(s): SpareState(slot.state) for s, slot in spares.slots.items()
                      if slot.state != "off"}
            blocker = {name(s): frozenset({name(slot.blocker)})
                       for s, slot in spares.slots.items() if slot.blocker is not None}
            blocked = frozenset(name(x) for x in spares.blocked)
        return BlockingSnapshot(pool=snapshot, blocked=blocked, spare=MappingProxyType(states),
                                blocker=MappingProxyType(blocker))


    def snapshot(self) -> PoolSnapshot:
        """The pool's state as the model's."""
        pool, name = self.pool, self._name
        with pool._lock:
            deques = {self._thread_name(i): tuple(name[id(task)] for task in dq)
                      for i, dq in enumerate(pool._deques)}
            phase, outstanding = Phase(pool._state), pool._outstanding
        return PoolSnapshot(
            phase=phase,
            deque=deques,
            running={w: name[id(f)] for w, f in self.running.items()},
            outstanding=outstanding,
            submitted=frozenset(self.futures),
            finished=frozenset(t for t, f in self.futures.items()
                               if f.done() and not f.cancelled()),
            cancelled=frozenset(t for t, f in self.futures.items() if f.cancelled()),
            runs=dict(self.runs),
            parent=dict(self.parent),
        )

    def stats(self) -> pool_module.PoolStats:
        """The pool's own counters (``WorkStealingPool.stats()``)."""
        return self.pool.stats()

    def check_invariants(self) -> None:
        """The pool's counters and its tasks' calls agree with what it was driven through."""
        stats = self.pool.stats()
        finished = [t for t, f in self.futures.items() if f.done() and not f.cancelled()]
        counted = sum(stats.queue_lengths) + len(self.running)
        if stats.outstanding != counted:
            raise AssertionError(f"stats().outstanding is {stats.outstanding}, but "
                                 f"{counted} tasks are queued or running")
        if stats.executed != len(finished):
            raise AssertionError(f"stats().executed is {stats.executed}, but {len(finished)} "
                                 "tasks have finished")
        if stats.stolen != self.steals:
            raise AssertionError(f"stats().stolen is {stats.stolen} after {self.steals} steals")
        if stats.stolen_tasks != self.stolen_tasks:
            raise AssertionError(f"stats().stolen_tasks is {stats.stolen_tasks}, but the steals "
                                 f"took {self.stolen_tasks} tasks")
        wrong = {t: n for t, n in self.calls.items() if n != (t in finished)}
        if wrong or len(self.calls) != len(finished):
            raise AssertionError(f"functions called (task: times) {dict(self.calls)}, but the "
                                 f"finished tasks are {sorted(map(str, finished))}")

    # -- helpers ---------------------------------------------------------------------------

    def _thread_name(self, i: int) -> Hashable:
        """The spec's name of the pool's thread ``i``; a spare slot past the spares named (a
        pool that starts more spares than it was given) by its index, so a snapshot shows it."""
        return self.threads[i] if i < len(self.threads) else f"spare slot {i}"

    def _function(self, task: Hashable) -> Callable[[], Hashable]:
        def call() -> Hashable:
            self.calls[task] += 1
            return task
        return call

    def _thread_of(self, s: int) -> SpareThread | None:
        """The spare thread given slot ``s`` (with the pool lock held)."""
        return next((t for t in self.pool._spares.threads if t.slot == s), None)

    def _submitted(self, task: Hashable, future: Future[Any]) -> Future[Any]:
        self.futures[task] = future
        self._name[id(future)] = task
        return future

    def _take(self, worker: Hashable, victim: Hashable | None) -> None:
        if worker in self.running:
            raise ValueError(f"worker {worker!r} runs a task already")
        pool = self.pool
        with pool._lock:
            task = pool._take_locked(self._index[worker],
                                     None if victim is None else self._index[victim])
        if task is None:
            raise StepRefused(f"worker {worker!r} took no task")
        if id(task) not in self._name:
            raise StepRefused(f"worker {worker!r} took a task that was never submitted")
        self.running[worker] = task
        self.runs[self._name[id(task)]] += 1
