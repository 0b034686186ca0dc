"""Recurring schedules: when their slots fall, and what becomes of each slot.

What docs/time.md ("Recurring schedules") states, once for the two systems that keep schedules:
the durable scheduler, in a store transaction, and the in-memory ``TimerRunner``, on its own
clock. ``spec/Schedule.tla`` is the spec; ``refsched.model.schedule`` its model, whose
``Decide`` and ``Release`` steps :func:`advance` takes (a test walks the model's state graph and
compares). Pure: no clock, no store, no thread. Times are seconds on a clock (UTC seconds for a
cron timing), as floats.

- :class:`Timing`: the slots of a schedule (``every`` seconds from ``start``, or the times of a
  five-field cron expression read by ``cronsim`` in an IANA time zone).
- :class:`Policy`: what to do with a slot when a run is unfinished (``overlap``), and how old a
  slot may be and still run (``catchup``).
- :func:`decide`, :func:`release`: one slot's decision, as the table of docs/time.md says.
- :class:`ScheduleState` and :func:`advance`: every slot a schedule owes at a time, decided in
  order.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from refsched.errors import InvalidArgumentError
from refsched.values import is_int, shown

__all__ = [
    "DECISIONS",
    "LISTED",
    "OVERLAPS",
    "Decision",
    "Policy",
    "ScheduleState",
    "ScheduleView",
    "Timing",
    "advance",
    "decide",
    "owed",
    "release",
    "slot_task_id",
]

Decision = Literal["run", "hold", "skipped", "missed"]
"""A slot's decision; ``"hold"`` keeps it undecided (held) until no run is unfinished."""

DECISIONS: Final = ("run", "hold", "skipped", "missed")
OVERLAPS: Final = ("skip", "buffer_one", "allow")

LISTED: Final = 1000
"""The most decisions :func:`advance` lists in one call (see there)."""


def _real(value: object) -> float | None:
    """``value`` as a finite float, or None if it is no finite real number (a bool is none)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        converted = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return converted if math.isfinite(converted) else None


def _zone(call: str, timezone: object) -> ZoneInfo:
    if not isinstance(timezone, str):
        raise InvalidArgumentError(f"{call}: timezone={shown(timezone)}: must be an IANA time "
                                   "zone name (a str)")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgumentError(f"{call}: timezone={shown(timezone)}: no such IANA time "
                                   "zone") from None


def _moment(call: str, t: float, zone: ZoneInfo) -> datetime:
    try:
        return datetime.fromtimestamp(t, zone)
    except (OverflowError, ValueError, OSError):
        raise InvalidArgumentError(f"{call}: {t!r} is no time a calendar holds") from None


@dataclass(frozen=True, slots=True)
class Timing:
    """When a schedule's slots fall: ``start, start + every, ...`` or the cron times >= start.

    ``Timing(every=None, cron=None, timezone="UTC", start=0.0)``: exactly one of ``every`` (a
    finite number of seconds > 0) and ``cron`` (five fields, as ``cronsim`` reads them, in
    ``timezone``, an IANA name ``zoneinfo`` knows). ``start`` is a finite time (UTC seconds for
    a cron timing). Anything else is an ``InvalidArgumentError``.

    On a daylight-saving change a cron slot is what cronsim gives (docs/time.md): with a fixed
    minute and hour (``30 1 * * *``) a wall time the change skips falls at the first wall time
    after the gap, and a wall time that occurs twice falls once, on its first pass; with ``*``
    at the head of the minute or the hour field the times follow real time (a skipped wall time
    has no slot, a repeated one a slot on each pass).
    """

    every: float | None = None  # seconds between two slots, > 0; None for a cron timing
    cron: str | None = None  # the five-field expression; None for an every timing
    timezone: str = "UTC"  # the IANA zone a cron expression is read in
    start: float = 0.0  # no slot before it; an every timing's first slot

    def __post_init__(self) -> None:
        every, start = _checked("Timing", self.every, self.cron, self.timezone, self.start)
        object.__setattr__(self, "every", every)
        object.__setattr__(self, "start", start)

    @classmethod
    def of(cls, call: str, *, every: object = None, cron: object = None,
           timezone: object = "UTC", start: object = 0.0) -> Timing:
        """A Timing; an ``InvalidArgumentError`` names ``call`` and the first bad argument."""
        _checked(call, every, cron, timezone, start)
        return cls(every, cron, timezone, start)  # type: ignore[arg-type]

    def first_slot(self) -> float | None:
        """The first slot: ``start``, or the first cron time >= start (None: there is none)."""
        if self.every is not None:
            return self.start
        return self.at_or_after(self.start)

    def slot_after(self, t: float) -> float | None:
        """The first slot strictly after ``t`` (None: a cron timing with no time left)."""
        if self.every is not None:
            if t < self.start:
                return self.start
            k = math.floor((t - self.start) / self.every) + 1
            while k > 1 and self.start + (k - 1) * self.every > t:
                k -= 1  # the division rounded up
            while self.start + k * self.every <= t:
                k += 1  # the division rounded down
            return self.start + k * self.every
        if t < self.start:
            return self.at_or_after(self.start)
        return next(self._cron_times(t), None)

    def at_or_after(self, t: float) -> float | None:
        """The first slot >= ``t``."""
        t = max(t, self.start)
        if self.every is not None:
            k = math.ceil((t - self.start) / self.every)
            while self.start + k * self.every < t:
                k += 1  # the division rounded down
            while k > 0 and self.start + (k - 1) * self.every >= t:
                k -= 1  # the division rounded up
            return self.start + k * self.every
        # cron times are whole seconds: at most one of them lies in (t - 1, t)
        for s in self._cron_times(t - 1.0):
            if s >= t:
                return s
        return None

    def count(self, first: float, bound: float) -> int:
        """How many slots lie in ``[first, bound)``; ``first`` is a slot."""
        if bound <= first:
            return 0
        if self.every is not None:
            end = self.at_or_after(bound)
            assert end is not None
            return round((end - first) / self.every)
        n = 0
        for s in self._cron_times(first - 1.0):  # one at a time: about 5 us each (cronsim)
            if s >= bound:
                break
            n += 1
        return n

    def _cron_times(self, t: float) -> Iterator[float]:
        """The cron times strictly after ``t``, as UTC seconds, in increasing order.

        cronsim reads a time with a fixed minute and hour as a wall time, so after a moment of
        the second pass of a repeated hour it may give that hour's first pass, which is before
        it: such times are passed over.
        """
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        try:
            times = CronSim(self.cron, datetime.fromtimestamp(t, zone))
        except (OverflowError, ValueError, OSError):  # past the calendar's years: no time left
            return
        last = t
        while True:
            try:
                moment = next(times)
            except StopIteration:  # cronsim found no time in 50 years
                return
            s = moment.timestamp()
            if s > last:
                last = s
                yield s


def _checked(call: str, every: object, cron: object, timezone: object,
             start: object) -> tuple[float | None, float]:
    """Validate a Timing's fields; return ``every`` and ``start`` as floats."""
    if (every is None) == (cron is None):
        raise InvalidArgumentError(f"{call}: exactly one of every and cron must be given, "
                                   f"not every={shown(every)} and cron={shown(cron)}")
    start_s = _real(start)
    if start_s is None:
        raise InvalidArgumentError(f"{call}: start={shown(start)}: must be a finite number of "
                                   "seconds")
    zone = _zone(call, timezone)
    if every is not None:
        every_s = _real(every)
        if every_s is None or every_s <= 0:
            raise InvalidArgumentError(f"{call}: every={shown(every)}: must be a finite number "
                                       "of seconds > 0")
        return every_s, start_s
    if not isinstance(cron, str) or len(cron.split()) != 5:
        raise InvalidArgumentError(f"{call}: cron={shown(cron)}: must be a five-field cron "
                                   "expression (a str)")
    moment = _moment(call, start_s, zone)
    try:
        CronSim(cron, moment)
    except (CronSimError, ValueError, KeyError, IndexError) as exc:
        raise InvalidArgumentError(f"{call}: cron={shown(cron)}: {exc}") from None
    return None, start_s


@dataclass(frozen=True, slots=True)
class Policy:
    """What becomes of a slot whose time has come (docs/time.md, "Deciding a slot").

    ``overlap``: ``"skip"``, ``"buffer_one"`` or ``"allow"``; ``catchup``: None (any age runs)
    or a finite number of seconds >= 0 (older slots are missed). Else ``InvalidArgumentError``.
    """

    overlap: str = "skip"  # in OVERLAPS
    catchup: float | None = None  # None, or seconds >= 0: a slot older than this is missed

    def __post_init__(self) -> None:
        object.__setattr__(self, "catchup", _policy_checked("Policy", self.overlap, self.catchup))

    @classmethod
    def of(cls, call: str, *, overlap: object = "skip", catchup: object = None) -> Policy:
        """A Policy; an ``InvalidArgumentError`` names ``call`` and the first bad argument."""
        _policy_checked(call, overlap, catchup)
        return cls(overlap, catchup)  # type: ignore[arg-type]


def _policy_checked(call: str, overlap: object, catchup: object) -> float | None:
    """Validate a Policy's fields; return ``catchup`` as a float (or None)."""
    if not isinstance(overlap, str) or overlap not in OVERLAPS:
        raise InvalidArgumentError(f"{call}: overlap={shown(overlap)}: must be one of "
                                   f"{', '.join(map(repr, OVERLAPS))}")
    if catchup is None:
        return None
    seconds = _real(catchup)
    if seconds is None or seconds < 0:
        raise InvalidArgumentError(f"{call}: catchup={shown(catchup)}: must be None or a "
                                   "finite number of seconds >= 0")
    return seconds


def decide(slot: float, now: float, policy: Policy, *, unfinished: int, held: bool,
           paused: bool) -> Decision:
    """The decision of a slot whose time has come (``slot <= now``): docs/time.md's table.

    ``unfinished``: how many runs of the schedule are unfinished; ``held``: a slot is held
    already; ``paused``: the schedule is paused. The rows are tried in the table's order.
    Spec: Decide's ``Decision``.
    """
    if policy.catchup is not None and now - slot > policy.catchup:
        return "missed"
    if paused:
        return "skipped"
    if unfinished > 0 and policy.overlap == "skip":
        return "skipped"
    if unfinished > 0 and policy.overlap == "buffer_one":
        return "skipped" if held else "hold"
    return "run"


def release(*, unfinished: int) -> Decision:
    """What becomes of the held slot: ``"run"`` once no run is unfinished, whatever its age or
    a pause; else it stays held (``"hold"``). Spec: Release."""
    return "run" if unfinished == 0 else "hold"


def slot_task_id(name: str, slot: float) -> str:
    """The task id of a slot's run: ``name@<the slot in UTC, ISO 8601>``.

    ``slot_task_id("report", 0.0) == "report@1970-01-01T00:00:00Z"``; a fraction of a second
    shows as microseconds. ``InvalidArgumentError`` for a name that is not a non-empty str or a
    slot no calendar holds.
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"slot_task_id: name={shown(name)}: must be a non-empty str")
    t = _real(slot)
    if t is None:
        raise InvalidArgumentError(f"slot_task_id: slot={shown(slot)}: must be a finite time")
    moment = _moment("slot_task_id", t, ZoneInfo("UTC"))
    return f"{name}@{moment.replace(tzinfo=None).isoformat()}Z"


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """What a schedule keeps between two decisions (a store row; the TimerRunner's record).

    Spec: the variables ``next``, ``held`` and ``paused`` of ``Schedule.tla`` (the runs'
    states are the caller's, who passes their number to :func:`advance`).
    """

    timing: Timing
    policy: Policy
    next: float | None  # the next slot neither decided nor held; None: the timing has no more
    held: float | None = None  # the held slot (buffer_one only); held < next
    paused: bool = False  # slots are skipped while paused (a held slot is still released)
    unlisted: int = 0  # slots decided "missed" or "skipped" by advance() without being listed

    @classmethod
    def new(cls, timing: Timing, policy: Policy) -> ScheduleState:
        """A schedule that has decided nothing: its next slot is the timing's first."""
        return cls(timing, policy, timing.first_slot())


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as ``schedules()`` shows it."""

    name: str
    next: float | None  # the next slot neither decided nor held; None: no more slots
    held: float | None  # the held slot (buffer_one), or None
    paused: bool
    unfinished: tuple[str, ...]  # the task ids of its runs not yet finished, oldest first
    decisions: tuple[tuple[float, Decision], ...]  # its latest decisions, oldest first
    unlisted: int  # slots decided missed or skipped in bulk, in no list (see advance())


def owed(state: ScheduleState, now: float, unfinished: int) -> bool:
    """Whether :func:`advance` at ``now`` has a slot to decide or a held slot to release."""
    return ((state.held is not None and unfinished == 0)
            or (state.next is not None and state.next <= now))


def advance(state: ScheduleState, now: float, unfinished: int, *,
            limit: int = LISTED) -> tuple[ScheduleState, list[tuple[float, Decision]]]:
    """Decide every slot the schedule owes at ``now``, oldest first.

    ``unfinished``: how many of the schedule's runs are unfinished (each ``"run"`` decided here
    counts one more). First the held slot is released if no run is unfinished (Spec: Release);
    then each slot ``<= now`` is decided by :func:`decide` (Spec: Decide), a ``"hold"`` keeping
    it as the held slot. Returns the new state and the decisions, in the order made
    (``(slot, "run")`` for a released slot).

    Bounded work, whatever the downtime: consecutive ``"missed"`` (or ``"skipped"``) decisions
    are all alike (nothing changes between two of them), so past the first ``limit`` of such a
    stretch the rest of it is decided in one jump: not listed, counted in ``unlisted`` (an
    every timing by arithmetic, a cron timing by walking its times, about 5 us each). At most
    ``limit`` slots run or are held in one call; the slots owed past them are left owed, for
    the next call (:func:`owed` says so). So at most ``3 * limit + 1`` decisions are listed.

    ``InvalidArgumentError`` for an ``unfinished`` that is not an int >= 0, a ``limit`` that is
    not an int >= 1 or a ``now`` that is no finite time, with nothing decided.
    """
    if not is_int(unfinished) or unfinished < 0:
        raise InvalidArgumentError(f"advance: unfinished={shown(unfinished)}: must be an int "
                                   ">= 0")
    if not is_int(limit) or limit < 1:
        raise InvalidArgumentError(f"advance: limit={shown(limit)}: must be an int >= 1")
    if _real(now) is None:
        raise InvalidArgumentError(f"advance: now={shown(now)}: must be a finite time")
    decisions: list[tuple[float, Decision]] = []
    timing, policy = state.timing, state.policy
    if state.held is not None and release(unfinished=unfinished) == "run":
        decisions.append((state.held, "run"))
        state = replace(state, held=None)
        unfinished += 1
    runs = 0  # "run" and "hold" decisions made so far
    stretch = 0  # how many listed decisions just before this one are the same as it
    last: Decision | None = None
    while state.next is not None and state.next <= now:
        slot = state.next
        d = decide(slot, now, policy, unfinished=unfinished, held=state.held is not None,
                   paused=state.paused)
        stretch = stretch + 1 if d == last else 1
        last = d
        if d in ("run", "hold"):
            if runs >= limit:
                break  # left owed for the next call
            runs += 1
        elif stretch > limit:
            if d == "missed":
                assert policy.catchup is not None
                # Every slot before it is missed. decide() judges ``now - slot > catchup``,
                # whose rounding may differ from ``slot < now - catchup`` by an ulp: the jump
                # stops a few ulps short, and the slots in between are decided one by one.
                end = now - policy.catchup - 4 * math.ulp(max(abs(now), policy.catchup, 1.0))
            else:
                end = math.nextafter(now, math.inf)  # every owed slot is skipped
            upto = timing.at_or_after(end)
            if upto is None or upto > slot:  # else rounding put slot past end: list it
                state = replace(state, next=upto,
                                unlisted=state.unlisted + timing.count(slot, end))
                continue
        if d == "hold":
            state = replace(state, held=slot)
        else:
            decisions.append((slot, d))
            if d == "run":
                unfinished += 1
        state = replace(state, next=timing.slot_after(slot))
    return state, decisions
