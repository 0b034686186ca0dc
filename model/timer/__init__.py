"""Reference model of the timer scheduler: the actions of ``spec/TimerQueue.tla`` as pure functions.

``refsched.model.timer.actions`` holds the actions (``ACTIONS``: refusal + step over an
immutable ``TimerSnapshot``), ``refsched.model.timer.invariants`` the spec's invariants as
predicates, ``refsched.model.timer.graph`` the spec's ``Next`` and the state graph it spans, and
``refsched.model.timer.api.ReferenceTimerScheduler`` the production API driven by the actions.
"""

from . import graph, invariants
from .actions import ACTIONS, INITIAL, Action, Refusal, initial
from .api import ReferenceTimerScheduler
from .graph import *  # noqa: F403 (its __all__, added to this one below)
from .invariants import *  # noqa: F403 (its __all__, added to this one below)

__all__ = ["ACTIONS", "INITIAL", "Action", "ReferenceTimerScheduler", "Refusal", "initial"]
__all__ += invariants.__all__
__all__ += graph.__all__
