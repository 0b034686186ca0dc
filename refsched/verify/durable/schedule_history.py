"""Check the schedule decisions a durable store recorded against ``refsched.model.schedule``.

A store created with ``record=True`` records its schedules' steps beside its own
(``refsched.durable.schedules``): ``Define``/``Undefine`` of a schedule, ``Decide`` of a slot
(``decision`` in run, skipped, missed, hold; a stretch of alike decisions jumped over in one
step has ``count`` slots, up to ``until``), ``Release`` of the held slot, ``Pause``/``Resume``.
:func:`check_schedule_history` replays the merged history, every step with the store's time of
its transaction (``DurableScheduler.timed_history()``), and judges each decision by the model
of ``spec/Schedule.tla``, not by the engine that made it:

- the state a decision is judged in: the schedule's next slot, held slot and pause, and which
  of its runs are unfinished; the runs' versions are followed through the durable steps on the
  TaskScheduler's reference model (a run's ``Submit``, its ends: Complete, Fail,
  AcknowledgeCancel, the Expire that fails it, the Cancel of a waiting run, Retry);
- each ``Decide`` is of the next slot (the timing's ``slot_after`` of the slot decided before:
  none passed over, none twice), whose time has come, while no held slot is releasable, and its
  decision is the model's ``decision`` in that state; a stretch decided in bulk comes only after
  ``LISTED`` alike decisions of its transaction (as ``refsched.schedule.advance`` decides), its
  ``count`` is the timing's; each ``Release`` is of the held slot, when the model's
  ``releasable`` says so;
- every ``run`` decision (and every release) is followed by exactly one ``Submit`` of its task
  id, in its transaction, and no run's id is submitted without one.

The model's operators only compare and subtract times, so the store's seconds are handed to
them as they are (the model's own states count whole ticks). Problems are returned as lines, the
first wrong step first, as ``check_history`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refsched.durable.schedules import SCHEDULE_ACTIONS
from refsched.model import schedule as model
from refsched.schedule import LISTED, Timing, slot_task_id
from refsched.verify.durable.history import HistoryCheck

__all__ = ["ScheduleHistoryCheck", "check_schedule_history"]

_UNFINISHED = frozenset({"pending", "ready", "running"})


@dataclass
class _Schedule:
    """What the history says of one schedule so far."""

    timing: Timing
    overlap: str  # in model.OVERLAPS
    catchup: float | None  # None: no slot is too old
    next: float | None  # the slot the next Decide must be of; None: the timing has no more
    held: float | None = None  # the held slot, or None
    paused: bool = False
    runs: dict[float, str] = field(default_factory=dict)  # slot -> its run's task id
    decided: dict[float, str] = field(default_factory=dict)  # slot -> decision
    # the decision, the time and the length of the latest run of alike listed Decide steps
    alike: tuple[str, float, int] = ("", 0.0, 0)

    def instance(self) -> model.Instance:
        # The model's constants: only Overlap and Catchup judge a decision (its slots and bound
        # are for its own state graph).
        return model.Instance(self.overlap, self.catchup, 1, 0, 0)


@dataclass
class ScheduleHistoryCheck:
    """A walk of one history; ``problems`` is empty when every schedule step was the model's."""

    tasks: HistoryCheck  # follows the versions of the runs
    schedules: dict[str, _Schedule] = field(default_factory=dict)
    awaited: dict[str, str] = field(default_factory=dict)  # a run's task id -> its decision step
    submits: dict[str, int] = field(default_factory=dict)  # a decided run's id -> its Submits
    problems: list[str] = field(default_factory=list)
    decisions: int = 0  # Decide and Release steps judged
    steps: int = 0

    def _unfinished(self, sched: _Schedule) -> frozenset[float]:
        tasks = self.tasks.model.state_value.tasks
        return frozenset(slot for slot, t in sched.runs.items()
                         if t in tasks and tasks[t].state.value in _UNFINISHED)

    def _snapshot(self, sched: _Schedule, now: float, slot: float) -> model.ScheduleSnapshot:
        # Times as they are: see the module's docstring.
        return model.ScheduleSnapshot(
            now=now, next=slot, paused=sched.paused,
            held=frozenset() if sched.held is None else frozenset({sched.held}),
            unfinished=self._unfinished(sched))

    def step(self, action: str, p: Mapping[str, Any], at: float) -> None:
        """Take one recorded step at the store's time ``at``; a wrong one adds a problem."""
        self.steps += 1
        where = f"step {self.steps} {action}({', '.join(f'{k}={v!r}' for k, v in p.items())})"
        if self.awaited and action != "Submit":
            for t, decided in self.awaited.items():
                self.problems.append(f"{decided}: its run {t!r} is not submitted in its "
                                     "transaction (the next step is no Submit of it)")
            self.awaited.clear()
        try:
            if action in SCHEDULE_ACTIONS:
                self._schedule_step(action, p, at, where)
            else:
                if action == "Submit":
                    self._submitted(p["t"], where)
                self.tasks.step(action, p)
        except (KeyError, TypeError, ValueError) as e:
            self.problems.append(f"{where}: malformed step ({e!r})")

    def _submitted(self, t: str, where: str) -> None:
        if t in self.awaited:
            del self.awaited[t]
            self.submits[t] = self.submits.get(t, 0) + 1
        elif t in self.submits:
            self.submits[t] += 1
            self.problems.append(f"{where}: a second Submit of the run {t!r}: a slot's run is "
                                 "submitted once, with its decision")
        elif any(t.startswith(f"{name}@") for name in self.schedules):
            self.problems.append(f"{where}: submits a run of a schedule that decided no slot "
                                 "of it")

    def _schedule_step(self, action: str, p: Mapping[str, Any], at: float, where: str) -> None:
        name = p["schedule"]
        if action == "Define":
            if name in self.schedules:
                self.problems.append(f"{where}: a schedule of that name exists")
                return
            timing = Timing(every=p["every"], cron=p["cron"], timezone=p["timezone"],
                            start=p["start"])
            self.schedules[name] = _Schedule(timing, p["overlap"], p["catchup"],
                                             timing.first_slot())
            return
        sched = self.schedules.get(name)
        if sched is None:
            self.problems.append(f"{where}: no schedule of that name is defined")
            return
        if action == "Undefine":
            del self.schedules[name]
        elif action in ("Pause", "Resume"):
            if sched.paused == (action == "Pause"):
                self.problems.append(f"{where}: the model's {action} is not enabled: the "
                                     f"schedule is {'paused' if sched.paused else 'running'}")
            sched.paused = action == "Pause"
        elif action == "Release":
            self.decisions += 1
            self._release(sched, name, float(p["slot"]), at, where)
        else:
            self.decisions += 1
            self._decide(sched, name, float(p["slot"]), str(p["decision"]), at, where,
                         p.get("count"), p.get("until"))

    def _release(self, sched: _Schedule, name: str, slot: float, at: float, where: str) -> None:
        if sched.held != slot:
            self.problems.append(f"{where}: releases a slot that is not held (held: "
                                 f"{sched.held!r})")
            return
        if not model.releasable(self._snapshot(sched, at, slot)):
            self.problems.append(f"{where}: the model does not release it: a run is "
                                 "unfinished")
        sched.held = None
        self._decided(sched, name, slot, "run", where)

    def _decide(self, sched: _Schedule, name: str, slot: float, decision: str, at: float,
                where: str, count: Any, until: Any) -> None:
        if slot in sched.decided or slot == sched.held:
            self.problems.append(f"{where}: the slot was decided before, as "
                                 f"{sched.decided.get(slot, 'hold')!r} (OneDecisionPerSlot)")
            return
        if sched.next is None or slot != sched.next:
            what = "passes over" if sched.next is not None and slot > sched.next else "is not"
            self.problems.append(f"{where}: {what} the next slot, {sched.next!r}: slots are "
                                 "decided in order (OneDecisionPerSlot)")
        if slot > at:
            self.problems.append(f"{where}: decided at {at!r}, before its time")
        state = self._snapshot(sched, at, slot)
        if model.releasable(state):
            self.problems.append(f"{where}: the held slot {sched.held!r} is releasable and "
                                 "goes first")
        wanted = model.decision(state, slot, sched.instance())
        if decision != wanted:
            self.problems.append(f"{where}: the model decides {wanted!r} in this state "
                                 f"(now {at!r}, unfinished runs at "
                                 f"{sorted(state.unfinished)}, held {sched.held!r}, "
                                 f"paused {sched.paused})")
        if count is not None:  # a stretch of alike decisions, up to until
            self._stretch(sched, slot, decision, at, where, int(count), until)
            return
        last, when, n = sched.alike
        sched.alike = (decision, at, n + 1 if (last, when) == (decision, at) else 1)
        if decision == "hold":
            sched.held = slot
        else:
            self._decided(sched, name, slot, decision, where)
        sched.next = sched.timing.slot_after(slot)

    def _stretch(self, sched: _Schedule, slot: float, decision: str, at: float, where: str,
                 count: int, until: float | None) -> None:
        if decision not in ("missed", "skipped"):
            self.problems.append(f"{where}: only missed or skipped slots are decided in bulk")
        if sched.alike[:2] != (decision, at) or sched.alike[2] < LISTED:
            self.problems.append(f"{where}: slots are decided in bulk only past {LISTED} alike "
                                 "decisions listed in the same transaction (slots passed over?)")
        sched.alike = ("", 0.0, 0)
        bound = float("inf") if until is None else float(until)
        if count != sched.timing.count(slot, bound):
            self.problems.append(f"{where}: {count} slots are not the slots up to {until!r}")
        last = bound - sched.timing.every if sched.timing.every is not None else None
        if decision == "missed" and last is not None and last >= slot:
            state = self._snapshot(sched, at, last)
            if model.decision(state, last, sched.instance()) != "missed":
                self.problems.append(f"{where}: the stretch's last slot {last!r} is within the "
                                     "catch-up window: the model does not miss it")
        for s in (slot, last if last is not None and last >= slot else slot):
            sched.decided[s] = decision
        sched.next = None if until is None else float(until)

    def _decided(self, sched: _Schedule, name: str, slot: float, decision: str,
                 where: str) -> None:
        sched.decided[slot] = decision
        if decision == "run":
            t = slot_task_id(name, slot)
            sched.runs[slot] = t
            if t in self.submits:
                self.problems.append(f"{where}: the run {t!r} was submitted before its slot "
                                     "was decided")
            self.awaited[t] = where


def check_schedule_history(history: Sequence[tuple[str, Mapping[str, Any], float]], *,
                           max_concurrency: int, max_attempts: int) -> ScheduleHistoryCheck:
    """Walk ``history`` (``DurableScheduler.timed_history()``: action, params, the store's time)
    and judge every schedule step; ``max_concurrency`` and ``max_attempts`` are the store's."""
    check = ScheduleHistoryCheck(HistoryCheck(max_concurrency, max_attempts))
    for action, params, at in history:
        check.step(action, params, float(at))
    for t, decided in check.awaited.items():
        check.problems.append(f"{decided}: its run {t!r} is never submitted")
    check.awaited.clear()
    return check
