"""Managed blocking over the conformance protocol: the pool profile's ``managed_blocking`` flag.

With the flag (the full contract), the oracle's corpus phase also replays the corpus instance
with managed blocking (``MCWorkStealingCorpusBlocking.cfg``) through the moves ``block``,
``start_spare``, ``unblock`` and ``retire`` and the reading ``blocking_snapshot``, and the
generated phase walks the pool's lock-step machine with spares over the protocol; without it
no pool is asked for spares. refsched's own pool, served in another process, replays the
blocking traces; the broken pools of managed blocking are rejected, in process and over the
wire, and pass where the profile leaves managed blocking out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from itertools import islice
from typing import Any

import pytest

from refsched.conform import system_phases
from refsched.conform.client import HarnessError, ProtocolImplementation
from refsched.conform.pool import broken
from refsched.conform.report import PhaseResult
from refsched.pool.pool import WorkStealingPool
from refsched.profile import PoolProfile, full_profile, profile_from_hello
from refsched.verify import corpus, system
from refsched.verify.itf import Trace
from refsched.verify.pool.lockstep import BLOCKING_MAX_SPARES, Disagreement, run_pool_lockstep
from refsched.verify.pool.system import BATCH_CONFIG, BLOCKING_CONFIG

POOL = system.get("pool")
BLOCKING_BROKEN = (broken.SpareNeverRetires, broken.SparesBeyondTheBound)


@cache
def blocking_traces(count: int) -> tuple[Trace, ...]:
    """The first ``count`` traces of the corpus instance with managed blocking."""
    return tuple(islice(corpus.instance_traces(POOL, lazy=True, configs=(BLOCKING_CONFIG,)),
                        count))


def serve(*extra: str) -> list[str]:
    return [sys.executable, "-m", "refsched.serve", "--system", "pool", *extra]


def corpus_phase(factory: Any, traces: tuple[Trace, ...], profile: Any) -> Any:
    phase = PhaseResult("corpus")
    found = system_phases.corpus_phase("pool", factory, phase, None, given=list(traces),
                                       profile=profile)
    print(phase.figures)
    return found


def test_a_pool_profile_declares_managed_blocking_or_is_not_asked_for_spares() -> None:
    assert full_profile("pool").managed_blocking
    assert not profile_from_hello("pool", {}).managed_blocking
    assert profile_from_hello("pool", {"managed_blocking": True}).managed_blocking
    assert POOL.protocol_instances_for(PoolProfile()) == (
        *POOL.protocol_instances, BLOCKING_CONFIG, BATCH_CONFIG)
    assert POOL.protocol_instances_for(PoolProfile(managed_blocking=False)) == (
        *POOL.protocol_instances, BATCH_CONFIG)
    assert POOL.protocol_instances_for(PoolProfile(managed_blocking=False,
                                                   batch_steals=False)) == (
        POOL.protocol_instances)


def test_the_served_pool_takes_the_blocking_moves() -> None:
    requests = [
        {"id": 1, "op": "hello", "protocol": 1},
        {"id": 2, "op": "new", "workers": ["w1"], "spares": ["s1"], "max_spares": 1},
        {"id": 3, "op": "submit", "task": "a", "worker": "w1"},
        {"id": 4, "op": "pop", "worker": "w1"},
        {"id": 5, "op": "block", "thread": "w1"},
        {"id": 6, "op": "start_spare", "spare": "s1"},
        {"id": 7, "op": "blocking_snapshot"},
        {"id": 8, "op": "retire", "spare": "s1"},
        {"id": 9, "op": "unblock", "thread": "w1"},
        {"id": 10, "op": "retire", "spare": "s1"},
        {"id": 11, "op": "blocking_snapshot"},
        {"id": 12, "op": "bye"},
    ]
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(serve(), input=lines, capture_output=True, text=True, timeout=60,
                          check=True)
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert all(answers[i].get("ok", "error") is None for i in (2, 3, 4, 5, 6, 9, 10)), answers
    blocked = answers[7]["ok"]
    assert (blocked["blocked"], blocked["spare"], blocked["blocker"]) == (
        ["w1"], {"s1": "on"}, {"s1": ["w1"]})
    assert answers[8]["error"]["type"] == "StepRefused"  # its blocker has not returned
    assert answers[11]["ok"]["spare"] == {} and answers[11]["ok"]["blocked"] == []


def test_refsched_served_replays_the_blocking_corpus() -> None:
    with ProtocolImplementation(serve(), system="pool") as impl:
        assert impl.profile.managed_blocking
        found = corpus_phase(impl.remote(), blocking_traces(300), impl.profile)
    assert found is None, found


@pytest.mark.parametrize("cls", BLOCKING_BROKEN, ids=lambda c: c.__name__)
def test_a_broken_blocking_pool_is_rejected_by_the_blocking_corpus(cls: type[Any]) -> None:
    assert corpus_phase(WorkStealingPool, blocking_traces(300), PoolProfile()) is None
    found = corpus_phase(cls, blocking_traces(300), PoolProfile())
    assert found is not None, f"{cls.__name__} replayed the blocking corpus"
    print(f"{cls.__name__}: {found.reason} ({found.source})")
    assert found.source.startswith("corpus trace blocking-cover-")


@pytest.mark.parametrize("cls", BLOCKING_BROKEN, ids=lambda c: c.__name__)
def test_a_broken_blocking_pool_served_is_rejected_only_with_managed_blocking(
        cls: type[Any]) -> None:
    argv = serve("--impl", f"refsched.conform.pool.broken:{cls.__name__}")
    with ProtocolImplementation(argv, system="pool") as impl:
        found = corpus_phase(impl.remote(), blocking_traces(300), impl.profile)
    assert found is not None, f"{cls.__name__} served replayed the blocking corpus"
    print(f"{cls.__name__}: {found.reason}")
    # without the flag the corpus phase reads no blocking instance: the same pool passes the
    # instance without managed blocking
    plain = tuple(islice(corpus.instance_traces(POOL, lazy=True,
                                                configs=POOL.protocol_instances), 100))
    without = PoolProfile(managed_blocking=False)
    argv = serve("--impl", f"refsched.conform.pool.broken:{cls.__name__}",
                 "--profile", '{"managed_blocking": false}')
    with ProtocolImplementation(argv, system="pool") as impl:
        assert not impl.profile.managed_blocking
        assert corpus_phase(impl.remote(), plain, without) is None


def served_walks(cls: type[Any], examples: int) -> Disagreement | None:
    """The pool lock-step machine's walks with managed blocking, seeded and unshrunk, on
    ``cls`` served in another process: the first disagreement, or None."""
    argv = serve("--impl", f"{cls.__module__}:{cls.__name__}")
    with ProtocolImplementation(argv, system="pool") as impl:
        try:
            run_pool_lockstep(impl.remote(), examples, 30, shrink=False, seed=0,
                              python_api=False, fatal=(HarnessError,),
                              max_spares=BLOCKING_MAX_SPARES)
        except Disagreement as found:
            return found
    return None


def test_refsched_served_walks_the_lockstep_machine_with_spares() -> None:
    assert served_walks(WorkStealingPool, 20) is None


@pytest.mark.parametrize(("cls", "action"), [(broken.SpareNeverRetires, "Retire"),
                                              (broken.SparesBeyondTheBound, "Block")],
                         ids=lambda c: getattr(c, "__name__", c))
def test_a_broken_blocking_pool_served_is_rejected_by_the_walks_with_spares(
        cls: type[Any], action: str) -> None:
    found = served_walks(cls, 60)
    assert found is not None, f"{cls.__name__} served walked 60 times with spares"
    print(f"{cls.__name__}: {found}")
    assert action in found.steps[-1], found.steps
