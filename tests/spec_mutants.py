"""Must-fail models of a spec, and the rule that every check of every config has one.

A mutant copies ``spec/`` to a temporary folder and breaks one module by text substitutions
(each original text must be there exactly once, so an edit of the spec cannot silently turn a
mutant into the unmodified spec). It names the (config, check) pairs it must be caught by:
TLC, run on that config, reports that check violated, by name, and the model's predicates
agree on the counterexample's last step. A config's checks are the names under INVARIANT(S)
and PROPERTY(IES) in its ``.cfg``; :func:`uncovered` lists the ones no mutant is caught by,
which a test keeps empty, so a check that cannot fail on an instance cannot hide there.

TLC 2.15 does not name the temporal property it finds violated, so a temporal check is run on
a copy of its config that lists that property alone (the same constants, specification and
constraints). Safety mutants run with one worker, so the breadth-first search, and so the
violation TLC finds first, is the same on every run.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from refsched.verify import system as systems
from refsched.verify.specstate import SpecStateError
from refsched.verify.tla import parse_state
from refsched.verify.tlc import TLCResult, run_tlc, spec_dir

__all__ = ["Mutant", "SpecChecks", "cases", "cfg_checks", "check_mutant", "trace_states",
           "uncovered"]

_SECTIONS = {"INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"}


@dataclass(frozen=True)
class Mutant:
    """One broken spec: its substitutions, and the (config, check) pairs that must catch it."""

    substitutions: tuple[tuple[str, str], ...]  # (old text, new text) in the spec module
    caught: tuple[tuple[str, str], ...]  # (config, the check TLC reports violated there)


@dataclass(frozen=True)
class SpecChecks:
    """A spec module, its model-checking configs, and its mutants."""

    module: str  # the spec the mutants edit: "Scheduler.tla"
    mc_module: str  # the module every config of it is for: "MCScheduler.tla"
    # the name refsched.verify.system knows it by, to read TLC's states; or, for a spec of no
    # system of its own, an object with its read_instance and snapshot_of
    system: str | Any
    invariants: frozenset[str]  # the state invariants any config may name
    action_properties: frozenset[str]  # the action properties ([][A]_v) any config may name
    temporal: frozenset[str]  # the liveness properties any config may name
    # The model's verdicts on a state and on a step, given the config's constants.
    violated: Callable[[Any, Any], list[str]]
    violated_by_step: Callable[[Any, Any], list[str]]
    mutants: Mapping[str, Mutant] = field(default_factory=dict)
    deadlock_ok: bool = True  # run with -deadlock: some state legitimately has no successor

    def configs(self) -> list[str]:
        """Every config of the module under spec/: ``MCScheduler.cfg``, ``MCSchedulerX.cfg``
        (not ``MCSchedule.cfg``'s ``MCScheduler.cfg``: another module's name goes on in lower
        case)."""
        stem = Path(self.mc_module).stem
        return sorted(p.name for p in spec_dir().glob(f"{stem}*.cfg")
                      if p.stem == stem or p.stem[len(stem)].isupper())

    def kind(self, check: str) -> str:
        """What TLC calls a violation of ``check``."""
        if check in self.invariants:
            return "invariant"
        if check in self.action_properties:
            return "action property"
        if check in self.temporal:
            return "temporal"
        raise KeyError(f"{check} is not a check of {self.module}")


def cfg_checks(config: str | Path) -> list[str]:
    """The names a TLC config lists under INVARIANT(S) and PROPERTY(IES), in its order."""
    path = Path(config) if Path(config).is_absolute() else spec_dir() / config
    names: list[str] = []
    section = None
    for raw in path.read_text().splitlines():
        line = raw.split("\\*", 1)[0].strip()
        if not line:
            continue
        head, *rest = line.split()
        if head.isupper():
            section = head
            names += rest if section in _SECTIONS else []
        elif section in _SECTIONS:
            names += line.split()
    return names


def uncovered(spec: SpecChecks) -> list[tuple[str, str]]:
    """(config, check) pairs a config lists and no mutant is caught by there."""
    caught = {pair for m in spec.mutants.values() for pair in m.caught}
    return [(config, check) for config in spec.configs()
            for check in sorted(cfg_checks(config)) if (config, check) not in caught]


def cases(spec: SpecChecks) -> list[Any]:
    """pytest params (mutant, config, check), one for each pair a mutant must be caught by."""
    return [pytest.param(name, config, check, id=f"{name}-{Path(config).stem}-{check}")
            for name, m in sorted(spec.mutants.items()) for config, check in m.caught]


def trace_states(trace: str) -> list[dict[str, Any]]:
    """The states of a TLC error trace, as variable -> value."""
    blocks = re.split(r"^State \d+: .*$", trace, flags=re.M)[1:]
    return [parse_state(block) for block in blocks if block.strip()]


def _mutate(spec: SpecChecks, tmp_path: Path, mutant: Mutant) -> Path:
    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    module = copy / spec.module
    text = module.read_text()
    for old, new in mutant.substitutions:
        assert text.count(old) == 1, f"mutant is stale: {old!r} is not in {spec.module} once"
        text = text.replace(old, new)
    module.write_text(text)
    return copy


def _alone(copy: Path, config: str, check: str) -> str:
    """A copy of ``config`` in ``copy`` that checks the temporal property ``check`` alone."""
    text = (copy / config).read_text()
    kept: list[str] = []
    section = None
    for raw in text.splitlines():
        line = raw.split("\\*", 1)[0].strip()
        head = line.split()[0] if line else ""
        if head.isupper():
            section = head
            if section in _SECTIONS:
                continue
        if section in _SECTIONS and line:
            continue
        kept.append(raw)
    name = f"{Path(config).stem}Only{check}.cfg"
    (copy / name).write_text("\n".join(kept) + f"\n\nPROPERTIES\n    {check}\n")
    return name


def run(spec: SpecChecks, name: str, config: str, check: str, tmp_path: Path) -> TLCResult:
    """TLC's report on the mutant ``name`` in ``config`` (for ``check`` when it is temporal)."""
    copy = _mutate(spec, tmp_path, spec.mutants[name])
    if spec.kind(check) == "temporal":
        config = _alone(copy, config, check)
    return run_tlc(config, spec.mc_module, directory=copy, workers=1,
                   extra_args=["-deadlock"] if spec.deadlock_ok else [])


def check_mutant(spec: SpecChecks, name: str, config: str, check: str, tmp_path: Path) -> None:
    """Assert TLC reports ``check`` violated by the mutant ``name`` in ``config``, and that on
    the counterexample's last step the model's predicates find that check broken first."""
    kind = spec.kind(check)
    result = run(spec, name, config, check, tmp_path)
    assert not result.ok, f"{name} passes {config}"
    # TLC does not name a temporal property; the config it ran lists this one alone.
    reported = check if kind == "temporal" else result.violated
    assert (result.violation_kind, reported) == (kind, check), result.output[-4000:]
    assert result.trace is not None and result.trace.startswith("State 1: <Initial predicate>")
    if kind == "temporal":
        return
    chosen = systems.get(spec.system) if isinstance(spec.system, str) else spec.system
    constants = chosen.read_instance(spec_dir() / config)
    *_, before, after = trace_states(result.trace)
    if check == "TypeOK":  # a value of no type the model can hold
        with pytest.raises(SpecStateError):
            chosen.snapshot_of(after)
        return
    source: Hashable = chosen.snapshot_of(before)
    target: Hashable = chosen.snapshot_of(after)
    assert spec.violated(source, constants) == [], (name, config)
    # TLC reports the first check the step breaks, invariants before action properties, each
    # in the config's order; the model must find that same one first.
    listed = cfg_checks(config)
    broken = sorted({*spec.violated(target, constants), *spec.violated_by_step(source, target)}
                    & set(listed), key=lambda c: (spec.kind(c) != "invariant", listed.index(c)))
    assert broken[:1] == [check], (name, config, broken)
