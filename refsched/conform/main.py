"""``refsched conform``: judge a scheduler implementation against the reference model.

::

    refsched conform [--system NAME] [options] -- COMMAND [ARGS...]   # a program
    refsched conform [--system NAME] [options] --impl MODULE:FACTORY    # a Python factory
    refsched conform --export-vectors OUT [--system NAME] [--traces FILE] [--max-traces N]

The report goes to stdout (``--json``: as JSON), progress to stderr (``-q``: none). Exit status:
0 the implementation conforms, 1 it diverges, 3 a harness verdict (it crashed, timed out or broke
the protocol), 2 a usage error, a corpus that cannot be read, or nothing checked (the
implementation's profile left out every call the phases would make).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refsched.arguments import non_negative_int, positive_int, positive_seconds, unwritable
from refsched.conform import probes
from refsched.conform.report import ConformanceReport
from refsched.conform.wire import SYSTEMS
from refsched.profile import profile_argument

if TYPE_CHECKING:
    from refsched.progress import Progress

__all__ = ["build_parser", "main"]

USAGE_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsched conform",
        usage="%(prog)s [--system NAME] [options] (-- COMMAND [ARGS...] | --impl "
              "MODULE:FACTORY [--profile JSON])",
        description="Check an implementation of one of refsched's systems (a dependency "
                    "scheduler, a timer scheduler, a work-stealing pool, a durable scheduler) "
                    "against its reference model: replay the system's trace corpus through it, "
                    "then drive it and the model with the same Hypothesis-generated calls. On a "
                    "divergence, print the shortest sequence of calls found that shows it (shrunk "
                    "by Hypothesis, then by ddmin until no call can go), as the protocol's "
                    "requests and answers.",
        epilog="Exit status: 0 conforms, 1 diverges, 3 the implementation crashed (for "
               "--impl: its factory raised), timed out or broke the protocol, 2 usage error "
               "or nothing checked (the profile left out every call the phases would make).")
    parser.add_argument("--system", choices=SYSTEMS, default=SYSTEMS[0],
                        help="the system the implementation implements (default: scheduler); "
                             "a COMMAND must declare the same in its hello")
    parser.add_argument("--examples", type=non_negative_int, default=None, metavar="N",
                        help="generated examples (default 200, with --traces 0; 0 skips the "
                             "generated phase)")
    parser.add_argument("--steps", type=positive_int, default=40, metavar="N",
                        help="calls per generated example, at most (default 40)")
    parser.add_argument("--no-clauses", action="store_true",
                        help="skip the clauses phase, which asks each clause of the contract on "
                             "purpose after the other two (skipped with --traces)")
    parser.add_argument("--no-corpus", action="store_true",
                        help="skip the replay of the trace corpus")
    parser.add_argument("--max-traces", type=positive_int, metavar="N",
                        help="replay only the corpus's first N traces (default: all of them)")
    parser.add_argument("--traces", metavar="FILE",
                        help="replay only the traces of FILE in the corpus phase: an .itf.json "
                             "file, a .jsonl / .jsonl.gz bundle (as --trace-out writes them) or "
                             "a test-vectors file")
    parser.add_argument("--export-vectors", metavar="OUT",
                        help="write test vectors to OUT instead of checking: the corpus (or "
                             "the --traces) as request lines and the model's answers, from "
                             "refsched's own server (--max-traces N: the first N traces)")
    parser.add_argument("--all-divergences", "--keep-going", action="store_true",
                        dest="all_divergences",
                        help="replay the whole corpus after a divergence and keep the shortest "
                             "diverging prefix (default: stop at the first diverging trace, "
                             "the shortest traces replayed first)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="the generated phase's seed (default 0: the same run every time)")
    parser.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                        help="how long COMMAND may take to answer one request (default: the "
                             "client's, 10 s)")
    parser.add_argument("--trace-out", metavar="FILE",
                        help="write the counterexample's spec steps as ITF: an .itf.json file, "
                             "or a .jsonl / .jsonl.gz bundle")
    parser.add_argument("--picture", metavar="FILE",
                        help="draw the state at the first difference, as the model and the "
                             "implementation see it, side by side, as SVG (needs Graphviz's "
                             "dot; without it the DOT source goes to FILE.dot)")
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON on stdout")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--impl", metavar="MODULE:FACTORY",
                        help="check a Python factory in this process instead of a COMMAND: "
                             "max_concurrency -> scheduler, or a class with the API of the "
                             "system's production class (TimerScheduler, WorkStealingPool, "
                             "DurableScheduler)")
    parser.add_argument("--profile", metavar="JSON",
                        help="with --impl: the parts of the contract it keeps, a JSON object "
                             "of the system's profile flags (default: the full contract)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                        help="the implementation's command line, after --")
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The arguments, checked together; a usage error exits with status 2."""
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if args.export_vectors is not None:
        from refsched.conform.vectors import check_export_arguments
        check_export_arguments(parser, args)
        return args
    if args.examples is None:  # a file of traces is replayed alone unless asked otherwise
        args.examples = 0 if args.traces else 200
    if bool(args.command) == bool(args.impl):
        parser.error("give either -- COMMAND [ARGS...] or --impl MODULE:FACTORY")
    if args.profile is not None and not args.impl:
        parser.error("--profile goes with --impl: a COMMAND declares its profile itself")
    if args.timeout is not None and not args.command:
        parser.error("--timeout goes with a COMMAND")
    # the clauses phase: each system with probes of its own (refsched/conform/<system>/probes.py)
    args.clauses = (not args.no_clauses and args.traces is None
                    and probes.has_probes(args.system))
    if args.no_corpus and args.examples == 0 and not args.clauses:
        parser.error("nothing to check: --no-corpus and --examples 0"
                     + (" and --no-clauses" if args.no_clauses else ""))
    if args.no_corpus and args.traces is not None:
        parser.error("--traces goes with the corpus phase, not --no-corpus")
    if args.no_corpus and args.all_divergences:
        parser.error("--all-divergences goes with the corpus phase, not --no-corpus")
    if args.no_corpus and args.max_traces is not None:
        parser.error("--max-traces goes with the corpus phase, not --no-corpus")
    if args.picture is not None:  # known before the check, which may take minutes
        problem = unwritable(Path(args.picture))
        if problem is not None:
            parser.error(f"--picture: cannot write {args.picture}: {problem}")
    args.traces_read = None
    if args.traces is not None:  # read before the implementation starts
        from refsched.conform.vectors import traces_argument
        args.traces_read = traces_argument(parser, args.traces, args.system)
    try:
        args.profile_value = profile_argument(args.system, args.profile)
    except ValueError as e:  # a ProfileError, or a profile's own check
        parser.error(f"--profile: {e}")
    return args


def _write_trace(report: ConformanceReport, path: str) -> str:
    """Write the counterexample's trace to ``path``; what to tell the user."""
    from refsched.verify.itf import trace_to_itf, write_traces

    if report.counterexample is None:
        return f"no counterexample: {path} not written"
    trace = report.counterexample.trace
    if trace is None:
        return (f"the counterexample's calls form no trace of the spec (a timer's clock moved "
                f"by a fraction of a tick, or back): {path} not written")
    out = Path(path)
    if ".jsonl" in out.name:
        write_traces(out, [trace])
    else:
        out.write_text(json.dumps(trace_to_itf(trace), indent=1) + "\n", encoding="utf-8")
    return (f"wrote {out}: the counterexample's {len(trace.steps)} spec steps "
            f"(refsched replay {out}; refsched validate-trace {out})")


def _crash_on_raise(spec: str, factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory``, an exception from which is the implementation crashing (exit 3), as a
    COMMAND that exits: it is no answer to compare with the model's. An error of
    :mod:`refsched.errors` is the factory refusing its arguments, as ``new`` may: an answer."""
    from refsched.conform import client
    from refsched.errors import SchedulerError

    def new(*args: Any, **kwargs: Any) -> Any:
        try:
            return factory(*args, **kwargs)
        except SchedulerError:  # a refusal (a negative max_concurrency): an answer, compared
            raise
        except (Exception, SystemExit) as error:
            shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
            raise client.ImplementationCrashed(
                f"new({shown}): the factory {spec} raised "
                f"{type(error).__name__}: {error}") from error
    new.__wrapped__ = factory  # type: ignore[attr-defined]  # a pool class stays visible
    return new


def _run(args: argparse.Namespace) -> int:
    from refsched.conform import client, oracle
    from refsched.progress import Progress

    display = Progress(sys.stderr, quiet=args.quiet or args.json)
    shown_phase = ""

    def progress(phase: str, done: int, total: int) -> None:
        nonlocal shown_phase
        unit = "traces" if phase == "corpus" else "examples"
        display.update(f"  {phase}: {done:,} of {total:,} {unit}", force=phase != shown_phase)
        shown_phase = phase

    impl: Any
    if args.impl:
        try:
            factory = client.load_factory(args.impl)
        except ValueError as e:
            print(f"refsched conform: {e}", file=sys.stderr)
            return USAGE_ERROR
        impl = client.InProcessImplementation(_crash_on_raise(args.impl, factory),
                                              profile=args.profile_value, name=args.impl,
                                              system=args.system)
    else:
        options = {} if args.timeout is None else {"timeout": args.timeout}
        impl = client.ProtocolImplementation(args.command, system=args.system, **options)
        started = time.monotonic()
        try:
            impl.open()
        except client.HarnessError as error:  # before the hello's answer: no name, no profile
            report = oracle.harness_failure(shlex.join(args.command), error)
            report.seconds = time.monotonic() - started
            return _finish(report, args, display)
    try:
        report = oracle.check(impl, examples=args.examples, steps=args.steps,
                              corpus=not args.no_corpus, seed=args.seed, progress=progress,
                              max_traces=args.max_traces, traces=args.traces_read,
                              all_divergences=args.all_divergences, clauses=args.clauses)
    except oracle.OracleError as e:
        display.done(f"refsched conform: {e}")
        return USAGE_ERROR
    return _finish(report, args, display)


def _finish(report: ConformanceReport, args: argparse.Namespace, display: Progress) -> int:
    if not display.quiet:
        display.done(f"  {report.implementation}: {report.verdict} [{report.seconds:.1f}s]")
    if args.trace_out:
        message = _write_trace(report, args.trace_out)
        if not args.quiet:
            print(message, file=sys.stderr)
    if args.picture:
        from refsched.conform import picture

        message = (f"no counterexample: {args.picture} not written"
                   if report.counterexample is None
                   else picture.write_picture(report.counterexample, args.picture))
        # without dot the picture is not what was asked for: said even with -q
        if not args.quiet or (report.counterexample is not None and not picture.can_render()):
            print(message, file=sys.stderr)
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report.format())
    return report.exit_status


def main(argv: Sequence[str] | None = None) -> int:
    """``refsched conform``: the exit status (0 conforms, 1 diverges, 3 harness, 2 usage).

    Called by ``refsched.cli.main``, which handles an interrupt and a closed stdout as it does
    for every command.
    """
    args = _parse(build_parser(), list(sys.argv[1:] if argv is None else argv))
    if args.export_vectors is not None:
        from refsched.conform.vectors import export_command
        return export_command(args)
    return _run(args)


if __name__ == "__main__":
    from refsched.cli import main as cli_main

    sys.exit(cli_main(["conform", *sys.argv[1:]]))
