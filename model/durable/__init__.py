"""Reference model of the durable scheduler: the actions of ``spec/DurableScheduler.tla`` as pure
functions.

``refsched.model.durable.actions`` holds the state (``DurableSnapshot``: the TaskScheduler's
``Snapshot`` plus the leases), the actions (``ACTIONS``: refusal + step, the scheduler's own
being the TaskScheduler model's) and ``claim_transaction``, the composite one claim transaction
performs; ``refsched.model.durable.invariants`` the spec's invariants, action properties and
refinement as predicates; ``refsched.model.durable.graph`` the spec's ``Next`` and the state
graph it spans.
"""

from .actions import (
    ACTIONS,
    INITIAL,
    Action,
    DurableSnapshot,
    Lease,
    Limits,
    Refusal,
    Step,
    claim_transaction,
    initial,
)
from .graph import Instance, explore, next_steps, within_bound
from .invariants import ACTION_PROPERTIES, INVARIANTS, violated, violated_by_step

__all__ = [
    "ACTIONS",
    "ACTION_PROPERTIES",
    "INITIAL",
    "INVARIANTS",
    "Action",
    "DurableSnapshot",
    "Instance",
    "Lease",
    "Limits",
    "Refusal",
    "Step",
    "claim_transaction",
    "explore",
    "initial",
    "next_steps",
    "violated",
    "violated_by_step",
    "within_bound",
]
