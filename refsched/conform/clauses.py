"""The contract's clauses, per system: what the oracle holds an implementation to, rule by rule.

Each :class:`Clause` has a stable id (``dag.submit.duplicate-dep``), one sentence, the
operations it governs and the outcome it decides (``ok``, or the name of the error the model
raises). :func:`decide` names the clause that decides a call, given the system, the call and
an answer (the model's, when the oracle judges; the implementation's, when it counts what a run
drove, which in a conforming run is the same): a verdict says "rule dag.submit.duplicate-dep:
...", and :mod:`refsched.conform.coverage` counts which clauses a run drove.

``docs/conformance.md`` ("The contract's clauses") lists the same ids with the same sentences;
``tests/test_conform_clauses.py`` holds the two equal. ``needs`` names the profile flags a
clause needs (every one true): a profile without them leaves the clause out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from refsched.types import TaskState

__all__ = ["CATALOGUE", "PARAMETERS", "Clause", "clause", "clauses", "decide", "outcome_of"]

# when(args by name, answer) -> whether the clause decides this call; None: always
When = Callable[[Mapping[str, Any], Any], bool]


@dataclass(frozen=True)
class Clause:
    """One rule of a system's contract."""

    id: str  # "<system>.<op or group>.<case>", stable: docs, verdicts and coverage use it
    ops: tuple[str, ...]  # the operations it governs (the API's method names)
    outcome: str  # "ok", or the error type the model raises
    sentence: str  # the rule, in one sentence
    needs: tuple[str, ...] = ()  # profile flags that must all be true for it to be asked
    when: When | None = None  # narrows the clause among those of the same op and outcome

    def admitted_by(self, profile: Any) -> bool:
        """Whether ``profile`` lets the oracle ask this clause."""
        return all(bool(getattr(profile, flag, True)) for flag in self.needs)

    def decides(self, op: str, outcome: str, args: Mapping[str, Any], answer: Any) -> bool:
        if op not in self.ops or outcome != self.outcome:
            return False
        if self.when is None:
            return True
        try:
            return bool(self.when(args, answer))
        except Exception:  # malformed arguments: a narrower clause does not apply
            return False


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _listed(args: Mapping[str, Any], name: str) -> list[Hashable]:
    ids = args.get(name) or ()
    return list(ids) if not isinstance(ids, str) else [ids]


def _deps(args: Mapping[str, Any]) -> list[Hashable]:
    """Every dependency a call names, required and optional."""
    return [*_listed(args, "deps"), *_listed(args, "optional")]


def _names_optional(args: Mapping[str, Any], _: Any) -> bool:
    return bool(_listed(args, "optional"))


def _summary_lists(*states: TaskState) -> When:
    """An input summary naming a parent that ended in one of ``states``."""
    names = {state.value for state in states}

    def lists(_: Mapping[str, Any], answer: Any) -> bool:
        outcomes = answer.values() if isinstance(answer, Mapping) else ()
        return any(getattr(_field(o, "state"), "value", _field(o, "state")) in names
                   for o in outcomes)
    return lists


def _duplicate_dep(args: Mapping[str, Any], _: Any) -> bool:
    deps = _deps(args)
    return len(set(deps)) < len(deps)


def _self_dep(args: Mapping[str, Any], _: Any) -> bool:
    return args.get("task") in _deps(args)


def _not_int(name: str) -> When:
    return lambda args, _: args.get(name) is not None and not _is_int(args.get(name))


def _negative(name: str) -> When:
    return lambda args, _: _is_int(args.get(name)) and args[name] < 0


def _answers(*states: TaskState) -> When:
    return lambda _, answer: answer in states


def _answers_not(*states: TaskState) -> When:
    return lambda _, answer: answer not in states


_CALLBACKS: Final = ("complete", "fail", "acknowledge_cancel")


def _never_leased(args: Mapping[str, Any], _: Any) -> bool:
    """A durable report's lease names an attempt below 1, which no claim gives (the lease
    as the API has it, or as the wire carries it)."""
    lease = args.get("lease")
    attempt: Any = (lease.get("attempt") if isinstance(lease, Mapping)
                    else getattr(lease, "attempt", None))
    return _is_int(attempt) and attempt < 1


def _bad_time(args: Mapping[str, Any], _: Any) -> bool:
    """A durable submit's priority is no int, or its delay no number of seconds >= 0."""
    priority, delay = args.get("priority", 0), args.get("delay", 0)
    good_delay = (isinstance(delay, int | float) and not isinstance(delay, bool)
                  and delay >= 0)
    return not _is_int(priority) or not -2**31 <= priority < 2**31 or not good_delay


def _claims_nothing(_: Mapping[str, Any], answer: Any) -> bool:
    return isinstance(answer, list) and not answer


def _claims_one_first_attempt(args: Mapping[str, Any], answer: Any) -> bool:
    """A claim of one version that takes one first attempt: the claim order chose it (a
    re-claim of an expired lease comes first whatever the order)."""
    if args.get("limit", 1) != 1 or not isinstance(answer, list) or len(answer) != 1:
        return False
    lease = answer[0]
    attempt = (lease.get("attempt") if isinstance(lease, Mapping)
               else getattr(lease, "attempt", None))
    return attempt == 1


def _schedules(answer: Any) -> list[Any]:
    """The schedules a durable ``schedules`` answer lists: by name on the wire and in the
    oracle's views, in a list from the ``DurableScheduler`` API."""
    if isinstance(answer, Mapping):
        return list(answer.values())
    return list(answer) if isinstance(answer, list | tuple) else []


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _lists_missed(_: Mapping[str, Any], answer: Any) -> bool:
    return any(_field(slot, "decision") == "missed"
               for view in _schedules(answer) for slot in _field(view, "slots") or ())


def _lists_skipped_or_held(_: Mapping[str, Any], answer: Any) -> bool:
    return any(_field(view, "held_slot") is not None
               or any(_field(slot, "decision") == "skipped" for slot in _field(view, "slots") or ())
               for view in _schedules(answer))


def _cron(args: Mapping[str, Any], _: Any) -> bool:
    return args.get("cron") is not None


_SCHEDULE_OPS: Final = ("schedule", "unschedule", "pause", "resume", "schedules")

_NAMED: Final = ("complete", "fail", "acknowledge_cancel", "cancel", "retry", "state",
                  "add_deps", "input_summary", "provenance")


def _path_length(answer: Any) -> int:
    """How many ids a provenance answer's path names (0: no provenance)."""
    path = _field(answer, "path") if answer is not None else None
    return len(path) if isinstance(path, list | tuple) else 0


def _own_root(_: Mapping[str, Any], answer: Any) -> bool:
    return _path_length(answer) == 1


def _reached(_: Mapping[str, Any], answer: Any) -> bool:
    return _path_length(answer) > 1

_DAG: Final = (
    Clause("dag.new.ok", ("new",), "ok",
           "`new` with an integer `max_concurrency` of 0 or more starts an empty instance that "
           "replaces the current one; with 0 it never claims.", ("limit",)),
    Clause("dag.new.invalid", ("new",), "InvalidArgumentError",
           "`new` with a negative or non-integer `max_concurrency` (`true` included) raises "
           "`InvalidArgumentError`, and the current instance stays current.", ("limit",)),
    Clause("dag.submit.optional", ("submit",), "ok",
           "`submit` with `optional` ids makes a version whose edges to them are optional: it "
           "waits for each of them to end, in any state, and for each of `deps` to succeed, "
           "and its `remaining_deps` counts both.", ("optional_edges",), _names_optional),
    Clause("dag.submit.ok", ("submit",), "ok",
           "`submit` makes a new version and answers its generation: 1 for an id's first "
           "submission, one more for each later one.", ()),
    Clause("dag.submit.duplicate-dep", ("submit",), "InvalidArgumentError",
           "`submit` naming a dependency twice (in `deps`, in `optional`, or in both) raises "
           "`InvalidArgumentError` and changes nothing.", (), _duplicate_dep),
    Clause("dag.submit.self-dep", ("submit",), "InvalidArgumentError",
           "`submit` of a task that depends on itself raises `InvalidArgumentError` and changes "
           "nothing.", (), _self_dep),
    Clause("dag.submit.closed", ("submit",), "SchedulerClosedError",
           "`submit` after `close` raises `SchedulerClosedError`.", ("close",)),
    Clause("dag.submit.running", ("submit",), "TaskRunningError",
           "`submit` over a running version raises `TaskRunningError`.", ("generations",)),
    Clause("dag.submit.unknown-dep", ("submit",), "UnknownDependencyError",
           "`submit` after `start` naming a dependency never submitted raises "
           "`UnknownDependencyError` whose `missing` is the set of (task, dependency) pairs.",
           ("dynamic",)),
    Clause("dag.submit.cycle", ("submit",), "CycleError",
           "`submit` after `start` whose dependencies close a cycle raises `CycleError` with a "
           "cycle of the graph through the new edges.", ("dynamic",)),
    Clause("dag.start.ok", ("start",), "ok",
           "`start` seals a graph whose dependencies are all submitted and acyclic."),
    Clause("dag.start.closed", ("start",), "SchedulerClosedError",
           "`start` after `close` raises `SchedulerClosedError`.", ("close",)),
    Clause("dag.start.twice", ("start",), "InvalidTransitionError",
           "`start` a second time raises `InvalidTransitionError`."),
    Clause("dag.start.unknown-dep", ("start",), "UnknownDependencyError",
           "`start` with a dependency never submitted raises `UnknownDependencyError` whose "
           "`missing` is the set of every (task, dependency) pair."),
    Clause("dag.start.cycle", ("start",), "CycleError",
           "`start` of a graph with a cycle raises `CycleError` whose `cycle` is a cycle of the "
           "graph, each entry a dependency of the next, from any of its entries."),
    Clause("dag.ready.ok", ("ready",), "ok",
           "`ready(limit)` claims the ready versions with the smallest `seq`, at most `limit` "
           "and the free slots of `max_concurrency`, in `seq` order; none once closed."),
    Clause("dag.ready.limit-not-int", ("ready",), "InvalidArgumentError",
           "`ready` with a `limit` that is not an integer (`true`, `1.5`, a string) raises "
           "`InvalidArgumentError`.", ("limit",), _not_int("limit")),
    Clause("dag.ready.limit-negative", ("ready",), "InvalidArgumentError",
           "`ready` with a negative `limit` raises `InvalidArgumentError`.", ("limit",),
           _negative("limit")),
    Clause("dag.ready.not-started", ("ready",), "InvalidTransitionError",
           "`ready` before `start` raises `InvalidTransitionError`."),
    Clause("dag.complete.ok", ("complete",), "ok",
           "`complete` of the running current version makes it succeeded and readies the "
           "dependents it was the last wait of; of an ended one it answers its state."),
    Clause("dag.fail.ok", ("fail",), "ok",
           "`fail` of the running current version makes it failed and blocks every waiting "
           "version that depends on it; of an ended one it answers its state.", ("fail",)),
    Clause("dag.acknowledge_cancel.ok", ("acknowledge_cancel",), "ok",
           "`acknowledge_cancel` of the running current version cancels it and blocks its "
           "waiting dependents; of an ended one it answers its state.", ("cancel",)),
    Clause("dag.callback.waiting", _CALLBACKS, "InvalidTransitionError",
           "`complete`, `fail` or `acknowledge_cancel` of a pending or ready version raises "
           "`InvalidTransitionError`."),
    Clause("dag.callback.generation-not-int", (*_CALLBACKS, "cancel"), "InvalidArgumentError",
           "a callback or `cancel` naming a generation that is not an integer (`true`, `1.5`) "
           "raises `InvalidArgumentError`.", (), _not_int("generation")),
    Clause("dag.callback.negative-generation", (*_CALLBACKS, "cancel"),
           "StaleGenerationError",
           "a callback or `cancel` naming a negative generation raises `StaleGenerationError` "
           "(it is not the current one), with `generation` and `current`.", ("generations",),
           _negative("generation")),
    Clause("dag.callback.stale", (*_CALLBACKS, "cancel"), "StaleGenerationError",
           "a callback or `cancel` naming a generation that is not the current one raises "
           "`StaleGenerationError` carrying the `generation` named and the `current` one, and "
           "changes nothing.", ("generations",)),
    Clause("dag.call.unknown-task", _NAMED, "UnknownTaskError",
           "a call naming an id never submitted raises `UnknownTaskError`."),
    Clause("dag.cancel.running", ("cancel",), "ok",
           "`cancel` of a running version requests a stop (`cancel_requested`) and answers "
           "`running`.", ("cancel",), _answers(TaskState.RUNNING)),
    Clause("dag.cancel.ok", ("cancel",), "ok",
           "`cancel` of a pending or ready version, before `start` too, cancels it and blocks "
           "its waiting dependents; of an ended version it answers its state.", ("cancel",),
           _answers_not(TaskState.RUNNING)),
    Clause("dag.retry.ok", ("retry",), "ok",
           "`retry` of a failed, cancelled or blocked task, before `start` too, renews it and "
           "the versions its failure blocked, and answers its new generation.", ("retry",)),
    Clause("dag.retry.closed", ("retry",), "SchedulerClosedError",
           "`retry` after `close` raises `SchedulerClosedError`.", ("retry", "close")),
    Clause("dag.retry.not-dead", ("retry",), "InvalidTransitionError",
           "`retry` of a version that is not failed, cancelled or blocked raises "
           "`InvalidTransitionError`.", ("retry",)),
    Clause("dag.edge.optional-succeeded", ("input_summary",), "ok",
           "an optional dependency that succeeds settles its edge as a required one does: the "
           "waiting version may become ready, and its input summary names the parent "
           "`succeeded`.", ("optional_edges", "snapshot"), _summary_lists(TaskState.SUCCEEDED)),
    Clause("dag.edge.optional-dead", ("input_summary",), "ok",
           "an optional dependency that fails, is cancelled or is blocked settles its edge and "
           "never blocks the waiting version, which may become ready; its input summary names "
           "the parent's end state (and `blocked_by`).", ("optional_edges", "snapshot"),
           _summary_lists(TaskState.FAILED, TaskState.CANCELLED, TaskState.BLOCKED)),
    Clause("dag.input_summary.ok", ("input_summary",), "ok",
           "`input_summary` answers each optional dependency whose current version has "
           "ended, with its generation, state and `blocked_by`, as they were when the version "
           "was claimed once it was; a dependency replaced by a new version has not ended, and "
           "its waiting dependents wait for the new one.", ("optional_edges", "snapshot")),
    Clause("dag.provenance.cancelled", ("provenance",), "ok",
           "`provenance` of a cancelled version answers it as its own `root`, its "
           "`generation`, `end` `cancelled`, the `path` `[task]`, and the `actor` and `reason` "
           "given to the `cancel` or `acknowledge_cancel` that cancelled it (`close` gives the "
           "reason `close`).", ("provenance", "cancel"), _own_root),
    Clause("dag.provenance.blocked", ("provenance",), "ok",
           "`provenance` of a blocked version answers the version that failed or was "
           "cancelled at the source of its blocking as `root`, with its `generation` and "
           "`end`, the `path` of required edges from the root to it (each entry a dependency "
           "of the next, through versions blocked with it), and the `actor` and `reason` given "
           "to the call that ended the root.", ("provenance",), _reached),
    Clause("dag.provenance.none", ("provenance",), "ok",
           "`provenance` of a version that is neither blocked nor cancelled (a failed one, and "
           "one renewed by `retry` or a new `submit`) answers `null`.", ("provenance",)),
    Clause("dag.add_deps.ok", ("add_deps",), "ok",
           "`add_deps` of a pending version adds the edges (optional ones to `optional`), "
           "raises its `remaining_deps` by those not settled, blocks it when a new required "
           "dependency is dead, keeps its generation and `seq`, and answers its state.",
           ("add_deps",)),
    Clause("dag.add_deps.twice", ("add_deps",), "InvalidArgumentError",
           "`add_deps` naming an id twice, in one list or in both, raises "
           "`InvalidArgumentError` and changes nothing.", ("add_deps",), _duplicate_dep),
    Clause("dag.add_deps.invalid", ("add_deps",), "InvalidArgumentError",
           "`add_deps` naming no id, the task itself, or a dependency it has already raises "
           "`InvalidArgumentError` and changes nothing.", ("add_deps",)),
    Clause("dag.add_deps.closed", ("add_deps",), "SchedulerClosedError",
           "`add_deps` after `close` raises `SchedulerClosedError`.", ("add_deps", "close")),
    Clause("dag.add_deps.not-pending", ("add_deps",), "InvalidTransitionError",
           "`add_deps` of a version that is ready, running or ended raises "
           "`InvalidTransitionError` and changes nothing: an edge never lands on a version "
           "that is not pending.", ("add_deps",)),
    Clause("dag.add_deps.unknown-dep", ("add_deps",), "UnknownDependencyError",
           "`add_deps` after `start` naming an id never submitted raises "
           "`UnknownDependencyError` whose `missing` is the set of (task, dependency) pairs.",
           ("add_deps",)),
    Clause("dag.add_deps.cycle", ("add_deps",), "CycleError",
           "`add_deps` after `start` whose new edges close a cycle raises `CycleError` with a "
           "cycle of the graph through them.", ("add_deps",)),
    Clause("dag.close.ok", ("close",), "ok",
           "`close` reports every id under the state of its current version, each list in "
           "`seq` order, cancelling the waiting versions when `cancel_pending`.", ("close",)),
    Clause("dag.close.flag-not-bool", ("close",), "InvalidArgumentError",
           "`close` with a `cancel_pending` that is not a boolean raises "
           "`InvalidArgumentError` and changes nothing.", ("close",)),
    Clause("dag.snapshot.ok", ("snapshot",), "ok",
           "`snapshot` answers the spec's variables, every submitted id under `tasks`.",
           ("snapshot",)),
    Clause("dag.state.ok", ("state",), "ok",
           "`state` answers the state of the id's current version.", ("snapshot",)),
)

_TIMER: Final = (
    Clause("timer.new.ok", ("new",), "ok",
           "`new` starts an empty timer scheduler on a clock reading `now`."),
    Clause("timer.new.invalid", ("new",), "InvalidArgumentError",
           "`new` with a `rebuild_floor` that is negative or not an integer raises "
           "`InvalidArgumentError`, and the current instance stays current.", ("validates",)),
    Clause("timer.schedule.ok", ("schedule",), "ok",
           "`schedule` makes a new pending version due at `run_at` and answers its version."),
    Clause("timer.schedule.invalid", ("schedule",), "InvalidArgumentError",
           "`schedule` with a `run_at` that is not a finite number or a `priority` that is not "
           "an integer raises `InvalidArgumentError`.", ("validates",)),
    Clause("timer.schedule.closed", ("schedule",), "SchedulerClosedError",
           "`schedule` after `close` raises `SchedulerClosedError`.", ("close",)),
    Clause("timer.schedule.running", ("schedule",), "TaskRunningError",
           "`schedule` of an id whose version is running raises `TaskRunningError`.",
           ("versions",)),
    Clause("timer.next.ok", ("next",), "ok",
           "`next` hands out the due version first by time, then priority, then order of "
           "scheduling; else the wait until the first, or nothing."),
    Clause("timer.cancel.ok", ("cancel",), "ok",
           "`cancel` of a pending version cancels it (`true`); of a running one it requests a "
           "stop (`false`).", ("cancel",)),
    Clause("timer.callback.ok", ("complete", "fail"), "ok",
           "`complete` or `fail` of the running current version ends it; of an ended one it "
           "answers its state.", ("callbacks",)),
    Clause("timer.callback.negative-version", ("complete", "fail"), "StaleGenerationError",
           "`complete` or `fail` naming a negative version raises `StaleGenerationError` (it "
           "is not the current one).", ("callbacks", "versions"), _negative("version")),
    Clause("timer.callback.stale", ("complete", "fail"), "StaleGenerationError",
           "`complete` or `fail` naming a version that is not current raises "
           "`StaleGenerationError`.", ("callbacks", "versions")),
    Clause("timer.callback.pending", ("complete", "fail"), "InvalidTransitionError",
           "`complete` or `fail` of a pending version raises `InvalidTransitionError`.",
           ("callbacks",)),
    Clause("timer.callback.invalid", ("complete", "fail"), "InvalidArgumentError",
           "`complete` or `fail` naming a version that is not an integer raises "
           "`InvalidArgumentError`.", ("callbacks", "validates")),
    Clause("timer.call.unknown-task", ("cancel", "complete", "fail", "state"),
           "UnknownTaskError", "a call naming an id never scheduled raises `UnknownTaskError`."),
    Clause("timer.close.ok", ("close",), "ok",
           "`close` cancels the pending versions and reports them with the running ones, each "
           "list in the order the versions were scheduled.",
           ("close",)),
    Clause("timer.snapshot.ok", ("snapshot", "state"), "ok",
           "`snapshot` and `state` answer the spec's variables and an id's state.",
           ("snapshot",)),
    Clause("timer.stats.ok", ("stats",), "ok",
           "`stats` answers the counters the model's steps count.", ("stats",)),
)

_POOL: Final = (
    Clause("pool.new.ok", ("new",), "ok", "`new` starts a pool whose named workers do not move "
           "on their own."),
    Clause("pool.submit.ok", ("submit_external",), "ok",
           "`submit` from outside puts the task on the named worker's deque."),
    Clause("pool.submit.closed", ("submit_external",), "SchedulerClosedError",
           "`submit` from outside after `shutdown` raises `SchedulerClosedError` and changes "
           "nothing."),
    Clause("pool.submit_child.ok", ("submit_child",), "ok",
           "`submit_child` puts the child on the deque of the worker that runs its parent, "
           "draining included."),
    Clause("pool.pop.ok", ("pop",), "ok",
           "`pop` takes the worker's newest task, else another deque's oldest."),
    Clause("pool.steal.ok", ("steal",), "ok",
           "`steal` takes the victim's oldest task first, else another deque's."),
    Clause("pool.move.refused", ("pop", "steal", "finish"), "StepRefused",
           "a move the worker cannot take (nothing to take, nothing running) answers "
           "`StepRefused` and changes nothing."),
    Clause("pool.finish.ok", ("finish",), "ok",
           "`finish` runs the worker's task and settles its future."),
    Clause("pool.shutdown.ok", ("shutdown",), "ok",
           "`shutdown` stops outside submissions; the pool ends once nothing is outstanding."),
    Clause("pool.cancel_queued.ok", ("cancel_queued",), "ok",
           "`shutdown(cancel_futures=True)` cancels and drops every queued task."),
    Clause("pool.snapshot.ok", ("snapshot", "stats"), "ok",
           "`snapshot` and `stats` answer the spec's variables and the counters."),
    Clause("pool.block.ok", ("block",), "ok",
           "`block` of a thread whose task runs marks it blocked; a spare stands in for it, "
           "one released by its blocker, else an off one, unless `max_spares` spares are "
           "active: then it blocks with none.", ("managed_blocking",)),
    Clause("pool.start_spare.ok", ("start_spare",), "ok",
           "`start_spare` of a spare whose thread was launched makes it serve as a worker "
           "does.", ("managed_blocking",)),
    Clause("pool.unblock.ok", ("unblock",), "ok",
           "`unblock` of a blocked thread lets it run again and releases the spare that stood "
           "in for it.", ("managed_blocking",)),
    Clause("pool.retire.ok", ("retire",), "ok",
           "`retire` of a released spare, idle with its own deque empty, gives its thread "
           "back: it is off and counts against `max_spares` no more.", ("managed_blocking",)),
    Clause("pool.blocking.refused", ("block", "start_spare", "unblock", "retire"),
           "StepRefused",
           "a move of managed blocking the pool does not take (a thread that runs nothing or "
           "is blocked already, a spare with no thread starting, a thread not blocked, a "
           "spare not released or not started) answers `StepRefused` and changes nothing.",
           ("managed_blocking",)),
    Clause("pool.blocking_snapshot.ok", ("blocking_snapshot",), "ok",
           "`blocking_snapshot` answers the spec's variables with managed blocking's "
           "`blocked`, `spare` and `blocker`.", ("managed_blocking",)),
)

_DURABLE: Final = (
    Clause("durable.new.ok", ("new",), "ok", "`new` starts a fresh, empty store."),
    Clause("durable.submit.optional", ("submit",), "ok",
           "`submit` with `optional` ids stores a version whose edges to them are optional: "
           "it waits for each to end, in any state, is never blocked by one, and its "
           "`remaining_deps` counts both kinds.", ("deps", "edges"), _names_optional),
    Clause("durable.submit.ok", ("submit",), "ok",
           "`submit` stores a new version and answers its generation."),
    Clause("durable.submit.time-refused", ("submit",), "InvalidArgumentError",
           "`submit` with a `priority` that is not an integer of 32 bits, or a `delay` that is "
           "not a number of seconds of 0 or more, raises `InvalidArgumentError` and stores "
           "nothing.", ("time", "validates"), _bad_time),
    Clause("durable.submit.invalid", ("submit",), "InvalidArgumentError",
           "`submit` naming a dependency twice or itself, or a function that is not "
           "`module:function`, raises `InvalidArgumentError` and stores nothing.",
           ("deps", "validates")),
    Clause("durable.submit.closed", ("submit",), "SchedulerClosedError",
           "`submit` after `close` raises `SchedulerClosedError`.", ("close",)),
    Clause("durable.submit.running", ("submit",), "TaskRunningError",
           "`submit` over a running version raises `TaskRunningError`.", ("generations",)),
    Clause("durable.submit.unknown-dep", ("submit",), "UnknownDependencyError",
           "`submit` after `start` naming a dependency never submitted raises "
           "`UnknownDependencyError`.", ("deps", "start")),
    Clause("durable.submit.cycle", ("submit",), "CycleError",
           "`submit` after `start` closing a cycle raises `CycleError`.", ("deps", "start")),
    Clause("durable.add_deps.ok", ("add_deps",), "ok",
           "`add_deps` of a pending version adds the edges (optional ones to `optional`) in "
           "one transaction, raises its `remaining_deps` by those not settled, blocks it when "
           "a new required dependency can no longer succeed, and answers its state.",
           ("deps", "edges")),
    Clause("durable.add_deps.twice", ("add_deps",), "InvalidArgumentError",
           "`add_deps` naming an id twice, in one list or in both, raises "
           "`InvalidArgumentError` and changes nothing.", ("deps", "edges", "validates"),
           _duplicate_dep),
    Clause("durable.add_deps.invalid", ("add_deps",), "InvalidArgumentError",
           "`add_deps` naming no id, the task itself, or a dependency it has already raises "
           "`InvalidArgumentError` and changes nothing.", ("deps", "edges", "validates")),
    Clause("durable.add_deps.unknown-task", ("add_deps",), "UnknownTaskError",
           "`add_deps` of an id never submitted raises `UnknownTaskError`.", ("deps", "edges")),
    Clause("durable.add_deps.closed", ("add_deps",), "SchedulerClosedError",
           "`add_deps` after `close` raises `SchedulerClosedError`.",
           ("deps", "edges", "close")),
    Clause("durable.add_deps.not-pending", ("add_deps",), "InvalidTransitionError",
           "`add_deps` of a version that is ready, claimed or ended raises "
           "`InvalidTransitionError` and changes nothing: an edge never lands on a version "
           "a claim may have taken.", ("deps", "edges")),
    Clause("durable.add_deps.unknown-dep", ("add_deps",), "UnknownDependencyError",
           "`add_deps` after `start` naming an id never submitted raises "
           "`UnknownDependencyError`.", ("deps", "edges", "start")),
    Clause("durable.add_deps.cycle", ("add_deps",), "CycleError",
           "`add_deps` after `start` whose new edges close a cycle raises `CycleError`.",
           ("deps", "edges", "start")),
    Clause("durable.start.ok", ("start",), "ok", "`start` seals the stored graph.", ("start",)),
    Clause("durable.start.refused", ("start",), "InvalidTransitionError",
           "`start` a second time raises `InvalidTransitionError`.", ("start",)),
    Clause("durable.start.closed", ("start",), "SchedulerClosedError",
           "`start` after `close` raises `SchedulerClosedError`.", ("start", "close")),
    Clause("durable.start.unknown-dep", ("start",), "UnknownDependencyError",
           "`start` while a stored version names a dependency never submitted raises "
           "`UnknownDependencyError` whose `missing` is the set of (task, dependency) pairs.",
           ("deps", "start")),
    Clause("durable.start.cycle", ("start",), "CycleError",
           "`start` of a stored graph with a cycle raises `CycleError` with a cycle of the "
           "graph.", ("deps", "start")),
    Clause("durable.claim.due", ("claim",), "ok",
           "`claim` takes only versions whose due time has come: while none is ready and due "
           "it answers `[]`, and a delayed version is claimed once the clock reaches its "
           "due time.", (), _claims_nothing),
    Clause("durable.claim.order", ("claim",), "ok",
           "`claim` of one version takes the first eligible one in the claim order: highest "
           "`priority * 60 - due` first (one priority level for every 60 seconds due), then "
           "the earliest submitted.", (), _claims_one_first_attempt),
    Clause("durable.claim.ok", ("claim",), "ok",
           "`claim` leases the oldest ready versions, or re-leases expired ones with the next "
           "attempt."),
    Clause("durable.claim.invalid", ("claim",), "InvalidArgumentError",
           "`claim` with a `limit` that is not an integer of 1 or more, or a `lease` that is "
           "not a positive number of seconds, raises `InvalidArgumentError` and changes "
           "nothing.", ("validates",)),
    Clause("durable.claim.not-started", ("claim",), "InvalidTransitionError",
           "`claim` before `start` raises `InvalidTransitionError`.", ("start",)),
    Clause("durable.heartbeat.ok", ("heartbeat",), "ok",
           "`heartbeat` of the current attempt extends its lease to now + lease and says "
           "whether a cancel was asked.", ("heartbeat",)),
    Clause("durable.heartbeat.lost", ("heartbeat",), "LeaseLostError",
           "`heartbeat` with a lease that is not the version's live one (an older generation "
           "or attempt, a version no longer running, a lease that expired) raises "
           "`LeaseLostError` and changes nothing.", ("heartbeat",)),
    Clause("durable.report.ok", ("complete", "fail", "acknowledge_cancel"), "ok",
           "a report of the current attempt ends the version; repeated, it answers the same "
           "state."),
    Clause("durable.report.waiting", _CALLBACKS, "StaleLeaseError",
           "a report naming attempt 0, which no claim gives (the attempt of a waiting "
           "version), raises `StaleLeaseError` and changes nothing.", (), _never_leased),
    Clause("durable.report.stale", _CALLBACKS, "StaleLeaseError",
           "a report with a lease that is not the version's live one (an older generation or "
           "attempt, a version no longer running, a lease that expired) raises "
           "`StaleLeaseError` naming the lease's generation and attempt and the current ones, "
           "and changes nothing."),
    Clause("durable.lease.invalid", ("heartbeat", *_CALLBACKS), "InvalidArgumentError",
           "a report or `heartbeat` with something that is not a lease raises "
           "`InvalidArgumentError` and changes nothing.", ("validates",)),
    Clause("durable.cancel.ok", ("cancel",), "ok",
           "`cancel` of a waiting version cancels it; of a running one asks it to stop; of an "
           "ended one it answers its state.", ("cancel",)),
    Clause("durable.input_summary.ok", ("input_summary",), "ok",
           "`input_summary` answers each optional dependency of the current version that "
           "has ended, with its generation, state and `blocked_by`: as they were at the "
           "version's first claim once it was claimed (a dependency renewed since does not "
           "change it), else as they are now.", ("deps", "edges", "snapshot")),
    Clause("durable.provenance.cancelled", ("provenance",), "ok",
           "`provenance` of a cancelled version answers it as its own `root`, its "
           "`generation`, `end` `cancelled`, the `path` `[task]`, and what the call that "
           "cancelled it said: the `actor` and `reason` given to `cancel`, the reporting "
           "lease's worker as `actor` for `acknowledge_cancel`, the `reason` `close` for "
           "`close`.", ("provenance", "cancel"), _own_root),
    Clause("durable.provenance.blocked", ("provenance",), "ok",
           "`provenance` of a blocked version answers the version that failed or was "
           "cancelled at the source of its blocking as `root`, with its `generation` and "
           "`end`, the `path` of required edges from the root to it, and what the call that "
           "ended the root said (for `fail`, the reporting lease's worker as `actor`; for a "
           "version given up after its last lease expired, no `actor` and a `reason` in the "
           "store's own words).", ("provenance", "deps"), _reached),
    Clause("durable.provenance.none", ("provenance",), "ok",
           "`provenance` of a version that is neither blocked nor cancelled (a failed one, and "
           "one renewed by `retry` or a new `submit`) answers `null`.", ("provenance",)),
    Clause("durable.retry.ok", ("retry",), "ok",
           "`retry` of a failed, cancelled or blocked task renews it with the versions it "
           "blocked, and answers its new generation.", ("retry",)),
    Clause("durable.retry.closed", ("retry",), "SchedulerClosedError",
           "`retry` after `close` raises `SchedulerClosedError`.", ("retry", "close")),
    Clause("durable.retry.refused", ("retry",), "InvalidTransitionError",
           "`retry` of a version that is not failed, cancelled or blocked raises "
           "`InvalidTransitionError`.", ("retry",)),
    Clause("durable.call.unknown-task", ("cancel", "retry", "heartbeat", "input_summary",
                                         "provenance", *_CALLBACKS),
           "UnknownTaskError",
           "a call naming an id never submitted, by itself or in a lease, raises "
           "`UnknownTaskError`."),
    Clause("durable.close.ok", ("close",), "ok",
           "`close` reports every id by state, cancelling the waiting ones when asked.",
           ("close",)),
    Clause("durable.time.ok", ("tick", "expire", "now"), "ok",
           "`tick` moves the store's clock by `seconds` and answers the new time, `now` reads "
           "it, and `expire` ends the leases whose deadline has passed (a version out of "
           "attempts fails)."),
    Clause("durable.snapshot.ok", ("snapshot", "leases", "stats", "history"), "ok",
           "`snapshot`, `leases`, `stats` and `history` answer the store's state.",
           ("snapshot",)),
    Clause("durable.schedule.catchup", ("schedules",), "ok",
           "a slot whose time came more than `catchup` seconds before the decision (a "
           "downtime, a clock moved far) is decided `missed`; the slots within the window are "
           "decided by the policy.", ("schedules",), _lists_missed),
    Clause("durable.schedule.overlap", ("schedules",), "ok",
           "a slot whose time comes while a run of its schedule is unfinished is `skipped` "
           "under `skip`, held under `buffer_one` (one slot at most, the others `skipped`; the "
           "held slot runs once no run is unfinished) and run under `allow`; a slot that "
           "comes while the schedule is paused is `skipped`.",
           ("schedules",), _lists_skipped_or_held),
    Clause("durable.schedule.cron", ("schedule",), "ok",
           "a `cron` timing's slots are the times its five-field expression gives from the "
           "schedule's first whole second on, read in `timezone` (UTC when none) as the "
           "`cronsim` library reads it, across a daylight-saving change too; each is decided "
           "as any slot, a `run` named by the slot's time in UTC.", ("schedules",), _cron),
    Clause("durable.schedule.decide", _SCHEDULE_OPS, "ok",
           "each slot whose time has come is decided once, oldest first, by the next `claim`, "
           "`tick` or change of its schedule: a `run` submits one version of the task id "
           "`name@<slot in UTC, ISO 8601>`; `schedules` lists each schedule's slots and "
           "decisions.", ("schedules",)),
    Clause("durable.schedule.refused", ("schedule",), "InvalidArgumentError",
           "`schedule` with an unknown `overlap`, both or neither of `every` and `cron`, an "
           "`every` that is not a positive number of seconds or a `catchup` below 0 raises "
           "`InvalidArgumentError` and stores nothing.", ("schedules", "validates")),
    Clause("durable.schedule.redefined", ("schedule",), "InvalidTransitionError",
           "`schedule` of a name that holds a different schedule raises "
           "`InvalidTransitionError` and changes nothing (the same schedule again answers "
           "`false`).", ("schedules",)),
    Clause("durable.schedule.unknown", ("unschedule", "pause", "resume"), "UnknownTaskError",
           "`unschedule`, `pause` or `resume` of a name no schedule has raises "
           "`UnknownTaskError`.", ("schedules",)),
)

CATALOGUE: Final[Mapping[str, tuple[Clause, ...]]] = {
    "scheduler": _DAG, "timer": _TIMER, "pool": _POOL, "durable": _DURABLE,
}
"""Every system's clauses, in the order of its contract: specific cases before general ones
of the same op and outcome, which :func:`decide` relies on."""

PARAMETERS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    "scheduler": {
        "new": ("max_concurrency",), "submit": ("task", "deps", "fn", "optional"),
        "add_deps": ("task", "deps", "optional"), "input_summary": ("task",), "start": (),
        "ready": ("limit",), "complete": ("task", "generation", "result"),
        "fail": ("task", "generation", "error", "actor", "reason"),
        "cancel": ("task", "generation", "actor", "reason"),
        "acknowledge_cancel": ("task", "generation", "actor", "reason"), "retry": ("task",),
        "provenance": ("task",),
        "close": ("cancel_pending",), "snapshot": (), "state": ("task",),
    },
    "timer": {
        "new": ("clock", "rebuild_floor"), "schedule": ("task", "run_at", "priority", "fn"),
        "cancel": ("task",), "next": (), "complete": ("task", "version", "result"),
        "fail": ("task", "version", "error"), "close": (), "snapshot": (),
        "state": ("task",), "stats": (),
    },
    "pool": {
        "new": ("workers", "steal_cap", "spares", "max_spares"),
        "submit_external": ("task", "worker"),
        "submit_child": ("task", "worker"), "pop": ("worker",), "steal": ("thief", "victim"),
        "finish": ("worker",), "shutdown": (), "cancel_queued": (), "snapshot": (),
        "stats": (), "block": ("thread",), "start_spare": ("spare",), "unblock": ("thread",),
        "retire": ("spare",), "blocking_snapshot": (),
    },
    "durable": {
        "new": (), "submit": ("task", "deps", "fn", "priority", "delay", "optional"),
        "add_deps": ("task", "deps", "optional"), "start": (),
        "claim": ("worker", "limit", "lease"), "heartbeat": ("lease",),
        "complete": ("lease",), "fail": ("lease",), "acknowledge_cancel": ("lease",),
        "cancel": ("task", "actor", "reason"), "retry": ("task",),
        "input_summary": ("task",), "provenance": ("task",), "close": ("cancel_pending",),
        "tick": ("seconds",), "expire": (), "now": (), "snapshot": (), "leases": (),
        "stats": (), "history": (),
        "schedule": ("name", "fn", "every", "cron", "overlap", "catchup", "priority",
                     "timezone"),
        "unschedule": ("name",), "pause": ("name",), "resume": ("name",), "schedules": (),
    },
}
"""Per system, each operation's positional parameters, by which clauses read a call's
arguments."""


def clauses(system: str) -> tuple[Clause, ...]:
    """The clauses of ``system`` (``scheduler``, ``timer``, ``pool``, ``durable``)."""
    try:
        return CATALOGUE[system]
    except KeyError:
        raise ValueError(f"no system {system!r}; the systems are "
                         f"{', '.join(CATALOGUE)}") from None


def clause(clause_id: str) -> Clause:
    """The clause of that id. Errors: no such clause -> ``KeyError``."""
    for catalogue in CATALOGUE.values():
        for c in catalogue:
            if c.id == clause_id:
                return c
    raise KeyError(clause_id)


def outcome_of(answer: Any) -> str:
    """``ok``, or the type name of the error ``answer`` is (a foreign error by its own name)."""
    if isinstance(answer, BaseException):
        return str(getattr(answer, "type_name", None) or type(answer).__name__)
    return "ok"


def _by_name(system: str, op: str, args: Sequence[Any],
             kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    names = PARAMETERS.get(system, {}).get(op, ())
    named = dict(zip(names, args, strict=False))
    if kwargs:
        named.update(kwargs)
    return named


def decide(system: str, op: str, args: Sequence[Any], answer: Any,
           kwargs: Mapping[str, Any] | None = None) -> Clause | None:
    """The clause that decides the call ``op(*args, **kwargs)`` answered by ``answer`` (a
    value, or the exception raised), or None when no clause of ``system`` speaks of it (an
    error the contract never raises, an op outside it)."""
    outcome = outcome_of(answer)
    named = _by_name(system, op, args, kwargs)
    for c in CATALOGUE.get(system, ()):
        if c.decides(op, outcome, named, answer):
            return c
    return None


class _Answered(Exception):
    """An error answer read off the wire, by the type name it carries."""

    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


def decide_wire(system: str, request: Mapping[str, Any],
                answer: Mapping[str, Any] | None) -> Clause | None:
    """The clause that decides ``request`` (a protocol request, its ``op`` and arguments by
    name) answered by ``answer`` (``{"ok": ...}`` or ``{"error": {"type": ...}}``), or None."""
    if not answer:
        return None
    named = {k: v for k, v in request.items() if k not in ("op", "id")}
    error = answer.get("error")
    said: Any = (_Answered(str(error.get("type"))) if isinstance(error, Mapping)
                 else answer.get("ok"))
    op = str(request.get("op", ""))
    if system != "scheduler":  # the API's name of a request named otherwise on the wire
        from refsched.conform import wire

        op = {sent: method for method, sent in wire.get(system).op_of.items()}.get(op, op)
    return decide(system, op, (), said, named)
