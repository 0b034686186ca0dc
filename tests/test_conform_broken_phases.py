"""Which of the oracle's phases rejects each broken implementation of each system.

Each broken class (``refsched.conform.dag.broken``, ``broken_timer``, ``broken_pool``,
``broken_durable``) is judged by each phase alone, in-process: the corpus phase over the first
``TRACES`` traces the full profile admits, and the generated phase with the system's ``SEED``
(not shrunk: only the verdict is asked here). The generated phase must reject every one;
``CORPUS`` names the classes the corpus phase rejects too, and the test holds that set exactly,
so that a corpus that grows (more ids, more slots) shows here as a class it now rejects.

The first 150 durable traces are all of the corpus's first instance (one task id, one slot):
no dependent to block, so here ``CancelDoesNotBlock`` is left to the generated phase. The
instances of several ids reject it too: tests/durable/test_replay.py runs the corpus phase alone
over a subset of each instance and sees every broken durable scheduler rejected.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import Phase

from refsched.conform import oracle
from refsched.conform.client import InProcessImplementation
from refsched.conform.dag import broken
from refsched.conform.durable import broken as broken_durable
from refsched.conform.pool import broken as broken_pool
from refsched.conform.report import PhaseResult
from refsched.conform.timer import broken as broken_timer
from refsched.profile import full_profile

# Seeds under the Hypothesis release the test extras pin (a seed's walks change with the release).
SEED = {"scheduler": 0, "timer": 0, "pool": 0, "durable": 3}
# The scheduler's walks draw among more calls (edge kinds and add_deps), so they need more
# examples to reach the same bugs.
EXAMPLES = {"scheduler": 300, "timer": 200, "pool": 200, "durable": 200}
MODULES: dict[str, ModuleType] = {"scheduler": broken, "timer": broken_timer,
                                  "pool": broken_pool, "durable": broken_durable}
TRACES = {"scheduler": 100, "timer": 100, "pool": 100, "durable": 150}
CORPUS = {
    "scheduler": {"CompleteForgetsDependents", "ClaimsNewestFirst", "StaleCallbackAccepted"},
    "timer": {"RescheduleKeepsPriority", "CancelEndsRunning", "LastReportWins",
              "CloseForgetsRunning"},
    "pool": {"ChildGoesRoundRobin", "ChildRefusedAfterShutdown", "ThiefLeavesLastTask",
             "FinishLeavesOutstanding", "IdleShutdownNeverTerminates",
             "CancelFuturesLeavesQueued"},
    # StaleAttemptAccepted needs a trace past the first 150 (the first 600 hold one)
    "durable": {"HeartbeatExtendsFromDeadline", "ReclaimKeepsAttempt", "CancelIgnoresRunning",
                "HeartbeatHidesCancel", "RepeatedReportRefused"},
}
# Those the corpus rejects and the generated walks do not reach within EXAMPLES (none today).
CORPUS_ONLY: dict[str, set[str]] = {}


def rejected_by(system: str, cls: type[Any], monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The phases that, each alone, reject ``cls``."""
    monkeypatch.setattr(oracle, "_HYPOTHESIS", {**oracle._HYPOTHESIS,
                                                "phases": (Phase.generate,)})
    impl = InProcessImplementation(cls, system=system)
    found = set()
    for name in ("corpus", "generated"):
        counterexample = oracle._phase(impl, full_profile(system), PhaseResult(name), name,
                                       examples=EXAMPLES[system], steps=40, seed=SEED[system],
                                       progress=None, max_traces=TRACES[system])
        if counterexample is not None:
            found.add(name)
    return found


@pytest.mark.parametrize("system", sorted(MODULES))
def test_each_broken_class_is_rejected_by_the_phases_named_here(
        system: str, monkeypatch: pytest.MonkeyPatch) -> None:
    names = {cls.__name__ for cls in MODULES[system].BROKEN}
    assert CORPUS[system] <= names
    found = {cls.__name__: rejected_by(system, cls, monkeypatch)
             for cls in MODULES[system].BROKEN}
    only = CORPUS_ONLY.get(system, set())
    expected = {name: {*([] if name in only else ["generated"]),
                       *(["corpus"] if name in CORPUS[system] else [])}
                for name in names}
    assert found == expected
