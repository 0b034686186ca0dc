"""Reference model of the work-stealing pool: the actions of ``spec/WorkStealing.tla`` as pure
functions.

``refsched.model.pool.actions`` holds the state (``PoolSnapshot``) and the actions (``ACTIONS``:
refusal + step), ``refsched.model.pool.invariants`` the spec's invariants and action properties
as predicates, and ``refsched.model.pool.graph`` the spec's ``Next`` and the state graph it
spans.
"""

from .actions import ACTIONS, INITIAL, Action, Phase, PoolSnapshot, Refusal, initial
from .graph import Instance, explore, next_steps, within_bound
from .invariants import ACTION_PROPERTIES, INVARIANTS, violated, violated_by_step

__all__ = [
    "ACTIONS",
    "ACTION_PROPERTIES",
    "INITIAL",
    "INVARIANTS",
    "Action",
    "Instance",
    "Phase",
    "PoolSnapshot",
    "Refusal",
    "explore",
    "initial",
    "next_steps",
    "violated",
    "violated_by_step",
    "within_bound",
]
