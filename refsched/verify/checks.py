"""The checks ``refsched verify`` runs, each returning an :class:`Outcome` with its figures.

A check never raises for a failed verdict: the failure is an Outcome with ``ok=False`` and a
detail that says what differed. Checks that share work (the state graph TLC dumps is matched
once, then checked against the corpus) share a :class:`Session`.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refsched.verify import system as systems
from refsched.verify import tlc

__all__ = [
    "Outcome",
    "Session",
    "corpus_check",
    "durable_worker_lockstep_check",
    "graph_key",
    "lockstep_check",
    "model_equals_spec",
    "pool_lockstep_check",
    "recorded_runs_check",
    "replay_check",
    "timer_lockstep_check",
    "tlc_check",
]

Report = Callable[[str], None]
"""Where a check sends one line of progress."""


@dataclass
class Outcome:
    """One check's verdict: its name, whether it passed, what it saw, and how long it took."""

    name: str
    ok: bool
    detail: str
    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)  # the numbers behind the detail

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail,
                "seconds": round(self.seconds, 3), "figures": self.figures}


@dataclass
class Session:
    """What checks of one run share."""

    workers: int = 2
    report: Report = lambda _line: None
    # each matched StateGraph once model_equals_spec has run for it, by the system's name for
    # its traces config and "name:config" for its other corpus instances (graph_key)
    graphs: dict[str, Any] = field(default_factory=dict)

    @property
    def graph(self) -> Any:
        """The TaskScheduler's matched StateGraph (None before model_equals_spec)."""
        return self.graphs.get("scheduler")


def graph_key(system: systems.System, config: str | None = None) -> str:
    """Where :attr:`Session.graphs` keeps the graph of the corpus instance ``config``."""
    if config is None or config == system.traces_config:
        return system.name
    return f"{system.name}:{config}"


def _elapsed(started: float) -> float:
    return time.monotonic() - started


def _tlc_lines(label: str, report: Report) -> Callable[[str], None]:
    def on_line(line: str) -> None:
        if line.startswith(("Progress", "Computing", "Starting", "Checking", "Finished")):
            report(f"  TLC {label}: {line.strip()}")
    return on_line


def tlc_check(session: Session, label: str, config: str,
              module: str = "MCScheduler.tla") -> Outcome:
    """Model-check ``module`` with ``config``: every invariant and property it names."""
    started = time.monotonic()
    name = f"TLC {label} ({config})"
    try:
        # -deadlock: a scheduler closed before any submission has no successor, and that is
        # not an error (TLC 2.15 has no CHECK_DEADLOCK keyword for the config).
        result = tlc.run_tlc(config, module, workers=session.workers,
                             extra_args=["-deadlock"], on_line=_tlc_lines(label, session.report))
    except (tlc.TLCNotFoundError, FileNotFoundError) as e:
        return Outcome(name, False, str(e), _elapsed(started))
    figures = {"distinct_states": result.distinct_states,
               "states_generated": result.states_generated, "depth": result.depth}
    if result.ok:
        detail = (f"{result.distinct_states:,} distinct states, "
                  f"{result.states_generated:,} generated, depth {result.depth}")
        return Outcome(name, True, detail, _elapsed(started), figures)
    what = (f"{result.violation_kind} {result.violated} violated" if result.violated
            else result.violation_kind or "TLC reported an error")
    return Outcome(name, False, f"{what}\n{result.trace or result.output[-3000:]}",
                   _elapsed(started), figures)


def model_equals_spec(session: Session, system: systems.System | None = None,
                      config: str | None = None) -> Outcome:
    """TLC's state graph of the system's corpus instance ``config`` (default: its traces
    config) equals the model's, edge for edge."""
    from refsched.verify import stategraph

    system = system or systems.get()
    config = config or system.traces_config
    started = time.monotonic()
    name = f"model = spec ({config})"
    try:
        graph = stategraph.tlc_graph(config, workers=session.workers, system=system,
                                     on_line=_tlc_lines("state graph", session.report))
    except (stategraph.GraphMismatch, tlc.TLCNotFoundError, FileNotFoundError) as e:
        return Outcome(name, False, str(e), _elapsed(started))
    session.graphs[graph_key(system, config)] = graph
    figures = {"states": graph.state_count, "edges": graph.edge_count}
    return Outcome(name, True, f"{graph.state_count:,} states and {graph.edge_count:,} "
                   "labelled edges, the same in TLC's graph and the model's",
                   _elapsed(started), figures)


def corpus_check(session: Session, system: systems.System | None = None,
                 config: str | None = None, *, quick: bool = False) -> Outcome:
    """The committed trace corpus of the instance ``config`` (default: the system's traces
    config) is the one the current spec and model give (``quick``: made from these spec files,
    for a graph of the same size, without making it again)."""
    from refsched.verify import corpus

    system = system or systems.get()
    config = config or system.traces_config
    started = time.monotonic()
    name = f"corpus is current (traces/{system.bundle_of(config)})"
    graph = session.graphs.get(graph_key(system, config))
    if graph is None:
        return Outcome(name, False, "needs the state graph, and model = spec did not pass",
                       _elapsed(started))
    try:
        check = corpus.check_corpus(graph, quick=quick)
    except corpus.CorpusMismatch as e:
        return Outcome(name, False, str(e), _elapsed(started))
    m = check.manifest
    figures = {k: m[k] for k in ("traces", "steps", "edges")}
    return Outcome(name, True, f"{m['traces']:,} traces, {m['steps']:,} steps, made from "
                   "this spec", _elapsed(started), figures)


def lockstep_check(session: Session, factory: Callable[[int], Any], impl_name: str,
                   examples: int) -> Outcome:
    """Hypothesis drives the model and ``factory``'s scheduler side by side."""
    from refsched.verify.dag.lockstep import Ledger, run_lockstep

    started = time.monotonic()
    ledger = Ledger()
    name = f"lock-step model vs {impl_name}"

    def on_example() -> None:
        session.report(f"  lock-step: example {ledger.examples + 1} (of at least {examples}), "
                       f"{ledger.calls:,} calls")

    try:
        run_lockstep(factory, examples=examples, on_example=on_example, ledger=ledger)
    except Exception as e:  # the shrunk failing sequence is in the exception and its notes
        detail = "".join(traceback.format_exception_only(type(e), e))
        notes = "\n".join(getattr(e, "__notes__", []))
        return Outcome(name, False, f"disagreement found\n{detail}{notes}", _elapsed(started))
    figures = {"examples": ledger.examples, "calls": ledger.calls}
    detail = (f"{ledger.examples} examples, snapshots equal after every call"
              f"\n  {ledger.summary()}")
    missing = ledger.missing()
    if missing:  # not a disagreement, but a weaker check than it should be
        detail += f"\n  note: never exercised: {', '.join(missing)} (run more --examples)"
    return Outcome(name, True, detail, _elapsed(started), figures)


def replay_check(session: Session, factory: Callable[..., Any] | None, impl_name: str,
                 system: systems.System | None = None, config: str | None = None, *,
                 stride: int = 1) -> Outcome:
    """Every trace of the system's corpus of the instance ``config`` (default: its traces
    config; one trace in ``stride``), replayed against the model and ``factory``'s
    implementation (the system's own by default). The whole corpus must take every edge of its
    graph; a sample need only replay without a divergence, and says how many edges it took."""
    from refsched.verify import corpus
    from refsched.verify.itf import TraceFormatError, read_traces
    from refsched.verify.replay import format_divergence, replay

    system = system or systems.get()
    config = config or system.traces_config
    started = time.monotonic()
    name = f"corpus replay vs {impl_name}"
    if config != system.traces_config:
        name += f" ({system.bundle_of(config)})"
    directory = corpus.traces_dir()
    try:
        manifest = corpus.read_manifest(directory, system, config)
        bundle = directory / str(manifest.get("bundle", system.bundle_of(config)))
        session.report(f"  replay: reading {bundle}")
        traces = read_traces(bundle, stride=stride)
    except (corpus.CorpusMismatch, TraceFormatError) as e:
        return Outcome(name, False, str(e), _elapsed(started))
    total = len(traces)
    if stride > 1:
        name += f" (one trace in {stride})"

    def on_progress(done: int, steps: int) -> None:
        if done % 500 == 0:
            session.report(f"  replay: {done:,} of {total:,} traces, {steps:,} steps")

    report = replay(traces, factory, on_progress=on_progress, system=system)
    edges = int(manifest.get("edges", 0))
    figures = {"traces": report.traces, "steps": report.steps, "edges_replayed": report.edges,
               "edges": edges, "steps_per_second": round(report.steps_per_second),
               "replay_seconds": round(report.seconds, 3)}
    if not report.ok:
        return Outcome(name, False, "divergence\n" + format_divergence(report.divergences[0]),
                       _elapsed(started), figures)
    ledger = ", ".join(f"{a} {c.edges:,}" for a, c in report.coverage.items())
    detail = (f"{report.steps:,} steps of {report.traces:,} traces, {report.edges:,} of "
              f"{edges:,} edges ({100 * report.edges / max(edges, 1):.0f}%), "
              f"{report.steps_per_second:,.0f} steps/s\n  edges by action: {ledger}")
    if stride > 1:
        return Outcome(name, True, detail, _elapsed(started), figures)
    return Outcome(name, report.edges == edges, detail if report.edges == edges else
                   f"only {report.edges:,} of the corpus's {edges:,} edges were replayed\n"
                   + detail, _elapsed(started), figures)


def timer_lockstep_check(session: Session, examples: int) -> Outcome:
    """Hypothesis drives the timer model and ``TimerScheduler`` side by side on one fake clock."""
    from refsched.timer.scheduler import TimerScheduler
    from refsched.verify.timer.lockstep import Ledger, run_timer_lockstep

    def run() -> Ledger:
        ledger = Ledger()
        run_timer_lockstep(TimerScheduler, examples=examples, ledger=ledger)
        return ledger

    return _lockstep(session, "timer", "refsched:TimerScheduler", examples, run)


def pool_lockstep_check(session: Session, examples: int) -> Outcome:
    """Hypothesis drives the pool model and ``WorkStealingPool`` (its workers' moves stepped)
    side by side: single steals, then batch steals (StealCap 2, then 3, on both sides)."""
    from refsched.pool.pool import WorkStealingPool
    from refsched.verify.pool.lockstep import BATCH_STEAL_CAPS, run_pool_lockstep

    def run() -> Any:
        ledger = run_pool_lockstep(WorkStealingPool, examples=examples)
        for cap in BATCH_STEAL_CAPS:
            run_pool_lockstep(WorkStealingPool, examples=examples, ledger=ledger,
                              steal_cap=cap)
        return ledger

    return _lockstep(session, "pool", "refsched:WorkStealingPool", examples, run)


def _lockstep(session: Session, model: str, impl_name: str, examples: int,
              run: Callable[[], Any]) -> Outcome:
    """Run a lock-step machine; ``run`` returns its ledger (examples, calls, what was taken)."""
    started = time.monotonic()
    name = f"lock-step {model} model vs {impl_name}"
    session.report(f"  {model} lock-step: {examples} examples")
    try:
        ledger = run()
    except Exception as e:  # the shrunk failing sequence is in the message
        detail = "".join(traceback.format_exception_only(type(e), e))
        return Outcome(name, False, f"disagreement found\n{detail}", _elapsed(started))
    figures = {"examples": ledger.examples, "calls": ledger.calls}
    detail = (f"{ledger.examples} examples, snapshots equal after every call"
              f"\n  {ledger.summary()}")
    missing = ledger.missing()
    if missing:
        detail += f"\n  note: never exercised: {', '.join(missing)} (run more --examples)"
    return Outcome(name, True, detail, _elapsed(started), figures)


def recorded_runs_check(session: Session, runs: int) -> Outcome:
    """TLC confirms that recorded multi-threaded Runner runs are behaviours of ``Spec``, and
    each run's ``signals()`` keeps the conservation laws and counts what its steps count."""
    from refsched.verify.dag.recording import record_runner_run
    from refsched.verify.validate import format_validation, validate_trace

    started = time.monotonic()
    name = f"TLC validates {runs} recorded Runner runs"
    steps = 0
    for seed in range(1, runs + 1):
        session.report(f"  recording and validating run {seed} of {runs}")
        trace = record_runner_run(seed)
        steps += len(trace.steps)
        if trace.meta["signal_breaches"]:
            return Outcome(name, False, f"{trace.name}: signals(): "
                           + "; ".join(trace.meta["signal_breaches"]), _elapsed(started),
                           {"runs": seed, "steps": steps})
        try:
            verdict = validate_trace(trace)
        except (tlc.TLCNotFoundError, RuntimeError, ValueError) as e:
            return Outcome(name, False, f"{trace.name}: {e}", _elapsed(started))
        if not verdict.accepted:
            return Outcome(name, False, format_validation(verdict), _elapsed(started),
                           {"runs": seed, "steps": steps})
    return Outcome(name, True, f"{runs} runs, {steps:,} steps, every one a behaviour of Spec; "
                   "signals() kept the conservation laws",
                   _elapsed(started), {"runs": runs, "steps": steps})


def durable_lockstep_check(session: Session, examples: int) -> Outcome:
    """Hypothesis drives the durable model and ``DurableScheduler`` (a SQLite store on a
    virtual clock) side by side, the provenance records compared too; at most 100 examples,
    since every call is a transaction of a store on disk."""
    from refsched.durable import DurableScheduler
    from refsched.verify.durable.lockstep import run_durable_lockstep

    examples = min(examples, 100)

    return _lockstep(session, "durable", "refsched.durable:DurableScheduler", examples,
                     lambda: run_durable_lockstep(DurableScheduler, examples=examples,
                                                  provenance=True))


def durable_worker_lockstep_check(session: Session, examples: int) -> Outcome:
    """Hypothesis drives two real ``Worker`` objects (their held leases, claims, heartbeats,
    reports, time limits and crashes, without threads) on a virtual-clock SQLite store beside
    the durable model's worker steps; each worker's held leases must be the model's
    ``held[w]`` after every move, self re-claims included. At most 100 examples."""
    from refsched.verify.durable.worker_lockstep import run_durable_worker_lockstep

    examples = min(examples, 100)
    started = time.monotonic()
    name = "lock-step durable worker model vs refsched.durable.worker:Worker"
    session.report(f"  durable worker lock-step: {examples} examples")
    try:
        ledger = run_durable_worker_lockstep(examples=examples)
    except Exception as e:  # the shrunk failing walk is in the message
        detail = "".join(traceback.format_exception_only(type(e), e))
        return Outcome(name, False, f"disagreement found\n{detail}", _elapsed(started))
    detail = f"{ledger.examples} examples, held leases equal after every move\n  {ledger.summary()}"
    missing = ledger.missing()
    if missing:
        detail += f"\n  note: never exercised: {', '.join(missing)} (run more --examples)"
    return Outcome(name, True, detail, _elapsed(started),
                   {"examples": ledger.examples, "self_reclaims": ledger.actions["self re-claim"]})


def durable_runs_check(session: Session, runs: int) -> Outcome:
    """Real multi-process runs under SIGKILL and SIGSTOP (``refsched soak``): each store's
    recorded history is checked step by step and then judged by TLC against the spec."""
    import tempfile

    from refsched.durable import DurableScheduler
    from refsched.verify.durable.soak import soak_run
    from refsched.verify.durable.validate import validate_history

    started = time.monotonic()
    name = f"TLC validates {runs} durable runs under kills and pauses"
    steps = kills = pauses = reclaims = 0
    for seed in range(1, runs + 1):
        session.report(f"  durable run {seed} of {runs}: worker processes, kills and pauses")
        with tempfile.TemporaryDirectory(prefix="refsched-durable-run-") as folder:
            report = soak_run(seed, Path(folder), tasks=10, workers=3)
            kills, pauses, reclaims = (kills + report.kills, pauses + report.pauses,
                                       reclaims + report.reclaims)
            if report.problems:
                return Outcome(name, False, f"run {seed}: " + "; ".join(report.problems[:3]),
                               _elapsed(started))
            db = DurableScheduler(report.store)
            try:
                history = db.timed_history()
                session.report(f"  durable run {seed} of {runs}: TLC on {len(history)} steps")
                verdict = validate_history(history, max_concurrency=db.max_concurrency,
                                           max_attempts=db.max_attempts, aging=db.aging)
            except (tlc.TLCNotFoundError, RuntimeError, ValueError) as e:
                return Outcome(name, False, f"run {seed}: {e}", _elapsed(started))
            finally:
                db.release()
        steps += len(history)
        if not verdict.accepted:
            return Outcome(name, False, f"run {seed}: {verdict.reason}", _elapsed(started),
                           {"runs": seed, "steps": steps})
    return Outcome(name, True, f"{runs} runs, {steps:,} steps ({kills} kills, {pauses} pauses, "
                   f"{reclaims} re-claims), every one a behaviour of DurableScheduler",
                   _elapsed(started), {"runs": runs, "steps": steps})
