"""The broken timers, pools and durable schedulers of ``refsched.conform``: each system's quick
check rejects every one of them with a short counterexample, and passes the real class.

A system's quick check replays the first traces of its corpus (``traces/<name>-cover.jsonl.gz``),
stopping at the first divergence, and then runs its lock-step machine with a fixed seed. The
counterexample is the replayed trace up to the step that diverged, or the lock-step run: the
timer's and the pool's shrunk by Hypothesis; the durable machine's walks are left unshrunk
(shrinking them takes minutes) and kept short instead, so the walk that disagreed is short too.
A broken class added to a ``BROKEN`` tuple is checked here without further ado.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from refsched import TimerScheduler, WorkStealingPool
from refsched.conform.durable import broken as broken_durable
from refsched.conform.pool import broken as broken_pool
from refsched.conform.timer import broken as broken_timer
from refsched.durable import DurableScheduler
from refsched.verify import corpus, system
from refsched.verify.durable import lockstep as durable_lockstep
from refsched.verify.itf import Trace, trace_from_itf
from refsched.verify.pool import lockstep as pool_lockstep
from refsched.verify.pool.driver import SteppedPool
from refsched.verify.replay import format_divergence, replay
from refsched.verify.timer import lockstep as timer_lockstep

SEED = 4  # Hypothesis's seed for the timer's and the pool's lock-step runs here
# The durable lock-step's own seed. Its rules move with every rule added, and 100 unshrunk walks
# of 10 calls reject CancelDoesNotBlock (which only the lock-step catches) in about half of the
# seeds: of seeds 4 to 11 (every broken class, the rules of the batch submit and report), 5, 7,
# 8 and 11 reject it within 12 calls, 10 in 17, and 4, 6 and 9 not at all.
DURABLE_SEED = 5
REPLAY_STEPS = 15  # the longest trace prefix a replay may need to show a bug
LOCKSTEP_CALLS = 12  # the longest lock-step run that may show a bug


@dataclass(frozen=True)
class Rejection:
    """How a quick check rejected an implementation."""

    check: str  # "replay" or "lockstep"
    length: int  # steps of the trace up to the divergence, or calls of the lock-step run
    text: str  # the counterexample as the check shows it

    @property
    def bound(self) -> int:
        return REPLAY_STEPS if self.check == "replay" else LOCKSTEP_CALLS


def _lines_after(header: str, text: str) -> int:
    """How many numbered lines follow ``header`` in a lock-step disagreement's message."""
    return len(text.split(f"{header}:\n", 1)[1].splitlines())


def _timer_lockstep(factory: Callable[..., Any]) -> Rejection | None:
    try:
        timer_lockstep.run_timer_lockstep(factory, examples=100, steps=20, seed=SEED)
    except timer_lockstep.Disagreement as found:
        return Rejection("lockstep", len(found.calls), str(found))
    return None


def _pool_lockstep(factory: Callable[..., Any]) -> Rejection | None:
    # run_pool_lockstep's settings, with a seed: walks of 12 steps, shrunk
    machine = pool_lockstep.pool_lockstep_machine(factory, pool_lockstep.Ledger())
    try:
        run_state_machine_as_test(hypothesis_seed(SEED)(machine), settings=settings(
            max_examples=100, stateful_step_count=12, deadline=None, database=None,
            report_multiple_bugs=False, phases=[p for p in Phase if p is not Phase.explain]))
    except pool_lockstep.Disagreement as found:
        return Rejection("lockstep", _lines_after("steps", str(found)), str(found))
    return None


def _durable_lockstep(factory: Callable[..., Any]) -> Rejection | None:
    # unshrunk, as tests/durable/test_lockstep.py takes its verdicts: walks of 10 calls after
    # the first few submissions
    try:
        durable_lockstep.run_durable_lockstep(
            factory, examples=100, steps=10, seed=DURABLE_SEED,
            hypothesis_settings={"phases": [Phase.explicit, Phase.reuse, Phase.generate]})
    except durable_lockstep.Disagreement as found:
        return Rejection("lockstep", _lines_after("calls", str(found)), str(found))
    return None


@dataclass(frozen=True)
class QuickCheck:
    """A system's quick check: the first ``traces`` traces of its corpus, then its lock-step
    machine."""

    name: str  # the system's name in refsched.verify.system
    traces: int
    lockstep: Callable[[Callable[..., Any]], Rejection | None]

    def run(self, factory: Callable[..., Any]) -> Rejection | None:
        """How the check rejects ``factory``, or None when it passes."""
        report = replay(corpus_prefix(self.name, self.traces), factory,
                        system=system.get(self.name), stop_at_first=True)
        if not report.ok:
            first = report.divergences[0]
            return Rejection("replay", first.step, format_divergence(first))
        return self.lockstep(factory)


CHECKS = {
    "timer": QuickCheck("timer", 100, _timer_lockstep),
    "pool": QuickCheck("pool", 100, _pool_lockstep),
    "durable": QuickCheck("durable", 600, _durable_lockstep),
}
PRODUCTION: dict[str, type[Any]] = {
    "timer": TimerScheduler, "pool": WorkStealingPool, "durable": DurableScheduler}
BROKEN = {"timer": broken_timer, "pool": broken_pool, "durable": broken_durable}


@cache
def corpus_prefix(name: str, count: int) -> list[Trace]:
    """The first ``count`` traces of the system's corpus, read without parsing the rest (the
    whole of one takes seconds)."""
    path = corpus.traces_dir() / system.get(name).bundle
    shared: dict[str, dict[str, Any]] = {}  # the states the traces share, decoded once
    traces: list[Trace] = []
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as lines:
        for number, line in enumerate(lines, start=1):
            if len(traces) == count:
                break
            if line.strip():
                traces.append(trace_from_itf(json.loads(line), f"{path.name}:{number}",
                                             cache=shared))
    return traces


def _broken(name: str) -> list[Any]:
    return [pytest.param(name, cls, id=f"{name}-{cls.__name__}")
            for cls in BROKEN[name].BROKEN]


ALL_BROKEN = [*_broken("timer"), *_broken("pool"), *_broken("durable")]


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_quick_check_passes_the_production_class(name: str) -> None:
    found = CHECKS[name].run(PRODUCTION[name])
    assert found is None, found.text


@pytest.mark.parametrize(("name", "cls"), ALL_BROKEN)
def test_the_quick_check_rejects_a_broken_class_with_a_short_counterexample(
        name: str, cls: type[Any]) -> None:
    found = CHECKS[name].run(cls)
    assert found is not None, f"{cls.__name__} passed the {name} quick check"
    print(f"{name} {cls.__name__}: rejected by {found.check} in {found.length}\n{found.text}")
    assert 1 <= found.length <= found.bound, found.text


@pytest.mark.parametrize(("name", "cls"), ALL_BROKEN)
def test_a_broken_class_breaks_one_named_rule_of_its_production_class(
        name: str, cls: type[Any]) -> None:
    module = BROKEN[name]
    assert issubclass(cls, PRODUCTION[name]) and cls is not PRODUCTION[name]
    assert cls.__module__ == module.__name__ and cls.__name__ in module.__all__
    doc = cls.__doc__ or ""
    rule, _, bug = doc.partition("\n\n    Bug: ")
    assert rule.strip() and bug.strip(), f"{cls.__name__}: say the rule, then 'Bug: ...'"


def test_every_broken_class_is_listed_once() -> None:
    for module in BROKEN.values():
        names = [cls.__name__ for cls in module.BROKEN]
        # those that break a clause random calls rarely reach (the clauses phase asks them)
        clause_names = [cls.__name__ for cls in getattr(module, "BROKEN_CLAUSES", ())]
        # those only a profile flag's walks reach (the pool's batch steals)
        profiled = [cls.__name__ for cls in getattr(module, "BROKEN_PROFILED", ())]
        listed = names + clause_names + profiled
        assert len(set(listed)) == len(listed)
        assert len(names) >= 5
        assert set(module.__all__) == {"BROKEN", *names, *(
            ["BROKEN_CLAUSES", *clause_names] if clause_names else []), *(
            ["BROKEN_PROFILED", *profiled] if profiled else [])}


@pytest.mark.parametrize(("name", "cls"), ALL_BROKEN)
def test_a_broken_class_is_built_as_the_checks_build_its_production_class(
        name: str, cls: type[Any]) -> None:
    if name == "timer":
        timers = cls(timer_lockstep.FakeClock(), rebuild_floor=0)
        assert timers.next() is None
    elif name == "pool":
        pool = SteppedPool(cls, ("w1", "w2"))
        assert pool.stats().outstanding == 0
    else:
        folder = tempfile.mkdtemp(prefix="refsched-broken-")
        try:
            store = cls(f"sqlite:///{Path(folder) / 'store.db'}", max_concurrency=2,
                        max_attempts=2, clock="virtual", record=True)
            try:
                assert store.history() == []
            finally:
                store.release()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
