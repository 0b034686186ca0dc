"""A durable worker process: claims versions from a store, runs their functions, reports.

``refsched worker --db URL [--concurrency N] [--lease S] [--until-done]``. The process runs up
to N functions at once on threads of its own. A heartbeat thread extends every lease it holds
at a third of the lease's length; a heartbeat that reports a cancel request, or that finds the
lease lost, sets the function's :class:`refsched.CancelToken` (a function that declares a
``token`` parameter gets one). A report the store refuses (the lease expired and another
attempt took the version) is logged, never fatal. On SIGTERM or SIGINT the worker stops
claiming, finishes what it runs, and exits 0.

Whatever a function raises, ``BaseException`` included, is reported as the version's failure
and the thread that ran it carries on; only ``refsched.Cancelled`` is an acknowledged cancel.
"""

from __future__ import annotations

import argparse
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
from typing import Any

from refsched.errors import (
    Cancelled,
    InvalidArgumentError,
    LeaseLostError,
    SchedulerError,
    StaleLeaseError,
    StoreError,
)
from refsched.runner import CancelToken

from .scheduler import DurableScheduler, Lease, resolve

__all__ = ["Worker", "main"]

log = logging.getLogger("refsched.worker")


def _takes_token(fn: Callable[..., Any]) -> bool:
    try:
        return "token" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class Worker:
    """One worker process's loop over one store (see the module docstring)."""

    def __init__(self, url: str, *, name: str | None = None, concurrency: int = 1,
                 lease: float = 30.0, until_done: bool = False, poll: float = 0.2) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidArgumentError(f"Worker(concurrency={concurrency!r}): an int >= 1")
        for label, value in (("lease", lease), ("poll", poll)):
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value <= 0):
                raise InvalidArgumentError(f"Worker({label}={value!r}): seconds > 0")
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.concurrency = concurrency
        self.lease = float(lease)
        self.poll = float(poll)
        self.until_done = until_done
        self.db = DurableScheduler(url, create=False)
        self._lock = threading.Lock()  # guards _held and _busy
        self._held: dict[str, tuple[Lease, CancelToken]] = {}  # task id -> what runs now
        # (task id, generation, attempt) of held leases whose function has returned: their
        # report may commit between a heartbeat's read of _held and its call, which then finds
        # the lease ended, not lost.
        self._reporting: set[tuple[str, int, int]] = set()
        self._busy = 0  # functions running or being reported
        self._slot_free = threading.Condition(self._lock)
        self._stopping = threading.Event()  # SIGTERM: claim nothing more
        self._functions: dict[str, tuple[Callable[..., Any], bool]] = {}

    def stop(self) -> None:
        """Stop claiming; the functions running now finish and report."""
        self._stopping.set()

    # -- running one lease ---------------------------------------------------------------

    def _function(self, name: str) -> tuple[Callable[..., Any], bool]:
        found = self._functions.get(name)
        if found is None:
            fn = resolve(name)
            found = self._functions[name] = (fn, _takes_token(fn))
        return found

    def _run(self, lease: Lease, token: CancelToken) -> None:
        try:
            outcome: tuple[str, Any]
            try:
                fn, wants_token = self._function(lease.fn)
                kwargs = dict(lease.args)
                if wants_token:
                    kwargs["token"] = token
                outcome = ("complete", fn(**kwargs))
            except Cancelled:
                outcome = ("acknowledge_cancel", None)
            except BaseException as e:  # the function's own failure, whatever it raised
                outcome = ("fail", e)
            with self._lock:
                self._reporting.add(lease[:3])
            self._report(lease, *outcome)
        except BaseException:  # a broken report must not take the thread's slot with it
            log.exception("worker %s: reporting %r attempt %d failed", self.name,
                          lease.task_id, lease.attempt)
        finally:
            with self._lock:
                self._held.pop(lease.task_id, None)
                self._reporting.discard(lease[:3])
                self._busy -= 1
                self._slot_free.notify()

    def _report(self, lease: Lease, kind: str, value: Any) -> None:
        for delay in (0.05, 0.2, 1.0, 2.0, None):
            try:
                if kind == "complete":
                    try:
                        self.db.complete(lease, value)
                    except InvalidArgumentError as e:  # a result JSON cannot carry
                        self.db.fail(lease, f"the result cannot be stored: {e}")
                elif kind == "fail":
                    self.db.fail(lease, value)
                else:
                    self.db.acknowledge_cancel(lease)
                return
            except StaleLeaseError as e:
                log.warning("worker %s: report refused, the version was taken over: %s",
                            self.name, e)
                return
            except StoreError as e:
                if delay is None:
                    raise
                log.warning("worker %s: store error, retrying the report: %s", self.name, e)
                time.sleep(delay)

    # -- heartbeats ----------------------------------------------------------------------

    def _heartbeats(self, done: threading.Event) -> None:
        every = self.lease / 3
        while not done.wait(every):
            self.beat()

    def beat(self) -> None:
        """Heartbeat every lease held now (the heartbeat thread calls this every lease / 3)."""
        with self._lock:
            held = list(self._held.values())
        for lease, token in held:
            try:
                if self.db.heartbeat(lease):
                    token._event.set()
            except LeaseLostError:
                with self._lock:
                    still_held = self._held.get(lease.task_id, (None,))[0] is lease
                    reported = lease[:3] in self._reporting or not still_held
                if reported:  # its own report ended it first: nothing was lost
                    continue
                log.warning("worker %s: lease of %r attempt %d lost; asking it to stop",
                            self.name, lease.task_id, lease.attempt)
                token._event.set()
            except BaseException:
                log.exception("worker %s: heartbeat of %r failed", self.name, lease.task_id)

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Claim and run until stopped (or, with ``until_done``, until every version ended)."""
        beats_done = threading.Event()
        beats = threading.Thread(target=self._heartbeats, args=(beats_done,),
                                 name=f"{self.name}-heartbeat", daemon=True)
        beats.start()
        idle = 0.001
        try:
            while not self._stopping.is_set():
                with self._lock:
                    while self._busy >= self.concurrency and not self._stopping.is_set():
                        self._slot_free.wait(0.5)
                    free = self.concurrency - self._busy
                if self._stopping.is_set():
                    break
                try:
                    leases = self.db.claim(self.name, limit=free, lease=self.lease)
                except SchedulerError as e:
                    if not isinstance(e, StoreError) and "not started" not in str(e):
                        raise
                    leases = []
                if leases:
                    idle = 0.001
                    for lease in leases:
                        self._launch(lease)
                    continue
                if self.until_done and self._busy == 0 and self._done():
                    break
                if self.db.notifies:  # woken by the store's notification, or after idle
                    self.db.wait_for_work(idle)
                else:
                    self._stopping.wait(idle)
                idle = min(idle * 2, self.poll)
        finally:
            with self._lock:
                while self._busy:
                    self._slot_free.wait(0.5)
            beats_done.set()
            beats.join()
            self.db.release()
        return 0

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

    def _launch(self, lease: Lease) -> None:
        token = CancelToken(lease.task_id, lease.generation)
        with self._lock:
            self._held[lease.task_id] = (lease, token)
            self._busy += 1
        threading.Thread(target=self._run, args=(lease, token), daemon=True,
                         name=f"{self.name}-{lease.task_id}").start()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds must be > 0")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsched worker",
        description="Run the functions of a durable store's versions: claim under leases, "
                    "heartbeat, report. Exit codes: 0 stopped or done, 2 usage or store error.")
    parser.add_argument("--db", required=True, metavar="URL", help="the store: sqlite:///path.db or postgresql://user@host/db?schema=name")
    parser.add_argument("--concurrency", type=_positive, default=1, metavar="N",
                        help="functions run at once by this process (default 1)")
    parser.add_argument("--lease", type=_seconds, default=30.0, metavar="S",
                        help="lease length in seconds; heartbeats every S/3 (default 30)")
    parser.add_argument("--until-done", action="store_true",
                        help="exit 0 once the store is started and every version ended")
    parser.add_argument("--name", help="the worker's name in leases (default host:pid)")
    parser.add_argument("--poll", type=_seconds, default=0.2, metavar="S",
                        help="the longest wait between claims while idle (default 0.2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every report")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # functions named relative to where workers start
    try:
        worker = Worker(args.db, name=args.name, concurrency=args.concurrency,
                        lease=args.lease, until_done=args.until_done, poll=args.poll)
    except SchedulerError as e:
        print(f"refsched worker: {e}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: object) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return worker.run()
    except StoreError as e:
        print(f"refsched worker: {e}", file=sys.stderr)
        return 2
