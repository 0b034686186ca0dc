"""The work-stealing pool's operations on the wire (``--system pool``): the driven profile.

A pool's interesting steps are its workers' moves, which no user calls. An implementation that
can be stepped (its workers held, each move taken on request) is driven through the moves
``spec/WorkStealing.tla`` names, as :class:`~refsched.verify.pool.driver.SteppedPool` drives
refsched's own pool. Tasks are named by the oracle; a task's function returns its name.

===================================  ==========================================================
request                              the move
===================================  ==========================================================
``new {workers: [names]}``           a fresh pool with these workers, none of them moving;
                                     with ``steal_cap`` (an int above 1, sent only to an
                                     implementation with the ``batch_steals`` profile flag),
                                     taking batch steals of at most that many tasks; with
                                     ``spares`` (names, not workers') and ``max_spares`` (an
                                     int >= 1), both sent only to an implementation with the
                                     ``managed_blocking`` profile flag, with spare threads
                                     (spare i the pool's i-th spare slot), at most
                                     ``max_spares`` of them active at once
``submit {task, worker}``            ``submit()`` from outside the pool, the task going to
                                     ``worker``'s deque (SubmitExternal)
``submit_child {task, worker}``      ``submit()`` from inside the task ``worker`` runs
                                     (SubmitChild)
``pop {worker}``                     ``worker`` takes a task: its own newest (Pop), else the
                                     oldest of another's deque
``steal {thief, victim}``            ``thief`` takes a task, trying ``victim``'s oldest first
``finish {worker}``                  ``worker`` runs its task's function, settles its future
``shutdown {}``                      ``shutdown(wait=False)``
``cancel_queued {}``                 ``shutdown(wait=False, cancel_futures=True)``
``snapshot {}``                      the spec's variables
``stats {}``                         ``stats()``
``block {thread}``                   the task ``thread`` (a worker or a spare) runs enters
                                     ``blocking()`` (Block): a spare stands in for it, an
                                     active one released by its blocker, else an off one,
                                     unless ``max_spares`` are active
``start_spare {spare}``              the spare's thread starts to serve (StartSpare)
``unblock {thread}``                 the blocking call returns (Unblock): its spare is released
``retire {spare}``                   the released spare, idle, its deque empty, gives its
                                     thread back (Retire)
``blocking_snapshot {}``             the spec's variables with managed blocking's ``blocked``,
                                     ``spare`` and ``blocker``
===================================  ==========================================================

The last five are asked only of an implementation with the ``managed_blocking`` profile flag,
in a pool made with ``spares``.

Each move answers ``null``; a worker that takes no task answers the error ``StepRefused``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from refsched.conform.wire import Op, Remote, Wire, lazy
from refsched.model.pool import PoolSnapshot
from refsched.model.pool.blocking import BlockingSnapshot
from refsched.pool.pool import PoolStats
from refsched.verify.pool.driver import SteppedPool, StepRefused, driven_pool

__all__ = ["WIRE", "RemotePool", "ServedPool", "paired"]


class ServedPool:
    """A pool served over the wire, its workers' moves taken on request."""

    def __init__(self, factory: Callable[..., Any], workers: Any, steal_cap: Any = 1,
                 spares: Any = (), max_spares: Any = None) -> None:
        if not (isinstance(workers, list) and workers
                and all(isinstance(w, str) for w in workers)
                and len(set(workers)) == len(workers)):
            raise ValueError(f"new: workers must be a non-empty list of distinct names, not "
                             f"{workers!r}")
        if isinstance(steal_cap, bool) or not isinstance(steal_cap, int) or steal_cap < 1:
            raise ValueError(f"new: steal_cap must be an int >= 1, not {steal_cap!r}")
        if not (isinstance(spares, list | tuple) and all(isinstance(s, str) for s in spares)
                and len(set(spares)) == len(spares) and not set(spares) & set(workers)):
            raise ValueError(f"new: spares must be a list of distinct names, none a worker's, "
                             f"not {spares!r}")
        if max_spares is not None and (isinstance(max_spares, bool)
                                       or not isinstance(max_spares, int) or max_spares < 1):
            raise ValueError(f"new: max_spares must be an int >= 1, not {max_spares!r}")
        self.driven = SteppedPool(factory, workers, steal_cap, spares=spares,
                                  max_spares=max_spares if spares else None)

    def submit(self, task: str, worker: str) -> None:
        self.driven.submit_external(task, worker)

    def submit_child(self, task: str, worker: str) -> None:
        self.driven.submit_child(task, worker)

    def pop(self, worker: str) -> None:
        self.driven.pop(worker)

    def steal(self, thief: str, victim: str) -> None:
        self.driven.steal(thief, victim)

    def finish(self, worker: str) -> None:
        self.driven.finish(worker)

    def shutdown(self) -> None:
        self.driven.shutdown()

    def cancel_queued(self) -> None:
        self.driven.cancel_queued()

    def snapshot(self) -> PoolSnapshot:
        return self.driven.snapshot()

    def stats(self) -> PoolStats:
        return self.driven.stats()

    def block(self, thread: str) -> None:
        self.driven.block(thread)

    def start_spare(self, spare: str) -> None:
        self.driven.start_spare(spare)

    def unblock(self, thread: str) -> None:
        self.driven.unblock(thread)

    def retire(self, spare: str) -> None:
        self.driven.retire(spare)

    def blocking_snapshot(self) -> BlockingSnapshot:
        return self.driven.blocking_snapshot()


class RemotePool(Remote[PoolSnapshot, PoolStats]):
    """A pool over the protocol, with :class:`SteppedPool`'s moves: what the pool's replay
    and lock-step machine drive (``RemotePool(impl, workers)``)."""

    drives_steps = True  # it takes each move itself: refsched.verify.pool.driver.driven_pool

    def __init__(self, implementation: Any, workers: Sequence[Hashable],
                 steal_cap: int = 1, *, spares: Sequence[Hashable] = (),
                 max_spares: int | None = None) -> None:
        self.workers = tuple(workers)
        # steal_cap only when batch steals are asked, spares only when managed blocking is:
        # a pool without them never sees them
        extra: dict[str, Any] = {} if steal_cap == 1 else {"steal_cap": steal_cap}
        if spares:
            extra.update(spares=[str(s) for s in spares],
                         **({} if max_spares is None else {"max_spares": max_spares}))
        super().__init__(implementation, workers=[str(w) for w in self.workers], **extra)

    def submit_external(self, task: Hashable, worker: Hashable) -> None:
        self._call("submit", task=str(task), worker=str(worker))

    def submit_child(self, task: Hashable, worker: Hashable) -> None:
        self._call("submit_child", task=str(task), worker=str(worker))

    def pop(self, worker: Hashable) -> None:
        self._call("pop", worker=str(worker))

    def steal(self, thief: Hashable, victim: Hashable) -> None:
        self._call("steal", thief=str(thief), victim=str(victim))

    def finish(self, worker: Hashable) -> None:
        self._call("finish", worker=str(worker))

    def shutdown(self) -> None:
        self._call("shutdown")

    def cancel_queued(self) -> None:
        self._call("cancel_queued")

    def block(self, thread: Hashable) -> None:
        self._call("block", thread=str(thread))

    def start_spare(self, spare: Hashable) -> None:
        self._call("start_spare", spare=str(spare))

    def unblock(self, thread: Hashable) -> None:
        self._call("unblock", thread=str(thread))

    def retire(self, spare: Hashable) -> None:
        self._call("retire", spare=str(spare))

    def blocking_snapshot(self) -> BlockingSnapshot:
        return cast(BlockingSnapshot, self._call("blocking_snapshot"))


def paired(factory: Callable[..., Any], pair: Callable[..., Any],
           profile: Any = None) -> Callable[..., Any]:
    """Pools as the pool's checks drive them (:func:`driven_pool` of ``factory`` over the
    workers), each beside the model's pool of the same workers
    (:class:`~refsched.conform.pool.probes.ModelPool`). The pairs take each move
    themselves, as a pool in another process does."""
    from refsched.conform.pool.probes import ModelPool  # which speaks this wire

    def new(workers: Sequence[Hashable], steal_cap: int = 1, *,
            spares: Sequence[Hashable] = (), max_spares: int | None = None) -> Any:
        if spares:  # the model's pool has no managed blocking: such a pool goes unpaired
            return driven_pool(factory, workers, steal_cap, spares=spares,
                               max_spares=max_spares)
        return pair(driven_pool(factory, workers, steal_cap), ModelPool(workers, steal_cap))
    new.drives_steps = True  # type: ignore[attr-defined]
    return new


WIRE = Wire(
    system="pool",
    title="refsched.WorkStealingPool",
    new=Op(("workers",), optional={"steal_cap": 1, "spares": [], "max_spares": None}),
    ops={
        "submit": Op(("task", "worker")),
        "submit_child": Op(("task", "worker")),
        "pop": Op(("worker",)),
        "steal": Op(("thief", "victim")),
        "finish": Op(("worker",)),
        "shutdown": Op(),
        "cancel_queued": Op(),
        "snapshot": Op(result=PoolSnapshot),
        "stats": Op(result=PoolStats),
        "block": Op(("thread",), flag="managed_blocking"),
        "start_spare": Op(("spare",), flag="managed_blocking"),
        "unblock": Op(("thread",), flag="managed_blocking"),
        "retire": Op(("spare",), flag="managed_blocking"),
        "blocking_snapshot": Op(result=BlockingSnapshot, flag="managed_blocking"),
    },
    serve=ServedPool,
    default_factory=lazy("refsched.pool.pool:WorkStealingPool"),
    remote=RemotePool,
    errors={"StepRefused": StepRefused},
    op_of={"submit_external": "submit"},
    paired=paired,
)
RemotePool.wire = WIRE
