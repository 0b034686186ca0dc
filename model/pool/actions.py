"""The actions of ``spec/WorkStealing.tla`` as pure functions over a :class:`PoolSnapshot`.

Each action is an :class:`Action`: ``refusal(s, ...)`` (``None`` when the action is enabled,
else why not: the error the API raises, or no error when there is simply no step to take) and
``step(s, ...)`` (the next state; only called when enabled). The two submit actions also take
the instance's ``children`` (the spec's constant ``Children``: the ids only a running task
submits); without it any id may be a root or a child, as in the pool's API. The two steal
actions take the spec's ``StealCap`` as a last argument, ``steal_cap`` (1 when left out: single
steals only). No threads, clocks
or I/O: the same state and arguments always give the same result. The code favours being
obviously the spec over being fast: every helper recomputes from the whole state.

A deque is a tuple read from the top (index 0, where thieves take) to the bottom (the last
item, where the owner pushes and pops), as the spec's sequences are.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from refsched.errors import SchedulerClosedError, SchedulerError

__all__ = [
    "ACTIONS",
    "INITIAL",
    "Action",
    "Phase",
    "PoolSnapshot",
    "Refusal",
    "copies",
    "initial",
    "queued",
    "running_tasks",
    "steal_size",
]


class Phase(enum.Enum):
    """The pool's life cycle (spec: ``phase``): accepting -> draining -> terminated."""

    ACCEPTING = "accepting"  # submit() takes roots
    DRAINING = "draining"  # shutdown() was called: no roots; admitted work runs and may spawn
    TERMINATED = "terminated"  # nothing outstanding, every deque empty, every worker idle


ACCEPTING, DRAINING, TERMINATED = Phase.ACCEPTING, Phase.DRAINING, Phase.TERMINATED


def _frozen(mapping: Mapping[Hashable, Any], drop: Callable[[Any], bool]) -> Mapping[Hashable, Any]:
    return MappingProxyType({k: v for k, v in mapping.items() if not drop(v)})


@dataclass(frozen=True, eq=False)
class PoolSnapshot:
    """An immutable value shaped like ``spec/WorkStealing.tla``'s variables; compare with ``==``.

    Only what differs from the spec's ``Init`` is listed: a worker whose deque is empty has no
    ``deque`` entry, an idle worker no ``running`` entry, a task never taken to run no ``runs``
    entry, a root (or unsubmitted) task no ``parent`` entry. So the value does not depend on the
    instance's ``Workers`` and ``Tasks``; :mod:`refsched.verify.pool.spec` adds them back.
    """

    phase: Phase = ACCEPTING
    deque: Mapping[Hashable, tuple[Hashable, ...]] = field(
        default_factory=lambda: MappingProxyType({}))  # worker -> its tasks, top first; non-empty
    running: Mapping[Hashable, Hashable] = field(
        default_factory=lambda: MappingProxyType({}))  # busy worker -> the task it runs
    outstanding: int = 0  # == len(queued(s) | running_tasks(s)): OutstandingIsQueuedPlusRunning
    submitted: frozenset[Hashable] = frozenset()  # every task submitted so far, root or child
    finished: frozenset[Hashable] = frozenset()  # tasks whose run ended (returned or raised)
    cancelled: frozenset[Hashable] = frozenset()  # taken out of a deque by CancelQueued, never run
    runs: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> times taken to run, >= 1; <= 1
    parent: Mapping[Hashable, Hashable] = field(
        default_factory=lambda: MappingProxyType({}))  # child -> the running task that spawned it

    def __post_init__(self) -> None:
        # Normal form, so that == is the spec's equality: no empty deque, no zero count.
        object.__setattr__(self, "deque", _frozen(self.deque, lambda d: len(d) == 0))
        object.__setattr__(self, "running", _frozen(self.running, lambda t: False))
        object.__setattr__(self, "runs", _frozen(self.runs, lambda n: n == 0))
        object.__setattr__(self, "parent", _frozen(self.parent, lambda p: False))
        for name in ("submitted", "finished", "cancelled"):
            value = getattr(self, name)
            if not isinstance(value, frozenset):
                object.__setattr__(self, name, frozenset(value))

    def _key(self) -> tuple[Any, ...]:
        return (self.phase, self.outstanding, self.submitted, self.finished, self.cancelled,
                frozenset(self.deque.items()), frozenset(self.running.items()),
                frozenset(self.runs.items()), frozenset(self.parent.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PoolSnapshot):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def replace(self, **changes: Any) -> PoolSnapshot:
        """A copy with some fields replaced (mappings may be any mapping, sets any iterable)."""
        fields = {name: getattr(self, name) for name in (
            "phase", "deque", "running", "outstanding", "submitted", "finished", "cancelled",
            "runs", "parent")}
        return PoolSnapshot(**{**fields, **changes})


@dataclass(frozen=True)
class Refusal:
    """Why an action is not enabled: the error the API raises (``None``: no error, no step)."""

    error: type[SchedulerError] | None
    reason: str  # the call, the value, and what is wrong with it

    @property
    def error_name(self) -> str | None:
        """The error class's name, as the API and a trace name it."""
        return None if self.error is None else self.error.__name__


# -- Queries over a state (the spec's operators) ----------------------------------------------

def queued(s: PoolSnapshot) -> frozenset[Hashable]:
    """Spec ``Queued``: the tasks waiting in some deque."""
    return frozenset(t for d in s.deque.values() for t in d)


def running_tasks(s: PoolSnapshot) -> frozenset[Hashable]:
    """Spec ``Running``: the tasks some worker runs."""
    return frozenset(s.running.values())


def copies(s: PoolSnapshot, task: Hashable) -> int:
    """Spec ``Copies(t)``: how many deque slots, over all deques, hold ``task``."""
    return sum(d.count(task) for d in s.deque.values())


Deques = Mapping[Hashable, tuple[Hashable, ...]]  # worker -> its tasks, top first


def _push(s: PoolSnapshot, worker: Hashable, task: Hashable) -> Deques:
    """``s.deque`` with ``task`` pushed onto the bottom of ``worker``'s deque."""
    return {**s.deque, worker: (*s.deque.get(worker, ()), task)}


def _take(s: PoolSnapshot, worker: Hashable, task: Hashable, deques: Deques) -> PoolSnapshot:
    """``worker`` runs ``task``, taken out of a deque (``deques`` is the result)."""
    return s.replace(deque=deques, running={**s.running, worker: task},
                     runs={**s.runs, task: s.runs.get(task, 0) + 1})


# -- The actions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    """A spec action: its name, its parameters' names in the spec, when it is enabled, its step.

    ``refusal(s, *args)`` and ``effect(s, *args)`` take the parameters in the order of
    ``params``. The refusal of an action with ``takes_children`` also takes the keyword
    ``children`` (the spec's ``Children``; ``None``: no such constant).
    """

    name: str
    params: tuple[str, ...]
    refusal: Callable[..., Refusal | None]
    effect: Callable[..., PoolSnapshot]
    takes_children: bool = False  # SubmitExternal, SubmitChild
    takes_steal_cap: bool = False  # Steal, StealBatch: refusal and effect end with steal_cap

    def refused(self, s: PoolSnapshot, *args: Any,
                children: Collection[Hashable] | None = None,
                steal_cap: int = 1) -> Refusal | None:
        """``refusal``, given ``children`` and ``steal_cap`` when the action takes them."""
        if self.takes_children:
            return self.refusal(s, *args, children=children)
        if self.takes_steal_cap and len(args) == len(self.params):
            return self.refusal(s, *args, steal_cap)
        return self.refusal(s, *args)

    def enabled(self, s: PoolSnapshot, *args: Any,
                children: Collection[Hashable] | None = None, steal_cap: int = 1) -> bool:
        return self.refused(s, *args, children=children, steal_cap=steal_cap) is None

    def step(self, s: PoolSnapshot, *args: Any, steal_cap: int = 1) -> PoolSnapshot:
        if self.takes_steal_cap and len(args) == len(self.params):
            return self.effect(s, *args, steal_cap)
        return self.effect(s, *args)


def submit_external_refusal(s: PoolSnapshot, task: Hashable, worker: Hashable,
                            children: Collection[Hashable] | None = None) -> Refusal | None:
    call = f"submit({task!r})"
    if s.phase is not ACCEPTING:
        return Refusal(SchedulerClosedError, f"{call}: the pool is {s.phase.value}")
    if children is not None and task in children:
        return Refusal(None, f"{call}: {task!r} is a child, submitted only by a running task")
    if task in s.submitted:
        return Refusal(None, f"{call}: {task!r} was already submitted")
    return None


def submit_external_effect(s: PoolSnapshot, task: Hashable, worker: Hashable) -> PoolSnapshot:
    return s.replace(deque=_push(s, worker, task), outstanding=s.outstanding + 1,
                     submitted=s.submitted | {task})


def submit_child_refusal(s: PoolSnapshot, task: Hashable, worker: Hashable,
                         children: Collection[Hashable] | None = None) -> Refusal | None:
    call = f"submit({task!r}) from worker {worker!r}"
    if s.phase is TERMINATED:
        return Refusal(SchedulerClosedError, f"{call}: the pool is terminated")
    if worker not in s.running:
        return Refusal(None, f"{call}: the worker runs no task")
    if children is not None and task not in children:
        return Refusal(None, f"{call}: {task!r} is a root, submitted only from outside")
    if task in s.submitted:
        return Refusal(None, f"{call}: {task!r} was already submitted")
    return None


def submit_child_effect(s: PoolSnapshot, task: Hashable, worker: Hashable) -> PoolSnapshot:
    return s.replace(deque=_push(s, worker, task), outstanding=s.outstanding + 1,
                     submitted=s.submitted | {task},
                     parent={**s.parent, task: s.running[worker]})


def pop_refusal(s: PoolSnapshot, worker: Hashable) -> Refusal | None:
    if worker in s.running:
        return Refusal(None, f"pop({worker!r}): the worker runs {s.running[worker]!r}")
    if not s.deque.get(worker):
        return Refusal(None, f"pop({worker!r}): the worker's deque is empty")
    return None


def pop_effect(s: PoolSnapshot, worker: Hashable) -> PoolSnapshot:
    d = s.deque[worker]
    return _take(s, worker, d[-1], {**s.deque, worker: d[:-1]})


def _thief_refusal(s: PoolSnapshot, call: str, thief: Hashable,
                   victim: Hashable) -> Refusal | None:
    """What keeps ``thief`` from stealing from ``victim`` at all, single or batch steal."""
    if thief == victim:
        return Refusal(None, f"{call}: a worker does not steal from itself")
    if thief in s.running:
        return Refusal(None, f"{call}: the thief runs {s.running[thief]!r}")
    if s.deque.get(thief):
        return Refusal(None, f"{call}: the thief's own deque is not empty")
    if not s.deque.get(victim):
        return Refusal(None, f"{call}: the victim's deque is empty")
    return None


def steal_refusal(s: PoolSnapshot, thief: Hashable, victim: Hashable,
                  steal_cap: int = 1) -> Refusal | None:
    call = f"steal({thief!r}, {victim!r})"
    refusal = _thief_refusal(s, call, thief, victim)
    if refusal is not None:
        return refusal
    if steal_size(len(s.deque[victim]), steal_cap) > 1:
        return Refusal(None, f"{call}: a steal from {len(s.deque[victim])} tasks with "
                             f"StealCap {steal_cap} takes several (StealBatch)")
    return None


def steal_effect(s: PoolSnapshot, thief: Hashable, victim: Hashable,
                 steal_cap: int = 1) -> PoolSnapshot:
    d = s.deque[victim]
    return _take(s, thief, d[0], {**s.deque, victim: d[1:]})


# -- Batch steals (the spec's section of that name) -------------------------------------------

def steal_size(n: int, steal_cap: int) -> int:
    """Spec ``StealSize(n)``: how many tasks a steal takes from a deque of ``n`` > 0 tasks:
    ``steal_cap`` from a deque of at least twice that many, and 1 from a shorter one."""
    return steal_cap if n >= 2 * steal_cap else 1


def steal_batch_refusal(s: PoolSnapshot, thief: Hashable, victim: Hashable,
                        steal_cap: int = 1) -> Refusal | None:
    call = f"steal_batch({thief!r}, {victim!r})"
    refusal = _thief_refusal(s, call, thief, victim)
    if refusal is not None:
        return refusal
    if steal_size(len(s.deque[victim]), steal_cap) <= 1:
        return Refusal(None, f"{call}: a steal from {len(s.deque[victim])} tasks with "
                             f"StealCap {steal_cap} takes one (Steal)")
    return None


def steal_batch_effect(s: PoolSnapshot, thief: Hashable, victim: Hashable,
                       steal_cap: int = 1) -> PoolSnapshot:
    d = s.deque[victim]
    k = steal_size(len(d), steal_cap)
    # the first runs; the others are the thief's deque, in the order they had (top first)
    return _take(s, thief, d[0], {**s.deque, victim: d[k:], thief: d[1:k]})


def finish_refusal(s: PoolSnapshot, worker: Hashable) -> Refusal | None:
    if worker not in s.running:
        return Refusal(None, f"finish({worker!r}): the worker runs no task")
    return None


def finish_effect(s: PoolSnapshot, worker: Hashable) -> PoolSnapshot:
    task = s.running[worker]
    last = s.phase is DRAINING and s.outstanding == 1
    return s.replace(running={w: t for w, t in s.running.items() if w != worker},
                     finished=s.finished | {task}, outstanding=s.outstanding - 1,
                     phase=TERMINATED if last else s.phase)


def shutdown_refusal(s: PoolSnapshot) -> Refusal | None:
    if s.phase is not ACCEPTING:
        return Refusal(None, f"shutdown(): the pool is already {s.phase.value}")
    return None


def shutdown_effect(s: PoolSnapshot) -> PoolSnapshot:
    return s.replace(phase=TERMINATED if s.outstanding == 0 else DRAINING)


def cancel_queued_refusal(s: PoolSnapshot) -> Refusal | None:
    if s.phase is not DRAINING:
        return Refusal(None, f"shutdown(cancel_futures=True): the pool is {s.phase.value}")
    if not queued(s):
        return Refusal(None, "shutdown(cancel_futures=True): no task is queued")
    return None


def cancel_queued_effect(s: PoolSnapshot) -> PoolSnapshot:
    waiting = queued(s)
    return s.replace(deque={}, cancelled=s.cancelled | waiting,
                     outstanding=s.outstanding - len(waiting),
                     phase=TERMINATED if s.outstanding == len(waiting) else s.phase)


SubmitExternal = Action("SubmitExternal", ("t", "w"), submit_external_refusal,
                        submit_external_effect, takes_children=True)
SubmitChild = Action("SubmitChild", ("t", "w"), submit_child_refusal, submit_child_effect,
                     takes_children=True)
Pop = Action("Pop", ("w",), pop_refusal, pop_effect)
Steal = Action("Steal", ("thief", "victim"), steal_refusal, steal_effect,
               takes_steal_cap=True)
Finish = Action("Finish", ("w",), finish_refusal, finish_effect)
Shutdown = Action("Shutdown", (), shutdown_refusal, shutdown_effect)
CancelQueued = Action("CancelQueued", (), cancel_queued_refusal, cancel_queued_effect)
StealBatch = Action("StealBatch", ("thief", "victim"), steal_batch_refusal, steal_batch_effect,
                    takes_steal_cap=True)

ACTIONS: dict[str, Action] = {a.name: a for a in (
    SubmitExternal, SubmitChild, Pop, Steal, Finish, Shutdown, CancelQueued, StealBatch,
)}


def initial() -> PoolSnapshot:
    """Spec ``Init``: accepting, every deque empty, every worker idle, nothing submitted."""
    return PoolSnapshot()


INITIAL = initial()
"""Spec ``Init``."""
