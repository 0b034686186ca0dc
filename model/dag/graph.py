"""The spec's ``Next`` over finite constants, and the state graph it spans.

:func:`next_steps` enumerates ``Next`` exactly as ``spec/Scheduler.tla`` writes it: every
action, every parameter value its quantifiers range over, one step per enabled instance (so
two instances that reach the same state are two edges, as in TLC's graph). :func:`explore`
is a breadth-first search of those steps under ``MCScheduler``'s ``GenerationBound``
constraint: a state past the bound is neither kept nor explored, and edges into it are not
edges of the graph (TLC does the same). ``optional_edges`` and ``add_deps`` are the spec's
constants ``OptionalEdges`` and ``AddDepsAllowed``: off, as in every instance of the
TaskScheduler, the gated actions have no instance at all.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Generic, TypeVar

from refsched.types import Snapshot

from .actions import ACTIONS, INITIAL, Action

__all__ = [
    "Edge", "ModelGraph", "action_args", "describe", "explore", "next_steps", "search",
    "within_bound",
]

S = TypeVar("S", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Edge(Generic[S]):
    """One step of ``Next``: ``action(params)`` takes ``source`` to ``target``."""

    source: S
    action: str
    params: tuple[tuple[str, Any], ...]  # (spec parameter name, value), in the action's order
    target: S

    @property
    def param_map(self) -> dict[str, Any]:
        return dict(self.params)


def action_args(action: Action, params: Mapping[str, Any], max_concurrency: int) -> tuple[Any, ...]:
    """The positional arguments of ``action.refusal`` / ``action.step`` for spec parameters."""
    args = tuple(params[name] for name in action.params)
    return (*args, max_concurrency) if action.name == "Claim" else args


def _subsets(items: Sequence[Hashable]) -> Iterator[frozenset[Hashable]]:
    for size in range(len(items) + 1):
        for combo in combinations(items, size):
            yield frozenset(combo)


def _instances(s: Snapshot, tasks: Sequence[Hashable], max_concurrency: int,
               optional_edges: bool = False,
               add_deps: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (action, parameters) the disjuncts of ``Next`` quantify over in state ``s``; the
    gated ones only with their constant on (off, the spec's gate makes every one a no-step)."""
    def generation(t: Hashable) -> int:
        view = s.tasks.get(t)
        return 0 if view is None else view.generation

    for t in tasks:
        for deps in _subsets([x for x in tasks if x != t]):
            yield "Submit", {"t": t, "D": deps}
    for name, allowed in (("SubmitOptional", optional_edges), ("AddDeps", add_deps)):
        if not allowed:
            continue
        for t in tasks:
            for deps in _subsets([x for x in tasks if x != t]):
                for optional in _subsets(sorted(deps, key=tasks.index)):
                    # SubmitOptional needs an optional edge; AddDeps one only if it may.
                    if (name == "SubmitOptional" and optional) or (
                            name == "AddDeps" and (optional_edges or not optional)):
                        yield name, {"t": t, "D": deps, "O": optional}
    yield "Start", {}
    for k in range(1, max_concurrency + 1):
        yield "Claim", {"k": k}
    for name in ("Complete", "Fail"):
        for t in tasks:
            yield name, {"t": t, "g": generation(t)}
    for t in tasks:
        yield "Cancel", {"t": t}
    for t in tasks:
        yield "AcknowledgeCancel", {"t": t, "g": generation(t)}
    for t in tasks:
        yield "Retry", {"t": t}
    for cancel_pending in (False, True):
        yield "Close", {"cancelPending": cancel_pending}
    for t in tasks:
        current = generation(t)
        for g in range(current + 2):
            if g != current:
                yield "StaleCallback", {"t": t, "g": g}
    for t in tasks:
        yield "RepeatedCallback", {"t": t}


def next_steps(s: Snapshot, tasks: Sequence[Hashable], max_concurrency: int,
               optional_edges: bool = False,
               add_deps: bool = False) -> Iterator[tuple[str, dict[str, Any], Snapshot]]:
    """Every enabled instance of ``Next`` in ``s``: (action name, parameters, next state).

    An id outside the model's vocabulary (never submitted) is absent: the actions on it that
    need a current version are not enabled, exactly as in the spec.
    """
    for name, params in _instances(s, tasks, max_concurrency, optional_edges, add_deps):
        action = ACTIONS[name]
        args = action_args(action, params, max_concurrency)
        if action.refusal(s, *args) is None:
            yield name, params, action.step(s, *args)


def within_bound(s: Snapshot, max_generation: int) -> bool:
    """``MCScheduler``'s ``GenerationBound``: no id has more than ``max_generation`` versions."""
    return all(v.generation <= max_generation for v in s.tasks.values())


@dataclass
class ModelGraph(Generic[S]):
    """The states reachable by a system's steps from its initial state, and every edge."""

    initial: S
    depth: dict[S, int] = field(default_factory=dict)  # BFS level, initial state = 1
    edges: dict[S, list[Edge[S]]] = field(default_factory=dict)  # by source, in Next order

    @property
    def edge_count(self) -> int:
        return sum(len(out) for out in self.edges.values())


def explore(tasks: Sequence[Hashable], max_concurrency: int, max_generation: int,
            initial: Snapshot = INITIAL, optional_edges: bool = False,
            add_deps: bool = False,
            constraint: Callable[[Snapshot], bool] | None = None) -> ModelGraph[Snapshot]:
    """Breadth-first search of ``Next`` under ``GenerationBound`` (and ``constraint``, another
    state constraint of the instance), as TLC explores the spec."""
    def keep(s: Snapshot) -> bool:
        return within_bound(s, max_generation) and (constraint is None or constraint(s))

    return search(initial,
                  lambda s: next_steps(s, tasks, max_concurrency, optional_edges, add_deps),
                  keep)


def search(initial: S, successors: Callable[[S], Iterable[tuple[str, dict[str, Any], S]]],
           keep: Callable[[S], bool]) -> ModelGraph[S]:
    """Breadth-first search from ``initial`` along ``successors``, as TLC explores a spec.

    ``successors(s)`` yields every enabled action instance as (action, parameters, target);
    ``keep`` is the model's state constraint: a state it rejects is neither kept nor explored,
    and edges into it are not edges of the graph (TLC does the same).
    """
    graph: ModelGraph[S] = ModelGraph(initial=initial, depth={initial: 1})
    frontier = deque([initial])
    while frontier:
        s = frontier.popleft()
        out: list[Edge[S]] = []
        for name, params, t in successors(s):
            if not keep(t):
                continue
            out.append(Edge(s, name, tuple(params.items()), t))
            if t not in graph.depth:
                graph.depth[t] = graph.depth[s] + 1
                frontier.append(t)
        graph.edges[s] = out
    return graph


def describe(action: str, params: Mapping[str, Any]) -> str:
    """``Submit(t=a, D={b})``: an action instance as people read it."""
    def show(v: Any) -> str:
        if isinstance(v, frozenset):
            return "{" + ", ".join(sorted(map(str, v))) + "}"
        return str(v)
    return f"{action}(" + ", ".join(f"{k}={show(v)}" for k, v in params.items()) + ")"
