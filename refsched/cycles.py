"""The cycle search both schedulers of a dependency graph report a cycle with: the in-memory
TaskScheduler on its live rows, the durable scheduler on a graph read from its store."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence, Sized

__all__ = ["find_cycles"]


def find_cycles(nodes: Iterable[int], deps: Sequence[Sized],
                 dependents: Sequence[Iterable[int] | None],
                 names: Sequence[Hashable]) -> list[list[Hashable]]:
    """One cycle path per strongly connected component with a cycle, as ``names``.

    The graph: ``nodes`` (ints, in seq order) where node ``u`` has ``len(deps[u])`` dependency
    edges, each from a node among ``nodes`` that lists ``u`` in its ``dependents[u']``
    (``None`` for none; entries that are not among ``nodes`` are ignored). Kahn's algorithm first
    removes every node not on or behind a cycle; an iterative Tarjan then splits the rest into
    components. Components are reported in the order of their first node, each as the shortest
    cycle through that node. TaskScheduler passes its live rows; the durable scheduler a graph
    it reads from its store.
    """
    indegree: dict[int, int] = {}
    queue: list[int] = []
    for u in nodes:
        n = len(deps[u])
        indegree[u] = n
        if not n:
            queue.append(u)
    for u in queue:  # grows while iterating
        for x in dependents[u] or ():
            n = indegree.get(x, 0) - 1
            if n < 0:
                continue  # not a node: a dead row's entry
            indegree[x] = n
            if not n:
                queue.append(x)
    if len(queue) == len(indegree):
        return []
    rest = {u: None for u, n in indegree.items() if n}

    # Iterative Tarjan over the dependents edges of the leftover nodes.
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in rest:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(dependents[root] or ()))]
        while work:
            v, successors = work[-1]
            descended = False
            for w in successors:
                if w not in rest:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(dependents[w] or ())))
                    descended = True
                    break
                if w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                component: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(component)

    order = {u: i for i, u in enumerate(rest)}  # the nodes' given (seq) order
    cycles: list[tuple[int, list[Hashable]]] = []
    for component in components:
        members = set(component)
        start = min(component, key=order.__getitem__)
        # Shortest cycle through start: breadth-first along dependents inside the component.
        came_from: dict[int, int] = {}
        frontier = [start]
        found = -1
        for node in frontier:
            for x in dependents[node] or ():
                if x == start:
                    found = node
                    break
                if x in members and x not in came_from:
                    came_from[x] = node
                    frontier.append(x)
            if found >= 0:
                break
        assert found >= 0  # start lies on a cycle inside its component
        back: list[Hashable] = [names[start]]
        step = found
        while step != start:
            back.append(names[step])
            step = came_from[step]
        back.append(names[start])
        back.reverse()
        cycles.append((order[start], back))
    cycles.sort(key=lambda item: item[0])
    return [path for _, path in cycles]
