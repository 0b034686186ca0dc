"""A controlled runtime for ``refsched.sync``: real threads, one at a time, every sync op a choice.

``Lock``, ``RLock``, ``Condition``, ``Event`` and ``Thread`` here have the ``threading`` API, and
``SimpleQueue`` the ``queue.SimpleQueue`` one. Inside a run (an :class:`Execution`) each thread is
a real OS thread, but only one runs at a time: every synchronisation operation (acquire, release,
wait, notify, event set/clear/is_set/wait, queue put/get, thread start/join/begin/end) is a
scheduling point where a :class:`Chooser` picks which thread performs its next operation. Between
two operations a thread runs plain Python, alone.

Each thread's next operation is either enabled (a free lock, a notified waiter whose lock is free,
a set event, a queue holding an item to get, a finished thread to join) or blocked. Timed
operations run on virtual time and never sleep: a thread blocked in one may instead *time out*, an
alternative of its own. Computation takes no virtual time, so timeouts come in deadline order:
only the earliest pending deadline may expire (a waiter already notified no longer has one), and
expiring moves the clock to it. When no thread can move while some have not finished, the run
fails as a *lost wake-up* (a thread waits on a condition, an event or a queue nobody will signal
or fill) or a *deadlock* (all wait for locks or threads).

Objects built outside a run, or used from a thread the run does not manage (the explorer checking
the final state, a check between two steps), act directly on their state: a call that would block
raises :class:`WouldBlock`.

``installed()`` puts these classes into ``refsched.sync`` (and gives ``concurrent.futures`` the
same ``Condition``, ``Event`` and ``Lock``, since the Runner's ``TaskFuture`` is a ``Future`` whose
internal condition comes from ``threading``) for as long as its block lasts.

Only synchronisation operations are interleaved. Shared data touched outside any lock is not: a
race on plain attributes is never split into an interleaving. :mod:`refsched.explore.discipline`
reports such writes instead, for the classes whose locking it knows.
"""

from __future__ import annotations

import collections
import concurrent.futures._base as _futures_base
import contextlib
import os
import queue
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from refsched import sync

__all__ = [
    "CLOCK",
    "Abandoned",
    "Alternative",
    "Chooser",
    "Condition",
    "Decision",
    "Event",
    "Execution",
    "Lock",
    "Probe",
    "RLock",
    "RunFailure",
    "SimpleQueue",
    "Step",
    "Thread",
    "WouldBlock",
    "clock",
    "controlled_thread",
    "current_thread_name",
    "installed",
]

# The real primitives the runtime itself runs on, taken before anything can be patched.
_RealThread: Final = threading.Thread
_RealSemaphore: Final = threading.Semaphore
_RealEvent: Final = threading.Event
_RealLock: Final = threading.Lock
_get_ident: Final = threading.get_ident

# The object id of virtual time: in the footprint of everything that reads or advances it.
CLOCK: Final = 0

# Operation kinds, as shown in a failure's steps.
BEGIN: Final = "begin"  # a thread's first step
END: Final = "end"  # its target returned
START: Final = "start"
JOIN: Final = "join"
IS_ALIVE: Final = "is_alive"
ACQUIRE: Final = "acquire"
TRY_ACQUIRE: Final = "try_acquire"  # acquire(blocking=False)
RELEASE: Final = "release"
LOCKED: Final = "locked"
WAIT: Final = "wait"  # Condition.wait begins: releases the lock and joins the waiters
WAKE: Final = "wake"  # Condition.wait ends: notified and the lock retaken (or timed out)
REACQUIRE: Final = "reacquire"  # after a timed-out Condition.wait: retake the lock
NOTIFY: Final = "notify"
NOTIFY_ALL: Final = "notify_all"
SET: Final = "set"
CLEAR: Final = "clear"
IS_SET: Final = "is_set"
EVENT_WAIT: Final = "event_wait"
PUT: Final = "put"
GET: Final = "get"  # a blocking get: it can move once the queue holds an item
TRY_GET: Final = "try_get"  # get(block=False): never blocks
QUEUE_SIZE: Final = "queue_size"  # empty() or qsize(): reads the queue
ARM: Final = "arm"  # a timed operation reads the clock and sets its deadline
READ_CLOCK: Final = "read_clock"  # clock(): code under test reads virtual time

_RUN_GUARD: Final = _RealLock()  # one run at a time in a process
_active: Execution | None = None  # the run objects built now belong to


class Abandoned(BaseException):
    """Raised in a controlled thread whose run ended early (a failure, a pruned schedule)."""


class WouldBlock(RuntimeError):
    """A sync call outside a run's control would have to wait (the object is held, unset...)."""


class _Outside:
    """The owner of a lock taken by a thread the run does not manage."""

    def __repr__(self) -> str:
        return "<outside the run>"


_OUTSIDE: Final = _Outside()


@dataclass(frozen=True, slots=True)
class Step:
    """One operation performed: the ``index``-th of its run."""

    index: int
    thread: str
    kind: str
    target: str  # the object operated on
    note: str = ""  # "timed out", "preempts T1", ...

    def __str__(self) -> str:
        note = f"  ({self.note})" if self.note else ""
        return f"{self.index:4d}  {self.thread:<18} {self.kind:<12} {self.target}{note}"


@dataclass(frozen=True, slots=True)
class Alternative:
    """What one thread may do next at a decision: its pending operation, or its timeout."""

    tid: int
    timeout: bool
    kind: str
    footprint: tuple[int, ...]  # object ids the operation reads or writes (CLOCK for time)

    @property
    def code(self) -> int:
        """The alternative as a small int, the unit of a schedule id."""
        return self.tid * 2 + self.timeout

    def independent(self, other: Alternative) -> bool:
        """Whether the two commute: other threads, no object in common."""
        return self.tid != other.tid and not set(self.footprint).intersection(other.footprint)


@dataclass(frozen=True, slots=True)
class Decision:
    """A scheduling point: who may move, and who was running."""

    branch: int | None  # the index among this run's decisions with two or more alternatives
    step: int  # operations performed before it
    current: int  # the tid of the thread that reached the point (or just ended)
    current_enabled: bool  # it could go on: choosing another thread is a preemption
    alternatives: tuple[Alternative, ...]  # in tid order
    default: int  # the choice a plain run makes: go on, else the first that can, timeouts last
    # every unfinished thread's next operation, able to move or not: (tid, footprint)
    pending: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def preempts(self, index: int) -> bool:
        """Whether choosing ``alternatives[index]`` is a preemptive context switch."""
        return self.current_enabled and self.alternatives[index].tid != self.current


class Chooser(Protocol):
    """Picks the alternative taken at each decision; -1 ends the run early (pruned)."""

    def choose(self, decision: Decision) -> int: ...


@dataclass(frozen=True, slots=True)
class RunFailure:
    """What went wrong in one run, before it is tied to a schedule id."""

    kind: str  # deadlock, lost wake-up, exception, invariant, step bound, stuck, ...
    message: str


class _ThreadState:
    """The run's view of one controlled thread."""

    __slots__ = (
        "finished",
        "gate",
        "handle",
        "name",
        "note",
        "notified",
        "op",
        "real",
        "tid",
        "timed_out",
    )

    def __init__(self, tid: int, handle: Thread) -> None:
        self.tid = tid  # 0 is the scenario's main thread, then in start() order
        self.handle = handle
        self.name = handle.name
        self.gate = _RealSemaphore(0)  # released when the thread is chosen to move
        self.op: _Op | None = None  # the operation it waits at a scheduling point to perform
        self.timed_out = False  # the choice that resumed it was its timeout
        self.notified = False  # during a Condition.wait: a notify took it off the waiters
        self.finished = False
        self.real: threading.Thread | None = None
        self.note = ""  # shown on its next step


class _Op:
    """An operation a thread waits to perform, on one object."""

    __slots__ = ("deadline", "detail", "footprint", "kind", "obj")

    def __init__(self, kind: str, obj: _SyncObject, deadline: float | None = None,
                 extra: tuple[int, ...] = (), detail: str = "") -> None:
        self.kind = kind
        self.obj = obj
        self.deadline = deadline  # virtual time at which it may time out; None: never
        # A timed operation ends its timer however it ends, which may let another thread's
        # timeout go first: it touches the clock either way.
        timer = (CLOCK,) if deadline is not None and CLOCK not in extra else ()
        self.footprint = (obj._oid, *extra, *timer)
        self.detail = detail  # shown after the object's name in the step


class _SyncObject:
    """What every controlled object has: its run, an id, a name for failure reports."""

    __slots__ = ("_ex", "_label", "_oid")

    def __init__(self, kind: str) -> None:
        ex = _active
        self._ex = ex
        self._oid = ex._new_oid() if ex is not None else -1
        number = f"#{self._oid}" if self._oid >= 0 else ""
        self._label = f"{kind}{number} ({_site()})"

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        """Whether ``op`` can be performed by ``t`` now, and whether it waits for time."""
        return True, False

    def _here(self) -> tuple[Execution, _ThreadState] | None:
        """The run and the thread calling, when this call is under the run's control."""
        ex = self._ex
        if ex is None or ex.quiet:
            return None
        t = ex._by_ident.get(_get_ident())
        if t is None:
            return None
        return ex, t

    def __repr__(self) -> str:
        return f"<{self._label}>"


def _site() -> str:
    """Where the object being built is built: the first frame outside this runtime."""
    skip = (__file__, threading.__file__, _futures_base.__file__)
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in skip:
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class Lock(_SyncObject):
    """``threading.Lock`` under the run's control."""

    __slots__ = ("_owner",)

    def __init__(self) -> None:
        super().__init__("Lock")
        self._owner: _ThreadState | _Outside | None = None

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        if op.kind in (ACQUIRE, REACQUIRE):
            return self._owner is None, op.deadline is not None
        return True, False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        here = self._here()
        if here is None:
            return self._acquire_outside(blocking, timeout)
        ex, t = here
        if not blocking:
            ex.point(t, _Op(TRY_ACQUIRE, self))
            if self._owner is not None:
                return False
        elif timeout is None or timeout < 0:
            ex.point(t, _Op(ACQUIRE, self))
        elif not ex.point(t, _Op(ACQUIRE, self, ex.arm(t, self, timeout))):
            return False
        self._take(t)
        return True

    def release(self) -> None:
        here = self._here()
        if here is None:
            if self._owner is None:
                raise RuntimeError("release unlocked lock")
            self._owner = None
            return
        ex, t = here
        if ex.aborted:
            return  # the thread unwinds out of an abandoned run: let its `with` blocks close
        if self._owner is None:
            raise RuntimeError("release unlocked lock")
        ex.point(t, _Op(RELEASE, self))
        self._owner = None
        ex.dirty = True

    def locked(self) -> bool:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(LOCKED, self))
        return self._owner is not None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- the Condition protocol ------------------------------------------------------------

    def _take(self, t: _ThreadState) -> None:
        self._owner = t

    def _is_owned(self, t: _ThreadState | _Outside) -> bool:
        return self._owner is t

    def _release_save(self, t: _ThreadState) -> int:
        self._owner = None
        return 1

    def _acquire_restore(self, t: _ThreadState, saved: int) -> None:
        self._owner = t

    def _acquire_outside(self, blocking: bool, timeout: float) -> bool:
        if self._owner is None:
            self._owner = _OUTSIDE
            return True
        if not blocking or (timeout is not None and timeout >= 0):
            return False
        raise WouldBlock(f"{self._label} is held by {_owner_name(self._owner)}")


class RLock(Lock):
    """``threading.RLock`` under the run's control: a re-entry is no scheduling point."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        _SyncObject.__init__(self, "RLock")
        self._owner = None
        self._count = 0  # == nested acquisitions by _owner; 0 <=> _owner is None

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        if op.kind in (ACQUIRE, REACQUIRE):
            return self._owner is None or self._owner is t, op.deadline is not None
        return True, False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        here = self._here()
        owner = here[1] if here is not None else _OUTSIDE
        if self._owner is owner and owner is not None:
            self._count += 1  # invisible to every other thread: no scheduling point
            return True
        return super().acquire(blocking, timeout)

    def release(self) -> None:
        here = self._here()
        owner = here[1] if here is not None else _OUTSIDE
        if self._owner is not owner:
            if self._ex is not None and self._ex.aborted:
                return
            raise RuntimeError("cannot release un-acquired lock")
        if self._count > 1:
            self._count -= 1
            return
        super().release()
        self._count = 0

    def _take(self, t: _ThreadState) -> None:
        self._owner = t
        self._count = 1

    def _release_save(self, t: _ThreadState) -> int:
        saved = self._count
        self._owner = None
        self._count = 0
        return saved

    def _acquire_restore(self, t: _ThreadState, saved: int) -> None:
        self._owner = t
        self._count = saved

    def _acquire_outside(self, blocking: bool, timeout: float) -> bool:
        taken = super()._acquire_outside(blocking, timeout)
        if taken:
            self._count = 1
        return taken


class Condition(_SyncObject):
    """``threading.Condition`` under the run's control; waiters are notified in FIFO order."""

    __slots__ = ("_lock", "_waiters")

    def __init__(self, lock: Lock | None = None) -> None:
        super().__init__("Condition")
        if lock is None:
            lock = RLock()
        if not isinstance(lock, Lock):
            raise TypeError(f"a controlled Condition needs a controlled lock, not {lock!r}")
        self._lock = lock
        self._waiters: collections.deque[_ThreadState] = collections.deque()

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        if op.kind == WAKE:
            return t.notified and self._lock._owner is None, not t.notified
        return True, False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        here = self._here()
        if here is None:
            self._own_outside()
            if timeout is not None:
                return False
            raise WouldBlock(f"wait on {self._label} with no thread able to notify")
        ex, t = here
        if not self._lock._is_owned(t):
            raise RuntimeError("cannot wait on un-acquired lock")
        return self._wait(ex, t, timeout, None)[0]

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        here = self._here()
        result = predicate()
        if result or here is None:
            if not result and timeout is None:
                raise WouldBlock(f"wait_for on {self._label} with no thread able to notify")
            return result
        ex, t = here
        if not self._lock._is_owned(t):
            raise RuntimeError("cannot wait on un-acquired lock")
        endtime: float | None = None
        while not result:
            woken, endtime = self._wait(ex, t, timeout if endtime is None else None, endtime)
            result = predicate()
            if not woken:
                break  # the deadline passed
        return result

    def _wait(self, ex: Execution, t: _ThreadState, timeout: float | None,
              endtime: float | None) -> tuple[bool, float | None]:
        """One wait; the deadline is ``endtime``, or ``timeout`` from now. (woken, deadline)."""
        timed = timeout is not None or endtime is not None
        lock = self._lock
        ex.point(t, _Op(WAIT, self, extra=(lock._oid, CLOCK) if timed else (lock._oid,)))
        deadline = endtime if endtime is not None else (
            ex.now + timeout if timeout is not None else None)
        saved = lock._release_save(t)
        t.notified = False
        self._waiters.append(t)
        ex.dirty = True
        woken = ex.point(t, _Op(WAKE, self, deadline, extra=(lock._oid,)))
        if not woken:
            self._waiters.remove(t)
            ex.point(t, _Op(REACQUIRE, lock))
        lock._acquire_restore(t, saved)
        return woken, deadline

    def notify(self, n: int = 1) -> None:
        self._notify(NOTIFY, n)

    def notify_all(self) -> None:
        self._notify(NOTIFY_ALL, None)

    def _notify(self, kind: str, n: int | None) -> None:
        here = self._here()
        if here is None:
            self._own_outside()
        else:
            ex, t = here
            if not self._lock._is_owned(t):
                raise RuntimeError("cannot notify on un-acquired lock")
            # Notifying a timed waiter retires its deadline, which may let another thread's
            # timeout go first. No waiter can join while the notifier holds the lock.
            timed = any(w.op is not None and w.op.deadline is not None for w in self._waiters)
            ex.point(t, _Op(kind, self, extra=(CLOCK,) if timed else ()))
        waiters = self._waiters
        count = len(waiters) if n is None else min(n, len(waiters))
        for _ in range(count):
            waiters.popleft().notified = True

    def _own_outside(self) -> None:
        if not self._lock._is_owned(_OUTSIDE):
            raise RuntimeError("cannot wait on or notify an un-acquired lock")


class Event(_SyncObject):
    """``threading.Event`` under the run's control."""

    __slots__ = ("_flag",)

    def __init__(self) -> None:
        super().__init__("Event")
        self._flag = False

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        if op.kind == EVENT_WAIT:
            return self._flag, op.deadline is not None
        return True, False

    def is_set(self) -> bool:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(IS_SET, self))
        return self._flag

    def set(self) -> None:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(SET, self))
        self._flag = True

    def clear(self) -> None:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(CLEAR, self))
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        here = self._here()
        if here is None:
            if self._flag or timeout is not None:
                return self._flag
            raise WouldBlock(f"wait on {self._label}, which is not set")
        ex, t = here
        if timeout is None:
            ex.point(t, _Op(EVENT_WAIT, self))
            return True
        return ex.point(t, _Op(EVENT_WAIT, self, ex.arm(t, self, timeout)))


class SimpleQueue(_SyncObject):
    """``queue.SimpleQueue`` under the run's control: FIFO, unbounded.

    A put and a get are scheduling points, and a blocking get can move only once the queue holds
    an item: a thread left waiting in one when nobody else can move is a lost wake-up.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        super().__init__("SimpleQueue")
        self._items: collections.deque[Any] = collections.deque()

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        if op.kind == GET:
            return bool(self._items), op.deadline is not None
        return True, False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(PUT, self))
        self._items.append(item)

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        here = self._here()
        if here is None:
            if self._items:
                return self._items.popleft()
            if not block or timeout is not None:
                raise queue.Empty
            raise WouldBlock(f"get from {self._label}, which is empty")
        ex, t = here
        if not block:
            ex.point(t, _Op(TRY_GET, self))
            if not self._items:
                raise queue.Empty
        elif timeout is None:
            ex.point(t, _Op(GET, self))
        else:
            if timeout < 0:
                raise ValueError("'timeout' must be a non-negative number")
            if not ex.point(t, _Op(GET, self, ex.arm(t, self, timeout))):
                raise queue.Empty
        return self._items.popleft()

    def get_nowait(self) -> Any:
        return self.get(False)

    def empty(self) -> bool:
        return self.qsize() == 0

    def qsize(self) -> int:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(QUEUE_SIZE, self))
        return len(self._items)


class Thread(_SyncObject):
    """``threading.Thread`` under the run's control (started only from a controlled thread)."""

    __slots__ = ("_args", "_kwargs", "_state", "_target", "daemon", "name")

    def __init__(self, group: None = None, target: Callable[..., object] | None = None,
                 name: str | None = None, args: Iterable[Any] = (),
                 kwargs: Mapping[str, Any] | None = None, *, daemon: bool | None = None) -> None:
        super().__init__("Thread")
        # Numbered by the run, so a replay shows the same names.
        self.name = name if name is not None else f"Thread-{self._oid}"
        self._label = self.name
        self.daemon = bool(daemon)
        self._target = target
        self._args = tuple(args)
        self._kwargs = dict(kwargs or {})
        self._state: _ThreadState | None = None

    def _status(self, op: _Op, t: _ThreadState) -> tuple[bool, bool]:
        if op.kind == JOIN:
            state = self._state
            return state is not None and state.finished, op.deadline is not None
        return True, False

    def run(self) -> None:
        if self._target is not None:
            self._target(*self._args, **self._kwargs)

    def start(self) -> None:
        here = self._here()
        if here is None:
            raise RuntimeError(f"{self.name}: a controlled thread starts only inside a run")
        ex, t = here
        if self._state is not None:
            raise RuntimeError("threads can only be started once")
        ex.point(t, _Op(START, self))
        ex._spawn(self)

    def join(self, timeout: float | None = None) -> None:
        here = self._here()
        state = self._state
        if state is None:
            raise RuntimeError("cannot join thread before it is started")
        if here is None:
            if not state.finished and timeout is None:
                raise WouldBlock(f"join {self.name}, which has not finished")
            return
        ex, t = here
        if state is t:
            raise RuntimeError("cannot join current thread")
        if timeout is None:
            ex.point(t, _Op(JOIN, self))
        else:
            ex.point(t, _Op(JOIN, self, ex.arm(t, self, timeout)))

    def is_alive(self) -> bool:
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(IS_ALIVE, self))
        return self._state is not None and not self._state.finished

    @property
    def ident(self) -> int | None:
        state = self._state
        return None if state is None or state.real is None else state.real.ident

    def __repr__(self) -> str:
        state = self._state
        status = "initial" if state is None else "stopped" if state.finished else "started"
        return f"<controlled Thread {self.name} {status}>"


class Probe(_SyncObject):
    """A visible step on an object of its own: a scheduling point ordered only against the
    probe's other steps.

    The explorer records a watched scheduler's calls and returns through one, so the order of
    those events between threads is part of what the search distinguishes (not an accident of
    which equivalent interleaving it ran), and the steps of a failure show the calls.
    """

    __slots__ = ()

    def __init__(self, label: str) -> None:
        super().__init__("Probe")
        self._label = label

    def step(self, kind: str, detail: str = "") -> None:
        """A scheduling point under the run's control; nothing outside one."""
        here = self._here()
        if here is not None:
            here[0].point(here[1], _Op(kind, self, detail=detail))


def _owner_name(owner: _ThreadState | _Outside | None) -> str:
    if isinstance(owner, _ThreadState):
        return owner.name
    return "nobody" if owner is None else "a thread outside the run"


def controlled_thread() -> tuple[Execution, _ThreadState] | None:
    """The active run and the controlled thread calling, or None outside a run's control.

    None too once the run is over and its threads unwind (their ``finally`` blocks run with
    the locks they held given up)."""
    ex = _active
    if ex is None or ex.quiet or ex.aborted:
        return None
    t = ex._by_ident.get(_get_ident())
    return None if t is None else (ex, t)


class _VirtualClock(_SyncObject):
    """Virtual time as the object a :func:`clock` read operates on: its id is ``CLOCK``."""

    __slots__ = ()

    def __init__(self) -> None:  # one, shared by every run: it takes no id from a run
        self._ex = None
        self._oid = CLOCK
        self._label = "clock"


_THE_CLOCK: Final = _VirtualClock()


def clock() -> float:
    """The active run's virtual time (``Execution.now``): a ``clock`` to give code under test.

    Read by a controlled thread, it is a step of its own on the clock, so the search orders it
    against timeouts and other timed operations (a read racing a timeout is tried on both sides
    of it). Read by a check between steps, or by a thread unwinding out of a run, it is no step.
    Outside a run there is no virtual time: ``RuntimeError``.
    """
    ex = _active
    if ex is None:
        raise RuntimeError("refsched.explore.runtime.clock() read outside a run")
    here = controlled_thread()
    if here is not None:
        here[0].point(here[1], _Op(READ_CLOCK, _THE_CLOCK))
    return ex.now


def current_thread_name() -> str:
    """The name of the controlled thread calling, or of the real thread outside a run."""
    ex = _active
    if ex is not None:
        t = ex._by_ident.get(_get_ident())
        if t is not None:
            return t.name
    return threading.current_thread().name


class Execution:
    """One run of a body under the runtime: threads, choices, steps and the outcome.

    ``run(body)`` calls ``body`` on a controlled thread named ``main`` and returns when every
    thread has finished, the run failed, or the chooser ended it. ``checks`` are called between
    steps whenever a lock was released since the last call (the state may have changed), from
    whichever thread reached the scheduling point, with the runtime out of the way: a check
    that finds a lock held raises :class:`WouldBlock` and is simply tried again later.
    """

    def __init__(self, chooser: Chooser, *, max_steps: int = 10_000,
                 checks: Iterable[tuple[str, Callable[[], None]]] = ()) -> None:
        self.chooser = chooser
        self.max_steps = max_steps
        self.checks: list[tuple[str, Callable[[], None]]] = list(checks)
        self.threads: list[_ThreadState] = []
        self._by_ident: dict[int, _ThreadState] = {}
        self._oids = 0
        self.now = 0.0  # virtual time: advanced only by a timeout, to its deadline
        self.steps: list[Step] = []
        self.branches: list[tuple[Decision, int]] = []  # decisions with a choice, and the choice
        self.moves: list[Alternative] = []  # the alternative taken at each decision, in order
        self.preemptions = 0
        self.failure: RunFailure | None = None
        self.pruned = False  # the chooser ended the run: nothing new lies ahead
        self.completed = False  # every thread finished
        self.aborted = False  # ended early: controlled threads unwind with Abandoned
        # every unfinished thread's next operation when the run stopped (a deadlock, a failure)
        self.final_pending: tuple[tuple[int, tuple[int, ...]], ...] = ()
        self.quiet = False  # a check runs: objects act directly
        self.dirty = True  # a lock was released since the checks last ran
        self._done = _RealEvent()

    def _new_oid(self) -> int:
        self._oids += 1
        return self._oids

    # -- driving a run ---------------------------------------------------------------------

    def run(self, body: Callable[[], None], timeout: float = 60.0) -> None:
        """Run ``body`` as the main thread of this run; ``timeout`` wall seconds at most."""
        global _active
        if not _RUN_GUARD.acquire(blocking=False):
            raise RuntimeError("another controlled run is in progress in this process")
        try:
            _active = self
            main = Thread(target=body, name="main")
            state = self._spawn(main)
            state.gate.release()
            if not self._done.wait(timeout):
                self._fail("stuck", f"no progress in {timeout:g} s: a thread blocks on something "
                                    "outside the runtime (a real lock, I/O, sleep)\n"
                                    + self._stacks(), abort=False)
            self.aborted = True
            for t in self.threads:
                if not t.finished:
                    t.gate.release()  # parked threads wake into Abandoned and unwind
            for t in self.threads:
                if t.real is not None:
                    t.real.join(5.0)
            lingering = [t.name for t in self.threads if t.real is not None and t.real.is_alive()]
            if lingering:
                # A thread that swallows Abandoned in a loop, or blocks outside the runtime,
                # keeps running beside later runs: say so rather than carry on silently.
                self._fail("stuck", f"{', '.join(lingering)} did not unwind out of the run",
                           abort=False)
        finally:
            _active = None
            _RUN_GUARD.release()

    def _spawn(self, handle: Thread) -> _ThreadState:
        state = _ThreadState(len(self.threads), handle)
        state.op = _Op(BEGIN, handle)
        handle._state = state
        self.threads.append(state)
        real = _RealThread(target=self._bootstrap, args=(state,),
                           name=f"refsched-explore:{handle.name}", daemon=True)
        real.start()  # returns once the OS thread runs; it parks at once on its gate
        state.real = real
        assert real.ident is not None
        self._by_ident[real.ident] = state
        return state

    def _bootstrap(self, t: _ThreadState) -> None:
        t.gate.acquire()
        if self.aborted:
            return
        try:
            self._performed(t)
            t.handle.run()
            self.point(t, _Op(END, t.handle))
            t.finished = True
            self.dirty = True
            self._hand_over(t)
        except Abandoned:
            pass
        except BaseException as exc:  # any escape from a thread fails the run
            if self.aborted:
                return  # raised while unwinding out of a run already over: not this run's fault
            text = "".join(traceback.format_exception(exc)).rstrip()
            self._fail("exception", f"{t.name} raised {exc!r}\n{text}", abort=False)

    # -- scheduling points -----------------------------------------------------------------

    def point(self, t: _ThreadState, op: _Op) -> bool:
        """``t`` is about to perform ``op``: let the chooser decide who moves first.

        Returns when ``t`` performs ``op``: True, or False when the choice was its timeout.
        """
        if self.aborted:
            raise Abandoned
        t.op = op
        chosen = self._decide(t)
        if chosen is not t:
            chosen.gate.release()
            t.gate.acquire()
            if self.aborted:
                raise Abandoned
        self._performed(t)
        return not t.timed_out

    def arm(self, t: _ThreadState, obj: _SyncObject, timeout: float) -> float:
        """A timed operation reads the clock: a step of its own; returns its deadline."""
        self.point(t, _Op(ARM, obj, extra=(CLOCK,)))
        return self.now + max(timeout, 0.0)

    def _performed(self, t: _ThreadState) -> None:
        op = t.op
        assert op is not None
        note = "timed out" if t.timed_out else ""
        if t.note:
            note = f"{t.note}, {note}" if note else t.note
            t.note = ""
        target = f"{op.obj._label}: {op.detail}" if op.detail else op.obj._label
        self.steps.append(Step(len(self.steps), t.name, op.kind, target, note))
        t.op = None

    def _hand_over(self, t: _ThreadState) -> None:
        """``t`` has ended: let the next thread move, without waiting for a turn again."""
        chosen = self._decide(t)
        if chosen is not t:
            chosen.gate.release()

    def _decide(self, cur: _ThreadState) -> _ThreadState:
        """Choose the thread that moves next (``cur`` included) and mark its timeout if any."""
        if self.dirty and self.checks:
            self._run_checks()
        alternatives = self._alternatives()
        if not alternatives:
            if all(t.finished for t in self.threads):
                self.completed = True
                self._done.set()
                return cur
            self._stuck()
        if len(self.steps) >= self.max_steps:
            self._fail("step bound", f"more than {self.max_steps} steps: a livelock, or raise "
                                     "the bound (REFSCHED_MAX_STEPS)", abort=True)
        cur_enabled = any(a.tid == cur.tid and not a.timeout for a in alternatives)
        default = _default_choice(alternatives, cur.tid, cur_enabled)
        branch = len(self.branches) if len(alternatives) > 1 else None
        decision = Decision(branch, len(self.steps), cur.tid, cur_enabled, alternatives, default,
                            self._pending())
        index = self.chooser.choose(decision)
        if index < 0:
            self.pruned = True
            self.aborted = True
            self._done.set()
            raise Abandoned
        if branch is not None:
            self.branches.append((decision, index))
        alt = alternatives[index]
        self.moves.append(alt)
        chosen = self.threads[alt.tid]
        chosen.timed_out = alt.timeout
        if alt.timeout:
            assert chosen.op is not None and chosen.op.deadline is not None
            self.now = max(self.now, chosen.op.deadline)
        if decision.preempts(index):
            self.preemptions += 1
            chosen.note = f"preempts {cur.name}"
        return chosen

    def _pending(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        out = []
        for t in self.threads:
            op = t.op
            if op is not None and not t.finished:
                out.append((t.tid, op.footprint))
        return tuple(out)

    def _alternatives(self) -> tuple[Alternative, ...]:
        moves: list[Alternative] = []
        timers: list[_ThreadState] = []
        earliest = float("inf")
        for t in self.threads:
            op = t.op
            if op is None or t.finished:
                continue
            enabled, timed = op.obj._status(op, t)
            if enabled:
                moves.append(Alternative(t.tid, False, op.kind, op.footprint))
            if timed and op.deadline is not None:
                earliest = min(earliest, op.deadline)
                if not enabled:
                    timers.append(t)
        for t in timers:
            op = t.op
            assert op is not None and op.deadline is not None
            if op.deadline <= earliest:
                moves.append(Alternative(t.tid, True, op.kind, op.footprint))
        moves.sort(key=_by_tid)
        return tuple(moves)

    # -- ending a run ----------------------------------------------------------------------

    def _run_checks(self) -> None:
        self.quiet = True
        try:
            for name, check in self.checks:
                try:
                    check()
                except WouldBlock:
                    return  # a lock it needs is held: the state is mid-change; try later
                except Exception as exc:
                    self.quiet = False
                    self._fail("invariant", f"{name} after step {len(self.steps)}: "
                                            f"{type(exc).__name__}: {exc}", abort=True)
            self.dirty = False
        finally:
            self.quiet = False

    def fail(self, kind: str, message: str) -> None:
        """Fail the run from a controlled thread (a check of its own): the thread unwinds."""
        self._fail(kind, message, abort=True)

    def _stuck(self) -> None:
        waits: list[str] = []
        lost = False
        for t in self.threads:
            op = t.op
            if t.finished or op is None:
                continue
            obj = op.obj
            if op.kind == WAKE and not t.notified:
                lost = True
                waits.append(f"{t.name} waits on {obj._label}, never notified")
            elif op.kind == WAKE:
                assert isinstance(obj, Condition)
                waits.append(f"{t.name} was notified on {obj._label} but its lock is held by "
                             f"{_owner_name(obj._lock._owner)}")
            elif op.kind == EVENT_WAIT:
                lost = True
                waits.append(f"{t.name} waits on {obj._label}, never set")
            elif op.kind == GET:
                lost = True
                waits.append(f"{t.name} gets from {obj._label}, never put to")
            elif op.kind == JOIN:
                waits.append(f"{t.name} joins {obj._label}, which never ends")
            elif isinstance(obj, Lock):
                waits.append(f"{t.name} acquires {obj._label}, held by {_owner_name(obj._owner)}")
            else:
                waits.append(f"{t.name} waits to {op.kind} {obj._label}")
        kind = "lost wake-up" if lost else "deadlock"
        self._fail(kind, "no thread can move: " + "; ".join(waits), abort=True)

    def _fail(self, kind: str, message: str, *, abort: bool) -> None:
        if self.failure is None:
            self.failure = RunFailure(kind, message)
            self.final_pending = self._pending()
        self.aborted = True
        self._done.set()
        if abort:
            raise Abandoned

    def _stacks(self) -> str:
        frames = sys._current_frames()
        out = []
        for t in self.threads:
            if t.real is not None and not t.finished and t.real.ident in frames:
                stack = "".join(traceback.format_stack(frames[t.real.ident])).rstrip()
                out.append(f"{t.name}:\n{stack}")
        return "\n".join(out)


def _by_tid(alt: Alternative) -> int:
    return alt.tid


def _default_choice(alternatives: tuple[Alternative, ...], current: int, cur_enabled: bool) -> int:
    """Go on with the current thread; else the first that can move; a timeout only if none can."""
    first_timeout = -1
    for i, alt in enumerate(alternatives):
        if alt.timeout:
            if first_timeout < 0:
                first_timeout = i
            continue
        if not cur_enabled or alt.tid == current:
            return i
    return first_timeout if first_timeout >= 0 else 0


# -- installing the runtime ----------------------------------------------------------------

def acquire(lock: Lock) -> None:
    """``refsched.sync.acquire`` under the run's control: one blocking ``acquire()``.

    The production function first tries the lock and yields the GIL once; a failed try changes
    nothing, so every schedule of it is one of these, with an idle step or two.
    """
    lock.acquire()


_SYNC_NAMES: Final = {"Lock": Lock, "RLock": RLock, "Condition": Condition, "Event": Event,
                      "SimpleQueue": SimpleQueue, "Thread": Thread, "acquire": acquire}


def _threading_for_futures() -> types.ModuleType:
    """``threading`` as ``concurrent.futures`` sees it during a run: controlled primitives."""
    view = types.ModuleType("threading", "threading, with refsched's controlled primitives")
    view.__dict__.update({"Condition": Condition, "Event": Event, "Lock": Lock, "RLock": RLock,
                          "__getattr__": lambda name: getattr(threading, name)})
    return view


@contextlib.contextmanager
def installed(futures: bool = True) -> Iterator[None]:
    """Put the controlled primitives into ``refsched.sync`` while the block runs.

    With ``futures`` (the default) ``concurrent.futures`` also builds its futures' conditions
    from them, so a thread waiting on a ``Future`` (or setting one) is under the run's control
    too. The originals are restored on exit.
    """
    patches: list[tuple[object, str, object]] = [
        (sync, name, value) for name, value in _SYNC_NAMES.items()]
    if futures:
        patches.append((_futures_base, "threading", _threading_for_futures()))
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)
