"""Managed blocking in ``spec/WorkStealing.tla`` (its sections "Managed blocking") as pure
functions: the state, the actions ``Block``, ``StartSpare``, ``Unblock``, ``Retire``, and the
invariants ``CompensationBounded``, ``RunnableBounded``, ``SparesStandInForBlockers``.

A :class:`BlockingSnapshot` is a :class:`~refsched.model.pool.actions.PoolSnapshot` (whose
``deque`` and ``running`` also hold the spares', keyed by the spare's id) and the three
variables of managed blocking. The instance's ``Workers``, ``Spares`` and ``MaxSpares`` are a
:class:`BlockingInstance`. Like the rest of the model: no threads, no clocks, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..dag.graph import ModelGraph, search
from .actions import ACTIONS, PoolSnapshot, Refusal
from .graph import Instance, next_steps

__all__ = [
    "BLOCKING_ACTIONS",
    "BLOCKING_INVARIANTS",
    "BlockingInstance",
    "BlockingSnapshot",
    "SpareState",
    "blocking_explore",
    "blocking_next_steps",
    "blocking_refusal",
    "blocking_step",
    "blocking_violated",
]


class SpareState(enum.Enum):
    """Spec ``spare[s]``."""

    OFF = "off"  # no thread
    STARTING = "starting"  # its thread was launched and serves nothing yet
    ON = "on"  # it serves as a worker does


@dataclass(frozen=True, slots=True)
class BlockingInstance:
    """The constants managed blocking adds: ``Workers``, ``Spares``, ``MaxSpares``."""

    workers: frozenset[Hashable]
    spares: frozenset[Hashable]
    max_spares: int  # MaxSpares >= 0; 0 turns managed blocking off


def _empty() -> Mapping[Hashable, frozenset[Hashable]]:
    return MappingProxyType({})


@dataclass(frozen=True, eq=False)
class BlockingSnapshot:
    """The pool's variables, and ``blocked``, ``spare``, ``blocker``. Off spares (with no
    blocker) are left out of ``spare`` and ``blocker``, as idle workers are of ``running``."""

    pool: PoolSnapshot = field(default_factory=PoolSnapshot)
    blocked: frozenset[Hashable] = frozenset()  # threads whose task blocks inside blocking()
    spare: Mapping[Hashable, SpareState] = field(
        default_factory=lambda: MappingProxyType({}))  # active spare -> STARTING or ON
    blocker: Mapping[Hashable, frozenset[Hashable]] = field(
        default_factory=_empty)  # spare -> the blocked thread it stands in for; never empty

    def _key(self) -> tuple[Any, ...]:
        return (self.pool, self.blocked, frozenset(self.spare.items()),
                frozenset(self.blocker.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockingSnapshot):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:  # a state of a graph: its variables' values
        return hash(self._key())

    def active(self) -> frozenset[Hashable]:
        """Spec ``ActiveSpares``."""
        return frozenset(s for s, state in self.spare.items() if state is not SpareState.OFF)

    def serving(self, x: Hashable, instance: BlockingInstance) -> bool:
        """Spec ``Serving(x)``."""
        return x in instance.workers or self.spare.get(x) is SpareState.ON

    def runnable(self, instance: BlockingInstance) -> frozenset[Hashable]:
        """Spec ``Runnable``."""
        threads = instance.workers | instance.spares
        return frozenset(x for x in threads
                         if self.serving(x, instance) and x not in self.blocked)


def _with(s: BlockingSnapshot, *, blocked: frozenset[Hashable] | None = None,
          spare: Mapping[Hashable, SpareState] | None = None,
          blocker: Mapping[Hashable, frozenset[Hashable]] | None = None) -> BlockingSnapshot:
    """``s`` with some managed-blocking variables replaced, in normal form (no off spare in
    ``spare``, no empty set in ``blocker``)."""
    spare = s.spare if spare is None else spare
    blocker = s.blocker if blocker is None else blocker
    return BlockingSnapshot(
        pool=s.pool, blocked=s.blocked if blocked is None else blocked,
        spare=MappingProxyType({k: v for k, v in spare.items() if v is not SpareState.OFF}),
        blocker=MappingProxyType({k: v for k, v in blocker.items() if v}))


def _free(s: BlockingSnapshot, sp: Hashable, instance: BlockingInstance) -> bool:
    """Spec ``Free(s)``."""
    state = s.spare.get(sp, SpareState.OFF)
    if state is not SpareState.OFF:
        return not s.blocker.get(sp)
    return len(s.active()) < instance.max_spares


def block_enabled(s: BlockingSnapshot, x: Hashable, instance: BlockingInstance) -> bool:
    return instance.max_spares > 0 and x in s.pool.running and x not in s.blocked


def block_steps(s: BlockingSnapshot, x: Hashable,
                instance: BlockingInstance) -> list[BlockingSnapshot]:
    """Spec ``Block(x)``: each state it may lead to (one per free spare; one if none is)."""
    blocked = s.blocked | {x}
    free = [sp for sp in sorted(instance.spares - {x}, key=str) if _free(s, sp, instance)]
    if not free:
        return [_with(s, blocked=blocked)]
    return [_with(s, blocked=blocked,
                  spare={**s.spare, sp: s.spare.get(sp, SpareState.STARTING)},
                  blocker={**s.blocker, sp: frozenset({x})}) for sp in free]


def start_spare_enabled(s: BlockingSnapshot, sp: Hashable) -> bool:
    return s.spare.get(sp) is SpareState.STARTING


def start_spare_step(s: BlockingSnapshot, sp: Hashable) -> BlockingSnapshot:
    """Spec ``StartSpare(s)``."""
    return _with(s, spare={**s.spare, sp: SpareState.ON})


def unblock_enabled(s: BlockingSnapshot, x: Hashable) -> bool:
    return x in s.blocked


def unblock_step(s: BlockingSnapshot, x: Hashable) -> BlockingSnapshot:
    """Spec ``Unblock(x)``: x's spare, if any, is released."""
    return _with(s, blocked=s.blocked - {x},
                 blocker={sp: b - {x} for sp, b in s.blocker.items()})


def retire_enabled(s: BlockingSnapshot, sp: Hashable) -> bool:
    return (s.spare.get(sp) is SpareState.ON and not s.blocker.get(sp)
            and sp not in s.pool.running and not s.pool.deque.get(sp))


def retire_step(s: BlockingSnapshot, sp: Hashable) -> BlockingSnapshot:
    """Spec ``Retire(s)``."""
    return _with(s, spare={k: v for k, v in s.spare.items() if k != sp})


BLOCKING_ACTIONS: dict[str, tuple[Callable[..., bool], Callable[..., object]]] = {
    "Block": (block_enabled, block_steps),
    "StartSpare": (start_spare_enabled, start_spare_step),
    "Unblock": (unblock_enabled, unblock_step),
    "Retire": (retire_enabled, retire_step),
}
"""Each action's (enabled, step); Block's step gives every state it may lead to."""


def _thread_refusal(s: BlockingSnapshot, name: str, params: Mapping[str, Any],
                    blocking: BlockingInstance) -> str | None:
    """Why the pool's action ``name`` may not be taken by its thread with managed blocking,
    or None: ``SubmitExternal`` goes to a worker, a thief or a popping thread is ``Serving``,
    and a blocked thread does not ``Finish``."""
    doer = params.get("thief", params.get("w"))
    if name == "SubmitExternal" and doer not in blocking.workers:
        return f"{doer} is not a worker: submit() from outside goes to a worker"
    if name in ("Pop", "Steal", "StealBatch") and not s.serving(doer, blocking):
        return f"{doer} does not serve: only a worker or a started spare takes tasks"
    if name == "Finish" and doer in s.blocked:
        return f"{doer} is blocked inside blocking(): its task cannot finish"
    return None


def blocking_refusal(s: BlockingSnapshot, name: str, args: tuple[Any, ...],
                     blocking: BlockingInstance) -> Refusal | None:
    """Why the step ``name(*args)`` of ``Next`` with managed blocking is not enabled in
    ``s`` (None: it is). ``args``: the action's parameters in its order, and for a steal
    the ``StealCap`` after them."""
    if name in BLOCKING_ACTIONS:
        enabled, _ = BLOCKING_ACTIONS[name]
        if enabled(s, args[0], blocking) if name == "Block" else enabled(s, args[0]):
            return None
        return Refusal(None, f"{name}({', '.join(map(str, args))}) is not enabled")
    action = ACTIONS[name]
    why = _thread_refusal(s, name, dict(zip(action.params, args, strict=False)), blocking)
    if why is not None:
        return Refusal(None, why)
    return action.refused(s.pool, *args)


def blocking_step(s: BlockingSnapshot, name: str, args: tuple[Any, ...],
                  blocking: BlockingInstance) -> tuple[BlockingSnapshot, ...]:
    """Every state the enabled step ``name(*args)`` may lead to (more than one only for a
    ``Block`` with several spares free to stand in)."""
    if name == "Block":
        return tuple(block_steps(s, args[0], blocking))
    if name in BLOCKING_ACTIONS:
        _, step = BLOCKING_ACTIONS[name]
        return (step(s, *args),)  # type: ignore[return-value]
    return (replace(s, pool=ACTIONS[name].step(s.pool, *args)),)


def blocking_next_steps(s: BlockingSnapshot, instance: Instance, blocking: BlockingInstance
                        ) -> Iterator[tuple[str, dict[str, Any], tuple[BlockingSnapshot, ...]]]:
    """Every enabled instance of the spec's ``Next`` with managed blocking: (action name,
    parameters, every state it may lead to). The pool's actions range over ``Threads``
    (``instance.workers`` then the spares; ``SubmitExternal`` over the workers alone), a thief
    or a popping thread must be ``Serving``, and a blocked thread does not ``Finish``.
    ``Block(x)`` leads to one state per spare that may stand in for ``x`` (the spare the
    spec's ``Block`` picks); every other action to one."""
    spares: tuple[Any, ...] = tuple(sorted(blocking.spares, key=str))
    threads = instance.workers + spares
    for name, params, after in next_steps(s.pool, replace(instance, workers=threads)):
        if _thread_refusal(s, name, params, blocking) is None:
            yield name, params, (replace(s, pool=after),)
    for x in threads:
        if block_enabled(s, x, blocking):
            yield "Block", {"x": x}, tuple(block_steps(s, x, blocking))
        if unblock_enabled(s, x):
            yield "Unblock", {"x": x}, (unblock_step(s, x),)
    for sp in spares:
        if start_spare_enabled(s, sp):
            yield "StartSpare", {"s": sp}, (start_spare_step(s, sp),)
        if retire_enabled(s, sp):
            yield "Retire", {"s": sp}, (retire_step(s, sp),)


def blocking_explore(instance: Instance,
                     blocking: BlockingInstance) -> ModelGraph[BlockingSnapshot]:
    """Breadth-first search of ``Next`` with managed blocking, as TLC explores the spec: one
    edge per state a step may lead to."""
    return search(BlockingSnapshot(),
                  lambda s: ((name, params, after)
                             for name, params, afters in blocking_next_steps(s, instance, blocking)
                             for after in afters),
                  lambda s: True)


def compensation_bounded(s: BlockingSnapshot, instance: BlockingInstance) -> bool:
    """At most MaxSpares spares are active at once."""
    return len(s.active()) <= instance.max_spares


def runnable_bounded(s: BlockingSnapshot, instance: BlockingInstance) -> bool:
    """Beyond Workers threads, only released spares (active, blocker returned) can run tasks."""
    released = [sp for sp in s.active() if not s.blocker.get(sp)]
    return len(s.runnable(instance)) <= len(instance.workers) + len(released)


def spares_stand_in_for_blockers(s: BlockingSnapshot, instance: BlockingInstance) -> bool:
    """An off spare runs nothing and holds no task; an active one stands in for a thread that
    is still blocked, or for none."""
    for sp in instance.spares:
        if sp not in s.spare and (s.blocker.get(sp) or sp in s.pool.running
                                  or s.pool.deque.get(sp)):
            return False
        if not s.blocker.get(sp, frozenset()) <= s.blocked:
            return False
    return True


BLOCKING_INVARIANTS: dict[str, Callable[[BlockingSnapshot, BlockingInstance], bool]] = {
    "RunnableBounded": runnable_bounded,
    "CompensationBounded": compensation_bounded,
    "SparesStandInForBlockers": spares_stand_in_for_blockers,
}


def blocking_violated(s: BlockingSnapshot, instance: BlockingInstance) -> list[str]:
    """The names of the managed-blocking invariants ``s`` breaks."""
    return [name for name, holds in BLOCKING_INVARIANTS.items() if not holds(s, instance)]
