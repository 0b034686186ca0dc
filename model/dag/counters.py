"""What ``TaskScheduler.stats()`` must count, derived from the model's steps.

Every counter of ``SchedulerStats`` is a count of spec steps of one kind, of the versions those
steps moved into a state, or of API calls the contract classifies without a step of their own:

==========================  ===================================================================
submitted                   Submit and SubmitOptional steps
retried                     versions a Retry step renewed (the task and its blocked descendants)
claimed                     versions Claim steps took: the sum of their ``k``
succeeded                   Complete steps
failed                      Fail steps
cancelled                   versions a step made cancelled (Cancel of a waiting version,
                            AcknowledgeCancel, Close with ``cancelPending``)
blocked                     versions a step made blocked (Settle)
cycles_reported             ``submit()`` / ``start()`` / ``add_deps()`` calls refused with
                            ``CycleError``
claim_conflicts             ``ready()`` calls the concurrency limit cut short
                            (:func:`claim_cut_short`)
duplicate_callbacks         RepeatedCallback steps
stale_callbacks             StaleCallback steps
ready_wait.count            == claimed: each claimed version waited once
run_time.count              versions that ended from running: Complete, Fail and
                            AcknowledgeCancel steps
==========================  ===================================================================

The durations themselves (``ready_wait`` / ``run_time`` totals and maxima) are clock readings,
which the model has none of: :meth:`Counts.expected` fixes their counts only.

:class:`Counts` is an immutable value; ``counts.step(...)`` is the counts after one more step,
and two counts add up, so the counts a step adds can be computed once per edge of a state graph.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields, replace
from typing import Any

from refsched.errors import CycleError
from refsched.types import Snapshot

from .actions import BLOCKED, CANCELLED, READY, running_count

__all__ = ["Counts", "claim_cut_short"]


def _moved(before: Snapshot, after: Snapshot) -> tuple[int, int, int]:
    """Versions the step from ``before`` to ``after`` renewed, made cancelled, made blocked.

    Renewed: a current version of another generation than before (a new id's first version is
    none). Made cancelled or blocked: in that state after the step, and a new version or one
    that was in another state before it.
    """
    renewed = cancelled = blocked = 0
    old = before.tasks
    for t, v in after.tasks.items():
        was = old.get(t)
        if was is not None and was.generation != v.generation:
            renewed += 1
            was = None  # another version: whatever state it is in, it is new to it
        state = v.state
        if (state is CANCELLED or state is BLOCKED) and (was is None or was.state is not state):
            if state is CANCELLED:
                cancelled += 1
            else:
                blocked += 1
    return renewed, cancelled, blocked


def claim_cut_short(s: Snapshot, max_concurrency: int, limit: int | None) -> bool:
    """Whether ``ready(limit)`` from ``s`` claims fewer versions than it asks for because of the
    concurrency limit (``stats().claim_conflicts`` + 1).

    It asks for ``limit`` ready versions (every one when ``limit`` is None, at most as many as
    are ready); it is cut short when fewer slots are free than that, and it counts so even when
    no slot is free and it claims nothing. A closed or unstarted scheduler, or one with nothing
    ready, asks for nothing. ``limit`` must be valid (None or an int >= 0).
    """
    if not s.started or s.closed:
        return False
    ready = sum(1 for v in s.tasks.values() if v.state is READY)
    if not ready:
        return False
    wanted = ready if limit is None else min(limit, ready)
    return max_concurrency - running_count(s.tasks) < wanted


@dataclass(frozen=True, slots=True)
class Counts:
    """The counters of ``SchedulerStats`` as the model's steps fix them; each field >= 0."""

    submitted: int = 0  # Submit and SubmitOptional steps
    retried: int = 0  # versions renewed by Retry steps
    claimed: int = 0  # sum of k over Claim steps
    succeeded: int = 0  # Complete steps
    failed: int = 0  # Fail steps
    cancelled: int = 0  # versions moved into cancelled
    blocked: int = 0  # versions moved into blocked
    cycles_reported: int = 0  # calls refused with CycleError
    claim_conflicts: int = 0  # ready() calls cut short (claim_cut_short)
    duplicate_callbacks: int = 0  # RepeatedCallback steps
    stale_callbacks: int = 0  # StaleCallback steps
    ended_running: int = 0  # Complete, Fail and AcknowledgeCancel steps: run_time.count

    def __add__(self, other: Counts) -> Counts:
        return Counts(*map(operator.add, _values(self), _values(other)))

    def step(self, action: str, args: tuple[Any, ...], before: Snapshot,
             after: Snapshot) -> Counts:
        """The counts after the step ``action(*args)`` from ``before`` to ``after``.

        ``args`` are the model action's arguments (Claim's first is ``k``).
        """
        renewed, cancelled, blocked = _moved(before, after)
        ended = action in _ENDING_RUNNING
        return Counts(
            submitted=self.submitted + (action in _SUBMITTING),
            retried=self.retried + (renewed if action == "Retry" else 0),
            claimed=self.claimed + (int(args[0]) if action == "Claim" else 0),
            succeeded=self.succeeded + (action == "Complete"),
            failed=self.failed + (action == "Fail"),
            cancelled=self.cancelled + cancelled,
            blocked=self.blocked + blocked,
            cycles_reported=self.cycles_reported,
            claim_conflicts=self.claim_conflicts,
            duplicate_callbacks=self.duplicate_callbacks + (action == "RepeatedCallback"),
            stale_callbacks=self.stale_callbacks + (action == "StaleCallback"),
            ended_running=self.ended_running + ended,
        )

    def call(self, method: str, args: tuple[Any, ...], before: Snapshot,
             error: BaseException | None, max_concurrency: int) -> Counts:
        """The counts after what the API call ``method(*args)`` from ``before`` counts besides its
        step: a ``CycleError`` it raised, or a ``ready()`` the concurrency limit cut short.

        ``error`` is what the call raised (None: it returned).
        """
        if error is not None:
            cycle = isinstance(error, CycleError) and method in ("submit", "start", "add_deps")
            return replace(self, cycles_reported=self.cycles_reported + 1) if cycle else self
        if method == "ready" and claim_cut_short(before, max_concurrency,
                                                 args[0] if args else None):
            return replace(self, claim_conflicts=self.claim_conflicts + 1)
        return self

    def expected(self) -> dict[str, int]:
        """What ``stats()`` must show, by field (``ready_wait.count``: a field of a field)."""
        shown = dict(zip(_NAMES, _values(self), strict=True))
        ended = shown.pop("ended_running")
        return {**shown, "ready_wait.count": self.claimed, "run_time.count": ended}


_NAMES = tuple(f.name for f in fields(Counts))
_ENDING_RUNNING = frozenset({"Complete", "Fail", "AcknowledgeCancel"})
_SUBMITTING = frozenset({"Submit", "SubmitOptional"})
_values = operator.attrgetter(*_NAMES)  # a Counts -> its fields' values, in order
