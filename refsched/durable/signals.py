"""Signals of a DurableScheduler per task type and tenant, read from its rows.

No step writes a counter shared by every step for them: each version's row carries its
partition (``task_type``, ``tenant``), whether ``retry()`` made it, its first claim's time and
its lease expiries, written by the steps that write that row anyway; a version taken out of
the ``task`` table (replaced by a resubmission, or given a new version by ``retry()``) leaves
one row in ``past_version``, inserted by that step. The calls that change no version (a report
refused by fencing or repeated, a graph configuration error) are counted in ``refusal``, one
row per partition and kind, written only on those paths. :func:`read_signals` charges every
row to a :class:`~refsched.dag.signals.SignalBook`, in the order the versions were made, so
the first ``max_partitions`` keys made keep a partition (docs/durable.md, Signals).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from refsched.dag.signals import SignalBook, Signals

__all__ = [
    "ARCHIVE",
    "PAST_COLUMNS",
    "UPSERT_REFUSAL",
    "encode_tenant",
    "partition_of",
    "read_signals",
    "refusal_key",
]

#: The signal columns of a version, in the order :func:`read_signals` reads them.
PAST_COLUMNS = ("task_type, tenant, seq, retried, state, attempt, ended_attempt, expiries, "
                "became_ready_at, first_claimed_at, ended_at")

#: Keep the signal columns of the version of one id (``?``) before it leaves the task table.
ARCHIVE = (f"INSERT INTO past_version ({PAST_COLUMNS}) SELECT {PAST_COLUMNS} FROM task "
           "WHERE id = ?")

#: Count ``n`` refusals of one kind in one partition (``?``: task_type, tenant, kind, n).
UPSERT_REFUSAL = ("INSERT INTO refusal (task_type, tenant, kind, n) VALUES (?, ?, ?, ?) "
                  "ON CONFLICT (task_type, tenant, kind) DO UPDATE SET n = refusal.n + "
                  "excluded.n")

#: The queries of :func:`read_signals` on a store of schema version 6 or later.
QUERIES = (f"SELECT {PAST_COLUMNS} FROM task ORDER BY seq",
           f"SELECT {PAST_COLUMNS} FROM past_version ORDER BY seq",
           "SELECT task_type, tenant, kind, n FROM refusal ORDER BY task_type, tenant, kind")

#: The same rows of a store older than signals (read as it is): every version unlabelled and
#: submitted, its first claim its current attempt's, no past version, no refusal.
OLD_QUERIES = ("SELECT NULL, NULL, seq, 0, state, attempt, ended_attempt, CASE WHEN attempt > 0 "
               "THEN attempt - 1 ELSE 0 END, became_ready_at, claimed_at, ended_at FROM task "
               "ORDER BY seq",)


def encode_tenant(tenant: str | int | None) -> str | None:
    """A tenant as the ``tenant`` column keeps it: JSON text (so 1 and "1" stay apart)."""
    return None if tenant is None else json.dumps(tenant)


def partition_of(task_type: str | None, tenant: str | None) -> tuple[str | None, Hashable]:
    """The partition key of a row's ``task_type`` and ``tenant`` columns."""
    return (task_type, None if tenant is None else json.loads(tenant))


def refusal_key(task_type: str | None, tenant: str | None) -> tuple[str, str]:
    """The ``refusal`` row's key of a version's columns: no NULL in a primary key."""
    return ("" if task_type is None else task_type, "null" if tenant is None else tenant)


def _ran(start: float | None, end: float | None) -> float:
    """Seconds from ``start`` to ``end`` on the store's clock; 0.0 when either is unknown (a
    version of a store older than signals)."""
    return max(0.0, end - start) if start is not None and end is not None else 0.0


def _charge(book: SignalBook, row: Sequence[Any], current: bool,
            gauges: dict[Hashable, list[int]]) -> None:
    (task_type, tenant, _, retried, state, attempt, ended_attempt, expiries, ready_at,
     claimed_at, ended_at) = row
    key = partition_of(task_type, tenant)
    book.count(key, "retried" if retried else "submitted")
    if attempt:
        book.claimed(key, _ran(ready_at, claimed_at))
    if expiries:
        book.count(key, "lease_expiries", int(expiries))
    if state in ("succeeded", "failed"):  # from running: a claimed version
        if attempt:
            book.ended(key, state, _ran(claimed_at, ended_at))
        else:
            book.count(key, state)
    elif state == "cancelled" and ended_attempt is not None:
        book.ended(key, "stopped", _ran(claimed_at, ended_at))
    elif state in ("cancelled", "blocked"):
        book.count(key, state)
    elif not current:  # waiting when it was replaced (a running version never is)
        book.count(key, "replaced")
    else:
        both = gauges.setdefault(key, [0, 0])
        both[state == "running"] += 1


def read_signals(results: Sequence[Iterable[Sequence[Any]]], max_partitions: int) -> Signals:
    """The signals of the rows of :data:`QUERIES` (or :data:`OLD_QUERIES`), read in one
    transaction: every version, current or past, in the order it was made, then the
    refusals."""
    book = SignalBook(max_partitions)
    gauges: dict[Hashable, list[int]] = {}
    current = ((row[2], 0, row) for row in results[0])
    past = ((row[2], 1, row) for row in (results[1] if len(results) > 1 else ()))
    for _, is_past, row in heapq.merge(current, past, key=lambda x: (x[0], x[1])):
        _charge(book, row, not is_past, gauges)
    for task_type, tenant, kind, n in (results[2] if len(results) > 2 else ()):
        book.count(partition_of(task_type or None, None if tenant == "null" else tenant),
                   kind, int(n))
    return book.signals({k: (w, r) for k, (w, r) in gauges.items()})
