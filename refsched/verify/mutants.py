"""Mutation testing of the verification layers: seeded bugs in the schedulers and their runners.

Each :class:`Mutant` is a source patch of one production module (``refsched/dag/scheduler.py``,
``dag/runner.py``, ``timer/scheduler.py``, ``timer/runner.py``, ``pool/pool.py``,
``durable/scheduler.py``, ``durable/store.py``, ``durable/postgres.py``,
``durable/steps_postgres.py``, whose text is the PostgreSQL store's server-side functions,
``durable/schedules.py`` or ``schedule.py``, the schedule engine): an
exact snippet of the current file (it must occur there exactly once), its replacement, and the
bug it plants. A mutant is run in fresh subprocesses,
one per layer, whose import system serves the patched source as the module (the files themselves
are never written; the Python processes a layer starts, such as durable worker processes, are
served the patched module too), against the layers cheapest first, each on the system the mutated
module belongs to. Each system keeps its catalogue beside its other verification parts
(``refsched/verify/<system>/mutants.py``); this module runs them:

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
import functools
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

from refsched.verify.mutant import Mutant, PatchError

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
Report = Callable[[str], None]


# -- mutants ----------------------------------------------------------------------------------

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


from refsched.verify.dag import mutants as _dag  # noqa: E402
from refsched.verify.durable import mutants as _durable  # noqa: E402
from refsched.verify.pool import mutants as _pool  # noqa: E402
from refsched.verify.timer import mutants as _timer  # noqa: E402

# The catalogues' file keys, which the layers below dispatch on.
_S, _R, _T, _TR, _P = "scheduler", "runner", "timer", "timer_runner", "pool"
_D, _DS, _DP, _DF = "durable", "durable_store", "durable_postgres", "durable_steps"
_SC, _E = "durable_schedules", "schedule"
_DW = "durable_worker"
_SG = "signals"
_PB = "pool_blocking"

_SYSTEMS = {"dag": _dag, "timer": _timer, "pool": _pool, "durable": _durable}
MODULES = {key: module for part in _SYSTEMS.values() for key, module in part.MODULES.items()}
# The system each file's mutants are judged on, where it is not the TaskScheduler.
_SYSTEM_OF = {key: name for name, part in _SYSTEMS.items() if name != "dag"
              for key in part.MODULES}

# Each system's seeded bugs, then each system's wake-up bugs (a thread left waiting for an event
# that happened; the unit layer runs the wake-up tests first).
CATALOGUE: tuple[Mutant, ...] = (*(m for part in _SYSTEMS.values() for m in part.CATALOGUE),
                                 *(m for part in _SYSTEMS.values() for m in part.WAKEUPS))

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
          frozenset({_S, _R, _T, _TR, _P, _D, _DS, _DP, _DF, _DW, _SC, _E, _SG, _PB})),
    Layer("lockstep", "Hypothesis lock-step machine vs the model (all but the runners)",
          frozenset({_S, _SG, _T, _P, _PB, _D, _DS})),
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
                       "close_ready_callbacks", "failure_while_claiming", "add_deps_claim",
                       "shared_dep_cancel_complete")
RUNNER_SCENARIOS = ("runner_close_timeout", "cooperative_cancel", "runner_chain",
                    "runner_fan_out", "runner_result_wait", "submit_to_idle_runner",
                    "wait_before_start", "runner_failure")
# Scenarios that drive a TimerScheduler class, and those that drive a TimerRunner class.
TIMER_SCHEDULER_SCENARIOS = ("timer_next_races_changes",)
TIMER_RUNNER_SCENARIOS = ("timer_earlier_while_sleeping", "timer_cancel_races_next",
                          "timer_close_during_sleep", "timer_reschedule_races_claim")
# Scenarios that drive a WorkStealingPool class.
POOL_SCENARIOS = ("pool_pop_races_steal", "pool_two_thieves_one_victim",
                  "pool_shutdown_races_child", "pool_nested_waits",
                  "pool_batch_steal_races_last_pop",
                  "pool_waiters_wake_up_as_a_child_is_pushed")


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
    pool_unit_files: tuple[str, ...] = ("tests/pool/test_wakeups.py", "tests/pool/test_pool.py",
                                        "tests/pool/test_blocking.py")
    durable_unit_files: tuple[str, ...] = ("tests/durable/test_wakeups.py",
                                           "tests/durable/test_time.py",
                                           "tests/durable/test_edges.py",
                                           "tests/durable/test_worker.py",
                                           "tests/durable/test_scheduler.py",
                                           "tests/durable/test_faults.py",
                                           "tests/durable/test_postgres.py",
                                           "tests/durable/test_rowlocks.py",
                                           "tests/durable/test_bulk.py",
                                           "tests/durable/test_batch_reports.py",
                                           "tests/durable/test_batch_worker.py")
    # The recurring schedules' tests, each store's history checked against the schedule's
    # model, then their faults: the unit layer of the schedule engine and the decision pass.
    schedule_unit_files: tuple[str, ...] = ("tests/durable/test_schedules.py",
                                            "tests/test_schedule.py",
                                            "tests/durable/test_schedule_faults.py")
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
           _PB: "pool_unit_files",
           _D: "durable_unit_files", _DS: "durable_unit_files", _DP: "durable_unit_files",
           _DF: "durable_unit_files", _DW: "durable_unit_files", _SC: "schedule_unit_files",
           _E: "schedule_unit_files"}.get(payload["file"], "unit_files")
    first = payload.get("unit_tests", [])
    files = [str(_PROJECT / f) for f in [*first, *(f for f in payload["budget"][key]
                                                  if f not in first)]]
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
        elif payload["file"] in (_P, _PB):
            from refsched.pool.pool import WorkStealingPool
            from refsched.verify.pool.lockstep import (
                BATCH_STEAL_CAPS,
                BLOCKING_MAX_SPARES,
                run_pool_lockstep,
            )
            if payload["file"] == _P:
                run_pool_lockstep(WorkStealingPool, examples=budget["lockstep_examples"],
                                  steps=budget["lockstep_steps"], shrink=False)
                # then with batch steals, a thief keeping up to two tasks in their order
                for cap in BATCH_STEAL_CAPS:
                    run_pool_lockstep(WorkStealingPool, examples=budget["lockstep_examples"],
                                      steps=budget["lockstep_steps"], shrink=False,
                                      steal_cap=cap)
            # then with managed blocking: tasks that block, spares that stand in and retire
            run_pool_lockstep(WorkStealingPool, examples=budget["lockstep_examples"],
                              steps=budget["lockstep_steps"], shrink=False,
                              max_spares=BLOCKING_MAX_SPARES)
        elif payload["file"] in (_D, _DS, _DP, _DF):
            from refsched.durable import DurableScheduler
            from refsched.verify.durable.lockstep import run_durable_lockstep
            # with the model's provenance records compared too (spec: RecordProvenance), and
            # the store's signals: their laws and the model's counts per partition
            run_durable_lockstep(DurableScheduler, examples=budget["durable_lockstep_examples"],
                                 steps=budget["lockstep_steps"], hypothesis_settings=unshrunk,
                                 provenance=True, signals=True)
        else:
            run_lockstep(TaskScheduler, examples=budget["lockstep_examples"],
                         steps=budget["lockstep_steps"], hypothesis_settings=unshrunk)
            # then with signals() kept, over fewer partitions than the submissions name
            run_lockstep(functools.partial(TaskScheduler, max_partitions=2), labels=True,
                         examples=budget["lockstep_examples"], steps=budget["lockstep_steps"],
                         hypothesis_settings=unshrunk)
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
        if trace.meta["signal_breaches"]:
            return KILLED, _short(f"record_runner_run({seed}): signals(): "
                                  + "; ".join(trace.meta["signal_breaches"]))
        verdict = validate_trace(trace)
        if not verdict.accepted:
            return KILLED, _short(f"record_runner_run({seed}): {format_validation(verdict)}")
    return SURVIVED, ""


def _durable_tlc_layer(payload: dict[str, Any]) -> tuple[str, str]:
    """Soak runs (worker processes under SIGKILL and SIGSTOP), each history checked as the run
    checks it (``soak_run``'s ``spec_problems``), then judged by TLC."""
    from refsched.durable import DurableScheduler
    from refsched.verify.durable.soak import soak_run
    from refsched.verify.durable.validate import validate_history

    with tempfile.TemporaryDirectory(prefix="refsched-mutant-soak-") as folder:
        for seed in range(1, payload["budget"]["soak_runs"] + 1):
            try:
                report = soak_run(seed, Path(folder), tasks=10, workers=3, timeout=60.0)
            except Exception:
                return ERROR, _short(f"soak_run({seed}) raised\n{traceback.format_exc()}")
            if report.spec_problems:  # the run's own check of its history, before TLC's
                return KILLED, _short(f"soak_run({seed}): the history check finds "
                                      + "; ".join(report.spec_problems[:3]))
            with DurableScheduler(report.store) as db:
                history = db.timed_history()
                if not history:
                    return ERROR, f"soak_run({seed}) recorded no step"
                verdict = validate_history(history, max_concurrency=db.max_concurrency,
                                           max_attempts=db.max_attempts, aging=db.aging)
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
        "unit_tests": list(mutant.unit_tests) if mutant else [],
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
        "Seeded bugs of `refsched/dag/scheduler.py`, `dag/runner.py`, `timer/scheduler.py`, "
        "`timer/runner.py`, `pool/pool.py`, `durable/scheduler.py` and `durable/store.py` (each "
        "system's catalogue in `refsched/verify/<system>/mutants.py`, run by "
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
