"""Production's ``refsched.schedule.advance`` takes the model's steps on every state of its graph.

``advance`` decides every slot a schedule owes in one call; the model (``spec/Schedule.tla``'s
``Decide`` and ``Release``) one slot a step. From each state of the model's graph of an
``MCSchedule*.cfg`` instance (the graph TLC's equals: tests/test_schedule_tlc.py), the model's
``Release`` and ``Decide`` steps taken while one is enabled must list the decisions ``advance``
lists, in its order, and leave the same held slot and next slot. The durable scheduler and the
``TimerRunner`` decide through ``advance``, so both are held to the spec here.
"""

from __future__ import annotations

import pytest

import refsched.schedule as production
from refsched.model import schedule as model
from refsched.verify.schedule import CONFIGS, read_instance

INSTANCES = [read_instance(c) for c in (*CONFIGS, "MCScheduleLiveness.cfg")] + [
    model.Instance("skip", None, 3, 9, 10),  # slots between ticks, no catch-up
    model.Instance("buffer_one", 0, 2, 6, 8),  # a slot is missed the moment it is late
]


def model_steps(s: model.ScheduleSnapshot,
                inst: model.Instance) -> tuple[model.ScheduleSnapshot, list[tuple[int, str]]]:
    """Release and Decide from ``s`` while one is enabled: the last state and the decisions
    listed (a held slot is not listed)."""
    listed: list[tuple[int, str]] = []
    while True:
        for name in ("Release", "Decide"):
            action = model.ACTIONS[name]
            if action.enabled(s, inst):
                t = action.step(s, inst)
                listed += sorted(t.decided - s.decided)
                s = t
                break
        else:
            return s, listed


def disagreement(s: model.ScheduleSnapshot, inst: model.Instance) -> str | None:
    """How ``advance`` from ``s`` differs from the model's steps (None: it does not)."""
    state = production.ScheduleState(
        production.Timing(every=inst.every, start=0.0),
        production.Policy(inst.overlap, inst.catchup),
        next=float(s.next), held=float(min(s.held)) if s.held else None, paused=s.paused)
    after, decisions = production.advance(state, float(s.now), len(s.unfinished))
    # Production's timing has no last slot: the model's ends at MaxSlot.
    listed = [(int(slot), d) for slot, d in decisions if slot <= inst.max_slot]
    end, expected = model_steps(s, inst)
    if listed != expected:
        return f"advance lists {listed}, the model {expected}"
    held = None if after.held is None or after.held > inst.max_slot else int(after.held)
    if held != (min(end.held) if end.held else None):
        return f"advance holds {held}, the model {sorted(end.held)}"
    if s.now <= inst.max_slot and after.next != end.next:
        return f"advance's next slot is {after.next}, the model's {end.next}"
    return None


def disagreements(inst: model.Instance) -> list[str]:
    graph = model.explore(inst)
    out = []
    for s in graph.depth:
        why = disagreement(s, inst)
        if why is not None:
            out.append(f"{why}, from {s}")
    return out


@pytest.mark.parametrize("inst", INSTANCES, ids=str)
def test_advance_takes_the_models_decide_and_release_on_every_state(
        inst: model.Instance) -> None:
    graph = model.explore(inst)
    assert len(graph.depth) > 400  # the graph is not trivially small
    assert disagreements(inst) == []


def test_an_advance_that_misses_slots_exactly_catchup_old_disagrees(
        monkeypatch: pytest.MonkeyPatch) -> None:
    right = production.decide

    def wrong(slot: float, now: float, policy: production.Policy, **kw: object) -> str:
        if policy.catchup is not None and now - slot == policy.catchup:
            return "missed"
        return right(slot, now, policy, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(production, "decide", wrong)
    assert disagreements(read_instance("MCScheduleBuffer.cfg"))


def test_an_advance_that_releases_after_deciding_disagrees(
        monkeypatch: pytest.MonkeyPatch) -> None:
    right = production.advance

    def late(state: production.ScheduleState, now: float,
             unfinished: int) -> tuple[production.ScheduleState, list[tuple[float, str]]]:
        held = state.held
        after, out = right(production.ScheduleState(
            state.timing, state.policy, state.next, None, state.paused), now, unfinished)
        if held is not None and unfinished == 0:
            out.append((held, "run"))
        elif held is not None:
            after = production.ScheduleState(after.timing, after.policy, after.next, held,
                                             after.paused)
        return after, out  # type: ignore[return-value]

    monkeypatch.setattr(production, "advance", late)
    assert disagreements(read_instance("MCScheduleBuffer.cfg"))
