"""``refsched soak``: random DAGs through real worker processes under random kills and pauses.

Each run makes a fresh SQLite store that records its history (with one of ``agings``, by the
seed: :data:`JUDGED_AGINGS` unless told, and with ``refsched soak`` :data:`SOAK_AGINGS`),
submits a random DAG of tasks that sleep a little, some with a priority and some with a delay,
starts worker processes, and while they work sends random faults: SIGKILL (the worker is
replaced by a new process); SIGSTOP, then SIGCONT after a pause longer than the lease; and a
pause of every worker at once, the victim resumed first and the others a moment later, so that
the victim wakes alone to leases it lost and re-claims its own versions (a self re-claim: its
lost attempt and the new one run side by side in one process). When every version has ended,
the run is judged:

- the recorded history is a behaviour of the spec (:mod:`refsched.verify.durable.history`:
  the lease rules step by step, the scheduler part through the refinement mapping, and each
  claim's due times and claim order in the store's seconds, ``ClaimsOnlyDue`` and
  ``ClaimsInKeyOrder``), ending in the store's own state;
- the store's invariants hold (``check_invariants()``);
- every version succeeded (the runs give enough attempts for the faults they send), with one
  accepted end each.

Exit codes: 0 every run passed, 1 a run failed (its store is kept and named), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refsched.arguments import positive_int
from refsched.durable.scheduler import AGING, DurableScheduler
from refsched.errors import SchedulerError
from refsched.verify.durable.history import HistoryCheck, check_history

__all__ = ["JUDGED_AGINGS", "SOAK_AGINGS", "RunReport", "main", "self_reclaims", "soak_run"]

#: The agings of a run whose history TLC judges too (``refsched verify``, ``refsched mutants``):
#: the default, under which no version of a run's few seconds gains a level, and strict
#: priority. TLC places a wall clock's ticks itself, so it cannot judge a claim order that
#: the seconds between versions change (``validate_history`` refuses such a history).
JUDGED_AGINGS: tuple[float | None, ...] = (AGING, None)

#: ``refsched soak``'s agings, judged by the run's own history check alone, in the store's
#: seconds: one level a second too, under which a run's delays reorder its claims.
SOAK_AGINGS: tuple[float | None, ...] = (*JUDGED_AGINGS, 1.0)


@dataclass
class RunReport:
    seed: int
    tasks: int
    store: str
    kills: int = 0
    pauses: int = 0
    reclaims: int = 0
    self_reclaims: int = 0  # Reclaims by the worker whose lease of that version expired
    refused: int = 0
    delayed: int = 0  # versions submitted with a delay
    prioritised: int = 0  # versions submitted with a priority other than 0
    aging: float | None = AGING  # the store's: seconds per priority level; None, strict
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    # the history check's own: steps the spec does not allow (among ``problems`` too)
    spec_problems: list[str] = field(default_factory=list)


def _worker(url: str, lease: float, name: str) -> subprocess.Popen[bytes]:
    # Each report its own transaction (--report-delay 0): TLC validates these histories within
    # its bound; a history of batched reports (the steps of a batch share one time) did not
    # finish within 300 s in one run, and is not judged here.
    return subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url,
                             "--lease", str(lease), "--poll", "0.05", "--name", name,
                             "--concurrency", "2", "--report-delay", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def soak_run(seed: int, folder: Path, *, tasks: int = 20, workers: int = 3, lease: float = 0.5,
             faults: bool = True, timeout: float = 120.0,
             agings: Sequence[float | None] = JUDGED_AGINGS) -> RunReport:
    """One run (see the module docstring); ``problems`` is empty when it passed."""
    rng = random.Random(seed)
    url = f"sqlite:///{folder / f'soak-{seed}.db'}"
    report = RunReport(seed, tasks, url)
    report.aging = rng.choice(agings)
    db = DurableScheduler(url, max_concurrency=rng.randint(1, 3), max_attempts=50, record=True,
                          aging=report.aging)
    for i in range(tasks):
        deps = rng.sample([f"t{j}" for j in range(i)], k=min(i, rng.randint(0, 3)))
        # One task in five outlives its lease: a re-claimed attempt of it lives only on its
        # worker's heartbeats, which is what a self re-claim puts to the test.
        seconds = (rng.uniform(0.02, 0.3) if rng.random() < 0.8
                   else rng.uniform(lease * 1.5, lease * 2.5))
        # Some versions come due later than they are ready, and claims choose among priorities.
        priority = rng.choice((0, 0, 0, 1, 2, -1))
        delay = round(rng.uniform(0.2, 2.0), 3) if rng.random() < 0.3 else 0.0
        report.prioritised += priority != 0
        report.delayed += delay > 0
        db.submit(f"t{i}", deps, fn="refsched.durable.jobs:sleep",
                  args={"seconds": round(seconds, 3)}, priority=priority, delay=delay)
    db.start()
    began = time.monotonic()
    procs = [_worker(url, lease, f"w{k}") for k in range(workers)]
    called = [f"w{k}" for k in range(workers)]  # called[k]: the name procs[k] claims under
    names = workers
    try:
        while not db.done():
            if time.monotonic() - began > timeout:
                report.problems.append(f"not done after {timeout} s")
                break
            time.sleep(rng.uniform(0.05, 0.4))
            if not faults or rng.random() < 0.4:
                continue
            k = rng.randrange(len(procs))
            victim = procs[k]
            fault = rng.random()
            if fault < 0.4:
                victim.kill()
                victim.wait()
                report.kills += 1
                procs[k] = _worker(url, lease, f"w{names}")
                called[k] = f"w{names}"
                names += 1
            elif fault < 0.7:
                # The victim is a worker running something, if any is: its leases to lose.
                holders = {v.holder for v in db.leases().values() if v.holder is not None}
                running = [i for i, name in enumerate(called) if name in holders]
                victim = procs[rng.choice(running)] if running else victim
                for p in procs:
                    os.kill(p.pid, signal.SIGSTOP)
                time.sleep(rng.uniform(lease * 1.5, lease * 3))
                os.kill(victim.pid, signal.SIGCONT)
                time.sleep(lease / 2)  # the victim alone: its claim may come before its beat
                for p in procs:
                    if p is not victim:
                        os.kill(p.pid, signal.SIGCONT)
                report.pauses += 1
            else:
                os.kill(victim.pid, signal.SIGSTOP)
                time.sleep(rng.uniform(lease * 1.2, lease * 3))
                os.kill(victim.pid, signal.SIGCONT)
                report.pauses += 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                _, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            report.refused += (err or b"").count(b"report refused")
    report.seconds = time.monotonic() - began
    history = db.history()
    check = check_history(db.timed_history(), max_concurrency=db.max_concurrency,
                          max_attempts=db.max_attempts, aging=db.aging, final=db.snapshot())
    report.spec_problems = list(check.problems)
    report.problems += check.problems
    report.reclaims = sum(1 for action, _ in history if action == "Reclaim")
    report.self_reclaims = self_reclaims(history, db.max_concurrency, db.max_attempts)
    try:
        db.check_invariants()
    except AssertionError as e:
        report.problems.append(str(e))
    snapshot = db.snapshot()
    not_done = sorted(str(t) for t, v in snapshot.tasks.items() if v.state.value != "succeeded")
    if not_done:
        report.problems.append(f"not succeeded: {', '.join(not_done[:10])}")
    if any(n != 1 for n in check.ends.values()) or len(check.ends) != tasks:
        report.problems.append("a version does not have exactly one accepted end")
    db.release()
    return report


def self_reclaims(history: Sequence[tuple[str, dict[str, Any]]], max_concurrency: int,
                  max_attempts: int) -> int:
    """The Reclaims in ``history`` by the worker that held the version's expired lease."""
    check = HistoryCheck(max_concurrency, max_attempts)
    last: dict[str, str] = {}  # task -> the worker that took its latest attempt
    found = 0
    for action, params in history:
        if action == "Reclaim" and last.get(params["t"]) == params["w"]:
            found += 1
        check.step(action, params)
        for t, lease in check.leases.items():
            if lease.holder is not None:
                last[t] = lease.holder
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="refsched soak",
        description="Random DAGs through real worker processes under SIGKILL and "
                    "SIGSTOP/SIGCONT; every recorded history is checked against the spec. "
                    "Exit codes: 0 every run passed, 1 a run failed, 2 usage error.")
    parser.add_argument("--runs", type=positive_int, default=3, metavar="N",
                        help="runs (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed (default 1)")
    parser.add_argument("--tasks", type=positive_int, default=20, metavar="N",
                        help="tasks per run (default 20)")
    parser.add_argument("--workers", type=positive_int, default=3, metavar="N",
                        help="worker processes (default 3)")
    parser.add_argument("--no-faults", action="store_true", help="send no signals")
    parser.add_argument("--keep", metavar="DIR", help="keep every store in DIR")
    args = parser.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="refsched-soak-"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"--keep {args.keep}: {e}")
    failed = 0
    totals = RunReport(0, 0, "")
    try:
        for seed in range(args.seed, args.seed + args.runs):
            try:
                r = soak_run(seed, folder, tasks=args.tasks, workers=args.workers,
                             faults=not args.no_faults, agings=SOAK_AGINGS)
            except SchedulerError as e:
                print(f"refsched soak: {e}", file=sys.stderr)
                return 2
            verdict = "ok" if not r.problems else "FAILED"
            aging = "strict priority" if r.aging is None else f"aging {r.aging:g} s"
            print(f"run seed={seed}: {r.tasks} tasks ({r.prioritised} with a priority, "
                  f"{r.delayed} delayed, {aging}), {r.kills} kills, {r.pauses} pauses, "
                  f"{r.reclaims} reclaims ({r.self_reclaims} by the worker that lost the "
                  f"lease), {r.refused} refused reports, {r.seconds:.1f} s: {verdict}",
                  flush=True)
            for problem in r.problems[:5]:
                print(f"  {problem}")
            if r.problems:
                failed += 1
                print(f"  store kept: {r.store}")
            for name in ("tasks", "kills", "pauses", "reclaims", "self_reclaims", "refused"):
                setattr(totals, name, getattr(totals, name) + getattr(r, name))
    finally:
        if not args.keep and not failed:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"refsched soak: {args.runs - failed} of {args.runs} runs passed; {totals.tasks} "
          f"tasks, {totals.kills} kills, {totals.pauses} pauses, {totals.reclaims} reclaims "
          f"({totals.self_reclaims} self re-claims), {totals.refused} refused reports")
    return 1 if failed else 0
