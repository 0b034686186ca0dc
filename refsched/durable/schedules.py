"""Recurring schedules kept in a durable store: their rows, and the decision pass.

A schedule is a row of ``schedule`` (its timing, its policy, and ``spec/Schedule.tla``'s
variables: the next undecided slot, the held slot, whether it is paused); each decided slot is
a row of ``slot`` (its decision, and the task id of its run). Nothing of a schedule lives in a
process: a store reopened after any crash or downtime decides every slot it owes from these rows.

:func:`decide_owed` is the decision pass. The scheduler takes it inside a write transaction
whenever the store's clock has reached ``meta.slot_due`` (the earliest slot owed or held slot,
kept by :func:`_note_due`): before a claim, on ``tick()``, on ``pause``/``resume``/
``unschedule``. Write transactions of one store are serialised (SQLite's single writer, the
PostgreSQL store's lock), so two processes never decide the same slot: the second reads the
first one's ``next_slot``. Each slot's decision is :func:`refsched.schedule.advance`'s, the
function the spec's model checks.

A store created with ``record=True`` records each decision in its step history, in the
decision's transaction, as the ``Schedule.tla`` action it is (:data:`SCHEDULE_ACTIONS`): a
``Decide`` of each slot, a ``Release`` of a held slot, ``Pause``/``Resume``, and ``Define``/
``Undefine`` of a schedule; a run's ``Submit`` follows its ``Decide``. The durable scheduler's
history checks skip these steps; ``refsched.verify.durable.schedule_history`` checks them
against the schedule's model.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from refsched.errors import InvalidArgumentError, InvalidTransitionError, UnknownTaskError
from refsched.schedule import Decision, Policy, ScheduleState, Timing, advance, slot_task_id

from .store import Tx

__all__ = ["NO_SLOT", "SCHEDULE_ACTIONS", "Record", "ScheduleInfo", "SlotInfo", "check_limit",
           "decide_owed", "define", "list_queries", "listing", "remove", "set_paused"]

#: The recorded steps of schedules (``spec/Schedule.tla``'s actions, and a schedule's creation
#: and removal): no step of ``DurableScheduler.tla``, so its history checks leave them out.
SCHEDULE_ACTIONS = frozenset({"Define", "Undefine", "Decide", "Release", "Pause", "Resume"})

#: ``meta.slot_due`` when no schedule owes anything: later than any clock.
NO_SLOT = 1e300

_COLUMNS = ("name, fn, args, every, cron, timezone, start_at, overlap, catchup, priority, "
            "paused, next_slot, held_slot, unlisted, open_from")

#: Past every slot: the bound of a stretch that ends with the timing's last slot.
_NO_MORE = float("inf")

#: What a run is while unfinished: its version is not terminal.
_UNFINISHED = "('pending', 'ready', 'running')"

SubmitRun = Callable[[Tx, str, str, str, int], None]
"""``submit_run(tx, task_id, fn, args_text, priority)``: submit a version of the slot's run, due
now, in the transaction ``tx`` (the scheduler's own submit step)."""

Record = Callable[..., None]
"""``record(tx, action, **params)``: append a step to the store's history in ``tx`` (nothing
when the store records none); the scheduler's own."""


def _no_record(tx: Tx, action: str, **params: Any) -> None:
    """The record of a caller that keeps no history."""


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """One decided slot: its time (store clock), its decision, the run's task id."""

    at: float
    decision: str  # "run" | "skipped" | "missed"
    task: str | None  # the run's task id, for "run"
    decided_at: float


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as the store keeps it, and its latest decided slots."""

    name: str
    fn: str
    args: dict[str, Any]
    every: float | None
    cron: str | None
    timezone: str
    start: float
    overlap: str
    catchup: float | None
    priority: int
    paused: bool
    next_slot: float | None  # None: the timing has no more slots
    held_slot: float | None
    unlisted: int  # slots decided "missed" or "skipped" in one jump, not listed
    slots: tuple[SlotInfo, ...]  # the latest first

    def as_json(self) -> dict[str, Any]:
        """The schedule for ``refsched schedules --json``: times in UTC ISO 8601 beside the
        store clock's seconds."""
        def moment(t: float | None) -> str | None:
            if t is None:
                return None
            try:
                return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")
            except (OverflowError, OSError, ValueError):
                return None
        return {"name": self.name, "fn": self.fn, "args": self.args, "every": self.every,
                "cron": self.cron, "timezone": self.timezone, "start": self.start,
                "overlap": self.overlap, "catchup": self.catchup, "priority": self.priority,
                "paused": self.paused, "next_slot": self.next_slot,
                "next_slot_utc": moment(self.next_slot), "held_slot": self.held_slot,
                "unlisted": self.unlisted,
                "slots": [{"at": s.at, "at_utc": moment(s.at), "decision": s.decision,
                           "task": s.task, "decided_at": s.decided_at} for s in self.slots]}


def _state(row: tuple[Any, ...]) -> ScheduleState:
    (_, _, _, every, cron, zone, start, overlap, catchup, _, paused, next_slot, held,
     unlisted, _) = row
    timing = Timing(every=every, cron=cron, timezone=zone, start=start)
    return ScheduleState(timing, Policy(overlap, catchup), next_slot, held, bool(paused),
                         int(unlisted))


def _note_due(tx: Tx) -> None:
    """Keep ``meta.slot_due``: the earliest time a decision pass has something to do (a slot
    to decide, or a held slot to release), read by every claim in the query it makes anyway."""
    row = tx.one("SELECT MIN(CASE WHEN held_slot IS NOT NULL AND held_slot < "
                 "COALESCE(next_slot, ?) THEN held_slot ELSE next_slot END) FROM schedule",
                 (NO_SLOT,))
    tx.meta_set("slot_due", NO_SLOT if row is None or row[0] is None else float(row[0]))


def _unfinished(tx: Tx, name: str, open_from: float | None) -> tuple[int, float | None]:
    """How many runs of ``name`` are unfinished, and the earliest of their slots (None: none).

    Only slots from ``open_from`` on are read: every run before it was seen finished, and a
    terminal version never changes (a new version of its id, by retry, is read again only if
    its slot is at or after ``open_from``; see docs/time.md)."""
    row = tx.one(f"SELECT COUNT(*), MIN(slot.at) FROM slot JOIN task ON task.id = slot.task "
                 f"WHERE slot.schedule = ? AND slot.decision = 'run' AND slot.at >= ? AND "
                 f"task.state IN {_UNFINISHED}", (name, -NO_SLOT if open_from is None
                                                    else open_from))
    return (0, None) if row is None else (int(row[0]), row[1])


def decide_owed(tx: Tx, now: float, submit_run: SubmitRun, only: str | None = None,
                record: Record = _no_record) -> int:
    """Decide every slot the store's schedules owe at ``now`` (or ``only``'s), oldest first
    within each schedule; write each decision, submit each run, ``record`` each step. Returns
    how many slots were decided or released. A closed store decides nothing: it takes no
    submission, so its slots stay owed."""
    if tx.meta("closed"):
        return 0
    query = f"SELECT {_COLUMNS} FROM schedule"
    rows = (tx.all(query + " WHERE name = ?", (only,)) if only is not None else
            tx.all(query + " WHERE held_slot IS NOT NULL OR next_slot <= ? ORDER BY name",
                   (now,)))
    decided = 0
    for row in rows:
        name, fn, args_text, priority, open_from = row[0], row[1], row[2], row[9], row[14]
        state = _state(row)
        unfinished, first_open = _unfinished(tx, name, open_from)
        new, decisions = advance(state, now, unfinished)
        for step, slot, decision, params in _steps(state, new, decisions):
            record(tx, step, schedule=name, slot=slot, **params)
            if step == "Decide" and decision == "hold":
                continue
            task = slot_task_id(name, slot) if decision == "run" else None
            if task is not None:
                submit_run(tx, task, fn, args_text, int(priority))
                first_open = slot if first_open is None else min(first_open, slot)
            if "count" not in params:  # a stretch jumped over has no rows: it is counted
                tx.run("INSERT INTO slot (schedule, at, decision, task, decided_at) "
                       "VALUES (?, ?, ?, ?, ?)", (name, slot, decision, task, now))
        decided += len(decisions) + (new.unlisted - state.unlisted)
        tx.run("UPDATE schedule SET next_slot = ?, held_slot = ?, unlisted = ?, open_from = ? "
               "WHERE name = ?",
               (new.next, new.held, new.unlisted,
                first_open if first_open is not None else new.next, name))
    _note_due(tx)
    return decided


def _steps(old: ScheduleState, new: ScheduleState, decisions: list[tuple[float, Decision]]
           ) -> list[tuple[str, float, Decision, dict[str, Any]]]:
    """The spec steps of one :func:`advance`, in the order taken: ``(action, slot, decision,
    params)``. ``advance`` lists neither the slot it holds (the state says which) nor the
    stretches of alike decisions it jumps over; these come back here as a ``Decide`` of
    decision ``"hold"`` and as one ``Decide`` of the stretch's first slot with ``count`` (how
    many slots) and ``until`` (the first slot after them)."""
    steps: list[tuple[str, float, Decision, dict[str, Any]]] = []
    listed = list(decisions)
    if old.held is not None and listed and listed[0] == (old.held, "run"):
        steps.append(("Release", old.held, "run", {}))
        listed.pop(0)
    if new.held is not None and (new.held != old.held or steps):
        bisect.insort(listed, (new.held, "hold"))
    timing = new.timing
    expected = old.next
    for slot, decision in listed:
        if expected is not None and slot != expected and steps and steps[-1][0] == "Decide":
            _, _, alike, _ = steps[-1]  # the stretch jumped over: alike the decision before it
            steps.append(("Decide", expected, alike,
                          {"decision": alike, "count": timing.count(expected, slot),
                           "until": slot}))
        steps.append(("Decide", slot, decision, {"decision": decision}))
        expected = timing.slot_after(slot)
    if expected is not None and expected != new.next and steps and steps[-1][0] == "Decide":
        _, _, alike, _ = steps[-1]
        bound = new.next if new.next is not None else _NO_MORE
        steps.append(("Decide", expected, alike,
                      {"decision": alike, "count": timing.count(expected, bound),
                       "until": new.next}))
    return steps


def define(tx: Tx, name: str, *, fn: str, args_text: str, timing: Timing, policy: Policy,
           priority: int, now: float, record: Record = _no_record) -> bool:
    """Create schedule ``name``; False if an identical one exists (nothing changes).

    A different schedule of the same name is an ``InvalidTransitionError``: unschedule it
    first (its decided slots would otherwise be judged by rules they were not decided by)."""
    row = tx.one(f"SELECT {_COLUMNS} FROM schedule WHERE name = ?", (name,))
    if row is not None:
        same = (row[1] == fn and json.loads(row[2]) == json.loads(args_text)
                and row[3] == timing.every and row[4] == timing.cron and row[5] == timing.timezone
                and row[7] == policy.overlap and row[8] == policy.catchup and row[9] == priority)
        if same:
            return False
        raise InvalidTransitionError(f"schedule({name!r}): a different schedule of that name "
                                     "exists; unschedule it first")
    first = timing.first_slot()
    tx.run(f"INSERT INTO schedule ({_COLUMNS}, created_at) VALUES "
           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, NULL, 0, ?, ?)",
           (name, fn, args_text, timing.every, timing.cron, timing.timezone, timing.start,
            policy.overlap, policy.catchup, priority, first, first, now))
    record(tx, "Define", schedule=name, every=timing.every, cron=timing.cron,
           timezone=timing.timezone, start=timing.start, overlap=policy.overlap,
           catchup=policy.catchup)
    _note_due(tx)
    return True


def _known(tx: Tx, call: str, name: str) -> None:
    if tx.one("SELECT 1 FROM schedule WHERE name = ?", (name,)) is None:
        raise UnknownTaskError(f"{call}({name!r}): no schedule of that name", name)


def set_paused(tx: Tx, name: str, paused: bool, now: float, submit_run: SubmitRun,
               record: Record = _no_record) -> None:
    """Pause or resume ``name``, after deciding what it owes under the state it had."""
    _known(tx, "pause" if paused else "resume", name)
    decide_owed(tx, now, submit_run, only=name, record=record)
    if tx.run("UPDATE schedule SET paused = ? WHERE name = ? AND paused <> ?",
              (int(paused), name, int(paused))):
        record(tx, "Pause" if paused else "Resume", schedule=name)


def remove(tx: Tx, name: str, now: float, submit_run: SubmitRun,
           record: Record = _no_record) -> None:
    """Remove ``name`` and its slots' record (its runs stay, as versions of their ids), after
    deciding what it owes; a held slot is dropped with it."""
    _known(tx, "unschedule", name)
    decide_owed(tx, now, submit_run, only=name, record=record)
    tx.run("DELETE FROM slot WHERE schedule = ?", (name,))
    tx.run("DELETE FROM schedule WHERE name = ?", (name,))
    record(tx, "Undefine", schedule=name)
    _note_due(tx)


def list_queries(limit: int) -> list[tuple[str, tuple[Any, ...]]]:
    """The read of :func:`listing`, for one read transaction: every schedule, and the latest
    ``limit`` decided slots of each."""
    return [(f"SELECT {_COLUMNS} FROM schedule ORDER BY name", ()),
            ("SELECT schedule, at, decision, task, decided_at FROM (SELECT schedule, at, "
             "decision, task, decided_at, ROW_NUMBER() OVER (PARTITION BY schedule ORDER BY "
             "at DESC) AS n FROM slot) AS latest WHERE n <= ? ORDER BY schedule, at DESC",
             (limit,))]


def listing(rows: list[tuple[Any, ...]], slots: list[tuple[Any, ...]]) -> list[ScheduleInfo]:
    """The schedules and slots :func:`list_queries` read, as :class:`ScheduleInfo`."""
    by_name: dict[str, list[SlotInfo]] = {}
    for name, at, decision, task, decided_at in slots:
        by_name.setdefault(name, []).append(SlotInfo(at, decision, task, decided_at))
    return [ScheduleInfo(name=r[0], fn=r[1], args=json.loads(r[2]), every=r[3], cron=r[4],
                         timezone=r[5], start=r[6], overlap=r[7], catchup=r[8],
                         priority=int(r[9]), paused=bool(r[10]), next_slot=r[11],
                         held_slot=r[12], unlisted=int(r[13]),
                         slots=tuple(by_name.get(r[0], ())))
            for r in rows]


def check_limit(limit: object) -> int:
    """``limit`` of ``schedules(limit=...)``: an int >= 0, else ``InvalidArgumentError``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgumentError(f"schedules(limit={limit!r}): an int >= 0")
    return limit
