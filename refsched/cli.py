"""The ``refsched`` command line.

- ``refsched verify``: every check on the default instance, with progress and a summary
  table (``--json`` for the same as data): TLC safety and liveness, model = spec on TLC's
  state graph, the corpus is current, the corpus replayed against the implementation, TLC
  validating recorded Runner runs, and the lock-step check against the reference model.
- ``refsched traces``: check model = spec and write (or ``--check``) the trace corpus.
- ``refsched replay [TRACES]``: replay ITF traces against the model and an implementation.
- ``refsched validate-trace FILE``: TLC's verdict on recorded ITF traces.
- ``refsched record [--system scheduler|timer|pool] -o FILE``: record random multi-threaded
  runs (the Runner, the TimerRunner, the WorkStealingPool) as ITF traces.
- ``refsched explore [SCENARIO] [--replay ID]``: explore thread interleavings of the scenarios.
- ``refsched mutants [NAMES]``: run every verification layer against seeded mutants.
- ``refsched conform [--system NAME] -- COMMAND``: check another implementation of one of the
  systems against its reference model through the conformance protocol
  (``docs/conformance.md``).
- ``refsched worker``, ``status``, ``jobs``, ``show ID``, ``retry ID``, ``cancel ID``: run and
  inspect a durable store (``docs/durable.md``); 0 done, 1 the store refused, 2 usage or store
  error.

Exit status 0 when every check passed, 1 when one failed, 2 for a usage error or unreadable
input (each command's ``--help`` lists its own; ``validate-trace`` adds 3 and 4). An input
that holds nothing to check is a usage error, never a pass. SIGTERM and SIGHUP end a command
as SIGINT does (exit 130, 143, 129), killing any TLC it started.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import refsched

# re-exported: the other commands (explore, conform) take their argparse types from here
from refsched.arguments import non_negative_int as non_negative_int
from refsched.arguments import positive_int as positive_int
from refsched.arguments import positive_seconds as positive_seconds
from refsched.arguments import unwritable
from refsched.loading import FactoryError as FactoryError
from refsched.loading import guarded_factory as guarded_factory
from refsched.loading import load_factory as load_factory
from refsched.progress import Progress as Progress
from refsched.verify.checks import Outcome
from refsched.verify.system import REPLAYABLE as SYSTEM_NAMES

CHECK_CONFIGS = (
    ("safety", "MCScheduler.cfg"),
    ("liveness", "MCSchedulerLiveness.cfg"),
)
# verify --quick: one corpus trace in QUICK_STRIDE replayed, QUICK_EXAMPLES lock-step examples
QUICK_STRIDE = 20
QUICK_EXAMPLES = 20


# -- argument types: a bad value is argparse's usage error (exit 2), before anything runs --

def _print_table(outcomes: list[Outcome], stream: TextIO) -> None:
    """The summary: one row per check, its verdict, its first line of figures, its time."""
    width = max(len(o.name) for o in outcomes)
    for o in outcomes:
        first = o.detail.partition("\n")[0]
        stream.write(f"  {o.name.ljust(width)}  {'ok  ' if o.ok else 'FAIL'}  "
                     f"{o.seconds:6.1f}s  {first}\n")


def _spec_checks(args: argparse.Namespace, session: Any, name: str, configs: dict[str, str],
                 implementation: str,
                 lockstep: Callable[[Any, int], Outcome]) -> list[Callable[[], Outcome]]:
    """The checks of one system other than the TaskScheduler, as ``args`` select them: TLC on
    each of ``configs`` (label -> config), model = spec, the corpus, its replay against the
    production ``implementation`` and the ``lockstep`` machine."""
    from refsched.verify import checks, system

    chosen = system.get(name)
    plan: list[Callable[[], Outcome]] = []
    if not args.skip_tlc:
        for label, config in ({} if args.quick else configs).items():
            if label != "liveness" or not args.skip_liveness:
                plan.append(functools.partial(checks.tlc_check, session, f"{name} {label}",
                                              config, chosen.mc_module))
        for config in chosen.instances:
            plan.append(functools.partial(checks.model_equals_spec, session, chosen, config))
            plan.append(functools.partial(checks.corpus_check, session, chosen, config,
                                          quick=args.quick))
    if not args.skip_replay:
        for config in chosen.instances:
            plan.append(functools.partial(checks.replay_check, session, None, implementation,
                                          chosen, config,
                                          stride=QUICK_STRIDE if args.quick else 1))
    if args.examples > 0:
        plan.append(functools.partial(lockstep, session, args.examples))
    return plan


def _schedule_checks(args: argparse.Namespace, session: Any) -> list[Callable[[], Outcome]]:
    """The recurring schedule's spec (``Schedule.tla``), shared by the timer and the durable
    scheduler: TLC on each overlap policy's instance and on liveness, and model = spec on each
    instance's graph (with ``--quick``, model = spec on the skip instance only)."""
    from refsched.verify import checks
    from refsched.verify.schedule import CONFIGS, SCHEDULE

    plan: list[Callable[[], Outcome]] = []
    if not args.quick:
        for config in (*CONFIGS, "MCScheduleLiveness.cfg"):
            if config.endswith("Liveness.cfg") and args.skip_liveness:
                continue
            label = "schedule " + (config[len("MCSchedule"):-len(".cfg")].lower() or "skip")
            plan.append(functools.partial(checks.tlc_check, session, label, config,
                                          SCHEDULE.mc_module))
    schedule: Any = SCHEDULE  # read by the state graph's match as a system is
    for config in CONFIGS[:1] if args.quick else CONFIGS:
        plan.append(functools.partial(checks.model_equals_spec, session, schedule, config))
    return plan


def _graphs_first(plan: list[Callable[[], Outcome]],
                  graph_check: Callable[..., Outcome]) -> list[Callable[[], Outcome]]:
    """``plan`` with its ``graph_check`` calls started at once, two at a time, each taking its
    place in the plan's order when its result is read.

    Each system's state graph costs one TLC run, most of it the JVM starting and compiling,
    one core at a time: two runs side by side take little more than one. The outcomes are
    reported in the plan's order, as without this.
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    graphs = [check for check in plan if getattr(check, "func", None) is graph_check]
    if len(graphs) < 2:
        return plan
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="refsched-graph")
    started = {id(check): pool.submit(check) for check in graphs}
    pool.shutdown(wait=False)
    return [functools.partial(Future.result, started[id(check)]) if id(check) in started
            else check for check in plan]


def cmd_verify(args: argparse.Namespace) -> int:
    from refsched.verify import checks

    if args.examples is None:
        args.examples = QUICK_EXAMPLES if args.quick else 500
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    progress = Progress(sys.stderr, quiet=args.quiet or args.json)
    session = checks.Session(workers=args.workers, report=progress.update)
    plan: list[Callable[[], Outcome]] = []
    dag = args.system in ("all", "scheduler")
    timer = args.system in ("all", "timer")
    if dag and not args.skip_tlc:
        for label, config in ([] if args.quick else CHECK_CONFIGS):
            if label == "liveness" and args.skip_liveness:
                continue
            plan.append(functools.partial(checks.tlc_check, session, label, config))
        plan.append(functools.partial(checks.model_equals_spec, session))
        plan.append(functools.partial(checks.corpus_check, session, quick=args.quick))
    try:
        factory = guarded_factory(args.impl, load_factory(args.impl))
    except ValueError as e:
        print(f"refsched verify: {e}", file=sys.stderr)
        return 2
    if dag and not args.skip_replay:
        plan.append(functools.partial(checks.replay_check, session, factory, args.impl,
                                      stride=QUICK_STRIDE if args.quick else 1))
    if dag and not args.skip_tlc and args.runs > 0:
        plan.append(functools.partial(checks.recorded_runs_check, session, args.runs))
    if dag and args.examples > 0:
        plan.append(functools.partial(checks.lockstep_check, session, factory, args.impl,
                                      args.examples))
    if timer:
        plan += _spec_checks(args, session, "timer", {"safety": "MCTimerQueue.cfg"},
                             "refsched:TimerScheduler", checks.timer_lockstep_check)
    if args.system in ("all", "pool"):
        plan += _spec_checks(args, session, "pool", {"safety": "MCWorkStealing.cfg",
                                                     "batch": "MCWorkStealingBatch.cfg",
                                                     "liveness": "MCWorkStealingLiveness.cfg"},
                             "refsched:WorkStealingPool", checks.pool_lockstep_check)
    if args.system in ("all", "durable"):
        plan += _spec_checks(args, session, "durable",
                             {"safety": "MCDurableScheduler.cfg",
                              "pairs": "MCDurableSchedulerPairs.cfg",
                              "generations": "MCDurableSchedulerGenerations.cfg",
                              "time": "MCDurableSchedulerTime.cfg",
                              "liveness": "MCDurableSchedulerLiveness.cfg",
                              "time liveness": "MCDurableSchedulerTimeLiveness.cfg"},
                             "refsched.durable:DurableScheduler", checks.durable_lockstep_check)
        if args.examples > 0:
            plan.append(functools.partial(checks.durable_worker_lockstep_check, session,
                                          args.examples))
        if not args.skip_tlc and args.runs > 0:
            plan.append(functools.partial(checks.durable_runs_check, session, args.runs))
    if args.system in ("all", "timer", "durable") and not args.skip_tlc:
        plan += _schedule_checks(args, session)
    if not plan:
        print("refsched verify: nothing to check (every check skipped)", file=sys.stderr)
        return 2
    started = time.monotonic()  # the checks' own times overlap with --quick: report the wall's
    if args.quick:
        plan = _graphs_first(plan, checks.model_equals_spec)
    outcomes: list[Outcome] = []
    for check in plan:
        try:
            outcome = check()
        except FactoryError as e:
            progress.clear()
            print(f"refsched verify: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
        outcomes.append(outcome)
        if not args.json:
            mark = "ok  " if outcome.ok else "FAIL"
            first, _, rest = outcome.detail.partition("\n")
            progress.done(f"{mark} {outcome.name}: {first} [{outcome.seconds:.1f}s]")
            if rest:
                sys.stderr.write(rest + "\n")
        if not outcome.ok and args.fail_fast:
            break
    passed = sum(o.ok for o in outcomes)
    total_seconds = time.monotonic() - started
    ok = passed == len(outcomes)
    if args.json:
        json.dump({"ok": ok, "passed": passed, "checks": len(outcomes),
                   "seconds": round(total_seconds, 3),
                   "results": [o.as_json() for o in outcomes]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"refsched verify: {passed} of {len(outcomes)} checks passed "
              f"in {total_seconds:.1f}s")
        _print_table(outcomes, sys.stdout)
    return 0 if ok else 1


def _graph_progress(progress: Progress) -> Callable[[str], None]:
    def on_line(line: str) -> None:
        if line.startswith(("Progress", "Computing", "Starting", "Finished")):
            progress.update(f"  TLC: {line.strip()}")
    return on_line


def cmd_traces(args: argparse.Namespace) -> int:
    from refsched.verify import system

    chosen = system.get(args.system)
    progress = Progress(sys.stderr, quiet=args.quiet)
    worst = 0
    for config in chosen.instances:  # each corpus instance of the system, one after another
        status = _traces_of(args, chosen, config, progress)
        worst = max(worst, status)
        if status == 2:
            break
    return worst


def _traces_of(args: argparse.Namespace, chosen: Any, config: str, progress: Progress) -> int:
    """Dump, match and write (or, with --check, check) the corpus of one instance."""
    from refsched.verify import corpus, stategraph, tlc

    started = time.monotonic()
    # a system of one instance says no more than it did before it could have several
    label = f" ({config})" if len(chosen.instances) > 1 else ""
    progress.update(f"  TLC: dumping the state graph of spec/{config}", force=True)
    try:
        graph = stategraph.tlc_graph(config, workers=args.workers,
                                     on_line=_graph_progress(progress), system=chosen)
    except (stategraph.GraphMismatch, tlc.TLCNotFoundError, FileNotFoundError) as e:
        progress.done(f"FAIL model = spec{label}: {e}")
        return 1
    matched = time.monotonic()
    progress.done(f"ok   model = spec{label}: {graph.state_count:,} states and "
                  f"{graph.edge_count:,} labelled edges, the same in TLC's graph and the "
                  f"model's [{matched - started:.1f}s]")
    directory = Path(args.output) if args.output else None
    if args.check:
        try:
            check = corpus.check_corpus(graph, directory)
        except corpus.CorpusMismatch as e:
            progress.done(f"FAIL corpus{label}: {e}")
            return 1
        m = check.manifest
        where = corpus.traces_dir() if directory is None else directory
        progress.done(f"ok   corpus: {where / chosen.bundle_of(config)} is current: "
                      f"{m['traces']:,} traces, {m['steps']:,} steps covering "
                      f"{m['edges']:,} edges [{time.monotonic() - matched:.1f}s]")
        return 0
    try:
        manifest = corpus.write_corpus(graph, directory)
    except OSError as e:
        progress.done(f"refsched traces: cannot write the corpus: {e}")
        return 2
    where = directory or corpus.traces_dir()
    bundle = where / chosen.bundle_of(config)
    size = bundle.stat().st_size
    progress.done(f"wrote {bundle}: {manifest['traces']:,} traces, "
                  f"{manifest['steps']:,} steps covering all {manifest['edges']:,} edges "
                  f"({size / 1e6:.1f} MB) [{time.monotonic() - matched:.1f}s]")
    return 0


def _read(paths: Sequence[str], command: str,
          progress: Progress | None = None) -> list[Any] | None:
    """Every trace in ``paths``, or None after printing why one cannot be read (a file that
    holds no trace is one: checking nothing must not pass) on one line of stderr."""
    from refsched.verify.itf import TraceFormatError, read_traces

    traces: list[Any] = []
    for path in paths:
        try:
            traces += read_traces(path)
        except TraceFormatError as e:
            why = str(e)
        except (ValueError, TypeError, LookupError, OSError, RecursionError) as e:
            # read_traces says why for every malformed input it knows; this is one it does not
            why = f"{path}: cannot read it as ITF traces: {type(e).__name__}: {e}"
        else:
            continue
        if progress is not None:
            progress.clear()
        print(f"refsched {command}: {' '.join(why.split())}", file=sys.stderr)
        return None
    return traces


def cmd_replay(args: argparse.Namespace) -> int:
    from refsched.verify import system
    from refsched.verify.replay import format_report, replay

    try:
        factory = guarded_factory(args.impl, load_factory(args.impl)) if args.impl else None
    except ValueError as e:
        print(f"refsched replay: {e}", file=sys.stderr)
        return 2
    progress = Progress(sys.stderr, quiet=args.quiet)
    if not args.traces:
        return _replay_corpus(args, system.get(args.system or "scheduler"), factory, progress)
    paths = args.traces
    if progress.live:  # a log gets no line for it: an error then stays the only line
        progress.update(f"  reading {', '.join(paths)}", force=True)
    traces = _read(paths, "replay", progress)
    if traces is None:
        return 2
    total = len(traces)
    if args.system or not traces:
        chosen = system.get(args.system or "scheduler")
    else:  # the spec whose variables the traces hold
        try:
            chosen = system.by_spec_variables(traces[0].initial)
        except ValueError as e:  # TraceFormatError is one
            print(f"refsched replay: {e}", file=sys.stderr)
            return 2
        if chosen.name not in system.REPLAYABLE:
            print(f"refsched replay: no corpus of the {chosen.title} is replayed yet",
                  file=sys.stderr)
            return 2

    def on_progress(done: int, steps: int) -> None:
        progress.update(f"  replayed {done:,} of {total:,} traces, {steps:,} steps")

    try:
        report = replay(traces, factory, stop_at_first=not args.all, on_progress=on_progress,
                        system=chosen, fatal=(FactoryError,))
    except FactoryError as e:
        progress.done(f"refsched replay: {' '.join(str(e).split())}")
        return 2
    progress.done(format_report(report))
    return 0 if report.ok else 1


def _replay_corpus(args: argparse.Namespace, chosen: Any, factory: Callable[..., Any] | None,
                   progress: Progress) -> int:
    """Replay each corpus instance of ``chosen`` on its own: every one must take every edge of
    its graph (instances share states, so their edges are counted apart)."""
    from refsched.verify import corpus
    from refsched.verify.replay import format_report, replay

    try:
        found = corpus.instance_bundles(chosen)
    except corpus.CorpusMismatch as e:
        print(f"refsched replay: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    status = 0
    for config, bundle, manifest in found:
        if progress.live:
            progress.update(f"  reading {bundle}", force=True)
        traces = _read([str(bundle)], "replay", progress)
        if traces is None:
            return 2
        total = len(traces)

        def on_progress(done: int, steps: int, total: int = total) -> None:
            progress.update(f"  replayed {done:,} of {total:,} traces, {steps:,} steps")

        try:
            report = replay(traces, factory, stop_at_first=not args.all,
                            on_progress=on_progress, system=chosen, fatal=(FactoryError,))
        except FactoryError as e:
            progress.done(f"refsched replay: {' '.join(str(e).split())}")
            return 2
        label = f" ({config})" if len(found) > 1 else ""
        progress.done(f"{bundle.name}{label}:\n{format_report(report)}" if label
                      else format_report(report))
        edges = int(manifest.get("edges", 0))
        print(f"edges replayed{label}: {report.edges:,} of {edges:,} "
              f"({100 * report.edges / max(edges, 1):.1f}%)")
        if not report.ok or report.edges != edges:
            status = 1
            if not args.all:
                break
    return status


# validate-trace's exit statuses beyond 0 (accepted), 1 (rejected) and 2 (usage)
TLC_TIMED_OUT = 3
TLC_FAILED = 4


def cmd_validate_trace(args: argparse.Namespace) -> int:
    from refsched.verify import tlc
    from refsched.verify.validate import (
        TLCInternalError,
        TraceError,
        format_validation,
        shown_name,
        trace_module,
        validate_trace,
    )

    traces = _read(args.files, "validate-trace")
    if traces is None:
        return 2
    for trace in traces:  # every trace stated before TLC runs on any
        try:
            trace_module(trace)
        except TraceError as e:
            print(f"refsched validate-trace: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
    accepted = rejected = timed_out = failed = 0
    for trace in traces:
        try:
            verdict = validate_trace(trace, workers=args.workers, timeout=args.timeout)
        except tlc.TLCTimeoutError as e:
            print(f"{shown_name(trace.name)}: no verdict: {e} (--timeout)")
            timed_out += 1
            continue
        except TLCInternalError as e:
            print(f"{shown_name(trace.name)}: no verdict: {e}")
            failed += 1
            continue
        except tlc.TLCNotFoundError as e:
            print(f"refsched validate-trace: {e}", file=sys.stderr)
            return TLC_FAILED
        print(format_validation(verdict))
        accepted += verdict.accepted
        rejected += not verdict.accepted
    undecided = [f"{n} without a verdict ({why})"
                 for n, why in ((timed_out, "TLC timed out"), (failed, "TLC failed")) if n]
    print(f"{accepted} of {len(traces)} traces accepted by TLC"
          + "".join(f", {part}" for part in undecided))
    if rejected:
        return 1
    if failed:
        return TLC_FAILED
    if timed_out:
        return TLC_TIMED_OUT
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from refsched.verify.itf import trace_to_itf, write_traces
    from refsched.verify.recording import record_run

    out = Path(args.output)
    bundle = ".jsonl" in out.name
    if args.runs > 1 and not bundle:
        print("refsched record: several runs need a .jsonl or .jsonl.gz output",
              file=sys.stderr)
        return 2
    problem = unwritable(out)
    if problem is not None:
        print(f"refsched record: cannot write {out}: {problem}", file=sys.stderr)
        return 2
    traces = [record_run(args.system, seed, tasks=args.tasks, workers=args.workers)
              for seed in range(args.seed, args.seed + args.runs)]
    try:
        if bundle:
            write_traces(out, traces)
        else:
            out.write_text(json.dumps(trace_to_itf(traces[0]), indent=1) + "\n",
                           encoding="utf-8")
    except OSError as e:
        print(f"refsched record: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    steps = sum(len(t.steps) for t in traces)
    print(f"wrote {out}: {len(traces)} recorded run(s), {steps:,} steps")
    return 0


def _quiet_option(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    return parser


def _tlc_workers_option(parser: argparse.ArgumentParser, per_core: bool) -> None:
    """``--workers N``, TLC's worker threads: one per core by default, or one."""
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        default=(os.cpu_count() or 1) if per_core else 1,
                        help=f"TLC worker threads (default: {'one per core' if per_core else 1})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsched",
        description="Formally modelled reference task schedulers and the checks that they agree.",
        epilog="Exit status: 0 passed, 1 failed, 2 usage error or unreadable input; see each "
               "command's --help for its own. SIGINT, SIGTERM and SIGHUP kill any TLC a "
               "command started (exit 130, 143, 129).")
    parser.add_argument("--version", action="version", version=f"refsched {refsched.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    verify = commands.add_parser(
        "verify",
        help="model-check the spec with TLC and check the implementation against the model",
        description="For each scheduler: model-check its spec with TLC, match TLC's state "
                    "graph against the reference model, check the trace corpus is current and "
                    "replay it against the production implementation, and run the lock-step "
                    "check of the implementation against the model (for the TaskScheduler and the "
                    "pool also liveness, for the TaskScheduler TLC validation of recorded "
                    "Runner runs).",
        epilog="Exit status: 0 every check passed, 1 a check failed, 2 usage error (a bad "
               "option, an --impl that cannot be loaded or whose factory raises).")
    verify.add_argument("--system", choices=("all", *SYSTEM_NAMES), default="all",
                        help="which scheduler's chain to check (default: all)")
    verify.add_argument("--quick", action="store_true",
                        help="the same checks on smaller instances, for pull requests: TLC on "
                             "each system's corpus instance only (every invariant and property "
                             "it names, and model = spec on its graph; no big-instance safety "
                             f"or liveness run), one corpus trace in {QUICK_STRIDE} replayed, "
                             f"{QUICK_EXAMPLES} lock-step examples, one recorded run")
    verify.add_argument("--examples", type=non_negative_int, default=None, metavar="N",
                        help=f"lock-step examples to run (default 500, {QUICK_EXAMPLES} with "
                             "--quick; 0 skips the check)")
    verify.add_argument("--impl", default="refsched:TaskScheduler", metavar="MODULE:FACTORY",
                        help="the TaskScheduler implementation the model is checked against: "
                             "a callable taking max_concurrency (default refsched:TaskScheduler)")
    _tlc_workers_option(verify, per_core=True)
    verify.add_argument("--runs", type=non_negative_int, default=None, metavar="N",
                        help="recorded runs TLC validates: Runner runs, and durable runs of "
                             "worker processes under kills and pauses (default 3 each, 1 with "
                             "--quick; 0 skips them)")
    verify.add_argument("--skip-tlc", action="store_true",
                        help="skip every check that runs TLC")
    verify.add_argument("--skip-replay", action="store_true",
                        help="skip the replay of the trace corpus")
    verify.add_argument("--skip-liveness", action="store_true",
                        help="skip the liveness check (the slowest TLC run)")
    verify.add_argument("--fail-fast", action="store_true", help="stop at the first failed check")
    verify.add_argument("--json", action="store_true",
                        help="print the results as JSON on stdout (no progress display)")
    _quiet_option(verify).set_defaults(handler=cmd_verify)

    traces = commands.add_parser(
        "traces",
        help="check model = spec on TLC's state graph and write the edge-covering trace corpus",
        description="Dump TLC's state graph of each of the system's corpus instances "
                    "(spec/MCSchedulerTraces.cfg, spec/MCTimerQueueTraces.cfg, the durable "
                    "scheduler's four), check that a "
                    "breadth-first search of the reference model yields exactly its states and "
                    "labelled edges, and write traces that cover every edge to traces/ "
                    "(ITF, one trace per line, gzipped) with a manifest.",
        epilog="Exit status: 0 the corpus was written (or, with --check, is current), 1 TLC's "
               "graph and the model differ, TLC could not run, or the corpus is not current, "
               "2 usage error (a bad option, a folder that cannot be written).")
    traces.add_argument("--system", choices=SYSTEM_NAMES, default="scheduler",
                        help="the scheduler whose spec to dump (default: scheduler)")
    traces.add_argument("--check", action="store_true",
                        help="write nothing; fail unless the committed corpus is current")
    traces.add_argument("-o", "--output", metavar="DIR",
                        help="the corpus folder (default: traces/ beside spec/)")
    _tlc_workers_option(traces, per_core=True)
    _quiet_option(traces).set_defaults(handler=cmd_traces)

    replay = commands.add_parser(
        "replay",
        help="replay ITF traces against the reference model and an implementation",
        description="Replay each trace against the reference model and a fresh scheduler, "
                    "comparing the scheduler's snapshot with the trace's state after every "
                    "step. Without TRACES, the system's corpus in traces/, each of its "
                    "instances replayed apart and required to cover every edge of its graph.",
        epilog="Exit status: 0 no divergence (and, for the corpus, every edge replayed), 1 a "
               "trace diverges from the model or the implementation, 2 usage error: a file "
               "that is missing or is not ITF traces (not gzip, not UTF-8, not JSON, nested too "
               "deep, values of unknown kinds), a file that holds no trace, an --impl that "
               "cannot be loaded or whose factory raises.")
    replay.add_argument("traces", nargs="*", metavar="TRACES",
                        help="ITF files: .itf.json, .jsonl or .jsonl.gz (default: the corpus)")
    replay.add_argument("--system", choices=SYSTEM_NAMES, default=None,
                        help="the spec the traces are behaviours of (default: the one whose "
                             "variables they hold; without TRACES, scheduler)")
    replay.add_argument("--impl", default=None, metavar="MODULE:FACTORY",
                        help="the implementation to replay against: for the scheduler a "
                             "callable taking max_concurrency (default refsched:TaskScheduler), "
                             "for the timer one taking clock and rebuild_floor "
                             "(default refsched:TimerScheduler)")
    replay.add_argument("--all", action="store_true",
                        help="go on after a diverging trace and report every one")
    _quiet_option(replay).set_defaults(handler=cmd_replay)

    validate = commands.add_parser(
        "validate-trace",
        help="ask TLC whether recorded ITF traces are behaviours of the spec",
        description="Turn each ITF trace into a TLA+ module that walks it step by step and "
                    "ask TLC whether it is a behaviour of Spec, in the spec the trace's "
                    "variables name: Scheduler.tla, TimerQueue.tla or WorkStealing.tla. A "
                    "rejected trace names the "
                    "first step TLC could not take and why, in the reference model's words. "
                    "Any string is a legal id: strings reach TLA+ in an ASCII encoding that keeps "
                    "them equal exactly when they are equal.",
        epilog="Exit status: 0 every trace accepted, 1 a trace rejected, 2 usage error: a file "
               "that is missing or is not ITF traces, a file that holds no trace, a trace the "
               "spec cannot speak of (checked for every trace before TLC runs), 3 TLC did not "
               "finish within --timeout on a trace (and none was rejected), 4 TLC gave no "
               "verdict: Java or TLC not found, or TLC failed on the module generated for a "
               "trace (an internal error of refsched, never a verdict on the trace). TLC's "
               "process tree is killed on a timeout, on SIGINT, SIGTERM or SIGHUP and at exit.")
    validate.add_argument("files", nargs="+", metavar="FILE",
                          help="ITF files: .itf.json, .jsonl or .jsonl.gz")
    _tlc_workers_option(validate, per_core=False)
    validate.add_argument("--timeout", type=positive_seconds, default=300.0,
                          metavar="SECONDS",
                          help="give up on a trace after this long, killing TLC: exit 3 "
                               "(default 300)")
    validate.set_defaults(handler=cmd_validate_trace)

    record = commands.add_parser(
        "record",
        help="record random multi-threaded runs (Runner, TimerRunner, pool) as ITF traces",
        description="Run a system on random work with real threads and write what it did, "
                    "step by step, each step as it took effect under the system's lock, as an "
                    "ITF trace that validate-trace and replay accept: the Runner's "
                    "TaskScheduler (the default), the TimerRunner's TimerScheduler on a clock "
                    "that moves in whole ticks (the trace's Tick steps), or the "
                    "WorkStealingPool.",
        epilog="Exit status: 0 written, 2 usage error (a bad option, an output that cannot be "
               "written, several runs for a single-trace file); nothing is recorded then.")
    record.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="an .itf.json file (one run) or a .jsonl / .jsonl.gz bundle")
    record.add_argument("--system", choices=("scheduler", "timer", "pool"),
                        default="scheduler",
                        help="what runs: scheduler (the Runner, default), timer (the "
                             "TimerRunner) or pool (the WorkStealingPool)")
    record.add_argument("--seed", type=int, default=1, help="the first run's seed (default 1)")
    record.add_argument("--runs", type=positive_int, default=1, metavar="N",
                        help="runs (default 1)")
    record.add_argument("--tasks", type=positive_int, default=None, metavar="N",
                        help="task ids per run (default 6; 5 for timer)")
    record.add_argument("--workers", type=positive_int, default=None, metavar="N",
                        help="worker threads, for the scheduler also the concurrency limit "
                             "(default 3; 2 for timer)")
    record.set_defaults(handler=cmd_record)

    for name, (_, summary, usage) in _OWN_PARSERS.items():
        # Listed here for `refsched --help`; main() hands their arguments to their own parser.
        own = commands.add_parser(name, add_help=False, help=f"{summary} (see {name} -h)")
        own.add_argument("args", nargs=argparse.REMAINDER, help=usage)
    return parser


# Commands with a parser of their own: module (with a main(argv)) or module:function, summary,
# usage.
_OWN_PARSERS: dict[str, tuple[str, str, str]] = {
    "explore": ("refsched.explore.__main__",
                "explore the thread interleavings of the scheduler's scenarios",
                "[SCENARIO ...] [--replay ID] [--compare] [options]"),
    "mutants": ("refsched.verify.mutants",
                "run every verification layer against seeded mutants",
                "[NAMES ...] [--layers ...] [--json] [--markdown] [options]"),
    "conform": ("refsched.conform.main",
                "check an implementation in any language against the reference model",
                "[options] -- COMMAND [ARGS ...], or --impl MODULE:FACTORY"),
    "worker": ("refsched.durable.worker",
               "run a durable store's functions: claim under leases, heartbeat, report",
               "--db URL [--concurrency N] [--lease S] [--until-done]"),
    "status": ("refsched.durable.status",
               "show a durable store: versions by state, live leases, failures",
               "--db URL [--json]"),
    "jobs": ("refsched.durable.status:jobs_main",
             "list a durable store's task ids: state, attempt, worker, timings, result or error",
             "--db URL [--state STATE ...] [--json]"),
    "show": ("refsched.durable.status:show_main",
             "show one task id of a durable store, its failure's traceback included",
             "--db URL ID [--json]"),
    "retry": ("refsched.durable.status:retry_main",
              "give a dead version of a durable store, and those it blocked, a new version",
              "--db URL ID [--json]"),
    "cancel": ("refsched.durable.status:cancel_main",
               "cancel a waiting version of a durable store, or ask a running one to stop",
               "--db URL ID [--json]"),
    "schedules": ("refsched.durable.status:schedules_main",
                  "list a durable store's recurring schedules and the decision of each slot",
                  "--db URL [--slots N] [--json]"),
    "soak": ("refsched.verify.durable.soak",
             "random DAGs through worker processes under kills and pauses, histories checked",
             "[--runs N] [--seed S] [--tasks N] [--workers N] [--keep DIR]"),
}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so that a command unwinds as on SIGINT:
    every ``finally`` runs and the TLC it started is killed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` while the command runs, unless this process
    was told to ignore them (``nohup``) or this is not the main thread; restored after."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) == signal.SIG_DFL:
                previous[signum] = signal.signal(signum, _terminate)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _kill_tlc() -> None:
    """End every TLC this process started (one a thread still waits for included)."""
    tlc = sys.modules.get("refsched.verify.tlc")
    if tlc is not None:
        tlc.kill_running()


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        with _signals_unwind():
            if arguments[:1] and arguments[0] in _OWN_PARSERS:  # options and --help their own
                name, _, function = _OWN_PARSERS[arguments[0]][0].partition(":")
                module = importlib.import_module(name)
                return int(getattr(module, function or "main")(arguments[1:]))
            args = build_parser().parse_args(arguments)
            return int(args.handler(args))
    except Terminated as e:
        _kill_tlc()
        print(f"refsched: terminated ({e})", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        _kill_tlc()
        print("refsched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`refsched ... | head`): stop quietly, as other CLIs do, and
        # keep Python from complaining again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
