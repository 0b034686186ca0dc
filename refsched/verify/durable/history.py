"""Check a durable store's recorded history: a behaviour of the spec, step by step.

A store created with ``record=True`` appends every accepted step to its history in the
transaction that takes it, so the history is the commit order. :func:`check_history` walks it
with two checkers side by side:

- the lease part of ``spec/DurableScheduler.tla``: a Claim or Reclaim takes a version with no
  live lease, an Expire ends a live one, and a report (Complete, Fail, AcknowledgeCancel,
  Heartbeat) is accepted only from the live lease's worker and attempt of the current
  generation (``OnlyCurrentAttemptEnds``, ``AtMostOneLiveLease``, ``AttemptsBounded``);
- the scheduler part, through the refinement mapping, on the TaskScheduler's reference model
  (``refsched.model.dag.api.ReferenceScheduler``): each step is the Scheduler action it maps to
  (Reclaim, Heartbeat, Tick and a reopening Expire are stuttering; an Expire that gives up is
  Fail), and the model refuses a step the spec does not allow.

At the end the store's own snapshot must be the model's. Whatever is wrong is returned as a
list of lines, the first wrong step first. The steps of recurring schedules
(``refsched.durable.schedules.SCHEDULE_ACTIONS``) are no steps of this spec: :func:`durable_steps`
leaves them out, here and in the TLC validation of histories
(``refsched.verify.durable.schedule_history`` checks them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refsched.durable.schedules import SCHEDULE_ACTIONS
from refsched.errors import SchedulerError
from refsched.model.dag.api import ReferenceScheduler

__all__ = ["HistoryCheck", "check_history", "durable_steps"]

_REPORTS = {"Complete": "complete", "Fail": "fail", "AcknowledgeCancel": "acknowledge_cancel"}


@dataclass
class _Lease:
    attempt: int = 0  # claims of the current version
    holder: str | None = None  # the worker whose lease is live


@dataclass
class HistoryCheck:
    """A walk of one history; ``problems`` is empty when every step was a spec step."""

    max_concurrency: int
    max_attempts: int
    model: ReferenceScheduler = field(init=False)
    leases: dict[str, _Lease] = field(default_factory=dict)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)  # accepted ends per version
    problems: list[str] = field(default_factory=list)
    steps: int = 0

    def __post_init__(self) -> None:
        self.model = ReferenceScheduler(self.max_concurrency)

    def _generation(self, t: str) -> int:
        view = self.model.state_value.tasks.get(t)
        return 0 if view is None else int(view.generation)

    def _running(self, t: str) -> bool:
        view = self.model.state_value.tasks.get(t)
        return view is not None and view.state.value == "running"

    def _new_versions(self, before: Mapping[Any, Any]) -> None:
        for t, view in self.model.state_value.tasks.items():
            old = before.get(t)
            if old is None or old.generation != view.generation:
                self.leases[str(t)] = _Lease()

    def step(self, action: str, p: Mapping[str, Any]) -> None:
        """Take one recorded step; a wrong one adds a problem (and the walk goes on)."""
        self.steps += 1
        where = f"step {self.steps} {action}({', '.join(f'{k}={v!r}' for k, v in p.items())})"
        try:
            self._step(action, p, where)
        except SchedulerError as e:
            self.problems.append(f"{where}: the spec does not allow it: {e}")
        except (KeyError, TypeError) as e:
            self.problems.append(f"{where}: malformed step ({e!r})")

    def _step(self, action: str, p: Mapping[str, Any], where: str) -> None:
        m = self.model
        before = m.state_value.tasks
        if action == "Submit":
            m.submit(p["t"], p["D"])
            self._new_versions(before)
        elif action == "Start":
            m.start()
        elif action == "Claim":
            claims = m.ready(p["k"])
            if len(claims) != p["k"]:
                self.problems.append(f"{where}: only {len(claims)} versions were claimable")
            for claim in claims:
                self.leases[str(claim.task_id)] = _Lease(1, p["w"])
        elif action == "Reclaim":
            lease = self.leases.get(p["t"])
            if lease is None or not self._running(p["t"]) or lease.holder is not None:
                self.problems.append(f"{where}: re-claims a version with a live lease or not "
                                     "running (AtMostOneLiveLease)")
            elif lease.attempt >= self.max_attempts:
                self.problems.append(f"{where}: attempt {lease.attempt + 1} > max_attempts "
                                     "(AttemptsBounded)")
            else:
                lease.attempt += 1
                lease.holder = p["w"]
        elif action == "Expire":
            lease = self.leases.get(p["t"])
            if lease is None or lease.holder is None or not self._running(p["t"]):
                self.problems.append(f"{where}: expires no live lease (an expiry that is not "
                                     "conditional)")
                return
            lease.holder = None
            if lease.attempt >= self.max_attempts:
                g = self._generation(p["t"])
                m.fail(p["t"], g)
                self._ended(p["t"], g, where)
        elif action in _REPORTS or action == "Heartbeat":
            lease = self.leases.get(p["t"])
            current = (lease is not None and self._running(p["t"])
                       and p["g"] == self._generation(p["t"]) and p["a"] == lease.attempt
                       and p["w"] == lease.holder)
            if not current:
                self.problems.append(f"{where}: accepted from a lease that is not live "
                                     "(OnlyCurrentAttemptEnds)")
                return
            if action != "Heartbeat":
                getattr(m, _REPORTS[action])(p["t"], p["g"])
                assert lease is not None
                lease.holder = None
                self._ended(p["t"], p["g"], where)
        elif action == "Cancel":
            m.cancel(p["t"])
        elif action == "Retry":
            m.retry(p["t"])
            self._new_versions(before)
        elif action == "Close":
            m.close(bool(p["c"]))
        elif action != "Tick":
            self.problems.append(f"{where}: no such action")

    def _ended(self, t: str, g: int, where: str) -> None:
        n = self.ends.get((t, g), 0) + 1
        self.ends[(t, g)] = n
        if n > 1:
            self.problems.append(f"{where}: a second accepted end of {t!r} generation {g} "
                                 "(AtMostOneEndPerVersion)")


def durable_steps(history: Sequence[tuple[str, Mapping[str, Any]]]
                  ) -> list[tuple[str, Mapping[str, Any]]]:
    """``history`` without the steps of recurring schedules: the steps of
    ``DurableScheduler.tla`` (a run's Submit is one of them)."""
    return [(action, params) for action, params in history if action not in SCHEDULE_ACTIONS]


def check_history(history: Sequence[tuple[str, Mapping[str, Any]]], *, max_concurrency: int,
                  max_attempts: int, final: Any = None) -> HistoryCheck:
    """Walk ``history``; with ``final`` (the store's ``snapshot()``), compare the end state."""
    history = durable_steps(history)
    check = HistoryCheck(max_concurrency, max_attempts)
    if not history:
        check.problems.append("the history is empty: nothing was checked")
        return check
    for action, params in history:
        check.step(action, params)
    if final is not None and final != check.model.snapshot():
        check.problems.append("the store's final state is not the one its history leads to")
    return check
