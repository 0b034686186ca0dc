"""Lock-step: the durable worker's own bookkeeping and the model's worker steps, driven by the
same random moves.

``refsched worker`` holds what spec ``held[w]`` says a worker holds: a set of leases
``<<t, g, a>>`` (:class:`refsched.durable.worker.Held`). Its threads only call the worker's
moves; here a Hypothesis state machine calls the same moves one at a time, without threads, on
real :class:`~refsched.durable.worker.Worker` objects (two, ``w1`` and ``w2``) over one SQLite
store on a virtual clock, and takes on the model (``refsched.model.durable``) the spec steps
each move must be:

- ``claim(w)``: the worker claims as many versions as it has free slots
  (``Worker.claim(concurrency - len(held))``): Expire, Reclaim, Claim (``claim_transaction``),
  and the leases it holds after are the model's ``held[w]``;
- ``beat(w)``: ``Worker.beat()``: a Heartbeat for each held lease that is current; a lease
  held but lost must have its function's token set (the hand-off that stops it), and so must a
  current lease whose version a cancel was requested for;
- ``returns(w, lease, outcome)``: the lease's function returns, fails or raises ``Cancelled``
  (only once its token is set) and the worker reports (``Worker.returned``): Complete, Fail or
  AcknowledgeCancel when the lease is current, Refused when not; nothing when the attempt was
  abandoned at its time limit;
- ``time_up(w, lease)``: its time limit passes (``Worker.time_up``): Fail, or Refused;
- ``tick`` (the store's clock moves one second: Tick), ``cancel(t)`` (Cancel) and
  ``crash(w)`` (``Held.crash()``: Crash; its functions are gone).
- with ``batched``, ``send(w)``: the reports a worker queued (its slots free, the leases still
  held and heartbeated) go in one batch (``Worker.send``: ``report_many``), each report's step
  in order.

Some answers are lost, as a dropped connection loses them: the store's call commits, then raises
``StoreError`` in the worker instead of answering. A report's (every second report with a
current lease) is CompleteAnswerLost, FailAnswerLost or AcknowledgeCancelAnswerLost, and the
worker's retry of the report is RepeatedReport: answered, nothing changes, the lease dropped. A
claim's (every second claim that gives leases) is ClaimAnswerLost and ReclaimAnswerLost: the
claim's error reaches the worker, which holds none of the leases the store gave; they expire.
Which calls lose their answer is counted, not drawn: the walks draw no new choice for it.

A worker paused past its lease is one that does not beat while the clock ticks; when it then
claims, it re-claims its own versions: held[w] has two leases of one version, the lost one
still running. After every move, each worker's held leases must be the model's ``held[w]``,
the store's snapshot the model's scheduler part, its recorded history the model's steps that
change the store, and the model's invariants and action properties must hold.

``held`` (a factory of :class:`Held`) lets a test plant a broken bookkeeping and show the
machine catches it (``tests/mutants/broken_worker.py``).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, cast

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from refsched.durable import DurableScheduler
from refsched.durable.jobs import NOOP
from refsched.durable.worker import Held, LeaseKey, Worker, lease_text
from refsched.errors import Cancelled, StoreError
from refsched.model.durable import (
    ACTIONS,
    INITIAL,
    DurableSnapshot,
    Limits,
    Step,
    claim_transaction,
)
from refsched.model.durable.actions import current, repeat
from refsched.verify.durable.lockstep import ModelRefused, as_recorded, model_takes
from refsched.verify.lockstep import WalkLedger, run_machine
from refsched.verify.stable import stable_labels

__all__ = ["IDS", "LIMITS", "WORKERS", "Ledger", "WorkerDisagreement",
           "durable_worker_lockstep_machine", "run_durable_worker_lockstep"]

IDS = ("a", "b", "c")
WORKERS = ("w1", "w2")
CONCURRENCY = 3  # each worker's slots: one more than the store runs, so that a worker holding
# every running version still has a slot to re-claim one of them with
LIMITS = Limits(max_concurrency=2, max_attempts=3, lease_time=1)
FN = NOOP  # the function every version names
_OUTCOMES = {"complete": "Complete", "fail": "Fail", "acknowledge_cancel": "AcknowledgeCancel"}
# A worker's own moves, and the repeat of a report: the store records nothing.
_UNRECORDED = frozenset({"Crash", "Refused", "RepeatedReport"})
_LOST = "AnswerLost"  # the suffix of a step whose answer was lost: the store records the step


@contextlib.contextmanager
def answer_lost(db: Any, method: str) -> Any:
    """The next call of ``db.method`` commits, then raises ``StoreError`` as a connection
    lost before the answer came back would; the calls after it are the real ones."""
    real = getattr(db, method)

    def commits_then_loses(*args: Any, **kwargs: Any) -> Any:
        del db.__dict__[method]
        real(*args, **kwargs)
        raise StoreError(f"{method}(): the connection was lost after the commit")

    setattr(db, method, commits_then_loses)
    try:
        yield
    finally:
        db.__dict__.pop(method, None)


class WorkerDisagreement(AssertionError):
    """The worker's bookkeeping and the model parted; the moves so far are in the message."""

    def __init__(self, reason: str, moves: list[str]) -> None:
        walk = "\n".join(f"  {i}. {m}" for i, m in enumerate(moves, start=1))
        super().__init__(f"{reason}\nmoves:\n{walk}")
        self.reason = reason
        self.moves = tuple(moves)


@dataclass
class Ledger(WalkLedger):
    """What the walks took: examples, spec steps per action, and self re-claims (a worker
    re-claiming a version whose lost lease it still held)."""

    # the worker's spec steps, and the moves of its own, every walk should see
    ACTIONS = ("Claim", "Reclaim", "Expire", "Heartbeat", "Complete", "Fail",
               "AcknowledgeCancel", "Refused", "Crash", "Tick", "self re-claim",
               "abandoned at its time limit", "lost lease told", "ClaimAnswerLost",
               "CompleteAnswerLost", "RepeatedReport")

    def summary(self) -> str:
        taken = ", ".join(f"{name} {n:,}" for name, n in sorted(self.actions.items()))
        return f"{self.examples:,} examples; {taken}"


def durable_worker_lockstep_machine(ledger: Ledger, *, held: Callable[[], Held] = Held,
                                    batched: bool = False) -> type[RuleBasedStateMachine]:
    """The state machine that drives two Workers' bookkeeping (made by ``held``) and the model.

    ``batched``: the workers batch their reports (``report_delay``): a function's return (or its
    time limit) only queues its report, its slot free and its lease still held; a ``send(w)``
    move sends the worker's pending batch (``Worker.send``: one ``report_many``), whose reports
    take their steps then, in order (every second batch loses its answer: its reports' AnswerLost
    steps, then the batch sent again, each report a RepeatedReport, or Refused)."""

    class WorkerLockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            # In memory where the machine has it: a walk writes a transaction per step.
            shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
            self.folder = tempfile.mkdtemp(prefix="refsched-worker-lockstep-", dir=shm)
            self.url = f"sqlite:///{Path(self.folder) / 'store.db'}"
            self.db = DurableScheduler(self.url, max_concurrency=LIMITS.max_concurrency,
                                       max_attempts=LIMITS.max_attempts, clock="virtual",
                                       record=True)
            self.workers: dict[str, Worker] = {}
            self.model: DurableSnapshot = INITIAL
            self.running: dict[str, set[LeaseKey]] = {w: set() for w in WORKERS}  # functions
            self.abandoned: set[tuple[str, LeaseKey]] = set()  # reported at their time limit
            self.claims = 0  # claim moves that gave leases: every second loses its answer
            self.reports = 0  # reports made with a current lease: every second loses it
            self.expected: list[tuple[str, dict[str, Any]]] = []  # what history() must be
            self.moves: list[str] = []
            # batched: each worker's queued reports, in order: (lease, the report's action)
            self.pending: dict[str, list[tuple[LeaseKey, str]]] = {w: [] for w in WORKERS}
            self.sends = 0  # batches sent: every second loses its answer
            ledger.examples += 1

        def teardown(self) -> None:
            for worker in self.workers.values():
                worker.db.release()
            self.db.release()
            shutil.rmtree(self.folder, ignore_errors=True)

        def fail(self, reason: str) -> NoReturn:
            raise WorkerDisagreement(reason, self.moves)

        def take(self, steps: list[Step]) -> None:
            for step in steps:
                before = self.model
                try:
                    _, self.model = model_takes(self.model, step, LIMITS)
                except ModelRefused as refused:
                    self.fail(str(refused))
                if step.action not in _UNRECORDED:
                    self.expected.append(as_recorded(step, before, self.model))
                ledger.actions[step.action] += 1

        def held_by(self, w: str) -> frozenset[LeaseKey]:
            return frozenset(cast(frozenset[LeaseKey], self.model.held.get(w, frozenset())))

        def agree(self) -> None:
            for w, worker in self.workers.items():
                if worker.held.keys() != self.held_by(w):
                    self.fail(f"worker {w} holds {sorted(worker.held.keys())}, the model's "
                              f"held[{w}] is {sorted(self.held_by(w))}")
            if self.db.snapshot() != self.model.scheduler:
                self.fail(f"the store's snapshot is not the model's:\n  model "
                          f"{self.model.scheduler}\n  store {self.db.snapshot()}")
            history = self.db.history()
            if history != self.expected:
                self.fail(f"the store's history is not the model's steps:\n  model "
                          f"{self.expected[-4:]}\n  store {history[-4:]}")

        # -- moves ----------------------------------------------------------------------

        @initialize(graph=st.lists(st.tuples(st.sampled_from(IDS),
                                             st.frozensets(st.sampled_from(IDS), max_size=1)),
                                   min_size=1, max_size=3, unique_by=lambda x: x[0]))
        def setup(self, graph: list[tuple[str, frozenset[str]]]) -> None:
            """A few submissions on ids submitted before them, start(), and the workers."""
            for t, deps in graph:
                deps = deps & {str(x) for x in self.model.scheduler.tasks}
                self.db.submit(t, sorted(deps), fn=FN)
                self.take([Step("Submit", (("t", t), ("D", deps)))])
            self.db.start()
            self.take([Step("Start", ())])
            for w in WORKERS:
                worker = Worker(self.url, name=w, concurrency=CONCURRENCY,
                                lease=LIMITS.lease_time, time_limit=60,
                                report_delay=600 if batched else 0)
                worker.held = held()
                self.workers[w] = worker
            self.agree()

        @rule(w=st.sampled_from(WORKERS))
        def claim(self, w: str) -> None:
            worker = self.workers[w]
            # (a lease whose report waits in the batch holds no slot)
            free = CONCURRENCY - sum(1 for x in worker.held.attempts() if not x.pending)
            self.moves.append(f"claim({w!r}) with {free} free slots")
            if free < 1:
                return  # the claim loop waits for a slot
            mine = {t for t, _, _ in self.held_by(w)}  # a Reclaim of one: a self re-claim
            _, steps = claim_transaction(self.model, w, free, limits=LIMITS)
            gives = any(step.action in ("Claim", "Reclaim") for step in steps)
            self.claims += gives
            lost = gives and self.claims % 2 == 0
            if lost:  # the same transaction; the worker hears an error instead of the leases
                steps = [Step(step.action + _LOST, step.params)
                         if step.action in ("Claim", "Reclaim") else step for step in steps]
                self.moves[-1] += ", its answer lost"
            before = self.held_by(w)
            self.take(steps)
            for step in steps:
                if step.action == "Reclaim" and step.param_map["t"] in mine:
                    ledger.actions["self re-claim"] += 1
            fresh = self.held_by(w) - before
            if lost:
                with answer_lost(worker.db, "claim"):
                    try:
                        worker.claim(free)
                    except StoreError:
                        got: set[LeaseKey] = set()
                    else:
                        self.fail(f"claim({w!r}): the lost answer did not reach the worker")
            else:
                got = {a.key for a in worker.claim(free)}
            if got != fresh:
                self.fail(f"claim({w!r}) gave {sorted(got)}, the model {sorted(fresh)}")
            self.running[w] |= got
            self.agree()

        @rule(w=st.sampled_from(WORKERS))
        def beat(self, w: str) -> None:
            worker = self.workers[w]
            self.moves.append(f"beat({w!r})")
            order = [a.key for a in worker.held.attempts()]
            beats = [key for key in order if key in self.held_by(w)
                     and current(self.model, w, *key)]
            worker.beat()
            self.take([Step("Heartbeat", (("w", w), ("t", t), ("g", g), ("a", a)))
                       for t, g, a in beats])
            for attempt in worker.held.attempts():
                t, g, a = attempt.key
                if attempt.key in self.abandoned_of(w) or attempt.pending:
                    continue  # (a pending report's function has returned: nothing to tell)
                told = not current(self.model, w, t, g, a) or (
                    self.model.scheduler.tasks[t].cancel_requested)
                if told and not attempt.token.cancelled:
                    self.fail(f"beat({w!r}): {lease_text(attempt.key)} is "
                              + ("lost" if not current(self.model, w, t, g, a) else
                                 "asked to cancel") + " and its function was not told")
                if told and not current(self.model, w, t, g, a):
                    ledger.actions["lost lease told"] += 1
            self.agree()

        def abandoned_of(self, w: str) -> set[LeaseKey]:
            return {key for x, key in self.abandoned if x == w}

        def end(self, w: str, key: LeaseKey, action: str) -> None:
            """The model's step for the report of ``key``: ``action`` if current, else Refused."""
            t, g, a = key
            params = (("w", w), ("t", t), ("g", g), ("a", a))
            if current(self.model, w, t, g, a):
                self.take([Step(action, params)])
            else:
                self.take([Step("Refused", params)])

        @precondition(lambda self: any(self.running.values()))
        @rule(data=st.data(), outcome=st.sampled_from(sorted(_OUTCOMES)))
        def returns(self, data: st.DataObject, outcome: str) -> None:
            choices = sorted((w, key) for w, keys in self.running.items() for key in keys)
            w, key = data.draw(st.sampled_from(choices), label="lease")
            worker = self.workers[w]
            attempt = next((x for x in worker.held.attempts() if x.key == key), None)
            told = attempt is not None and attempt.token.cancelled
            if told and key[0] in self.model.scheduler.tasks and (
                    self.model.scheduler.tasks[key[0]].cancel_requested):
                outcome = "acknowledge_cancel"  # a function told to cancel does so
            elif outcome == "acknowledge_cancel" and not told:
                outcome = "complete"  # a function raises Cancelled only when told to stop
            self.moves.append(f"{lease_text(key)} of {w!r} returns: {outcome}")
            self.running[w].discard(key)
            lost = False
            if (w, key) in self.abandoned:
                self.abandoned.discard((w, key))
            elif batched:
                if key in self.held_by(w):  # queued: its step comes with the batch
                    self.pending[w].append((key, _OUTCOMES[outcome]))
            elif key in self.held_by(w):
                # Every second report with a current lease loses its answer: the report
                # commits, the worker hears a store error and makes it again.
                self.reports += current(self.model, w, *key)
                lost = current(self.model, w, *key) and self.reports % 2 == 0
                if lost:
                    self.moves[-1] += ", its answer lost"
                    params = (("w", w), ("t", key[0]), ("g", key[1]), ("a", key[2]))
                    self.take([Step(_OUTCOMES[outcome] + _LOST, params),
                               Step("RepeatedReport", params)])
                else:
                    self.end(w, key, _OUTCOMES[outcome])
            value = Cancelled() if outcome == "acknowledge_cancel" else None
            with answer_lost(worker.db, outcome) if lost else contextlib.nullcontext():
                worker.returned(key, outcome, value)
            self.agree()

        # Time limits and crashes are rarer than the other moves, so that versions live long
        # enough for their leases to expire and be re-claimed.
        @precondition(lambda self: any(self.running.values()) and len(self.moves) % 4 == 3)
        @rule(data=st.data())
        def time_up(self, data: st.DataObject) -> None:
            choices = sorted((w, key) for w, keys in self.running.items() for key in keys
                             if (w, key) not in self.abandoned)
            if not choices:
                return
            w, key = data.draw(st.sampled_from(choices), label="lease")
            self.moves.append(f"{lease_text(key)} of {w!r}: time limit")
            self.abandoned.add((w, key))
            if key in self.held_by(w):
                if batched:
                    self.pending[w].append((key, "Fail"))
                else:
                    self.end(w, key, "Fail")
                ledger.actions["abandoned at its time limit"] += 1
            self.workers[w].time_up(key)
            self.agree()

        # Only the batched machine has this rule, so that the walks of the other stay as they
        # were.
        if batched:
            @precondition(lambda self: batched and any(self.pending.values()))
            @rule(w=st.sampled_from(WORKERS))
            def send(self, w: str) -> None:
                """The worker's pending batch is sent (``Worker.send``): each report's step, in
                order; every second batch loses its answer and is sent again."""
                worker, queued = self.workers[w], self.pending[w]
                batch = list(worker._pending)
                worker._pending.clear()
                if [attempt.key for attempt, _, _, _ in batch] != [key for key, _ in queued]:
                    self.fail(f"send({w!r}): the worker's batch {[a.key for a, *_ in batch]} is "
                              f"not the reports queued, in order: {[key for key, _ in queued]}")
                self.sends += bool(batch)
                lost = bool(batch) and self.sends % 2 == 0
                self.moves.append(f"send({w!r}) of {len(batch)} reports"
                                  + (", its answer lost" if lost else ""))
                for key, action in queued:
                    t, g, a = key
                    params = (("w", w), ("t", t), ("g", g), ("a", a))
                    if not lost:
                        self.end(w, key, action)
                    elif current(self.model, w, t, g, a):
                        self.take([Step(action + _LOST, params)])
                if lost:  # the batch again: each accepted report a repeat, the others refused
                    for key, _ in queued:
                        t, g, a = key
                        params = (("w", w), ("t", t), ("g", g), ("a", a))
                        self.take([Step("RepeatedReport" if repeat(self.model, t, g, a)
                                        else "Refused", params)])
                queued.clear()
                ledger.actions["batches sent"] += 1
                with answer_lost(worker.db, "report_many") if lost else contextlib.nullcontext():
                    worker.send(batch)
                self.agree()

        @rule()
        def tick(self) -> None:
            self.moves.append("tick(1)")
            self.db.tick(1)
            if ACTIONS["Tick"].enabled(self.model, limits=LIMITS):
                self.take([Step("Tick", ())])
            else:
                self.expected.append(("Tick", {}))  # recorded; the spec has no step for it
            self.agree()

        @precondition(lambda self: len(self.moves) % 4 == 1)
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            """Mostly a running version: its function is told at the next beat."""
            tasks = self.model.scheduler.tasks
            running = sorted(str(t) for t in tasks if t in self.model.holder)
            t = data.draw(st.sampled_from(running or sorted(map(str, tasks))), label="t")
            self.moves.append(f"cancel({t!r})")
            refusal = ACTIONS["Cancel"].refused(self.model, t, limits=LIMITS)
            try:
                self.db.cancel(t)
            except Exception as error:  # compared with the model's refusal below
                if refusal is None or type(error) is not refusal.error:
                    self.fail(f"cancel({t!r}) raised {error!r}, the model: {refusal}")
            else:
                if refusal is not None and refusal.error is not None:
                    self.fail(f"cancel({t!r}) was taken, the model refuses: {refusal.reason}")
                if refusal is None:
                    self.take([Step("Cancel", (("t", t),))])
            self.agree()

        @precondition(lambda self: len(self.moves) % 7 == 2)
        @rule(w=st.sampled_from(WORKERS))
        def crash(self, w: str) -> None:
            self.moves.append(f"crash({w!r})")
            if ACTIONS["Crash"].enabled(self.model, w, limits=LIMITS):
                self.take([Step("Crash", (("w", w),))])
            self.workers[w].held.crash()
            self.workers[w]._pending.clear()  # its pending batch too
            self.pending[w].clear()
            self.running[w].clear()  # the process and its threads are gone
            self.abandoned = {(x, key) for x, key in self.abandoned if x != w}
            self.agree()

    return WorkerLockstep


def run_durable_worker_lockstep(examples: int = 100, steps: int = 40, seed: int | None = None,
                                *, held: Callable[[], Held] = Held, ledger: Ledger | None = None,
                                hypothesis_settings: Mapping[str, Any] | None = None,
                                batched: bool = False) -> Ledger:
    """Run the machine for ``examples`` walks of up to ``steps`` moves each.

    Raises :class:`WorkerDisagreement` on the first failure, shrunk by Hypothesis to a shortest
    walk that shows it. ``seed`` fixes Hypothesis's choices; ``batched``: the workers batch
    their reports (:func:`durable_worker_lockstep_machine`).
    """
    ledger = Ledger() if ledger is None else ledger
    machine = durable_worker_lockstep_machine(ledger, held=held, batched=batched)
    quiet = logging.getLogger("refsched.worker")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the walks lose leases and pass time limits on purpose
    # With a seed, the walks must be the same in every process: Hypothesis's own labels of
    # strategies depend on hash() and on addresses (refsched.verify.stable).
    labels = stable_labels() if seed is not None else contextlib.nullcontext()
    try:
        with labels:
            run_machine(machine, examples=examples, steps=steps, seed=seed,
                        overrides=hypothesis_settings, slow=True)
    finally:
        quiet.setLevel(level)
    return ledger
