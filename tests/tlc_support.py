"""What the TLC tests of every system (tests/<system>/test_tlc.py, test_model.py) hold the
spec and its model to.

A config lists the checks the model defines. A spec's own model runs clean with the state
count recorded for it: a different count is a changed spec or model, to be looked at and
recorded again (the figure is also in the cfg and the system's page in docs/). Every check of
every config has a mutant it reports (tests/spec_mutants.py). TLC's whole state graph of the
traces instance, read as the model's states, is the model's graph, and each model state goes to
the spec's variables and back, through TLA+ text too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from refsched.model.dag.graph import Edge
from refsched.verify import stategraph
from refsched.verify.tla import parse_state, render
from refsched.verify.tlc import TLCResult, spec_dir
from tests.spec_mutants import SpecChecks, uncovered

# Every recorded state count was measured with this TLC: another version may count otherwise.
TLC_VERSION = "2.15"


def big_instances(recorded: Mapping[str, tuple[int, int]]) -> list[Any]:
    """pytest params (config, (distinct states, depth)), one for each big instance recorded:
    minutes each, so marked slow and big_instance (left out unless asked for)."""
    return [pytest.param(config, counts, id=Path(config).stem,
                         marks=[pytest.mark.slow, pytest.mark.big_instance])
            for config, counts in recorded.items()]


def assert_holds_with_recorded_count(result: TLCResult, counts: tuple[int, int]) -> None:
    """TLC found no error, and (distinct states, depth) are ``counts``."""
    assert result.ok, result.output[-4000:]
    assert result.version is not None and TLC_VERSION in result.version, result.version
    assert (result.distinct_states, result.depth) == counts, (
        "the state space changed: update RECORDED_COUNTS, the cfg and the system's page in docs/")


def assert_every_check_has_a_mutant(spec: SpecChecks, configs: list[str]) -> None:
    """``configs`` are all the configs of the spec, and each check each lists is reported by
    some mutant there."""
    assert spec.configs() == configs
    assert uncovered(spec) == []


@dataclass(frozen=True)
class TracesGraph:
    """TLC's whole state graph of a system's traces instance, as recorded: the model's graph of
    that instance must be the same graph, state for state and edge for edge."""

    system: Any  # the refsched.verify.system.System it is the graph of
    states: int  # distinct states TLC finds
    edges: int  # edges of TLC's -dump, one for each (state, action, parameters) step
    depth: int  # TLC's depth of the complete state graph search
    # actions of the model the instance's constants leave disabled in every state
    disabled: frozenset[str] = frozenset()

    def dump(self) -> stategraph.TLCStateGraph:
        """TLC's graph, its states read as the model's; TLC found the recorded states and depth."""
        graph, result, _ = stategraph.dump_state_graph(self.system.traces_config,
                                                       system=self.system)
        assert (result.distinct_states, result.depth) == (self.states, self.depth)
        return graph

    def matched_edges(self, dumped: stategraph.TLCStateGraph) -> list[Edge[Any]]:
        """The model's graph of the instance is ``dumped`` (``stategraph.match`` raises
        GraphMismatch where not), with the recorded states and edges, and TLC took every action
        of the model in it. Returns the model's edges, for the cases a test looks for."""
        instance = self.system.read_instance(self.system.traces_config)
        matched = stategraph.match(dumped, instance, system=self.system)
        assert matched.state_count == self.states
        assert len(dumped.edges) == matched.edge_count == self.edges
        assert {label for _, _, label in dumped.edges} == set(self.system.actions) - self.disabled
        return matched.all_edges()


def cfg_section(config: str, keyword: str) -> set[str]:
    """The names listed under ``keyword`` (INVARIANTS, PROPERTIES) in a TLC config of spec/."""
    text = re.sub(r"\\\*.*", "", (spec_dir() / config).read_text())
    m = re.search(rf"^{keyword}\n((?:[ \t]+\w+[ \t]*\n?)+)", text, re.M)
    return set() if m is None else set(m.group(1).split())


def assert_round_trips_through_tla_text(states: Iterable[Hashable],
                                        spec_state: Callable[[Any], Mapping[str, Any]],
                                        snapshot_of: Callable[[Mapping[str, Any]], Hashable],
                                        variables: tuple[str, ...] | None = None) -> None:
    """Each model state's spec variables (``spec_state``) read back as that state, and so do
    they once written as TLA+ text, as TLC prints a state, and parsed; ``variables``: the
    spec's variables, in their order, that ``spec_state`` must give."""
    for s in states:
        values = spec_state(s)
        if variables is not None:
            assert tuple(values) == variables
        assert snapshot_of(values) == s
        text = "\n".join(f"/\\ {name} = {render(value)}" for name, value in values.items())
        assert snapshot_of(parse_state(text)) == s
