"""One vocabulary: spec, model and implementation name the same actions and invariants."""

from __future__ import annotations

import re
from pathlib import Path

from refsched import scheduler
from refsched.model import ACTION_PROPERTIES, ACTIONS, INVARIANTS
from refsched.verify.stategraph import LABEL_ACTIONS
from refsched.verify.tlc import spec_dir

SPEC = Path(spec_dir())


def spec_actions() -> set[str]:
    """The actions named in the disjuncts of the spec's Next, under their model names.

    ``AnyStaleCallback`` quantifies over StaleCallback's generations; the state-graph reader
    maps it to StaleCallback, and so does this test, through the same table.
    """
    text = (SPEC / "Scheduler.tla").read_text()
    block = text.split("\nNext ==", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"(?:\\/|:)\s*([A-Z]\w*)\b(?!\s*\\in)", block)
    return {LABEL_ACTIONS.get(name, name) for name in names}


def cfg_section(config: str, keyword: str) -> set[str]:
    """The names listed under ``keyword`` (INVARIANTS, PROPERTIES) in a TLC config."""
    names: set[str] = set()
    section = None
    for raw in (SPEC / config).read_text().splitlines():
        line = raw.split("\\*", 1)[0].strip()
        if not line:
            continue
        head, *rest = line.split()
        if head.isupper():
            section = head
            names.update(rest if section == keyword else ())
        elif section == keyword:
            names.add(head)
    return names


def test_spec_and_model_have_the_same_actions() -> None:
    assert spec_actions() == set(ACTIONS)


def test_checked_invariants_are_the_models_and_the_implementations() -> None:
    checked = cfg_section("MCScheduler.cfg", "INVARIANTS")
    assert checked == set(INVARIANTS)
    assert checked == set(scheduler.INVARIANTS)


def test_checked_action_properties_are_the_models() -> None:
    assert cfg_section("MCScheduler.cfg", "PROPERTIES") == set(ACTION_PROPERTIES)


def test_liveness_config_checks_every_version_ends() -> None:
    assert cfg_section("MCSchedulerLiveness.cfg", "PROPERTIES") == {"EveryVersionEnds"}


def test_every_named_invariant_is_defined_in_the_spec() -> None:
    text = (SPEC / "Scheduler.tla").read_text()
    for name in [*INVARIANTS, *ACTION_PROPERTIES, "EveryVersionEnds"]:
        assert re.search(rf"^{name} ==", text, re.MULTILINE), name
