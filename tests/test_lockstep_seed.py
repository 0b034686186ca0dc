"""A seed makes the same walk whatever the process loaded before (refsched.verify.lockstep).

Hypothesis now and then draws a literal from the source of modules loaded from outside
site-packages; loading one more such module between two runs of the same seed changes what
plain Hypothesis draws, and must not change what ``run_machine`` draws.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from refsched.verify.lockstep import run_machine


def drawing_machine(draws: list[int]) -> type[RuleBasedStateMachine]:
    class Draws(RuleBasedStateMachine):
        @rule(n=st.integers(0, 10**6))
        def draw(self, n: int) -> None:
            draws.append(n)

    return Draws


def walk_of(run: Callable[[type[RuleBasedStateMachine]], None]) -> list[int]:
    draws: list[int] = []
    run(drawing_machine(draws))
    return draws


def plain(machine: type[RuleBasedStateMachine]) -> None:
    run_state_machine_as_test(seed(7)(machine),
                              settings=settings(max_examples=100, stateful_step_count=20,
                                                database=None, deadline=None))


def refsched_run(machine: type[RuleBasedStateMachine]) -> None:
    run_machine(machine, examples=100, steps=20, seed=7)


def literals(base: int) -> set[int]:
    return {base * k for k in range(1, 9)}


@pytest.fixture
def load_literals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Loads a module of the tests' own whose integer literals are ``literals(base)``. Hypothesis
    keeps every literal it has seen for the life of the process, so each test loads its own."""
    def load(base: int) -> None:
        name = f"refsched_seed_literals_{base}"
        (tmp_path / f"{name}.py").write_text(f"LITERALS = {sorted(literals(base))}\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)

    return load


def test_plain_hypothesis_draws_differently_once_a_module_is_loaded(
        load_literals: Callable[[int], None]) -> None:
    before = walk_of(plain)
    load_literals(104_729)
    after = walk_of(plain)
    assert before != after
    assert literals(104_729) & set(after)


def test_a_seeded_run_machine_draws_the_same_walk_whatever_was_loaded(
        load_literals: Callable[[int], None]) -> None:
    before = walk_of(refsched_run)
    load_literals(104_723)
    after = walk_of(refsched_run)
    assert before == after and len(before) > 100
