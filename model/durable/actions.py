"""The actions of ``spec/DurableScheduler.tla`` as pure functions over a :class:`DurableSnapshot`.

A durable state is the TaskScheduler's state (a :class:`~refsched.types.Snapshot`, read through
the spec's refinement mapping: a version's ``claims`` is 1 once it was given a lease) plus the
leases. The scheduler's actions are the TaskScheduler model's steps (``refsched.model.dag.actions``)
applied to that part, with the lease variables reset where a new version starts; the lease
actions are written here.

Each action is an :class:`Action`: ``refusal(s, ..., limits=...)`` (``None`` when the action is
enabled, else why not: the error the API raises, or no error when there is simply no step to
take) and ``step(s, ..., limits=...)`` (the next state; only called when enabled). ``limits``
holds the spec's constants (``MaxConcurrency``, ``MaxAttempts``, ``LeaseTime``, ``LoseAnswers``,
``Priorities``, ``Delays``, ``Aging``, ``OptionalEdges``, ``AddDepsAllowed``). A claim takes the
first eligible versions (ready and due) in the claim order of docs/time.md (:func:`claim_order`).
SubmitOptional and AddDeps are the TaskScheduler model's too, each a step only where its
constant allows it (``EDGE_ACTIONS``).
:func:`claim_transaction` is the composite one claim transaction of the implementation performs
(expire, re-claim, claim), returning the spec steps it took. No threads, clocks or I/O: the store's
clock is the state's ``now``. The code favours being obviously the spec over being fast.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from types import MappingProxyType
from typing import Any

from refsched.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    LeaseLostError,
    SchedulerError,
    StaleLeaseError,
    UnknownTaskError,
)
from refsched.types import Snapshot, TaskState

from ..dag import actions as scheduler
from ..dag.actions import Refusal

__all__ = [
    "ACTIONS",
    "ANSWER_LOST",
    "EDGE_ACTIONS",
    "INITIAL",
    "RECORDING",
    "Action",
    "DurableSnapshot",
    "Lease",
    "Limits",
    "Refusal",
    "Step",
    "before",
    "claim_order",
    "claim_transaction",
    "claim_versions",
    "current",
    "eligible",
    "generation_of",
    "initial",
    "lease_of",
    "live",
    "repeat",
]

RUNNING = TaskState.RUNNING

Lease = tuple[Hashable, int, int]
"""A lease as the spec writes it: ``<<t, g, a>>``, task id, generation, attempt."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The spec's constants the actions read."""

    max_concurrency: int  # MaxConcurrency >= 1: how many versions may run at once
    max_attempts: int  # MaxAttempts >= 1: leases a version may be given before expiry fails it
    lease_time: int  # LeaseTime >= 1: how long a lease lasts from its claim or heartbeat
    lose_answers: bool = True  # LoseAnswers: a committed claim or report may lose its answer
    priorities: tuple[int, ...] = (0,)  # Priorities: those a Submit may give, higher first
    delays: tuple[int, ...] = (0,)  # Delays: those a Submit may give, in ticks, each >= 0
    aging: int = 0  # Aging >= 0: ticks of waiting worth one priority level; 0 = strict priority
    optional_edges: bool = False  # OptionalEdges: SubmitOptional and AddDeps make optional edges
    add_deps: bool = False  # AddDepsAllowed: AddDeps may add edges to a pending version

    @property
    def oldest_first(self) -> bool:
        """The refinement mapping's ``OldestFirst``: with neither priorities nor delays the
        claim order is the TaskScheduler's, smallest seq first."""
        return set(self.priorities) == {0} and set(self.delays) == {0}


def _frozen(mapping: Mapping[Hashable, Any], drop: Callable[[Any], bool]) -> Mapping[Hashable, Any]:
    return MappingProxyType({k: v for k, v in mapping.items() if not drop(v)})


@dataclass(frozen=True, eq=False)
class DurableSnapshot:
    """An immutable value shaped like ``spec/DurableScheduler.tla``'s variables; compare with ==.

    ``scheduler`` holds Scheduler's variables under the refinement mapping. Of the lease
    variables only what differs from the spec's ``Init`` is listed: an id with attempt 0 has no
    ``attempt`` entry, no live lease no ``holder`` entry, deadline 0 no ``deadline`` entry, no
    accepted end no ``ends`` entry, no report that ended the version no ``ended_attempt`` entry, a
    worker holding nothing no ``held`` entry, due 0 (due at time 0, or no longer waiting) no
    ``due`` entry, priority 0 no ``priority`` entry. So the value does
    not depend on the instance's ``Tasks`` and ``Workers``; :mod:`refsched.verify.durable.spec`
    adds them back.
    """

    scheduler: Snapshot = field(default_factory=Snapshot)  # claims == min(attempt, 1) per id
    attempt: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> leases given, 1..MaxAttempts
    holder: Mapping[Hashable, Hashable] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> worker of its live lease (running)
    deadline: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> when its live lease ends
    now: int = 0  # the store's clock
    held: Mapping[Hashable, frozenset[Lease]] = field(
        default_factory=lambda: MappingProxyType({}))  # worker -> the leases it believes it holds
    ends: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> accepted ends of its version, <= 1
    ended_attempt: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> attempt whose report ended it
    due: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # waiting task -> when it may be claimed
    priority: Mapping[Hashable, int] = field(
        default_factory=lambda: MappingProxyType({}))  # task -> its version's priority
    _key: tuple[Any, ...] = field(init=False, repr=False)
    _hash: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Normal form, so that == is the spec's equality: no zero, no empty set of leases.
        object.__setattr__(self, "attempt", _frozen(self.attempt, lambda n: n == 0))
        object.__setattr__(self, "holder", _frozen(self.holder, lambda w: False))
        object.__setattr__(self, "deadline", _frozen(self.deadline, lambda n: n == 0))
        object.__setattr__(self, "ends", _frozen(self.ends, lambda n: n == 0))
        object.__setattr__(self, "ended_attempt", _frozen(self.ended_attempt, lambda n: n == 0))
        object.__setattr__(self, "due", _frozen(self.due, lambda n: n == 0))
        object.__setattr__(self, "priority", _frozen(self.priority, lambda n: n == 0))
        held = {w: frozenset(leases) for w, leases in self.held.items()}
        object.__setattr__(self, "held", _frozen(held, lambda leases: not leases))
        key = (self.scheduler, self.now, frozenset(self.attempt.items()),
               frozenset(self.holder.items()), frozenset(self.deadline.items()),
               frozenset(self.held.items()), frozenset(self.ends.items()),
               frozenset(self.ended_attempt.items()), frozenset(self.due.items()),
               frozenset(self.priority.items()))
        object.__setattr__(self, "_key", key)  # a graph search hashes each state many times
        object.__setattr__(self, "_hash", hash(key))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DurableSnapshot):
            return NotImplemented
        return self._hash == other._hash and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def replace(self, **changes: Any) -> DurableSnapshot:
        """A copy with some fields replaced (mappings may be any mapping)."""
        fields = {name: getattr(self, name) for name in (
            "scheduler", "attempt", "holder", "deadline", "now", "held", "ends",
            "ended_attempt", "due", "priority")}
        return DurableSnapshot(**{**fields, **changes})


@dataclass(frozen=True, slots=True)
class Step:
    """One spec step: ``action(params)``, parameters named as in the spec, in its order."""

    action: str
    params: tuple[tuple[str, Any], ...]

    @property
    def param_map(self) -> dict[str, Any]:
        return dict(self.params)


# -- Queries over a state (the spec's operators) ----------------------------------------------

def generation_of(s: DurableSnapshot, task: Hashable) -> int:
    """``generation[t]``: 0 for an id never submitted."""
    view = s.scheduler.tasks.get(task)
    return 0 if view is None else view.generation


def lease_of(s: DurableSnapshot, task: Hashable) -> Lease:
    """Spec ``Lease(t)``: the lease of the current attempt of ``task``'s current version."""
    return (task, generation_of(s, task), s.attempt.get(task, 0))


def live(s: DurableSnapshot, task: Hashable) -> bool:
    """Spec ``Live(t)``: the current version runs under a live lease."""
    view = s.scheduler.tasks.get(task)
    return view is not None and view.state is RUNNING and task in s.holder


def current(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
            attempt: int) -> bool:
    """Spec ``Current(w, t, g, a)``: the lease is the live one; the store accepts its reports."""
    view = s.scheduler.tasks.get(task)
    return (view is not None and generation == view.generation
            and attempt == s.attempt.get(task, 0) and view.state is RUNNING
            and s.holder.get(task) == worker)


def repeat(s: DurableSnapshot, task: Hashable, generation: int, attempt: int) -> bool:
    """Spec ``Repeat(t, g, a)``: a report with this lease repeats the one that ended the
    version; the store answers it and changes nothing."""
    view = s.scheduler.tasks.get(task)
    return (view is not None and generation == view.generation
            and attempt == s.ended_attempt.get(task, 0)
            and view.state.is_terminal)


def _waiting(s: DurableSnapshot, task: Hashable) -> bool:
    view = s.scheduler.tasks.get(task)
    return view is not None and view.state in scheduler.WAITING


def eligible(s: DurableSnapshot) -> list[Hashable]:
    """Spec ``Eligible``: the ready versions that are due (``due <= now``), in no order."""
    return [t for t, v in s.scheduler.tasks.items()
            if v.state is TaskState.READY and s.due.get(t, 0) <= s.now]


def before(s: DurableSnapshot, x: Hashable, y: Hashable, limits: Limits) -> bool:
    """Spec ``Before(x, y)``: ``x`` comes before ``y`` in the claim order."""
    return _claim_key(s, x, limits) < _claim_key(s, y, limits)


def _claim_key(s: DurableSnapshot, task: Hashable, limits: Limits) -> tuple[int, ...]:
    """Smallest first: with aging ``A``, ``(-(priority * A - due), seq)``; without,
    ``(-priority, due, seq)`` (docs/time.md)."""
    priority, due = s.priority.get(task, 0), s.due.get(task, 0)
    seq = s.scheduler.tasks[task].seq
    if limits.aging > 0:
        return (due - priority * limits.aging, seq)
    return (-priority, due, seq)


def claim_order(s: DurableSnapshot, limits: Limits) -> list[Hashable]:
    """The eligible versions, first to be claimed first: Claim(w, k) takes the first k."""
    return sorted(eligible(s), key=lambda t: _claim_key(s, t, limits))


def _due_while_waiting(after: DurableSnapshot, due: Mapping[Hashable, int]) -> dict[Hashable, int]:
    """Spec ``DueWhileWaiting(d)``: ``due`` for the versions that wait in ``after``."""
    return {t: d for t, d in due.items() if _waiting(after, t)}


def _holds(s: DurableSnapshot, worker: Hashable, lease: Lease) -> bool:
    return lease in s.held.get(worker, frozenset())


def _without(mapping: Mapping[Hashable, Any], keys: Iterable[Hashable]) -> dict[Hashable, Any]:
    drop = set(keys)
    return {k: v for k, v in mapping.items() if k not in drop}


def _add_leases(s: DurableSnapshot, worker: Hashable,
                leases: Iterable[Lease]) -> dict[Hashable, frozenset[Lease]]:
    return {**s.held, worker: s.held.get(worker, frozenset()) | frozenset(leases)}


def _drop_lease(s: DurableSnapshot, worker: Hashable,
                lease: Lease) -> dict[Hashable, frozenset[Lease]]:
    return {**s.held, worker: s.held.get(worker, frozenset()) - {lease}}


def _end_lease(s: DurableSnapshot, task: Hashable, scheduler_state: Snapshot,
               reported: int = 0) -> DurableSnapshot:
    """The live lease of ``task`` ends with an accepted end of its version; ``reported`` is
    the attempt whose report ended it (0 for an expiry)."""
    return _settled(s, scheduler_state).replace(
        holder=_without(s.holder, [task]), deadline=_without(s.deadline, [task]),
        ends={**s.ends, task: s.ends.get(task, 0) + 1},
        ended_attempt={**s.ended_attempt, task: reported})


# -- The actions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    """A spec action: its name, its parameters' names in the spec, when it is enabled, its step.

    ``refusal(s, *args, limits=...)`` and ``effect(s, *args, limits=...)`` take the parameters in
    the order of ``params``, and the instance's :class:`Limits`.
    """

    name: str
    params: tuple[str, ...]
    refusal: Callable[..., Refusal | None]
    effect: Callable[..., DurableSnapshot]
    # parameter -> its value when a step does not name it (a Submit recorded without p, d)
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def arguments(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional arguments of ``refusal`` / ``step`` for a step's named parameters."""
        return tuple(params[p] if p in params else self.defaults[p] for p in self.params)

    def refused(self, s: DurableSnapshot, *args: Any, limits: Limits) -> Refusal | None:
        return self.refusal(s, *args, limits=limits)

    def enabled(self, s: DurableSnapshot, *args: Any, limits: Limits) -> bool:
        return self.refused(s, *args, limits=limits) is None

    def step(self, s: DurableSnapshot, *args: Any, limits: Limits) -> DurableSnapshot:
        return self.effect(s, *args, limits=limits)


# The scheduler's actions: the TaskScheduler model's, on the scheduler part.

def _time_refusal(task: Hashable, priority: int, delay: int) -> Refusal | None:
    call = f"submit({task!r})"
    if isinstance(priority, bool) or not isinstance(priority, int):
        return Refusal(InvalidArgumentError, f"{call}: priority must be an int, not {priority!r}")
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        return Refusal(InvalidArgumentError, f"{call}: delay must be an int >= 0, not {delay!r}")
    return None


def submit_refusal(s: DurableSnapshot, task: Hashable, deps: frozenset[Hashable],
                   priority: int = 0, delay: int = 0, *, limits: Limits) -> Refusal | None:
    return (_time_refusal(task, priority, delay)
            or scheduler.submit_refusal(s.scheduler, task, deps))


def _fresh_version(s: DurableSnapshot, task: Hashable, scheduler_state: Snapshot, priority: int,
                   delay: int) -> DurableSnapshot:
    """Spec ``FreshLease(t, p)`` with Scheduler's step to ``scheduler_state``: the new version
    of ``task`` was never claimed, has ``priority`` and is due ``delay`` ticks from now."""
    # A running version cannot be replaced, so task had no live lease.
    after = s.replace(scheduler=scheduler_state,
                      attempt=_without(s.attempt, [task]), holder=_without(s.holder, [task]),
                      deadline=_without(s.deadline, [task]), ends=_without(s.ends, [task]),
                      ended_attempt=_without(s.ended_attempt, [task]),
                      priority={**s.priority, task: priority})
    return after.replace(due=_due_while_waiting(after, {**s.due, task: s.now + delay}))


def submit_effect(s: DurableSnapshot, task: Hashable, deps: frozenset[Hashable],
                  priority: int = 0, delay: int = 0, *, limits: Limits) -> DurableSnapshot:
    return _fresh_version(s, task, scheduler.submit_step(s.scheduler, task, deps), priority,
                          delay)


def submit_optional_refusal(s: DurableSnapshot, task: Hashable, deps: frozenset[Hashable],
                            optional: frozenset[Hashable], priority: int = 0, delay: int = 0, *,
                            limits: Limits) -> Refusal | None:
    if not limits.optional_edges:
        return Refusal(None, "no optional edge in this instance (OptionalEdges is FALSE)")
    return (_time_refusal(task, priority, delay)
            or scheduler.submit_optional_refusal(s.scheduler, task, deps, optional))


def submit_optional_effect(s: DurableSnapshot, task: Hashable, deps: frozenset[Hashable],
                           optional: frozenset[Hashable], priority: int = 0, delay: int = 0, *,
                           limits: Limits) -> DurableSnapshot:
    return _fresh_version(
        s, task, scheduler.submit_optional_step(s.scheduler, task, deps, optional), priority,
        delay)


def add_deps_refusal(s: DurableSnapshot, task: Hashable, deps: frozenset[Hashable],
                     optional: frozenset[Hashable], *, limits: Limits) -> Refusal | None:
    if not limits.add_deps:
        return Refusal(None, "no edge is added in this instance (AddDepsAllowed is FALSE)")
    if optional and not limits.optional_edges:
        return Refusal(None, "no optional edge in this instance (OptionalEdges is FALSE)")
    return scheduler.add_deps_refusal(s.scheduler, task, deps, optional)


def add_deps_effect(s: DurableSnapshot, task: Hashable, deps: frozenset[Hashable],
                    optional: frozenset[Hashable], *, limits: Limits) -> DurableSnapshot:
    # One transaction: the version is pending (its refusal read that), so it has no lease;
    # Settle may block it, which ends its wait and its due time.
    return _settled(s, scheduler.add_deps_step(s.scheduler, task, deps, optional))


def start_refusal(s: DurableSnapshot, *, limits: Limits) -> Refusal | None:
    return scheduler.start_refusal(s.scheduler)


def start_effect(s: DurableSnapshot, *, limits: Limits) -> DurableSnapshot:
    return s.replace(scheduler=scheduler.start_step(s.scheduler))


def cancel_refusal(s: DurableSnapshot, task: Hashable, *, limits: Limits) -> Refusal | None:
    return scheduler.cancel_refusal(s.scheduler, task)


def cancel_effect(s: DurableSnapshot, task: Hashable, *, limits: Limits) -> DurableSnapshot:
    return _settled(s, scheduler.cancel_step(s.scheduler, task))


def _settled(s: DurableSnapshot, scheduler_state: Snapshot) -> DurableSnapshot:
    """``s`` with Scheduler's step to ``scheduler_state``: the versions that no longer wait
    lose their due time."""
    after = s.replace(scheduler=scheduler_state)
    return after.replace(due=_due_while_waiting(after, s.due))


def retry_refusal(s: DurableSnapshot, task: Hashable, *, limits: Limits) -> Refusal | None:
    return scheduler.retry_refusal(s.scheduler, task)


def retry_effect(s: DurableSnapshot, task: Hashable, *, limits: Limits) -> DurableSnapshot:
    # Every member is dead, so none has a live lease; each new version was never claimed.
    # Each keeps its priority and is due at once.
    members = scheduler.retry_set(s.scheduler.tasks, task)
    after = s.replace(scheduler=scheduler.retry_step(s.scheduler, task),
                      attempt=_without(s.attempt, members), ends=_without(s.ends, members),
                      ended_attempt=_without(s.ended_attempt, members))
    return after.replace(due=_due_while_waiting(after, {**s.due,
                                                        **{t: s.now for t in members}}))


def close_refusal(s: DurableSnapshot, cancel_pending: bool, *, limits: Limits) -> Refusal | None:
    return scheduler.close_refusal(s.scheduler, cancel_pending)


def close_effect(s: DurableSnapshot, cancel_pending: bool, *, limits: Limits) -> DurableSnapshot:
    return _settled(s, scheduler.close_step(s.scheduler, cancel_pending))


def repeated_callback_refusal(s: DurableSnapshot, task: Hashable, *,
                              limits: Limits) -> Refusal | None:
    return scheduler.repeated_callback_refusal(s.scheduler, task)


def _unchanged(s: DurableSnapshot, *args: Any, limits: Limits) -> DurableSnapshot:
    return s


# Claims and leases.

def claim_refusal(s: DurableSnapshot, worker: Hashable, k: int, *,
                  limits: Limits) -> Refusal | None:
    refusal = scheduler.claim_refusal(s.scheduler, k, limits.max_concurrency)
    if refusal is not None:
        return dc_replace(refusal,
                          reason=refusal.reason.replace("ready()", f"claim({worker!r})", 1))
    due = len(eligible(s))
    if k > due:
        return Refusal(None, f"claim({worker!r}): cannot claim {k}, {due} ready and due")
    return None


def chosen(s: DurableSnapshot, k: int, limits: Limits) -> list[Hashable]:
    """Spec ``Chosen(k)``: the first ``k`` eligible versions in the claim order."""
    return claim_order(s, limits)[:k]


def claim_effect(s: DurableSnapshot, worker: Hashable, k: int, *,
                 limits: Limits) -> DurableSnapshot:
    return claim_versions(s, worker, chosen(s, k, limits), limits=limits)


def claim_versions(s: DurableSnapshot, worker: Hashable, taken: Iterable[Hashable], *,
                   limits: Limits) -> DurableSnapshot:
    """The store's change of a claim by ``worker`` of exactly the ready versions ``taken``:
    Claim's step once it has chosen them (a test builds a claim of the wrong ones with it)."""
    taken = list(taken)
    until = s.now + limits.lease_time
    tasks = dict(s.scheduler.tasks)
    for t in taken:
        tasks[t] = dc_replace(tasks[t], state=RUNNING, claims=tasks[t].claims + 1)
    return s.replace(
        scheduler=s.scheduler.replace(tasks=tasks),
        due=_without(s.due, taken),
        attempt={**s.attempt, **{t: 1 for t in taken}},
        holder={**s.holder, **{t: worker for t in taken}},
        deadline={**s.deadline, **{t: until for t in taken}},
        held=_add_leases(s, worker, [(t, generation_of(s, t), 1) for t in taken]),
    )


def claim_answer_lost_effect(s: DurableSnapshot, worker: Hashable, k: int, *,
                             limits: Limits) -> DurableSnapshot:
    """``Claim(w, k)`` committed, its answer lost: the store's change, ``held`` unchanged."""
    return claim_effect(s, worker, k, limits=limits).replace(held=s.held)


def reclaim_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable, *,
                    limits: Limits) -> Refusal | None:
    call = f"claim({worker!r}): re-claim {task!r}"
    view = s.scheduler.tasks.get(task)
    if view is None or view.state is not RUNNING:
        state = "absent" if view is None else view.state.value
        return Refusal(None, f"{call}: the version is {state}, not running")
    if task in s.holder:
        return Refusal(None, f"{call}: {s.holder[task]!r} holds its live lease")
    if s.attempt.get(task, 0) >= limits.max_attempts:
        return Refusal(None, f"{call}: it had its {limits.max_attempts} attempts")
    return None


def reclaim_effect(s: DurableSnapshot, worker: Hashable, task: Hashable, *,
                   limits: Limits) -> DurableSnapshot:
    attempt = s.attempt.get(task, 0) + 1
    return s.replace(attempt={**s.attempt, task: attempt}, holder={**s.holder, task: worker},
                     deadline={**s.deadline, task: s.now + limits.lease_time},
                     held=_add_leases(s, worker, [(task, generation_of(s, task), attempt)]))


def reclaim_answer_lost_effect(s: DurableSnapshot, worker: Hashable, task: Hashable, *,
                               limits: Limits) -> DurableSnapshot:
    """``Reclaim(w, t)`` committed, its answer lost: the attempt is spent on a lease nobody
    runs."""
    return reclaim_effect(s, worker, task, limits=limits).replace(held=s.held)


def _report_refusal(s: DurableSnapshot, call: str, error: type[SchedulerError],
                    worker: Hashable, task: Hashable, generation: int,
                    attempt: int) -> Refusal | None:
    """Refusals shared by the reports made with a lease (Heartbeat, Complete, Fail,
    AcknowledgeCancel): the API's ``error`` for a lease that is not the live one."""
    call = f"{call}(<<{task!r}, {generation}, {attempt}>>)"
    view = s.scheduler.tasks.get(task)
    if view is None:
        return Refusal(UnknownTaskError, f"{call}: unknown task")
    latest = s.attempt.get(task, 0)
    if generation != view.generation:
        return Refusal(error, f"{call}: generation {generation} is stale, "
                       f"current is {view.generation}")
    if attempt != latest:
        return Refusal(error, f"{call}: attempt {attempt} is stale, current is {latest}")
    if view.state is not RUNNING:
        return Refusal(error, f"{call}: the version is {view.state.value}, not running")
    if s.holder.get(task) != worker:
        return Refusal(error, f"{call}: the lease expired")
    if not _holds(s, worker, (task, generation, attempt)):
        return Refusal(None, f"{call}: worker {worker!r} does not hold the lease")
    return None


def heartbeat_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                      attempt: int, *, limits: Limits) -> Refusal | None:
    return _report_refusal(s, "heartbeat", LeaseLostError, worker, task, generation, attempt)


def heartbeat_effect(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                     attempt: int, *, limits: Limits) -> DurableSnapshot:
    return s.replace(deadline={**s.deadline, task: s.now + limits.lease_time})


def complete_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                     attempt: int, *, limits: Limits) -> Refusal | None:
    return _report_refusal(s, "complete", StaleLeaseError, worker, task, generation, attempt)


def complete_effect(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                    attempt: int, *, limits: Limits) -> DurableSnapshot:
    s = s.replace(held=_drop_lease(s, worker, (task, generation, attempt)))
    return _end_lease(s, task, scheduler.complete_step(s.scheduler, task, generation), attempt)


def complete_answer_lost_effect(s: DurableSnapshot, worker: Hashable, task: Hashable,
                               generation: int, attempt: int, *,
                               limits: Limits) -> DurableSnapshot:
    """The report committed and its answer was lost: the worker keeps the lease."""
    return complete_effect(s, worker, task, generation, attempt, limits=limits).replace(held=s.held)


def fail_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                 attempt: int, *, limits: Limits) -> Refusal | None:
    return _report_refusal(s, "fail", StaleLeaseError, worker, task, generation, attempt)


def fail_effect(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                attempt: int, *, limits: Limits) -> DurableSnapshot:
    s = s.replace(held=_drop_lease(s, worker, (task, generation, attempt)))
    return _end_lease(s, task, scheduler.fail_step(s.scheduler, task, generation), attempt)


def fail_answer_lost_effect(s: DurableSnapshot, worker: Hashable, task: Hashable,
                               generation: int, attempt: int, *,
                               limits: Limits) -> DurableSnapshot:
    """The report committed and its answer was lost: the worker keeps the lease."""
    return fail_effect(s, worker, task, generation, attempt, limits=limits).replace(held=s.held)


def acknowledge_cancel_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable,
                               generation: int, attempt: int, *,
                               limits: Limits) -> Refusal | None:
    return _report_refusal(s, "acknowledge_cancel", StaleLeaseError, worker, task, generation,
                           attempt)


def acknowledge_cancel_effect(s: DurableSnapshot, worker: Hashable, task: Hashable,
                              generation: int, attempt: int, *,
                              limits: Limits) -> DurableSnapshot:
    s = s.replace(held=_drop_lease(s, worker, (task, generation, attempt)))
    return _end_lease(s, task,
                      scheduler.acknowledge_cancel_step(s.scheduler, task, generation), attempt)


def acknowledge_cancel_answer_lost_effect(s: DurableSnapshot, worker: Hashable, task: Hashable,
                               generation: int, attempt: int, *,
                               limits: Limits) -> DurableSnapshot:
    """The report committed and its answer was lost: the worker keeps the lease."""
    after = acknowledge_cancel_effect(s, worker, task, generation, attempt, limits=limits)
    return after.replace(held=s.held)


def refused_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                    attempt: int, *, limits: Limits) -> Refusal | None:
    lease = f"<<{task!r}, {generation}, {attempt}>>"
    if not _holds(s, worker, (task, generation, attempt)):
        return Refusal(None, f"worker {worker!r} does not hold the lease {lease}")
    if current(s, worker, task, generation, attempt):
        return Refusal(None, f"the lease {lease} of {worker!r} is live: its reports are taken")
    if repeat(s, task, generation, attempt):
        return Refusal(None, f"the lease {lease} ended the version: its report is answered")
    return None


def refused_effect(s: DurableSnapshot, worker: Hashable, task: Hashable, generation: int,
                   attempt: int, *, limits: Limits) -> DurableSnapshot:
    return s.replace(held=_drop_lease(s, worker, (task, generation, attempt)))


def repeated_report_refusal(s: DurableSnapshot, worker: Hashable, task: Hashable,
                            generation: int, attempt: int, *, limits: Limits) -> Refusal | None:
    lease = f"<<{task!r}, {generation}, {attempt}>>"
    if not _holds(s, worker, (task, generation, attempt)):
        return Refusal(None, f"worker {worker!r} does not hold the lease {lease}")
    if not repeat(s, task, generation, attempt):
        return Refusal(None, f"no report with the lease {lease} ended the version")
    return None


def expire_refusal(s: DurableSnapshot, task: Hashable, *, limits: Limits) -> Refusal | None:
    if not live(s, task):
        return Refusal(None, f"expire({task!r}): no live lease")
    if s.deadline.get(task, 0) >= s.now:
        return Refusal(None, f"expire({task!r}): the lease lasts until {s.deadline.get(task, 0)}, "
                       f"now is {s.now}")
    return None


def expire_effect(s: DurableSnapshot, task: Hashable, *, limits: Limits) -> DurableSnapshot:
    if s.attempt.get(task, 0) < limits.max_attempts:
        return s.replace(holder=_without(s.holder, [task]), deadline=_without(s.deadline, [task]))
    # The last attempt's lease expired: the version fails ("lease expired MaxAttempts times").
    return _end_lease(s, task,
                      scheduler.fail_step(s.scheduler, task, generation_of(s, task)))


def tick_refusal(s: DurableSnapshot, *, limits: Limits) -> Refusal | None:
    if any(live(s, t) and s.deadline.get(t, 0) >= s.now for t in s.holder):
        return None
    if any(s.due.get(t, 0) + lead(s, t, limits) > s.now and _waiting(s, t)
           for t in s.scheduler.tasks):
        return None
    return Refusal(None, "tick: no live lease has yet to pass its deadline, no waiting "
                   "version is yet to be due or, with aging, to come before every arrival")


def lead(s: DurableSnapshot, task: Hashable, limits: Limits) -> int:
    """Spec ``Lead(t)``: how long the version of ``task`` must have been due to come before
    every version yet to arrive; 0 without aging."""
    return (max(limits.priorities) - s.priority.get(task, 0)) * limits.aging


def tick_effect(s: DurableSnapshot, *, limits: Limits) -> DurableSnapshot:
    return s.replace(now=s.now + 1)


def crash_refusal(s: DurableSnapshot, worker: Hashable, *, limits: Limits) -> Refusal | None:
    if not s.held.get(worker):
        return Refusal(None, f"crash({worker!r}): the worker holds no lease")
    return None


def crash_effect(s: DurableSnapshot, worker: Hashable, *, limits: Limits) -> DurableSnapshot:
    return s.replace(held=_without(s.held, [worker]))


_LEASE = ("w", "t", "g", "a")

Submit = Action("Submit", ("t", "D", "p", "d"), submit_refusal, submit_effect,
                MappingProxyType({"p": 0, "d": 0}))
SubmitOptional = Action("SubmitOptional", ("t", "D", "O", "p", "d"), submit_optional_refusal,
                        submit_optional_effect, MappingProxyType({"p": 0, "d": 0}))
AddDeps = Action("AddDeps", ("t", "D", "O"), add_deps_refusal, add_deps_effect)
Start = Action("Start", (), start_refusal, start_effect)
Claim = Action("Claim", ("w", "k"), claim_refusal, claim_effect)
Reclaim = Action("Reclaim", ("w", "t"), reclaim_refusal, reclaim_effect)
Heartbeat = Action("Heartbeat", _LEASE, heartbeat_refusal, heartbeat_effect)
Complete = Action("Complete", _LEASE, complete_refusal, complete_effect)
Fail = Action("Fail", _LEASE, fail_refusal, fail_effect)
AcknowledgeCancel = Action("AcknowledgeCancel", _LEASE, acknowledge_cancel_refusal,
                           acknowledge_cancel_effect)
Refused = Action("Refused", _LEASE, refused_refusal, refused_effect)
RepeatedReport = Action("RepeatedReport", _LEASE, repeated_report_refusal, refused_effect)


def _losing(refusal: Callable[..., Refusal | None]) -> Callable[..., Refusal | None]:
    """The refusal of a step whose answer is lost: the step's own, and none unless the
    instance's ``LoseAnswers``."""
    def refused(s: DurableSnapshot, *args: Any, limits: Limits) -> Refusal | None:
        if not limits.lose_answers:
            return Refusal(None, "no answer is lost in this instance (LoseAnswers is FALSE)")
        return refusal(s, *args, limits=limits)
    return refused


ClaimAnswerLost = Action("ClaimAnswerLost", ("w", "k"), _losing(claim_refusal),
                         claim_answer_lost_effect)
ReclaimAnswerLost = Action("ReclaimAnswerLost", ("w", "t"), _losing(reclaim_refusal),
                           reclaim_answer_lost_effect)
CompleteAnswerLost = Action("CompleteAnswerLost", _LEASE, _losing(complete_refusal),
                            complete_answer_lost_effect)
FailAnswerLost = Action("FailAnswerLost", _LEASE, _losing(fail_refusal),
                        fail_answer_lost_effect)
AcknowledgeCancelAnswerLost = Action("AcknowledgeCancelAnswerLost", _LEASE,
                                     _losing(acknowledge_cancel_refusal),
                                     acknowledge_cancel_answer_lost_effect)
Expire = Action("Expire", ("t",), expire_refusal, expire_effect)
Tick = Action("Tick", (), tick_refusal, tick_effect)
Crash = Action("Crash", ("w",), crash_refusal, crash_effect)
Cancel = Action("Cancel", ("t",), cancel_refusal, cancel_effect)
Retry = Action("Retry", ("t",), retry_refusal, retry_effect)
Close = Action("Close", ("cancelPending",), close_refusal, close_effect)
RepeatedCallback = Action("RepeatedCallback", ("t",), repeated_callback_refusal, _unchanged)

ACTIONS: dict[str, Action] = {a.name: a for a in (
    Submit, Start, Claim, Reclaim, Heartbeat, Complete, Fail, AcknowledgeCancel, Refused,
    Expire, Tick, Crash, Cancel, Retry, Close, RepeatedCallback, RepeatedReport,
    ClaimAnswerLost, ReclaimAnswerLost, CompleteAnswerLost, FailAnswerLost,
    AcknowledgeCancelAnswerLost, SubmitOptional, AddDeps,
)}

EDGE_ACTIONS = ("SubmitOptional", "AddDeps")
"""The steps of ``Next`` the constants ``OptionalEdges`` and ``AddDepsAllowed`` gate: an
instance with both off has none of them."""

ANSWER_LOST = ("ClaimAnswerLost", "ReclaimAnswerLost", "CompleteAnswerLost", "FailAnswerLost",
               "AcknowledgeCancelAnswerLost")
"""The steps of ``Next`` taken only when ``LoseAnswers``: a committed transaction whose answer
never reached its worker."""


def initial(record_provenance: bool = False) -> DurableSnapshot:
    """Spec ``Init``: Scheduler's Init, no lease anywhere, the clock at 0; with
    ``record_provenance`` (the spec's ``RecordProvenance``) the scheduler part records the
    provenance, which Scheduler's steps keep from then on (else it is None, as it always was)."""
    if record_provenance:
        return DurableSnapshot(scheduler=scheduler.RECORDING)
    return DurableSnapshot()


INITIAL = initial()
"""Spec ``Init``."""

RECORDING = initial(record_provenance=True)
"""Spec ``Init`` with ``RecordProvenance``: no record yet, and records kept."""


# -- The claim transaction --------------------------------------------------------------------

def _take(s: DurableSnapshot, steps: list[Step], name: str, limits: Limits,
          **params: Any) -> DurableSnapshot:
    action = ACTIONS[name]
    args = action.arguments(params)
    refusal = action.refused(s, *args, limits=limits)
    assert refusal is None, refusal  # each step is chosen only when enabled
    steps.append(Step(name, tuple(params.items())))
    return action.step(s, *args, limits=limits)


def _by_seq(s: DurableSnapshot, tasks: Iterable[Hashable]) -> list[Hashable]:
    return sorted(tasks, key=lambda t: s.scheduler.tasks[t].seq)


def claim_transaction(s: DurableSnapshot, worker: Hashable, limit: int, *,
                      limits: Limits) -> tuple[DurableSnapshot, list[Step]]:
    """What one ``claim(worker, limit, lease)`` transaction does, as spec steps.

    First every live lease past its deadline expires (``Expire``), in seq order; then versions
    running with no live lease and attempts left are re-claimed by ``worker`` (``Reclaim``), in
    seq order, at most ``limit``; then ``Claim(worker, k)`` takes the first ``k`` eligible
    versions in the claim order, ``k = min(limit - reclaimed, eligible, MaxConcurrency -
    running)``, when ``k >= 1`` and the scheduler is open. Returns the state after, and the
    steps taken, in order; the versions ``worker`` now runs are its new leases in ``held``.

    Raises ``InvalidArgumentError`` when ``limit < 1`` and ``InvalidTransitionError`` before
    ``start()``; nothing changes then.
    """
    call = f"claim({worker!r}, {limit})"
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError(f"{call}: limit must be an int >= 1")
    if not s.scheduler.started:
        raise InvalidTransitionError(f"{call}: start() has not been called")
    steps: list[Step] = []
    for t in _by_seq(s, [t for t in s.holder if ACTIONS["Expire"].enabled(s, t, limits=limits)]):
        s = _take(s, steps, "Expire", limits, t=t)
    reclaimable = [t for t in s.scheduler.tasks
                   if ACTIONS["Reclaim"].enabled(s, worker, t, limits=limits)]
    reclaimed = _by_seq(s, reclaimable)[:limit]
    for t in reclaimed:
        s = _take(s, steps, "Reclaim", limits, w=worker, t=t)
    if not s.scheduler.closed:
        k = min(limit - len(reclaimed), len(eligible(s)),
                limits.max_concurrency - scheduler.running_count(s.scheduler.tasks))
        if k >= 1:
            s = _take(s, steps, "Claim", limits, w=worker, k=k)
    return s, steps
