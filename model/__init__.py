"""Reference model of the TaskScheduler: the actions of ``spec/Scheduler.tla`` as pure functions.

``refsched.model.dag.actions`` holds the actions (``ACTIONS``: enabled condition + step over an
immutable ``Snapshot``), ``refsched.model.dag.invariants`` the spec's invariants as predicates, and
``refsched.model.dag.api.ReferenceScheduler`` the production API driven by those actions.
"""

from .dag.actions import ACTIONS, INITIAL, Action, Refusal
from .dag.api import ReferenceScheduler
from .dag.invariants import ACTION_PROPERTIES, INVARIANTS, violated, violated_by_step

__all__ = [
    "ACTIONS",
    "ACTION_PROPERTIES",
    "INITIAL",
    "INVARIANTS",
    "Action",
    "ReferenceScheduler",
    "Refusal",
    "violated",
    "violated_by_step",
]
