"""Linearizability of a recorded history against a sequential model (Wing & Gong, Lowe's memo).

A :class:`History` holds operations as threads invoke them and see them return, in real-time
order. :func:`check` searches for a sequential order that keeps real-time order (an operation that
returned before another was invoked comes first) in which every response is the one the model
gives. The search is Wing & Gong's: take any operation that may come first, step the model, go on,
undo on a mismatch; with Lowe's memoisation of (operations done, model state) pairs already shown
to lead nowhere, so the search is linear in the states reached rather than in the orders tried.
An operation that never returned may take effect anywhere after its invocation, or not at all.

:class:`SchedulerModel` makes ``refsched.model.ReferenceScheduler`` such a model, so any object
with the TaskScheduler API can be checked; :class:`RecordingProxy` records the calls made on one.
Both are usable without the explorer, on histories recorded from real threads.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import re
import threading
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

__all__ = [
    "TASK_SCHEDULER_METHODS",
    "History",
    "Model",
    "Operation",
    "RecordingProxy",
    "SchedulerModel",
    "Verdict",
    "check",
    "history_key",
]

S = TypeVar("S")

# The TaskScheduler calls that are steps of the reference model (or reads of its state).
TASK_SCHEDULER_METHODS = frozenset({
    "submit", "add_deps", "start", "ready", "complete", "fail", "acknowledge_cancel", "cancel",
    "retry", "close", "state", "info", "snapshot",
})


@dataclass(frozen=True, slots=True)
class Operation:
    """One call: who made it, with what, when it was invoked and returned, and what it gave."""

    index: int  # its place in the history, by invocation
    thread: str
    method: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    call: int  # the invocation's event number
    ret: int | None  # the response's event number; None: it never returned
    value: Any = None
    error: BaseException | None = None  # raised instead of returning

    @property
    def pending(self) -> bool:
        return self.ret is None

    def __str__(self) -> str:
        params = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        if self.ret is None:
            outcome = "(never returned)"
        elif self.error is not None:
            outcome = f"raises {type(self.error).__name__}"
        else:
            outcome = f"-> {self.value!r}"
        span = f"[{self.call}, {'-' if self.ret is None else self.ret}]"
        return f"{span:<9} {self.thread}: {self.method}({', '.join(params)}) {outcome}"


class History:
    """Operations recorded as threads invoke them and see them return; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the fields below; never held while calling out
        self._events = 0  # invocations and responses so far: the real-time clock
        # per operation: thread, method, args, kwargs, call, ret, value, error
        self._open: list[list[Any]] = []
        self._stopped = False  # stop() was called: later calls are not recorded

    def invoke(self, thread: str, method: str, args: tuple[Any, ...] = (),
               kwargs: tuple[tuple[str, Any], ...] = ()) -> int:
        """Record that ``thread`` invoked ``method``; return the operation's handle."""
        with self._lock:
            if self._stopped:
                return -1
            self._events += 1
            self._open.append([thread, method, args, kwargs, self._events, None, None, None])
            return len(self._open) - 1

    def respond(self, handle: int, value: Any = None, error: BaseException | None = None) -> None:
        """Record that operation ``handle`` returned ``value`` (or raised ``error``)."""
        if handle < 0:
            return
        with self._lock:
            self._events += 1
            entry = self._open[handle]
            entry[5], entry[6], entry[7] = self._events, value, error

    def stop(self) -> None:
        """Record nothing more: calls made from now on (checks of the final state) pass through."""
        with self._lock:
            self._stopped = True

    def operations(self) -> tuple[Operation, ...]:
        """Every operation so far, by invocation."""
        with self._lock:
            return tuple(Operation(i, *entry) for i, entry in enumerate(self._open))

    def __len__(self) -> int:
        return len(self._open)


class Model(Protocol[S]):
    """A sequential specification: a start state, and what one operation does to a state."""

    def initial(self) -> S:
        """The state before any operation."""
        ...

    def apply(self, state: S, op: Operation) -> tuple[bool, S]:
        """Whether ``op``'s recorded outcome is the one the spec gives in ``state``; the state
        after. ``state`` must be left unchanged; a pending ``op`` allows any outcome."""
        ...

    def key(self, state: S) -> Hashable:
        """Equal keys for states that behave the same from now on (the memo's key)."""
        ...


@dataclass(frozen=True)
class Verdict:
    """The answer: ``ok`` with a witness ``order``, or the furthest the search got."""

    ok: bool
    order: tuple[Operation, ...]  # a linearization when ok; else the longest prefix that fit
    blocked: tuple[Operation, ...] = ()  # not ok: what could come next, none with its outcome
    nodes: int = 0  # search nodes visited
    history: tuple[Operation, ...] = field(default=(), repr=False)

    def explain(self) -> str:
        """The history, then the witness or why none exists."""
        lines = ["history (invocation and response event numbers):"]
        lines += [f"  {op}" for op in self.history]
        if self.ok:
            lines.append("linearizable as: " + ", ".join(f"#{op.index}" for op in self.order))
            return "\n".join(lines)
        lines.append("not linearizable. The longest order that fits:")
        lines += [f"  {op}" for op in self.order] or ["  (none)"]
        lines.append("after which none of these gives its recorded outcome:")
        lines += [f"  {op}" for op in self.blocked]
        return "\n".join(lines)


def check(operations: Sequence[Operation], model: Model[S], *, max_nodes: int = 1_000_000
          ) -> Verdict:
    """Search for a linearization of ``operations`` under ``model``.

    Raises ``RuntimeError`` after ``max_nodes`` search nodes without an answer.
    """
    ops = sorted(operations, key=lambda op: op.call)
    n = len(ops)
    never = 1 << 62
    rets = [never if op.ret is None else op.ret for op in ops]
    needed = 0  # the completed operations: all must be placed
    for i, op in enumerate(ops):
        if op.ret is not None:
            needed |= 1 << i

    def candidates(done: int) -> list[int]:
        # Those invoked before every response still to come: each may be next.
        limit = min((rets[i] for i in range(n) if not done >> i & 1), default=never)
        return [i for i in range(n) if not done >> i & 1 and ops[i].call < limit]

    start = model.initial()
    seen: set[tuple[int, Hashable]] = {(0, model.key(start))}
    best: list[int] = []
    best_blocked: list[int] = candidates(0)
    path: list[int] = []
    # Each frame: the done set, the model state, the candidates left to try.
    stack: list[tuple[int, S, list[int]]] = [(0, start, candidates(0))]
    nodes = 0
    while stack:
        done, state, left = stack[-1]
        if done & needed == needed:
            return Verdict(True, tuple(ops[i] for i in path), (), nodes, tuple(ops))
        if not left:
            stack.pop()
            if path:
                path.pop()
            continue
        i = left.pop()
        nodes += 1
        if nodes > max_nodes:
            raise RuntimeError(f"linearizability: no answer after {max_nodes} search nodes")
        fits, after = model.apply(state, ops[i])
        if not fits:
            continue
        now = done | 1 << i
        memo = (now, model.key(after))
        if memo in seen:
            continue
        seen.add(memo)
        path.append(i)
        nexts = candidates(now)
        if len(path) > len(best):
            best, best_blocked = list(path), list(nexts)
        nexts.reverse()  # pop() then tries them in invocation order
        stack.append((now, after, nexts))
    return Verdict(False, tuple(ops[i] for i in best), tuple(ops[i] for i in best_blocked),
                   nodes, tuple(ops))


def history_key(operations: Sequence[Operation]) -> Hashable:
    """A value equal for two histories that :func:`check` must judge alike, to cache verdicts.

    It keeps each operation's method, arguments, outcome and place in real time (not its thread,
    which the check ignores); values are kept by equality where they have value semantics
    (numbers, strings, enums, tuples, dataclasses, sets, mappings) and by identity otherwise (a
    function, an exception, any other object: numbered in order of first appearance).
    """
    numbers: dict[int, int] = {}

    def canon(value: Any) -> Hashable:
        if value is None or isinstance(value, (bool, int, float, str, bytes, enum.Enum)):
            return value
        if isinstance(value, (tuple, list)):
            return (type(value).__name__, tuple(canon(v) for v in value))
        if isinstance(value, (set, frozenset)):
            return ("set", frozenset(canon(v) for v in value))
        if isinstance(value, Mapping):
            return ("map", frozenset((canon(k), canon(v)) for k, v in value.items()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return (type(value).__name__,
                    tuple(canon(getattr(value, f.name)) for f in dataclasses.fields(value)))
        return ("object", numbers.setdefault(id(value), len(numbers)))

    return tuple(
        (op.method, canon(op.args), canon(op.kwargs), op.call, op.ret, canon(op.value),
         None if op.error is None else type(op.error).__qualname__)
        for op in operations)


class SchedulerModel:
    """``ReferenceScheduler`` (or any object with the same API) as a sequential model.

    The state is a model instance, forked (attributes copied one level deep) before each step; two
    states share a memo key when their spec variables and stored functions and outcomes are the
    same objects. A response matches when the values are equal, or both raised the same type.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def initial(self) -> Any:
        return self.factory()

    def apply(self, state: Any, op: Operation) -> tuple[bool, Any]:
        fork = _fork(state)
        try:
            value = getattr(fork, op.method)(*op.args, **dict(op.kwargs))
        except Exception as error:  # the model's error is the expected outcome
            if op.ret is None:
                return True, fork
            return op.error is not None and type(op.error) is type(error), fork
        if op.ret is None:
            return True, fork
        return op.error is None and bool(op.value == value), fork

    def key(self, state: Any) -> Hashable:
        return tuple((name, _freeze(value)) for name, value in sorted(vars(state).items())
                     if name != "history")


def _fork(state: Any) -> Any:
    fork = copy.copy(state)
    for name, value in vars(state).items():
        if isinstance(value, (dict, list, set)):
            setattr(fork, name, copy.copy(value))
    return fork


def _freeze(value: Any) -> Hashable:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value  # type: ignore[no-any-return]


class RecordingProxy:
    """Forwards everything to ``target``, recording the calls to ``methods`` in ``history``.

    ``thread()`` names the calling thread. ``on_event(kind, text)``, if given, is called just
    before each invocation (``"call"``) and response (``"return"``) is recorded. A call that
    escapes with a ``BaseException`` that is not an ``Exception`` (the thread is being torn down)
    is left without a response.
    """

    def __init__(self, target: Any, history: History,
                 methods: Collection[str] = TASK_SCHEDULER_METHODS,
                 thread: Callable[[], str] = lambda: threading.current_thread().name,
                 on_event: Callable[[str, str], None] | None = None) -> None:
        self._target = target
        self._history = history
        self._methods = frozenset(methods)
        self._thread = thread
        self._on_event = on_event

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name not in self._methods or not callable(attr):
            return attr
        history, thread, on_event = self._history, self._thread, self._on_event

        def recorded(*args: Any, **kwargs: Any) -> Any:
            call = ""
            if on_event is not None:
                params = [*map(_short, args), *(f"{k}={_short(v)}" for k, v in kwargs.items())]
                call = f"{name}({', '.join(params)})"
                on_event("call", call)
            handle = history.invoke(thread(), name, args, tuple(kwargs.items()))
            try:
                value = attr(*args, **kwargs)
            except Exception as error:
                if on_event is not None:
                    on_event("return", f"{call} raises {type(error).__name__}")
                history.respond(handle, error=error)
                raise
            if on_event is not None:
                on_event("return", f"{call} -> {_short(value)}")
            history.respond(handle, value)
            return value

        return recorded

    def __repr__(self) -> str:
        return f"<recording {self._target!r}>"


def _short(value: Any) -> str:
    """repr() for a step's text: no memory addresses (a replay shows the same text), cut short."""
    text = _ADDRESS.sub("", repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
