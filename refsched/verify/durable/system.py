"""The durable scheduler as a :class:`~refsched.verify.system.System`.

``spec/DurableScheduler.tla``, the model ``refsched.model.durable``, and
``refsched.durable.DurableScheduler`` on a fresh SQLite store in a temporary folder, created
with ``clock="virtual"`` and the trace's ``MaxConcurrency`` and ``MaxAttempts``. The workers are
the harness: it keeps the :class:`~refsched.durable.Lease` objects ``claim()`` returned, per
worker (the spec's ``held``), and reports with them. Every step is one call whose answer the
step fixes:

==============================  ===============================================================
Submit(t, D, p, d)              ``submit(t, D, fn=noop, priority=p, delay=d)`` (without the two
                                keywords when both are 0) returns the next generation of ``t``
SubmitOptional(t, D, O, p, d)   ``submit(t, D \\ O, fn=noop, optional=O, ...)`` as Submit
AddDeps(t, D, O)                ``add_deps(t, D \\ O, optional=O)`` returns the state after it
Start                           ``start()`` returns
Claim(w, k)                     ``claim(w, limit=k, lease=LeaseTime)`` returns ``k`` first
                                attempts, the first eligible versions in the claim order
Reclaim(w, t)                   ``claim(w, limit=1, lease=LeaseTime)`` returns the next attempt
                                of ``t``
Expire(t)                       ``expire()`` returns (the expiry ``claim()`` takes first)
Heartbeat(w, t, g, a)           ``heartbeat(lease)`` returns whether a cancel was requested
Complete / Fail /               ``complete`` / ``fail`` / ``acknowledge_cancel(lease)`` returns
AcknowledgeCancel(w, t, g, a)   succeeded / failed / cancelled; ``w`` drops the lease
Refused(w, t, g, a)             ``heartbeat(lease)`` raises ``LeaseLostError`` and
                                ``complete(lease)`` raises ``StaleLeaseError``; ``w`` drops it
Tick                            ``tick(1)`` returns the next time
Crash(w)                        ``w`` drops every lease it holds (no call: the store cannot tell)
Cancel(t)                       ``cancel(t)`` returns cancelled (waiting) or the state
Retry(t)                        ``retry(t)`` returns the next generation of ``t``
Close(cancelPending)            ``close(cancel_pending)`` reports every id under its new state
RepeatedCallback(t)             ``complete(lease)`` with the lease whose report ended the
                                version returns its state; a version no report ended (cancelled
                                waiting, blocked, out of attempts): ``cancel(t)`` returns it
ClaimAnswerLost(w, k),          the call of Claim / Reclaim, its answer checked, then thrown
ReclaimAnswerLost(w, t)         away: ``w`` is not given the leases
CompleteAnswerLost / ...        the call of Complete / Fail / AcknowledgeCancel, its answer
(w, t, g, a)                    checked, then thrown away: ``w`` keeps the lease
RepeatedReport(w, t, g, a)      the report that ended the version, made again with the same
                                lease: it returns the version's state and changes nothing;
                                ``w`` drops the lease
==============================  ===============================================================

A step the calls cannot take alone (a Claim or a Reclaim while a lease waits to expire, which
``claim()`` would expire first; a Claim while a version waits to be re-claimed, which
``claim()`` would re-claim first; an Expire of one lease while another is also past its
deadline) is a ``ValueError``. The corpus instances have none: those with a clock have one slot,
so at most one version runs, and those with two slots have no clock, so no lease expires.

The corpus instances (:attr:`DurableSystem.corpus_configs`): one id with two workers and a clock
(``MCDurableSchedulerTraces.cfg``), two ids with one slot and a clock (claim order, slot
retention, failure by expiry blocking a dependent), two ids with two generations, a fixed
diamond with two slots (``MCDurableSchedulerCorpus.tla``'s ``FixedGraph``, which
:meth:`DurableSystem.explore` applies to the model as TLC does to the spec), and two
independent ids with priorities, delays and aging (``MCDurableSchedulerCorpusTime.cfg``, also a
fixed graph). Its replay needs a store whose ``submit`` takes ``priority`` and ``delay``. And
edge kinds and AddDeps (``MCDurableSchedulerEdges.cfg``, ``LayeredGraph``): a and b, then c
with edges of either kind to them, given at submission or added while c is pending.

The implementation's state is ``snapshot()`` (the scheduler part), ``leases()`` (``attempt``,
``holder``, ``deadline``), ``now()`` and the harness's leases (``held``); ``ends`` is not stored:
a claimed version ended exactly when it is terminal (nothing else ends a running version), so it
is read as that. ``endedAttempt`` is the store's ``ended_attempt`` (``leases()``). ``due`` and
``priority`` are the store's ``times()``, or for a store that does not report them the
harness's record of its own calls (a Submit's ``now + d`` and ``p``, a Retry's ``now`` with the
priority kept); the due times are listed for the waiting versions only, as the model lists
them. A replay on a store of the trace's ``Aging`` (a tick is a second) checks every claim's
answer against the claim order.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from refsched.durable import DurableScheduler
from refsched.durable.jobs import NOOP
from refsched.durable.scheduler import Lease
from refsched.durable.store import Row, Store
from refsched.errors import LeaseLostError, StaleLeaseError
from refsched.model.dag.actions import WAITING, retry_set
from refsched.model.dag.graph import ModelGraph, describe, search
from refsched.model.durable import ACTIONS, INITIAL, DurableSnapshot, Instance, Limits, Refusal
from refsched.model.durable import explore as explore_model
from refsched.model.durable.actions import ANSWER_LOST, claim_order
from refsched.model.durable.graph import next_steps, within_bound
from refsched.types import CloseReport, Snapshot, TaskState
from refsched.verify import tlc
from refsched.verify.durable import spec as durablespec
from refsched.verify.replay import StepMismatch, format_rows
from refsched.verify.system import Fatal, System, count_error
from refsched.verify.tla import ModelValue

__all__ = ["SYSTEM", "DurableSystem"]
# every replayed version names NOOP as its function: replay never runs it

SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where replay's stores go: a folder in memory where there is one (a replay makes thousands of
throwaway stores, and on a disk their syncs cost four times the replay), else the temp folder."""

LeaseKey = tuple[Hashable, int, int]  # the spec's <<t, g, a>>

FIXED_GRAPH_MODULE = "MCDurableSchedulerCorpus.tla"
"""The model-checking module whose ``FixedGraph`` constraint fixes the graph of tasks."""

TIME_CORPUS_CONFIG = "MCDurableSchedulerCorpusTime.cfg"
"""The corpus instance with priorities, delays and aging: its Submit steps give a priority
and a delay, which only a store with due times takes."""

EDGES_CONFIG = "MCDurableSchedulerEdges.cfg"
"""Edge kinds and AddDeps in the store (``LayeredGraph`` of ``MCDurableSchedulerCorpus.tla``):
checked by TLC, and its whole graph equal to the model's."""

CORPUS_CONFIGS = (durablespec.TRACES_CONFIG, "MCDurableSchedulerCorpusClaims.cfg",
                  "MCDurableSchedulerCorpusGenerations.cfg",
                  "MCDurableSchedulerCorpusDiamond.cfg", TIME_CORPUS_CONFIG, EDGES_CONFIG)
"""Every durable corpus instance, the traces config first."""


@dataclass(frozen=True, slots=True)
class FixedGraphInstance(Instance):  # type: ignore[misc]  # the model is Any to mypy here
    """An instance of ``MCDurableSchedulerCorpus.tla``: the constants and the fixed layers."""

    # Sources, Middle, Sinks: the ids of each layer; together they are Tasks
    layers: tuple[tuple[str, ...], ...] = field(default=())
    # the config's constraint is LayeredGraph (edges free, each to an earlier layer), not
    # FixedGraph
    layered: bool = False

    def deps_of(self, t: Hashable) -> frozenset[Hashable]:
        """``FixedDeps(t)``: every id of the layer before t's."""
        for before, layer in zip(((), *self.layers), self.layers, strict=False):
            if t in layer:
                return frozenset(before)
        return frozenset()

    def layer_of(self, t: Hashable) -> int:
        return next(i for i, layer in enumerate(self.layers) if t in layer)

    def fixed_graph(self, s: DurableSnapshot) -> bool:
        """``FixedGraph``: the fixed deps, submitted layer by layer, all before Start; with
        ``layered``, ``LayeredGraph``: any deps, each of an earlier layer."""
        tasks = s.scheduler.tasks
        if self.layered:
            if any(self.layer_of(d) >= self.layer_of(t) for t, v in tasks.items()
                   for d in v.deps):
                return False
        elif any(v.deps != self.deps_of(t) for t, v in tasks.items()):
            return False
        lowest_missing = min((self.layer_of(t) for t in self.tasks if t not in tasks),
                             default=len(self.layers))
        if any(self.layer_of(t) > lowest_missing for t in tasks):
            return False
        return not s.scheduler.started or len(tasks) == len(self.tasks)

@dataclass(frozen=True)
class _Bound:
    """A model action taking the instance's :class:`Limits` as its last argument, the shape
    the generic replay calls (``refusal(s, *args)``, ``step(s, *args)``)."""

    name: str
    params: tuple[str, ...]

    def refusal(self, s: DurableSnapshot, *args: Any) -> Refusal | None:
        *params, limits = args
        return ACTIONS[self.name].refused(s, *params, limits=limits)

    def step(self, s: DurableSnapshot, *args: Any) -> DurableSnapshot:
        *params, limits = args
        return ACTIONS[self.name].step(s, *params, limits=limits)


Query = tuple[str, tuple[Any, ...]]


class ReadTogether:
    """The open store of a DurableScheduler under replay, through which the reads of one
    :meth:`DurableSystem.snapshot` (``snapshot()``, ``leases()``, ``now()``, ``times()``: a read
    transaction each, a round trip each on PostgreSQL) go to the database as one.

    Inside :meth:`together` the first time, the reads are made as the calls ask for them, and
    their queries kept; each time after, those queries are read in one read transaction, and
    each call is given the rows of its own, as long as it asks for the same queries in the same
    order (a call that asks for others reads them itself, and so do the calls after it). The
    calls parse the rows as ever: only the trips to the database are fewer. Anything else goes
    to the store."""

    def __init__(self, store: Store) -> None:
        self._inner = store
        self._plan: list[list[Query]] | None = None  # the reads of one snapshot, in order
        self._recording: list[list[Query]] | None = None
        self._served: list[tuple[list[Query], list[list[Row]]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def read(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        asked = [(sql, tuple(params)) for sql, params in queries]
        if self._recording is not None:
            self._recording.append(asked)
        elif self._served:
            planned, rows = self._served[0]
            if planned == asked:
                del self._served[0]
                return rows
            self._served = []
        return self._inner.read(asked)

    def peek(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = self.read([(sql, params)])[0]
        return rows[0] if rows else None

    @contextlib.contextmanager
    def transaction(self, write: bool = True, first: str | None = None) -> Iterator[Any]:
        self._served = []  # rows read before a write are not the state after it
        with self._inner.transaction(write, first) as tx:
            yield tx

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Serve the reads made inside from one read of the database, once they are known."""
        if self._plan is None:
            self._recording = []
            try:
                yield
                self._plan = self._recording
            finally:
                self._recording = None
            return
        rows = self._inner.read([q for planned in self._plan for q in planned])
        at = 0
        for planned in self._plan:
            self._served.append((planned, rows[at:at + len(planned)]))
            at += len(planned)
        try:
            yield
            if self._served:  # some were asked for no longer: learn the reads again
                self._plan = None
        finally:
            self._served = []


class DrivenStore:
    """A DurableScheduler under replay, its store's folder, and the workers' leases."""

    def __init__(self, factory: Callable[..., Any], constants: Mapping[str, Any]) -> None:
        self.folder = tempfile.mkdtemp(prefix="refsched-durable-", dir=SCRATCH)
        self.limits = limits_of(constants)
        # A trace with priorities or delays orders its claims by its Aging (0: strict
        # priority); the others need no aging, and a store without due times takes none.
        aged = {} if self.limits.oldest_first else {"aging": self.limits.aging or None}
        self.store = factory(f"sqlite:///{Path(self.folder) / 'store.db'}",
                             constants["MaxConcurrency"],
                             max_attempts=constants["MaxAttempts"], clock="virtual", **aged)
        self.lease_time: int = constants["LeaseTime"]
        # task -> (due, priority) of its current version, as the harness's calls set them
        self.times: dict[Hashable, tuple[int | float, int]] = {}
        # worker -> <<t, g, a>> -> the Lease claim() gave it, while the worker believes it holds it
        self.held: dict[Hashable, dict[LeaseKey, Lease]] = {}
        # (t, g) -> the lease whose accepted report ended that version
        self.ended_by: dict[tuple[Hashable, int], Lease] = {}
        # the reads of each snapshot as one, for a DurableScheduler on a store of the package's
        self.reads: ReadTogether | None = None
        if isinstance(self.store, DurableScheduler) and isinstance(
                getattr(self.store, "_store", None), Store):
            self.reads = ReadTogether(self.store._store)
            self.store._store = self.reads  # type: ignore[assignment]  # a Store in all but name
        weakref.finalize(self, _remove, self.store, self.folder)

    def lease(self, worker: Hashable, key: LeaseKey) -> Lease:
        try:
            return self.held[worker][key]
        except KeyError:
            raise ValueError(f"worker {worker!r} holds no lease <<{key[0]}, {key[1]}, "
                             f"{key[2]}>>") from None

    def keep(self, leases: list[Lease]) -> None:
        for lease in leases:
            key = (lease.task_id, lease.generation, lease.attempt)
            self.held.setdefault(lease.worker, {})[key] = lease

    def drop(self, worker: Hashable, key: LeaseKey) -> None:
        self.held.get(worker, {}).pop(key, None)

    def check_invariants(self) -> None:
        check = getattr(self.store, "check_invariants", None)
        if check is not None:
            check()


def limits_of(constants: Mapping[str, Any]) -> Limits:
    """The model's :class:`Limits` for a trace's constants (no priorities, no delays, no
    aging, no optional edges and no AddDeps when it names none)."""
    return Limits(constants["MaxConcurrency"], constants["MaxAttempts"], constants["LeaseTime"],
                  priorities=tuple(constants.get("Priorities", (0,))),
                  delays=tuple(constants.get("Delays", (0,))), aging=constants.get("Aging", 0),
                  optional_edges=bool(constants.get("OptionalEdges", False)),
                  add_deps=bool(constants.get("AddDepsAllowed", False)))


def _remove(store: Any, folder: str) -> None:
    try:
        store.release()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _show(value: Any) -> str:
    if isinstance(value, TaskState):
        return value.value
    if isinstance(value, list):
        return "[" + ", ".join(f"<<{x[0]}, {x[1]}, {x[2]}>>" for x in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{t}: {_show(s)}" for t, s in sorted(value.items(),
                                                                      key=repr)) + "}"
    return repr(value)


def _close_answer(report: Any) -> dict[Hashable, TaskState] | None:
    by_id: dict[Hashable, TaskState] = {}
    for state, ids in report.by_state().items():
        for t in ids:
            if t in by_id:
                return None
            by_id[t] = state
    return by_id


def _expired(before: DurableSnapshot) -> list[Hashable]:
    """The ids whose live lease is past its deadline: what a claim() would expire first."""
    return sorted((t for t in before.holder if before.deadline.get(t, 0) < before.now),
                  key=lambda t: before.scheduler.tasks[t].seq)


def _orphans(before: DurableSnapshot) -> list[Hashable]:
    """The ids running with no live lease: what a claim() re-claims first, in seq order."""
    return sorted((t for t, v in before.scheduler.tasks.items()
                   if v.state is TaskState.RUNNING and t not in before.holder),
                  key=lambda t: before.scheduler.tasks[t].seq)


class DurableSystem(System):
    name = "durable"
    module = "DurableScheduler"
    spec = durablespec
    implementation = DurableScheduler
    # the spec refines Scheduler.tla, so its corpus is made from both
    spec_files = ("Scheduler.tla", "DurableScheduler.tla", "MCDurableScheduler.tla",
                  durablespec.TRACES_CONFIG)
    corpus_configs = CORPUS_CONFIGS
    corpus_modules = MappingProxyType({"MCDurableSchedulerCorpusDiamond.cfg": FIXED_GRAPH_MODULE,
                                       TIME_CORPUS_CONFIG: FIXED_GRAPH_MODULE,
                                       EDGES_CONFIG: FIXED_GRAPH_MODULE})
    id_parameters = ("t", "w")
    label_actions = MappingProxyType(durablespec.LABEL_ACTIONS)
    initial = INITIAL
    actions = MappingProxyType({name: _Bound(name, a.params) for name, a in ACTIONS.items()})

    def read_instance(self, config: str | Path) -> Instance:
        instance = super().read_instance(config)
        if self.module_of(Path(config).name) != FIXED_GRAPH_MODULE:
            return instance
        path, text, values = tlc.read_config(config, ("Sources", "Middle", "Sinks"))
        layers = tuple(tuple(sorted(v.name for v in values[name]))
                       if isinstance(values[name], frozenset)
                       and all(isinstance(v, ModelValue) for v in values[name]) else None
                       for name in ("Sources", "Middle", "Sinks"))
        split = tuple(layer for layer in layers if layer is not None)
        if len(split) != 3 or sorted(t for layer in split for t in layer) != sorted(
                instance.tasks):
            raise ValueError(f"{path}: Sources, Middle and Sinks must be sets of model values "
                             "that split Tasks")
        layered = re.search(r"^CONSTRAINT\b.*\bLayeredGraph\b", text, re.M) is not None
        return FixedGraphInstance(*(getattr(instance, f) for f in Instance.__dataclass_fields__),
                                  layers=split, layered=layered)

    def explore(self, instance: Instance) -> ModelGraph[DurableSnapshot]:
        if isinstance(instance, FixedGraphInstance):
            fixed = instance  # the same constraints as TLC's, FixedGraph among them
            return search(INITIAL, lambda s: next_steps(s, fixed),
                          lambda s: within_bound(s, fixed) and fixed.fixed_graph(s))
        graph: ModelGraph[DurableSnapshot] = explore_model(instance)
        return graph

    def constants(self, instance: Instance) -> dict[str, Any]:
        return {"Tasks": list(instance.tasks), "Workers": list(instance.workers),
                "MaxConcurrency": instance.max_concurrency,
                "MaxAttempts": instance.max_attempts, "LeaseTime": instance.lease_time,
                "Priorities": list(instance.priorities), "Delays": list(instance.delays),
                "Aging": instance.aging,
                # the gates, named only where one is on: a corpus without them is unchanged
                **({"OptionalEdges": instance.optional_edges, "AddDepsAllowed": instance.add_deps}
                   if instance.optional_edges or instance.add_deps else {})}

    def manifest_constants(self, instance: Instance) -> dict[str, Any]:
        constants = {**self.constants(instance), "MaxGeneration": instance.max_generation,
                     "MaxTime": instance.max_time}
        if isinstance(instance, FixedGraphInstance):
            constants.update(zip(("Sources", "Middle", "Sinks"),
                                 map(list, instance.layers), strict=True))
        return constants

    def spec_state(self, state: DurableSnapshot, instance: Instance) -> dict[str, Any]:
        return durablespec.spec_state(state, instance.workers, instance.tasks)

    # -- Replay ------------------------------------------------------------------------------

    def constants_error(self, constants: Mapping[str, Any]) -> str | None:
        return count_error(constants, ("MaxConcurrency", "MaxAttempts", "LeaseTime"), 1)

    def new_implementation(self, factory: Callable[..., Any],
                           constants: Mapping[str, Any]) -> DrivenStore:
        return DrivenStore(factory, constants)

    def spec_value(self, name: str, value: Any) -> Any:
        return bool(value) if name == "cancelPending" else super().spec_value(name, value)

    def spec_params(self, action: str, params: Mapping[str, Any],
                    before: Any) -> dict[str, Any]:
        # A Submit recorded without a priority and a delay has both 0.
        defaults = ACTIONS[action].defaults if action in ACTIONS else {}
        return super().spec_params(action, {**defaults, **params}, before)

    def model_args(self, action: str, params: Mapping[str, Any],
                   constants: Mapping[str, Any]) -> tuple[Any, ...]:
        return (*ACTIONS[action].arguments(params), limits_of(constants))

    def apply(self, implementation: DrivenStore, action: str, params: Mapping[str, Any],
              before: DurableSnapshot, profile: Any, fatal: Fatal) -> None:
        if action == "Crash":
            implementation.held.pop(params["w"], None)
            crash = getattr(implementation.store, "crash", None)  # one that can be told
            if crash is not None:
                crash(params["w"])
            return
        if action == "Refused":
            self._refused(implementation, params, fatal,
                          heartbeat=getattr(profile, "heartbeat", True))
            return
        if action == "Start" and not getattr(profile, "start", True):
            return  # claims are open from the beginning: no call starts them
        # A step whose answer is lost makes the same call; only the worker's side differs.
        lost = action in ANSWER_LOST
        step = self.describe(action, params)
        action = action.removesuffix("AnswerLost") if lost else action
        method, args, kwargs, answer = self._plan(implementation, action, params, before)
        shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        call = f"{method}({', '.join(shown)})"
        try:
            result = getattr(implementation.store, method)(*args, **kwargs)
        except fatal:
            raise
        except Exception as error:
            raise StepMismatch(step, call, _show(answer),
                               f"raised {type(error).__name__}: {error}") from error
        if action in ("Claim", "Reclaim"):
            got: Any = (result if not isinstance(result, list) else
                        [(x.task_id, x.generation, x.attempt) for x in result])
            if isinstance(result, list) and got == answer and all(
                    x.worker == params["w"] for x in result):
                if not lost:
                    implementation.keep(result)
                return
        elif action == "Close":
            got = _close_answer(result) if isinstance(result, CloseReport) else result
        else:
            got = result
        if got != answer:
            raise StepMismatch(step, call, _show(answer), f"returned {_show(got)}")
        if action in ("Submit", "SubmitOptional"):
            implementation.times[params["t"]] = (before.now + params.get("d", 0),
                                                 params.get("p", 0))
        elif action == "Retry":
            for x in retry_set(before.scheduler.tasks, params["t"]):
                implementation.times[x] = (before.now, implementation.times.get(x, (0, 0))[1])
        if action in ("Complete", "Fail", "AcknowledgeCancel", "RepeatedReport"):
            lease: Lease = args[0]
            if not lost:
                implementation.drop(lease.worker,
                                    (lease.task_id, lease.generation, lease.attempt))
            implementation.ended_by[lease.task_id, lease.generation] = lease

    def _plan(self, driven: DrivenStore, action: str, p: Mapping[str, Any],
              before: DurableSnapshot) -> tuple[str, tuple[Any, ...], dict[str, Any], Any]:
        """The call that takes the step, and the answer it must give."""
        tasks = before.scheduler.tasks
        view = tasks.get(p.get("t"))
        if action in ("Submit", "SubmitOptional"):
            optional = frozenset(p.get("O", ()))
            deps = tuple(sorted(frozenset(p["D"]) - optional, key=repr))
            kwargs: dict[str, Any] = {"fn": NOOP}
            if optional:
                kwargs["optional"] = tuple(sorted(optional, key=repr))
            if p.get("p", 0) or p.get("d", 0):  # a store without due times takes neither
                kwargs.update(priority=p.get("p", 0), delay=p.get("d", 0))
            return "submit", (p["t"], deps), kwargs, 1 if view is None else \
                view.generation + 1
        if action == "AddDeps":
            optional = frozenset(p["O"])
            after = ACTIONS["AddDeps"].step(before, p["t"], frozenset(p["D"]), optional,
                                            limits=driven.limits)
            return "add_deps", (p["t"], tuple(sorted(frozenset(p["D"]) - optional, key=repr))), \
                {"optional": tuple(sorted(optional, key=repr))}, after.scheduler.tasks[p["t"]].state
        if action == "Start":
            return "start", (), {}, None
        if action == "Tick":
            return "tick", (1,), {}, float(before.now + 1)
        if action == "Expire":
            if _expired(before) != [p["t"]]:
                raise ValueError(f"Expire(t={p['t']}): expire() ends every lease past its "
                                 f"deadline, {_expired(before)}")
            return "expire", (), {}, None
        if action in ("Claim", "Reclaim"):
            if _expired(before):
                raise ValueError(f"{describe(action, p)}: claim() would first expire "
                                 f"{_expired(before)}")
            kwargs = {"limit": p.get("k", 1), "lease": driven.lease_time}
            if action == "Claim":
                if _orphans(before):
                    raise ValueError(f"{describe(action, p)}: claim() would first re-claim "
                                     f"{_orphans(before)}")
                order = claim_order(before, driven.limits)[:p["k"]]
                answer = [(t, tasks[t].generation, 1) for t in order]
            else:
                if _orphans(before)[:1] != [p["t"]]:
                    raise ValueError(f"{describe(action, p)}: claim() re-claims "
                                     f"{_orphans(before)[:1]} first")
                answer = [(p["t"], tasks[p["t"]].generation,
                           before.attempt.get(p["t"], 0) + 1)]
            return "claim", (p["w"],), kwargs, answer
        if action == "RepeatedReport":
            # The worker makes again the report whose answer it lost: the one that ended the
            # version, named by the state it ended in.
            lease = driven.lease(p["w"], (p["t"], p["g"], p["a"]))
            if view is None or view.state not in _REPEATS:
                raise ValueError(f"{describe(action, p)}: no report ended the version")
            return _REPEATS[view.state], (lease,), {}, view.state
        if action in ("Heartbeat", "Complete", "Fail", "AcknowledgeCancel"):
            lease = driven.lease(p["w"], (p["t"], p["g"], p["a"]))
            if action == "Heartbeat":
                assert view is not None
                return "heartbeat", (lease,), {}, view.cancel_requested
            method, state = _REPORTS[action]
            return method, (lease,), {}, state
        if action == "Close":
            cancel_pending = p["cancelPending"]
            return "close", (), {"cancel_pending": cancel_pending}, {
                t: TaskState.CANCELLED if cancel_pending and v.state in WAITING else v.state
                for t, v in tasks.items()}
        if view is None:
            raise ValueError(f"{describe(action, p)}: {p['t']!r} has no version before the step")
        if action == "Cancel":
            return "cancel", (p["t"],), {}, (TaskState.CANCELLED if view.state in WAITING
                                             else view.state)
        if action == "Retry":
            return "retry", (p["t"],), {}, view.generation + 1
        # RepeatedCallback
        ender = driven.ended_by.get((p["t"], view.generation))
        if ender is not None:
            return "complete", (ender,), {}, view.state
        return "cancel", (p["t"],), {}, view.state

    def _refused(self, driven: DrivenStore, p: Mapping[str, Any], fatal: Fatal, *,
                 heartbeat: bool = True) -> None:
        key = (p["t"], p["g"], p["a"])
        lease = driven.lease(p["w"], key)
        step = self.describe("Refused", p)
        calls = (("heartbeat", LeaseLostError), ("complete", StaleLeaseError))
        for method, error_type in calls if heartbeat else calls[1:]:
            call = f"{method}({lease!r})"
            try:
                result = getattr(driven.store, method)(lease)
            except fatal:
                raise
            except error_type:
                continue
            except Exception as error:
                raise StepMismatch(step, call, error_type.__name__,
                                   f"raised {type(error).__name__}: {error}") from error
            raise StepMismatch(step, call, error_type.__name__, f"returned {_show(result)}")
        driven.drop(p["w"], key)

    def snapshot(self, implementation: DrivenStore, constants: Mapping[str, Any],
                 fatal: Fatal) -> DurableSnapshot | None:
        reads = implementation.reads
        try:
            with reads.together() if reads is not None else contextlib.nullcontext():
                store = implementation.store
                scheduler = store.snapshot()
                leases = store.leases()
                now = store.now()
                # The store's own due times and priorities, where it reports them; else the
                # harness's record of its calls. A store may report the waiting versions only
                # (the protocol's times does): nothing reads another's priority, which the spec
                # keeps, unchanged, until a Retry or a Submit, so for those the record stands.
                reported = getattr(store, "times", None)
                times = ({**implementation.times,
                          **{t: (_number(v.due), v.priority) for t, v in reported().items()}}
                         if reported is not None else implementation.times)
        except fatal:
            raise
        except Exception:  # a store broken enough not to answer: the divergence says the rest
            return None
        if not isinstance(scheduler, Snapshot):
            return None
        terminal = {t for t, v in scheduler.tasks.items() if v.state.is_terminal}
        return DurableSnapshot(
            scheduler=scheduler,
            attempt={t: v.attempt for t, v in leases.items()},
            holder={t: v.holder for t, v in leases.items() if v.holder is not None},
            deadline={t: _number(v.deadline) for t, v in leases.items()
                      if v.deadline is not None},
            now=_number(now),
            held={w: frozenset(held) for w, held in implementation.held.items()},
            ends={t: 1 for t, v in leases.items() if v.attempt > 0 and t in terminal},
            ended_attempt={t: v.ended_attempt for t, v in leases.items()},
            due={t: due for t, (due, _) in times.items()
                 if due and t in scheduler.tasks and scheduler.tasks[t].state in WAITING},
            priority={t: priority for t, (_, priority) in times.items() if priority},
        )

    def side_by_side(self, expected: DurableSnapshot, actual: DurableSnapshot,
                     side: str) -> str:
        rows: list[tuple[str, str, str, str]] = []
        for name in ("started", "closed", "next_seq"):
            a, b = getattr(expected.scheduler, name), getattr(actual.scheduler, name)
            if a != b:
                rows.append(("", name, str(a), str(b)))
        if expected.now != actual.now:
            rows.append(("", "now", str(expected.now), str(actual.now)))
        fields = ("generation", "state", "deps", "remaining_deps", "blocked_by",
                  "cancel_requested", "seq")
        ids = (set(expected.scheduler.tasks) | set(actual.scheduler.tasks)
               | set(expected.attempt) | set(actual.attempt))
        for t in sorted(ids, key=repr):
            mine, theirs = expected.scheduler.tasks.get(t), actual.scheduler.tasks.get(t)
            for name in fields:
                a = "absent" if mine is None else _cell(getattr(mine, name))
                b = "absent" if theirs is None else _cell(getattr(theirs, name))
                if a != b:
                    rows.append((str(t), name, a, b))
            for name in ("attempt", "holder", "deadline", "ends", "ended_attempt", "due",
                         "priority"):
                a = _cell(getattr(expected, name).get(t, "-"))
                b = _cell(getattr(actual, name).get(t, "-"))
                if a != b:
                    rows.append((str(t), name, a, b))
        for w in sorted(set(expected.held) | set(actual.held), key=repr):
            a = _cell(expected.held.get(w, frozenset()))
            b = _cell(actual.held.get(w, frozenset()))
            if a != b:
                rows.append((str(w), "held", a, b))
        return format_rows(("id", "field", "trace", side), rows)


_REPORTS = {"Complete": ("complete", TaskState.SUCCEEDED), "Fail": ("fail", TaskState.FAILED),
            "AcknowledgeCancel": ("acknowledge_cancel", TaskState.CANCELLED)}
_REPEATS = {state: method for method, state in _REPORTS.values()}


def _number(value: float) -> int | float:
    """A time on the store's clock as the spec's natural number when it is one."""
    return int(value) if float(value).is_integer() else value


def _cell(value: Any) -> str:
    if isinstance(value, TaskState):
        return value.value
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(
            f"<<{x[0]}, {x[1]}, {x[2]}>>" if isinstance(x, tuple) else str(x)
            for x in value)) + "}"
    return str(value)


SYSTEM = DurableSystem()
