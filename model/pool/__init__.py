"""Reference model of the work-stealing pool: the actions of ``spec/WorkStealing.tla`` as pure
functions.

``refsched.model.pool.actions`` holds the state (``PoolSnapshot``) and the actions (``ACTIONS``:
refusal + step), ``refsched.model.pool.invariants`` the spec's invariants and action properties
as predicates, and ``refsched.model.pool.graph`` the spec's ``Next`` and the state graph it
spans.
"""

from . import graph, invariants
from .actions import ACTIONS, INITIAL, Action, Phase, PoolSnapshot, Refusal, initial
from .graph import *  # noqa: F403 (its __all__, added to this one below)
from .invariants import *  # noqa: F403 (its __all__, added to this one below)

__all__ = ["ACTIONS", "INITIAL", "Action", "Phase", "PoolSnapshot", "Refusal", "initial"]
__all__ += invariants.__all__
__all__ += graph.__all__
