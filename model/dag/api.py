"""The reference model behind the production API: ``ReferenceScheduler``.

It has the methods, arguments, results and errors of ``refsched.TaskScheduler``, and each call
is one step of an action of ``model.actions`` (or none): optional edges
(``submit(..., optional=...)``, spec SubmitOptional) and ``add_deps`` (spec AddDeps) included.
It is single-threaded and keeps the action history, so it serves as the oracle that production
code and other implementations are compared with.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    SchedulerError,
    StaleGenerationError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import Claim, CloseReport, Provenance, Snapshot, TaskInfo, TaskState
from refsched.values import check_note as _check_note
from refsched.values import is_int as _is_int

from . import actions as A
from .actions import Action, Refusal
from .invariants import violated

Step = tuple[str, tuple[Any, ...]]  # (action name, its arguments)


def _hashable(call: str, what: str, value: object) -> None:
    try:
        hash(value)
    except TypeError:
        raise InvalidArgumentError(f"{call}: {what} {value!r} is not hashable") from None


def _raise(refusal: Refusal) -> None:
    error = refusal.error
    if error is None:
        return
    if error is UnknownDependencyError:
        raise UnknownDependencyError(refusal.reason, refusal.details)
    if error is CycleError:
        raise CycleError(refusal.reason, refusal.details)
    if error is UnknownTaskError:
        raise UnknownTaskError(refusal.reason)
    raise error(refusal.reason)


def _ids(call: str, what: str, ids: Iterable[Hashable]) -> list[Hashable]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidArgumentError(f"{call}: {what} must be an iterable of task ids, "
                                   f"not {type(ids).__name__}")
    listed = list(ids)
    for d in listed:
        _hashable(call, "dependency", d)
    return listed


def _edges(call: str, deps: Iterable[Hashable],
           optional: Iterable[Hashable]) -> tuple[frozenset[Hashable], frozenset[Hashable]]:
    """The required and the optional dependencies of a call; InvalidArgumentError for an id
    listed twice (in one list or in both)."""
    required, optional_ids = _ids(call, "deps", deps), _ids(call, "optional", optional)
    listed = [*required, *optional_ids]
    if len(set(listed)) != len(listed):
        raise InvalidArgumentError(f"{call}: a dependency is listed twice")
    return frozenset(required), frozenset(optional_ids)


class ReferenceScheduler:
    """The TaskScheduler API over the pure model. Not thread-safe: it is the sequential oracle."""

    def __init__(self, max_concurrency: int) -> None:
        if not _is_int(max_concurrency) or max_concurrency < 0:
            raise InvalidArgumentError(
                f"TaskScheduler({max_concurrency!r}): max_concurrency must be an int >= 0")
        self.max_concurrency = max_concurrency
        self.state_value: Snapshot = A.RECORDING
        self.history: list[Step] = []
        self._fns: dict[Hashable, Callable[..., Any] | None] = {}
        self._results: dict[Hashable, tuple[Any, Any]] = {}
        # (id, generation) of a version that failed or was cancelled -> the actor and reason
        # given to the call that ended it, which its provenance records carry
        self._notes: dict[tuple[Hashable, int], tuple[Any, Any]] = {}

    # -- stepping ---------------------------------------------------------------------------

    def _take(self, action: Action, *args: Any) -> bool:
        """Take ``action`` if enabled (raising the refusal's error otherwise); True if taken."""
        refusal = action.refusal(self.state_value, *args)
        if refusal is not None:
            _raise(refusal)
            return False
        self.state_value = action.step(self.state_value, *args)
        self.history.append((action.name, args))
        return True

    def _view(self, call: str, task_id: Hashable) -> Any:
        _hashable(call, "task id", task_id)
        view = self.state_value.tasks.get(task_id)
        if view is None:
            raise UnknownTaskError(f"{call}: unknown task {task_id!r}", task_id)
        return view

    def _reject_stale(self, call: str, task_id: Hashable, generation: object, current: int) -> None:
        """Spec: StaleCallback. Raise unless ``generation`` is an int equal to ``current``."""
        if not _is_int(generation):
            raise InvalidArgumentError(f"{call}: generation must be an int")
        if generation != current:
            self._take(A.StaleCallback, task_id, generation)
            raise StaleGenerationError(
                f"{call}: generation {generation} is stale, current is {current}",
                task_id, generation, current)  # type: ignore[arg-type]

    def _callback(self, name: str, action: Action, task_id: Hashable, generation: int) -> TaskState:
        call = f"{name}({task_id!r}, {generation!r})"
        view = self._view(call, task_id)
        self._reject_stale(call, task_id, generation, view.generation)
        if view.state.is_terminal:
            self._take(A.RepeatedCallback, task_id)
            return view.state  # type: ignore[no-any-return]
        self._take(action, task_id, generation)
        return self.state(task_id)

    # -- the API ----------------------------------------------------------------------------

    def submit(self, task_id: Hashable, deps: Iterable[Hashable] = (),
               fn: Callable[..., Any] | None = None,
               optional: Iterable[Hashable] = ()) -> int:
        """Spec: Submit (SubmitOptional when ``optional`` names an id).

        ``deps`` are required (the new version waits for each to succeed, and is blocked if
        one cannot); ``optional`` are optional (it waits for each to end, in any way). An id
        in both, or listed twice, is an ``InvalidArgumentError``.
        """
        call = f"submit({task_id!r})"
        _hashable(call, "task id", task_id)
        required, optional_ids = _edges(call, deps, optional)
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(f"{call}: fn must be callable or None")
        if optional_ids:
            self._take(A.SubmitOptional, task_id, required | optional_ids, optional_ids)
        else:
            self._take(A.Submit, task_id, required)
        self._fns[task_id] = fn
        self._results.pop(task_id, None)
        return self.state_value.tasks[task_id].generation

    def add_deps(self, task_id: Hashable, deps: Iterable[Hashable] = (),
                 optional: Iterable[Hashable] = ()) -> TaskState:
        """Spec: AddDeps. Make the pending version of ``task_id`` depend on ``deps`` (required)
        and ``optional`` (optional) too; return its state (pending, or blocked when a new
        required dependency is dead).

        Errors, with nothing changed: ``InvalidArgumentError`` for an id listed twice or in
        both; ``UnknownTaskError`` for an id never submitted; ``InvalidArgumentError`` for no
        id given, the task itself, or an id that is a dependency already;
        ``SchedulerClosedError`` once closed; ``InvalidTransitionError`` unless the version is
        pending (ready, running and ended versions keep their deps); after ``start()``,
        ``UnknownDependencyError`` for an id never submitted and ``CycleError`` for edges that
        close a cycle.
        """
        call = f"add_deps({task_id!r})"
        _hashable(call, "task id", task_id)
        required, optional_ids = _edges(call, deps, optional)
        self._view(call, task_id)
        self._take(A.AddDeps, task_id, required | optional_ids, optional_ids)
        return self.state(task_id)

    def start(self) -> None:
        """Spec: Start."""
        self._take(A.Start)

    def ready(self, limit: int | None = None) -> list[Claim]:
        """Spec: Claim(k) with k = min(limit, free slots, ready versions)."""
        if limit is not None and (not _is_int(limit) or limit < 0):
            raise InvalidArgumentError(f"ready({limit!r}): limit must be None or an int >= 0")
        s = self.state_value
        if not s.started:
            raise InvalidTransitionError("ready(): start() has not been called")
        if s.closed:
            return []
        order = A.ready_order(s.tasks)
        k = min(len(order), self.max_concurrency - A.running_count(s.tasks))
        if limit is not None:
            k = min(k, limit)
        if k <= 0:
            return []
        self._take(A.Claim, k, self.max_concurrency)
        return [Claim(t, s.tasks[t].generation, self._fns.get(t)) for t in order[:k]]

    def complete(self, task_id: Hashable, generation: int, result: Any = None) -> TaskState:
        """Spec: Complete."""
        state = self._callback("complete", A.Complete, task_id, generation)
        if self.history[-1][0] == "Complete":
            self._results[task_id] = (result, None)
        return state

    def fail(self, task_id: Hashable, generation: int, error: Any = None, *,
             actor: str | None = None, reason: str | None = None) -> TaskState:
        """Spec: Fail."""
        _check_note("fail", task_id, actor, reason)
        state = self._callback("fail", A.Fail, task_id, generation)
        if self.history[-1][0] == "Fail":
            self._results[task_id] = (None, error)
            self._note(task_id, actor, reason)
        return state

    def _note(self, task_id: Hashable, actor: Any, reason: Any) -> None:
        """The version of ``task_id`` just ended with ``actor`` and ``reason``."""
        self._notes[(task_id, self.state_value.tasks[task_id].generation)] = (actor, reason)

    def acknowledge_cancel(self, task_id: Hashable, generation: int, *,
                           actor: str | None = None, reason: str | None = None) -> TaskState:
        """Spec: AcknowledgeCancel."""
        _check_note("acknowledge_cancel", task_id, actor, reason)
        state = self._callback("acknowledge_cancel", A.AcknowledgeCancel, task_id, generation)
        if self.history[-1][0] == "AcknowledgeCancel":
            self._note(task_id, actor, reason)
        return state

    def cancel(self, task_id: Hashable, generation: int | None = None, *,
               actor: str | None = None, reason: str | None = None) -> TaskState:
        """Spec: Cancel (or StaleCallback for a generation that is not current)."""
        _check_note("cancel", task_id, actor, reason)
        call = f"cancel({task_id!r}, {generation!r})"
        view = self._view(call, task_id)
        if generation is not None:
            self._reject_stale(call, task_id, generation, view.generation)
        if self._take(A.Cancel, task_id) and self.state(task_id) is TaskState.CANCELLED:
            self._note(task_id, actor, reason)
        return self.state(task_id)

    def retry(self, task_id: Hashable) -> int:
        """Spec: Retry."""
        self._view(f"retry({task_id!r})", task_id)
        members = A.retry_set(self.state_value.tasks, task_id)
        self._take(A.Retry, task_id)
        for t in members:  # info() describes the new versions, which have no outcome yet
            self._results.pop(t, None)
        return self.state_value.tasks[task_id].generation

    def close(self, cancel_pending: bool = True) -> CloseReport:
        """Spec: Close."""
        if not isinstance(cancel_pending, bool):
            raise InvalidArgumentError(
                f"close(cancel_pending={cancel_pending!r}): cancel_pending must be a bool")
        waiting = [t for t, v in self.state_value.tasks.items() if v.state in A.WAITING]
        if self._take(A.Close, cancel_pending) and cancel_pending:
            for t in waiting:
                self._note(t, None, "close")
        return self.close_report()

    # -- introspection ----------------------------------------------------------------------

    def close_report(self) -> CloseReport:
        tasks = self.state_value.tasks
        by_state: dict[str, list[Hashable]] = {s.value: [] for s in TaskState}
        for t in sorted(tasks, key=lambda t: tasks[t].seq):
            by_state[tasks[t].state.value].append(t)
        return CloseReport(**{k: tuple(v) for k, v in by_state.items()})

    def state(self, task_id: Hashable) -> TaskState:
        return self._view(f"state({task_id!r})", task_id).state  # type: ignore[no-any-return]

    def info(self, task_id: Hashable) -> TaskInfo:
        v = self._view(f"info({task_id!r})", task_id)
        result, error = self._results.get(task_id, (None, None))
        record = self.state_value.records.get(task_id)
        provenance = None if record is None else Provenance(
            record.root, record.generation, record.end, record.path,
            *self._notes.get((record.root, record.generation), (None, None)))
        return TaskInfo(task_id, v.generation, v.state, v.deps, v.remaining_deps, v.blocked_by,
                        v.cancel_requested, result, error, A.optional_of(v), provenance)

    def snapshot(self, *, provenance: bool = False) -> Snapshot:
        """The state; with ``provenance``, the provenance records too (else None)."""
        return self.state_value if provenance else self.state_value.replace(provenance=None)

    def check_invariants(self) -> None:
        """Raise ``InvariantViolation`` naming the first spec invariant the state breaks."""
        broken = violated(self.state_value, self.max_concurrency)
        if broken:
            raise InvariantViolation(broken[0])


__all__ = ["ReferenceScheduler", "SchedulerError", "Step"]
