"""The ``refsched`` command line.

``refsched verify`` model-checks ``spec/MCScheduler`` with TLC (every invariant and action
property, then liveness) and runs the lock-step check of the production TaskScheduler against the
reference model, showing progress and ending with a summary. Exit status 0 when every check
passed, 1 when one failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import refsched

CHECK_CONFIGS = (
    ("safety", "MCScheduler.cfg"),
    ("liveness", "MCSchedulerLiveness.cfg"),
)


@dataclass
class Outcome:
    """One check's line in the summary."""

    name: str
    ok: bool
    detail: str
    seconds: float


class Progress:
    """A one-line progress display on a terminal; occasional plain lines elsewhere (CI logs)."""

    def __init__(self, stream: TextIO, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.live = stream.isatty() and not os.environ.get("CI")
        self._last = 0.0
        self._width = 0

    def update(self, text: str, force: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.live:
            if force or now - self._last > 0.1:
                line = text[:100]
                self.stream.write("\r" + line.ljust(self._width))
                self._width = len(line)
                self.stream.flush()
                self._last = now
        elif force or now - self._last > 10.0:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last = now

    def done(self, text: str) -> None:
        if self.live and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()


def _run_tlc_check(label: str, config: str, workers: int, progress: Progress) -> Outcome:
    from refsched.verify import tlc

    started = time.monotonic()

    def on_line(line: str) -> None:
        if line.startswith(("Progress", "Computing", "Starting", "Checking", "Finished")):
            progress.update(f"  TLC {label}: {line.strip()}", force=line.startswith("Progress"))

    try:
        # -deadlock: a scheduler closed before any submission has no successor, and that is
        # not an error (TLC 2.15 has no CHECK_DEADLOCK keyword for the config).
        result = tlc.run_tlc(config, "MCScheduler.tla", workers=workers,
                             extra_args=["-deadlock"], on_line=on_line)
    except (tlc.TLCNotFoundError, FileNotFoundError) as e:
        return Outcome(f"TLC {label}", False, str(e), time.monotonic() - started)
    seconds = time.monotonic() - started
    if result.ok:
        detail = (f"{result.distinct_states:,} distinct states, "
                  f"{result.states_generated:,} generated, depth {result.depth}")
        return Outcome(f"TLC {label} ({config})", True, detail, seconds)
    what = (f"{result.violation_kind} {result.violated} violated" if result.violated
            else result.violation_kind or "TLC reported an error")
    return Outcome(f"TLC {label} ({config})", False,
                   f"{what}\n{result.trace or result.output[-3000:]}", seconds)


def load_factory(spec: str) -> Callable[[int], Any]:
    """``module:attribute`` -> the callable it names (a scheduler class or factory)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"--impl {spec!r}: expected MODULE:FACTORY, e.g. refsched:TaskScheduler")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--impl {spec!r}: cannot import {module_name!r}: {e}") from e
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"--impl {spec!r}: {module_name!r} has no {attribute!r}") from None
    if not callable(target):
        raise ValueError(f"--impl {spec!r}: {attribute!r} is not callable")
    return target  # type: ignore[no-any-return]


def _run_lockstep(factory: Callable[[int], Any], name: str, examples: int,
                  progress: Progress) -> Outcome:
    from refsched.verify.lockstep import Ledger, run_lockstep

    started = time.monotonic()
    ledger = Ledger()
    label = f"lock-step model vs {name}"

    def on_example() -> None:
        progress.update(f"  lock-step: example {ledger.examples + 1} (of at least {examples}), "
                        f"{ledger.calls:,} calls")

    try:
        run_lockstep(factory, examples=examples, on_example=on_example, ledger=ledger)
    except Exception as e:  # the shrunk failing sequence is in the exception and its notes
        detail = "".join(traceback.format_exception_only(type(e), e))
        notes = "\n".join(getattr(e, "__notes__", []))
        return Outcome(label, False, f"disagreement found\n{detail}{notes}",
                       time.monotonic() - started)
    detail = (f"{ledger.examples} examples, snapshots equal after every call"
              f"\n  {ledger.summary()}")
    missing = ledger.missing()
    if missing:  # not a disagreement, but a weaker check than it should be
        detail += f"\n  note: never exercised: {', '.join(missing)} (run more --examples)"
    return Outcome(label, True, detail, time.monotonic() - started)


def cmd_verify(args: argparse.Namespace) -> int:
    progress = Progress(sys.stderr, quiet=args.quiet)
    checks: list[Callable[[], Outcome]] = []
    if not args.skip_tlc:
        for label, config in CHECK_CONFIGS:
            if label == "liveness" and args.skip_liveness:
                continue
            checks.append(functools.partial(_run_tlc_check, label, config, args.workers,
                                            progress))
    if args.examples > 0:
        try:
            factory = load_factory(args.impl)
        except ValueError as e:
            print(f"refsched verify: {e}", file=sys.stderr)
            return 2
        checks.append(functools.partial(_run_lockstep, factory, args.impl, args.examples,
                                        progress))
    outcomes: list[Outcome] = []
    for check in checks:
        outcome = check()
        outcomes.append(outcome)
        mark = "ok  " if outcome.ok else "FAIL"
        first, _, rest = outcome.detail.partition("\n")
        progress.done(f"{mark} {outcome.name}: {first} [{outcome.seconds:.1f}s]")
        if rest:
            sys.stderr.write(rest + "\n")
        if not outcome.ok and args.fail_fast:
            break
    passed = sum(o.ok for o in outcomes)
    if not outcomes:
        print("refsched verify: nothing to check (--skip-tlc with --examples 0)", file=sys.stderr)
        return 2
    total_seconds = sum(o.seconds for o in outcomes)
    print(f"refsched verify: {passed} of {len(outcomes)} checks passed "
          f"in {total_seconds:.1f}s")
    return 0 if outcomes and passed == len(outcomes) else 1


def _graph_progress(progress: Progress) -> Callable[[str], None]:
    def on_line(line: str) -> None:
        if line.startswith(("Progress", "Computing", "Starting", "Finished")):
            progress.update(f"  TLC: {line.strip()}")
    return on_line


def cmd_traces(args: argparse.Namespace) -> int:
    from refsched.verify import corpus, stategraph

    progress = Progress(sys.stderr, quiet=args.quiet)
    started = time.monotonic()
    progress.update(f"  TLC: dumping the state graph of spec/{stategraph.TRACES_CONFIG}",
                    force=True)
    try:
        graph = stategraph.tlc_graph(workers=args.workers, on_line=_graph_progress(progress))
    except stategraph.GraphMismatch as e:
        progress.done(f"FAIL model = spec: {e}")
        return 1
    progress.done(f"ok   model = spec: {graph.state_count:,} states and {graph.edge_count:,} "
                  f"labelled edges, the same in TLC's graph and the model's "
                  f"[{time.monotonic() - started:.1f}s]")
    directory = Path(args.output) if args.output else None
    if args.check:
        try:
            check = corpus.check_corpus(graph, directory)
        except corpus.CorpusMismatch as e:
            progress.done(f"FAIL corpus: {e}")
            return 1
        m = check.manifest
        progress.done(f"ok   corpus: {corpus.traces_dir() if directory is None else directory} "
                      f"is current: {m['traces']:,} traces, {m['steps']:,} steps covering "
                      f"{m['edges']:,} edges")
        return 0
    manifest = corpus.write_corpus(graph, directory)
    where = directory or corpus.traces_dir()
    size = (where / corpus.BUNDLE).stat().st_size
    progress.done(f"wrote {where / corpus.BUNDLE}: {manifest['traces']:,} traces, "
                  f"{manifest['steps']:,} steps covering all {manifest['edges']:,} edges "
                  f"({size / 1e6:.1f} MB) [{time.monotonic() - started:.1f}s]")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsched",
        description="Formally modelled reference task schedulers and the checks that they agree.")
    parser.add_argument("--version", action="version", version=f"refsched {refsched.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    verify = commands.add_parser(
        "verify",
        help="model-check the spec with TLC and check the implementation against the model",
        description="Model-check spec/MCScheduler with TLC (safety, then liveness) and run the "
                    "lock-step check of the production TaskScheduler against the reference model.")
    verify.add_argument("--examples", type=int, default=500, metavar="N",
                        help="lock-step examples to run (default 500; 0 skips the check)")
    verify.add_argument("--impl", default="refsched:TaskScheduler", metavar="MODULE:FACTORY",
                        help="the implementation the model is checked against: a callable "
                             "taking max_concurrency (default refsched:TaskScheduler)")
    verify.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="TLC worker threads (default: one per core)")
    verify.add_argument("--skip-tlc", action="store_true", help="skip model checking")
    verify.add_argument("--skip-liveness", action="store_true",
                        help="skip the liveness check (the slowest TLC run)")
    verify.add_argument("--fail-fast", action="store_true", help="stop at the first failed check")
    verify.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    verify.set_defaults(handler=cmd_verify)

    traces = commands.add_parser(
        "traces",
        help="check model = spec on TLC's state graph and write the edge-covering trace corpus",
        description="Dump TLC's state graph of spec/MCSchedulerTraces.cfg, check that a "
                    "breadth-first search of the reference model yields exactly its states and "
                    "labelled edges, and write traces that cover every edge to traces/ "
                    "(ITF, one trace per line, gzipped) with a MANIFEST.json.")
    traces.add_argument("--check", action="store_true",
                        help="write nothing; fail unless the committed corpus is current")
    traces.add_argument("-o", "--output", metavar="DIR",
                        help="the corpus folder (default: traces/ beside spec/)")
    traces.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="TLC worker threads (default: one per core)")
    traces.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    traces.set_defaults(handler=cmd_traces)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("refsched: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
