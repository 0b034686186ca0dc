"""A :class:`~refsched.model.durable.DurableSnapshot` as the variables of
``spec/DurableScheduler.tla``, and back.

The spec keeps a value for every id of ``Tasks`` and every worker of ``Workers``: an id never
submitted is absent (as in ``spec/Scheduler.tla``) with attempt 0, holder ``NoWorker``, deadline
0, ends 0, endedAttempt 0, due 0 and priority 0; a worker holding nothing holds ``{}``. A
DurableSnapshot lists only what differs from that. :func:`spec_state` adds the rest for given
``Workers`` and ``Tasks``; :func:`snapshot_of` drops it, and refuses a state that is not of
that shape (so a malformed state is an error, never a silently different snapshot).
Scheduler's variables are read and written by :mod:`refsched.verify.specstate`, with
``claims`` computed from ``attempt`` as the spec's refinement mapping does. Ids are model values
in TLC (``w1``, ``a``) and their names in the model (``"w1"``, ``"a"``). :func:`read_instance`
reads the constants of a ``MCDurableScheduler*.cfg``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from refsched.model.durable.actions import DurableSnapshot
from refsched.model.durable.graph import Instance
from refsched.types import TaskState
from refsched.verify import specstate, stategraph, tlc
from refsched.verify.specstate import NO_TASK, SpecStateError, task_id
from refsched.verify.tla import Function, ModelValue

__all__ = ["LABEL_ACTIONS", "NO_WORKER", "SPEC_VARIABLES", "TRACES_CONFIG", "read_instance",
           "show", "snapshot_of", "spec_state"]

SPEC_VARIABLES = (
    "started", "closed", "nextSeq", "generation", "state", "deps", "optional", "remainingDeps",
    "blockedBy", "cancelRequested", "seq", "attempt", "holder", "deadline", "now", "held",
    "ends", "endedAttempt", "due", "priority",
)
"""The spec's variables, in the order of its ``VARIABLES`` declaration."""

TRACES_CONFIG = "MCDurableSchedulerTraces.cfg"
"""The model-checking instance whose whole state graph a durable trace corpus would cover."""

LABEL_ACTIONS = {"AnyRefused": "Refused"}
"""Dump labels that are not the model's action name: TLC labels a step with the innermost
operator it expands before a quantifier over a state-dependent range (see the spec)."""

NO_WORKER = ModelValue("NoWorker")
"""The spec's ``NoWorker``: holder of a version with no live lease."""

# per id, besides Scheduler's
_LEASE_VARIABLES = ("attempt", "holder", "deadline", "ends", "endedAttempt", "due", "priority")
_COUNTS = ("MaxConcurrency", "MaxAttempts", "LeaseTime", "MaxGeneration", "MaxTime")
_GATES = ("OptionalEdges", "AddDepsAllowed")


def read_instance(config: str | Path) -> Instance:
    """The constants of a ``MCDurableScheduler*.cfg`` file (relative paths: under ``spec/``)."""
    path, text, values = tlc.read_config(config, ("Tasks", "Workers", "LoseAnswers",
                                                  "Priorities", "Delays", *_COUNTS, "Aging",
                                                  *_GATES))
    for name in ("LoseAnswers", *_GATES):
        if not isinstance(values[name], bool):
            raise ValueError(f"{path}: {name} must be TRUE or FALSE")
    for name in ("NoTask", "NoWorker"):
        if re.search(rf"^\s*{name}\s*=\s*{name}\s*$", text, re.M) is None:
            raise ValueError(f"{path}: {name} must be the model value {name}")
    counts = {}
    for name in (*_COUNTS, "Aging"):
        value = values[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{path}: {name} must be a natural number, not {value!r}")
        counts[name] = value
    numbers = {}
    for name, least in (("Priorities", None), ("Delays", 0)):
        value = values[name]
        if (not isinstance(value, frozenset) or not value
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in value)
                or (least is not None and min(value) < least)):
            kind = "integers" if least is None else "natural numbers"
            raise ValueError(f"{path}: {name} must be a non-empty set of {kind}, not {value!r}")
        numbers[name] = tuple(sorted(value))
    workers = specstate.model_values(path, "Workers", values["Workers"])
    if not workers:
        raise ValueError(f"{path}: Workers must not be empty")
    return Instance(tasks=specstate.model_values(path, "Tasks", values["Tasks"]), workers=workers,
                    max_concurrency=counts["MaxConcurrency"], max_attempts=counts["MaxAttempts"],
                    lease_time=counts["LeaseTime"], max_generation=counts["MaxGeneration"],
                    max_time=counts["MaxTime"], lose_answers=values["LoseAnswers"],
                    priorities=numbers["Priorities"], delays=numbers["Delays"],
                    aging=counts["Aging"], optional_edges=values["OptionalEdges"],
                    add_deps=values["AddDepsAllowed"])


def _is_no_worker(value: Any) -> bool:
    # ITF has no model values: a trace writes NoWorker as the string "NoWorker".
    return bool(value == NO_WORKER or value == NO_WORKER.name)


def spec_state(snapshot: DurableSnapshot, workers: Iterable[Hashable],
               tasks: Iterable[Hashable]) -> dict[str, Any]:
    """The spec's variables for ``snapshot`` over ``workers`` and ``tasks`` (supersets of the
    ids it names). Ids are written as given: pass ``ModelValue``s to get TLC's model values."""
    worker_ids, task_ids = list(workers), list(tasks)
    s = snapshot
    named_workers = set(s.held) | set(s.holder.values())
    named_tasks = (set(s.scheduler.tasks) | set(s.attempt) | set(s.holder) | set(s.deadline)
                   | set(s.ends) | set(s.ended_attempt) | set(s.due) | set(s.priority)
                   | {lease[0] for leases in s.held.values() for lease in leases})
    w_by_name = specstate.by_name(worker_ids, named_workers, "workers", "Workers")
    t_by_name = specstate.by_name(task_ids, named_tasks, "tasks", "Tasks")

    def task(name: Hashable) -> Any:
        return t_by_name[name]

    base = specstate.spec_state(s.scheduler, list(t_by_name))
    state: dict[str, Any] = {
        "started": base["started"], "closed": base["closed"], "nextSeq": base["nextSeq"],
    }
    for name in ("generation", "state", "remainingDeps", "cancelRequested", "seq"):
        state[name] = Function({task(t): v for t, v in base[name].items()})
    for name in ("deps", "optional"):
        state[name] = Function({task(t): frozenset(map(task, d)) for t, d in base[name].items()})
    state["blockedBy"] = Function({task(t): NO_TASK if b == NO_TASK else task(b)
                                   for t, b in base["blockedBy"].items()})
    names = list(t_by_name)
    state["attempt"] = Function({task(t): s.attempt.get(t, 0) for t in names})
    state["holder"] = Function({task(t): w_by_name[s.holder[t]] if t in s.holder else NO_WORKER
                                for t in names})
    state["deadline"] = Function({task(t): s.deadline.get(t, 0) for t in names})
    state["now"] = s.now
    state["held"] = Function({w: frozenset((task(t), g, a) for t, g, a in
                                           s.held.get(task_id(w), frozenset()))
                              for w in worker_ids})
    state["ends"] = Function({task(t): s.ends.get(t, 0) for t in names})
    state["endedAttempt"] = Function({task(t): s.ended_attempt.get(t, 0) for t in names})
    state["due"] = Function({task(t): s.due.get(t, 0) for t in names})
    state["priority"] = Function({task(t): s.priority.get(t, 0) for t in names})
    return {name: state[name] for name in SPEC_VARIABLES}


def _natural(where: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SpecStateError(f"{where} is {value!r}, not a natural number")
    return value


def _integer(where: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecStateError(f"{where} is {value!r}, not an integer")
    return value


def _lease(worker: Any, value: Any) -> tuple[Hashable, int, int]:
    if not isinstance(value, tuple) or len(value) != 3:
        raise SpecStateError(f"held[{worker!r}] has {value!r}, not a lease <<t, g, a>>")
    t, g, a = value
    where = f"the lease {value!r} of {worker!r}"
    return task_id(t), _natural(where, g), _natural(where, a)


def snapshot_of(state: Mapping[str, Any]) -> DurableSnapshot:
    """The DurableSnapshot a spec state stands for. Raises :class:`SpecStateError` if malformed."""
    specstate.require_variables(state, SPEC_VARIABLES)
    ids = specstate.task_ids(state)
    specstate.require_functions(state, _LEASE_VARIABLES, ids)
    attempt = {t: _natural(f"attempt[{t!r}]", state["attempt"][t]) for t in ids}
    deadline = {t: _natural(f"deadline[{t!r}]", state["deadline"][t]) for t in ids}
    ends = {t: _natural(f"ends[{t!r}]", state["ends"][t]) for t in ids}
    ended = {t: _natural(f"endedAttempt[{t!r}]", state["endedAttempt"][t]) for t in ids}
    due = {t: _natural(f"due[{t!r}]", state["due"][t]) for t in ids}
    priority = {t: _integer(f"priority[{t!r}]", state["priority"][t]) for t in ids}
    holder = {t: w for t, w in state["holder"].items() if not _is_no_worker(w)}
    for t in ids:
        if state["generation"][t] == 0 and (attempt[t] or deadline[t] or ends[t] or ended[t]
                                            or t in holder or due[t] or priority[t]):
            raise SpecStateError(f"id {t!r} has generation 0 but a lease or a due time: attempt "
                                 f"{attempt[t]}, holder {state['holder'][t]!r}, deadline "
                                 f"{deadline[t]}, ends {ends[t]}, endedAttempt {ended[t]}, "
                                 f"due {due[t]}, priority {priority[t]}")
    held = state["held"]
    if not isinstance(held, Mapping):
        raise SpecStateError(f"held is {held!r}, not a function")
    for w, leases in held.items():
        if not isinstance(leases, frozenset):
            raise SpecStateError(f"held[{w!r}] is {leases!r}, not a set")
    now = _natural("now", state["now"])
    claims = Function({t: 1 if attempt[t] > 0 else 0 for t in ids})
    scheduler = specstate.snapshot_of({**state, "claims": claims})
    return DurableSnapshot(
        scheduler=scheduler,
        attempt={task_id(t): n for t, n in attempt.items()},
        holder={task_id(t): task_id(w) for t, w in holder.items()},
        deadline={task_id(t): n for t, n in deadline.items()},
        now=now,
        held={task_id(w): frozenset(_lease(w, lease) for lease in leases)
              for w, leases in held.items()},
        ends={task_id(t): n for t, n in ends.items()},
        ended_attempt={task_id(t): n for t, n in ended.items()},
        due={task_id(t): n for t, n in due.items()},
        priority={task_id(t): n for t, n in priority.items()},
    )


def show(snapshot: DurableSnapshot) -> str:
    """A readable multi-line rendering of a state, for mismatch messages."""
    s = snapshot
    rows = [stategraph.show(s.scheduler), f"  now={s.now}"]
    for t in sorted(set(s.attempt) | set(s.holder) | set(s.ends), key=str):
        view = s.scheduler.tasks.get(t)
        running = view is not None and view.state is TaskState.RUNNING
        lease = (f"held by {s.holder[t]} until {s.deadline.get(t, 0)}" if t in s.holder
                 else "expired, waiting to be re-claimed" if running else "no live lease")
        ended = (f", ended by attempt {s.ended_attempt[t]}'s report" if t in s.ended_attempt
                 else "")
        rows.append(f"  {t}: attempt {s.attempt.get(t, 0)}, {lease}, ends {s.ends.get(t, 0)}"
                    f"{ended}")
    for t in sorted(set(s.due) | set(s.priority), key=str):
        rows.append(f"  {t}: due {s.due.get(t, 0)}, priority {s.priority.get(t, 0)}")
    for w in sorted(s.held, key=str):
        leases = ", ".join(f"<<{t}, {g}, {a}>>" for t, g, a in sorted(s.held[w], key=str))
        rows.append(f"  {w} holds {leases}")
    return "\n".join(rows)
