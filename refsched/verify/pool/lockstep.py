"""Lock-step: WorkStealingPool and the pool's reference model, driven by the same random steps.

A Hypothesis state machine picks one of the steps ``spec/WorkStealing.tla`` enables (an
action and its worker, task, thief or victim) at random, over a small instance, and takes it on
both sides: on the model (``refsched.model.pool``) and on the production pool, its workers'
moves driven by :class:`~refsched.verify.pool.driver.SteppedPool`. After every step the pool's
state must be the model's, the pool's counters must agree with it
(``SteppedPool.check_invariants``), and every field of its ``stats()`` must be what the model's
steps so far count (:mod:`refsched.model.pool.counters`; ``parked`` 0, since no worker thread
runs).

A few calls per walk must be refused: a root submitted once the pool is shut down (the model's
refusal names ``SchedulerClosedError``) and a submission of something that is not callable
(``InvalidArgumentError``); the pool must raise that error, change nothing and count nothing.
Unlike the trace corpus, whose instance TLC enumerates exhaustively, the random walks here run
over more workers and tasks, and longer. ``steal_cap`` above 1 drives a pool with batch steals
(``steal="half"``) against the model with that ``StealCap``.

``max_spares`` above 0 turns managed blocking on, on both sides: the spec's ``Spares`` are
:data:`SPARES` and its ``MaxSpares`` is ``max_spares``, so the walks also take ``Block``,
``StartSpare``, ``Unblock`` and ``Retire`` (tasks entering ``blocking()`` and returning, spares
starting, serving as workers and retiring). ``Block(x)`` may lead to several states, one per
spare that may stand in for ``x``; the pool picks one (a released spare, else the lowest off
one), which must be one of them. Then the managed-blocking variables must be the model's too,
and ``stats()`` must also count the spares active, the threads blocked, and the ``Block`` steps
a spare stood in for or none did. With ``max_spares`` 0 the machine is the one without managed
blocking, rule for rule, so its walks are those it always took.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from refsched.errors import InvalidArgumentError, SchedulerClosedError
from refsched.model.pool import ACTIONS, INITIAL, Instance, Phase, PoolSnapshot, next_steps
from refsched.model.pool.blocking import (
    BLOCKING_ACTIONS,
    BlockingInstance,
    BlockingSnapshot,
    blocking_next_steps,
)
from refsched.model.pool.counters import BlockingCounts, Counts
from refsched.pool.pool import PoolStats
from refsched.verify import system
from refsched.verify.dag.lockstep import states_at
from refsched.verify.itf import Step as TraceStep
from refsched.verify.itf import Trace
from refsched.verify.lockstep import WalkDisagreement, WalkLedger, run_machine
from refsched.verify.pool.driver import driven_pool
from refsched.verify.pool.spec import blocking_spec_state
from refsched.verify.pool.system import difference_rows
from refsched.verify.replay import counter_rows, format_rows

# The PoolStats fields the conformance protocol does not carry (managed blocking's counters).
_OFF_WIRE: Final = frozenset(f.name for f in dataclasses.fields(PoolStats)
                             if f.metadata.get("wire") is False)

__all__ = ["BATCH_STEAL_CAPS", "BLOCKING_MAX_SPARES", "SPARES", "WORKERS", "BlockingLedger",
           "Disagreement", "Ledger", "pool_lockstep_machine", "run_pool_lockstep"]

WORKERS = ("w1", "w2", "w3")
ROOTS = ("a", "b", "c", "d", "e")
CHILDREN = ("f", "g", "h", "i", "j", "k")
INSTANCE = Instance(WORKERS, ROOTS + CHILDREN, CHILDREN)
# The StealCaps the batch walks run with, one walk each: batches of two from deques of four
# tasks or more (often reached), and of three from deques of six (a thief keeps two, and their
# order shows).
BATCH_STEAL_CAPS = (2, 3)
# The spec's Spares with managed blocking on: spare i is the pool's slot len(WORKERS) + i.
SPARES = ("s1", "s2", "s3")
# The MaxSpares the walks with managed blocking run with: below len(SPARES), and below the
# threads that may block at once, so blockers past the bound block uncompensated.
BLOCKING_MAX_SPARES = 2
_POOL = system.get("pool")


class Disagreement(WalkDisagreement):
    """The pool and the model parted: the steps taken so far, and where they differ.

    ``reason`` says how; ``steps`` are the walk's steps as people read them, up to and including
    the failing one; ``trace`` is the model's spec steps along the walk, from ``Init``.
    """

    heading = "steps"

    @property
    def steps(self) -> tuple[str, ...]:
        return self.walk


@dataclass
class Ledger(WalkLedger):
    """What the random walks took: examples, and steps per action (refusals by their error)."""

    ACTIONS = tuple(ACTIONS)


@dataclass
class BlockingLedger(Ledger):
    """A ledger of walks with managed blocking on: its actions too."""

    ACTIONS = (*ACTIONS, *BLOCKING_ACTIONS)


# The steps that push a task onto a deque.
_PUSHES: Final = frozenset({"SubmitExternal", "SubmitChild"})


def pool_lockstep_machine(factory: Callable[..., Any], ledger: Ledger, *,
                          python_api: bool = True, fatal: system.Fatal = (),
                          steal_cap: int = 1, max_spares: int = 0
                          ) -> type[RuleBasedStateMachine]:
    """The state machine that drives ``factory`` (a WorkStealingPool class, or a factory of
    driven pools: :func:`~refsched.verify.pool.driver.driven_pool`) and the model.

    ``python_api`` false leaves out the call only Python can make (a submission of something
    that is not callable). An error of a ``fatal`` type (a harness failure, not an answer)
    propagates as it is. ``steal_cap``: the spec's ``StealCap`` on both sides; ``max_spares``
    above 0: managed blocking on, with that ``MaxSpares``. A pool over the protocol
    (``factory`` marked ``drives_steps``) sends no managed-blocking counters in its
    ``stats()``: its ``blocking_snapshot()`` says what they count, so they are not compared.
    """
    instance = replace(INSTANCE, steal_cap=steal_cap)
    blocking = (BlockingInstance(frozenset(WORKERS), frozenset(SPARES), max_spares)
                if max_spares > 0 else None)
    remote = bool(getattr(factory, "drives_steps", False))

    class PoolLockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: PoolSnapshot = INITIAL
            self.counts = Counts()  # what the model's steps so far count
            self.pool: Any = (driven_pool(factory, WORKERS, steal_cap) if blocking is None else
                              driven_pool(factory, WORKERS, steal_cap, spares=SPARES,
                                          max_spares=max_spares))
            self.blocking = BlockingSnapshot()  # the model's state, with managed blocking
            self.blocking_counts = BlockingCounts()  # what its steps so far count
            self.steps: list[str] = []
            self.taken: list[TraceStep] = []  # the model's spec steps, for the trace
            self.bad = 0  # calls made that must be refused: a few per walk, not most of it
            ledger.examples += 1

        def fail(self, reason: str) -> None:
            constants = _POOL.constants(instance)
            if blocking is not None:
                constants.update(Spares=list(SPARES), MaxSpares=max_spares)
            raise Disagreement(reason, self.steps, Trace(
                "pool-lockstep", constants, self.spec_state(BlockingSnapshot()),
                tuple(self.taken), {"source": "refsched.verify.pool.lockstep"}),
                states_at(self.model, lambda: self.pool.snapshot()))

        def spec_state(self, state: BlockingSnapshot) -> dict[str, Any]:
            if blocking is None:
                return _POOL.spec_state(state.pool, instance)
            return blocking_spec_state(state, WORKERS, SPARES, instance.tasks)

        def take_blocking(self, action: str, params: dict[str, Hashable],
                          afters: tuple[BlockingSnapshot, ...]) -> None:
            """An enabled step with managed blocking on, on both sides; of the states the
            model's step may lead to, the one the pool reached."""
            self.steps.append(_POOL.describe(action, params))
            try:
                _POOL.apply(self.pool, action, params, self.model, None, fatal)
            except AssertionError as error:  # StepMismatch
                self.taken.append(TraceStep(action, dict(params), self.spec_state(afters[0])))
                self.fail(str(error))
            reached = self.pool.blocking_snapshot()
            after = reached if reached in afters else afters[0]
            before, self.blocking, self.model = self.blocking, after, after.pool
            self.taken.append(TraceStep(action, dict(params), self.spec_state(after)))
            self.blocking_counts = self.blocking_counts.step(
                action, _POOL.model_args(action, params, {"StealCap": steal_cap}), before, after)
            ledger.actions[action] += 1
            self.agree()

        def take(self, action: str, params: dict[str, Hashable]) -> None:
            """An enabled step, on both sides."""
            self.steps.append(_POOL.describe(action, params))
            spec_action = ACTIONS[action]
            args = tuple(params[p] for p in spec_action.params)
            after = spec_action.step(self.model, *args, steal_cap=steal_cap)
            try:
                _POOL.apply(self.pool, action, params, self.model, None, fatal)
            except AssertionError as error:  # StepMismatch
                # the model took the step the pool answered wrongly: the trace ends with it
                self.taken.append(TraceStep(action, dict(params),
                                            _POOL.spec_state(after, instance)))
                self.fail(str(error))
            before, self.model = self.model, after
            self.taken.append(TraceStep(action, dict(params),
                                        _POOL.spec_state(self.model, instance)))
            self.counts = self.counts.step(action, args, before, self.model)
            ledger.actions[action] += 1
            self.agree()

        def refused(self, call: Callable[[], object], error: type[Exception],
                    before: PoolSnapshot) -> None:
            try:
                call()
            except error:
                pass
            except Exception as other:
                self.fail(f"expected {error.__name__}, the pool raised {other!r}")
            else:
                self.fail(f"expected {error.__name__}, the pool took the step")
            after = self.pool.snapshot()
            if after != before:
                self.fail("a refused call changed the pool:\n"
                          + _POOL.side_by_side(before, after, "after"))
            self.counted()

        def agree(self) -> None:
            actual = self.pool.snapshot()
            if actual != self.model:
                self.fail("the pool's state is not the model's:\n"
                          + _POOL.side_by_side(self.model, actual, "pool"))
            if blocking is not None:
                reached = self.pool.blocking_snapshot()
                if reached != self.blocking:
                    self.fail("the pool's managed blocking is not the model's:\n"
                              + format_rows(("variable", "model", "pool"),
                                            difference_rows(self.blocking, reached)))
            try:
                self.pool.check_invariants()
            except AssertionError as error:
                self.fail(f"check_invariants(): {error}")
            self.counted()

        def counted(self) -> None:
            """The pool's stats() show what the model's steps so far count."""
            expected = {**(self.counts.expected(self.model, WORKERS) if blocking is None else
                           self.blocking_counts.expected(self.blocking, WORKERS, SPARES)),
                        "parked": 0}
            if remote:  # managed blocking's counters stay off the wire
                expected = {k: v for k, v in expected.items() if k not in _OFF_WIRE}
            rows = counter_rows(expected, self.pool.stats())
            if rows:
                names = ", ".join(r[0].removeprefix("stats().") for r in rows)
                self.fail(f"the pool's stats() are not what the model's steps count: {names}\n"
                          + format_rows(("field", "model", "pool"), rows))

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            """One of the steps the spec enables here, each as likely as the others."""
            if blocking is not None:
                steps = list(blocking_next_steps(self.blocking, instance, blocking))
                if steps:
                    i = data.draw(st.integers(0, len(steps) - 1), label="step")
                    self.take_blocking(*steps[i])
                return
            enabled = [(name, params) for name, params, _ in next_steps(self.model, instance)]
            pushes = [(name, params) for name, params in enabled if name in _PUSHES]
            if steal_cap > 1 and pushes:
                # with batch steals, three steps in four push while they can: a deque then
                # grows to twice the cap, where batches start, as a walk of equally likely
                # steps (idle workers stealing every other step) seldom lets it
                push: int = data.draw(st.integers(0, 3), label="push")
                if push:
                    enabled = pushes
            if enabled:
                self.take(*data.draw(st.sampled_from(enabled), label="step"))

        @precondition(lambda self: self.model.phase is not Phase.ACCEPTING and self.bad < 2)
        @rule(t=st.sampled_from(ROOTS), w=st.sampled_from(WORKERS))
        def submit_after_shutdown(self, t: str, w: str) -> None:
            self.bad += 1
            self.steps.append(f"submit() from outside, the pool {self.model.phase.value}")
            before = self.pool.snapshot()
            self.refused(lambda: self.pool.submit_external(t, w), SchedulerClosedError, before)
            ledger.actions["SubmitExternal refused"] += 1

        @precondition(lambda self: python_api and self.bad < 2)
        @rule(fn=st.sampled_from([None, 3, "f"]))
        def submit_not_callable(self, fn: object) -> None:
            self.bad += 1
            self.steps.append(f"submit({fn!r})")
            before = self.pool.snapshot()
            self.refused(lambda: self.pool.pool.submit(fn), InvalidArgumentError, before)
            ledger.actions["submit(not callable) refused"] += 1

    return PoolLockstep


def run_pool_lockstep(factory: Callable[..., Any], examples: int = 200, steps: int = 50, *,
                      shrink: bool = True, seed: int | None = None,
                      ledger: Ledger | None = None, python_api: bool = True,
                      hypothesis_settings: Mapping[str, Any] | None = None,
                      fatal: system.Fatal = (), steal_cap: int = 1,
                      max_spares: int = 0) -> Ledger:
    """Run ``examples`` random walks of up to ``steps`` steps; raise on the first disagreement,
    shrunk to a shortest walk that shows it unless ``shrink`` is False (a quicker verdict).

    ``seed`` fixes Hypothesis's choices; ``ledger`` accumulates into an existing ledger;
    ``python_api``, ``steal_cap`` and ``max_spares`` as for :func:`pool_lockstep_machine`;
    ``hypothesis_settings`` overrides the settings chosen here.
    """
    if ledger is None:
        ledger = BlockingLedger() if max_spares > 0 else Ledger()
    machine = pool_lockstep_machine(factory, ledger, python_api=python_api, fatal=fatal,
                                    steal_cap=steal_cap, max_spares=max_spares)
    run_machine(machine, examples=examples, steps=steps, seed=seed,
                overrides=hypothesis_settings, shrink=shrink)
    return ledger
