"""Every abstract state a scenario reaches must be a state of TLC's graph.

For scenarios inside the bounds of ``spec/MCSchedulerTraces.cfg`` (ids ``a`` and ``b``, at
most 2 running, at most 2 generations per id), the scheduler's snapshot after every step must
be one of the states TLC found. The graph is dumped by TLC once per process (a few seconds).
A smaller ``max_concurrency`` stays inside the graph: every behaviour with fewer slots is a
behaviour with more.
"""

from __future__ import annotations

import functools
from typing import Any

from refsched.types import Snapshot
from refsched.verify import stategraph

__all__ = ["OutOfBounds", "in_tlc_graph", "tlc_states"]


class OutOfBounds(AssertionError):
    """A scenario said it stays inside the TLC instance's bounds, and left them."""


@functools.cache
def tlc_states() -> frozenset[Snapshot]:
    """The states of TLC's graph of the traces instance, as Snapshots."""
    dumped, result, _ = stategraph.dump_state_graph(workers=1)
    if not result.ok:
        raise RuntimeError(f"TLC failed on {stategraph.TRACES_CONFIG}: {result.violated}")
    return frozenset(dumped.states.values())


@functools.cache
def _bounds() -> stategraph.Instance:
    return stategraph.read_instance(stategraph.TRACES_CONFIG)


def in_tlc_graph(scheduler: Any) -> None:
    """Raise unless ``scheduler``'s snapshot is a state of TLC's graph.

    Raises :class:`OutOfBounds` when the scheduler is outside the instance's bounds, so a
    scenario cannot silently fall out of the check.
    """
    bounds = _bounds()
    if scheduler.max_concurrency > bounds.max_concurrency:
        raise OutOfBounds(f"max_concurrency {scheduler.max_concurrency} > "
                          f"{bounds.max_concurrency}: outside {stategraph.TRACES_CONFIG}")
    snapshot = scheduler.snapshot()
    for t, view in snapshot.tasks.items():
        if t not in bounds.tasks or view.generation > bounds.max_generation:
            raise OutOfBounds(f"{t!r} generation {view.generation}: outside "
                              f"{stategraph.TRACES_CONFIG} (ids {list(bounds.tasks)}, "
                              f"{bounds.max_generation} generations)")
    if snapshot not in tlc_states():
        raise AssertionError(f"the state is not in TLC's graph of {stategraph.TRACES_CONFIG}: "
                             f"{snapshot}")
