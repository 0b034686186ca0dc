"""Lock-step: DurableScheduler and the durable scheduler's reference model, driven by the same
random calls.

A Hypothesis state machine makes each call on both sides: on the model
(``refsched.model.durable``, ``spec/DurableScheduler.tla``'s actions as pure functions) and on a
:class:`~refsched.durable.DurableScheduler` built by ``factory(url, max_concurrency=...,
max_attempts=..., clock="virtual", record=True)`` over a fresh SQLite store in a temporary
folder. The rules are the API calls and the worker's moves: ``submit``, ``submit_optional``
(``submit(..., optional=...)``: SubmitOptional), ``add_deps`` (AddDeps, mostly on a pending
version), ``submit_many`` (a batch of a few items: their Submit steps in order, or the whole
batch refused with the model unchanged), ``report_many`` (a batch of a few reports with
leases held and, sometimes, one no longer held: each report's own step in order, a refused one
alone), ``start``,
``claim(worker, limit)`` (the model predicts the whole transaction with ``claim_transaction``:
Expire, Reclaim, Claim), ``heartbeat`` / ``complete`` / ``fail`` / ``acknowledge_cancel`` with a
lease the worker holds (current, or lost: a Refused step), with a lease it no longer holds (a
paused or forgotten worker's, refused) and repeated after the accepted report (RepeatedCallback),
``cancel``, ``retry``, ``close``, ``tick`` (the store's clock moves one second), ``pause`` (a
worker holding a live lease is still while the clock passes its deadline and another worker
claims) and ``crash(w)`` (the harness forgets the leases of ``w``; they stay in the store until
they expire). A few bad calls per walk must be refused by both with the same error and change
nothing.

Some answers are lost on the way to the worker (the harness checks them, then acts as if it had
not heard them): every second claim that gives leases is ClaimAnswerLost / ReclaimAnswerLost
(the worker holds none of them); a complete (and fail, and acknowledge_cancel) with a current
lease may lose its answer, as the walk draws, and is then CompleteAnswerLost (FailAnswerLost,
AcknowledgeCancelAnswerLost): the worker keeps the lease, and its next report with it is a
RepeatedReport, answered with no change. Claims are counted, reports drawn: most walks end one
version or none, so counting every second end would hardly ever lose a complete's answer.

After every call the answers (or the errors' types) must be the same; the store's ``snapshot()``
must be the model's scheduler part, its ``leases()`` the model's ``attempt`` and ``holder`` and,
for each live lease, the same distance to the deadline (``TimeView`` of
``spec/MCDurableScheduler.tla``: the spec's clock counts only the ticks a lease can notice, so a
``tick()`` the spec does not take moves the store's clock alone); the leases the harness holds
must be the model's ``held``; the model's invariants and action properties must hold, the
store's ``check_invariants()`` must pass; and the store's recorded ``history()`` must be the
model's steps so far that change the store (not Crash, Refused, RepeatedReport or
RepeatedCallback; a step whose answer was lost is recorded as the step), in order,
plus a ``Tick`` for every ``tick()`` (the store records each).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from refsched.durable import DurableScheduler
from refsched.durable.jobs import NOOP
from refsched.errors import InvalidArgumentError, SchedulerError, StaleLeaseError
from refsched.model.dag.actions import optional_of
from refsched.model.durable import (
    ACTIONS,
    INITIAL,
    RECORDING,
    DurableSnapshot,
    Instance,
    Limits,
    Step,
    claim_transaction,
    violated,
    violated_by_step,
)
from refsched.model.durable.actions import claim_order, current, eligible, repeat
from refsched.model.durable.counters import Counts
from refsched.model.durable.invariants import violated_by_provenance_step, violated_provenance
from refsched.types import CloseReport, TaskState
from refsched.verify import system
from refsched.verify.dag.lockstep import states_at
from refsched.verify.durable.signals import DurableSignalLedger
from refsched.verify.itf import Step as TraceStep
from refsched.verify.itf import Trace
from refsched.verify.lockstep import WalkDisagreement, WalkLedger, run_machine
from refsched.verify.system import Fatal

__all__ = [
    "IDS",
    "LIMITS",
    "WORKERS",
    "Disagreement",
    "Ledger",
    "as_recorded",
    "durable_lockstep_machine",
    "run_durable_lockstep",
]

IDS = ("a", "b", "c", "d")
WORKERS = ("w1", "w2", "w3")
# Submits draw priorities and delays (under a profile with ``time``). Half the walks keep strict
# priority (the store's aging=None), where the order a claim takes changes with every priority
# and due time; the others open a store with aging 1 (AGED), where a due version comes before a
# priority-1 arrival once it has waited a tick, ticks that nothing else may wait for (spec: Lead).
# Edge kinds and AddDeps are on (the spec's OptionalEdges and AddDepsAllowed).
LIMITS = Limits(max_concurrency=2, max_attempts=2, lease_time=1, priorities=(0, 1),
                delays=(0, 1, 2), optional_edges=True, add_deps=True)
AGED = dataclasses.replace(LIMITS, aging=1)
FN = NOOP  # every version names it: the lock-step never runs a function
_REPORTS = {"heartbeat": "Heartbeat", "complete": "Complete", "fail": "Fail",
            "acknowledge_cancel": "AcknowledgeCancel"}

# Steps that change nothing in the store, so the store records none: a worker's own moves
# (Crash, Refused) and an answered repeat.
_UNRECORDED = frozenset({"Crash", "Refused", "RepeatedReport", "RepeatedCallback"})
_LOST = "AnswerLost"  # the suffix of a step whose answer was lost: the store records the step

LeaseKey = tuple[str, int, int]  # (task, generation, attempt), the spec's <<t, g, a>>


class Disagreement(WalkDisagreement):
    """The store and the model parted: the calls made so far (``calls``, up to and including
    the failing one), and where they differ."""

    heading = "calls"

    @property
    def calls(self) -> tuple[str, ...]:
        return self.walk


_DURABLE = system.get("durable")
# the instance the walks run over, as a trace of them states it
INSTANCE = Instance(IDS, WORKERS, LIMITS.max_concurrency, LIMITS.max_attempts,
                    LIMITS.lease_time, max_generation=0, max_time=0, optional_edges=True,
                    add_deps=True)


@dataclass
class Ledger(WalkLedger):
    """What the walks took, and each walk's recorded history if asked to keep them."""

    ACTIONS = tuple(ACTIONS)

    keep_histories: bool = False  # keep each walk's recorded history in ``histories``
    # each walk's timed_history(), with the store's aging
    histories: list[tuple[list[tuple[str, dict[str, Any], float]], float | None]] = field(
        default_factory=list)


def _relative(deadline: float, now: float) -> float:
    """How far a live lease is from its deadline; every lease past it is alike (-1)."""
    return deadline - now if deadline >= now else -1


def as_recorded(step: Step, before: DurableSnapshot,
                after: DurableSnapshot) -> tuple[str, dict[str, Any]]:
    """A model step (from ``before`` to ``after``) as the store records it in ``history()``:
    its answer lost or not, its dependencies sorted, a claim with the ids it took
    (``chosen``, the spec's ``Chosen(k)``, sorted), ``Close``'s parameter named as the store
    names it."""
    params = dict(step.params)
    if step.action == "Submit":
        params = {"t": params["t"], "D": sorted(params["D"]), "p": params.get("p", 0),
                  "d": params.get("d", 0)}
    elif step.action == "SubmitOptional":
        params = {"t": params["t"], "D": sorted(params["D"]), "O": sorted(params["O"]),
                  "p": params.get("p", 0), "d": params.get("d", 0)}
    elif step.action == "AddDeps":
        params = {"t": params["t"], "D": sorted(params["D"]), "O": sorted(params["O"])}
    elif step.action.removesuffix(_LOST) == "Claim":
        params["chosen"] = sorted(str(t) for t, view in after.scheduler.tasks.items()
                                  if view.state is TaskState.RUNNING
                                  and before.scheduler.tasks[t].state is TaskState.READY)
    elif step.action == "Close":
        params = {"c": params["cancelPending"]}
    return step.action.removesuffix(_LOST), params


class _Has:
    """The parts of the contract a durable profile keeps (all of them for None)."""

    FLAGS = ("deps", "generations", "start", "cancel", "retry", "close", "heartbeat",
             "snapshot", "validates", "time")

    def __init__(self, profile: Any) -> None:
        for flag in self.FLAGS:
            setattr(self, flag, True if profile is None else bool(getattr(profile, flag)))
        # edge kinds and add_deps: the full contract's, or a profile's that names them
        # (an edge kind is a dependency's: a profile without deps has none)
        self.edges = profile is None or (self.deps and bool(getattr(profile, "edges", False)))
        # submit_many: the full contract's, or a profile's that names it (the machine also asks
        # that the factory have it: a remote implementation's adapter has no batch call)
        self.bulk = profile is None or bool(getattr(profile, "bulk", False))

    deps: bool
    generations: bool
    start: bool
    cancel: bool
    retry: bool
    close: bool
    heartbeat: bool
    snapshot: bool
    validates: bool
    time: bool
    edges: bool
    bulk: bool


class ModelRefused(Exception):
    """The model cannot take a step the machine chose, or the step breaks an invariant."""


_Taken = tuple[tuple[Any, ...], DurableSnapshot]  # a step's arguments, the state after it
ModelMemo = dict[tuple[DurableSnapshot, Step, Limits], _Taken | str]
"""What :func:`model_takes` found for a (state, step, limits): the model is pure, and the walks
of one run (Hypothesis's shrinking most of all) take the same steps from the same states again
and again, each time checking every invariant, some of which look at every action."""


def model_takes(model: DurableSnapshot, step: Step, limits: Limits,
                memo: ModelMemo | None = None) -> _Taken:
    """``step``'s arguments and the model's state after it, its invariants and the step's
    properties checked; :class:`ModelRefused` says why not (both machines take steps so).
    ``memo``: the answers found so far in this run (the model and its predicates must not
    change while it is kept)."""
    if memo is None:
        return _model_takes(model, step, limits)
    key = (model, step, limits)
    found = memo.get(key)
    if found is None:
        try:
            found = memo[key] = _model_takes(model, step, limits)
        except ModelRefused as refused:
            found = memo[key] = str(refused)
    if isinstance(found, str):
        raise ModelRefused(found)
    return found


def _model_takes(model: DurableSnapshot, step: Step, limits: Limits) -> _Taken:
    action = ACTIONS[step.action]
    args = action.arguments(step.param_map)
    refusal = action.refused(model, *args, limits=limits)
    if refusal is not None:
        raise ModelRefused(f"the model cannot take {step}: {refusal.reason}")
    after = action.step(model, *args, limits=limits)
    broken = violated(after, limits) + violated_by_step(model, after, limits)
    if after.scheduler.provenance is not None:  # RecordProvenance: its invariants too
        broken += violated_provenance(after, limits) + violated_by_provenance_step(
            model, after, limits)
    if broken:
        raise ModelRefused(f"the model breaks {broken} at {step}")
    return args, after


def durable_lockstep_machine(factory: Callable[..., Any], ledger: Ledger, *,
                             fatal: Fatal = (), profile: Any = None, bulk: bool | None = None,
                             provenance: bool = False, signals: bool = False
                             ) -> type[RuleBasedStateMachine]:
    """The state machine that drives ``factory`` (a DurableScheduler class) and the model.

    An error of a ``fatal`` type (a harness failure, not an answer) propagates as it is.
    ``profile`` (a :class:`~refsched.profile.DurableProfile`; None: the full contract)
    narrows the calls to what the implementation keeps: without ``deps`` every submission is
    independent, without ``generations`` each id is submitted once, without ``start`` the
    model starts at once and ``start()`` is not called; without ``cancel``, ``retry``,
    ``close`` or ``heartbeat`` those calls are not made; without ``snapshot`` only the answers
    (and the leases the workers hold) are compared; without ``validates`` no bad call is made.
    ``bulk``: whether walks call ``submit_many``; None: when the contract is the full one and
    ``factory`` has it (a DurableScheduler class).
    With ``provenance`` the model records provenance (the spec's ``RecordProvenance``), and the
    store's ``snapshot(provenance=True)`` must hold the model's records: the same walks (no
    rule is added), one comparison more after each call.
    With ``signals`` each submission is given a task type and tenant in turn (no draw is
    added), and after each call the store's ``signals()`` must keep the conservation laws and
    hold, per partition, what the model's steps count (:mod:`refsched.verify.durable.signals`).
    """
    has = _Has(profile)
    has.bulk = (has.bulk and callable(getattr(factory, "submit_many", None))
                if bulk is None else bulk)
    reports = sorted(m for m in _REPORTS
                     if (m != "heartbeat" or has.heartbeat)
                     and (m != "acknowledge_cancel" or has.cancel))

    def held_report(method: str) -> Callable[..., None]:
        """A worker reports with a lease it holds: live, or lost without its knowing; an
        accepted end's answer may be lost on its way back (``lose``). One rule per kind of
        report, so that each is as likely as any other call in every walk."""
        @precondition(lambda self: method in reports and any(self.held.values()))
        @rule(data=st.data(), lose=st.booleans())
        def report(self: Any, data: st.DataObject, lose: bool) -> None:
            choices = sorted((w, key) for w, keys in self.held.items() for key in keys)
            w, key = data.draw(st.sampled_from(choices), label="lease")
            self.report_on(w, key, self.held[w][key], method, True, lose)
        report.__name__ = report.__qualname__ = f"report_{method}"  # as the walk lists it
        return report

    memo: ModelMemo = {}  # the model's steps, for every walk of the run

    class DurableLockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.folder = tempfile.mkdtemp(prefix="refsched-durable-lockstep-")
            self.limits = LIMITS  # AGED for a walk that draws aging (setup)
            self.db: DurableScheduler = self.open(None)
            self.model: DurableSnapshot = RECORDING if provenance else INITIAL
            self.held: dict[str, dict[LeaseKey, Any]] = {}  # worker -> its leases (the API's)
            self.old: dict[tuple[str, LeaseKey], Any] = {}  # every lease ever handed out
            self.enders: dict[str, Any] = {}  # task -> the lease whose report ended it
            self.claims = 0  # claims that gave leases: every second loses its answer
            self.expected: list[tuple[str, dict[str, Any]]] = []  # what history() must be
            self.calls: list[str] = []
            self.taken: list[TraceStep] = []  # the model's spec steps, for the trace
            self.bad = 0  # calls made that must be refused
            self.counts = Counts()  # what stats() must count, from the model's steps
            self.refusals: Counter[str] = Counter()  # refused and repeated reports, cycles
            self.signals = DurableSignalLedger() if signals else None
            self.clock = 0.0  # the store's virtual clock: the seconds of every tick() so far
            # (task, generation) of each claimed version with optional deps -> how they had
            # ended at its first claim, which its input summary keeps from then on
            self.inputs: dict[tuple[Hashable, int], dict[Hashable, Any]] = {}
            ledger.examples += 1

        def open(self, aging: int | None) -> DurableScheduler:
            """A new store, with ``aging`` (ticks, or None: strict priority) under a profile
            with ``time``."""
            name = "store.db" if aging is None else "store-aged.db"
            return factory(  # type: ignore[no-any-return]
                f"sqlite:///{Path(self.folder) / name}",
                max_concurrency=LIMITS.max_concurrency, max_attempts=LIMITS.max_attempts,
                clock="virtual", record=True, **({"aging": aging} if has.time else {}))

        def teardown(self) -> None:
            if ledger.keep_histories and has.snapshot:
                ledger.histories.append((self.db.timed_history(), self.db.aging))
            self.db.release()
            shutil.rmtree(self.folder, ignore_errors=True)

        # -- checking -------------------------------------------------------------------

        def fail(self, reason: str) -> NoReturn:
            instance = dataclasses.replace(INSTANCE, priorities=self.limits.priorities,
                                           delays=self.limits.delays, aging=self.limits.aging)
            raise Disagreement(reason, self.calls, Trace(
                "durable-lockstep", _DURABLE.constants(instance),
                _DURABLE.spec_state(INITIAL, instance), tuple(self.taken),
                {"source": "refsched.verify.durable.lockstep"}),
                states_at(self.model.scheduler, lambda: self.db.snapshot()))

        def labels(self) -> dict[str, Any]:
            """The partition keywords of the next submission (none without ``signals``)."""
            return {} if self.signals is None else self.signals.next_labels()

        def take(self, steps: list[Step], given: Sequence[dict[str, Any]] = ()) -> None:
            """The model takes ``steps`` (already chosen as enabled); ``given``: the
            partition keywords of their submissions, in order."""
            labelled = iter(given)
            for step in steps:
                try:
                    args, after = model_takes(self.model, step, self.limits, memo)
                except ModelRefused as refused:
                    self.fail(str(refused))
                before, self.model = self.model, after
                self.taken.append(TraceStep(step.action, dict(step.param_map),
                                            _DURABLE.spec_state(self.model, INSTANCE)))
                self.counts = self.counts.step(step.action, args, before, self.model)
                if self.signals is not None:
                    self.signals.step(
                        step.action, step.param_map, before.scheduler, self.model.scheduler,
                        next(labelled, None) if step.action in ("Submit", "SubmitOptional")
                        else None, self.clock)
                if step.action not in _UNRECORDED:
                    self.expected.append(as_recorded(step, before, self.model))
                ledger.actions[step.action] += 1

        def call(self, text: str, method: Callable[[], Any]) -> tuple[Any, Exception | None]:
            self.calls.append(text)
            try:
                return method(), None
            except Exception as error:  # any error is an answer, compared with the model's
                if isinstance(error, fatal):
                    raise
                return None, error

        def answer(self, got: tuple[Any, Exception | None], expected: Any,
                   error: type[Exception] | None) -> None:
            value, raised = got
            if error is not None:
                if type(raised) is not error:
                    self.fail(f"expected {error.__name__}, the store "
                              + (f"raised {raised!r}" if raised else f"answered {value!r}"))
                ledger.actions[f"refused: {error.__name__}"] += 1
                self.refusals[error.__name__] += 1
            elif raised is not None:
                self.fail(f"expected {expected!r}, the store raised {raised!r}")
            elif value != expected:
                self.fail(f"expected {expected!r}, the store answered {value!r}")
            self.agree()

        def agree(self) -> None:
            db, model = self.db, self.model
            if not has.snapshot:
                self.agree_held()
                return
            actual = db.snapshot(provenance=True) if provenance else db.snapshot()
            if actual != model.scheduler:
                self.fail(f"the store's snapshot is not the model's:\n  model {model.scheduler}"
                          f"\n  store {actual}")
            now = db.now()
            leases = db.leases()
            store = ({t: v.attempt for t, v in leases.items()},
                     {t: v.holder for t, v in leases.items() if v.holder is not None},
                     {t: _relative(v.deadline, now) for t, v in leases.items()
                      if v.holder is not None and v.deadline is not None})
            spec = (dict(model.attempt), dict(model.holder),
                    {t: _relative(d, model.now) for t, d in model.deadline.items()})
            if store != spec:
                self.fail(f"the store's leases (attempt, holder, deadline - now) are not the "
                          f"model's:\n  model {spec}\n  store {store}")
            stats = db.stats()
            expected = {**self.counts.expected(model),
                        "cycles_reported": self.refusals["CycleError"],
                        "stale_callbacks": self.refusals["StaleLeaseError"],
                        "duplicate_callbacks": self.refusals["repeated"]}
            wrong = {k: (v, getattr(stats, k)) for k, v in expected.items()
                     if getattr(stats, k) != v}
            if wrong:
                self.fail("stats() is not what the model's steps count (field: model, store): "
                          + ", ".join(f"{k}: {a!r}, {b!r}" for k, (a, b) in wrong.items()))
            if has.edges:
                self.agree_inputs()
            if self.signals is not None:
                broken = self.signals.problems(db.signals(), stats, model.scheduler)
                if broken:
                    self.fail("signals() is not what the laws and the model's steps say: "
                              + "; ".join(broken))
            self.agree_held()
            try:
                db.check_invariants()
            except AssertionError as error:
                self.fail(f"check_invariants(): {error!r}")
            history = db.history()
            if history != self.expected:
                pairs = enumerate(zip(history, self.expected, strict=False))
                first = next((i for i, (a, b) in pairs if a != b),
                             min(len(history), len(self.expected)))
                self.fail(f"the store's history differs from the model's steps at step "
                          f"{first + 1}:\n  model {self.expected[first:first + 3]}\n  store "
                          f"{history[first:first + 3]}")

        def agree_inputs(self) -> None:
            """The input summary of each version with optional deps: how they had ended at
            its first claim once it was claimed (after the call that claimed it: a ready
            version's deps have all ended, and only a later call renews one), else how they
            have ended so far; each dep by generation, state and ``blocked_by``."""
            tasks = self.model.scheduler.tasks
            for t, v in tasks.items():
                optional = optional_of(v)
                if not optional:
                    continue
                ended = {d: (tasks[d].generation, tasks[d].state, tasks[d].blocked_by)
                         for d in optional if d in tasks and tasks[d].state.is_terminal}
                if self.model.attempt.get(t, 0) > 0:
                    ended = self.inputs.setdefault((t, v.generation), ended)
                got = {d: (o.generation, o.state, o.blocked_by)
                       for d, o in self.db.input_summary(str(t)).items()}
                if got != ended:
                    self.fail(f"input_summary({t!r}) is not what the model's steps give:\n"
                              f"  model {ended}\n  store {got}")

        def agree_held(self) -> None:
            """The leases the workers hold are the model's ``held``."""
            held = {w: frozenset(keys) for w, keys in self.held.items() if keys}
            if held != dict(self.model.held):
                self.fail(f"the workers hold {held}, the model's held is "
                          f"{dict(self.model.held)}")

        def state_of(self, task: str) -> TaskState:
            state: TaskState = self.model.scheduler.tasks[task].state
            return state

        def known(self, data: st.DataObject) -> str:
            """An id: mostly one already submitted, sometimes any."""
            ids = sorted(str(t) for t in self.model.scheduler.tasks) or list(IDS)
            return data.draw(st.sampled_from(ids) if data.draw(st.integers(0, 4), label="known")
                             else st.sampled_from(IDS), label="t")

        # -- the scheduler's actions ----------------------------------------------------

        @initialize(graph=st.lists(st.tuples(st.sampled_from(IDS),
                                             st.frozensets(st.sampled_from(IDS), max_size=2)),
                                   min_size=1, max_size=4),
                    start=st.integers(0, 5), aged=st.booleans())
        def setup(self, graph: list[tuple[str, frozenset[str]]], start: int,
                  aged: bool) -> None:
            """A store with aging or strict priority (``aged``, under a profile with
            ``time``), a few submissions on ids submitted before them, then (most often)
            start()."""
            if aged and has.time:
                self.db.release()
                self.limits = AGED
                self.db = self.open(AGED.aging)
            if not has.start:  # claims are open from the beginning: no call starts them
                self.take([Step("Start", ())])
            for t, deps in graph:
                self.submit(t, deps & set(map(str, self.model.scheduler.tasks)))
            if start and has.start:
                self.start()

        # The scheduler's own calls are enabled one call in three, so that walks spend most of
        # their calls on claims, leases and time.
        @precondition(lambda self: len(self.calls) % 3 == 0)
        @rule(t=st.sampled_from(IDS), deps=st.frozensets(st.sampled_from(IDS), max_size=2),
              p=st.sampled_from(LIMITS.priorities), d=st.sampled_from(LIMITS.delays))
        def submit(self, t: str, deps: frozenset[str], p: int = 0, d: int = 0) -> None:
            deps = deps - {t} if has.deps else frozenset()
            if not has.generations and t in self.model.scheduler.tasks:
                return
            if not has.time:
                p = d = 0
            times: dict[str, Any] = {k: v for k, v in (("priority", p), ("delay", d)) if v}
            refusal = ACTIONS["Submit"].refused(self.model, t, deps, p, d, limits=self.limits)
            given = self.labels()
            shown = "".join(f", {k}={v!r}" for k, v in {**times, **given}.items())
            got = self.call(f"submit({t!r}, {sorted(deps)}{shown})",
                            lambda: self.db.submit(t, sorted(deps), fn=FN, **times, **given))
            if refusal is None:
                self.take([Step("Submit", (("t", t), ("D", deps), ("p", p), ("d", d)))],
                          [given])
                self.enders.pop(t, None)
                self.answer(got, self.model.scheduler.tasks[t].generation, None)
            else:
                self.answer(got, None, refusal.error)

        # Only a machine that asks for edge kinds has these rules: a rule whose
        # precondition never holds still moves Hypothesis's draws, and so every walk.
        if has.edges:
            @precondition(lambda self: has.edges and len(self.calls) % 3 == 0)
            @rule(t=st.sampled_from(IDS), deps=st.frozensets(st.sampled_from(IDS), max_size=2),
                  optional=st.frozensets(st.sampled_from(IDS), min_size=1, max_size=2),
                  p=st.sampled_from(LIMITS.priorities), d=st.sampled_from(LIMITS.delays))
            def submit_optional(self, t: str, deps: frozenset[str], optional: frozenset[str],
                                p: int = 0, d: int = 0) -> None:
                """``submit(t, deps, optional=...)``: Spec: SubmitOptional (D the deps of both
                kinds, O the optional ones)."""
                optional = optional - {t}
                deps = (deps | optional) - {t}
                if not optional:
                    return
                if not has.time:
                    p = d = 0
                times: dict[str, Any] = {k: v for k, v in (("priority", p), ("delay", d)) if v}
                refusal = ACTIONS["SubmitOptional"].refused(self.model, t, deps, optional, p, d,
                                                            limits=self.limits)
                required = sorted(deps - optional)
                given = self.labels()
                shown = "".join(f", {k}={v!r}" for k, v in {**times, **given}.items())
                got = self.call(f"submit({t!r}, {required}, optional={sorted(optional)}{shown})",
                                lambda: self.db.submit(t, required, fn=FN,
                                                       optional=sorted(optional), **times,
                                                       **given))
                if refusal is None:
                    self.take([Step("SubmitOptional", (("t", t), ("D", deps), ("O", optional),
                                                       ("p", p), ("d", d)))], [given])
                    self.enders.pop(t, None)
                    self.answer(got, self.model.scheduler.tasks[t].generation, None)
                else:
                    self.answer(got, None, refusal.error)

            @precondition(lambda self: has.edges and len(self.calls) % 3 == 0)
            @rule(data=st.data(), deps=st.frozensets(st.sampled_from(IDS), max_size=2),
                  optional=st.frozensets(st.sampled_from(IDS), max_size=2))
            def add_deps(self, data: st.DataObject, deps: frozenset[str],
                         optional: frozenset[str]) -> None:
                """``add_deps(t, deps, optional=...)``: Spec: AddDeps, most often on a pending
                version (any other refuses it) with ids submitted that are not its deps yet (an
                id already a dep, or t, is refused)."""
                tasks = self.model.scheduler.tasks
                pending = sorted(str(x) for x, view in tasks.items()
                                 if view.state is TaskState.PENDING)
                if pending and data.draw(st.integers(0, 3), label="a pending one") > 0:
                    t = data.draw(st.sampled_from(pending), label="pending")
                    new = sorted(str(x) for x in tasks if x != t and x not in tasks[t].deps)
                    if new and data.draw(st.integers(0, 3), label="new deps") > 0:
                        deps = data.draw(st.frozensets(st.sampled_from(new), min_size=1,
                                                       max_size=2), label="deps")
                        optional = data.draw(st.frozensets(st.sampled_from(sorted(deps))),
                                             label="optional")
                        deps = deps - optional
                else:
                    t = self.known(data)
                optional = optional - deps
                both = deps | optional
                refusal = ACTIONS["AddDeps"].refused(self.model, t, both, optional,
                                                     limits=self.limits)
                got = self.call(
                    f"add_deps({t!r}, {sorted(deps)}, optional={sorted(optional)})",
                    lambda: self.db.add_deps(t, sorted(deps), optional=sorted(optional)))
                if refusal is None:
                    self.take([Step("AddDeps", (("t", t), ("D", both), ("O", optional)))])
                    self.answer(got, self.state_of(t), None)
                else:
                    self.answer(got, None, refusal.error)

        # Only the full contract's machine has this rule (a profile's implementation may have
        # no batch call), so that the walks of the profiles' checks stay as they were.
        if has.bulk:
            @precondition(lambda self: has.bulk and len(self.calls) % 3 == 0)
            @rule(items=st.lists(st.tuples(st.sampled_from(IDS),
                                           st.frozensets(st.sampled_from(IDS), max_size=2),
                                           st.frozensets(st.sampled_from(IDS), max_size=1)),
                                 min_size=1, max_size=3),
                  bad=st.integers(0, 5))
            def submit_many(self, items: list[tuple[str, frozenset[str], frozenset[str]]],
                            bad: int) -> None:
                """``submit_many`` of a few items: Spec: the Submit (SubmitOptional, for an
                item with optional deps) of each item, in order. Refused whole, the model
                unchanged, when the model refuses an item in the state the items before it
                leave (the first such refusal's error), or when an item is bad (``bad == 0``:
                one more item at the end names no function: InvalidArgumentError)."""
                batch: list[dict[str, Any]] = []
                steps: list[Step] = []
                generations: list[int] = []
                model, refusal = self.model, None
                labels: list[dict[str, Any]] = []
                for t, deps, optional in items:
                    optional = optional - {t} if has.edges else frozenset()
                    deps = (deps | optional) - {t}
                    labels.append(self.labels())
                    batch.append({"id": t, "deps": sorted(deps - optional), "fn": FN,
                                  **({"optional": sorted(optional)} if optional else {}),
                                  **labels[-1]})
                    steps.append(
                        Step("SubmitOptional", (("t", t), ("D", deps), ("O", optional),
                                                ("p", 0), ("d", 0))) if optional else
                        Step("Submit", (("t", t), ("D", deps), ("p", 0), ("d", 0))))
                    if refusal is None:
                        action = ACTIONS[steps[-1].action]
                        args = action.arguments(steps[-1].param_map)
                        refusal = action.refused(model, *args, limits=self.limits)
                        if refusal is None:
                            model = action.step(model, *args, limits=self.limits)
                            generations.append(model.scheduler.tasks[t].generation)
                if bad == 0:
                    batch.append({"id": "a", "fn": "not a function"})
                got = self.call(f"submit_many({batch!r})", lambda: self.db.submit_many(batch))
                ledger.actions["submit_many (batches)"] += 1
                if bad == 0:
                    self.answer(got, None, InvalidArgumentError)
                elif refusal is None:
                    self.take(steps, labels)
                    for t, _, _ in items:
                        self.enders.pop(t, None)
                    self.answer(got, generations, None)
                else:
                    self.answer(got, None, refusal.error)

        @precondition(lambda self: has.start and not self.model.scheduler.started)
        @rule()
        def start(self) -> None:
            refusal = ACTIONS["Start"].refused(self.model, limits=self.limits)
            got = self.call("start()", self.db.start)
            if refusal is None:
                self.take([Step("Start", ())])
            self.answer(got, None, None if refusal is None else refusal.error)

        @precondition(lambda self: has.cancel and len(self.calls) % 3 == 1)
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            # Often a running version: what its worker hears of the cancel (a heartbeat's
            # answer, an acknowledgement) is the part of the contract most easily got wrong.
            running = sorted(str(x) for x, view in self.model.scheduler.tasks.items()
                             if view.state is TaskState.RUNNING)
            pick_running: bool = bool(running) and data.draw(st.booleans(), label="a running one")
            if pick_running:
                t = data.draw(st.sampled_from(running), label="running")
            else:
                t = self.known(data)
            refusal = ACTIONS["Cancel"].refused(self.model, t, limits=self.limits)
            got = self.call(f"cancel({t!r})", lambda: self.db.cancel(t))
            if refusal is None:
                self.take([Step("Cancel", (("t", t),))])
            if refusal is not None and refusal.error is not None:
                self.answer(got, None, refusal.error)
            else:
                self.answer(got, self.state_of(t), None)

        @precondition(lambda self: has.retry and len(self.calls) % 3 == 1)
        @rule(data=st.data())
        def retry(self, data: st.DataObject) -> None:
            t = self.known(data)
            refusal = ACTIONS["Retry"].refused(self.model, t, limits=self.limits)
            got = self.call(f"retry({t!r})", lambda: self.db.retry(t))
            if refusal is None:
                before = self.model.scheduler.tasks
                self.take([Step("Retry", (("t", t),))])
                for x, view in self.model.scheduler.tasks.items():
                    if before[x].generation != view.generation:
                        self.enders.pop(str(x), None)
                self.answer(got, self.model.scheduler.tasks[t].generation, None)
            else:
                self.answer(got, None, refusal.error)

        @precondition(lambda self: has.close and len(self.calls) >= 25)
        @rule(c=st.booleans())
        def close(self, c: bool) -> None:
            refusal = ACTIONS["Close"].refused(self.model, c, limits=self.limits)
            got = self.call(f"close({c})", lambda: self.db.close(c))
            if refusal is None:
                self.take([Step("Close", (("cancelPending", c),))])
            tasks = self.model.scheduler.tasks
            by_state: dict[str, list[Hashable]] = {}
            for t in sorted(tasks, key=lambda x: tasks[x].seq):
                by_state.setdefault(tasks[t].state.value, []).append(t)
            report = CloseReport(**{s: tuple(ids) for s, ids in by_state.items()})
            self.answer(got, report, None)

        # -- claims, leases, time and crashes -------------------------------------------

        @rule(w=st.sampled_from(WORKERS), limit=st.integers(1, 3))
        def claim(self, w: str, limit: int) -> None:
            try:
                after, steps = claim_transaction(self.model, w, limit, limits=self.limits)
            except SchedulerError as error:
                got = self.call(f"claim({w!r}, {limit})",
                                lambda: self.db.claim(w, limit, self.limits.lease_time))
                self.answer(got, None, type(error))
                return
            before = self.model.held.get(w, frozenset())
            reclaimed = [str(s.param_map["t"]) for s in steps if s.action == "Reclaim"]
            gives = any(s.action in ("Claim", "Reclaim") for s in steps)
            self.claims += gives
            lost = gives and self.claims % 2 == 0
            if lost:  # the same transaction; the worker does not hear of its leases
                steps = [Step(s.action + _LOST, s.params) if s.action in ("Claim", "Reclaim")
                         else s for s in steps]
            # The store answers the new leases in the claim order (docs/time.md), read in the
            # state the claim chose from (after the expiries, whose Settle may have made an
            # optional edge's dependent ready): a claimed version's due time is dropped.
            rank: dict[str, int] = {}
            for step in steps:
                if step.action.removesuffix(_LOST) == "Claim":
                    rank = {str(t): i
                            for i, t in enumerate(claim_order(self.model, self.limits))}
                self.take([step])
            assert self.model == (after.replace(held=self.model.held) if lost else after)
            fresh = after.held.get(w, frozenset()) - before
            order = reclaimed + sorted((str(t) for t, _, _ in fresh if t not in reclaimed),
                                       key=lambda t: rank[t])
            by_task = {t: (t, g, a) for t, g, a in fresh}
            expected = [by_task[t] for t in order]
            value, raised = self.call(f"claim({w!r}, {limit})",
                                      lambda: self.db.claim(w, limit, self.limits.lease_time))
            if raised is None:
                for lease in [] if lost else value:
                    key = (lease.task_id, lease.generation, lease.attempt)
                    self.held.setdefault(w, {})[key] = lease
                    self.old[(w, key)] = lease
                value = [(x.task_id, x.generation, x.attempt) for x in value]
            self.answer((value, raised), expected, None)

        def report_on(self, w: str, key: LeaseKey, lease: Any, method: str, held: bool,
                      lose: bool = False) -> None:
            action = _REPORTS[method]
            t, g, a = key
            text = f"{method}({w!r}'s lease {key})"
            params = (("w", w), ("t", t), ("g", g), ("a", a))
            if held and current(self.model, w, t, g, a):
                got = self.call(text, lambda: getattr(self.db, method)(lease))
                requested = self.model.scheduler.tasks[t].cancel_requested
                lost = method != "heartbeat" and lose
                self.take([Step(action + _LOST if lost else action, params)])
                if method == "heartbeat":
                    self.answer(got, requested, None)
                    return
                if not lost:  # else the worker keeps the lease, and reports with it again
                    del self.held[w][key]
                self.enders[t] = (w, key, lease)
                self.answer(got, self.state_of(t), None)
                return
            if held and repeat(self.model, t, g, a):
                if method == "heartbeat":
                    return  # a worker that lost its report's answer makes the report again
                # The report whose answer was lost, again: answered, no change.
                got = self.call(text, lambda: getattr(self.db, method)(lease))
                self.take([Step("RepeatedReport", params)])
                del self.held[w][key]
                self.refusals["repeated"] += 1
                self.answer(got, self.state_of(t), None)
                return
            ender = self.enders.get(t)
            if method != "heartbeat" and ender is not None and ender[1] == key:
                # The same lease reports again after its accepted report: answered, no change.
                refusal = ACTIONS["RepeatedCallback"].refused(self.model, t, limits=self.limits)
                got = self.call(text, lambda: getattr(self.db, method)(lease))
                if refusal is not None:
                    self.fail(f"the model refuses the repeat: {refusal.reason}")
                self.take([Step("RepeatedCallback", (("t", t),))])
                self.refusals["repeated"] += 1
                self.answer(got, self.state_of(t), None)
                return
            refusal = ACTIONS[action].refused(self.model, w, t, g, a, limits=self.limits)
            if refusal is None or refusal.error is None:
                return  # a live lease its worker forgot: no worker can report with it
            got = self.call(text, lambda: getattr(self.db, method)(lease))
            if held:
                self.take([Step("Refused", (("w", w), ("t", t), ("g", g), ("a", a)))])
                del self.held[w][key]
            self.answer(got, None, refusal.error)

        report_heartbeat = held_report("heartbeat")
        report_complete = held_report("complete")
        report_fail = held_report("fail")
        report_acknowledge_cancel = held_report("acknowledge_cancel")

        # Only the full contract's machine has this rule, as submit_many's.
        if has.bulk:
            @precondition(lambda self: has.bulk and any(self.held.values()))
            @rule(data=st.data(), lose=st.booleans())
            def report_many(self, data: st.DataObject, lose: bool) -> None:
                """``report_many`` of a few reports with leases the workers hold (live, lost
                without their knowing, or whose answer was lost) and, sometimes, one with a
                lease no longer held, anywhere in the batch. Spec: each report's own step, in
                order, as report_on takes a single one: Complete / Fail / AcknowledgeCancel
                (their AnswerLost variants when the batch's answer is lost: the worker keeps
                every lease of it), RepeatedReport, RepeatedCallback, or refused (Refused when
                held) without undoing the others; the answers, one per report, the state each
                left or a StaleLeaseError."""
                choices = sorted((w, key) for w, keys in self.held.items() for key in keys)
                picks: st.SearchStrategy[list[tuple[str, LeaseKey]]] = st.lists(
                    st.sampled_from(choices), min_size=1, max_size=3, unique=True)
                chosen = [(w, key, True) for w, key in data.draw(picks, label="leases")]
                olds = sorted(k for k in self.old if k[1] not in self.held.get(k[0], {}))
                another: bool = data.draw(st.booleans(), label="an old lease too")
                if olds and another:
                    w, key = data.draw(st.sampled_from(olds), label="old lease")
                    chosen.insert(data.draw(st.integers(0, len(chosen)), label="at"),
                                  (w, key, False))
                kinds = [m for m in reports if m != "heartbeat"]
                batch: list[tuple[str, Any, None]] = []
                expected: list[Any] = []
                for w, key, held in chosen:
                    method = data.draw(st.sampled_from(kinds), label="kind")
                    lease = self.held[w][key] if held else self.old[(w, key)]
                    answer = self.batch_step(w, key, lease, method, held, lose)
                    if answer is not None:
                        batch.append((method, lease, None))
                        expected.append(answer)
                if not batch:
                    return
                value, raised = self.call(f"report_many({batch!r})",
                                          lambda: self.db.report_many(batch))
                ledger.actions["report_many (batches)"] += 1
                got = None if value is None else [
                    type(v) if isinstance(v, Exception) else v for v in value]
                if raised is not None or got != expected:
                    self.fail(f"report_many: expected {expected!r}, the store "
                              + (f"raised {raised!r}" if raised else f"answered {value!r}"))
                self.agree()

        def batch_step(self, w: str, key: LeaseKey, lease: Any, method: str, held: bool,
                       lost: bool) -> Any:
            """The model's step for one report of a batch (as report_on, the store not yet
            called): the answer the store must give it (a state, or StaleLeaseError), or None
            for a report no worker could make (a live lease its worker forgot)."""
            action = _REPORTS[method]
            t, g, a = key
            params = (("w", w), ("t", t), ("g", g), ("a", a))
            if held and current(self.model, w, t, g, a):
                self.take([Step(action + _LOST if lost else action, params)])
                if not lost:
                    del self.held[w][key]
                self.enders[t] = (w, key, lease)
                return self.state_of(t)
            if held and repeat(self.model, t, g, a):
                if not lost:  # heard: the worker drops the lease
                    self.take([Step("RepeatedReport", params)])
                    del self.held[w][key]
                self.refusals["repeated"] += 1
                return self.state_of(t)
            ender = self.enders.get(t)
            if ender is not None and ender[1] == key:
                refusal = ACTIONS["RepeatedCallback"].refused(self.model, t, limits=self.limits)
                if refusal is not None:
                    self.fail(f"the model refuses the repeat: {refusal.reason}")
                self.take([Step("RepeatedCallback", (("t", t),))])
                self.refusals["repeated"] += 1
                return self.state_of(t)
            refusal = ACTIONS[action].refused(self.model, w, t, g, a, limits=self.limits)
            if refusal is None or refusal.error is None:
                return None
            if refusal.error is not StaleLeaseError:
                self.fail(f"a report of a batch refused with {refusal.error.__name__}")
            if held and not lost:  # heard: the worker drops the lease
                self.take([Step("Refused", params)])
                del self.held[w][key]
            ledger.actions["refused: StaleLeaseError"] += 1
            ledger.actions["report_many (refused reports)"] += 1
            self.refusals["StaleLeaseError"] += 1
            return StaleLeaseError

        @precondition(lambda self: bool(self.old))
        @rule(data=st.data(), method=st.sampled_from(reports))
        def report_stale(self, data: st.DataObject, method: str) -> None:
            """A report with a lease its worker no longer holds: ended, refused or forgotten."""
            choices = sorted(k for k in self.old if k[1] not in self.held.get(k[0], {}))
            if choices:
                w, key = data.draw(st.sampled_from(choices), label="old lease")
                self.report_on(w, key, self.old[(w, key)], method, False)

        @precondition(lambda self: has.time and bool(eligible(self.model)))
        @rule(t=st.sampled_from(IDS), arrives=st.booleans())
        def wait(self, t: str, arrives: bool) -> None:
            """The clock passes while a due version waits (no worker asks), then (``arrives``)
            a version of the highest priority arrives: with aging, the one that waited comes
            first once it has waited long enough, and only a clock that counts those ticks
            knows when."""
            for _ in range(2):
                self.tick()
            if arrives:
                self.submit(t, frozenset(), max(LIMITS.priorities), 0)

        @precondition(lambda self: bool(self.model.holder) or len(self.calls) % 4 == 0)
        @rule()
        def tick(self) -> None:
            got = self.call("tick(1)", lambda: self.db.tick(1))
            if got[1] is None:
                self.clock += 1
            if ACTIONS["Tick"].enabled(self.model, limits=self.limits):
                self.take([Step("Tick", ())])
            else:
                self.expected.append(("Tick", {}))  # recorded; the spec has no step for it
                ledger.actions["tick (no spec step)"] += 1
            self.answer((None, got[1]), None, None)  # the store's own clock: not the spec's

        @precondition(lambda self: any(self.model.holder.get(t) == w
                                       for w, keys in self.held.items() for t, _, _ in keys))
        @rule(data=st.data())
        def pause(self, data: st.DataObject) -> None:
            """A worker holding a live lease stops (a long pause) while the clock passes its
            deadline and another worker claims: the claim's transaction expires the lease, and
            the paused worker's next report with it is refused."""
            paused = sorted(w for w, keys in self.held.items()
                            if any(self.model.holder.get(t) == w for t, _, _ in keys))
            w = data.draw(st.sampled_from(paused), label="paused worker")
            mine = [t for t, _, _ in self.held[w] if self.model.holder.get(t) == w]
            for _ in range(self.limits.lease_time + 1):
                if all(self.model.deadline.get(t, 0) < self.model.now for t in mine):
                    break
                self.tick()
            self.claim(data.draw(st.sampled_from([x for x in WORKERS if x != w]),
                                 label="claimer"), 1)

        @precondition(lambda self: len(self.calls) % 3 == 2)
        @rule(w=st.sampled_from(WORKERS))
        def crash(self, w: str) -> None:
            self.calls.append(f"crash({w!r})")
            if ACTIONS["Crash"].enabled(self.model, w, limits=self.limits):
                self.take([Step("Crash", (("w", w),))])
            self.held.pop(w, None)
            crash = getattr(self.db, "crash", None)  # an implementation that can be told
            if crash is not None:
                crash(w)
            self.agree()

        # -- bad input ------------------------------------------------------------------

        @precondition(lambda self: has.validates and self.bad < 3)
        @rule(data=st.data())
        def bad_call(self, data: st.DataObject) -> None:
            self.bad += 1
            t = data.draw(st.sampled_from(IDS), label="t")
            calls: list[tuple[str, Callable[[], Any]]] = [
                ("claim('w1', 0)", lambda: self.db.claim("w1", 0, self.limits.lease_time)),
                ("claim('w1', True)", lambda: self.db.claim("w1", True, self.limits.lease_time)),
                (f"submit({t!r}, [{t!r}])", lambda: self.db.submit(t, [t], fn=FN)),
                ("heartbeat('lease')", lambda: self.db.heartbeat("lease")),  # type: ignore[arg-type]
                (f"submit({t!r}, fn='no module')", lambda: self.db.submit(t, fn="no module")),
            ]
            text, method = data.draw(st.sampled_from(calls), label="bad call")
            self.answer(self.call(text, method), None, InvalidArgumentError)

    return DurableLockstep


def run_durable_lockstep(factory: Callable[..., Any] = DurableScheduler, examples: int = 100,
                         steps: int = 40, seed: int | None = None, *,
                         ledger: Ledger | None = None,
                         hypothesis_settings: Mapping[str, Any] | None = None,
                         fatal: Fatal = (), profile: Any = None,
                         bulk: bool | None = None, provenance: bool = False,
                         signals: bool = False) -> Ledger:
    """Run the lock-step machine for ``examples`` walks of up to ``steps`` calls each.

    Raises :class:`Disagreement` on the first failure, shrunk by Hypothesis to a shortest walk
    that shows it (the calls are in its message). ``seed`` fixes Hypothesis's choices;
    ``hypothesis_settings`` overrides the settings chosen here; ``provenance`` compares the
    provenance records too, ``signals`` the store's signals (:func:`durable_lockstep_machine`).
    """
    ledger = Ledger() if ledger is None else ledger
    machine = durable_lockstep_machine(factory, ledger, fatal=fatal, profile=profile,
                                       bulk=bulk, provenance=provenance, signals=signals)
    run_machine(machine, examples=examples, steps=steps, seed=seed,
                overrides=hypothesis_settings, slow=True)
    return ledger
