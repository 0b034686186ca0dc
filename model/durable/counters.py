"""What ``DurableScheduler.stats()`` must count, derived from the model's steps.

The durable scheduler's counterpart of :mod:`refsched.model.dag.counters`. The store-wide counters
are counts of spec steps of one kind, or of the versions a step moved into a state:

==================  ==========================================================================
submitted           Submit and SubmitOptional steps
retried             versions a Retry step created (the retried id and those blocked by it)
claimed             versions a Claim step moved from ready to running (its ``k``); a
                    ClaimAnswerLost too (the store's change is the same)
reclaimed           Reclaim and ReclaimAnswerLost steps
expired             Expire steps
succeeded           Complete and CompleteAnswerLost steps
failed              versions a step moved into failed: Fail, and an Expire out of attempts
cancelled           versions a step moved into cancelled: Cancel of a waiting version,
                    AcknowledgeCancel, Close with ``cancelPending``
blocked             versions a step moved into blocked (the Settle inside the step)
==================  ==========================================================================

and, of the state reached, ``by_state`` (current versions per state, the states present) and
``live_leases`` (versions with a holder). ``cycles_reported`` counts calls refused for a cycle,
which no spec step is, and ``stale_callbacks`` and ``duplicate_callbacks`` the refused and the
repeated reports one scheduler object answered, which depend on the calls a harness chose to
take a Refused, RepeatedReport or RepeatedCallback step with: a check that makes such calls
counts them itself.

:class:`Counts` is an immutable value; ``counts.step(...)`` is the counts after one more step,
and two counts add up, so the counts a step adds can be computed once per edge of a state graph.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, fields
from typing import Any

from refsched.types import TaskState

from .actions import DurableSnapshot

__all__ = ["Counts"]


@dataclass(frozen=True, slots=True)
class Counts:
    """The store-wide counters of ``DurableStats``, as the model's steps fix them."""

    submitted: int = 0
    retried: int = 0
    claimed: int = 0
    reclaimed: int = 0
    expired: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    blocked: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*map(operator.add, _values(self), _values(other)))

    def step(self, action: str, args: tuple[Any, ...], before: DurableSnapshot,
             after: DurableSnapshot) -> Counts:
        """The counts after the step ``action(*args)`` from ``before`` to ``after``."""
        old, new = before.scheduler.tasks, after.scheduler.tasks

        def became(state: TaskState) -> int:
            """Versions in ``state`` after the step that were not in it before."""
            return sum(1 for t, v in new.items() if v.state is state and (
                t not in old or old[t].state is not state
                or old[t].generation != v.generation))

        renewed = sum(1 for t, v in new.items() if t in old
                      and old[t].generation != v.generation)
        return Counts(
            submitted=self.submitted + (action in ("Submit", "SubmitOptional")),
            retried=self.retried + (renewed if action == "Retry" else 0),
            claimed=self.claimed + (became(TaskState.RUNNING)
                                    if action in ("Claim", "ClaimAnswerLost") else 0),
            reclaimed=self.reclaimed + (action in ("Reclaim", "ReclaimAnswerLost")),
            expired=self.expired + (action == "Expire"),
            succeeded=self.succeeded + became(TaskState.SUCCEEDED),
            failed=self.failed + became(TaskState.FAILED),
            cancelled=self.cancelled + became(TaskState.CANCELLED),
            blocked=self.blocked + became(TaskState.BLOCKED),
        )

    def expected(self, state: DurableSnapshot) -> dict[str, Any]:
        """What ``stats()`` must show in ``state``, the state the counted steps reached, by
        field: every field of ``DurableStats`` but the refused and repeated calls'."""
        by_state: Counter[str] = Counter(v.state.value for v in state.scheduler.tasks.values())
        holders: dict[Hashable, Hashable] = dict(state.holder)
        return {**{name: getattr(self, name) for name in _NAMES},
                "by_state": dict(by_state), "live_leases": len(holders)}


_NAMES = tuple(f.name for f in fields(Counts))
_values = operator.attrgetter(*_NAMES)  # a Counts -> its fields' values, in order
