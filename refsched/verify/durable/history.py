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

Due times and priorities (``docs/time.md``): a recorded Submit names its priority ``p`` and
delay ``d``, and a Claim the ids it took (``chosen``, the spec's ``Chosen(k)``). Each claim must
take ready versions that are due at its transaction's time, and leave no eligible version that
comes before one it took in the claim order of the store's ``aging``. A history with times
(``DurableScheduler.timed_history()``) is judged in the store's seconds; one without, only when
it has no delay (every version then due when it came, in the order of its seq) and, with aging,
one priority.

At the end the store's own snapshot must be the model's. Whatever is wrong is returned as a
list of lines, the first wrong step first. The steps of recurring schedules
(``refsched.durable.schedules.SCHEDULE_ACTIONS``) are no steps of this spec: :func:`durable_steps`
leaves them out, here and in the TLC validation of histories
(``refsched.verify.durable.schedule_history`` checks them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from refsched.durable.schedules import SCHEDULE_ACTIONS
from refsched.errors import SchedulerError
from refsched.model.dag import actions as dag_actions
from refsched.model.dag.api import ReferenceScheduler
from refsched.types import TaskState

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
    aging: float | None = None  # the store's aging in seconds; None: strict priority
    model: ReferenceScheduler = field(init=False)
    leases: dict[str, _Lease] = field(default_factory=dict)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)  # accepted ends per version
    problems: list[str] = field(default_factory=list)
    steps: int = 0
    due: dict[str, float] = field(default_factory=dict)  # each current version's due time
    priority: dict[str, int] = field(default_factory=dict)  # each id's priority
    delayed: bool = False  # a Submit gave a delay
    at: float | None = None  # the store's time of the step being taken, when recorded

    def __post_init__(self) -> None:
        self.model = ReferenceScheduler(self.max_concurrency)

    def _generation(self, t: str) -> int:
        view = self.model.state_value.tasks.get(t)
        return 0 if view is None else int(view.generation)

    def _running(self, t: str) -> bool:
        view = self.model.state_value.tasks.get(t)
        return view is not None and view.state.value == "running"

    def _new_versions(self, before: Mapping[Any, Any], delay: float = 0) -> None:
        """Fresh leases for the versions the step made, due ``delay`` after it."""
        for t, view in self.model.state_value.tasks.items():
            old = before.get(t)
            if old is None or old.generation != view.generation:
                self.leases[str(t)] = _Lease()
                self.due[str(t)] = (self.at or 0.0) + delay

    def step(self, action: str, p: Mapping[str, Any], at: float | None = None) -> None:
        """Take one recorded step (``at``: its time on the store's clock, when recorded); a
        wrong one adds a problem (and the walk goes on)."""
        self.steps += 1
        self.at = at
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
        if action in ("Submit", "SubmitOptional"):
            delay, priority = p.get("d", 0), p.get("p", 0)
            optional = frozenset(p.get("O", ()))
            m.submit(p["t"], frozenset(p["D"]) - optional, optional=optional)
            self.delayed = self.delayed or delay != 0
            self.priority[p["t"]] = priority
            self._new_versions(before, delay)
        elif action == "AddDeps":
            optional = frozenset(p["O"])
            m.add_deps(p["t"], frozenset(p["D"]) - optional, optional=optional)
        elif action == "Start":
            m.start()
        elif action == "Claim":
            if "chosen" not in p:  # a history recorded without the ids: the oldest first
                claims = [str(c.task_id) for c in m.ready(p["k"])]
                if len(claims) != p["k"]:
                    self.problems.append(f"{where}: only {len(claims)} versions were claimable")
            else:
                claims = self._claim(list(p["chosen"]), p["k"], where)
            for t in claims:
                self.leases[t] = _Lease(1, p["w"])
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
            self._new_versions(before)  # due now, each with its priority
        elif action == "Close":
            m.close(bool(p["c"]))
        elif action != "Tick":
            self.problems.append(f"{where}: no such action")

    def _key(self, t: str) -> tuple[float, ...]:
        """The claim order's key (docs/time.md), smallest first."""
        seq = self.model.state_value.tasks[t].seq
        priority, due = self.priority.get(t, 0), self.due.get(t, 0.0)
        if self.at is None:  # no times: every version due when it came, in seq order
            due = seq
        if self.aging is not None:
            return (due - priority * self.aging, seq)
        return (-priority, due, seq)

    def _claim(self, chosen: list[str], k: int, where: str) -> list[str]:
        """Spec: Claim(w, k) taking ``chosen``: k distinct ready versions, due, and the first
        k eligible ones in the claim order. The chosen ones run, whatever was wrong."""
        s = self.model.state_value
        ready = {str(t) for t, v in s.tasks.items() if v.state is TaskState.READY}
        refusal = dag_actions.claim_refusal(s, k, self.max_concurrency)
        if refusal is not None:
            self.problems.append(f"{where}: the spec does not allow it: {refusal.reason}")
        if len(set(chosen)) != len(chosen) or len(chosen) != k:
            self.problems.append(f"{where}: {k} claimed, but the ids taken are {chosen}")
        if not set(chosen) <= ready:
            self.problems.append(f"{where}: takes {sorted(set(chosen) - ready)}, not ready")
            return [t for t in chosen if t in ready]
        if self.at is None and (self.delayed or (
                self.aging is not None and len(set(self.priority.values()) | {0}) > 1)):
            self.problems.append(f"{where}: the claim order needs the store's times "
                                 "(timed_history()) once a delay or, with aging, a priority "
                                 "was given")
        else:
            now = float("inf") if self.at is None else self.at
            early = [t for t in chosen if self.due.get(t, 0.0) > now]
            if early:
                self.problems.append(f"{where}: claims {early} before due (ClaimsOnlyDue)")
            eligible = [t for t in ready if self.due.get(t, 0.0) <= now]
            first = sorted(eligible, key=self._key)[:k]
            if early == [] and set(first) != set(chosen):
                self.problems.append(f"{where}: takes {sorted(chosen)}, where the claim order "
                                     f"takes {sorted(first)} (ClaimsInKeyOrder)")
        tasks = dict(s.tasks)
        for t in chosen:
            tasks[t] = replace(tasks[t], state=TaskState.RUNNING, claims=tasks[t].claims + 1)
        self.model.state_value = s.replace(tasks=tasks)
        return chosen

    def _ended(self, t: str, g: int, where: str) -> None:
        n = self.ends.get((t, g), 0) + 1
        self.ends[(t, g)] = n
        if n > 1:
            self.problems.append(f"{where}: a second accepted end of {t!r} generation {g} "
                                 "(AtMostOneEndPerVersion)")


def durable_steps(history: Sequence[Any]) -> list[Any]:
    """``history`` (``history()``'s pairs or ``timed_history()``'s triples) without the steps
    of recurring schedules: the steps of ``DurableScheduler.tla`` (a run's Submit is one of
    them). An entry of another shape is kept, for the caller to refuse."""
    return [e for e in history
            if not (isinstance(e, (tuple, list)) and e and e[0] in SCHEDULE_ACTIONS)]


def check_history(history: Sequence[tuple[str, Mapping[str, Any]]]
                  | Sequence[tuple[str, Mapping[str, Any], float]], *, max_concurrency: int,
                  max_attempts: int, aging: float | None = None,
                  final: Any = None) -> HistoryCheck:
    """Walk ``history`` (``history()``, or ``timed_history()`` to judge due times in the
    store's seconds); ``aging`` is the store's (``DurableScheduler.aging``; None: strict
    priority). With ``final`` (the store's ``snapshot()``), compare the end state."""
    entries = [(e[0], e[1], e[2] if len(e) > 2 else None) for e in history]
    entries = [e for e in entries if e[0] not in SCHEDULE_ACTIONS]
    check = HistoryCheck(max_concurrency, max_attempts, aging)
    if not entries:
        check.problems.append("the history is empty: nothing was checked")
        return check
    for action, params, at in entries:
        check.step(action, params, at)
    if final is not None and final != check.model.snapshot():
        check.problems.append("the store's final state is not the one its history leads to")
    return check
