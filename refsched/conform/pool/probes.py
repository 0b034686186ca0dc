"""The pool's clause probes: for each clause of ``pool.*``, a short run of moves that ends in it.

The pool is driven as its generated phase drives it: each call is one of
:class:`~refsched.verify.pool.driver.SteppedPool`'s moves (``submit_external``,
``submit_child``, ``pop``, ``steal``, ``finish``, ``shutdown``, ``cancel_queued``) or a reading
(``snapshot``, ``stats``), and with managed blocking the moves ``block``, ``start_spare``,
``unblock``, ``retire`` and the reading ``blocking_snapshot``, taken on the implementation
through the factory the oracle gives (:func:`~refsched.verify.pool.driver.driven_pool`: a pool
class stepped in this process, or a pool over the protocol taking each move itself) and on
:class:`ModelPool`, the model's actions (``refsched.model.pool``) behind the same moves.
``("new", (workers,))`` makes a fresh pool on both sides; ``("new", (workers, 1, spares,
max_spares))`` one with managed blocking, whose state is then compared as
``blocking_snapshot`` reads it.

Unlike the generated phase, which takes only the steps the spec enables, a probe also asks the
moves the spec has no step for: a worker with nothing to take, a finish by an idle worker (each
answers ``StepRefused``), a pop falling back on another worker's deque, a steal from an empty
victim falling back on the next. Where the pool may choose (which deque a pop or a steal falls
back on), a probe leaves it one. Answers are compared in full (``null``; a snapshot and the
counters field by field; an error by its type, never its message), then the snapshots.
``refsched.conform.probes`` runs them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Final

from refsched.conform import values
from refsched.conform.probes import Probe, snapshots_differ
from refsched.model.pool import ACTIONS, Phase, PoolSnapshot, initial
from refsched.model.pool.actions import steal_size
from refsched.model.pool.blocking import (
    BlockingInstance,
    BlockingSnapshot,
    blocking_refusal,
    blocking_step,
)
from refsched.model.pool.counters import Counts
from refsched.pool.blocking import DEFAULT_MAX_SPARES
from refsched.pool.pool import PoolStats
from refsched.verify.pool.driver import StepRefused, driven_pool
from refsched.verify.replay import format_rows

__all__ = ["PROBES", "ModelPool", "adapt", "call", "instance", "needs_of",
           "new_implementation", "new_model", "show", "states"]

_Call = tuple[str, tuple[Any, ...]]


def _p(clause: str, *calls: _Call) -> Probe:
    return Probe(clause, tuple(calls))


_TWO: Final[_Call] = ("new", (["w1", "w2"],))
_THREE: Final[_Call] = ("new", (["w1", "w2", "w3"],))
# managed blocking: one spare, at most one active, so that Block never has two spares to pick
_SPARE: Final[_Call] = ("new", (["w1", "w2"], 1, ["s1"], 1))
_BLOCKING_OPS: Final = frozenset({"block", "start_spare", "unblock", "retire",
                                  "blocking_snapshot"})

PROBES: Final[tuple[Probe, ...]] = (
    _p("pool.new.ok", _TWO, ("submit_external", ("a", "w1")), _THREE),
    _p("pool.submit.ok", _TWO, ("submit_external", ("a", "w1")),
       ("submit_external", ("b", "w2")), ("submit_external", ("c", "w1"))),
    _p("pool.submit.closed", _TWO, ("submit_external", ("a", "w1")), ("shutdown", ()),
       ("submit_external", ("b", "w2"))),
    # w2 runs the parent while the round-robin turn is w1's; the second child comes while
    # the pool drains
    _p("pool.submit_child.ok", _TWO, ("submit_external", ("a", "w2")), ("pop", ("w2",)),
       ("submit_child", ("b", "w2")), ("shutdown", ()), ("submit_child", ("c", "w2"))),
    _p("pool.pop.ok", _TWO, ("submit_external", ("a", "w2")), ("submit_external", ("b", "w2")),
       ("submit_external", ("c", "w1")), ("submit_external", ("d", "w1")), ("pop", ("w1",)),
       ("finish", ("w1",)), ("pop", ("w1",)), ("finish", ("w1",)), ("pop", ("w1",))),
    _p("pool.steal.ok", _THREE, ("submit_external", ("a", "w2")),
       ("submit_external", ("b", "w2")), ("submit_external", ("c", "w3")),
       ("steal", ("w1", "w2")), ("finish", ("w1",)), ("steal", ("w1", "w2")),
       ("finish", ("w1",)), ("steal", ("w1", "w2"))),
    _p("pool.move.refused", _TWO, ("pop", ("w1",)), ("steal", ("w1", "w2")),
       ("finish", ("w1",)), ("submit_external", ("a", "w1")), ("pop", ("w1",)),
       ("pop", ("w2",)), ("steal", ("w2", "w1")), ("finish", ("w2",))),
    _p("pool.finish.ok", _TWO, ("submit_external", ("a", "w1")), ("pop", ("w1",)),
       ("submit_child", ("b", "w1")), ("finish", ("w1",))),
    # draining until the last finish; then a pool with nothing outstanding ends at once
    _p("pool.shutdown.ok", _TWO, ("submit_external", ("a", "w1")),
       ("submit_external", ("b", "w2")), ("pop", ("w1",)), ("shutdown", ()),
       ("finish", ("w1",)), ("pop", ("w2",)), ("finish", ("w2",)), _TWO, ("shutdown", ())),
    _p("pool.cancel_queued.ok", _TWO, ("submit_external", ("a", "w1")),
       ("submit_external", ("b", "w1")), ("submit_external", ("c", "w2")), ("pop", ("w1",)),
       ("shutdown", ()), ("cancel_queued", ())),
    _p("pool.snapshot.ok", _TWO, ("submit_external", ("a", "w1")),
       ("submit_external", ("b", "w1")), ("steal", ("w2", "w1")), ("finish", ("w2",)),
       ("snapshot", ()), ("stats", ())),
    # w1 blocks and s1 stands in; w2 blocks while s1, the one spare allowed, is still active
    _p("pool.block.ok", _SPARE, ("submit_external", ("a", "w1")), ("pop", ("w1",)),
       ("block", ("w1",)), ("start_spare", ("s1",)), ("submit_external", ("b", "w2")),
       ("pop", ("w2",)), ("block", ("w2",))),
    _p("pool.start_spare.ok", _SPARE, ("submit_external", ("a", "w1")), ("pop", ("w1",)),
       ("block", ("w1",)), ("start_spare", ("s1",))),
    _p("pool.unblock.ok", _SPARE, ("submit_external", ("a", "w1")), ("pop", ("w1",)),
       ("block", ("w1",)), ("start_spare", ("s1",)), ("unblock", ("w1",))),
    # the spare runs the blocker's child before it is released, then retires
    _p("pool.retire.ok", _SPARE, ("submit_external", ("a", "w1")), ("pop", ("w1",)),
       ("block", ("w1",)), ("submit_child", ("b", "w1")), ("start_spare", ("s1",)),
       ("steal", ("s1", "w1")), ("finish", ("s1",)), ("unblock", ("w1",)),
       ("retire", ("s1",))),
    # each move refused: a thread running nothing blocks, an unblocked one unblocks, a spare
    # with no thread starts, a starting spare retires, a spare whose blocker has not returned
    # retires
    _p("pool.blocking.refused", _SPARE, ("block", ("w1",)), ("submit_external", ("a", "w1")),
       ("pop", ("w1",)), ("unblock", ("w1",)), ("start_spare", ("s1",)), ("block", ("w1",)),
       ("block", ("w1",)), ("retire", ("s1",)), ("start_spare", ("s1",)),
       ("retire", ("s1",))),
    _p("pool.blocking_snapshot.ok", _SPARE, ("submit_external", ("a", "w1")),
       ("pop", ("w1",)), ("block", ("w1",)), ("blocking_snapshot", ())),
)
"""One probe per clause of ``pool.*``, in the catalogue's order."""


class ModelPool:
    """The model's pool behind :class:`~refsched.verify.pool.driver.SteppedPool`'s moves: each
    move the spec's action (``refsched.model.pool.ACTIONS``) on an immutable snapshot, and
    ``stats()`` what the steps taken count (``parked`` 0: no worker thread runs).

    A move the spec has no step for answers as the wire says: a worker that takes no task, or
    finishes none, raises ``StepRefused``, and so does a move of managed blocking that is not
    enabled; a submission the pool refuses raises the model's error. Made with ``spares`` (the
    spec's ``Spares``, which serve and are stolen from as workers once started) and
    ``max_spares`` (its ``MaxSpares``), it takes managed blocking's moves too, its state a
    :class:`BlockingSnapshot` (``blocking_snapshot()``). A call no clause speaks of (a busy
    worker taking a task, a task submitted twice, a fallback with several deques to choose
    from, a Block with several spares to pick) raises ``ValueError``: no probe makes one.
    """

    def __init__(self, workers: Sequence[Hashable], steal_cap: int = 1,
                 spares: Sequence[Hashable] = (), max_spares: int | None = None) -> None:
        self.workers = tuple(workers)  # the spec's Workers, in the order stats() lists them
        self.steal_cap = steal_cap  # the spec's StealCap: 1, single steals only
        self.state: PoolSnapshot = initial()
        self.counts = Counts()  # what the steps taken so far count
        # managed blocking (None: off): the spec's Workers, Spares and MaxSpares, and its
        # variables blocked, spare and blocker (``pool`` there is not kept: ``state`` is)
        self.threads = self.workers + tuple(spares)  # the spec's Threads
        self.blocking = (BlockingInstance(frozenset(self.workers), frozenset(spares),
                                          DEFAULT_MAX_SPARES if max_spares is None
                                          else max_spares)
                         if spares else None)
        self.managed = BlockingSnapshot()

    # -- the moves ---------------------------------------------------------------------------

    def submit_external(self, task: Hashable, worker: Hashable) -> None:
        self._worker(worker)
        self._step("SubmitExternal", task, worker)

    def submit_child(self, task: Hashable, worker: Hashable) -> None:
        self._worker(worker)
        self._step("SubmitChild", task, worker)

    def pop(self, worker: Hashable) -> None:
        """The worker's newest task (Pop), else the oldest of the one other non-empty deque."""
        self._idle(worker)
        if self.state.deque.get(worker):
            self._step("Pop", worker)
        else:
            self._steal(worker, self._fallback(worker, f"pop({worker!r})"))

    def steal(self, thief: Hashable, victim: Hashable) -> None:
        """The victim's oldest task, else the oldest of the one other non-empty deque."""
        self._idle(thief)
        self._worker(victim)
        if self.state.deque.get(thief):
            raise ValueError(f"steal({thief!r}, {victim!r}): the thief's own deque is not "
                             "empty, which no clause speaks of")
        if victim != thief and self.state.deque.get(victim):
            self._steal(thief, victim)
        else:
            self._steal(thief, self._fallback(thief, f"steal({thief!r}, {victim!r})"))

    def finish(self, worker: Hashable) -> None:
        self._worker(worker)
        if worker not in self.state.running:
            raise StepRefused(f"worker {worker!r} runs no task to finish")
        self._step("Finish", worker)

    def shutdown(self) -> None:
        """``shutdown(wait=False)``: a second one changes nothing."""
        if self.state.phase is Phase.ACCEPTING:
            self._step("Shutdown")

    def cancel_queued(self) -> None:
        """``shutdown(wait=False, cancel_futures=True)``: Shutdown if the pool accepts, then
        CancelQueued if a task is queued while it drains."""
        self.shutdown()
        if ACTIONS["CancelQueued"].enabled(self.state):
            self._step("CancelQueued")

    # -- managed blocking's moves ------------------------------------------------------------

    def block(self, thread: Hashable) -> None:
        """Block(x): the spare that may stand in for ``thread``, when there is one."""
        self._blocking_move("Block", thread)

    def start_spare(self, spare: Hashable) -> None:
        self._blocking_move("StartSpare", spare)

    def unblock(self, thread: Hashable) -> None:
        self._blocking_move("Unblock", thread)

    def retire(self, spare: Hashable) -> None:
        if spare in self.state.running:
            raise ValueError(f"retire({spare!r}): the spare runs a task, which no clause "
                             "speaks of")
        self._blocking_move("Retire", spare)

    # -- the readings ------------------------------------------------------------------------

    def snapshot(self) -> PoolSnapshot:
        return self.state

    def stats(self) -> PoolStats:
        return PoolStats(**self.counts.expected(self.state, self.workers), parked=0)

    def blocking_snapshot(self) -> BlockingSnapshot:
        if self.blocking is None:
            raise ValueError("blocking_snapshot() of a pool made without spares")
        return self._whole()

    # -- helpers -----------------------------------------------------------------------------

    def _steal(self, thief: Hashable, victim: Hashable) -> None:
        """Steal, or StealBatch where the victim's deque is long enough for a batch."""
        batch = steal_size(len(self.state.deque[victim]), self.steal_cap) > 1
        self._step("StealBatch" if batch else "Steal", thief, victim)

    def _step(self, action: str, *args: Hashable) -> None:
        cap = self.steal_cap
        if self.blocking is not None:  # a thread must serve to take a task, and so on
            full = (*args, cap) if ACTIONS[action].takes_steal_cap else args
            refusal = blocking_refusal(self._whole(), action, full, self.blocking)
        else:
            refusal = ACTIONS[action].refused(self.state, *args, steal_cap=cap)
        if refusal is not None:
            raise (refusal.error or ValueError)(refusal.reason)
        before, self.state = self.state, ACTIONS[action].step(self.state, *args, steal_cap=cap)
        self.counts = self.counts.step(action, args, before, self.state)

    def _whole(self) -> BlockingSnapshot:
        return replace(self.managed, pool=self.state)

    def _blocking_move(self, action: str, x: Hashable) -> None:
        """One of managed blocking's actions; ``StepRefused`` when it is not enabled."""
        if self.blocking is None:
            raise ValueError(f"{action}({x!r}) in a pool made without spares")
        whole = self._whole()
        if blocking_refusal(whole, action, (x,), self.blocking) is not None:
            raise StepRefused(f"{action}({x!r}) is not enabled")
        afters = blocking_step(whole, action, (x,), self.blocking)
        if len(afters) > 1:
            raise ValueError(f"{action}({x!r}): the pool chooses among several spares; a "
                             "probe leaves it one")
        self.managed = afters[0]
        self.state = afters[0].pool

    def _worker(self, worker: Hashable) -> None:
        if worker not in self.threads:
            raise ValueError(f"{worker!r} is not a worker of this pool")

    def _idle(self, worker: Hashable) -> None:
        self._worker(worker)
        if worker in self.state.running:
            raise ValueError(f"worker {worker!r} runs a task already")

    def _fallback(self, worker: Hashable, call: str) -> Hashable:
        """The one other worker whose deque holds a task; ``StepRefused`` when none does."""
        others = [w for w in self.threads if w != worker and self.state.deque.get(w)]
        if not others:
            raise StepRefused(f"worker {worker!r} took no task")
        if len(others) > 1:
            raise ValueError(f"{call}: the pool chooses among the deques of {others}; a probe "
                             "leaves it one")
        return others[0]


def needs_of(probe: Probe) -> tuple[str, ...]:
    """The profile flags a probe's calls need: ``managed_blocking`` for a pool made with
    spares or a move of managed blocking; else none, the pool is checked whole."""
    blocking = any(method in _BLOCKING_OPS or (method == "new" and len(args) > 2 and args[2])
                   for method, args in probe.calls)
    return ("managed_blocking",) if blocking else ()


def adapt(method: str, args: tuple[Any, ...], profile: Any) -> tuple[Any, ...]:
    """The arguments as sent: the pool's need no change."""
    return args


def new_model(workers: Sequence[Hashable], steal_cap: int = 1,
              spares: Sequence[Hashable] = (), max_spares: int | None = None) -> ModelPool:
    """The model of a fresh pool with these workers (and spares)."""
    return ModelPool(workers, steal_cap, spares, max_spares)


def new_implementation(factory: Callable[..., Any], workers: Sequence[Hashable],
                       steal_cap: int = 1, spares: Sequence[Hashable] = (),
                       max_spares: int | None = None) -> Any:
    """A fresh pool of the implementation, its workers' (and spares') moves taken on
    request."""
    return driven_pool(factory, list(workers), steal_cap, spares=list(spares),
                       max_spares=max_spares)


def instance(workers: Sequence[Hashable], steal_cap: int = 1,
             spares: Sequence[Hashable] = (), max_spares: int | None = None) -> str:
    """What a fresh pool was made with, as a counterexample names it."""
    text = "workers " + ", ".join(map(str, workers))
    if spares:
        text += f"; spares {', '.join(map(str, spares))}, max_spares {max_spares}"
    return text


_READINGS: Final = ("snapshot", "stats", "blocking_snapshot")


def call(pool: Any, method: str, args: tuple[Any, ...]) -> Any:
    """One move or reading on either side. A move answers nothing, as on the wire (a stepped
    pool's submit returns the future, which a pool over the protocol keeps to itself)."""
    answer = getattr(pool, method)(*args)
    return answer if method in _READINGS else None


def show(value: Any) -> str:
    """An answer as the counterexample table shows it."""
    if isinstance(value, PoolSnapshot | PoolStats | BlockingSnapshot):
        return json.dumps(values.to_json(value), sort_keys=True)
    return "null" if value is None else repr(value)


def comparable(value: Any) -> Any:
    """An answer as it is compared."""
    if isinstance(value, PoolStats):  # its queue_lengths a tuple whichever side sent it
        return tuple(tuple(v) if isinstance(v, list) else v
                     for v in dataclasses.astuple(value))
    return value




def _rows(model: PoolSnapshot, impl: PoolSnapshot) -> str:
    """The snapshot fields that differ, each as the protocol sends it."""
    want, got = values.to_json(model), values.to_json(impl)
    return format_rows(("field", "model", "implementation"), [
        (name, json.dumps(want[name], sort_keys=True), json.dumps(got.get(name), sort_keys=True))
        for name in want if want[name] != got.get(name)])


def _blocking_rows(model: BlockingSnapshot, impl: BlockingSnapshot) -> str:
    """The fields that differ, the pool's and managed blocking's, as the protocol sends them."""
    want, got = values.to_json(model), values.to_json(impl)
    want, got = ({**side.pop("pool"), **side} for side in (want, got))
    return format_rows(("field", "model", "implementation"), [
        (name, json.dumps(want[name], sort_keys=True), json.dumps(got.get(name), sort_keys=True))
        for name in want if want[name] != got.get(name)])


def states(model: Any, impl: Any) -> tuple[str | None, str]:
    """How the implementation's snapshot differs from the model's (with managed blocking, its
    ``blocking_snapshot``): a sentence and the rows of the fields, or None and ""."""
    if getattr(model, "blocking", None) is not None:
        return snapshots_differ(model, impl, _blocking_rows, read="blocking_snapshot")
    return snapshots_differ(model, impl, _rows)

