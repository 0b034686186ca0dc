"""A durable worker process: claims versions from a store, runs their functions, reports.

``refsched worker --db URL [--concurrency N] [--lease S] [--time-limit S] [--report-delay S]
[--report-batch N] [--prefetch N] [--until-done]``.
The process runs up to N functions at once on threads of its own. What it holds is spec
``held[w]``: a set of leases ``<<t, g, a>>`` (:class:`Held`, keyed by task, generation and
attempt), so that an attempt it lost and the attempt that re-claimed the same version, both
running in this process, are two leases, each heartbeated, reported and dropped on its own.

A heartbeat thread extends every lease held at a third of the lease's length; a heartbeat that
reports a cancel request, or that finds the lease lost while its function still runs, sets the
function's :class:`refsched.CancelToken` (a function that declares a ``token`` parameter gets
one; one that declares ``lease`` gets its :class:`~refsched.durable.scheduler.Lease`, whose
``(task_id, generation, attempt)`` fences its effects; one that declares ``inputs`` gets its
version's input summary, how each optional dep had ended when it was claimed, as
``DurableScheduler.input_summary`` gives it). A report the store refuses (the lease
expired and another attempt took the version) is logged, never fatal.

Batched reports (``--report-delay S``, ``--report-batch N``): a finished attempt's report joins
a pending batch, sent with one ``DurableScheduler.report_many`` (one transaction, one commit:
each report its own spec step, fenced on its own row) once N reports wait, the oldest has
waited S seconds, or a claim found nothing to run (``Worker.send_pending_now``: the claim loop
sends the batch itself, then claims again at once). The attempt's
slot is free at once for the next claim; its lease stays held, and heartbeated, until the
batch's answer comes. A batch whose answer is lost is sent again,
and each of its reports is then answered as a repeat. ``--report-delay 0`` reports each at once,
in a transaction of its own (the ``Worker`` class's default).

Prefetch (``--prefetch N``): the worker claims up to concurrency + N versions; the ones without a
slot wait in a local queue, held and heartbeated as the running ones are, and run as slots free.

Signals: the first SIGTERM or SIGINT stops claiming; the functions running finish and report,
the queued ones (prefetched) run and report too (they are held: the spec has no step that
gives a lease back, and leaving them to expire would hold their versions back for a lease's
length), the pending batch is sent, then the process exits 0. A second one exits at once
with 128 + the signal's number, reporting nothing (the pending batch included): its leases
expire as after a crash. With ``--time-limit S`` an attempt whose function runs longer than S
seconds has its token set and is reported failed at once ("time limit of S s passed"); its
thread, which Python cannot stop, is abandoned: its slot is free again at once
and whatever it returns later is discarded.

Idle, a worker waits before it claims again: a wait that doubles from 1 ms up to ``--poll``,
cut short at the store's next due time (a ready version not yet due, docs/time.md; read by the
claim that found nothing, in its own look) and, on PostgreSQL, by a notification; so delayed
work is claimed as it comes due, without a poll.

Store errors: a claim the store refuses for want of permission (a read-only SQLite file, a
PostgreSQL role that may not write) ends the worker at once with status 2; any other store
error is retried with a growing wait, and ``--store-tries`` failed claims in a row end it with
status 2.

Whatever a function raises, ``BaseException`` included, is reported as the version's failure
and the thread that ran it carries on; only ``refsched.Cancelled`` is an acknowledged cancel.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from refsched.arguments import non_negative_int, positive_int, positive_seconds
from refsched.durable.scheduler import (
    NOT_LOOKED,
    DurableScheduler,
    Lease,
    resolve,
    storable_result,
)
from refsched.errors import (
    Cancelled,
    InvalidArgumentError,
    LeaseLostError,
    SchedulerError,
    StaleLeaseError,
    StoreError,
)
from refsched.runners import CancelToken

__all__ = ["MIN_LEASE", "REPORT_BATCH", "REPORT_DELAY", "STORE_TRIES", "Attempt", "Held",
           "LeaseKey", "Worker", "main"]

log = logging.getLogger("refsched.worker")

MIN_LEASE = 0.5
"""The shortest lease a worker takes, in seconds. Its heartbeat comes every third of the
lease, and one store transaction (an fsync on SQLite, a round trip to PostgreSQL) must fit well
inside that; a lease of a millisecond expires before the claim that gave it returns, and every
version then runs several times at once and fails."""

STORE_TRIES = 20
"""Failed claims in a row (store errors other than a refused permission) before a worker gives
up. Each waits longer, up to 5 s, after the store's own wait (30 s for a connection on
PostgreSQL): a server restart is ridden out, a store that stays broken ends the worker."""

DUE_MARGIN = 0.002
"""Seconds an idle worker waits past the next due time, so that the claim it then makes finds
the version due on the store's clock (SQLite's reads the time in milliseconds)."""

REPORT_BATCH = 64
"""The most reports a worker sends in one batch (``--report-batch``)."""

REPORT_DELAY = 0.01
"""The longest a finished attempt's report waits in the batch by default, in seconds
(``--report-delay``; 0 reports each at once)."""

_PERMISSION = ("read-only", "readonly", "permission denied")  # a store that will never let us write

LeaseKey = tuple[str, int, int]
"""A lease as the spec writes it, ``<<t, g, a>>``: task id, generation, attempt."""


def key_of(lease: Lease) -> LeaseKey:
    return (lease.task_id, lease.generation, lease.attempt)


def lease_text(key: LeaseKey) -> str:
    return f"<<{key[0]!r}, {key[1]}, {key[2]}>>"


def _parameters(fn: Callable[..., Any]) -> frozenset[str]:
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()


@dataclass(slots=True, eq=False)
class Attempt:
    """One lease this worker holds, and what its function is told through."""

    lease: Lease  # key_of(lease) is this attempt's key in Held
    token: CancelToken  # set: a cancel was requested, the lease was lost, or the time is up
    reporting: bool = False  # True once its function returned or its time limit passed; the
    # one who set it makes the attempt's one report
    lost: bool = False  # True once a heartbeat found the lease lost (and set the token)
    started: bool = False  # True once its function was called (a prefetched one waits)
    pending: bool = False  # True once its report waits in the batch: its slot is free, the
    # lease still held (and heartbeated) until the batch's answer comes

    @property
    def key(self) -> LeaseKey:
        return key_of(self.lease)


class Held:
    """Spec ``held[w]``: the leases one worker holds, keyed by ``(task, generation, attempt)``.

    A lease enters with :meth:`take` when ``claim()`` returns it (Spec: Claim, Reclaim) and
    leaves with :meth:`drop` once its report was made, accepted (Complete, Fail,
    AcknowledgeCancel) or refused (Refused), or all at once with :meth:`crash` (Crash). No
    threads of its own and no store: the worker's threads call it, and
    ``refsched.verify.durable.worker_lockstep`` drives it step by step beside the model.
    """

    def __init__(self) -> None:
        # Guards _attempts. Re-entrant: stop() runs in a signal handler on the main thread,
        # which may hold it already.
        self._lock = threading.RLock()
        # Notified when a lease leaves (a slot is free, or the last one is gone) and on wake().
        self.changed = threading.Condition(self._lock)
        self._attempts: dict[LeaseKey, Attempt] = {}  # key == attempt.key for every entry

    def take(self, lease: Lease, token: CancelToken) -> Attempt:
        """Hold ``lease`` (Spec: Claim / Reclaim). The same lease twice -> InvalidArgumentError."""
        attempt = Attempt(lease, token)
        with self._lock:
            if attempt.key in self._attempts:
                raise InvalidArgumentError(f"take({lease_text(attempt.key)}): already held")
            self._attempts[attempt.key] = attempt
        return attempt

    def returned(self, key: LeaseKey) -> Attempt | None:
        """Mark ``key``'s function as done (it returned, or its time is up); return the attempt
        if the caller is the one to report it, None if another did (or it is not held)."""
        with self._lock:
            attempt = self._attempts.get(key)
            if attempt is None or attempt.reporting:
                return None
            attempt.reporting = True
            return attempt

    def lost(self, key: LeaseKey) -> bool:
        """Whether a heartbeat that found ``key`` ended found it newly lost: still held, its
        function still running, not found lost before. (Its own report may end it between the
        heartbeat's look and its call; a lost lease stays lost, and is told once.)"""
        with self._lock:
            attempt = self._attempts.get(key)
            if attempt is None or attempt.reporting or attempt.lost:
                return False
            attempt.lost = True
            return True

    def report_pending(self, key: LeaseKey) -> None:
        """The report of ``key`` joined the pending batch: its slot is free, the lease still
        held until the batch's answer comes."""
        with self._lock:
            attempt = self._attempts.get(key)
            if attempt is not None:
                attempt.pending = True
            self.changed.notify_all()

    def drop(self, key: LeaseKey) -> None:
        """The report of ``key`` was made: the lease leaves (Spec: Complete, Fail,
        AcknowledgeCancel when accepted, Refused when refused)."""
        with self._lock:
            self._attempts.pop(key, None)
            self.changed.notify_all()

    def crash(self) -> None:
        """Forget every lease (Spec: Crash)."""
        with self._lock:
            self._attempts.clear()
            self.changed.notify_all()

    def wake(self) -> None:
        """Wake every waiter to look again (at the stop event)."""
        with self._lock:
            self.changed.notify_all()

    def attempts(self) -> list[Attempt]:
        with self._lock:
            return list(self._attempts.values())

    def keys(self) -> frozenset[LeaseKey]:
        with self._lock:
            return frozenset(self._attempts)

    def __len__(self) -> int:
        with self._lock:
            return len(self._attempts)

    def _taken(self) -> int:
        """The slots taken: the leases held whose report is not pending in a batch."""
        return sum(1 for attempt in self._attempts.values() if not attempt.pending)

    def wait_for_slot(self, concurrency: int, stop: threading.Event) -> int:
        """Block until fewer than ``concurrency`` slots are taken (leases held, less those
        whose report waits in a batch) or ``stop`` is set; return the free slots (0 once
        stopped). Woken by drop(), report_pending(), crash() and wake()."""
        with self.changed:
            while self._taken() >= concurrency and not stop.is_set():
                self.changed.wait()
            return 0 if stop.is_set() else concurrency - self._taken()

    def wait_idle(self) -> None:
        """Block until no slot is taken: every lease held is one whose report is pending.
        Woken by drop(), report_pending() and crash()."""
        with self.changed:
            while self._taken():
                self.changed.wait()

    def wait_empty(self) -> None:
        """Block until no lease is held. Woken by drop() and crash()."""
        with self.changed:
            while self._attempts:
                self.changed.wait()


def _check_seconds(label: str, value: object, least: float = 0.0) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0 or value < least):
        limit = f">= {least}" if least else "> 0"
        raise InvalidArgumentError(f"Worker({label}={value!r}): seconds {limit}")
    return float(value)


class Worker:
    """One worker process's loop over one store (see the module docstring)."""

    def __init__(self, url: str, *, name: str | None = None, concurrency: int = 1,
                 lease: float = 30.0, until_done: bool = False, poll: float = 0.2,
                 time_limit: float | None = None, store_tries: int = STORE_TRIES,
                 report_delay: float = 0.0, report_batch: int = REPORT_BATCH,
                 prefetch: int = 0) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidArgumentError(f"Worker(concurrency={concurrency!r}): an int >= 1")
        if isinstance(report_batch, bool) or not isinstance(report_batch, int) or report_batch < 1:
            raise InvalidArgumentError(f"Worker(report_batch={report_batch!r}): an int >= 1")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise InvalidArgumentError(f"Worker(prefetch={prefetch!r}): an int >= 0")
        if report_delay != 0:
            report_delay = _check_seconds("report_delay", report_delay)
        if isinstance(store_tries, bool) or not isinstance(store_tries, int) or store_tries < 1:
            raise InvalidArgumentError(f"Worker(store_tries={store_tries!r}): an int >= 1")
        self.lease = _check_seconds("lease", lease, MIN_LEASE)
        self.poll = _check_seconds("poll", poll)
        self.time_limit = None if time_limit is None else _check_seconds("time_limit", time_limit)
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.concurrency = concurrency
        self.until_done = until_done
        self.store_tries = store_tries
        self.db = DurableScheduler(url, create=False)
        self.held = Held()
        self._stopping = threading.Event()  # SIGTERM: claim nothing more
        self._functions: dict[str, tuple[Callable[..., Any], frozenset[str]]] = {}
        self.report_delay = float(report_delay)
        self.report_batch = report_batch
        self.prefetch = prefetch
        # The reports waiting in the batch, oldest first, each with when it joined; guarded
        # by _reports, which the reporter thread waits on.
        self._pending: list[tuple[Attempt, str, Any, float]] = []
        self._reports = threading.Condition(threading.Lock())
        # The functions running and the claimed attempts queued for a slot (prefetched).
        self._slots = threading.Condition(threading.Lock())
        self._running = 0
        self._queue: collections.deque[Attempt] = collections.deque()
        # Threads whose slot came free with nothing queued wait to be handed the next attempt
        # a claim brings (_handed), until the loop ends (_closing). Why: starting a thread
        # waits until the new thread is scheduled, and on a busy machine that wait was most
        # of a claim loop's time. _lingering counts the waiting threads not yet handed one.
        self._lingering = 0
        self._handed: collections.deque[Attempt] = collections.deque()
        self._closing = False
        # The next due time the last claim read in its own look, when it took nothing: the
        # seconds it said (None: nothing waits for its time) and when (monotonic); None when
        # it did not read one.
        self._due_in: tuple[float | None, float] | None = None

    def stop(self) -> None:
        """Stop claiming; the functions running now and those queued finish and report, and
        the reports pending in the batch are sent before the worker exits."""
        self._stopping.set()
        self.held.wake()  # the claim loop may wait for a slot

    # -- claiming -------------------------------------------------------------------------

    def claim(self, limit: int) -> list[Attempt]:
        """Claim up to ``limit`` versions and hold their leases (Spec: Expire, Reclaim, Claim:
        one claim transaction). Errors are the store's."""
        attempts = []
        self._due_in = None
        leases, due_in = self.db.claim_and_due(self.name, limit=limit, lease=self.lease)
        if due_in is not NOT_LOOKED:
            self._due_in = (due_in, time.monotonic())
        for lease in leases:
            attempts.append(self.held.take(lease, CancelToken(lease.task_id, lease.generation)))
            log.info("worker %s: claimed %s (%s)", self.name, lease_text(key_of(lease)), lease.fn)
        return attempts

    # -- running one lease ---------------------------------------------------------------

    def _function(self, name: str) -> tuple[Callable[..., Any], frozenset[str]]:
        found = self._functions.get(name)
        if found is None:
            fn = resolve(name)
            found = self._functions[name] = (fn, _parameters(fn))
        return found

    def call(self, attempt: Attempt) -> tuple[str, Any]:
        """Run the attempt's function; return the report it asks for and its value."""
        lease = attempt.lease
        try:
            fn, parameters = self._function(lease.fn)
            kwargs = dict(lease.args)
            if "token" in parameters:
                kwargs["token"] = attempt.token
            if "lease" in parameters:
                kwargs["lease"] = lease
            if "inputs" in parameters:
                # how its optional deps ended, fixed when the version was claimed
                kwargs["inputs"] = self.db.input_summary(lease.task_id)
            return "complete", fn(**kwargs)
        except Cancelled:
            return "acknowledge_cancel", None
        except BaseException as e:  # the function's own failure, whatever it raised
            return "fail", e

    def _run(self, attempt: Attempt) -> None:
        """Run ``attempt``, then each queued one while this thread keeps its slot, then each
        one handed to it once its slot came free, until the loop ends."""
        next_: Attempt | None = attempt
        while next_ is not None:
            if not self._run_one(next_):
                return  # its time limit passed: time_up handed the slot on
            next_ = self._slot_free()
            if next_ is None:
                next_ = self._linger()

    def _linger(self) -> Attempt | None:
        """This thread's slot is free and nothing is queued: wait to be handed the attempt of
        the next claim (``_launch``); None once the loop ends."""
        with self._slots:
            self._lingering += 1
            while not self._handed:
                if self._closing:
                    self._lingering -= 1
                    return None
                self._slots.wait()
            attempt = self._handed.popleft()  # _launch took its slot and this thread's place
        threading.current_thread().name = f"{self.name}-{attempt.lease.task_id}"
        return attempt

    def _run_one(self, attempt: Attempt) -> bool:
        """Run one attempt and report it; whether this thread still has the slot."""
        attempt.started = True
        timer = None
        if self.time_limit is not None:
            timer = threading.Timer(self.time_limit, self.time_up, (attempt.key,))
            timer.daemon = True
            timer.start()
        try:
            outcome = self.call(attempt)
        finally:
            if timer is not None:
                timer.cancel()
        return self.returned(attempt.key, *outcome)

    def returned(self, key: LeaseKey, kind: str, value: Any) -> bool:
        """The function of ``key`` returned: report (``kind`` is ``complete``, ``fail`` or
        ``acknowledge_cancel``) and drop the lease; nothing when it was abandoned at its time
        limit (already reported). Whether it reported."""
        attempt = self.held.returned(key)
        if attempt is None:
            log.info("worker %s: %s returned after its time limit; discarded", self.name,
                     lease_text(key))
            return False
        self.finish(attempt, kind, value)
        return True

    def time_up(self, key: LeaseKey) -> None:
        """The time limit of ``key`` passed: set its token, report it failed, drop it; nothing
        when its function returned first."""
        attempt = self.held.returned(key)
        if attempt is None:
            return
        attempt.token._event.set()
        log.warning("worker %s: %s ran past its time limit of %s s: asked to stop, reported "
                    "failed; its thread is abandoned", self.name, lease_text(key),
                    self.time_limit)
        self.finish(attempt, "fail", f"time limit of {self.time_limit} s passed")
        queued = self._slot_free()  # the abandoned thread's slot goes to the next queued
        if queued is not None:
            self._start(queued)

    def finish(self, attempt: Attempt, kind: str, value: Any) -> None:
        """Report ``attempt`` and drop its lease, whatever the report did; with a report delay,
        its report joins the pending batch (its slot free at once) and the reporter thread
        sends it and drops the lease."""
        if self.report_delay:
            if kind == "complete" and not storable_result(value):
                kind, value = "fail", "the result cannot be stored: not JSON-serialisable"
            with self._reports:
                self._pending.append((attempt, kind, value, time.monotonic()))
                self._reports.notify_all()
            self.held.report_pending(attempt.key)
            return
        try:
            self._report(attempt.lease, kind, value)
        except BaseException:  # a broken report must not take the thread's slot with it
            log.exception("worker %s: reporting %s failed", self.name, lease_text(attempt.key))
        finally:
            self.held.drop(attempt.key)

    def _report(self, lease: Lease, kind: str, value: Any) -> None:
        key = lease_text(key_of(lease))
        for delay in (0.05, 0.2, 1.0, 2.0, None):
            try:
                if kind == "complete":
                    try:
                        state = self.db.complete(lease, value)
                    except InvalidArgumentError as e:  # a result JSON cannot carry
                        kind, value = "fail", f"the result cannot be stored: {e}"
                        state = self.db.fail(lease, value)
                elif kind == "fail":
                    state = self.db.fail(lease, value)
                else:
                    state = self.db.acknowledge_cancel(lease)
                log.info("worker %s: reported %s %s: accepted, the version is %s", self.name,
                         kind, key, state.value)
                return
            except StaleLeaseError as e:
                log.warning("worker %s: report refused (%s %s), the version was taken over: %s",
                            self.name, kind, key, e)
                return
            except StoreError as e:
                if delay is None:
                    raise
                log.warning("worker %s: store error, retrying the report %s %s: %s",
                            self.name, kind, key, e)
                time.sleep(delay)

    # -- batched reports -------------------------------------------------------------------

    def _reporter(self, done: threading.Event) -> None:
        """Send the pending reports in batches: when ``report_batch`` wait, when the oldest
        has waited ``report_delay``, or when a claim found nothing (``send_pending_now``); once
        ``done`` (no function runs or waits to run any
        more: the worker exits), every report still pending, then return."""
        while True:
            with self._reports:
                while True:
                    now = time.monotonic()
                    if done.is_set():  # the exit: what is pending goes now
                        if not self._pending:
                            return
                        break
                    if self._pending and (len(self._pending) >= self.report_batch
                                          or now - self._pending[0][3] >= self.report_delay):
                        break
                    self._reports.wait(None if not self._pending
                                       else self._pending[0][3] + self.report_delay - now)
                batch = self._pending[:self.report_batch]
                del self._pending[:self.report_batch]
            self.send(batch)

    def send_pending_now(self) -> bool:
        """A claim found nothing to run: the reports pending in the batch go now, without the
        rest of their delay, sent by the calling thread (the claim loop's), which then claims
        again at once; True if there were any. Why: the versions this worker could claim next
        may be waiting on exactly those reports (a dependent's fan-in, a slot of the store's
        ``max_concurrency`` that a held lease keeps); a delay buys fewer transactions only
        while there is other work to claim, and an idle worker holding reports back only
        makes the work later. Sent here rather than handed to the reporter thread, the next
        claim comes after their commit, not after an idle wait."""
        with self._reports:
            batch, self._pending[:] = self._pending[:], []
        for i in range(0, len(batch), self.report_batch):
            self.send(batch[i:i + self.report_batch])
        return bool(batch)

    def _nothing_due_before_the_batch(self) -> bool:
        """After a claim that found nothing: whether no version comes due, by the look that
        claim read, before the pending batch goes anyway (its oldest report's delay). Then the
        work this worker could take next waits on reports (a dependent's fan-in, a slot of
        ``max_concurrency`` a held lease keeps), and its own pending ones go at once; when a
        version comes due sooner, the worker claims it then and the batch keeps gathering, so
        delayed work that comes due every few milliseconds does not cost a commit a report."""
        looked = self._due_in
        if looked is None:  # the claim did not read the next due time
            return True
        due_in, at = looked
        if due_in is None:
            return True
        with self._reports:
            if not self._pending:
                return False
            left = self._pending[0][3] + self.report_delay - time.monotonic()
        return due_in - (time.monotonic() - at) > left

    def send(self, batch: Sequence[tuple[Attempt, str, Any, float]]) -> None:
        """Report ``batch`` in one ``report_many`` and drop its leases, whatever the answer
        (Spec: each report's own step). A store error is retried; a lost answer means each
        report may have committed, and the batch sent again is then answered as repeats."""
        reports = [(kind, attempt.lease, value) for attempt, kind, value, _ in batch]
        try:
            for delay in (0.05, 0.2, 1.0, 2.0, None):
                try:
                    answers = self.db.report_many(reports)
                    break
                except StoreError as e:
                    if delay is None:
                        raise
                    log.warning("worker %s: store error, retrying a batch of %d reports: %s",
                                self.name, len(reports), e)
                    time.sleep(delay)
                except SchedulerError as e:  # one report the batch refuses whole: each alone
                    log.warning("worker %s: a batch of %d reports refused (%s): reporting "
                                "each alone", self.name, len(reports), e)
                    for kind, lease, value in reports:
                        try:
                            self._report(lease, kind, value)
                        except BaseException:
                            log.exception("worker %s: reporting %s failed", self.name,
                                          lease_text(key_of(lease)))
                    return
            for (kind, lease, _), answer in zip(reports, answers, strict=True):
                if isinstance(answer, StaleLeaseError):
                    log.warning("worker %s: report refused (%s %s), the version was taken "
                                "over: %s", self.name, kind, lease_text(key_of(lease)), answer)
                else:
                    log.info("worker %s: reported %s %s: accepted, the version is %s",
                             self.name, kind, lease_text(key_of(lease)), answer.value)
        except BaseException:  # a broken batch must not take the reporter with it
            log.exception("worker %s: reporting a batch of %d failed", self.name, len(batch))
        finally:
            for attempt, _, _, _ in batch:
                self.held.drop(attempt.key)

    # -- heartbeats ----------------------------------------------------------------------

    def _heartbeats(self, done: threading.Event) -> None:
        every = self.lease / 3
        while not done.wait(every):
            self.beat()

    def beat(self) -> None:
        """Heartbeat every lease held now, in one transaction (the heartbeat thread calls this
        every lease / 3); each lease alone when the store refuses the batch whole (a store
        error, a version it no longer knows), so that one lease's trouble costs no other its
        heartbeat."""
        attempts = self.held.attempts()
        if not attempts:
            return
        answers: list[bool | BaseException]
        try:
            answers = list(self.db.heartbeat_many([attempt.lease for attempt in attempts]))
        except BaseException:
            answers = [self._heartbeat_alone(attempt.lease) for attempt in attempts]
        for attempt, answer in zip(attempts, answers, strict=True):
            self._heartbeat_answered(attempt, answer)

    def _heartbeat_alone(self, lease: Lease) -> bool | BaseException:
        try:
            return self.db.heartbeat(lease)
        except BaseException as e:  # answered for its lease by _heartbeat_answered
            return e

    def _heartbeat_answered(self, attempt: Attempt, answer: bool | BaseException) -> None:
        """Act on a heartbeat's answer: a cancel request or a lost lease sets the token."""
        if isinstance(answer, LeaseLostError):
            if not self.held.lost(attempt.key):  # its own report ended it first
                return
            log.warning(
                "worker %s: lease %s lost while its function still runs; asking it to stop. "
                "This worker did not heartbeat for longer than the lease (%s s): the process "
                "was paused, the store was slow, or a function held the GIL so long that "
                "the heartbeat thread could not run. Use a lease well above the longest "
                "such pause.", self.name, lease_text(attempt.key), self.lease)
            attempt.token._event.set()
        elif isinstance(answer, BaseException):
            log.error("worker %s: heartbeat of %s failed", self.name, lease_text(attempt.key),
                      exc_info=answer)
        elif answer:
            attempt.token._event.set()

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Claim and run until stopped (or, with ``until_done``, until every version ended).

        Raises StoreError when the store refuses a claim for want of permission, or refused
        ``store_tries`` claims in a row, once the functions running have reported."""
        beats_done = threading.Event()
        beats = threading.Thread(target=self._heartbeats, args=(beats_done,),
                                 name=f"{self.name}-heartbeat", daemon=True)
        beats.start()
        reports_done = threading.Event()
        reporter = threading.Thread(target=self._reporter, args=(reports_done,),
                                    name=f"{self.name}-reports", daemon=True)
        if self.report_delay:
            reporter.start()
        idle = 0.001
        failures = 0
        with self._slots:
            self._closing = False
        try:
            while not self._stopping.is_set():
                free = self.held.wait_for_slot(self.concurrency + self.prefetch,
                                               self._stopping)
                if not free:
                    break
                try:
                    attempts = self.claim(free)
                    failures = 0
                except StoreError as e:
                    failures += 1
                    self._store_failed(e, failures)
                    self._stopping.wait(min(0.05 * 2 ** failures, 5.0))
                    continue
                except SchedulerError as e:
                    if "not started" not in str(e):
                        raise
                    attempts = []
                if attempts:
                    idle = 0.001
                    for attempt in attempts:
                        self._launch(attempt)
                    continue
                if (self.report_delay and self._nothing_due_before_the_batch()
                        and self.send_pending_now()):
                    continue  # what it could claim may have waited on those reports
                if self.until_done and not len(self.held) and self._done():
                    break
                wait = self._idle_wait(idle)
                if self.db.notifies:  # woken by the store's notification, or after idle
                    self.db.wait_for_work(wait)
                else:
                    self._stopping.wait(wait)
                idle = min(idle * 2, self.poll)
        finally:
            self.held.wait_idle()  # every function run, the queued ones too
            self._close_slots()
            reports_done.set()  # the reporter sends what is pending, then returns
            with self._reports:
                self._reports.notify_all()
            if reporter.is_alive():
                reporter.join()  # with it, every lease held was dropped
            beats_done.set()
            beats.join()
            self.db.release()
        return 0

    def _store_failed(self, error: StoreError, failures: int) -> None:
        text = str(error)
        if any(word in text.lower() for word in _PERMISSION):
            raise StoreError(f"worker {self.name}: the store refuses this worker's writes, "
                             f"giving up: {text}") from None
        if failures >= self.store_tries:
            raise StoreError(f"worker {self.name}: {failures} claims in a row failed, giving "
                             f"up: {text}") from None
        log.warning("worker %s: store error (claim %d of %d in a row), will try again: %s",
                    self.name, failures, self.store_tries, text)

    def _idle_wait(self, idle: float) -> float:
        """How long an idle worker waits before it claims again: ``idle``, or less when a
        ready version comes due sooner (on the store's clock, waited on this one's: the two
        run at the same rate), so that delayed work is claimed on time without a poll; a
        notification (PostgreSQL) ends the wait sooner, and the next one reads the next due
        time again. A store error is "none due": the claim will say what is wrong."""
        looked, self._due_in = self._due_in, None
        if looked is not None:  # read by the claim that found nothing, no round trip more
            due_in, at = looked
            if due_in is not None:
                due_in -= time.monotonic() - at
        else:
            try:
                due_in = self.db.next_due()
            except StoreError:
                return idle
        if due_in is None:
            return idle
        return min(idle, max(0.0, due_in) + DUE_MARGIN)

    def _done(self) -> bool:
        """``db.done()``; a store error is "not yet". Why: a server down for longer than the
        store waits for a connection (30 s on PostgreSQL) made done() raise, and the worker
        exited 2 with its work unfinished; claim() already treats a store error as "nothing
        now" and tries again after the idle wait, and so does this."""
        try:
            return self.db.done()
        except StoreError as e:
            log.warning("worker %s: store error, will try again: %s", self.name, e)
            return False

    def _launch(self, attempt: Attempt) -> None:
        """Run ``attempt`` if a slot is free, on a lingering thread or a new one; else queue
        it (claimed ahead, ``prefetch``): held and heartbeated, run when a slot frees."""
        with self._slots:
            if self._running >= self.concurrency:
                self._queue.append(attempt)
                return
            self._running += 1
            if self._lingering:
                self._lingering -= 1
                self._handed.append(attempt)
                self._slots.notify()
                return
        self._start(attempt)

    def _close_slots(self) -> None:
        """The loop ended: the lingering threads return."""
        with self._slots:
            self._closing = True
            self._slots.notify_all()

    def _start(self, attempt: Attempt) -> None:
        threading.Thread(target=self._run, args=(attempt,), daemon=True,
                         name=f"{self.name}-{attempt.lease.task_id}").start()

    def _slot_free(self) -> Attempt | None:
        """A slot came free: the next queued attempt, which takes it, or None (the slot is
        free)."""
        with self._slots:
            if self._queue:
                return self._queue.popleft()
            self._running = max(0, self._running - 1)
            return None


def _lease(text: str) -> float:
    value = positive_seconds(text)
    if value < MIN_LEASE:
        raise argparse.ArgumentTypeError(f"{text!r}: a lease must be at least {MIN_LEASE} s")
    return value


def _delay(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsched worker",
        description="Run the functions of a durable store's versions: claim under leases, "
                    "heartbeat, report. Exit codes: 0 stopped or done, 2 usage or store error, "
                    "128 + the signal's number after a second SIGTERM or SIGINT.")
    parser.add_argument("--db", required=True, metavar="URL", help="the store: sqlite:///path.db or postgresql://user@host/db?schema=name")
    parser.add_argument("--concurrency", type=positive_int, default=1, metavar="N",
                        help="functions run at once by this process (default 1)")
    parser.add_argument("--lease", type=_lease, default=30.0, metavar="S",
                        help=f"lease length in seconds, at least {MIN_LEASE}; heartbeats every "
                             "S/3 (default 30). Keep it well above the longest pause of this "
                             "process, a function holding the GIL included")
    parser.add_argument("--time-limit", type=positive_seconds, default=None, metavar="S",
                        help="an attempt running longer is asked to stop and reported failed; "
                             "its thread is abandoned (default: no limit)")
    parser.add_argument("--store-tries", type=positive_int, default=STORE_TRIES, metavar="N",
                        help="failed claims in a row before giving up with status 2 (default "
                             f"{STORE_TRIES}); a refused permission gives up at once")
    parser.add_argument("--report-delay", type=_delay, default=REPORT_DELAY, metavar="S",
                        help="a finished function's report waits up to S seconds to be sent "
                             "with others in one transaction (report_many); its slot is free "
                             "at once, its lease held and heartbeated until the batch's answer; "
                             "a claim that finds nothing to run sends the batch at once "
                             f"(default {REPORT_DELAY}; 0 reports each at once)")
    parser.add_argument("--report-batch", type=positive_int, default=REPORT_BATCH, metavar="N",
                        help=f"the most reports in one batch (default {REPORT_BATCH}): a full "
                             "batch is sent at once")
    parser.add_argument("--prefetch", type=non_negative_int, default=0, metavar="N",
                        help="claim up to N versions beyond --concurrency, queued here, "
                             "heartbeated, run as slots free (default 0). On SIGTERM the "
                             "queued ones are run too before exit: they are held, and the "
                             "store has no step to give a lease back")
    parser.add_argument("--until-done", action="store_true",
                        help="exit 0 once the store is started and every version ended")
    parser.add_argument("--name", help="the worker's name in leases (default host:pid)")
    parser.add_argument("--poll", type=positive_seconds, default=0.2, metavar="S",
                        help="the longest wait between claims while idle (default 0.2)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log every claim and report at INFO")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # functions named relative to where workers start
    try:
        worker = Worker(args.db, name=args.name, concurrency=args.concurrency,
                        lease=args.lease, until_done=args.until_done, poll=args.poll,
                        time_limit=args.time_limit, store_tries=args.store_tries,
                        report_delay=args.report_delay, report_batch=args.report_batch,
                        prefetch=args.prefetch)
    except SchedulerError as e:
        print(f"refsched worker: {e}", file=sys.stderr)
        return 2
    signals = 0

    def stop(signum: int, frame: object) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:  # a function that never returns must not keep the process alive
            print(f"refsched worker: {signal.Signals(signum).name} again: exiting now; the "
                  "leases held expire as after a crash", file=sys.stderr, flush=True)
            os._exit(128 + signum)
        log.warning("worker %s: %s: claiming nothing more, finishing %d running; send it "
                    "again to exit at once", worker.name, signal.Signals(signum).name,
                    len(worker.held))
        worker.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return worker.run()
    except StoreError as e:
        print(f"refsched worker: {e}", file=sys.stderr)
        return 2
