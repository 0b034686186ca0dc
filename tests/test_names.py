"""One vocabulary: spec, model and implementation name the same actions and invariants, for
each system: the TaskScheduler, the timer scheduler and the work-stealing pool."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from refsched.dag import scheduler
from refsched.model import ACTION_PROPERTIES, ACTIONS, INVARIANTS
from refsched.model import pool as pool_model
from refsched.model import timer as timer_model
from refsched.model.dag.actions import EDGE_ACTIONS
from refsched.model.pool.blocking import BLOCKING_ACTIONS
from refsched.timer import scheduler as timer
from refsched.verify import system
from refsched.verify.stategraph import LABEL_ACTIONS
from refsched.verify.tlc import spec_dir
from tests.tlc_support import cfg_section

SPEC = Path(spec_dir())


def spec_actions(module: str = "Scheduler.tla",
                 labels: Mapping[str, str] = LABEL_ACTIONS) -> set[str]:
    """The actions named in the disjuncts of the spec's Next, under their model names.

    ``AnyStaleCallback`` quantifies over StaleCallback's generations; the state-graph reader
    maps it to StaleCallback, and so does this test, through the same table.
    """
    text = (SPEC / module).read_text()
    block = text.split("\nNext ==", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"(?:\\/|:)\s*([A-Z]\w*)\b(?!\s*\\in)", block)
    return {labels.get(name, name) for name in names}


def test_spec_and_model_have_the_same_actions() -> None:
    # SubmitOptional and AddDeps, gated by the spec's constants, are the model's alone.
    assert spec_actions() == set(ACTIONS) and set(EDGE_ACTIONS) <= set(ACTIONS)


def test_checked_invariants_are_the_models_and_the_implementations() -> None:
    checked = cfg_section("MCScheduler.cfg", "INVARIANTS")
    assert checked == set(INVARIANTS)
    assert checked == set(scheduler.INVARIANTS)


def test_checked_action_properties_are_the_models() -> None:
    assert cfg_section("MCScheduler.cfg", "PROPERTIES") == set(ACTION_PROPERTIES)
    assert cfg_section("MCSchedulerTraces.cfg", "PROPERTIES") == set(ACTION_PROPERTIES)


def test_liveness_config_checks_every_version_ends_and_every_safety_check() -> None:
    assert cfg_section("MCSchedulerLiveness.cfg", "PROPERTIES") == {
        *ACTION_PROPERTIES, "EveryVersionEnds"}
    assert cfg_section("MCSchedulerLiveness.cfg", "INVARIANTS") == set(INVARIANTS)


def test_traces_config_checks_every_invariant_that_can_fail_there() -> None:
    # 2 ids and 2 slots: ConcurrencyBound cannot fail on the traces instance.
    assert cfg_section("MCSchedulerTraces.cfg", "INVARIANTS") == set(INVARIANTS) - {
        "ConcurrencyBound"}


def test_every_named_invariant_is_defined_in_the_spec() -> None:
    text = (SPEC / "Scheduler.tla").read_text()
    for name in [*INVARIANTS, *ACTION_PROPERTIES, "EveryVersionEnds"]:
        assert re.search(rf"^{name} ==", text, re.MULTILINE), name


# -- The timer scheduler and the work-stealing pool ----------------------------------------------

def test_timer_spec_model_and_recorder_have_the_same_actions() -> None:
    actions = spec_actions("TimerQueue.tla", system.get("timer").label_actions)
    assert actions == set(timer_model.ACTIONS)
    # Tick, the clock moving on, is the environment's: the scheduler records every other one.
    assert set(timer.ACTIONS) == actions - {"Tick"}


def test_timer_checked_invariants_are_the_models_and_the_implementations() -> None:
    for config in ("MCTimerQueue.cfg", "MCTimerQueueTraces.cfg"):
        checked = cfg_section(config, "INVARIANTS")
        assert checked == set(timer_model.INVARIANTS) == set(timer.INVARIANTS), config
        assert cfg_section(config, "PROPERTIES") == set(timer_model.ACTION_PROPERTIES), config


def test_pool_spec_and_model_have_the_same_actions_and_checks() -> None:
    assert spec_actions("WorkStealing.tla", system.get("pool").label_actions) == set(
        pool_model.ACTIONS) | set(BLOCKING_ACTIONS)
    assert cfg_section("MCWorkStealingBatch.cfg", "INVARIANTS") == set(pool_model.INVARIANTS)
    assert cfg_section("MCWorkStealingBatch.cfg", "PROPERTIES") == set(
        pool_model.ACTION_PROPERTIES)
    # the instance of single steals leaves out the batch steals' properties
    assert cfg_section("MCWorkStealing.cfg", "INVARIANTS") == set(pool_model.INVARIANTS)
    assert cfg_section("MCWorkStealing.cfg", "PROPERTIES") == set(
        pool_model.ACTION_PROPERTIES) - {"StolenInOrder", "StealTakesAtMostHalf"}


@pytest.mark.parametrize(("module", "names"), [
    ("TimerQueue.tla", [*timer_model.INVARIANTS, *timer_model.ACTION_PROPERTIES]),
    ("WorkStealing.tla", [*pool_model.INVARIANTS, *pool_model.ACTION_PROPERTIES]),
])
def test_every_named_check_is_defined_in_its_spec(module: str, names: list[str]) -> None:
    text = (SPEC / module).read_text()
    for name in names:
        assert re.search(rf"^{name} ==", text, re.MULTILINE), (module, name)


@pytest.mark.parametrize("module", ["refsched.model.dag.actions", "refsched.model.timer.actions"])
def test_the_model_s_state_constants_are_the_states_they_name(module: str) -> None:
    # The models unpack their state enum into its members' names: a reordered enum must not
    # swap two of them silently.
    import enum
    import importlib

    found = {name: value for name, value in vars(importlib.import_module(module)).items()
             if isinstance(value, enum.Enum) and name.isupper()}
    assert len(found) >= 5
    for name, value in found.items():
        assert value.name == name, (name, value)
