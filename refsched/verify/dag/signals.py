"""Checks of ``TaskScheduler.signals()``: its conservation laws, and its partitions against what
the model's steps count in each (:mod:`refsched.model.dag.counters`).

The laws hold in every partition at every moment:

- claims: ``claimed == succeeded + failed + stopped + running`` (each claimed version ended
  from running once, or runs now), ``ready_wait.count == claimed`` and
  ``run_time.count == succeeded + failed + stopped``;
- versions: ``submitted + retried == succeeded + failed + cancelled + blocked + replaced +
  waiting + running`` (each version made ended once, was replaced while waiting, or is current
  and waiting or running);
- propagation: ``propagation.count == propagated`` (each version made ready or blocked by a
  dependency's end is timed once for it);
- durations: each histogram adds up to its count, and ``0 <= max <= total``;

and the partitions add up to ``stats()``, counter by counter (a DurableScheduler's: the
counters of :data:`DURABLE_SHARED`, its stored ones). :func:`law_breaches` checks them;
the lock-step machine (:class:`SignalLedger`) after every call, and
:func:`check_recorded_signals` on a recorded Runner run.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from refsched.dag.signals import OVERFLOW, UNLABELLED, PartitionSignals, Signals
from refsched.model.dag.counters import (
    Charge,
    Counts,
    Partitions,
    call_charges,
    step_charges,
)
from refsched.types import Snapshot

__all__ = ["DURABLE_SHARED", "LABELS", "SignalLedger", "check_recorded_signals", "law_breaches",
           "ledger_for"]

# the counters of stats() a partition of signals() counts too
_STATS_COUNTERS = (
    "submitted", "retried", "claimed", "succeeded", "failed", "cancelled", "blocked",
    "cycles_reported", "claim_conflicts", "duplicate_callbacks", "stale_callbacks",
)
_ZERO = PartitionSignals()

#: The counters of a DurableScheduler's partitions that add up to its ``stats()``: a signal
#: counter -> the field of ``DurableStats`` (its stale and duplicate reports are this
#: process's, the partitions' the store's: not compared).
DURABLE_SHARED: Mapping[str, str] = {
    **{name: name for name in ("submitted", "retried", "claimed", "succeeded", "failed",
                               "cancelled", "blocked", "cycles_reported")},
    "lease_expiries": "expired"}

# The (task type, tenant) pairs the lock-step machine gives submissions (None: neither): more
# than the partitions it keeps, so the overflow partition fills too.
LABELS: tuple[tuple[str | None, Hashable] | None, ...] = (
    None, None, ("etl", None), (None, "acme"), ("etl", "acme"), ("etl", "zenith"),
    ("report", "acme"),
)


def _partition_breaches(key: Hashable, p: PartitionSignals) -> list[str]:
    ended_running = p.succeeded + p.failed + p.stopped
    laws = (
        ("claimed == succeeded + failed + stopped + running", p.claimed,
         ended_running + p.running),
        ("submitted + retried == succeeded + failed + cancelled + blocked + replaced + "
         "waiting + running", p.submitted + p.retried,
         p.succeeded + p.failed + p.cancelled + p.blocked + p.replaced + p.waiting + p.running),
        ("ready_wait.count == claimed", p.ready_wait.count, p.claimed),
        ("run_time.count == succeeded + failed + stopped", p.run_time.count, ended_running),
        ("sum(ready_wait.buckets) == ready_wait.count", sum(p.ready_wait.buckets),
         p.ready_wait.count),
        ("sum(run_time.buckets) == run_time.count", sum(p.run_time.buckets), p.run_time.count),
        ("propagation.count == propagated", p.propagation.count, p.propagated),
        ("sum(propagation.buckets) == propagation.count", sum(p.propagation.buckets),
         p.propagation.count),
    )
    out = [f"partition {key!r}: {law} does not hold ({left} != {right})"
           for law, left, right in laws if left != right]
    for name, d in (("ready_wait", p.ready_wait), ("run_time", p.run_time),
                    ("propagation", p.propagation)):
        if not 0 <= d.max <= d.total:
            out.append(f"partition {key!r}: 0 <= {name}.max <= {name}.total does not hold")
    return out


def law_breaches(signals: Signals, stats: Any,
                 shared: Mapping[str, str] | None = None) -> list[str]:
    """The conservation laws ``signals`` breaks, in words (``[]``: none); ``stats`` is the
    same scheduler's ``stats()`` at the same moment, and ``shared`` maps each counter that
    must add up to it to its field of ``stats`` (None: a TaskScheduler's, every counter of
    ``stats()`` by its own name; :data:`DURABLE_SHARED` for a DurableScheduler)."""
    out: list[str] = []
    named = [k for k in signals.partitions if k is not OVERFLOW]
    if len(named) > signals.max_partitions:
        out.append(f"{len(named)} partitions besides the overflow one, more than "
                   f"max_partitions={signals.max_partitions}")
    for key, p in signals.partitions.items():
        out += _partition_breaches(key, p)
    for name, field in (shared or {n: n for n in _STATS_COUNTERS}).items():
        total = signals.total(name)
        if total != getattr(stats, field):
            out.append(f"the partitions' {name} add up to {total}, stats() says "
                       f"{field}={getattr(stats, field)}")
    for name in ("ready_wait", "run_time"):
        if not hasattr(stats, name):  # a DurableStats keeps no durations
            continue
        total = signals.total(f"{name}.count")
        if total != getattr(stats, name).count:
            out.append(f"the partitions' {name}.count add up to {total}, stats() says "
                       f"{getattr(stats, name).count}")
    return out


Row = tuple[str, str, int, int]
"""(partition, field, the model's count, the implementation's)."""


def partition_rows(expected: Mapping[Hashable, Counts],
                   gauges: Mapping[Hashable, Mapping[str, int]], signals: Signals) -> list[Row]:
    """Where ``signals`` differs from what the model counts: (partition, field, model,
    implementation)."""
    rows: list[tuple[str, str, int, int]] = []
    keys = dict.fromkeys([*expected, *gauges, *signals.partitions])
    for key in keys:
        want = {**expected.get(key, Counts()).expected_partition(),
                "waiting": 0, "running": 0, **gauges.get(key, {})}
        got = signals.partitions.get(key, _ZERO).counters()
        rows += [(repr(key), name, want[name], got[name]) for name in want
                 if want[name] != got[name]]
    return rows


class SignalLedger:
    """What the model's steps count per partition, kept beside a lock-step run.

    ``labels`` of a submission are given to the implementation only (the model knows none);
    :meth:`after_call` records them, counts the call and its step, and returns what is wrong
    with the implementation's ``signals()`` (``[]``: nothing).
    """

    def __init__(self, max_partitions: int) -> None:
        self.parts = Partitions(max_partitions)
        self.expected: dict[Hashable, Counts] = {}

    def charge(self, charges: Iterable[Charge]) -> None:
        for key, counter in charges:
            self.expected[key] = self.expected.get(key, Counts()).charged(counter)

    def count(self, method: str, args: tuple[Any, ...], labels: Hashable,
              before: Snapshot, after: Snapshot, steps: Iterable[tuple[str, tuple[Any, ...]]],
              error: BaseException | None, max_concurrency: int) -> None:
        """Count one API call: its refusal (``error``) or its steps."""
        parts = self.parts
        self.charge(call_charges(method, args, labels, before, error, max_concurrency, parts))
        for action, step_args in steps:
            for t, v in after.tasks.items():
                was = before.tasks.get(t)
                if was is not None and was.generation == v.generation:
                    continue
                if action in ("Submit", "SubmitOptional") and t == step_args[0]:
                    if labels != UNLABELLED:
                        parts.labels[(t, v.generation)] = labels
                elif was is not None and (t, was.generation) in parts.labels:
                    parts.labels[(t, v.generation)] = parts.labels[(t, was.generation)]
            self.charge(step_charges(action, step_args, before, after, parts))

    def rows(self, after: Snapshot, signals: Signals) -> list[tuple[str, str, int, int]]:
        """Where ``signals`` differs from the model's counts and the state ``after``."""
        return partition_rows(self.expected, self.parts.gauges(after), signals)

    def problem(self, implementation: Any, after: Snapshot) -> str | None:
        """What is wrong with the implementation's ``signals()`` now, in a sentence, or None:
        a conservation law it breaks, or a partition not what the model's steps count."""
        signals = implementation.signals()
        broken = law_breaches(signals, implementation.stats())
        if broken:
            return "signals() breaks a conservation law: " + "; ".join(broken)
        rows = self.rows(after, signals)
        if rows:
            return "signals() is not what the model's steps count per partition: " + "; ".join(
                f"{key} {name}: model {want}, implementation {got}"
                for key, name, want, got in rows)
        return None


def ledger_for(implementation: Any) -> SignalLedger | None:
    """A ledger for an implementation that keeps ``signals()`` (``max_partitions`` an int),
    else None."""
    bound = getattr(implementation, "max_partitions", None)
    return SignalLedger(bound) if isinstance(bound, int) else None


def check_recorded_signals(steps: Iterable[tuple[str, Mapping[str, Any], Snapshot]],
                           submissions: Iterable[Hashable], signals: Signals,
                           stats: Any) -> list[str]:
    """What is wrong with a recorded run's final ``signals()``: a law it breaks, or a
    partition that differs from what the recorded steps count. ``submissions`` are the
    labels of the run's accepted submissions, in the order of its Submit steps (a Runner run
    has no refused call that counts)."""
    ledger = SignalLedger(signals.max_partitions)
    labels = iter(submissions)
    before = Snapshot()
    for action, params, state in steps:
        args = tuple(params.values())
        given = next(labels) if action in ("Submit", "SubmitOptional") else UNLABELLED
        ledger.count("", args, given, before, state, [(action, args)], None, 0)
        before = state
    problems = law_breaches(signals, stats)
    # a ready() cut short is no step: only its sum with the others' (stats()) is checked
    problems += [f"partition {key}: {name} is {got}, the recorded steps count {want}"
                 for key, name, want, got in ledger.rows(before, signals)
                 if name != "claim_conflicts"]
    return problems
