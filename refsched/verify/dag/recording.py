"""Traces of spec/Scheduler.tla recorded from the production TaskScheduler as it runs.

A :class:`TraceRecorder` is a :class:`refsched.dag.scheduler.Recorder`: given to a TaskScheduler
(or a Runner) it receives each spec step at its linearization point, under the scheduler's
lock, so the recorded order is the order the steps took effect, whatever the threads did.
:meth:`TraceRecorder.trace` turns the steps into an :class:`~refsched.verify.itf.Trace` over
the ids used, for :func:`refsched.verify.validate.validate_trace` (or for writing as ITF).

:func:`record_runner_run` records one random run of the :class:`refsched.Runner` on real
threads: the graph and every choice come from the seed, the interleaving from the threads.
:func:`refsched.verify.recording.record_run` records a run of any system that has one.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from refsched.dag.runner import Runner
from refsched.dag.signals import task_type_of
from refsched.errors import SchedulerError
from refsched.types import Snapshot, TaskState
from refsched.verify.dag.signals import check_recorded_signals
from refsched.verify.itf import Step as TraceStep
from refsched.verify.itf import Trace
from refsched.verify.specstate import spec_state
from refsched.verify.steplog import StepLog, task_function

__all__ = ["RecordedStep", "TraceRecorder", "record_runner_run"]

RecordedStep = tuple[str, dict[str, Any], Snapshot]
"""(spec action, its parameters, the scheduler's state right after it)."""


class TraceRecorder(StepLog[Snapshot]):
    """Collects the spec steps of one scheduler; builds the :class:`Trace` they form."""

    def task_ids(self) -> list[Hashable]:
        """Every id the steps name (a task, a dependency, a parameter), first seen first."""
        seen: dict[Hashable, None] = {}
        for _, params, state in self.steps:
            if "t" in params:
                seen[params["t"]] = None
            seen.update(dict.fromkeys(params.get("D", ())))
            for t, view in state.tasks.items():
                seen[t] = None
                seen.update(dict.fromkeys(view.deps))
        return list(seen)

    def trace(self, max_concurrency: int, *, name: str = "recorded",
              tasks: Iterable[Hashable] | None = None,
              meta: Mapping[str, Any] | None = None) -> Trace:
        """The recorded behaviour as a Trace over ``tasks`` (default: :meth:`task_ids`).

        Constants: ``Tasks`` and ``MaxConcurrency``; the initial state is the spec's ``Init``
        (an empty scheduler); each step's state is the snapshot recorded with it.
        """
        ids = list(self.task_ids() if tasks is None else tasks)
        steps = tuple(TraceStep(action, params, spec_state(state, ids))
                      for action, params, state in self.steps)
        return Trace(name=name, constants={"Tasks": ids, "MaxConcurrency": max_concurrency},
                     initial=spec_state(Snapshot(), ids), steps=steps, meta=dict(meta or {}))


# -- random runs of the Runner --------------------------------------------------------------

_WAIT = 30.0  # seconds: a run that needs this long is stuck, not slow


def _function(rng: random.Random, kind: str) -> Callable[..., Any]:
    """A task function of one kind, with its durations and failures drawn now from ``rng``."""
    return task_function(rng, kind, pause=(0.0005, 0.005), patience=(0.02, 0.1))


_KINDS = ("succeed", "succeed", "sleep", "sleep", "flaky", "raise", "watch", "watch")
_TENANTS = ("acme", "zenith", None)
# Enough for every (task type, tenant) of a run: which key a partition goes to is decided in
# the order keys are charged, and a ready() cut short charges one no recorded step shows.
_PARTITIONS = 16


def _wait_until_running(runner: Runner, task_id: Hashable, deadline: float) -> None:
    """Poll until ``task_id`` runs or is terminal (a cancel then meets it running, or not)."""
    while time.monotonic() < deadline:
        state = runner.scheduler.state(task_id)
        if state is TaskState.RUNNING or state.is_terminal:
            return
        time.sleep(0.0005)


def record_runner_run(seed: int, *, tasks: int = 6, workers: int = 3,
                      max_deps: int = 2) -> Trace:
    """Record one random run of a :class:`Runner` with ``workers`` threads over ``tasks`` ids.

    From the seed: a DAG over ``"t0"``, ``"t1"``, ... (each id depends on up to ``max_deps``
    earlier ones, some through optional edges) and, per task, a function that succeeds, sleeps
    briefly, fails, fails then recovers, or waits on its cancel token. The run submits the
    graph, adds an edge to a pending task (``add_deps``), starts, cancels some
    tasks from outside while they run, resubmits one task mid-run, waits, retries failed,
    blocked and cancelled tasks, reports a late duplicate and a stale callback as a lost
    worker would, and closes with or without ``cancel_pending``. Which step comes when is up
    to the threads. Each submission names a tenant (or none), and the runner keeps
    ``signals()``: at the end they are checked against the recorded steps and the conservation
    laws (:func:`refsched.verify.dag.signals.check_recorded_signals`). The Trace is named
    ``runner-seed-<seed>`` and its ``#meta`` holds the arguments and, as
    ``signal_breaches``, what that check found wrong (``[]``: nothing). ``ValueError`` for
    ``tasks`` or ``workers`` below 1 or ``max_deps`` below 0.
    """
    for name, value, least in (("tasks", tasks, 1), ("workers", workers, 1),
                               ("max_deps", max_deps, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"record_runner_run({seed!r}): {name}={value!r}: must be an "
                             f"integer >= {least}")
    rng = random.Random(seed)
    ids = [f"t{i}" for i in range(tasks)]
    deps = {t: rng.sample(ids[:i], min(i, rng.randint(0, max_deps))) for i, t in enumerate(ids)}
    kinds = {t: rng.choice(_KINDS) for t in ids}
    functions = {t: _function(rng, kinds[t]) for t in ids}
    to_cancel = rng.sample(ids, min(len(ids), rng.randint(1, 2)))
    resubmitted = rng.choice(ids)
    cancel_pending = rng.random() < 0.5
    deadline = time.monotonic() + _WAIT
    # The edge kinds and the added edge come from a stream of their own, so that the rest of
    # a seed's run is what it was before edges had kinds.
    edges_rng = random.Random(f"edges-{seed}")
    optional = {t: [d for d in deps[t] if edges_rng.random() < 0.3] for t in ids}
    added = _added_edge(edges_rng, ids, deps)
    # the tenants too: (task type, tenant) of each accepted submission, in order
    tenants_rng = random.Random(f"tenants-{seed}")
    tenant = {t: tenants_rng.choice(_TENANTS) for t in ids}
    submitted: list[tuple[str, str | None]] = []

    recorder = TraceRecorder()
    runner = Runner(max_workers=workers, recorder=recorder, max_partitions=_PARTITIONS)
    try:
        for t in ids:
            required = [d for d in deps[t] if d not in optional[t]]
            runner.submit(t, functions[t], required, optional=optional[t], tenant=tenant[t])
            submitted.append((task_type_of(functions[t]), tenant[t]))
        if added is not None:
            task, dep, kind = added
            runner.add_deps(task, **{kind: [dep]})
        runner.start()
        for t in to_cancel:  # from this thread, while the workers run
            _wait_until_running(runner, t, deadline)
            runner.cancel(t)
        with_deps = [d for d in ids[:ids.index(resubmitted)] if rng.random() < 0.5]
        # Refused with TaskRunningError (no step) if it is running right now.
        again = _function(rng, "succeed")
        with contextlib.suppress(SchedulerError):
            runner.submit(resubmitted, again, with_deps, tenant=_TENANTS[0])
            submitted.append((task_type_of(again), _TENANTS[0]))
        runner.wait(max(0.0, deadline - time.monotonic()))
        dead = [t for t in ids if runner.scheduler.state(t).is_dead]
        for t in rng.sample(dead, len(dead)):
            if runner.scheduler.state(t).is_dead:  # an earlier retry may have renewed it
                runner.retry(t)
        _late_reports(runner, rng.choice(ids))
        if rng.random() < 0.5:
            runner.wait(max(0.0, deadline - time.monotonic()))
    finally:
        runner.close(timeout=max(0.0, deadline - time.monotonic()),
                     cancel_pending=cancel_pending)
    scheduler = runner.scheduler
    breaches = check_recorded_signals(recorder.steps, submitted, scheduler.signals(),
                                      scheduler.stats())
    return recorder.trace(workers, name=f"runner-seed-{seed}", meta={
        "source": "refsched.verify.dag.recording.record_runner_run",
        "seed": seed, "tasks": tasks, "workers": workers, "max_deps": max_deps,
        "signal_breaches": breaches,
    })


def _added_edge(rng: random.Random, ids: list[str],
                deps: dict[str, list[str]]) -> tuple[str, str, str] | None:
    """An edge ``add_deps`` can add before start: (task, an earlier id not yet its dep, "deps"
    or "optional"), from a task with deps (pending, not ready); None where there is none."""
    choices = [(t, d) for i, t in enumerate(ids) if deps[t]
               for d in ids[:i] if d not in deps[t]]
    if not choices:
        return None
    task, dep = rng.choice(choices)
    return task, dep, rng.choice(("deps", "optional"))


def _late_reports(runner: Runner, task_id: Hashable) -> None:
    """Report ``task_id`` again, as a worker that lost a race would: once for its current
    version (RepeatedCallback if that ended) and once for an older one (StaleCallback).

    Taken on the scheduler directly: neither changes anything, so the runner's futures stay
    right.
    """
    scheduler = runner.scheduler
    info = scheduler.info(task_id)
    for generation in (info.generation, info.generation - 1):
        if generation == info.generation and not info.state.is_terminal:
            continue  # a report now would really end the version behind the runner's back
        # The older generation raises StaleGenerationError, and is a step all the same.
        with contextlib.suppress(SchedulerError):
            scheduler.complete(task_id, generation)
