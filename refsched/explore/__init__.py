"""A deterministic interleaving explorer for refsched's threaded schedulers.

``runtime`` controls the threads: drop-in ``Lock``/``RLock``/``Condition``/``Event``/
``SimpleQueue``/``Thread`` installed into ``refsched.sync``, one thread running at a time, every
synchronisation operation a scheduling point. ``search`` chooses the schedules (depth-first
search with preemption bounding and partial-order reduction, random, PCT, Hypothesis-drawn) and
replays one by id.
``linearizability`` checks a recorded history against the reference model. ``scenarios`` are the
programs explored against the production code; ``context`` is what a scenario's body sees.

    >>> from refsched.explore import explore, replay, SCENARIOS
    >>> report = explore(SCENARIOS["ready_ready"])
    >>> report.ok
    True
"""

from refsched.explore.context import Context, Scenario
from refsched.explore.dag.scenarios import SCENARIOS, scenario
from refsched.explore.runtime import installed
from refsched.explore.search import (
    ExploreConfig,
    ExploreReport,
    Failure,
    PctPlan,
    RunResult,
    ScheduleMismatch,
    SchedulePlan,
    compare_reduction,
    explore,
    pct_schedules,
    replay,
    run_schedule,
    schedules,
)

__all__ = [
    "SCENARIOS",
    "Context",
    "ExploreConfig",
    "ExploreReport",
    "Failure",
    "PctPlan",
    "RunResult",
    "Scenario",
    "ScheduleMismatch",
    "SchedulePlan",
    "compare_reduction",
    "explore",
    "installed",
    "pct_schedules",
    "replay",
    "run_schedule",
    "scenario",
    "schedules",
]
