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
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import refsched
from refsched.verify.checks import Outcome

CHECK_CONFIGS = (
    ("safety", "MCScheduler.cfg"),
    ("liveness", "MCSchedulerLiveness.cfg"),
)


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


def _print_table(outcomes: list[Outcome], stream: TextIO) -> None:
    """The summary: one row per check, its verdict, its first line of figures, its time."""
    width = max(len(o.name) for o in outcomes)
    for o in outcomes:
        first = o.detail.partition("\n")[0]
        stream.write(f"  {o.name.ljust(width)}  {'ok  ' if o.ok else 'FAIL'}  "
                     f"{o.seconds:6.1f}s  {first}\n")


def cmd_verify(args: argparse.Namespace) -> int:
    from refsched.verify import checks

    progress = Progress(sys.stderr, quiet=args.quiet or args.json)
    session = checks.Session(workers=args.workers, report=progress.update)
    plan: list[Callable[[], Outcome]] = []
    if not args.skip_tlc:
        for label, config in CHECK_CONFIGS:
            if label == "liveness" and args.skip_liveness:
                continue
            plan.append(functools.partial(checks.tlc_check, session, label, config))
        plan.append(functools.partial(checks.model_equals_spec, session))
        plan.append(functools.partial(checks.corpus_check, session))
    if args.examples > 0:
        try:
            factory = load_factory(args.impl)
        except ValueError as e:
            print(f"refsched verify: {e}", file=sys.stderr)
            return 2
        plan.append(functools.partial(checks.lockstep_check, session, factory, args.impl,
                                      args.examples))
    if not plan:
        print("refsched verify: nothing to check (--skip-tlc with --examples 0)", file=sys.stderr)
        return 2
    outcomes: list[Outcome] = []
    for check in plan:
        outcome = check()
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
    total_seconds = sum(o.seconds for o in outcomes)
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
    verify.add_argument("--json", action="store_true",
                        help="print the results as JSON on stdout (no progress display)")
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
