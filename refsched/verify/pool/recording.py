"""Traces of spec/WorkStealing.tla recorded from the production WorkStealingPool as it runs.

A :class:`PoolTraceRecorder` is a :class:`refsched.pool.pool.PoolRecorder`: given to a
WorkStealingPool it receives each spec step at its linearization point, under the pool lock,
so the recorded order is the order the steps took effect, whatever the threads did.

The pool holds three of the spec's variables itself: ``phase``, ``deque`` and ``outstanding``
are read from it at every step. The others are no state of the pool (it does not remember
which task a worker runs, nor who spawned a task): the recorder keeps them from the steps it is
given, as the spec defines them (``Pop(w)`` sets ``running[w]`` to the task taken and counts a
run; ``Finish(w)`` clears it and adds the task to ``finished``; ``SubmitChild(t, w)`` sets
``parent[t]`` to what ``w`` runs; ``CancelQueued`` cancels what the deques held). That
bookkeeping cannot hide a fault: a worker that took a second task while it ran one, or
finished a task it was not running, leaves a state that the step into it does not reach, and
TLC rejects the step.

:func:`record_pool_run` records one random run of the pool on real threads.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from refsched.errors import SchedulerClosedError
from refsched.model.pool import Phase, PoolSnapshot
from refsched.model.pool.blocking import BlockingSnapshot, SpareState
from refsched.pool.pool import PoolView, WorkStealingPool
from refsched.verify.itf import Step as TraceStep
from refsched.verify.itf import Trace
from refsched.verify.pool import spec as poolspec

__all__ = ["BLOCKING_STEPS", "PoolTraceRecorder", "record_blocking_run", "record_pool_run",
           "spare_name", "thread_name", "worker_name"]

_WAIT = 30.0  # seconds: a run that needs this long is stuck, not slow


def worker_name(index: int) -> str:
    """The spec's name of the pool's worker ``index``: ``w1`` for worker 0, as in the corpus."""
    return f"w{index + 1}"


def spare_name(slot: int) -> str:
    """The spec's name of the pool's spare slot ``slot`` (counted from the first spare slot):
    ``s1`` for the first, as in the corpus."""
    return f"s{slot + 1}"


def thread_name(index: int, workers: int) -> str:
    """The spec's name of the thread (worker or spare slot) of index ``index`` in a pool of
    ``workers`` workers: its spare slots come after its workers."""
    return worker_name(index) if index < workers else spare_name(index - workers)


BLOCKING_STEPS = frozenset({"Block", "StartSpare", "Unblock", "Retire"})
"""The steps of managed blocking: a trace that takes one states its spares."""


class PoolTraceRecorder:
    """Collects the spec steps of one pool; builds the :class:`Trace` they form.

    Tasks are named ``t0``, ``t1``, ... in the order they were submitted.
    """

    def __init__(self) -> None:
        # Everything below is changed under the recording pool's lock: one pool per recorder.
        self.steps: list[tuple[str, dict[str, Any], BlockingSnapshot]] = []  # spec steps, in order
        self.children: list[str] = []  # the tasks submitted by SubmitChild
        self._names: dict[int, str] = {}  # id(future) -> its task's name
        self._futures: list[Future[Any]] = []  # kept alive, so that no id(future) is reused
        self._running: dict[str, str] = {}  # worker -> the task it runs (spec: running)
        self._runs: dict[str, int] = {}  # task -> times taken to run (spec: runs)
        self._parent: dict[str, str] = {}  # child -> the task that spawned it (spec: parent)
        self._finished: set[str] = set()  # spec: finished
        self._cancelled: set[str] = set()  # spec: cancelled
        self._queued: tuple[str, ...] = ()  # every task in a deque after the last step
        self.blocking = False  # a step of managed blocking was recorded
        self.spares_used = 0  # spare slots the pool used so far

    def _name(self, task: Future[Any]) -> str:
        name = self._names.get(id(task))
        if name is None:
            name = self._names[id(task)] = f"t{len(self._names)}"
            self._futures.append(task)
        return name

    def record(self, action: str, params: dict[str, Any], state: PoolView) -> None:
        """Keep one step (called by the pool, lock held)."""
        workers = len(state.deques) - len(state.spares)

        def named(index: int) -> str:  # a worker's or a spare slot's
            return thread_name(index, workers)

        spec: dict[str, Any] = {}
        if action in BLOCKING_STEPS:
            # Block's spare is no parameter of the spec's: the state says which one it took
            self.blocking = True
            name = "x" if action in ("Block", "Unblock") else "s"
            spec = {name: named(params[name])}
        elif action in ("SubmitExternal", "SubmitChild"):
            t, w = self._name(params["t"]), named(params["w"])
            spec = {"t": t, "w": w}
            if action == "SubmitChild":
                self.children.append(t)
                parent = self._running.get(w)
                if parent is not None:
                    self._parent[t] = parent
        elif action in ("Pop", "Steal", "StealBatch"):
            w = named(params["w" if action == "Pop" else "thief"])
            spec = ({"w": w} if action == "Pop"
                    else {"thief": w, "victim": named(params["victim"])})
            t = self._name(params["t"])
            self._running[w] = t
            self._runs[t] = self._runs.get(t, 0) + 1
        elif action == "Finish":
            w = named(params["w"])
            spec = {"w": w}
            self._running.pop(w, None)
            self._finished.add(self._name(params["t"]))
        elif action == "CancelQueued":
            self._cancelled.update(self._queued)
        deques = {named(i): tuple(map(self._name, dq))
                  for i, dq in enumerate(state.deques)}
        self._queued = tuple(t for dq in deques.values() for t in dq)
        self.spares_used = max(self.spares_used, len(state.spares))
        # managed blocking's variables, read from the pool as it holds them
        self.steps.append((action, spec, BlockingSnapshot(
            pool=PoolSnapshot(
                phase=Phase(state.phase), deque=deques, running=dict(self._running),
                outstanding=state.outstanding, submitted=frozenset(self._names.values()),
                finished=frozenset(self._finished), cancelled=frozenset(self._cancelled),
                runs=dict(self._runs), parent=dict(self._parent)),
            blocked=frozenset(map(named, state.blocked)),
            spare={spare_name(i): SpareState(on) for i, (on, _) in enumerate(state.spares)
                   if on != "off"},
            blocker={spare_name(i): frozenset({named(x)})
                     for i, (_, x) in enumerate(state.spares) if x is not None})))

    def actions(self) -> list[tuple[str, dict[str, Any]]]:
        """The recorded steps without their states: ``(action, params)`` in order."""
        return [(action, params) for action, params, _ in self.steps]

    def trace(self, workers: int, *, name: str = "recorded",
              meta: Mapping[str, Any] | None = None, steal_cap: int = 1,
              max_spares: int | None = None) -> Trace:
        """The recorded behaviour as a Trace over ``workers`` workers and the tasks submitted.

        Constants: ``Workers`` (``w1``, ...), ``Tasks`` (in submission order) and ``Children``
        (those a running task submitted), ``StealCap`` (``steal_cap``: the pool's); the
        initial state is the spec's ``Init``. A run that took a step of managed blocking also
        has ``MaxSpares`` (``max_spares``: the pool's; ``ValueError`` without it) and
        ``Spares`` (``s1``, ...: spare slot i is ``s<i+1>``), and its states the variables
        ``blocked``, ``spare`` and ``blocker``. ``Spares`` names each slot the run used and
        one more while ``MaxSpares`` allows it, so that a ``Block`` below the bound always has
        an off spare to start: a pool that blocked uncompensated there is refused.
        """
        worker_ids = [worker_name(i) for i in range(workers)]
        tasks = list(self._names.values())
        constants: dict[str, Any] = {"Workers": worker_ids, "Tasks": tasks,
                                     "Children": list(self.children), "StealCap": steal_cap}
        if not self.blocking:
            steps = tuple(TraceStep(action, params,
                                    poolspec.spec_state(state.pool, worker_ids, tasks))
                          for action, params, state in self.steps)
            return Trace(name=name, constants=constants,
                         initial=poolspec.spec_state(PoolSnapshot(), worker_ids, tasks),
                         steps=steps, meta=dict(meta or {}))
        if isinstance(max_spares, bool) or not isinstance(max_spares, int) or max_spares < 1:
            raise ValueError(f"trace({name!r}): the run blocked: max_spares must be the pool's, "
                             f"an int >= 1, not {max_spares!r}")
        spare_ids = [spare_name(i) for i in range(min(max_spares, self.spares_used + 1))]
        blocking_steps = tuple(
            TraceStep(action, params,
                      poolspec.blocking_spec_state(state, worker_ids, spare_ids, tasks))
            for action, params, state in self.steps)
        return Trace(name=name,
                     constants={**constants, "Spares": spare_ids, "MaxSpares": max_spares},
                     initial=poolspec.blocking_spec_state(BlockingSnapshot(), worker_ids,
                                                          spare_ids, tasks),
                     steps=blocking_steps, meta=dict(meta or {}))


# -- random runs of the pool ----------------------------------------------------------------

def record_pool_run(seed: int, *, tasks: int = 6, workers: int = 3,
                    steal_cap: int = 1) -> Trace:
    """Record one random run of a :class:`WorkStealingPool` of ``workers`` threads.

    From the seed: a forest of ``tasks`` tasks (some roots, submitted from this thread; the
    others children, each submitted by its parent as it runs), and per task whether it pauses
    briefly, and whether it raises. The run submits the roots, may cancel one root's future
    while it waits in its deque, shuts down (at once with ``cancel_futures``, or once some work
    ran, or after all of it), tries one more root after the shutdown (refused, no step), and
    waits for the pool to terminate. Which worker takes what, and which steals from whom, is
    up to the threads. No task waits on another's future inside the pool: a worker helping
    while it waits runs two tasks at once, which the spec has no step for. The Trace is named
    ``pool-seed-<seed>``; ``ValueError`` for ``tasks`` or ``workers`` below 1. ``steal_cap``
    above 1 runs the pool with batch steals (``steal="half"``) of at most that many tasks; the
    trace's constant ``StealCap`` is it.
    """
    for label, value in (("tasks", tasks), ("workers", workers), ("steal_cap", steal_cap)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"record_pool_run({seed!r}): {label}={value!r}: must be an integer "
                             ">= 1")
    rng = random.Random(seed)
    roots = rng.randint(1, max(1, (tasks + 1) // 2))
    kids: list[list[int]] = [[] for _ in range(tasks)]
    for i in range(roots, tasks):
        # with batch steals, a wide fan-out: a parent pushes children faster than the other
        # workers, busy with their own, take them, so a deque grows long enough to halve
        kids[0 if steal_cap > 1 and rng.random() < 0.7 else rng.randrange(i)].append(i)
    pauses = [rng.choice((0.0, 0.0, rng.uniform(0.0005, 0.003))) for _ in range(tasks)]
    fails = [rng.random() < 0.2 for _ in range(tasks)]
    cancel_one = rng.random() < 0.3
    how = rng.choice(("cancel_futures", "while running", "after all"))
    deadline = time.monotonic() + _WAIT

    recorder = PoolTraceRecorder()
    pool = WorkStealingPool(workers, recorder=recorder,
                            steal="half" if steal_cap > 1 else "single", steal_cap=steal_cap)

    def body(i: int) -> Callable[[], int]:
        def run() -> int:
            if pauses[i]:
                time.sleep(pauses[i])
            for child in kids[i]:
                pool.submit(body(child))
            if fails[i]:
                raise RuntimeError(f"task {i} failed")
            return i
        return run

    try:
        futures = [pool.submit(body(i)) for i in range(roots)]
        if cancel_one:
            futures[-1].cancel()  # it stays queued; a worker takes it and finishes it unrun
        if how == "while running":
            time.sleep(0.002)
        elif how == "after all":
            for future in futures:
                with contextlib.suppress(Exception):
                    future.exception(max(0.0, deadline - time.monotonic()))
        pool.shutdown(wait=False, cancel_futures=how == "cancel_futures")
        with contextlib.suppress(SchedulerClosedError):
            pool.submit(body(0))
        pool.await_termination(max(0.0, deadline - time.monotonic()))
    finally:
        pool.shutdown(wait=True)
    return recorder.trace(workers, name=f"pool-seed-{seed}", steal_cap=steal_cap, meta={
        "source": "refsched.verify.pool.recording.record_pool_run",
        "seed": seed, "tasks": tasks, "workers": workers, "steal_cap": steal_cap,
    })


# -- random runs of the pool with managed blocking -----------------------------------------

class _SparesWatch(PoolTraceRecorder):
    """A recorder that also tells, as the steps come, whether every spare is off."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()
        self.all_off = True  # no spare slot starting or on after the last step

    def record(self, action: str, params: dict[str, Any], state: PoolView) -> None:
        super().record(action, params, state)
        with self.changed:
            self.all_off = all(on == "off" for on, _ in state.spares)
            self.changed.notify_all()


def record_blocking_run(seed: int, *, workers: int = 2, max_spares: int = 1,
                        blockers: int | None = None) -> Trace:
    """Record one random run of a :class:`WorkStealingPool` whose tasks block inside
    ``pool.blocking()``, on real threads.

    ``blockers`` roots (default: ``workers + max_spares``, so that every thread the pool may
    run ends up blocked, and the blockers past the bound block uncompensated) each enter
    ``pool.blocking()``, may submit a child or two from inside it (to the blocked thread's
    deque: another thread steals them), and wait there until this thread releases them, in an
    order drawn from the seed; one may raise inside the block. Once the first is released one
    more root that blocks is submitted (it adopts a released spare, or starts one). Once every
    task ended, the run waits for every spare to retire, then shuts the pool down. So the run
    takes ``Block`` (compensated and not), ``StartSpare``, ``Unblock`` and ``Retire``, and
    spares run tasks. The Trace is named ``pool-blocking-seed-<seed>``; ``ValueError`` for
    ``workers`` or ``max_spares`` below 1, or ``blockers`` not in 1..``workers + max_spares``
    (more would wait for ever for a thread to run them).
    """
    for label, value in (("workers", workers), ("max_spares", max_spares)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"record_blocking_run({seed!r}): {label}={value!r}: must be an "
                             "integer >= 1")
    most = workers + max_spares
    count = most if blockers is None else blockers
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= most:
        raise ValueError(f"record_blocking_run({seed!r}): blockers={blockers!r}: must be an "
                         f"integer in 1..{most}")
    rng = random.Random(seed)
    total = count + 1  # and the late blocker
    kids = [rng.choice((0, 0, 1, 2)) for _ in range(total)]
    failing = rng.randrange(total) if rng.random() < 0.5 else None
    order = rng.sample(range(count), count)
    waits = [rng.random() < 0.5 for _ in range(count)]
    entered = [threading.Event() for _ in range(total)]
    release = [threading.Event() for _ in range(total)]
    deadline = time.monotonic() + _WAIT

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    def wait(event: threading.Event) -> None:
        if not event.wait(left()):
            raise RuntimeError(f"record_blocking_run({seed!r}): stuck")

    recorder = _SparesWatch()
    pool = WorkStealingPool(workers, recorder=recorder, max_spares=max_spares)
    children: list[Future[Any]] = []

    def blocker(i: int) -> Callable[[], int]:
        def run() -> int:
            with pool.blocking():
                children.extend(pool.submit(int, i) for _ in range(kids[i]))
                entered[i].set()
                wait(release[i])
                if i == failing:
                    raise RuntimeError(f"blocker {i} failed")
            return i
        return run

    try:
        futures = [pool.submit(blocker(i)) for i in range(count)]
        for i in range(count):
            wait(entered[i])
        for n, i in enumerate(order):
            release[i].set()
            if n == 0:
                futures.append(pool.submit(blocker(count)))
                wait(entered[count])
                release[count].set()
            if waits[n]:
                with contextlib.suppress(Exception):
                    futures[i].exception(left())
        for future in [*futures, *children]:
            with contextlib.suppress(Exception):
                future.exception(left())
        with recorder.changed:
            if not recorder.changed.wait_for(lambda: recorder.all_off, left()):
                raise RuntimeError(f"record_blocking_run({seed!r}): a spare never retired")
        pool.shutdown(wait=False)
        pool.await_termination(left())
    finally:
        for event in release:  # a run that failed leaves no task blocked
            event.set()
        pool.shutdown(wait=True)
    return recorder.trace(workers, name=f"pool-blocking-seed-{seed}", max_spares=max_spares,
                          meta={"source": "refsched.verify.pool.recording.record_blocking_run",
                                "seed": seed, "workers": workers, "max_spares": max_spares,
                                "blockers": count})
