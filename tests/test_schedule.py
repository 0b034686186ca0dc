"""Tests of ``refsched.schedule``: a recurring schedule's slots and decisions (docs/time.md).

Each rule of "Recurring schedules" has a case here that a wrong rule fails: the table's rows
and their order, the slots of an every and of a cron timing (daylight-saving days included,
as cronsim gives them), the held slot, catch-up after downtime and its bound.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from refsched.errors import InvalidArgumentError
from refsched.schedule import (
    Policy,
    ScheduleState,
    Timing,
    advance,
    decide,
    owed,
    release,
    slot_task_id,
)


def utc(*fields: int) -> float:
    return datetime(*fields, tzinfo=UTC).timestamp()  # type: ignore[misc]


def slots(timing: Timing, n: int) -> list[float]:
    out: list[float] = []
    s = timing.first_slot()
    while s is not None and len(out) < n:
        out.append(s)
        s = timing.slot_after(s)
    return out


# -- Timing ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "names"), [
    ({}, "exactly one of every and cron"),
    ({"every": 1, "cron": "* * * * *"}, "exactly one of every and cron"),
    ({"every": 0}, "every=0"),
    ({"every": -1.0}, "every=-1.0"),
    ({"every": math.nan}, "every=nan"),
    ({"every": math.inf}, "every=inf"),
    ({"every": True}, "every=True"),
    ({"every": "5"}, "every='5'"),
    ({"cron": "* * * *"}, "five-field"),
    ({"cron": "0 * * * * *"}, "five-field"),  # cronsim reads six fields (seconds): refused
    ({"cron": "61 * * * *"}, "cron='61 * * * *'"),
    ({"cron": "0 0 31 2 *"}, "cron='0 0 31 2 *'"),
    ({"cron": 5}, "cron=5"),
    ({"every": 1, "timezone": "Mars/Olympus_Mons"}, "no such IANA time zone"),
    ({"every": 1, "timezone": ""}, "no such IANA time zone"),
    ({"every": 1, "timezone": "../etc/passwd"}, "no such IANA time zone"),
    ({"every": 1, "timezone": None}, "timezone=None"),
    ({"every": 1, "start": math.nan}, "start=nan"),
    ({"every": 1, "start": "now"}, "start='now'"),
    ({"cron": "* * * * *", "start": 1e300}, "no time a calendar holds"),
])
def test_a_bad_timing_is_a_typed_error_naming_the_call_and_value(kwargs: dict[str, object],
                                                                names: str) -> None:
    with pytest.raises(InvalidArgumentError, match="schedule\\('x'\\)") as caught:
        Timing.of("schedule('x')", **kwargs)
    assert names in str(caught.value)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(InvalidArgumentError):
        Timing(**kwargs)  # type: ignore[arg-type]


def test_every_slots_start_at_start_and_step_by_every() -> None:
    t = Timing(every=10, start=5)
    assert slots(t, 4) == [5.0, 15.0, 25.0, 35.0]
    assert t.slot_after(-100) == 5.0
    assert t.slot_after(15) == 25.0  # strictly after: a slot is not after itself
    assert t.slot_after(14.999) == 15.0
    assert t.at_or_after(15) == 15.0
    assert t.at_or_after(15.001) == 25.0
    assert t.count(5.0, 35.0) == 3 and t.count(5.0, 35.5) == 4


def test_every_slots_are_strictly_increasing_whatever_the_rounding() -> None:
    t = Timing(every=0.1, start=0.0)
    s = t.first_slot()
    assert s is not None
    for _ in range(10_000):
        after = t.slot_after(s)
        assert after is not None and after > s
        assert t.slot_after(math.nextafter(after, -math.inf)) == after
        s = after
    assert abs(s - 1000.0) < 1e-6


def test_cron_slots_are_the_times_at_or_after_start() -> None:
    t = Timing(cron="0 * * * *", start=utc(2026, 1, 1, 10, 30))
    assert slots(t, 2) == [utc(2026, 1, 1, 11), utc(2026, 1, 1, 12)]
    on = Timing(cron="0 * * * *", start=utc(2026, 1, 1, 11))
    assert on.first_slot() == utc(2026, 1, 1, 11)  # >= start
    assert on.slot_after(utc(2026, 1, 1, 11)) == utc(2026, 1, 1, 12)  # > t
    half = Timing(cron="0 * * * *", start=utc(2026, 1, 1, 11) + 0.5)
    assert half.first_slot() == utc(2026, 1, 1, 12)


def test_cron_is_read_in_its_time_zone() -> None:
    t = Timing(cron="0 9 * * *", timezone="America/New_York", start=utc(2026, 1, 1))
    assert t.first_slot() == utc(2026, 1, 1, 14)  # 09:00 EST


# Europe/London: on 2026-03-29 the wall clock goes 01:00 -> 02:00 (01:00 UTC); on 2026-10-25
# it goes 02:00 BST -> 01:00 GMT (01:00 UTC), so 01:00-02:00 occurs twice.

def test_a_fixed_wall_time_skipped_by_the_change_falls_at_the_change() -> None:
    t = Timing(cron="30 1 * * *", timezone="Europe/London", start=utc(2026, 3, 28, 12))
    assert slots(t, 2) == [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]


def test_a_fixed_wall_time_repeated_by_the_change_falls_once_on_its_first_pass() -> None:
    t = Timing(cron="30 1 * * *", timezone="Europe/London", start=utc(2026, 10, 24, 12))
    assert slots(t, 2) == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    # From a moment of the second pass, the first pass (before it) is no slot after it.
    assert t.slot_after(utc(2026, 10, 25, 1, 15)) == utc(2026, 10, 26, 1, 30)


def test_a_cron_with_a_star_hour_or_minute_follows_real_time_through_the_changes() -> None:
    spring = Timing(cron="*/30 * * * *", timezone="Europe/London", start=utc(2026, 3, 29, 0))
    assert slots(spring, 3) == [utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 0, 30),
                                utc(2026, 3, 29, 1, 0)]  # 00:00, 00:30 GMT, then 02:00 BST
    autumn = Timing(cron="30 * * * *", timezone="Europe/London", start=utc(2026, 10, 24, 23))
    assert slots(autumn, 3) == [utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 0, 30),
                                utc(2026, 10, 25, 1, 30)]  # 01:30 BST, then 01:30 GMT


def test_a_cron_timing_has_no_slot_past_the_calendar() -> None:
    t = Timing(cron="0 0 * * *", start=0.0)
    assert t.slot_after(1e300) is None and t.at_or_after(1e300) is None


def test_cron_count_walks_its_times() -> None:
    t = Timing(cron="*/15 * * * *", start=utc(2026, 1, 1))
    assert t.count(utc(2026, 1, 1), utc(2026, 1, 2)) == 96
    assert t.count(utc(2026, 1, 1), utc(2026, 1, 1)) == 0


# -- Policy and the table ------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "names"), [
    ({"overlap": "merge"}, "overlap='merge'"),
    ({"overlap": None}, "overlap=None"),
    ({"catchup": -1}, "catchup=-1"),
    ({"catchup": math.nan}, "catchup=nan"),
    ({"catchup": math.inf}, "catchup=inf"),
    ({"catchup": "5"}, "catchup='5'"),
    ({"catchup": False}, "catchup=False"),
])
def test_a_bad_policy_is_a_typed_error(kwargs: dict[str, object], names: str) -> None:
    with pytest.raises(InvalidArgumentError, match=names):
        Policy.of("recurring('x')", **kwargs)
    with pytest.raises(InvalidArgumentError, match=names):
        Policy(**kwargs)  # type: ignore[arg-type]


def d(overlap: str = "skip", catchup: float | None = None, *, age: float = 0,
      unfinished: int = 0, held: bool = False, paused: bool = False) -> str:
    return decide(100.0, 100.0 + age, Policy(overlap, catchup), unfinished=unfinished,
                  held=held, paused=paused)


def test_a_slot_older_than_catchup_is_missed_whatever_else_holds() -> None:
    assert d(catchup=5, age=5.5) == "missed"
    assert d(catchup=5, age=5) == "run"  # exactly catchup old: not too old
    assert d(catchup=0, age=0) == "run"
    assert d(catchup=5, age=6, paused=True) == "missed"  # the first row comes first
    assert d("buffer_one", 5, age=6, unfinished=1) == "missed"
    assert d("skip", None, age=1e9) == "run"  # no catchup: any age runs


def test_a_paused_schedule_skips_its_slots_under_every_overlap() -> None:
    for overlap in ("skip", "buffer_one", "allow"):
        assert d(overlap, paused=True) == "skipped"


def test_skip_skips_while_a_run_is_unfinished() -> None:
    assert d("skip", unfinished=1) == "skipped"
    assert d("skip", unfinished=0) == "run"


def test_buffer_one_holds_one_slot_and_skips_the_others() -> None:
    assert d("buffer_one", unfinished=1) == "hold"
    assert d("buffer_one", unfinished=1, held=True) == "skipped"
    assert d("buffer_one", unfinished=0) == "run"


def test_allow_runs_whatever_is_unfinished() -> None:
    assert d("allow", unfinished=3, held=True) == "run"


def test_a_held_slot_runs_once_no_run_is_unfinished() -> None:
    assert release(unfinished=0) == "run"
    assert release(unfinished=1) == "hold"


def test_slot_task_id_is_the_name_and_the_slot_in_utc_iso_8601() -> None:
    assert slot_task_id("report", utc(2026, 3, 29, 1)) == "report@2026-03-29T01:00:00Z"
    assert slot_task_id("r", 0.25) == "r@1970-01-01T00:00:00.250000Z"
    for bad in ("", 3):
        with pytest.raises(InvalidArgumentError):
            slot_task_id(bad, 0.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        slot_task_id("r", math.inf)


# -- advance -------------------------------------------------------------------------------------

def state(overlap: str = "skip", catchup: float | None = None, every: float = 10.0,
          **fields: object) -> ScheduleState:
    s = ScheduleState.new(Timing(every=every), Policy(overlap, catchup))
    return ScheduleState(s.timing, s.policy, **{"next": s.next, **fields})  # type: ignore[arg-type]


def test_advance_decides_nothing_before_the_first_slot_is_due() -> None:
    s = state(next=10.0)
    assert advance(s, 9.99, 0) == (s, [])
    assert not owed(s, 9.99, 0)


def test_advance_after_downtime_misses_the_old_slots_and_runs_by_policy() -> None:
    s, out = advance(state("skip", catchup=20), 55.0, 0)
    assert out == [(0.0, "missed"), (10.0, "missed"), (20.0, "missed"), (30.0, "missed"),
                   (40.0, "run"), (50.0, "skipped")]
    assert s.next == 60.0 and s.held is None and s.unlisted == 0


def test_advance_without_catchup_decides_every_owed_slot_by_policy() -> None:
    _, out = advance(state("skip"), 25.0, 0)
    assert out == [(0.0, "run"), (10.0, "skipped"), (20.0, "skipped")]
    _, out = advance(state("allow"), 25.0, 2)
    assert [x for _, x in out] == ["run"] * 3


def test_advance_holds_one_slot_and_releases_it_first_once_runs_finish() -> None:
    s, out = advance(state("buffer_one"), 25.0, 0)
    assert out == [(0.0, "run"), (20.0, "skipped")] and s.held == 10.0
    assert advance(s, 25.0, 1) == (s, [])  # still unfinished: nothing to do
    s, out = advance(s, 35.0, 0)  # the run finished: the held slot runs first, then 30 waits
    assert out == [(10.0, "run")] and s.held == 30.0 and s.next == 40.0


def test_a_held_slot_is_released_while_paused() -> None:
    s = state("buffer_one", next=30.0, held=10.0, paused=True)
    s, out = advance(s, 35.0, 0)
    assert out == [(10.0, "run"), (30.0, "skipped")] and s.held is None


def test_advance_refuses_bad_counts_and_changes_nothing() -> None:
    s = state()
    for bad in (-1, 1.0, True, None):
        with pytest.raises(InvalidArgumentError, match="unfinished"):
            advance(s, 10.0, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="limit"):
        advance(s, 10.0, 0, limit=0)
    with pytest.raises(InvalidArgumentError, match="now"):
        advance(s, math.nan, 0)


def test_advance_decides_a_billion_missed_slots_in_one_jump_and_counts_them() -> None:
    s, out = advance(state("skip", catchup=5.0, every=1.0), 1e9, 0, limit=10)
    assert len(out) == 10 + 6  # ten listed, the jump, then the six within catchup
    assert all(x == "missed" for _, x in out[:10])
    assert out[10:] == [(1e9 - 5, "run")] + [(1e9 - k, "skipped") for k in range(4, -1, -1)]
    assert s.unlisted == (1e9 - 5) - 10  # every slot below 1e9 - 5 is missed: 10 listed
    assert s.next == 1e9 + 1


def test_advance_skips_a_long_stretch_in_one_jump_and_counts_it() -> None:
    s, out = advance(state("skip", every=1.0), 1e8, 0, limit=3)
    assert out == [(0.0, "run"), (1.0, "skipped"), (2.0, "skipped"), (3.0, "skipped")]
    assert s.unlisted == 1e8 + 1 - 4 and s.next == 1e8 + 1


def test_advance_leaves_runs_past_the_limit_owed_for_the_next_call() -> None:
    s, out = advance(state("allow", every=1.0), 9.0, 0, limit=4)
    assert [slot for slot, _ in out] == [0.0, 1.0, 2.0, 3.0] and s.next == 4.0
    assert owed(s, 9.0, 4)
    s, out = advance(s, 9.0, 4, limit=100)
    assert [slot for slot, _ in out] == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert not owed(s, 9.0, 10)


def test_advance_counts_a_cron_jump_slot_by_slot() -> None:
    t = Timing(cron="* * * * *", start=utc(2026, 1, 1))
    s = ScheduleState.new(t, Policy("skip", catchup=0))
    now = utc(2026, 1, 4)  # three days of minutes owed
    s, out = advance(s, now, 0, limit=2)
    assert out == [(utc(2026, 1, 1), "missed"), (utc(2026, 1, 1, 0, 1), "missed"),
                   (now, "run")]
    assert s.unlisted == 3 * 24 * 60 - 2 and s.next == now + 60


def test_advance_in_bounded_steps_decides_what_one_unbounded_step_decides() -> None:
    # The jumps past `limit` only leave decisions unlisted: the same slots end the same way.
    seed = random.randrange(2**32)
    print(f"seed={seed}")  # shown on a failure, with each case
    rng = random.Random(seed)
    for _ in range(150):
        every = rng.choice([0.5, 1.0, 3.0, 0.1])
        # Whole starts and offsets make slots fall exactly on now and on now - catchup.
        timing = Timing(every=every, start=rng.choice([0.0, float(rng.randint(-50, 50)),
                                                       rng.uniform(-100, 100)]))
        policy = Policy(rng.choice(["skip", "buffer_one", "allow"]),
                        rng.choice([None, 0.0, every * rng.randint(1, 200)]))
        owed_slots = rng.randint(0, 2000)
        now = timing.start + every * owed_slots + rng.choice([0.0, rng.uniform(0, every)])
        held = timing.start - every if policy.overlap == "buffer_one" and rng.random() < .3 \
            else None
        start = ScheduleState(timing, policy, timing.start, held, rng.random() < 0.2)
        unfinished = rng.randint(0, 2)
        case = (seed, every, policy, owed_slots, held, start.paused, unfinished)

        whole, full = advance(start, now, unfinished, limit=10**9)
        state, listed, runs = start, [], unfinished
        limit = rng.randint(1, 40)
        while owed(state, now, runs):
            state, out = advance(state, now, runs, limit=limit)
            listed += out
            runs += sum(d == "run" for _, d in out)
        assert (state.next, state.held) == (whole.next, whole.held), case
        assert [x for x in full if x in set(listed)] == listed, case  # in order, a subset
        assert [x for x in listed if x[1] == "run"] == [x for x in full if x[1] == "run"], case
        alike = sum(d in ("missed", "skipped") for _, d in listed)
        assert alike + state.unlisted == sum(d in ("missed", "skipped") for _, d in full), case
