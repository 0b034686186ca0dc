"""Checks of ``DurableScheduler.signals()`` in the lock-step machine: the conservation laws of
:func:`refsched.verify.dag.signals.law_breaches` (with :data:`DURABLE_SHARED`), and each
partition against what the model's steps count in it.

The model knows no partition: the machine gives each submission labels of its own
(:data:`~refsched.verify.dag.signals.LABELS`, in turn) and :class:`DurableSignalLedger` charges
what each model step changes to the labels of the version it changes: a new version to
``submitted`` (``retried`` for Retry), a waiting version replaced by a resubmission to
``replaced``, a claim to ``claimed``, an end to its state (and a cancelled running version to
``stopped``), an Expire to ``lease_expiries``; the gauges are the model's waiting and running
versions. Refusals are checked by their sums (``stats()`` and the machine's own counts).

The durations are charged on the store's clock as the machine moves it (``clock``: the seconds
of every ``tick()`` so far, the spec's clock counting only the ticks a lease notices): a
version's ready wait, from the step that made it ready last to its first claim, at the claim;
its run time, from its first claim to its end, at the end of a claimed version (succeeded,
failed, or cancelled while running). Each partition's count and total of each must be the
store's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from refsched.dag.signals import UNLABELLED, Signals
from refsched.types import Snapshot, TaskState
from refsched.verify.dag.signals import DURABLE_SHARED, LABELS, law_breaches

__all__ = ["CHECKED", "DurableSignalLedger"]

#: The counters each partition is compared on.
CHECKED = ("submitted", "retried", "claimed", "succeeded", "failed", "cancelled", "blocked",
           "stopped", "replaced", "lease_expiries", "waiting", "running")
_WAITING = (TaskState.PENDING, TaskState.READY)
_ENDS = {TaskState.SUCCEEDED: "succeeded", TaskState.FAILED: "failed",
         TaskState.CANCELLED: "cancelled", TaskState.BLOCKED: "blocked"}
Labels = tuple[str | None, Hashable]


class DurableSignalLedger:
    """What the model's steps count per partition, beside a durable lock-step walk."""

    def __init__(self) -> None:
        self.given = 0  # labels handed out
        self.labels: dict[Hashable, Labels] = {}  # task -> its current version's labels
        self.expected: dict[Labels, Counter[str]] = {}
        self.ready_at: dict[Hashable, float] = {}  # task -> when its version became ready
        self.claimed_at: dict[Hashable, float] = {}  # task -> its version's first claim
        # labels -> duration -> [count, total] (ready_wait, run_time), on the store's clock
        self.durations: dict[Labels, dict[str, list[float]]] = {}

    def next_labels(self) -> dict[str, Any]:
        """The ``task_type`` and ``tenant`` keywords of the next submission, in turn."""
        labels = LABELS[self.given % len(LABELS)] or UNLABELLED
        self.given += 1
        return {"task_type": labels[0], "tenant": labels[1]}

    def _charge(self, labels: Labels, counter: str, n: int = 1) -> None:
        self.expected.setdefault(labels, Counter())[counter] += n

    def _lasted(self, labels: Labels, duration: str, seconds: float) -> None:
        tally = self.durations.setdefault(labels, {}).setdefault(duration, [0, 0.0])
        tally[0] += 1
        tally[1] += seconds

    def step(self, action: str, params: Mapping[str, Any], before: Snapshot, after: Snapshot,
             given: dict[str, Any] | None, clock: float = 0.0) -> None:
        """Charge one model step, taken at ``clock`` on the store's clock; ``given``: the
        keywords a Submit's call was given."""
        if action == "Expire":
            self._charge(self.labels.get(params["t"], UNLABELLED), "lease_expiries")
        for t, now in after.tasks.items():
            was = before.tasks.get(t)
            if was is None or was.generation != now.generation:
                old = self.labels.get(t, UNLABELLED)
                if was is not None and was.state in _WAITING:
                    self._charge(old, "replaced")
                if action in ("Submit", "SubmitOptional") and given is not None:
                    self.labels[t] = (given["task_type"], given["tenant"])
                self._charge(self.labels.get(t, UNLABELLED),
                             "retried" if action == "Retry" else "submitted")
                self.ready_at.pop(t, None)
                self.claimed_at.pop(t, None)
                was = None
            labels = self.labels.get(t, UNLABELLED)
            start = TaskState.PENDING if was is None else was.state
            if start is now.state:
                continue
            if now.state is TaskState.READY:
                self.ready_at[t] = clock
            elif now.state is TaskState.RUNNING:
                self._charge(labels, "claimed")
                self._lasted(labels, "ready_wait", clock - self.ready_at.get(t, clock))
                self.claimed_at[t] = clock
            elif now.state in _ENDS and start not in _ENDS:
                self._charge(labels, _ENDS[now.state])
                if start is TaskState.RUNNING:
                    self._lasted(labels, "run_time", clock - self.claimed_at.get(t, clock))
                if now.state is TaskState.CANCELLED and start is TaskState.RUNNING:
                    self._charge(labels, "stopped")

    def problems(self, signals: Signals, stats: Any, state: Snapshot) -> list[str]:
        """A law ``signals`` breaks, or a partition that differs from the model's counts."""
        out = law_breaches(signals, stats, DURABLE_SHARED)
        gauges: dict[Labels, Counter[str]] = {}
        for t, view in state.tasks.items():
            if view.state in _WAITING or view.state is TaskState.RUNNING:
                gauges.setdefault(self.labels.get(t, UNLABELLED), Counter())[
                    "running" if view.state is TaskState.RUNNING else "waiting"] += 1
        keys: Iterable[Hashable] = dict.fromkeys([*self.expected, *gauges, *signals.partitions])
        for key in keys:
            want = self.expected.get(key, Counter()) + gauges.get(key, Counter())  # type: ignore[call-overload]
            got = signals.partitions.get(key)
            counters = got.counters() if got is not None else {}
            for name in CHECKED:
                if want[name] != counters.get(name, 0):
                    out.append(f"partition {key!r}: {name} is {counters.get(name, 0)}, the "
                               f"model's steps count {want[name]}")
            for duration in ("ready_wait", "run_time"):
                count, total = self.durations.get(key, {}).get(  # type: ignore[call-overload]
                    duration, [0, 0.0])
                tail = getattr(got, duration, None)
                have = (tail.count, tail.total) if tail is not None else (0, 0.0)
                if have[0] != count or not math.isclose(have[1], total, abs_tol=1e-6):
                    out.append(f"partition {key!r}: {duration} counts {have[0]} lasting "
                               f"{have[1]} s in all, the steps on the store's clock {count} "
                               f"lasting {total} s")
        return out
