"""The graphs every contender is given: the same objects, built once per size from a fixed seed.

A graph is a list of ``(node, deps)`` in an order where every dependency comes before its
dependents (the order the contenders are fed in). Nodes are ints; ``deps`` is a tuple with no
duplicates.
"""

from __future__ import annotations

import math
import random

Graph = list[tuple[int, tuple[int, ...]]]

SEED = 20_240_601
FAN_IN = 4  # dependencies per node in a layered DAG (the first layer has none)


def layered(n: int, *, fan_in: int = FAN_IN, seed: int = SEED) -> Graph:
    """A layered random DAG of ``n`` nodes: about sqrt(n) layers of about sqrt(n) nodes.

    Each node past the first layer depends on ``fan_in`` distinct nodes of the layer before it,
    drawn with ``random.Random(seed)``; so each layer becomes ready at once, and E ~ fan_in * n.
    """
    width = max(fan_in, math.isqrt(n))
    rng = random.Random(f"{seed}-{n}-{fan_in}")
    sample = rng.sample
    graph: Graph = [(v, ()) for v in range(min(n, width))]
    for start in range(width, n, width):
        previous = range(start - width, start)
        layer = range(start, min(n, start + width))
        graph.extend((v, tuple(sample(previous, fan_in))) for v in layer)
    return graph


def chain(n: int) -> Graph:
    """``0 <- 1 <- ... <- n-1``: one ready node at a time, the longest critical path."""
    return [(0, ())] + [(v, (v - 1,)) for v in range(1, n)]


def fan(n: int) -> Graph:
    """One root, ``n - 2`` nodes that depend on it, and one sink that depends on all of them."""
    middle = range(1, n - 1)
    return [(0, ())] + [(v, (0,)) for v in middle] + [(n - 1, tuple(middle))]


def edges(graph: Graph) -> int:
    return sum(len(deps) for _, deps in graph)
