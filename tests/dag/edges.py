"""The instances of spec/Scheduler.tla with edge kinds and AddDeps that the tests name.

:data:`EDGES_SYSTEM` is the TaskScheduler's system itself: it reads the spec's ``optional`` and
the constants ``OptionalEdges`` and ``AddDepsAllowed`` of every ``MCScheduler`` config.
"""

from __future__ import annotations

from refsched.verify.dag.system import SYSTEM

__all__ = ["ADD_DEPS_TRACES", "EDGES_SYSTEM", "EDGES_TRACES"]

EDGES_TRACES = "MCSchedulerCorpusEdges.cfg"
"""The instance with both constants on whose whole state graph the model's must equal (and a
corpus instance)."""

ADD_DEPS_TRACES = "MCSchedulerAddDepsTraces.cfg"
"""The instance with AddDeps on 3 ids whose whole state graph the model's must equal."""

EDGES_SYSTEM = SYSTEM
