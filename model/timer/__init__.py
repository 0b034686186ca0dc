"""Reference model of the timer scheduler: the actions of ``spec/TimerQueue.tla`` as pure functions.

``refsched.model.timer.actions`` holds the actions (``ACTIONS``: refusal + step over an
immutable ``TimerSnapshot``), ``refsched.model.timer.invariants`` the spec's invariants as
predicates, ``refsched.model.timer.graph`` the spec's ``Next`` and the state graph it spans, and
``refsched.model.timer.api.ReferenceTimerScheduler`` the production API driven by the actions.
"""

from .actions import ACTIONS, INITIAL, Action, Refusal, initial
from .api import ReferenceTimerScheduler
from .graph import Instance, explore, next_steps, within_bound
from .invariants import ACTION_PROPERTIES, INVARIANTS, violated, violated_by_step

__all__ = [
    "ACTIONS",
    "ACTION_PROPERTIES",
    "INITIAL",
    "INVARIANTS",
    "Action",
    "Instance",
    "ReferenceTimerScheduler",
    "Refusal",
    "explore",
    "initial",
    "next_steps",
    "violated",
    "violated_by_step",
    "within_bound",
]
