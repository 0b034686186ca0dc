"""Reference model of the durable scheduler: the actions of ``spec/DurableScheduler.tla`` as pure
functions.

``refsched.model.durable.actions`` holds the state (``DurableSnapshot``: the TaskScheduler's
``Snapshot`` plus the leases), the actions (``ACTIONS``: refusal + step, the scheduler's own
being the TaskScheduler model's) and ``claim_transaction``, the composite one claim transaction
performs; ``refsched.model.durable.invariants`` the spec's invariants, action properties and
refinement as predicates; ``refsched.model.durable.graph`` the spec's ``Next`` and the state
graph it spans.
"""

from . import graph, invariants
from .actions import (
    ACTIONS,
    EDGE_ACTIONS,
    INITIAL,
    RECORDING,
    Action,
    DurableSnapshot,
    Lease,
    Limits,
    Refusal,
    Step,
    claim_transaction,
    initial,
)
from .graph import *  # noqa: F403 (its __all__, added to this one below)
from .invariants import *  # noqa: F403 (its __all__, added to this one below)

__all__ = [
    "ACTIONS", "EDGE_ACTIONS", "INITIAL", "RECORDING", "Action", "DurableSnapshot", "Lease",
    "Limits", "Refusal", "Step", "claim_transaction", "initial",
]
__all__ += invariants.__all__
__all__ += graph.__all__
