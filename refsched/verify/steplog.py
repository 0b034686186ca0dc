"""What every system's recorder of real runs shares: the log of spec steps it keeps, and the
random task functions its runs are made of.

A recorder (:class:`refsched.verify.dag.recording.TraceRecorder`,
:class:`refsched.verify.timer.recording.TimerTraceRecorder`) is a :class:`StepLog` of its
system's states; :func:`task_function` makes the functions a seeded run gives its tasks.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from refsched.dag.runner import CancelToken
from refsched.errors import Cancelled

__all__ = ["StepLog", "task_function"]

_State = TypeVar("_State")


class StepLog(Generic[_State]):
    """The spec steps one system took, in the order they took effect, each with its state.

    Every system's recorder is one: the set of ids (the spec's ``Tasks``) is known only at the
    end, so steps keep their states and are turned into spec variables when the trace is built.
    """

    def __init__(self) -> None:
        # Appended to under the recording system's lock: one system per recorder.
        self.steps: list[tuple[str, dict[str, Any], _State]] = []

    def record(self, action: str, params: dict[str, Any], state: _State) -> None:
        """Keep one step (called by the system, lock held)."""
        self.steps.append((action, dict(params), state))

    def actions(self) -> list[tuple[str, dict[str, Any]]]:
        """The recorded steps without their states: ``(action, params)`` in order."""
        return [(action, params) for action, params, _ in self.steps]


def task_function(rng: random.Random, kind: str, *, pause: tuple[float, float],
                  patience: tuple[float, float], unit: float = 1.0) -> Callable[..., Any]:
    """A task function of one kind, its durations and failures drawn now from ``rng``.

    ``succeed`` returns at once; ``sleep`` sleeps a time drawn from ``pause``; ``flaky`` fails
    its first one or two runs, so that a retry can succeed; ``raise`` fails; ``watch`` runs
    until asked to stop, then acknowledges, giving up after a time drawn from ``patience``.
    The times drawn are multiplied by ``unit`` (a timer's tick).
    """
    if kind == "succeed":
        return lambda: "ok"
    if kind == "sleep":
        slept = rng.uniform(*pause) * unit

        def sleeper() -> str:
            time.sleep(slept)
            return "slept"
        return sleeper
    if kind == "flaky":
        # Only one version of a task runs at a time, so the counter needs no lock.
        failures = [rng.randint(1, 2)]

        def flaky() -> str:
            if failures[0] > 0:
                failures[0] -= 1
                raise ValueError("flaky task failed")
            return "recovered"
        return flaky
    if kind == "raise":
        def failing() -> None:
            raise RuntimeError("task failed")
        return failing
    waited = rng.uniform(*patience) * unit  # "watch"

    def watcher(token: CancelToken) -> str:
        if token.wait(waited):
            raise Cancelled("stopped on request")
        return "not cancelled"
    return watcher
