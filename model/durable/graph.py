"""The durable spec's ``Next`` over finite constants, and the state graph it spans.

:func:`next_steps` enumerates ``Next`` exactly as ``spec/DurableScheduler.tla`` writes it: every
action, every parameter value its quantifiers range over, one step per enabled instance (so
two instances that reach the same state are two edges, as in TLC's graph). The reports
(Heartbeat, Complete, Fail, AcknowledgeCancel) are quantified over workers and ids with the
current generation and attempt, Submit over every priority and delay of the instance, Refused
over the leases each worker holds, RepeatedReport over
workers and ids with the current generation and the attempt whose report ended the version; the
steps whose answer is lost are enabled only when the instance's ``LoseAnswers`` is TRUE, and
SubmitOptional (over every non-empty optional subset of D, priority and delay) and AddDeps
(over every D and subset O, O non-empty only with ``OptionalEdges``) only when their constants
``OptionalEdges`` and ``AddDepsAllowed`` are.
:func:`explore` is a breadth-first search of those steps with
:func:`refsched.model.dag.graph.search` under
``MCDurableScheduler``'s constraints, ``GenerationBound`` and ``TimeBound``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ..dag.graph import ModelGraph, search
from .actions import ACTIONS, INITIAL, RECORDING, DurableSnapshot, Limits, generation_of

__all__ = ["Instance", "explore", "next_steps", "within_bound"]


@dataclass(frozen=True, slots=True)
class Instance:
    """The constants of a model-checking instance (a ``MCDurableScheduler*.cfg``)."""

    tasks: tuple[str, ...]  # Tasks
    workers: tuple[str, ...]  # Workers
    max_concurrency: int  # MaxConcurrency
    max_attempts: int  # MaxAttempts
    lease_time: int  # LeaseTime
    max_generation: int  # MaxGeneration: GenerationBound
    max_time: int  # MaxTime: TimeBound
    lose_answers: bool = True  # LoseAnswers: a committed claim or report may lose its answer
    priorities: tuple[int, ...] = (0,)  # Priorities: those a Submit may give
    delays: tuple[int, ...] = (0,)  # Delays: those a Submit may give, in ticks
    aging: int = 0  # Aging: ticks of waiting worth one priority level; 0 = none
    optional_edges: bool = False  # OptionalEdges: SubmitOptional and AddDeps make optional edges
    add_deps: bool = False  # AddDepsAllowed: AddDeps adds edges to a pending version
    # RecordProvenance: blocked and cancelled versions record their provenance (the start
    # state is RECORDING; every step keeps what the start state holds)
    record_provenance: bool = False

    @property
    def limits(self) -> Limits:
        """The constants the actions read."""
        return Limits(self.max_concurrency, self.max_attempts, self.lease_time,
                      self.lose_answers, self.priorities, self.delays, self.aging,
                      self.optional_edges, self.add_deps)


def _subsets(items: list[str]) -> Iterator[frozenset[str]]:
    for size in range(len(items) + 1):
        for combo in combinations(items, size):
            yield frozenset(combo)


def _instances(s: DurableSnapshot, instance: Instance) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (action, parameters) the disjuncts of ``Next`` quantify over in state ``s``."""
    tasks, workers = instance.tasks, instance.workers
    # The parameters an action and its AnswerLost twin share: the same disjunct's quantifiers.
    claims: list[dict[str, Any]] = [
        {"w": w, "k": k} for w in workers for k in range(1, instance.max_concurrency + 1)]
    reclaims: list[dict[str, Any]] = [{"w": w, "t": t} for w in workers for t in tasks]
    reports: list[dict[str, Any]] = [
        {"w": w, "t": t, "g": generation_of(s, t), "a": s.attempt.get(t, 0)}
        for w in workers for t in tasks]
    for t in tasks:
        for deps in _subsets([x for x in tasks if x != t]):
            for p in instance.priorities:
                for d in instance.delays:
                    yield "Submit", {"t": t, "D": deps, "p": p, "d": d}
    yield "Start", {}
    for params in claims:
        yield "Claim", dict(params)
    for params in reclaims:
        yield "Reclaim", dict(params)
    for name in ("Heartbeat", "Complete", "Fail", "AcknowledgeCancel"):
        for params in reports:
            yield name, dict(params)
    for w in workers:
        for task, g, a in sorted(s.held.get(w, frozenset()), key=str):
            yield "Refused", {"w": w, "t": task, "g": g, "a": a}
    for t in tasks:
        yield "Expire", {"t": t}
    yield "Tick", {}
    for w in workers:
        yield "Crash", {"w": w}
    for name in ("Cancel", "Retry"):
        for t in tasks:
            yield name, {"t": t}
    for cancel_pending in (False, True):
        yield "Close", {"cancelPending": cancel_pending}
    for t in tasks:
        yield "RepeatedCallback", {"t": t}
    for w in workers:
        for t in tasks:
            yield "RepeatedReport", {"w": w, "t": t, "g": generation_of(s, t),
                                     "a": s.ended_attempt.get(t, 0)}
    for params in claims:
        yield "ClaimAnswerLost", dict(params)
    for params in reclaims:
        yield "ReclaimAnswerLost", dict(params)
    for name in ("CompleteAnswerLost", "FailAnswerLost", "AcknowledgeCancelAnswerLost"):
        for params in reports:
            yield name, dict(params)
    # The gated steps, only with their constant on (off, the spec's gate disables each one).
    for t in tasks:
        others = [x for x in tasks if x != t]
        for deps in _subsets(others):
            for optional in _subsets([x for x in others if x in deps]):
                if instance.optional_edges and optional:
                    for p in instance.priorities:
                        for d in instance.delays:
                            yield "SubmitOptional", {"t": t, "D": deps, "O": optional, "p": p,
                                                     "d": d}
    for t in tasks:
        others = [x for x in tasks if x != t]
        for deps in _subsets(others):
            for optional in _subsets([x for x in others if x in deps]):
                if instance.add_deps and (instance.optional_edges or not optional):
                    yield "AddDeps", {"t": t, "D": deps, "O": optional}


def next_steps(s: DurableSnapshot,
               instance: Instance) -> Iterator[tuple[str, dict[str, Any], DurableSnapshot]]:
    """Every enabled instance of ``Next`` in ``s``: (action name, parameters, next state)."""
    limits = instance.limits
    for name, params in _instances(s, instance):
        action = ACTIONS[name]
        args = action.arguments(params)
        if action.enabled(s, *args, limits=limits):
            yield name, params, action.step(s, *args, limits=limits)


def within_bound(s: DurableSnapshot, instance: Instance) -> bool:
    """``GenerationBound`` and ``TimeBound``: no id past ``MaxGeneration`` versions, the clock
    not past ``MaxTime``."""
    return s.now <= instance.max_time and all(
        v.generation <= instance.max_generation for v in s.scheduler.tasks.values())


def explore(instance: Instance,
            initial: DurableSnapshot | None = None) -> ModelGraph[DurableSnapshot]:
    """Breadth-first search of ``Next`` under the bounds, as TLC explores the spec, from
    ``initial`` (by default the spec's ``Init`` for the instance's ``RecordProvenance``)."""
    start = initial if initial is not None else (
        RECORDING if instance.record_provenance else INITIAL)
    return search(start, lambda s: next_steps(s, instance), lambda s: within_bound(s, instance))
