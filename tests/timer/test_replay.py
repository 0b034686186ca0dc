"""The timer corpus: current with the spec, replayed edge for edge against TimerScheduler, and
able to catch an implementation that answers or changes state differently.

The corpus (traces/timer-cover.jsonl.gz) covers every edge of TLC's state graph of
spec/MCTimerQueueTraces.cfg; each must-fail test breaks one thing in a TimerScheduler and
asserts the replay names the first step where the break shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from refsched import Due, TimerScheduler, Wait
from refsched.cli import main
from refsched.types import TimerState, TimerStats
from refsched.verify import corpus, system
from refsched.verify.itf import Trace, read_traces, write_traces
from refsched.verify.replay import format_divergence
from tests.replay_support import CorpusTests, corpus_traces, first_divergence

TIMER = system.get("timer")


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    return corpus_traces(TIMER)


class TestTimerCorpus(CorpusTests):
    system, config = TIMER, "MCTimerQueueTraces.cfg"


# -- Broken implementations ---------------------------------------------------------------------

class CancelAlwaysTrue(TimerScheduler):
    """Says a cancel succeeded even when the version was running and only got a request."""

    def cancel(self, task_id: Hashable) -> bool:
        super().cancel(task_id)
        return True


class StaleCompleteIgnored(TimerScheduler):
    """Answers a callback naming an old version with the current version's state."""

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        current = self.version(task_id)
        if version != current and self.state(task_id).is_terminal:
            return self.state(task_id)
        return super().complete(task_id, version, result)


class WaitsTooLong(TimerScheduler):
    """Reports one second more to wait than the earliest entry needs."""

    def next(self) -> Due | Wait | None:
        answer = super().next()
        return Wait(answer.seconds + 1) if isinstance(answer, Wait) else answer


class ClaimedForgetsFailed(TimerScheduler):
    """Counts as claimed the versions running or completed, not those that failed."""

    def stats(self) -> TimerStats:
        counted = super().stats()
        return dataclasses.replace(counted, claimed=counted.running + counted.completed)


def rebuilds_late(clock: Callable[[], float], *, rebuild_floor: int) -> TimerScheduler:
    """A scheduler whose heap is rebuilt above another floor than the one it was given."""
    return TimerScheduler(clock, rebuild_floor=rebuild_floor + 1)


@pytest.mark.parametrize(("factory", "action", "says"), [
    (CancelAlwaysTrue, "Cancel", "cancel('a') returned True, expected False"),
    (StaleCompleteIgnored, "StaleCallback", "expected StaleGenerationError naming version"),
    (WaitsTooLong, "Idle", "next() returned Wait(2), expected Wait(1)"),
    (rebuilds_late, "Claim", "the state after the step is not the trace's"),
    (ClaimedForgetsFailed, "Fail", "stats() is not what the trace's steps count: claimed"),
], ids=["cancel-always-true", "stale-complete-ignored", "waits-too-long", "rebuilds-late",
        "claimed-forgets-failed"])
def test_a_broken_timer_is_named_at_its_first_wrong_step(
        traces: list[Trace], factory: Callable[..., Any], action: str, says: str) -> None:
    d = first_divergence(traces, factory, TIMER).divergences[0]
    assert (d.side, d.action) == ("implementation", action), format_divergence(d)
    assert says in d.reason, d.reason
    shown = format_divergence(d)
    assert shown.startswith(f"trace {d.trace}, step {d.step}: {action}")
    assert "the implementation diverges from the trace" in shown


def test_a_miscount_shows_the_counter_as_a_field_that_differs(traces: list[Trace]) -> None:
    d = first_divergence(traces, ClaimedForgetsFailed, TIMER).divergences[0]
    header, row = d.diff.splitlines()
    assert header.split() == ["id", "field", "trace", "implementation"]
    field, trace, implementation = row.split()
    assert field == "stats().claimed" and int(trace) == int(implementation) + 1, d.diff


def test_a_late_rebuild_shows_the_heap_entries_that_differ(traces: list[Trace]) -> None:
    d = first_divergence(traces, rebuilds_late, TIMER).divergences[0]
    assert "heap" in d.diff and "only <<" in d.diff, d.diff


def test_replay_cli_picks_the_timer_spec_from_the_traces(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Any) -> None:
    # A file of timer traces, without --system: the spec is read from the traces.
    bundle = tmp_path / "timer-traces.jsonl.gz"
    write_traces(bundle, read_traces(corpus.traces_dir() / TIMER.bundle, stride=50))
    assert main(["replay", "-q", str(bundle)]) == 0
    assert "no divergence" in capsys.readouterr().err
    assert main(["replay", "-q", "--system", "timer"]) == 0
    out = capsys.readouterr().out
    assert "edges replayed: 34,992 of 34,992 (100.0%)" in out
    assert main(["replay", "-q", "--system", "timer",
                 "--impl", "tests.timer.test_replay:WaitsTooLong"]) == 1
