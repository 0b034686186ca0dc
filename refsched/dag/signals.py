"""Signals of a TaskScheduler per task type and tenant (``TaskScheduler.signals()``).

A version carries a partition key, ``(task_type, tenant)``, given to ``submit()`` (both None when
the caller names neither: :data:`UNLABELLED`). A scheduler built with ``max_partitions=N``
keeps, for each of the first ``N`` keys it charges, the counters of ``stats()`` and a few more,
and the ready-wait and run-time durations with a bounded histogram, so a tail shows where a
mean would hide it. Every key charged once ``N`` are kept goes to the one :data:`OVERFLOW`
partition, which counts like any other: memory is bounded by ``N + 1`` partitions whatever
the callers name. A partition also times how its versions are reached by their dependencies'
ends: ``propagation`` holds, for each version made ready or blocked by a dependency's end
(``propagated`` of them), the time from that end to the moment the version became ready or
blocked. Events that concern no version (a ``ready()`` cut short by the concurrency
limit; ``start()`` refused for a cycle or an unknown dependency) are charged to
:data:`UNLABELLED`.

Graph configuration errors are counted apart from function failures (``failed``):
``cycles_reported``, ``unknown_deps`` (a call refused with ``UnknownDependencyError``) and
``edges_refused`` (``add_deps()`` on a version that is no longer pending); their sum is
:attr:`PartitionSignals.config_errors`.

The conservation laws (:func:`refsched.verify.dag.signals.law_breaches` checks them) hold in
every partition at every moment, and the partitions add up to ``stats()``.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "BUCKET_BOUNDS",
    "COUNTERS",
    "OVERFLOW",
    "UNLABELLED",
    "DurationTail",
    "PartitionSignals",
    "SignalBook",
    "Signals",
    "task_type_of",
]


class _Overflow:
    """The key of the partition every key goes to once ``max_partitions`` are kept."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OVERFLOW"

    def __reduce__(self) -> str:
        return "OVERFLOW"


OVERFLOW: Final = _Overflow()
UNLABELLED: Final[tuple[None, None]] = (None, None)

# Upper bounds of the histogram's buckets, in seconds: 1 microsecond times powers of 4, up to
# about 4 s; one more bucket holds what is longer. Fixed, so histograms of two schedulers add.
BUCKET_BOUNDS: Final = tuple(1e-6 * 4**k for k in range(12))
_BUCKETS: Final = len(BUCKET_BOUNDS) + 1

# The counters of a partition, in the order of PartitionSignals' fields.
COUNTERS: Final = (
    "submitted", "retried", "claimed", "succeeded", "failed", "cancelled", "blocked",
    "cycles_reported", "claim_conflicts", "duplicate_callbacks", "stale_callbacks",
    "stopped", "replaced", "unknown_deps", "edges_refused", "lease_expiries",
)
_INDEX: Final = {name: i for i, name in enumerate(COUNTERS)}


@dataclass(frozen=True, slots=True)
class DurationTail:
    """Count, total and maximum of a set of durations (seconds), and how they spread:
    ``buckets[i]`` durations were at most ``BUCKET_BOUNDS[i]`` (and above the bound before);
    the last bucket holds those above every bound."""

    count: int = 0
    total: float = 0.0
    max: float = 0.0
    buckets: tuple[int, ...] = (0,) * _BUCKETS

    @property
    def mean(self) -> float:
        """The mean duration, 0.0 when there is none."""
        return self.total / self.count if self.count else 0.0

    def quantile(self, q: float) -> float:
        """An upper bound of the ``q``-quantile (0 < q <= 1): the bound of the bucket it falls
        in, or ``max`` when that is smaller; 0.0 when there is no duration."""
        if not 0 < q <= 1:
            raise ValueError(f"quantile({q!r}): q must be in (0, 1]")
        need = q * self.count
        seen = 0
        for i, n in enumerate(self.buckets):
            seen += n
            if n and seen >= need:
                return min(BUCKET_BOUNDS[i], self.max) if i < len(BUCKET_BOUNDS) else self.max
        return 0.0


@dataclass(frozen=True, slots=True)
class PartitionSignals:
    """What one partition counted (the counters of ``SchedulerStats`` and more), its versions
    waiting and running now, and its durations."""

    submitted: int = 0  # versions made by submit()
    retried: int = 0  # versions made by retry()
    claimed: int = 0  # versions handed out by ready()
    succeeded: int = 0
    failed: int = 0  # function failures: fail()
    cancelled: int = 0  # versions made cancelled: cancel(), acknowledge_cancel(), close()
    blocked: int = 0  # versions made blocked
    cycles_reported: int = 0  # calls refused with CycleError
    claim_conflicts: int = 0  # ready() calls cut short by the concurrency limit
    duplicate_callbacks: int = 0  # a report on an already terminal version
    stale_callbacks: int = 0  # a report naming an old generation
    stopped: int = 0  # of the cancelled: those that were running (acknowledge_cancel())
    replaced: int = 0  # pending or ready versions replaced by a resubmission
    unknown_deps: int = 0  # calls refused with UnknownDependencyError
    edges_refused: int = 0  # add_deps() refused: the version was no longer pending
    lease_expiries: int = 0  # leases that expired (a durable store's; 0 in memory)
    waiting: int = 0  # current versions pending or ready now
    running: int = 0  # current versions running now
    ready_wait: DurationTail = DurationTail()  # became ready -> claimed
    run_time: DurationTail = DurationTail()  # claimed -> succeeded, failed or cancelled
    # versions made ready or blocked by a dependency's end (complete(), fail(), cancel(),
    # acknowledge_cancel(), close(), or the blocking they spread), one for each time
    propagated: int = 0
    # a dependency's end -> a version it made ready or blocked became so;
    # propagation.count == propagated
    propagation: DurationTail = DurationTail()

    @property
    def config_errors(self) -> int:
        """Graph configuration errors: cycles, unknown dependencies, edges refused."""
        return self.cycles_reported + self.unknown_deps + self.edges_refused

    def counters(self) -> dict[str, int]:
        """The counters by name (:data:`COUNTERS`), the gauges ``waiting`` and ``running``,
        ``propagated``, and the durations' counts as ``ready_wait.count``,
        ``run_time.count`` and ``propagation.count``."""
        shown = {name: getattr(self, name)
                 for name in (*COUNTERS, "waiting", "running", "propagated")}
        return {**shown, "ready_wait.count": self.ready_wait.count,
                "run_time.count": self.run_time.count,
                "propagation.count": self.propagation.count}


@dataclass(frozen=True)
class Signals:
    """The partitions of one scheduler (``TaskScheduler.signals()``), by key: a
    ``(task_type, tenant)`` pair, or :data:`OVERFLOW`. At most ``max_partitions`` pairs."""

    max_partitions: int
    partitions: Mapping[Hashable, PartitionSignals] = field(default_factory=dict)

    def total(self, name: str) -> int:
        """The sum over the partitions of one entry of :meth:`PartitionSignals.counters`."""
        return sum(p.counters()[name] for p in self.partitions.values())


def task_type_of(fn: object) -> str:
    """The task type of a function: ``"module:qualname"``, as the durable store names
    functions (any callable: a lambda's qualname says ``<lambda>``)."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


class _Durations:
    """A DurationTail being gathered."""

    __slots__ = ("buckets", "count", "max", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.buckets = [0] * _BUCKETS

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds
        self.buckets[bisect.bisect_left(BUCKET_BOUNDS, seconds)] += 1

    def frozen(self) -> DurationTail:
        return DurationTail(self.count, self.total, self.max, tuple(self.buckets))


class _Tally:
    """The counters and durations of one partition being gathered."""

    __slots__ = ("counts", "propagated", "propagation", "ready_wait", "run_time")

    def __init__(self) -> None:
        self.counts = [0] * len(COUNTERS)
        self.ready_wait = _Durations()
        self.run_time = _Durations()
        self.propagated = 0  # == propagation.count
        self.propagation = _Durations()


class SignalBook:
    """The partitions of one scheduler being charged: a TaskScheduler's, under its lock, as
    its steps happen; a DurableScheduler's, from the rows of one read transaction.

    A key is given a partition the first time it is charged while fewer than
    ``max_partitions`` are kept, and keeps it; any other key is charged to :data:`OVERFLOW`.
    """

    __slots__ = ("_parts", "max_partitions")

    def __init__(self, max_partitions: int) -> None:
        self.max_partitions = max_partitions
        self._parts: dict[Hashable, _Tally] = {}

    def _tally(self, key: Hashable) -> _Tally:
        parts = self._parts
        tally = parts.get(key)
        if tally is None:
            if len(parts) - (OVERFLOW in parts) >= self.max_partitions:
                key = OVERFLOW
                tally = parts.get(key)
            if tally is None:
                tally = parts[key] = _Tally()
        return tally

    def count(self, key: Hashable, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name`` of ``key``'s partition."""
        self._tally(key).counts[_INDEX[name]] += n

    def claimed(self, key: Hashable, waited: float) -> None:
        """A version of ``key`` was claimed after ``waited`` seconds ready."""
        tally = self._tally(key)
        tally.counts[_INDEX["claimed"]] += 1
        tally.ready_wait.add(waited)

    def ended(self, key: Hashable, name: str, ran: float) -> None:
        """A running version of ``key`` ended (``name``: succeeded, failed or stopped) after
        ``ran`` seconds; a stopped one is cancelled too."""
        tally = self._tally(key)
        tally.counts[_INDEX[name]] += 1
        if name == "stopped":
            tally.counts[_INDEX["cancelled"]] += 1
        tally.run_time.add(ran)

    def propagated(self, key: Hashable, seconds: float) -> None:
        """A version of ``key`` was made ready or blocked ``seconds`` after the end of the
        dependency that settled it."""
        tally = self._tally(key)
        tally.propagated += 1
        tally.propagation.add(seconds)

    def signals(self, gauges: Mapping[Hashable, tuple[int, int]]) -> Signals:
        """The partitions now; ``gauges``: key -> (waiting, running) of the current versions,
        each key sent where its charges go."""
        now: dict[Hashable, list[int]] = {}
        for key, (waiting, running) in gauges.items():
            if key not in self._parts:  # its versions were charged to the overflow
                key = OVERFLOW
            both = now.setdefault(key, [0, 0])
            both[0] += waiting
            both[1] += running
        parts: dict[Hashable, PartitionSignals] = {}
        for key, tally in self._parts.items():
            waiting, running = now.get(key, (0, 0))
            parts[key] = PartitionSignals(
                **dict(zip(COUNTERS, tally.counts, strict=True)), waiting=waiting,
                running=running, ready_wait=tally.ready_wait.frozen(),
                run_time=tally.run_time.frozen(), propagated=tally.propagated,
                propagation=tally.propagation.frozen())
        return Signals(self.max_partitions, parts)
