"""``python -m refsched.explore [SCENARIO ...] [--replay ID]``: explore scenarios or replay one.

With no scenario every one in ``SCENARIOS`` is explored and reported on one line each; the exit
status is 1 if any failed. ``--replay ID`` re-runs one scenario under one schedule and prints its
steps. ``main(argv)`` is the same, callable.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from threading import TIMEOUT_MAX

from refsched.arguments import non_negative_int, positive_int
from refsched.explore.dag.scenarios import SCENARIOS
from refsched.explore.search import (
    STRATEGIES,
    ExploreConfig,
    ExploreReport,
    ScheduleMismatch,
    compare_reduction,
    explore,
    replay,
)

__all__ = ["main"]


def _bound(text: str) -> int | None:
    if text.lower() in ("none", "inf", "unbounded"):
        return None
    return non_negative_int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsched explore",
        description="Explore the thread interleavings of refsched's scenarios under a controlled "
                    "runtime: every schedule within the bounds (depth first, with partial-order "
                    "reduction), "
                    "or sampled ones (random, PCT). Bounds not given come from REFSCHED_* "
                    "environment variables.",
        epilog="Exit status: 0 every scenario clean (or the replayed schedule clean), 1 a "
               "scenario failed, 2 usage error (a bad option or environment bound, an unknown "
               "scenario, a schedule ID that does not fit). Scenarios that check TLC's state "
               "graph start TLC; SIGINT, SIGTERM or SIGHUP kill it with this process.")
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help="scenarios to explore (default: all): " + ", ".join(SCENARIOS))
    parser.add_argument("--replay", metavar="ID",
                        help="re-run the one SCENARIO under schedule ID and print its steps")
    parser.add_argument("--strategy", choices=STRATEGIES, help="dfs (default), random or pct")
    parser.add_argument("--max-preemptions", type=_bound, metavar="N", default=argparse.SUPPRESS,
                        help="preemption bound for dfs, or 'none' (REFSCHED_MAX_PREEMPTIONS)")
    parser.add_argument("--max-schedules", type=positive_int, metavar="N",
                        help="runs per scenario at most (REFSCHED_MAX_SCHEDULES)")
    parser.add_argument("--max-steps", type=positive_int, metavar="N",
                        help="operations per run at most (REFSCHED_MAX_STEPS)")
    parser.add_argument("--seed", type=int, help="seed of random and pct (REFSCHED_SEED)")
    parser.add_argument("--no-reduction", action="store_true",
                        help="explore without partial-order reduction (REFSCHED_REDUCTION=0)")
    parser.add_argument("--compare", action="store_true",
                        help="explore depth first with and without the reduction, side by side")
    parser.add_argument("--list", action="store_true", help="list the scenarios and stop")
    return parser


def _config(args: argparse.Namespace) -> ExploreConfig:
    """The environment's bounds, overridden by the options given."""
    given: dict[str, object] = {}
    for name in ("strategy", "max_schedules", "max_steps", "seed"):
        value = getattr(args, name)
        if value is not None:
            given[name] = value
    if hasattr(args, "max_preemptions"):  # given: 'none' is a value, not an absence
        given["max_preemptions"] = args.max_preemptions
    if args.no_reduction:
        given["reduction"] = False
    return ExploreConfig().replace(**given)


def _row(report: ExploreReport) -> str:
    outcome = "clean" if report.ok else f"FAILED: {report.failures[0].kind}"
    return (f"{report.scenario:<24} {report.schedules:>9} {len(report.traces):>7} "
            f"{report.pruned:>7} {report.executions:>7}  {report.coverage:<9} "
            f"{report.seconds:>7.2f}  {outcome}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 clean, 1 a failure, 2 bad usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for name, s in SCENARIOS.items():
            print(f"{name:<24} {' '.join(s.description.split())}")
        return 0
    unknown = [n for n in args.scenarios if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    try:
        config = _config(args)
    except ValueError as exc:
        parser.error(str(exc))
    if not (math.isfinite(config.run_timeout) and 0 < config.run_timeout <= TIMEOUT_MAX):
        parser.error(f"REFSCHED_RUN_TIMEOUT={config.run_timeout!r}: must be a positive number "
                     "of seconds")
    if args.replay is not None:
        if len(args.scenarios) != 1:
            parser.error("--replay needs exactly one SCENARIO")
        try:
            result = replay(SCENARIOS[args.scenarios[0]], args.replay, config)
        except (ValueError, ScheduleMismatch) as exc:
            print(f"cannot replay: {exc}", file=sys.stderr)
            return 2
        if result.failure is not None:
            print(result.failure.report(max_steps=len(result.steps)))
            return 1
        print(f"{result.scenario}, schedule {result.schedule_id}: clean, {len(result.steps)} "
              f"steps, {result.preemptions} preemptions")
        for step in result.steps:
            print(step)
        return 0
    names = args.scenarios or list(SCENARIOS)
    failed = False
    header = (f"{'scenario':<24} {'schedules':>9} {'traces':>7} {'pruned':>7} {'runs':>7}  "
              f"{'coverage':<9} {'seconds':>7}  result")
    print(f"{config}\n{header}")
    for name in names:
        reports: tuple[ExploreReport, ...]
        if args.compare:
            reports = compare_reduction(SCENARIOS[name], config)
            for label, report in zip(("reduced", "full"), reports, strict=True):
                print(f"{_row(report)}  [{label}]")
        else:
            reports = (explore(SCENARIOS[name], config),)
            print(_row(reports[0]))
        for report in reports:
            if report.failures:
                failed = True
                print(report.failures[0].report(), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    # Through the command line's entry: interrupts and signals end the run (and its TLC).
    from refsched.cli import main as cli_main

    sys.exit(cli_main(["explore", *sys.argv[1:]]))
