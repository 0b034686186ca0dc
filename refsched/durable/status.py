"""The durable store's commands for people and scripts: ``refsched status``, ``jobs``, ``show``,
``retry`` and ``cancel``, each with ``--db URL`` and ``--json``.

``status``: counts by state, the live leases (worker, attempt, seconds left on the store's
clock), the ready versions not yet due (seconds left, priority), the versions whose lease ran
out, the blocked and failed versions with their causes, and the provenance of the blocked and
cancelled versions (the first :data:`PROVENANCE_LIMIT`, in seq order: root and path).
``jobs``: one line per task id (state, generation, attempt, worker, timings, result or error).
``show ID``: everything the store keeps of one id (its due time and priority too), the
failure's traceback and the provenance of a blocked or cancelled version included.
``retry ID`` / ``cancel ID``: the spec's Retry and Cancel.
``schedules``: each recurring schedule, its next slot, and its latest slots with their decision.

Reading commands open the store read-only (a SQLite file with ``mode=ro``, a PostgreSQL session
whose transactions are read-only): they never create, migrate or write anything. Each answer is
one read transaction, the store's clock read inside it, so its figures are of one state.

Exit codes: 0 done, 1 the store refused (an unknown task id; retry of a version that is not
dead; the store closed), 2 usage or store error. Errors go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from refsched.dag.signals import OVERFLOW, DurationTail, Signals
from refsched.durable.scheduler import DurableInfo, DurableScheduler, StoreView
from refsched.errors import (
    InvalidTransitionError,
    SchedulerClosedError,
    SchedulerError,
    UnknownTaskError,
)

__all__ = ["cancel_main", "jobs", "jobs_main", "main", "retry_main", "schedules_main", "show",
           "show_main", "signals_json", "status"]

#: How much of a result or an error the text of ``status`` and ``jobs`` shows (``show`` and
#: ``--json`` give it whole).
TEXT_LIMIT = 200

#: How many blocked and cancelled versions ``status`` gives the provenance of, and how many ids
#: of a path its text shows (``show`` and ``--json`` give each path whole).
PROVENANCE_LIMIT = 20
PATH_LIMIT = 8

EXIT_CODES = ("Exit codes: 0 done, 1 the store refused (an unknown task id, a version not in a "
              "state that allows it), 2 usage or store error.")


def _cut(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """The first line of ``text``, at most ``limit`` characters, saying what was left out."""
    if text is None:
        return None
    line = text.split("\n", 1)[0]
    if len(line) > limit:
        line = line[:limit]
    left = len(text) - len(line)
    return line if not left else f"{line}... ({left} more characters: refsched show)"


def _record(v: DurableInfo) -> dict[str, Any] | None:
    """A version's provenance as JSON values (None when it has none: not blocked or
    cancelled)."""
    p = v.provenance
    if p is None:
        return None
    return {"root": p.root, "generation": p.generation, "end": p.end.value,
            "path": list(p.path), "actor": p.actor, "reason": p.reason, "time": p.time}


def _path_text(path: list[str]) -> str:
    """A provenance path, root first, at most :data:`PATH_LIMIT` ids (the first and the last
    ones, saying how many were left out)."""
    shown = [repr(x) for x in path]
    if len(shown) > PATH_LIMIT:
        head, tail = PATH_LIMIT // 2, PATH_LIMIT - PATH_LIMIT // 2
        shown = [*shown[:head], f"... ({len(shown) - PATH_LIMIT} more)", *shown[-tail:]]
    return " -> ".join(shown)


def _record_text(r: dict[str, Any]) -> str:
    """One line: the root and the path (``show`` gives the actor, the reason and the time)."""
    return (f"root {r['root']!r} (generation {r['generation']}, {r['end']}), path "
            f"{_path_text(r['path'])}")


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _version(view: StoreView, v: DurableInfo) -> dict[str, Any]:
    """One task id's current version as JSON values, whole (the text forms cut what is long)."""
    now, state = view.now, v.state.value
    return {
        "task": v.task_id, "state": state, "generation": v.generation, "attempt": v.attempts,
        "worker": v.holder, "deps": sorted(v.deps), "fn": v.fn, "args": v.args,
        "cancel_requested": v.cancel_requested, "blocked_by": v.blocked_by,
        # timings on the store's clock: waited from ready to the current attempt's claim,
        # ran from that claim to the end (or to now, while running)
        "waited_seconds": _seconds(None if v.became_ready_at is None or v.claimed_at is None
                                   else v.claimed_at - v.became_ready_at),
        "ran_seconds": _seconds(
            None if v.claimed_at is None or state in ("pending", "ready", "blocked")
            else (v.ended_at if v.ended_at is not None else now) - v.claimed_at),
        "lease_seconds_left": _seconds(None if v.deadline is None
                                       else max(0.0, v.deadline - now)),
        "result": v.result, "error": v.error, "traceback": v.traceback,
        # docs/time.md: the store-clock time it may be claimed from, and its priority
        "due": v.due, "due_in_seconds": _seconds(max(0.0, v.due - now)),
        "priority": v.priority,
        # docs/durable.md, Signals: the version's task type and tenant
        "task_type": v.task_type, "tenant": v.tenant,
        # docs/semantics.md: the deps whose edge is optional, and how each had ended when the
        # version was claimed (so far, before)
        "optional": sorted(v.optional),
        "input_summary": {d: {"generation": o.generation, "state": o.state.value,
                              "result": o.result, "error": o.error,
                              "blocked_by": o.blocked_by}
                          for d, o in sorted(v.input_summary.items())},
        # docs/durable.md: how a blocked or cancelled version came to end
        "provenance": _record(v),
    }


def status(db: DurableScheduler) -> dict[str, Any]:
    """The store's state as plain JSON values, from one read of the store (``view()``)."""
    view = db.view()
    now, settings = view.now, view.settings
    by_state: dict[str, int] = {}
    live: list[dict[str, Any]] = []
    awaiting: list[str] = []
    problems: list[dict[str, Any]] = []
    delayed: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    ended = 0  # blocked and cancelled versions: those with a record
    for v in view.versions:
        record = _record(v)
        if record is not None:
            ended += 1
            if len(records) < PROVENANCE_LIMIT:
                records.append({"task": v.task_id, "state": v.state.value, **record})
        state = v.state.value
        by_state[state] = by_state.get(state, 0) + 1
        if state == "ready" and v.due > now:  # ready, waiting for its time
            delayed.append({"task": v.task_id, "due": v.due, "priority": v.priority,
                            "seconds_left": round(v.due - now, 3)})
        if state == "running":
            if v.holder is not None and v.deadline is not None and v.deadline >= now:
                live.append({"task": v.task_id, "worker": v.holder, "attempt": v.attempts,
                             "seconds_left": round(v.deadline - now, 3)})
            else:  # no live lease, or one past its deadline that the next claim expires
                awaiting.append(v.task_id)
        elif state == "blocked":
            problems.append({"task": v.task_id, "state": "blocked",
                             "cause": f"{v.blocked_by} cannot succeed",
                             "blocked_by": v.blocked_by})
        elif state == "failed":
            problems.append({"task": v.task_id, "state": "failed", "cause": v.error,
                             "attempts": v.attempts})
    delayed.sort(key=lambda d: (d["due"], -d["priority"]))
    return {"store": db.url, "now": now, "max_concurrency": int(settings["max_concurrency"]),
            "max_attempts": int(settings["max_attempts"]), "aging": db.aging,
            "started": bool(int(settings["started"])), "closed": bool(int(settings["closed"])),
            "by_state": by_state, "live_leases": live, "awaiting_reclaim": awaiting,
            "not_yet_due": delayed,
            "problems": problems,
            # the first PROVENANCE_LIMIT blocked or cancelled versions, and how many more
            "provenance": records, "provenance_left_out": ended - len(records),
            "counters": {k[len("count:"):]: int(v) for k, v in sorted(settings.items())
                         if k.startswith("count:") and k != "count:cycles_reported"},
            # per (task type, tenant), read next (docs/durable.md, Signals)
            "signals": signals_json(db.signals())}


def _tail(d: DurationTail) -> dict[str, Any]:
    return {"count": d.count, "mean": d.mean, "p99": d.quantile(0.99), "max": d.max,
            "buckets": list(d.buckets)}


def signals_json(signals: Signals) -> list[dict[str, Any]]:
    """Each partition of ``signals`` as plain JSON values: its key (``overflow`` true for the
    partition past ``max_partitions``), its nonzero counters, its durations."""
    out = []
    for key, p in signals.partitions.items():
        where = ({"overflow": True} if key is OVERFLOW
                 else {"task_type": key[0], "tenant": key[1]})  # type: ignore[index]
        counts = {name: n for name, n in p.counters().items() if n and "." not in name}
        out.append({**where, "counters": counts, "config_errors": p.config_errors,
                    "ready_wait": _tail(p.ready_wait), "run_time": _tail(p.run_time)})
    return out


def _signals_text(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["per task type and tenant:"] if rows else []
    for r in rows:
        name = ("(overflow)" if r.get("overflow") else
                f"{r['task_type'] or '-'}/{'-' if r['tenant'] is None else r['tenant']}")
        counts = ", ".join(f"{n} {k}" for k, n in r["counters"].items())
        wait, run = r["ready_wait"], r["run_time"]
        lines.append(f"  {name}: {counts or 'nothing'}; ready wait p99 {wait['p99']:.3g} s, "
                     f"run time p99 {run['p99']:.3g} s")
    return lines


def _status_text(report: dict[str, Any]) -> str:
    lines = [f"store {report['store']}: max_concurrency {report['max_concurrency']}, "
             f"max_attempts {report['max_attempts']}, "
             + ("strict priority, " if report["aging"] is None
                else f"aging {report['aging']:g} s, ")
             + ("closed" if report["closed"] else "started" if report["started"]
                else "not started")]
    states = report["by_state"]
    lines.append("versions: " + (", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                                 or "none"))
    for lease in report["live_leases"]:
        lines.append(f"  lease {lease['task']!r}: {lease['worker']} attempt {lease['attempt']}, "
                     f"{lease['seconds_left']} s left")
    for d in report["not_yet_due"]:
        lines.append(f"  ready {d['task']!r}: due in {d['seconds_left']} s, priority "
                     f"{d['priority']}")
    for t in report["awaiting_reclaim"]:
        lines.append(f"  {t!r}: lease expired, waiting for a worker to take it over")
    for p in report["problems"]:
        lines.append(f"  {p['state']} {p['task']!r}: {_cut(p['cause'])}")
    if report["provenance"]:
        lines.append("provenance of the blocked and cancelled versions:")
    for r in report["provenance"]:
        lines.append(f"  {r['state']} {r['task']!r}: {_record_text(r)}")
    if report["provenance_left_out"]:
        lines.append(f"  ... {report['provenance_left_out']} more (refsched show ID, or "
                     "--json)")
    return "\n".join(lines)


def jobs(db: DurableScheduler, states: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every current version (of ``states`` if given), in seq order."""
    view = db.view()
    return [_version(view, v) for v in view.versions if not states or v.state.value in states]


def _jobs_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no versions"
    head = ("TASK", "STATE", "GEN", "ATTEMPT", "WORKER", "WAITED", "RAN", "RESULT OR ERROR")
    table: list[tuple[str, ...]] = [head]
    for r in rows:
        outcome: str | None = _cut(r["error"]) if r["error"] is not None else (
            f"blocked by {r['blocked_by']!r}" if r["blocked_by"] is not None
            else "" if r["result"] is None else _cut(json.dumps(r["result"])))
        table.append((repr(r["task"]), r["state"], str(r["generation"]), str(r["attempt"]),
                      r["worker"] or "-",
                      "-" if r["waited_seconds"] is None else f"{r['waited_seconds']:.3f}s",
                      "-" if r["ran_seconds"] is None else f"{r['ran_seconds']:.3f}s",
                      outcome or ""))
    widths = [min(40, max(len(row[i]) for row in table)) for i in range(len(head) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
                     + "  " + row[-1] for row in table)


def show(db: DurableScheduler, task_id: str) -> dict[str, Any]:
    """Everything the store keeps of ``task_id``'s current version, whole."""
    view = db.view(task_id)
    return _version(view, view.versions[0])


def _show_text(row: dict[str, Any]) -> str:
    lines = [f"task {row['task']!r}: {row['state']}, generation {row['generation']}, "
             f"attempt {row['attempt']}"]
    lines.append(f"  due: {row['due']} (store clock; in {row['due_in_seconds']} s), priority "
                 f"{row['priority']}")
    for key in ("task_type", "tenant", "fn", "args", "deps", "optional", "worker",
                "lease_seconds_left", "blocked_by",
                "cancel_requested", "waited_seconds", "ran_seconds"):
        if row[key] not in (None, [], {}, False):
            lines.append(f"  {key}: {row[key]}")
    if row["input_summary"]:
        lines.append("  input summary:")
        for d, o in row["input_summary"].items():
            how = (f"result {_cut(json.dumps(o['result']))}" if o["state"] == "succeeded"
                   else f"error {_cut(str(o['error']))}" if o["state"] == "failed"
                   else f"blocked by {o['blocked_by']!r}" if o["state"] == "blocked" else "")
            lines.append(f"    {d!r}: {o['state']}, generation {o['generation']}"
                         + (f", {how}" if how else ""))
    if row["result"] is not None:
        lines.append(f"  result: {json.dumps(row['result'])}")
    if row["error"] is not None:
        lines.append(f"  error: {row['error']}")
    if row["provenance"] is not None:
        r = row["provenance"]
        said = "".join(f"\n    {k}: {r[k]}" for k in ("actor", "reason") if r[k] is not None)
        lines.append(f"  provenance: root {r['root']!r} generation {r['generation']} {r['end']} "
                     f"at {_moment(r['time'])}{said}\n    path: "
                     + " -> ".join(repr(x) for x in r["path"]))
    if row["traceback"] is not None:
        lines.append("  traceback:")
        lines.extend("    " + line for line in row["traceback"].rstrip("\n").split("\n"))
    return "\n".join(lines)


def _parser(command: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"refsched {command}",
                                     description=f"{description} {EXIT_CODES}")
    parser.add_argument("--db", required=True, metavar="URL",
                        help="the store: sqlite:///path.db or "
                             "postgresql://user@host/db?schema=name")
    parser.add_argument("--json", action="store_true", help="one JSON value on stdout")
    return parser


def _task_args(command: str, description: str,
               argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments of a command that takes one task id (``show``, ``retry``, ``cancel``)."""
    parser = _parser(command, description)
    parser.add_argument("task_id", metavar="ID", help="the task id")
    return parser.parse_args(argv)


def _run(command: str, args: argparse.Namespace, read_only: bool,
         act: Callable[[DurableScheduler], tuple[Any, str]]) -> int:
    """Open the store, act, print; a refusal or a store error to stderr with its exit code."""
    try:
        with DurableScheduler(args.db, create=False, read_only=read_only) as db:
            value, text = act(db)
    except (UnknownTaskError, InvalidTransitionError, SchedulerClosedError) as e:
        print(f"refsched {command}: {e}", file=sys.stderr)
        return 1
    except SchedulerError as e:
        print(f"refsched {command}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(value, indent=2) if args.json else text)
    return 0


def _shown(read: Callable[[DurableScheduler], Any],
           render: Callable[[Any], str]) -> Callable[[DurableScheduler], tuple[Any, str]]:
    """What a reading command does: read the store, then the value and its text."""
    def act(db: DurableScheduler) -> tuple[Any, str]:
        value = read(db)
        return value, render(value)
    return act


def main(argv: Sequence[str] | None = None) -> int:
    """``refsched status``."""
    parser = _parser("status", "Show a durable store: versions by state, live leases, blocked "
                               "and failed versions with their causes (cut to "
                               f"{TEXT_LIMIT} characters; --json gives them whole).")
    parser.add_argument("--signals", action="store_true",
                        help="a line per task type and tenant too (--json always has them)")
    args = parser.parse_args(argv)

    def text(report: dict[str, Any]) -> str:
        shown = _status_text(report)
        return "\n".join([shown, *_signals_text(report["signals"])]) if args.signals else shown

    return _run("status", args, True, _shown(status, text))


def jobs_main(argv: Sequence[str] | None = None) -> int:
    """``refsched jobs``."""
    parser = _parser("jobs", "List a durable store's task ids in ready order: state, "
                             "generation, attempt, worker, time waited and run (store clock), "
                             f"result or error (cut to {TEXT_LIMIT} characters).")
    parser.add_argument("--state", action="append", default=[], metavar="STATE",
                        choices=("pending", "ready", "running", "succeeded", "failed",
                                 "blocked", "cancelled"),
                        help="only versions in STATE (repeatable)")
    args = parser.parse_args(argv)

    return _run("jobs", args, True, _shown(lambda db: jobs(db, args.state), _jobs_text))


def show_main(argv: Sequence[str] | None = None) -> int:
    """``refsched show``."""
    args = _task_args("show", "Show one task id's current version: state, attempt, worker, "
                              "timings, deps, result, error and the failure's traceback, whole.",
                              argv)

    return _run("show", args, True, _shown(lambda db: show(db, args.task_id), _show_text))


def retry_main(argv: Sequence[str] | None = None) -> int:
    """``refsched retry``."""
    args = _task_args("retry", "Give a failed, cancelled or blocked version, and every version "
                               "blocked because of it, a new version (spec: Retry).",
                               argv)

    def act(db: DurableScheduler) -> tuple[Any, str]:
        generation = db.retry(args.task_id)
        return ({"task": args.task_id, "generation": generation},
                f"retry {args.task_id!r}: generation {generation}, ready for a worker once its "
                "deps succeed")
    return _run("retry", args, False, act)


def cancel_main(argv: Sequence[str] | None = None) -> int:
    """``refsched cancel``."""
    parser = _parser("cancel", "Cancel a waiting version, or ask a running one to stop (its "
                               "worker hears it on its next heartbeat) (spec: Cancel). The "
                               "cancelled version, and each version it blocks, records "
                               "--actor and --reason in its provenance.")
    parser.add_argument("task_id", metavar="ID", help="the task id")
    parser.add_argument("--actor", help="who cancels (recorded in the provenance)")
    parser.add_argument("--reason", help="why (recorded in the provenance)")
    args = parser.parse_args(argv)

    def act(db: DurableScheduler) -> tuple[Any, str]:
        before = db.state(args.task_id).value
        state = db.cancel(args.task_id, actor=args.actor, reason=args.reason).value
        if before not in ("pending", "ready", "running"):  # Cancel takes no step
            raise InvalidTransitionError(f"cancel({args.task_id!r}): the version is {state}: "
                                         "nothing to cancel")
        text = "cancelled" if state == "cancelled" else "running: its worker is asked to stop"
        return {"task": args.task_id, "state": state}, f"cancel {args.task_id!r}: {text}"
    return _run("cancel", args, False, act)


def _moment(t: float | None) -> str:
    """A store-clock time for people: UTC ISO 8601 when the calendar holds it."""
    if t is None:
        return "-"
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S%z").replace("+0000",
                                                                                      "Z")
    except (OverflowError, OSError, ValueError):
        return f"{t:g}"


def _schedules_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no schedules"
    lines: list[str] = []
    for r in rows:
        timing = (f"every {r['every']:g} s" if r["every"] is not None
                  else f"cron {r['cron']!r} in {r['timezone']}")
        catchup = "none" if r["catchup"] is None else f"{r['catchup']:g} s"
        state = "paused" if r["paused"] else "active"
        lines.append(f"schedule {r['name']!r}: {r['fn']}, {timing}, overlap {r['overlap']}, "
                     f"catch-up {catchup}, priority {r['priority']}, {state}")
        lines.append(f"  next slot: {_moment(r['next_slot'])}")
        if r["held_slot"] is not None:
            lines.append(f"  held slot: {_moment(r['held_slot'])} (runs when no run is "
                         "unfinished)")
        for s in r["slots"]:
            ran = f" as {s['task']!r}" if s["task"] else ""
            lines.append(f"  {_moment(s['at'])}  {s['decision']}{ran}")
        if r["unlisted"]:
            lines.append(f"  ({r['unlisted']} older slots missed or skipped in one step, "
                         "not listed)")
    return "\n".join(lines)


def schedules_main(argv: Sequence[str] | None = None) -> int:
    """``refsched schedules``."""
    parser = _parser("schedules", "List a durable store's recurring schedules: each one's "
                                  "timing and policy, its next slot, and its latest slots with "
                                  "their decision (run, with the task id it ran as; skipped; "
                                  "missed).")
    parser.add_argument("--slots", type=int, default=20, metavar="N",
                        help="the latest N decided slots of each schedule (default 20)")
    args = parser.parse_args(argv)
    if args.slots < 0:
        parser.error("--slots: an int >= 0")

    def read(db: DurableScheduler) -> list[dict[str, Any]]:
        return [s.as_json() for s in db.schedules(args.slots)]
    return _run("schedules", args, True, _shown(read, _schedules_text))
