"""Mutation testing of the verification layers: seeded bugs in the schedulers and their runners.

Each :class:`Mutant` is a source patch of one production module (``refsched/dag/scheduler.py``,
``runner.py``, ``timer.py``, ``timer_runner.py``, ``pool.py``, ``durable/scheduler.py``,
``durable/store.py``, ``durable/postgres.py`` or ``durable/steps_postgres.py``, whose text is the
PostgreSQL store's server-side functions): an exact snippet of the current file (it must occur
there exactly once), its replacement, and the bug it plants. A mutant is run in fresh subprocesses,
one per layer, whose import system serves the patched source as the module (the files themselves
are never written; the Python processes a layer starts, such as durable worker processes, are
served the patched module too), against the layers cheapest first, each on the system the mutated
module belongs to:

``unit``      the unit tests of that scheduler and its runner (``pytest -x``);
``lockstep``  the Hypothesis lock-step machine against the reference model (``run_lockstep``,
              ``run_timer_lockstep``, ``run_pool_lockstep``, ``run_durable_lockstep``),
              derandomized and unshrunk;
``replay``    the system's ITF corpus in ``traces/`` replayed against the scheduler, the pool or
              the durable store (``replay``);
``tlc``       real runs judged by TLC: recorded multi-threaded Runner runs (``validate_trace``),
              and the histories of durable soak runs, worker processes under SIGKILL and
              SIGSTOP (``validate_history``);
``explore``   the interleaving explorer's scenarios, built on the mutant classes (``explore``).

A layer kills a mutant only by its own verdict (a failing test, a disagreement, a divergence, a
rejected trace, a failing schedule); a layer that runs out of time or crashes says so and does not
count. A mutant stops at the first layer that kills it unless every layer is asked for. A patched
module that cannot be imported is an invalid mutant: the catalogue is wrong, not the checks.

    python -m refsched.verify.mutants                     # the whole catalogue, first kill
    python -m refsched.verify.mutants double_decrement --all-layers --json
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = [
    "CATALOGUE",
    "LAYERS",
    "Budget",
    "Layer",
    "LayerResult",
    "Mutant",
    "MutantResult",
    "PatchError",
    "RunReport",
    "format_markdown",
    "format_text",
    "main",
    "patched_source",
    "run",
    "run_mutant",
]

_PACKAGE = Path(__file__).resolve().parent.parent  # refsched/
_PROJECT = _PACKAGE.parent
MODULES = {"scheduler": "refsched.dag.scheduler", "runner": "refsched.dag.runner",
           "timer": "refsched.timer.scheduler", "timer_runner": "refsched.timer.runner",
           "pool": "refsched.pool.pool", "durable": "refsched.durable.scheduler",
           "durable_store": "refsched.durable.store",
           "durable_postgres": "refsched.durable.postgres",
           "durable_steps": "refsched.durable.steps_postgres"}

Report = Callable[[str], None]


# -- mutants ----------------------------------------------------------------------------------

class PatchError(ValueError):
    """A mutant whose snippet does not occur exactly once in the current source."""


@dataclass(frozen=True)
class Mutant:
    """One seeded bug: replace ``original`` (found exactly once in ``file``) by ``replacement``."""

    name: str
    file: str  # a key of MODULES: "scheduler", "runner", ..., "durable", "durable_store"
    original: str
    replacement: str
    description: str  # the bug, in one line
    # non-empty: no behaviour tells the mutant from the original, and this says why
    equivalent: str = ""
    # non-empty: a known survivor of every layer, and the check that would kill it
    wanted_check: str = ""


def source_path(file: str) -> Path:
    """The production source file a mutant of ``file`` (a key of ``MODULES``) patches."""
    if file not in MODULES:
        raise PatchError(f"unknown file {file!r}; known: {', '.join(MODULES)}")
    return _PROJECT.joinpath(*MODULES[file].split(".")).with_suffix(".py")


def relative_path(file: str) -> str:
    """``source_path(file)`` as the project names it: ``refsched/durable/store.py``."""
    return source_path(file).relative_to(_PROJECT).as_posix()


def patched_source(mutant: Mutant, source: str | None = None) -> str:
    """The source of ``mutant.file`` with the patch applied; ``PatchError`` unless it fits once."""
    text = source_path(mutant.file).read_text(encoding="utf-8") if source is None else source
    count = text.count(mutant.original)
    if count != 1:
        raise PatchError(f"{mutant.name}: the snippet occurs {count} times in "
                         f"{relative_path(mutant.file)}, not once")
    if mutant.original == mutant.replacement:
        raise PatchError(f"{mutant.name}: the replacement is the snippet itself")
    return text.replace(mutant.original, mutant.replacement)


def _m(name: str, file: str, description: str, original: str, replacement: str,
       equivalent: str = "", wanted_check: str = "") -> Mutant:
    return Mutant(name, file, original, replacement, description, equivalent, wanted_check)


_S, _R, _T, _TR, _P = "scheduler", "runner", "timer", "timer_runner", "pool"
_D, _DS, _DP, _DF = "durable", "durable_store", "durable_postgres", "durable_steps"
# The system each file's mutants are judged on, where it is not the TaskScheduler.
_SYSTEM_OF = {_T: "timer", _TR: "timer", _P: "pool", _D: "durable", _DS: "durable",
              _DP: "durable", _DF: "durable"}

CATALOGUE: tuple[Mutant, ...] = (
    # -- TaskScheduler: locking ----------------------------------------------------------------
    _m("claim_outside_lock", _S, "ready() claims under a lock of its own, not the scheduler's",
       """        lock = self._lock
        lock.acquire()
        try:
            if not self._started:
                raise InvalidTransitionError("ready(): the scheduler is not started")""",
       """        lock = sync.Lock()
        lock.acquire()
        try:
            if not self._started:
                raise InvalidTransitionError("ready(): the scheduler is not started")""",
       ),
    _m("claim_check_then_act", _S,
       "ready() counts the free slots and ready versions, drops the lock, then claims that many",
       """            heap = self._heap
            state = self._state
            claimed = self._claims""",
       """            lock.release()
            lock.acquire()
            heap = self._heap
            state = self._state
            claimed = self._claims"""),
    _m("dependents_released_before_state_write", _S,
       "complete() readies the dependents, drops the lock, and only then marks the version "
       "succeeded",
       """                if newly_ready:
                    self._ready_count += newly_ready
            if self._recorder is not None:
                self._record("Complete",""",
       """                if newly_ready:
                    self._ready_count += newly_ready
            state[row] = _RUNNING
            lock.release()
            lock.acquire()
            state[row] = _SUCCEEDED
            if self._recorder is not None:
                self._record("Complete","""),
    _m("success_counted_outside_lock", _S,
       "complete() counts the success after releasing the lock (a lost update under contention)",
       """            self._running -= 1
            self._n_succeeded += 1""",
       """            self._running -= 1
            lock.release()
            self._n_succeeded += 1
            lock.acquire()"""),
    # -- TaskScheduler: counts and order -------------------------------------------------------
    _m("double_decrement", _S, "complete() decrements a dependent's remaining count twice",
       """                        left = remaining[x] - 1""",
       """                        left = remaining[x] - 2 if remaining[x] > 1 else 0"""),
    _m("concurrency_off_by_one", _S, "ready() allows max_concurrency + 1 running versions",
       """            free = self._max - self._running""",
       """            free = self._max - self._running + 1"""),
    _m("complete_keeps_running_count", _S, "complete() does not give the slot back",
       """            self._running -= 1
            self._n_succeeded += 1""",
       """            self._n_succeeded += 1"""),
    _m("ready_order_not_by_seq", _S,
       "ready() pops the heap's last entry instead of the smallest seq",
       """                    row = _heappop(heap)""",
       """                    row = heap.pop()"""),
    _m("claim_skips_state_check", _S,
       "ready() claims a stale heap entry whose version was cancelled or blocked meanwhile",
       """                if state[row] != _READY:""",
       """                if state[row] in (_RUNNING, _SUCCEEDED, _FAILED, _DEAD):"""),
    _m("cancel_keeps_ready_count", _S, "cancel() of a ready version leaves the ready count",
       """            if st <= _READY:
                if st == _READY:
                    self._ready_count -= 1""",
       """            if st <= _READY:
                if st == _READY:
                    pass"""),
    _m("close_keeps_ready_count", _S, "close(cancel_pending) leaves the ready count as it was",
       """                    self._n_cancelled += cancelled
                    self._ready_count = 0""",
       """                    self._n_cancelled += cancelled"""),
    _m("complete_visits_ready_dependents", _S,
       "complete() steps ready dependents as well as pending ones",
       """                for x in dependents:
                    if state[x] == _PENDING:""",
       """                for x in dependents:
                    if state[x] <= _READY:""",
       equivalent="a dependent of a running version has a dependency not succeeded, so it is "
                  "pending (or dead), never ready: both guards pick the same versions"),
    # -- TaskScheduler: generations and callbacks ----------------------------------------------
    _m("complete_skips_generation_check", _S,
       "complete() of an older generation completes the running current version",
       """ or self._gen[row] != generation
                    or state[row] != _RUNNING):""",
       """
                    or state[row] != _RUNNING):"""),
    _m("stale_generation_accepted", _S,
       "fail(), acknowledge_cancel() and cancel(t, g) accept an older generation",
       """        if generation != current:
            self._n_stale += 1""",
       """        if generation > current:
            self._n_stale += 1"""),
    _m("cancel_of_running_ignored", _S, "cancel() of a running version sets no request",
       """            if st == _RUNNING and row not in self._cancel_requested:""",
       """            if st == _RUNNING and row in self._cancel_requested:"""),
    _m("resubmit_over_running", _S, "submit() replaces a running version under its worker",
       """            if old is not None and state[old] == _RUNNING:
                _check_deps(task_id, deps, dep_t)""",
       """            if (old is not None and state[old] == _RUNNING
                    and old in self._cancel_requested):
                _check_deps(task_id, deps, dep_t)"""),
    _m("submit_accepts_a_repeated_dep", _S,
       "submit() takes a dep given twice as one edge instead of refusing the call",
       """                if len(dep_rows) != len(dep_t) or None in dep_rows or old in dep_rows:""",
       """                if None in dep_rows or old in dep_rows:"""),
    _m("submit_accepts_itself_as_dep", _S,
       "a resubmitted task may depend on itself: a cycle through its own replaced version",
       """                if len(dep_rows) != len(dep_t) or None in dep_rows or old in dep_rows:""",
       """                if len(dep_rows) != len(dep_t) or None in dep_rows:"""),
    _m("resubmit_keeps_dependents_ready", _S,
       "replacing a succeeded version leaves its ready dependents ready",
       """                    if old_state == _SUCCEEDED:""",
       """                    if old_state == _FAILED:"""),
    # -- TaskScheduler: blocking (Settle) ------------------------------------------------------
    _m("settle_one_level_early", _S,
       "blocking stops one level early: dependents of the second level stay pending",
       """        for m in order:  # grows while iterating: breadth-first""",
       """        for m in list(order):  # grows while iterating: breadth-first"""),
    _m("settle_direct_dependents_only", _S, "blocking reaches only the direct dependents",
       """        for m in order:  # grows while iterating: breadth-first""",
       """        for m in order[:0]:  # grows while iterating: breadth-first"""),
    _m("settle_blocks_running", _S, "blocking spreads into running versions beyond the first level",
       """        for m in order:  # grows while iterating: breadth-first
            for x in dependents[m] or ():
                st = state[x]
                if st <= _READY:""",
       """        for m in order:  # grows while iterating: breadth-first
            for x in dependents[m] or ():
                st = state[x]
                if st <= _RUNNING:"""),
    _m("blocked_by_latest_cause", _S,
       "a blocked version names its dead dependency with the largest seq, not the smallest",
       """(cause < 0 or r < cause)""",
       """(cause < 0 or r > cause)"""),
    _m("acknowledge_cancel_skips_settle", _S,
       "a cancelled running version leaves its dependents pending",
       """                self._endings.append((self._ids[row], self._gen[row], _STATES[to]))
            self._settle((row,), ())""",
       """                self._endings.append((self._ids[row], self._gen[row], _STATES[to]))
            if to == _FAILED:
                self._settle((row,), ())"""),
    _m("submit_onto_dead_dep_not_blocked", _S,
       "a version submitted onto a failed dependency stays pending",
       """            if dead:
                self._settle((), (row,))""",
       """            if dead and remaining > 1:
                self._settle((), (row,))"""),
    # -- TaskScheduler: retry, start, close ----------------------------------------------------
    _m("retry_forgets_blocked_descendants", _S,
       "retry() renews only the task, not the versions blocked because of it",
       """            for m in members:  # grows while iterating""",
       """            for m in members[:0]:  # grows while iterating"""),
    _m("retry_renews_direct_children_only", _S,
       "retry() renews the versions blocked by the task but not those blocked through them",
       """                        if blocked_by.get(x) == m and x != root:""",
       """                        if blocked_by.get(x) == m and x != root and m == root:"""),
    _m("retry_of_succeeded", _S, "retry() accepts a succeeded version",
       """            if state[root] < _FAILED:
                raise InvalidTransitionError(""",
       """            if state[root] < _SUCCEEDED:
                raise InvalidTransitionError("""),
    _m("retry_keeps_seq_order_flag", _S,
       "retry() renumbers versions but keeps the graph marked seq-ordered",
       """            self._seq_ordered = False
            self._n_retried += len(members)""",
       """            self._n_retried += len(members)"""),
    _m("start_skips_cycle_search", _S, "start() searches for cycles only when none can exist",
       """            if not self._seq_ordered:
                cycles = _find_cycles(""",
       """            if self._seq_ordered:
                cycles = _find_cycles("""),
    _m("close_cancels_only_pending", _S, "close(cancel_pending) leaves ready versions ready",
       """                    for row, st in enumerate(state):  # in row order: seq order
                        if st <= _READY:""",
       """                    for row, st in enumerate(state):  # in row order: seq order
                        if st == _PENDING:"""),
    _m("close_drops_endings", _S,
       "close() cancels pending versions without reporting them as endings",
       """                            if endings is not None:
                                endings.append(""",
       """                            if endings is None:
                                endings.append("""),
    _m("close_counts_one_cancel", _S,
       "close(cancel_pending) adds one to the cancelled count, however many versions it cancels",
       """                    self._n_cancelled += cancelled""",
       """                    self._n_cancelled += 1 if cancelled else 0"""),
    # -- TaskScheduler: stats() ----------------------------------------------------------------
    _m("claimed_uncounts_stopped_runs", _S,
       "stats().claimed leaves out the versions that failed or acknowledged a cancel after "
       "their claim",
       """            claimed = self._running + self._n_succeeded + self._n_stopped""",
       """            claimed = self._running + self._n_succeeded"""),
    _m("claim_conflict_when_slots_suffice", _S,
       "ready() counts a claim conflict when the free slots are just enough for what it asks",
       """            if free < want:""",
       """            if free <= want:"""),
    # -- Runner ----------------------------------------------------------------------------------
    _m("settlements_uncounted_outside_lock", _R,
       "a worker takes back the settlements it applied before taking the runner lock",
       """            acquire(lock)  # not ``with``: once per task, and half the cost
            try:
                self._resolving -= applied
                applied = 0""",
       """            self._resolving -= applied
            acquire(lock)  # not ``with``: once per task, and half the cost
            try:
                applied = 0"""),
    _m("close_notifies_one_worker", _R, "close() wakes one idle worker instead of all",
       """                        out.append((future, _CANCEL, None))
                self._release_idle_locked()""",
       """                        out.append((future, _CANCEL, None))
                if self._idle_workers:
                    self._idle_workers.pop().put(None)"""),
    _m("close_drops_queued_claims", _R,
       "a worker that sees the runner closed leaves claimed versions in the queue",
       """                    if queue:
                        claim = queue.popleft()""",
       """                    if queue and not self._closed:
                        claim = queue.popleft()"""),
    _m("dispatch_wakes_one_too_few", _R,
       "submit()/start()/cancel() wake one worker fewer than there are claims (lost wake-up)",
       """        first = 1 if self_take else 0""",
       """        first = 1"""),
    _m("worker_skips_idle_notify", _R,
       "a worker that reported the last version does not wake wait() (lost wake-up)",
       """                self._resolving += len(out)
                if self._idle_waiters:
                    self._notify_idle_locked()
                if claim is None:""",
       """                self._resolving += len(out)
                if claim is None:"""),
    _m("wait_returns_while_pending", _R,
       "wait() returns once nothing is in flight, closed or not",
       """        return self._live == 0 or (self._closed and self._inflight == 0)""",
       """        return self._live == 0 or self._inflight == 0"""),
    _m("runner_limit_off_by_one", _R, "the Runner's scheduler allows max_workers + 1 claims",
       """TaskScheduler(max_workers, track_endings=True""",
       """TaskScheduler(max_workers + 1, track_endings=True"""),
    _m("runner_cancel_of_running_ignored", _R,
       "Runner.cancel() of a running version neither sets its token nor withdraws it",
       """            if state is _RUNNING and future is not None:""",
       """            if state is TaskState.READY and future is not None:"""),
    _m("runner_cancel_token_not_set", _R, "Runner.cancel() records the request but sets no token",
       """                token = self._tokens.get(key)
                if token is not None:
                    token._event.set()
                remote = self._exec_futures.get(key)""",
       """                token = self._tokens.get(key)
                remote = self._exec_futures.get(key)"""),
    _m("withdrawn_claim_reported_as_result", _R,
       "a claim cancelled before its worker took it is reported as succeeded",
       """                        outcome = (claim, _CANCEL, None)""",
       """                        outcome = (claim, _RESULT, None)"""),
    _m("failure_reported_as_success", _R, "a function that raised is reported with complete()",
       """                self._scheduler.fail(task_id, generation, value)""",
       """                self._scheduler.complete(task_id, generation, value)"""),
    _m("failed_future_never_resolved", _R, "the future of a version that failed is never set",
       """                out.append((future, _RESULT if state is _SUCCEEDED else _ERROR,
                            value if state is _SUCCEEDED else _as_exception(t, value)))
                continue""",
       """                if state is _SUCCEEDED:
                    out.append((future, _RESULT, value))
                continue"""),
    _m("stale_ending_settles_current_future", _R,
       "an ending of an older generation settles the current version's future",
       """            if future is None or future.generation != g:""",
       """            if future is None:""",
       equivalent="every action through the Runner renews its entries before it collects the "
                  "endings, so each ending it sees is of the current generation; only an "
                  "action taken on runner.scheduler directly, which the API forbids, could "
                  "tell"),
    _m("retry_members_not_renewed", _R,
       "Runner.retry() does not follow the versions renewed with the task",
       """                if current != self._tasks[member].generation:""",
       """                if current == self._tasks[member].generation:"""),
    _m("cancel_skips_dispatch", _R, "Runner.cancel() does not hand out claims afterwards",
       """            self._collect_locked(out, None, 0, None)
            self._dispatch_locked(False)
            self._resolving += len(out)
        if remote is not None:""",
       """            self._collect_locked(out, None, 0, None)
            self._resolving += len(out)
        if remote is not None:""",
       equivalent="a cancel frees no slot and readies no version (it can only block), so "
                  "nothing becomes claimable that was not claimed before it"),
    _m("idle_worker_not_handed_claims", _R,
       "claims beyond the reporter's own go to the shared queue though a worker is idle: no "
       "inbox is put to (lost wake-up)",
       """                if not idle:
                    self._queue.extend(claims[i:])
                    break
                idle.pop().put(claims[i])""",
       """                self._queue.extend(claims[i:])
                break"""),
    _m("future_waiter_uncounted", _R,
       "a thread waiting on a TaskFuture is not counted, so settling the result wakes nobody "
       "(lost wake-up)",
       """            runner._futures_waiting += 1
            try:
                self._condition.wait_for(self._is_done, timeout)
            finally:
                runner._futures_waiting -= 1""",
       """            self._condition.wait_for(self._is_done, timeout)"""),

    # -- TimerScheduler ------------------------------------------------------------------------
    _m("timer_priority_inverted", _T,
       "the heap orders equal times by lower priority first (sched's order), not higher",
       """            entry = (run_at, -priority, seq, task_id, version, slot)""",
       """            entry = (run_at, priority, seq, task_id, version, slot)"""),
    _m("timer_due_only_after_run_at", _T,
       "next() waits for an entry whose run_at is exactly now instead of handing it out",
       """                if run_at > now:
                    # Not due: it goes back as the sorted run's last entry, which it precedes""",
       """                if run_at >= now:
                    # Not due: it goes back as the sorted run's last entry, which it precedes"""),
    _m("timer_cancelled_entry_runs", _T,
       "next() drops superseded entries but hands out a cancelled version's entry",
       """                if tasks[task_id] is not entry or mark & _STATE != _PENDING:""",
       """                if tasks[task_id] is not entry:"""),
    _m("timer_supersede_not_counted_stale", _T,
       "a reschedule does not count the superseded entry as stale",
       """                if st == _PENDING:
                    # superseded: its entry is stale from now on
                    self._stale += 1""",
       """                if st == _PENDING:
                    # superseded: its entry is stale from now on
                    pass"""),
    _m("timer_rebuild_at_half", _T,
       "cancel() rebuilds the heap when stale entries are half of it, not more than half",
       """                n = len(self._heap) + len(self._sorted)
                if n > self._floor and 2 * stale > n:""",
       """                n = len(self._heap) + len(self._sorted)
                if n > self._floor and 2 * stale >= n:"""),
    _m("timer_cancel_forgets_stop_request", _T,
       "cancel() of a running version does not record the cooperative stop request",
       """            if st == _RUNNING and not mark & _CANCEL_REQUESTED:
                marks[slot] = mark | _CANCEL_REQUESTED""",
       """            if st == _RUNNING and not mark & _CANCEL_REQUESTED:
                pass"""),
    _m("timer_time_follows_clock_back", _T,
       "next() takes the clock's reading even when it is earlier than the scheduler's time",
       """            if clock_now > now:
                self._now = now = clock_now""",
       """            if clock_now != now:
                self._now = now = clock_now"""),
    _m("timer_stale_complete_accepted", _T,
       "complete() does not check that the version named is the current one",
       """            if (entry is None or version.__class__ is not int or entry[4] != version
                    or (mark := marks[slot := entry[5]]) & _STATE != _RUNNING):
                checked = self._check_callback("complete", task_id, version)""",
       """            if (entry is None or version.__class__ is not int
                    or (mark := marks[slot := entry[5]]) & _STATE != _RUNNING):
                checked = self._check_callback("complete", task_id, version)"""),
    _m("timer_close_keeps_pending", _T,
       "close() empties the heap but leaves the pending versions pending",
       """                    slot = entry[5]
                    marks[slot] += _TO_CANCELLED
                    payload[slot] = None""",
       """                    slot = entry[5]
                    payload[slot] = None"""),
    _m("timer_claim_outside_lock", _T,
       "next() claims under a lock of its own, not the scheduler's",
       """            clock_now = _reading(clock_now)  # not a finite float: converted, or NaN
        lock = self._lock
        lock.acquire()""",
       """            clock_now = _reading(clock_now)  # not a finite float: converted, or NaN
        lock = sync.Lock()
        lock.acquire()"""),
    _m("timer_claimed_uncounts_failed", _T,
       "stats().claimed leaves out the versions that failed after their claim",
       """                claimed=running + self._n_completed + self._n_failed,""",
       """                claimed=running + self._n_completed,"""),

    # -- TimerRunner ---------------------------------------------------------------------------
    _m("timer_runner_earlier_entry_no_wake", _TR,
       "schedule() does not wake the dispatcher when the new entry is due before its deadline",
       """            if deadline is not None and (at < deadline
                                         or (stale_at is not None and stale_at <= deadline)):
                self._poke_locked()""",
       """            if deadline is not None and (stale_at is not None and stale_at <= deadline):
                self._poke_locked()"""),
    _m("timer_runner_close_no_wake", _TR,
       "close() does not wake the dispatcher sleeping toward a far entry",
       """        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled""",
       """        self._deadline = None
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled"""),
    _m("timer_runner_one_worker_too_many", _TR,
       "the dispatcher claims while every worker is busy: max_workers + 1 functions can run",
       """                if self._busy >= self._max_workers:""",
       """                if self._busy > self._max_workers:"""),
    _m("timer_runner_cancelled_claim_runs", _TR,
       "a version cancelled after its claim but before its worker took it still runs",
       """                    stop = slot.stop
                    token = slot.token""",
       """                    stop = False
                    token = slot.token""",
       equivalent="whether a cancel lands before or after the worker takes the claim is "
                  "decided under the runner lock and seen by no caller: either way the version "
                  "was running when cancel() returned False, and its function may run, with "
                  "its token set, as a running version's may"),

    # -- WorkStealingPool ----------------------------------------------------------------------
    _m("pool_take_check_then_pop", _P,
       "a worker sees its deque non-empty, lets the lock go, then pops: a thief may take the "
       "task in between",
       """        own = self._deques[w]
        if own:
            task = own.pop()  # Spec: Pop(w)""",
       """        own = self._deques[w]
        if own:
            self._lock.release()
            self._lock.acquire()
            task = own.pop()  # Spec: Pop(w)"""),
    _m("pool_child_counted_late", _P,
       "a child is pushed, and counted in outstanding only in a later critical section: its "
       "parent's Finish can reach 0 first",
       """                self._outstanding += 1
                self._deques[w].append(task)
                if self._recorder is not None:
                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()""",
       """                self._deques[w].append(task)
                if self._recorder is not None:
                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()
                lock.release()
                lock.acquire()
                self._outstanding += 1"""),
    _m("pool_termination_wakes_one_waiter", _P,
       "termination notifies one thread waiting for it (notify), not all of them (notify_all)",
       """        self._parked.clear()
        self._terminated.notify_all()""",
       """        self._parked.clear()
        self._terminated.notify()"""),
    _m("pool_termination_wakes_one_worker", _P,
       "termination wakes one parked worker, not every one: the others never leave",
       """        for w in self._parked:
            self._wake[w].notify()
        self._parked.clear()""",
       """        for w in self._parked:
            self._wake[w].notify()
            break
        self._parked.clear()"""),
    _m("pool_terminates_on_empty_deques", _P,
       "a Finish terminates a draining pool once every deque is empty, though a task still runs",
       """        if self._outstanding == 0 and self._state is _DRAINING:""",
       """        if not any(self._deques) and self._state is _DRAINING:"""),
    _m("pool_pop_takes_top", _P,
       "the owner takes the oldest task of its own deque (FIFO), not the newest",
       """            task = own.pop()  # Spec: Pop(w)""",
       """            task = own.popleft()  # Spec: Pop(w)"""),
    _m("pool_steal_takes_bottom", _P,
       "a thief takes the newest task of the victim's deque, the end its owner works at",
       """                task = deques[victim].popleft()  # Spec: Steal(w, victim)""",
       """                task = deques[victim].pop()  # Spec: Steal(w, victim)"""),
    _m("pool_cancel_keeps_count", _P,
       "shutdown(cancel_futures=True) empties the deques but leaves the tasks counted",
       """        self._outstanding -= count
        if count and self._outstanding == 0:""",
       """        if count and self._outstanding == 0:"""),
    _m("pool_push_wakes_nobody", _P,
       "a push marks a parked worker as woken but does not notify it (a lost wake-up)",
       """        self._searching += 1
        self._wake[w].notify()
        return w""",
       """        self._searching += 1
        return w"""),
    _m("pool_waiting_task_does_not_help", _P,
       "result() inside a task blocks its worker instead of running other tasks",
       """        if self._state not in _DONE and self._pool._local.worker is not None:
            self._pool._help_until(self, timeout)
            timeout = 0
        return super().result(timeout)""",
       """        return super().result(timeout)"""),
    _m("pool_queue_lengths_skip_empty", _P,
       "stats().queue_lengths leaves out the empty deques: the lengths no longer line up with "
       "the workers",
       """                queue_lengths=tuple(len(dq) for dq in self._deques),""",
       """                queue_lengths=tuple(len(dq) for dq in self._deques if dq),"""),
    # -- DurableScheduler: fencing ---------------------------------------------------------------
    _m("durable_complete_ignores_attempt", _D,
       "a report is fenced by generation and worker only: a stale attempt of the same worker "
       "ends the version its re-claim holds",
       """"AND generation = ? AND attempt = ? AND state = 'running' AND \"""",
       """"AND generation = ? AND ? > 0 AND state = 'running' AND \""""),
    _m("durable_complete_ignores_holder", _D,
       "a report is accepted without a live lease: an expired attempt not yet re-claimed "
       "still ends the version",
       """"holder = ?", (state, lease.attempt, now, result, error, t,""",
       """"? IS NOT NULL", (state, lease.attempt, now, result, error, t,"""),
    _m("durable_stale_report_answered_as_repeat", _D,
       "a report of a stale attempt of an ended version is answered as a repeat, not refused",
       """        if (generation == lease.generation and ended_attempt == lease.attempt
                and state in _TERMINAL):""",
       """        if (generation == lease.generation and ended_attempt is not None
                and state in _TERMINAL):"""),
    _m("durable_heartbeat_revives_lost_lease", _D,
       "a heartbeat of an expired lease extends it instead of raising LeaseLostError",
       """                    and state == "running" and holder == lease.worker):
                raise LeaseLostError""",
       """                    and state == "running"):
                raise LeaseLostError"""),
    _m("durable_heartbeat_half_extension", _D,
       "a heartbeat extends the lease by half its length",
       """(tx.now() + seconds,""",
       """(tx.now() + seconds / 2,"""),
    _m("durable_heartbeat_hides_cancel", _D,
       "a heartbeat never says that a cancel was requested",
       """            return bool(cancel_requested)""",
       """            return False"""),

    # -- DurableScheduler: expiry and claims -----------------------------------------------------
    _m("durable_expiry_ignores_deadline", _D,
       "expiry is not conditional on the deadline: a live lease is taken from a working worker",
       """"holder IS NOT NULL AND deadline < ? ORDER BY seq\"""",
       """"holder IS NOT NULL AND deadline < ? + 1e9 ORDER BY seq\""""),
    _m("durable_expiry_keeps_holder", _D,
       "an expired lease keeps its holder: the version is never re-claimed, and the old "
       "attempt's report is still accepted",
       """tx.later("UPDATE task SET holder = NULL, deadline = NULL WHERE id = ?", (t,))""",
       """tx.later("UPDATE task SET deadline = NULL WHERE id = ?", (t,))"""),
    _m("durable_reclaim_past_max_attempts", _D,
       "an expiry never fails the version: a task that kills its workers is re-claimed for ever",
       """            if attempt < self._max_attempts:
                tx.later(""",
       """            if True:
                tx.later("""),
    _m("durable_claim_on_worker_clock", _D,
       "a claim reads the worker's clock, not the store's: deadlines are written and judged "
       "on two clocks",
       """            now = tx.now()
            if overdue:""",
       """            now = time.time()
            if overdue:"""),
    _m("durable_claim_one_over_concurrency", _D,
       "claims take one version more than max_concurrency allows",
       """                want = min(want, self._max - running)""",
       """                want = min(want, self._max + 1 - running)"""),
    _m("durable_claim_newest_first", _D,
       "claims take the ready versions of largest seq first",
       """"FROM task WHERE state = 'ready' ORDER BY seq LIMIT ?) \"""",
       """"FROM task WHERE state = 'ready' ORDER BY seq DESC LIMIT ?) \""""),
    _m("durable_claim_after_close", _D,
       "claims still take ready versions after close()",
       """            if want and not closed:""",
       """            if want:"""),

    # -- DurableScheduler: the graph -------------------------------------------------------------
    _m("durable_no_fan_in", _D,
       "a success counts for none of its pending dependents: they wait for ever",
       """"state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = ?)",""",
       """"state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = ? AND 0)","""),
    _m("durable_fail_does_not_block", _D,
       "a failure or an acknowledged cancel blocks none of its dependents",
       """            else:
                self._settle(tx, [t])
            return TaskState(state)""",
       """            return TaskState(state)"""),
    _m("durable_replaced_success_still_counts", _D,
       "resubmitting a succeeded task leaves its waiting dependents counting the old success",
       """            if old is not None and old[1] == "succeeded":""",
       """            if False:"""),
    _m("durable_submit_skips_cycle_check", _D,
       "a submit after start() does not look for a cycle through the new version",
       """                cycle = self._path_to(tx, dep_list, task_id)""",
       """                cycle = None"""),
    _m("durable_retry_keeps_attempt", _D,
       "retry() leaves the new version with the old version's attempts",
       """"remaining_deps = ?, blocked_by = NULL, cancel_requested = 0, attempt = 0, \"""",
       """"remaining_deps = ?, blocked_by = NULL, cancel_requested = 0, \""""),
    _m("durable_close_inverts_cancel_pending", _D,
       "close(cancel_pending) cancels the waiting versions exactly when it should not",
       """                if cancel_pending:
                    n = tx.run(""",
       """                if not cancel_pending:
                    n = tx.run("""),
    _m("durable_reclaims_uncounted", _D,
       "stats().reclaimed does not count the attempts taken after an expiry",
       """            self._count(tx, "reclaimed", len(taken))""",
       """            self._count(tx, "reclaimed", 0)"""),

    # -- the SQLite store ------------------------------------------------------------------------
    _m("durable_store_deferred_begin", _DS,
       "a transaction that writes begins deferred: it reads, then fails to upgrade to the write "
       "lock when another process wrote in between",
       """                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")""",
       """                conn.execute("BEGIN")"""),
    _m("durable_store_wall_clock_only", _DS,
       "a virtual-clock store still reads the wall clock: tick() moves no deadline",
       """        self.clock_sql = _VIRTUAL_NOW""",
       """        self.clock_sql = _WALL_NOW"""),

    # -- the PostgreSQL store and its server-side steps ------------------------------------------
    _m("durable_pg_keeps_stale_wakeups", _DP,
       "notifications that arrived before a claim looked still wake the next wait: idle "
       "workers keep looking for what they have already taken",
       """                for _ in self._listener.notifies(timeout=0.0):
                    pass""",
       """                pass"""),
    _m("durable_pg_sends_to_ended_connection", _DP,
       "a step is sent on a pooled connection the server has ended: the first step after a "
       "server restart fails",
       """            ready, _, _ = select.select([conn.pgconn.socket], [], [], 0)""",
       """            ready = []"""),
    _m("durable_steps_claim_newest_first", _DF,
       "the server-side claim takes the ready versions of largest seq first",
       """WHERE id IN (SELECT id FROM task WHERE state = 'ready' ORDER BY seq LIMIT room)""",
       """WHERE id IN (SELECT id FROM task WHERE state = 'ready' ORDER BY seq DESC LIMIT room)"""),
    _m("durable_steps_claim_skips_expiry", _DF,
       "the server-side claim takes ready versions while a lease is past its deadline: the "
       "dead worker's version waits until nothing else is ready",
       """            OR EXISTS (SELECT 1 FROM task WHERE state = 'running'
                       AND (holder IS NULL OR deadline < now_)) THEN""",
       """            THEN"""),
    _m("durable_steps_claim_one_over_concurrency", _DF,
       "the server-side claim takes one version more than max_concurrency allows",
       """room := least(p_want, p_max - (SELECT""",
       """room := least(p_want, p_max + 1 - (SELECT"""),
    _m("durable_steps_complete_ignores_attempt", _DF,
       "the server-side complete is fenced by generation and worker only",
       """     WHERE id = p_task AND generation = p_generation AND attempt = p_attempt""",
       """     WHERE id = p_task AND generation = p_generation"""),
    _m("durable_steps_no_fan_in", _DF,
       "a success completed on the server counts for none of its pending dependents",
       """     WHERE state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = p_task);
    PERFORM refsched_wake""",
       """     WHERE false;
    PERFORM refsched_wake"""),
    _m("durable_steps_replaced_success_still_counts", _DF,
       "a submit on the server that replaces a success leaves the waiting dependents counting it",
       """    IF old_state = 'succeeded' THEN""",
       """    IF false THEN"""),
    _m("durable_steps_wake_whenever", _DF,
       "every step that may make a version claimable wakes the idle workers, claimable or not",
       """    IF refsched_claimable(p_virtual, p_max) THEN""",
       """    IF true THEN"""),
)

# Wake-ups and notifications: each bug leaves a thread waiting for an event that happened.
# The wake-up tests (tests/<system>/test_wakeups.py) block a thread first, then make the one change
# that must release it.
_WAKEUPS: tuple[Mutant, ...] = (
    _m('runner_close_releases_no_idle_worker', _R, 'close() does not send the idle workers away',
       """                        out.append((future, _CANCEL, None))
                self._release_idle_locked()""",
       """                        out.append((future, _CANCEL, None))"""),
    _m('runner_break_releases_no_idle_worker', _R,
       'a runner stopped on its own failure keeps its idle workers',
       """                out.append((future, _ERROR, error))
        self._release_idle_locked()""",
       """                out.append((future, _ERROR, error))"""),
    _m('runner_settle_no_idle_notify', _R,
       '_settle() does not wake wait()/close() after the settlements it applied',
       """            self._resolving -= len(out)
            if self._idle_waiters:
                self._notify_idle_locked()""",
       """            self._resolving -= len(out)"""),
    _m('runner_idle_notify_one', _R, 'wait()/close() waiters: notify one, not all',
       """            self._idle.notify_all()""",
       """            self._idle.notify()"""),
    _m('runner_idle_notify_needs_both', _R,
       'idle notify only when no version is live AND none in flight',
       """        if self._resolving == 0 and (self._live == 0 or self._inflight == 0):""",
       """        if self._resolving == 0 and (self._live == 0 and self._inflight == 0):"""),
    _m('runner_idle_notify_ignores_resolving', _R,
       'idle notify while settlements are still being applied, never after',
       """        if self._resolving == 0 and (self._live == 0 or self._inflight == 0):""",
       """        if self._resolving > 0 and (self._live == 0 or self._inflight == 0):"""),
    _m('runner_wait_uncounted', _R, 'wait() does not count itself among the idle waiters',
       """        with self._lock:
            self._idle_waiters += 1
            try:
                self._idle.wait_for(self._quiet, seconds)""",
       """        with self._lock:
            try:
                self._idle.wait_for(self._quiet, seconds)"""),
    _m('runner_close_wait_uncounted', _R, 'close() does not count itself among the idle waiters',
       """            self._idle_waiters += 1
            try:
                self._idle.wait_for(self._all_returned, seconds)""",
       """            try:
                self._idle.wait_for(self._all_returned, seconds)"""),
    _m('runner_futures_notify_one', _R,
       'settling a result notifies one future waiter, not all (shared condition)',
       """                    if self._futures_waiting:
                        self._futures_condition.notify_all()""",
       """                    if self._futures_waiting:
                        self._futures_condition.notify()"""),
    _m('runner_futures_no_notify', _R, 'settling a result notifies nobody',
       """                    if self._futures_waiting:
                        self._futures_condition.notify_all()""",
       """                    pass"""),
    _m('runner_future_wait_no_recheck', _R,
       'TaskFuture waits once on the shared condition, no re-check',
       """                self._condition.wait_for(self._is_done, timeout)""",
       """                self._condition.wait(timeout)"""),
    _m('runner_token_not_set_when_requested_early', _R,
       'a cancel requested before the token was made is forgotten',
       """            if key in self._cancel_requested:
                token._event.set()""",
       """            if key in self._cancel_requested:
                pass"""),
    _m('runner_submit_after_start_no_dispatch', _R, 'a submission after start() claims nothing',
       """            self._collect_locked(out, None, 0, None)
            self._dispatch_locked(False)
        self._resolving += len(out)""",
       """            self._collect_locked(out, None, 0, None)
        self._resolving += len(out)"""),
    _m('runner_start_no_dispatch', _R, 'start() claims nothing (the workers wait)',
       """                self._threads.append(thread)
            self._dispatch_locked(False)""",
       """                self._threads.append(thread)"""),
    _m('runner_report_drops_self_take', _R,
       'the claim a reporting worker should take itself is dropped',
       """        return self._dispatch_locked(True)""",
       """        self._dispatch_locked(True)
        return None"""),
    _m('runner_idle_with_uncounted_settlements', _R,
       'a worker with settlements not yet counted goes idle',
       """                    elif not out and not self._closed:""",
       """                    elif not self._closed:"""),
    _m('runner_dispatch_pops_front_idle', _R, 'claims handed to the first idle worker (order only)',
       """                idle.pop().put(claims[i])""",
       """                idle.pop(0).put(claims[i])""",
       equivalent='only which idle worker takes the claim changes; every idle worker is alike'),
    _m('runner_worker_idle_when_closed', _R,
       'a worker goes idle after close (nobody will release it)',
       """                    elif not out and not self._closed:""",
       """                    elif not out:"""),
    _m('timer_runner_cancel_head_no_poke', _TR,
       'cancel of the entry the dispatcher sleeps toward does not wake it',
       """                    if deadline is not None and slot.run_at <= deadline:
                        self._poke_locked()""",
       """                    if deadline is not None and slot.run_at < deadline - 1e300:
                        self._poke_locked()"""),
    _m('timer_runner_poke_no_notify', _TR,
       'a poke sets the flag but does not notify the sleeping dispatcher',
       """        self._poke = True
        self._wake.notify()""",
       """        self._poke = True"""),
    _m('timer_runner_supersede_no_poke', _TR,
       'a supersede of the entry slept toward does not wake the dispatcher',
       """            if deadline is not None and (at < deadline
                                         or (stale_at is not None and stale_at <= deadline)):""",
       """            if deadline is not None and at < deadline:"""),
    _m('timer_runner_report_no_slot_wake', _TR,
       'a worker that reports does not wake the dispatcher waiting for a slot',
       """        slot.stop = False
        if self._slot_wanted:
            self._wake.notify()""",
       """        slot.stop = False"""),
    _m('timer_runner_report_no_idle_wake_when_closed', _TR,
       'a worker that reports after close does not wake close()',
       """            self._wake.notify()
        if self._closed:
            self._idle.notify_all()""",
       """            self._wake.notify()"""),
    _m('timer_runner_queue_no_work_notify', _TR, 'a claim queued for a worker does not wake one',
       """                    self._claiming = False
                    self._work.notify()
                    continue""",
       """                    self._claiming = False
                    continue"""),
    _m('timer_runner_dispatcher_exit_no_work_notify', _TR,
       'the dispatcher leaves without waking the workers',
       """            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty
            self._idle.notify_all()""",
       """            self._deadline = None
            self._idle.notify_all()"""),
    _m('timer_runner_dispatcher_exit_no_idle_notify', _TR,
       'the dispatcher leaves without waking close()',
       """            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty
            self._idle.notify_all()""",
       """            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty"""),
    _m('timer_runner_close_no_work_notify', _TR, 'close() does not wake the waiting workers',
       """        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled""",
       """        self._deadline = None
        self._wake.notify_all()
        self._idle.notify_all()
        return report.cancelled""",
       equivalent="the dispatcher's exit notifies _work after _closed is set: the workers wake"),
    _m('timer_runner_poke_ignored_after_next', _TR,
       'a change made while next() ran is not looked at again',
       """                if self._poke:
                    continue  # something changed while next() ran: look again""",
       """                if False:
                    continue"""),
    _m('timer_runner_deadline_not_inf_in_next', _TR,
       'no deadline while next() runs: a change then pokes nobody',
       """                self._claiming = True
                self._deadline = _INF""",
       """                self._claiming = True"""),
    _m('timer_runner_deadline_relative', _TR,
       "the deadline is the Wait's seconds, not now + seconds",
       """                    self._deadline = scheduler.now + seconds""",
       """                    self._deadline = seconds"""),
    _m('timer_runner_sleep_without_timeout', _TR,
       'the dispatcher sleeps without a timeout toward the next entry',
       """                    self._wake.wait(min(seconds, _MAX_WAIT))""",
       """                    self._wake.wait()"""),
    _m('timer_runner_slot_wanted_not_set', _TR,
       'the dispatcher waits for a worker without saying so',
       """                    self._slot_wanted = True
                    self._wake.wait()""",
       """                    self._wake.wait()"""),
    _m('timer_runner_worker_wait_no_recheck', _TR, 'a worker waits once for a claim, no re-check',
       """                    while not queue and not (self._closed and not self._claiming):""",
       """                    if not queue and not (self._closed and not self._claiming):""",
       wanted_check="an explore scenario: close() between the dispatcher's claim and its "
                    "enqueue, with the worker scheduled first"),
    _m('timer_runner_worker_exits_while_claiming', _TR,
       'workers exit on close though the dispatcher still claims',
       """                    while not queue and not (self._closed and not self._claiming):""",
       """                    while not queue and not self._closed:""",
       wanted_check='the same interleaving as tr_worker_wait_no_recheck: an explore scenario'),
    _m('timer_runner_close_waits_not_for_claiming', _TR,
       'close() returns while the dispatcher holds a reservation',
       """            self._idle.wait_for(lambda: self._busy <= own and not self._claiming,\
 seconds)""",
       """            self._idle.wait_for(lambda: self._busy <= own, seconds)""",
       equivalent="while the dispatcher claims, _busy counts the reservation: close() waits"),
    _m('timer_runner_fail_no_wake', _TR,
       'a runner stopped on a failure does not wake its dispatcher',
       """        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()

    # -- the workers""",
       """        self._deadline = None
        self._work.notify_all()
        self._idle.notify_all()

    # -- the workers"""),
    _m('pool_joiners_not_woken', _P, 'Finish does not wake the workers parked waiting on the task',
       """            self._parked.pop(w, None)
            self._wake[w].notify()""",
       """            self._parked.pop(w, None)"""),
    _m('pool_finish_skips_joiners', _P, 'Finish does not look for joiners',
       """        if task._joiners:
            self._wake_joiners_locked(task)
        if self._outstanding == 0 and self._state is _DRAINING:""",
       """        if self._outstanding == 0 and self._state is _DRAINING:"""),
    _m('pool_cancel_no_joiner_wake', _P, 'Future.cancel() does not wake the joiners',
       """        if not super().cancel():
            return False
        self._pool._wake_joiners(self)""",
       """        if not super().cancel():
            return False""",
       equivalent="a parked joiner's task is never queued; the worker that takes it wakes "
                  "the joiners at its Finish"),
    _m('pool_cancel_queued_no_joiner_wake', _P,
       'shutdown(cancel_futures) does not wake the joiners',
       """                if task._joiners:
                    self._wake_joiners_locked(task)
            count += len(dq)""",
       """            count += len(dq)""",
       equivalent='as p_cancel_no_joiner_wake: the Finish of the awaited task wakes the joiners'),
    _m('pool_found_no_pass_wake', _P, 'a searcher that found a task does not wake the next worker',
       """                if searching:
                    searching = flags[w] = False
                    self._searching -= 1
                    self._pass_wake_locked()
                idle_rounds = 0""",
       """                if searching:
                    searching = flags[w] = False
                    self._searching -= 1
                idle_rounds = 0"""),
    _m('pool_awaited_done_no_pass_wake', _P,
       'a waiting worker returning to its task passes no wake',
       """                        self._searching -= 1
                    self._pass_wake_locked()
                    return""",
       """                        self._searching -= 1
                    return""",
       wanted_check="needs a push and the awaited task's end at one instant: an explore scenario"),
    _m('pool_terminated_no_notify', _P,
       'termination does not notify await_termination()/shutdown()',
       """        self._parked.clear()
        self._terminated.notify_all()""",
       """        self._parked.clear()"""),
    _m('pool_park_not_registered', _P, 'a parking worker is not listed as parked',
       """        self._parked[w] = None
        if awaited is not None:""",
       """        if awaited is not None:"""),
    _m('pool_park_ignores_deadline', _P,
       'a worker waiting on a future with a timeout parks without one',
       """        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)""",
       """        timeout = None"""),
    _m('pool_external_wakes_while_searching', _P,
       'an outside push wakes only while someone searches',
       """                if self._parked and not self._searching:
                    target = self._wake_one_locked()""",
       """                if self._parked and self._searching:
                    target = self._wake_one_locked()"""),
    _m('pool_child_push_wakes_nobody', _P, 'a child push never wakes a parked worker',
       """                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()""",
       """                    self._record("SubmitChild", {"t": task, "w": w})"""),
    _m('pool_wake_one_not_searching', _P, 'a worker woken for a push is not counted as searching',
       """        self._searching_flags[w] = True
        self._searching += 1
        self._wake[w].notify()""",
       """        self._wake[w].notify()""",
       equivalent='it only wakes more workers than needed: the API sees the same results'),
    _m('pool_pass_wake_needs_work_everywhere', _P, 'pass a wake only when every deque holds work',
       """        if self._parked and not self._searching and any(self._deques):""",
       """        if self._parked and not self._searching and all(self._deques):"""),
    _m('pool_park_forgets_flag', _P, 'a worker woken for a push forgets it is searching',
       """                        searching = flags[w]  # set when woken for a push""",
       """                        searching = False"""),
    _m('pool_shutdown_idle_pool_not_terminated', _P,
       'shutdown of an idle pool does not terminate it',
       """                self._state = _DRAINING
                if self._outstanding == 0:
                    self._terminate_locked()""",
       """                self._state = _DRAINING"""),
    _m('durable_submit_no_wake', _D,
       'a client-side submit of a ready version after start wakes nobody',
       """            if state == "ready":
                tx.wake(self._max)""",
       """            if state == "ready":
                pass"""),
    _m('durable_start_no_wake', _D, 'start() wakes nobody for the versions already ready',
       """            self._step(tx, "Start")
            tx.wake(self._max)""",
       """            self._step(tx, "Start")"""),
    _m('durable_claim_leftover_no_wake', _D, 'a client-side claim that left work wakes nobody',
       """            if taken:
                tx.wake(self._max)  # what it left is for the next idle worker""",
       """            if taken:
                pass"""),
    _m('durable_expire_no_wake', _D, 'expire() wakes nobody for what can be re-claimed',
       """            self._expire(tx, tx.now())
            tx.wake(self._max)  # what expired can be re-claimed""",
       """            self._expire(tx, tx.now())"""),
    _m('durable_end_no_wake', _D, 'a client-side complete/fail wakes nobody',
       """            tx.wake(self._max)  # a slot is free, and dependents may be ready""",
       """            pass"""),
    _m('durable_retry_no_wake', _D, 'retry() wakes nobody',
       """            self._step(tx, "Retry", t=task_id)
            tx.wake(self._max)""",
       """            self._step(tx, "Retry", t=task_id)"""),
    _m('durable_steps_submit_no_wake', _DF, 'the server-side submit wakes nobody',
       """            VALUES ('Submit', json_build_object('t', p_task, 'D',\
 json_build_array())::text, now_);
    END IF;
    PERFORM refsched_wake(p_virtual, p_channel, p_max);""",
       """            VALUES ('Submit', json_build_object('t', p_task, 'D',\
 json_build_array())::text, now_);
    END IF;"""),
    _m('durable_steps_claim_no_wake', _DF, 'the server-side claim that left work wakes nobody',
       """                VALUES ('Claim', json_build_object('w', p_worker, 'k', taken)::text,\
 now_);
        END IF;
        PERFORM refsched_wake(p_virtual, p_channel, p_max);""",
       """                VALUES ('Claim', json_build_object('w', p_worker, 'k', taken)::text,\
 now_);
        END IF;"""),
    _m('durable_steps_complete_no_wake', _DF, 'the server-side complete wakes nobody',
       """     WHERE state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = p_task);
    PERFORM refsched_wake(p_virtual, p_channel, p_max);""",
       """     WHERE state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = p_task);"""),
    _m('durable_steps_claimable_ignores_free_slot', _DF, 'claimable though every slot is taken',
       """            AND (SELECT count(*) FROM task WHERE state = 'running') < p_max);""",
       """            AND (SELECT count(*) FROM task WHERE state = 'running') <= p_max);"""),
    _m('durable_postgres_wait_never_hears', _DP,
       'wait_for_work() hears no notification: it waits out its timeout',
       """                for _ in self._listener.notifies(timeout=max(0.0, timeout), stop_after=1):
                    return True""",
       """                for _ in self._listener.notifies(timeout=max(0.0, timeout), stop_after=1):
                    pass"""),
)

CATALOGUE += _WAKEUPS

_BY_NAME = {m.name: m for m in CATALOGUE}
assert len(_BY_NAME) == len(CATALOGUE), "mutant names must be unique"


# -- layers and budgets -----------------------------------------------------------------------

@dataclass(frozen=True)
class Layer:
    """A verification layer: its name, what it runs, and which files' mutants it can see."""

    name: str
    title: str
    targets: frozenset[str]  # keys of MODULES whose code the layer exercises


LAYERS: tuple[Layer, ...] = (
    Layer("unit", "pytest: the scheduler's and its runner's unit tests (the pool's)",
          frozenset({_S, _R, _T, _TR, _P, _D, _DS, _DP, _DF})),
    Layer("lockstep", "Hypothesis lock-step machine vs the model (all but the runners)",
          frozenset({_S, _T, _P, _D, _DS})),
    Layer("replay", "ITF corpus replay (all but the runners)",
          frozenset({_S, _T, _P, _D, _DS})),
    Layer("tlc", "TLC validation of recorded Runner runs and durable soak runs",
          frozenset({_S, _R, _D, _DS})),
    Layer("explore", "interleaving explorer scenarios, <= 2 preemptions",
          frozenset({_S, _R, _T, _TR, _P})),
)
LAYER_NAMES = tuple(layer.name for layer in LAYERS)
_LAYER = {layer.name: layer for layer in LAYERS}

# Scenarios that drive a TaskScheduler class, and those that drive a Runner class.
SCHEDULER_SCENARIOS = ("ready_ready", "ready_cancel", "complete_stale", "resubmit_claim",
                       "close_ready_callbacks", "failure_while_claiming")
RUNNER_SCENARIOS = ("runner_close_timeout", "cooperative_cancel", "runner_chain",
                    "runner_fan_out", "runner_result_wait", "submit_to_idle_runner",
                    "wait_before_start", "runner_failure")
# Scenarios that drive a TimerScheduler class, and those that drive a TimerRunner class.
TIMER_SCHEDULER_SCENARIOS = ("timer_next_races_changes",)
TIMER_RUNNER_SCENARIOS = ("timer_earlier_while_sleeping", "timer_cancel_races_next",
                          "timer_close_during_sleep", "timer_reschedule_races_claim")
# Scenarios that drive a WorkStealingPool class.
POOL_SCENARIOS = ("pool_pop_races_steal", "pool_two_thieves_one_victim",
                  "pool_shutdown_races_child", "pool_nested_waits")


@dataclass(frozen=True)
class Budget:
    """How much each layer may do, and how long it may take (seconds, wall clock)."""

    # Each system's unit tests, its wake-up tests first: a lost notification is a state no
    # other test waits in, and the wake-up tests fail within a bound where others may hang.
    unit_files: tuple[str, ...] = ("tests/dag/test_wakeups.py", "tests/test_wakeups_sync.py",
                                   "tests/dag/test_scheduler.py", "tests/dag/test_runner.py")
    timer_unit_files: tuple[str, ...] = ("tests/timer/test_wakeups.py",
                                         "tests/timer/test_scheduler.py",
                                         "tests/timer/test_runner.py")
    pool_unit_files: tuple[str, ...] = ("tests/pool/test_wakeups.py", "tests/pool/test_pool.py")
    durable_unit_files: tuple[str, ...] = ("tests/durable/test_wakeups.py",
                                           "tests/durable/test_worker.py",
                                           "tests/durable/test_scheduler.py",
                                           "tests/durable/test_faults.py",
                                           "tests/durable/test_postgres.py")
    lockstep_examples: int = 300
    durable_lockstep_examples: int = 100  # a durable walk makes a store and many transactions
    lockstep_steps: int = 40
    tlc_runs: int = 4  # record_runner_run seeds 1..tlc_runs
    soak_runs: int = 2  # durable soak_run seeds 1..soak_runs
    explore_preemptions: int = 2
    explore_max_schedules: int = 3000  # per scenario
    explore_run_timeout: float = 30.0  # wall seconds before one explored run is stuck
    scenarios: tuple[str, ...] | None = None  # None: every scenario that fits the class
    timeouts: tuple[tuple[str, float], ...] = (
        ("unit", 180.0), ("lockstep", 120.0), ("replay", 240.0), ("tlc", 180.0),
        ("explore", 240.0))

    def timeout(self, layer: str) -> float:
        return dict(self.timeouts).get(layer, 300.0)


# -- results ----------------------------------------------------------------------------------

# Status of one layer for one mutant.
KILLED, SURVIVED, TIMEOUT, ERROR = "killed", "survived", "timeout", "error"
INVALID, NOT_APPLICABLE, SKIPPED = "invalid", "n/a", "skipped"


@dataclass
class LayerResult:
    """What one layer said about one mutant."""

    layer: str
    status: str  # killed, survived, timeout, error, invalid, n/a, skipped
    evidence: str = ""  # how to see the kill again: a test, a call sequence, a trace step, an id
    seconds: float = 0.0


@dataclass
class MutantResult:
    """Every layer's result for one mutant."""

    mutant: Mutant
    layers: list[LayerResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def killed_by(self) -> list[str]:
        return [r.layer for r in self.layers if r.status == KILLED]

    @property
    def verdict(self) -> str:
        """killed, invalid, equivalent (survived, and known to be) or survived."""
        if any(r.status == INVALID for r in self.layers):
            return INVALID
        if self.killed_by:
            return KILLED
        return "equivalent" if self.mutant.equivalent else SURVIVED

    @property
    def evidence(self) -> str:
        for r in self.layers:
            if r.status == KILLED:
                return r.evidence
        return ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.mutant.name, "file": relative_path(self.mutant.file),
                "description": self.mutant.description, "equivalent": self.mutant.equivalent,
                "wanted_check": self.mutant.wanted_check,
                "verdict": self.verdict, "killed_by": self.killed_by,
                "seconds": round(self.seconds, 2),
                "layers": [{**asdict(r), "seconds": round(r.seconds, 2)} for r in self.layers]}


@dataclass
class RunReport:
    """A run of mutants: each one's results, the layers asked for, and the time taken."""

    results: list[MutantResult]
    layers: tuple[str, ...]
    all_layers: bool
    seconds: float
    budget: Budget

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.results if r.verdict == verdict)

    @property
    def kill_rate(self) -> float:
        """Killed over the valid mutants that are not known to be equivalent."""
        judged = len(self.results) - self.count(INVALID) - self.count("equivalent")
        return self.count(KILLED) / judged if judged else 1.0

    @property
    def ok(self) -> bool:
        return self.count(SURVIVED) == 0 and self.count(INVALID) == 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunReport:
        """The report :meth:`as_json` gave (mutants looked up in the catalogue by name)."""
        results = []
        for item in data["mutants"]:
            file = next((k for k in MODULES if relative_path(k) == item["file"]),
                        Path(item["file"]).stem)
            mutant = _BY_NAME.get(item["name"]) or Mutant(
                item["name"], file, "", "", item["description"],
                item.get("equivalent", ""), item.get("wanted_check", ""))
            layers = [LayerResult(r["layer"], r["status"], r["evidence"], r["seconds"])
                      for r in item["layers"]]
            results.append(MutantResult(mutant, layers, item["seconds"]))
        fields: dict[str, Any] = {
            k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
            if isinstance(v, list) else v for k, v in data["budget"].items()}
        budget = Budget(**fields)
        return cls(results, tuple(data["layers"]), data["all_layers"], data["seconds"], budget)

    def as_json(self) -> dict[str, Any]:
        return {"mutants": [r.as_json() for r in self.results], "layers": list(self.layers),
                "all_layers": self.all_layers, "seconds": round(self.seconds, 1),
                "totals": {v: self.count(v) for v in (KILLED, SURVIVED, "equivalent", INVALID)},
                "kill_rate": round(self.kill_rate, 4), "budget": asdict(self.budget)}


# -- the subprocess ---------------------------------------------------------------------------

# Every Python process a layer starts finds this first on PYTHONPATH: it serves the patched
# source (named by REFSCHED_MUTANT) as the mutated module before anything imports refsched, so
# the worker processes a durable test or soak run starts run the mutant too. Standard library only.
_SITECUSTOMIZE = r"""
import importlib.abc, importlib.util, json, os, sys

_mutant = json.loads(os.environ.get("REFSCHED_MUTANT") or "null")


class _PatchedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name != _mutant["module"]:
            return None
        return importlib.util.spec_from_loader(name, self, origin=_mutant["origin"])

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = _mutant["origin"]
        with open(_mutant["source"], encoding="utf-8") as f:
            text = f.read()
        exec(compile(text, _mutant["label"], "exec", dont_inherit=True), module.__dict__)


if _mutant:
    sys.meta_path.insert(0, _PatchedModule())
"""

# Runs the layer in the child. A patched module that cannot be imported makes the mutant
# invalid: the catalogue is wrong, not the checks.
_BOOTSTRAP = r"""
import importlib, json, sys, traceback
payload = json.loads(sys.argv[1])
try:
    import refsched
    if payload["module"]:
        importlib.import_module(payload["module"])
except BaseException:
    with open(payload["result"], "w", encoding="utf-8") as f:
        json.dump({"status": "invalid", "evidence": traceback.format_exc()[-3000:]}, f)
    sys.exit(0)
from refsched.verify.mutants import _child_main
sys.exit(_child_main(payload))
"""


def _short(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else text[:limit] + "\n..."


def _unit_layer(payload: dict[str, Any]) -> tuple[str, str]:
    import pytest

    class Watch:
        first: str = ""

        def pytest_runtest_logreport(self, report: Any) -> None:
            if report.failed and not self.first:
                lines = [ln for ln in str(report.longreprtext).splitlines() if ln.strip()]
                cause = next((ln for ln in lines if ln.startswith("E ")), "")
                self.first = f"{report.nodeid} ({report.when}) {cause[:300]}".strip()

    watch = Watch()
    key = {_T: "timer_unit_files", _TR: "timer_unit_files", _P: "pool_unit_files",
           _D: "durable_unit_files", _DS: "durable_unit_files", _DP: "durable_unit_files",
           _DF: "durable_unit_files"}.get(payload["file"], "unit_files")
    files = [str(_PROJECT / f) for f in payload["budget"][key]]
    # In this process, where the watch sees each result (the project's pytest settings spread
    # the tests over worker processes when pytest-xdist is installed).
    in_process = ["-n", "0"] if importlib.util.find_spec("xdist") is not None else []
    code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", *in_process, *files],
                       plugins=[watch])
    if code == 0:
        return SURVIVED, ""
    if code == 1:
        return KILLED, watch.first or "a test failed"
    return ERROR, f"pytest exited with {code}"


def _lockstep_layer(payload: dict[str, Any]) -> tuple[str, str]:
    from hypothesis import Phase, settings

    from refsched.dag.scheduler import TaskScheduler
    from refsched.verify.dag.lockstep import run_lockstep

    # Derandomized: the same mutant meets the same examples, so a kill replays. Unshrunk: the
    # verdict is the layer's, and shrinking a run that must make 30 calls before close() can
    # take minutes to find what the first failing example already shows.
    settings.register_profile("refsched-mutants", derandomize=True, database=None)
    settings.load_profile("refsched-mutants")
    unshrunk = {"phases": [p for p in Phase if p not in (Phase.shrink, Phase.explain)]}
    budget = payload["budget"]
    try:
        if payload["file"] == _T:
            from refsched.timer.scheduler import TimerScheduler
            from refsched.verify.timer.lockstep import run_timer_lockstep
            run_timer_lockstep(TimerScheduler, examples=budget["lockstep_examples"],
                               steps=budget["lockstep_steps"], hypothesis_settings=unshrunk)
        elif payload["file"] == _P:
            from refsched.pool.pool import WorkStealingPool
            from refsched.verify.pool.lockstep import run_pool_lockstep
            run_pool_lockstep(WorkStealingPool, examples=budget["lockstep_examples"],
                              steps=budget["lockstep_steps"], shrink=False)
        elif payload["file"] in (_D, _DS, _DP, _DF):
            from refsched.durable import DurableScheduler
            from refsched.verify.durable.lockstep import run_durable_lockstep
            run_durable_lockstep(DurableScheduler, examples=budget["durable_lockstep_examples"],
                                 steps=budget["lockstep_steps"], hypothesis_settings=unshrunk)
        else:
            run_lockstep(TaskScheduler, examples=budget["lockstep_examples"],
                         steps=budget["lockstep_steps"], hypothesis_settings=unshrunk)
    except Exception as exc:  # the failing call sequence is in the notes
        head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        notes = "\n".join(getattr(exc, "__notes__", []))
        return KILLED, _short(f"{head}\n{notes}")
    return SURVIVED, ""


def _replay_layer(payload: dict[str, Any]) -> tuple[str, str]:
    from refsched.dag.scheduler import TaskScheduler
    from refsched.verify import system
    from refsched.verify.replay import format_divergence, replay

    if payload["file"] in _SYSTEM_OF:
        chosen = system.get(_SYSTEM_OF[payload["file"]])
        report = replay(_load_traces(None, chosen.name), system=chosen)
    else:
        report = replay(_load_traces(payload.get("traces")), TaskScheduler)
    if report.ok:
        return SURVIVED, f"{report.steps:,} steps of {report.traces:,} traces"
    d = report.divergences[0]
    params = ", ".join(f"{k}={v!r}" for k, v in d.params.items())
    return KILLED, _short(f"trace {d.trace} step {d.step} {d.action}({params}): {d.reason}\n"
                          + format_divergence(d))


def _tlc_layer(payload: dict[str, Any]) -> tuple[str, str]:
    if payload["file"] in (_D, _DS):
        return _durable_tlc_layer(payload)
    from refsched.verify.dag.recording import record_runner_run
    from refsched.verify.validate import format_validation, validate_trace

    for seed in range(1, payload["budget"]["tlc_runs"] + 1):
        try:
            trace = record_runner_run(seed)
        except Exception:
            return ERROR, _short(f"record_runner_run({seed}) raised\n{traceback.format_exc()}")
        verdict = validate_trace(trace)
        if not verdict.accepted:
            return KILLED, _short(f"record_runner_run({seed}): {format_validation(verdict)}")
    return SURVIVED, ""


def _durable_tlc_layer(payload: dict[str, Any]) -> tuple[str, str]:
    """Soak runs (worker processes under SIGKILL and SIGSTOP), each history judged by TLC."""
    from refsched.durable import DurableScheduler
    from refsched.durable.soak import soak_run
    from refsched.verify.durable.validate import validate_history

    with tempfile.TemporaryDirectory(prefix="refsched-mutant-soak-") as folder:
        for seed in range(1, payload["budget"]["soak_runs"] + 1):
            try:
                report = soak_run(seed, Path(folder), tasks=10, workers=3, timeout=60.0)
            except Exception:
                return ERROR, _short(f"soak_run({seed}) raised\n{traceback.format_exc()}")
            with DurableScheduler(report.store) as db:
                history = db.history()
                if not history:
                    return ERROR, f"soak_run({seed}) recorded no step"
                verdict = validate_history(history, max_concurrency=db.max_concurrency,
                                           max_attempts=db.max_attempts)
            if not verdict.accepted:
                return KILLED, _short(f"soak_run({seed}), {len(history)} steps: TLC rejects "
                                      f"it: {verdict.violated or ''} {verdict.reason}")
    return SURVIVED, ""


def _explore_layer(payload: dict[str, Any]) -> tuple[str, str]:
    from refsched.dag.runner import Runner
    from refsched.dag.scheduler import TaskScheduler
    from refsched.explore import ExploreConfig, explore
    from refsched.explore.dag import scenarios as catalogue
    from refsched.explore.pool import scenarios as pool_scenarios
    from refsched.explore.timer import scenarios as timer_scenarios
    from refsched.pool.pool import WorkStealingPool
    from refsched.timer.runner import TimerRunner
    from refsched.timer.scheduler import TimerScheduler

    budget = payload["budget"]
    config = ExploreConfig(max_preemptions=budget["explore_preemptions"],
                           max_schedules=budget["explore_max_schedules"],
                           run_timeout=budget["explore_run_timeout"], strategy="dfs")
    by_file = {_S: (*SCHEDULER_SCENARIOS, *RUNNER_SCENARIOS), _R: RUNNER_SCENARIOS,
               _T: (*TIMER_SCHEDULER_SCENARIOS, *TIMER_RUNNER_SCENARIOS),
               _TR: TIMER_RUNNER_SCENARIOS, _P: POOL_SCENARIOS}
    names = list(budget["scenarios"] or by_file[payload["file"]])
    classes = {**dict.fromkeys(SCHEDULER_SCENARIOS, TaskScheduler),
               **dict.fromkeys(RUNNER_SCENARIOS, Runner),
               **dict.fromkeys(TIMER_SCHEDULER_SCENARIOS, TimerScheduler),
               **dict.fromkeys(TIMER_RUNNER_SCENARIOS, TimerRunner),
               **dict.fromkeys(POOL_SCENARIOS, WorkStealingPool)}
    stuck = ""
    for name in names:
        cls: Any = classes[name]
        factory = (_EXTRA_SCENARIOS.get(name) or getattr(catalogue, name, None)
                   or getattr(timer_scenarios, name, None) or getattr(pool_scenarios, name))
        report = explore(factory(cls), config)
        if report.failures:
            f = report.failures[0]
            message = f.message.strip().splitlines()
            line = (f"scenario {name}: {f.kind}, schedule {f.schedule_id}: "
                    f"{message[0] if message else ''}")
            if f.kind == "stuck":
                # Wall-clock "no progress" is a hang, not a verdict: a loaded machine gives it
                # too. Other scenarios may still decide.
                stuck = stuck or line
                continue
            return KILLED, _short(f"{line}\n{f.report(max_steps=30)}")
    if stuck:
        return TIMEOUT, stuck
    return SURVIVED, f"scenarios {', '.join(names)}"


def submit_to_idle_runner(cls: Callable[[int], Any]) -> Any:
    """A scenario the catalogue needs beyond ``SCENARIOS``: a function submitted after
    ``start()``, while the one worker may already wait idle, must still be run.

    Every catalogued Runner scenario submits before ``start()``, where a worker finds its claim
    queued before it ever waits; only a submission to an idle runner depends on the wake-up.
    """
    from refsched.explore.context import Context, Scenario

    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(cls(1))
        runner.start()
        future = runner.submit("a", lambda: "A")
        finished = runner.wait()
        runner.close()

        def ran() -> None:
            assert finished, "Runner.wait() returned False"
            assert future.result(timeout=0) == "A", future

        ctx.at_end("the function submitted to the idle runner ran", ran)

    return Scenario("submit_to_idle_runner", body, submit_to_idle_runner.__doc__ or "")


def wait_before_start(cls: Callable[[int], Any]) -> Any:
    """A scenario the catalogue needs beyond ``SCENARIOS``: ``wait()`` called before another
    thread calls ``start()`` returns only once the submitted function has run.

    After ``start()`` a live version is always queued or running, so only a wait begun before
    it can tell "nothing in flight" from "nothing left".
    """
    from refsched.explore.context import Context, Scenario

    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(cls(1))
        future = runner.submit("a", lambda: "A")
        ctx.spawn(runner.start, name="starter")
        finished = runner.wait()
        done = future.done()
        runner.close()

        def ran_first() -> None:
            assert finished and done, f"wait() returned {finished} with the future {future}"

        ctx.at_end("wait() returned after the function ran", ran_first)

    return Scenario("wait_before_start", body, wait_before_start.__doc__ or "")


def runner_failure(cls: Callable[[int], Any]) -> Any:
    """A scenario the catalogue needs beyond ``SCENARIOS``: a function that raises fails its
    future with its exception, and its dependent's future with ``BlockedError``.

    The catalogued Runner scenarios only run functions that return.
    """
    from refsched.errors import BlockedError
    from refsched.explore.context import Context, Scenario

    def boom() -> None:
        raise ValueError("boom")

    def body(ctx: Context) -> None:
        runner = ctx.watch_runner(cls(1))
        failing = runner.submit("a", boom)
        blocked = runner.submit("b", lambda: "B", ["a"])
        runner.start()
        finished = runner.wait()
        runner.close()

        def both_resolved() -> None:
            assert finished, "Runner.wait() returned False"
            assert failing.done() and blocked.done(), (failing, blocked)
            assert isinstance(failing.exception(timeout=0), ValueError), failing
            assert isinstance(blocked.exception(timeout=0), BlockedError), blocked

        ctx.at_end("a failed with its error, b is blocked", both_resolved)

    return Scenario("runner_failure", body, runner_failure.__doc__ or "")


_EXTRA_SCENARIOS = {"runner_failure": runner_failure,
                    "submit_to_idle_runner": submit_to_idle_runner,
                    "wait_before_start": wait_before_start}


_LAYER_RUNNERS: dict[str, Callable[[dict[str, Any]], tuple[str, str]]] = {
    "unit": _unit_layer, "lockstep": _lockstep_layer, "replay": _replay_layer,
    "tlc": _tlc_layer, "explore": _explore_layer,
}


def _child_main(payload: dict[str, Any]) -> int:
    """Run one layer in this (patched) process and write its verdict as JSON."""
    try:
        status, evidence = _LAYER_RUNNERS[payload["layer"]](payload)
    except Exception:
        status, evidence = ERROR, _short(traceback.format_exc())
    Path(payload["result"]).write_text(json.dumps({"status": status, "evidence": evidence}),
                                       encoding="utf-8")
    return 0


STRATIFIED_HEAD = 200
"""How many first traces of each further corpus instance the replay layer takes."""


def _load_traces(cache: str | None, system_name: str = "scheduler") -> list[Any]:
    if cache and Path(cache).exists():
        with open(cache, "rb") as f:
            traces: list[Any] = pickle.load(f)  # written by this module in this run
        return traces
    from refsched.verify import corpus, system
    from refsched.verify.itf import read_traces

    # The first instance whole; of each further one (the durable scheduler's instances of
    # several ids, tens of thousands of traces each) the stratified subset the suite replays,
    # which takes every action and every pair of actions one after the other.
    (_, first, _), *others = corpus.instance_bundles(system.get(system_name))
    traces = list(read_traces(first))
    for _, bundle, _ in others:
        traces += corpus.read_stratified(bundle, STRATIFIED_HEAD)[0]
    return traces


# Layer subprocesses alive now: each runs in a session of its own (so a timeout can end its whole
# process group), which also keeps a Ctrl-C at the terminal from reaching it; run() ends them.
_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()
_interrupted = threading.Event()  # set by _end_children: start no more layers


def _end_children() -> None:
    """Kill the process group of every layer subprocess still running; start no more."""
    with _children_lock:
        _interrupted.set()
        alive = list(_children)
    for proc in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _run_layer(mutant: Mutant | None, layer: str, source: Path | None, workdir: Path,
               budget: Budget, traces: str | None) -> LayerResult:
    """One layer in a fresh subprocess (its whole process group ends with it on a timeout)."""
    result_file = workdir / f"{mutant.name if mutant else 'original'}-{layer}.json"
    served = None
    if mutant:
        served = {"module": MODULES[mutant.file], "origin": str(source_path(mutant.file)),
                  "source": str(source),
                  "label": f"{relative_path(mutant.file)} [mutant {mutant.name}]"}
    payload = {
        "module": MODULES[mutant.file] if mutant else "", "file": mutant.file if mutant else _S,
        "layer": layer, "result": str(result_file), "budget": asdict(budget), "traces": traces,
    }
    site = workdir / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    started = time.monotonic()
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path,
           "REFSCHED_MUTANT": json.dumps(served)}
    with _children_lock:
        if _interrupted.is_set():
            return LayerResult(layer, SKIPPED, "interrupted", 0.0)
        proc = subprocess.Popen([sys.executable, "-c", _BOOTSTRAP, json.dumps(payload)],
                                cwd=_PROJECT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
        _children.add(proc)
    try:
        output, _ = proc.communicate(timeout=budget.timeout(layer))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return LayerResult(layer, TIMEOUT, f"no verdict within {budget.timeout(layer):.0f} s",
                           time.monotonic() - started)
    finally:
        with _children_lock:
            _children.discard(proc)
    seconds = time.monotonic() - started
    if not result_file.exists():
        tail = output.decode(errors="replace")[-2000:]
        return LayerResult(layer, ERROR, f"the layer exited with {proc.returncode}\n{tail}",
                           seconds)
    data = json.loads(result_file.read_text(encoding="utf-8"))
    return LayerResult(layer, str(data["status"]), str(data["evidence"]), seconds)


# -- the runner -------------------------------------------------------------------------------

def run_mutant(mutant: Mutant, layers: Sequence[str] = LAYER_NAMES, *, budget: Budget = Budget(),
               all_layers: bool = False, workdir: Path | None = None, traces: str | None = None,
               report: Report = lambda _line: None, label: str = "") -> MutantResult:
    """Run ``mutant`` against ``layers`` in order, stopping at the first kill unless
    ``all_layers``. ``PatchError`` if the patch does not apply to the current source."""
    text = patched_source(mutant)
    result = MutantResult(mutant)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="refsched-mutant-")))
        source = workdir / f"{mutant.name}.py"
        source.write_text(text, encoding="utf-8")
        done = False
        for name in layers:
            if done:
                result.layers.append(LayerResult(name, SKIPPED))
                continue
            if mutant.file not in _LAYER[name].targets:
                result.layers.append(LayerResult(
                    name, NOT_APPLICABLE, f"does not run {relative_path(mutant.file)}"))
                continue
            report(f"{label}{mutant.name}: {name} ...")
            layer = _run_layer(mutant, name, source, workdir, budget, traces)
            result.layers.append(layer)
            report(f"{label}{mutant.name}: {name} {layer.status} ({layer.seconds:.1f} s)")
            done = layer.status == INVALID or (layer.status == KILLED and not all_layers)
    result.seconds = time.monotonic() - started
    return result


def _traces_cache(workdir: Path, report: Report) -> str:
    """Parse the corpus once and pickle it for the replay layers of this run."""
    path = workdir / "corpus.pickle"
    report("reading the trace corpus once for every replay ...")
    with open(path, "wb") as f:
        pickle.dump(_load_traces(None), f, protocol=pickle.HIGHEST_PROTOCOL)
    return str(path)


def run(mutants: Iterable[Mutant] = CATALOGUE, layers: Sequence[str] = LAYER_NAMES, *,
        budget: Budget = Budget(), all_layers: bool = False, jobs: int = 2,
        report: Report = lambda _line: None) -> RunReport:
    """Run every mutant against ``layers``, ``jobs`` mutants at a time; report each as it ends."""
    chosen = list(mutants)
    for name in layers:
        if name not in _LAYER:
            raise ValueError(f"unknown layer {name!r}; known: {', '.join(LAYER_NAMES)}")
    for mutant in chosen:  # fail before running anything if the catalogue has rotted
        patched_source(mutant)
    started = time.monotonic()
    total = len(chosen)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            report(line)

    with tempfile.TemporaryDirectory(prefix="refsched-mutants-") as tmp:
        workdir = Path(tmp)
        traces = (_traces_cache(workdir, say)
                  if "replay" in layers and any(m.file == _S for m in chosen) else None)

        def one(item: tuple[int, Mutant]) -> MutantResult:
            i, mutant = item
            result = run_mutant(mutant, layers, budget=budget, all_layers=all_layers,
                                workdir=workdir, traces=traces, report=say,
                                label=f"[{i} of {total}] ")
            killed = ", ".join(result.killed_by) or "-"
            say(f"[{i} of {total}] {mutant.name}: {result.verdict} (killed by {killed}) "
                f"in {result.seconds:.1f} s")
            return result

        _interrupted.clear()
        pool = ThreadPoolExecutor(max_workers=max(1, jobs))
        try:
            results = list(pool.map(one, enumerate(chosen, start=1)))
        except BaseException:
            # Interrupted (Ctrl-C, a SIGTERM turned into SystemExit by main): the layers
            # running now would go on without anyone reading their verdicts.
            _end_children()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return RunReport(results, tuple(layers), all_layers, time.monotonic() - started, budget)


# -- reports ----------------------------------------------------------------------------------

_MARK = {KILLED: "KILLED", SURVIVED: "survived", TIMEOUT: "timeout", ERROR: "error",
         INVALID: "invalid", NOT_APPLICABLE: "n/a", SKIPPED: "·"}


def _cell(result: MutantResult, layer: str) -> str:
    for r in result.layers:
        if r.layer == layer:
            return _MARK.get(r.status, r.status)
    return ""


def _one_line(text: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _evidence_line(result: MutantResult) -> str:
    if result.verdict == "equivalent":
        return "equivalent: " + result.mutant.equivalent
    if result.verdict == INVALID:
        return _one_line(next(r.evidence for r in result.layers if r.status == INVALID))
    if result.verdict == SURVIVED:
        return ("survives; would be killed by: " + result.mutant.wanted_check
                if result.mutant.wanted_check else "survives every layer run")
    return _one_line(result.evidence)


def _totals(rep: RunReport) -> str:
    n = len(rep.results)
    return (f"{n} mutants: {rep.count(KILLED)} killed, {rep.count(SURVIVED)} survived, "
            f"{rep.count('equivalent')} equivalent, {rep.count(INVALID)} invalid; kill rate "
            f"{100 * rep.kill_rate:.1f}% of the non-equivalent mutants; {rep.seconds:.0f} s "
            f"({'every layer' if rep.all_layers else 'stopping at the first kill'})")


def format_text(rep: RunReport) -> str:
    """The table as plain text, with the totals."""
    head = ["#", "mutant", "file", "verdict", *rep.layers, "evidence"]
    rows = [[str(i), r.mutant.name, r.mutant.file, r.verdict,
             *(_cell(r, layer) for layer in rep.layers), _evidence_line(r)]
            for i, r in enumerate(rep.results, start=1)]
    widths = [max(len(row[c]) for row in [head, *rows]) for c in range(len(head) - 1)]
    lines = []
    for row in [head, *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
                     + "  " + row[-1])
    return "\n".join([*lines, "", _totals(rep)])


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_markdown(rep: RunReport, command: str = "") -> str:
    """The table as Markdown: totals, one row per mutant, then every kill's evidence."""
    out = [
        "# Mutation score of the verification layers", "",
        "Seeded bugs of `refsched/dag/scheduler.py`, `runner.py`, `timer.py`, `timer_runner.py`, "
        "`pool.py`, `durable/scheduler.py` and `durable/store.py` (the catalogue in "
        "`refsched/verify/mutants.py`), each run in its own subprocesses against the layers in "
        f"this order: {', '.join(rep.layers)}. A layer kills a mutant only by its own verdict; "
        "a timeout or a crash is reported and never counted as a kill.", "",
        "Regenerate with `refsched mutants --markdown > docs/mutants.md` (or "
        "`python -m refsched.verify.mutants --markdown`); add `--all-layers` to run every "
        "layer on every mutant, or name mutants to run only those.", "",
        f"**{_totals(rep)}.**", "",
        "| # | mutant | bug | verdict | " + " | ".join(rep.layers) + " |",
        "|---|---|---|---|" + "---|" * len(rep.layers),
    ]
    for i, r in enumerate(rep.results, start=1):
        out.append(f"| {i} | `{r.mutant.name}` ({r.mutant.file}) | {_md(r.mutant.description)} "
                   f"| **{r.verdict}** | "
                   + " | ".join(_cell(r, layer) for layer in rep.layers) + " |")
    out += ["", "Cells: KILLED (the layer's verdict), survived, n/a (the layer does not run "
            "that file), · (not run: an earlier layer killed it), timeout or error (no "
            "verdict; never counted as a kill).", "", "### Evidence", ""]
    for i, r in enumerate(rep.results, start=1):
        out.append(f"{i}. `{r.mutant.name}` — {_md(_evidence_line(r))}")
    if command:
        out += ["", f"Generated by `{command}`."]
    return "\n".join(out)


# -- command line -----------------------------------------------------------------------------

def _select(names: Sequence[str]) -> list[Mutant]:
    unknown = [n for n in names if n not in _BY_NAME]
    if unknown:
        raise SystemExit(f"unknown mutant(s) {', '.join(unknown)}; "
                         f"`--list` shows the {len(CATALOGUE)} known")
    return [_BY_NAME[n] for n in names] if names else list(CATALOGUE)


def main(argv: Sequence[str] | None = None) -> int:
    """``refsched mutants [NAMES] [--json] [--layers ...]``: run mutants, print the table.

    Exit status 0 when every mutant is killed or known to be equivalent, 1 otherwise.
    """
    parser = argparse.ArgumentParser(
        prog="refsched mutants",
        description="Run seeded bugs of the schedulers and their runners against every "
                    "verification layer and report which layer kills each.")
    parser.add_argument("names", nargs="*", help="mutants to run (default: the catalogue)")
    parser.add_argument("--layers", default=",".join(LAYER_NAMES),
                        help=f"comma-separated, in order (default: {','.join(LAYER_NAMES)})")
    parser.add_argument("--all-layers", action="store_true",
                        help="run every layer even after one killed the mutant")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--from-json", metavar="FILE",
                        help="print the table of a run saved with --json instead of running")
    parser.add_argument("--examples", type=int, default=Budget.lockstep_examples,
                        help="lock-step examples (default %(default)s)")
    parser.add_argument("--tlc-runs", type=int, default=Budget.tlc_runs,
                        help="recorded Runner runs validated by TLC (default %(default)s)")
    parser.add_argument("--max-schedules", type=int, default=Budget.explore_max_schedules,
                        help="explored schedules per scenario (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        mutants = _select(args.names)
    except SystemExit as exc:  # an unknown name is a usage error (2), said as argparse says one
        parser.print_usage(sys.stderr)
        print(f"refsched mutants: {exc.code}", file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            print(f"{m.name:40} {m.file:12} {m.description}")
        return 0
    rep: RunReport
    if args.from_json:
        try:
            data = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}, not an object")
            rep = RunReport.from_json(data)
            text = format_markdown(rep) if args.markdown else format_text(rep)
        except OSError as exc:
            print(f"refsched mutants: --from-json {args.from_json}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 2
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Not the report `refsched mutants --json` writes: empty, not JSON, or of
            # another shape (a missing key, a value of another type).
            what = f"no key {exc}" if isinstance(exc, KeyError) else str(exc)
            print(f"refsched mutants: --from-json {args.from_json}: not a report of "
                  f"refsched mutants --json ({what})", file=sys.stderr)
            return 2
        print(text)
        return 0 if rep.ok else 1
    layers = tuple(n.strip() for n in args.layers.split(",") if n.strip())
    budget = replace(Budget(), lockstep_examples=args.examples, tlc_runs=args.tlc_runs,
                     explore_max_schedules=args.max_schedules)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def terminated(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminated) if in_main else None
    try:
        rep = run(mutants, layers, budget=budget, all_layers=args.all_layers, jobs=args.jobs,
                  report=progress)
    except (PatchError, ValueError) as exc:
        print(f"refsched mutants: {exc}", file=sys.stderr)
        return 2
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(rep.as_json(), indent=2))
    elif args.markdown:
        print(format_markdown(rep, "refsched mutants " + " ".join(
            argv if argv is not None else sys.argv[1:])))
    else:
        print(format_text(rep))
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
