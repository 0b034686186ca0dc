"""The synchronisation primitives the schedulers use, taken from one place.

Production code builds every lock, condition, event, queue and thread through this module, so a
controlled runtime can stand in for ``threading`` and ``queue`` when interleavings are explored.
By default these are the ``threading`` and ``queue`` objects themselves: no wrapper, no cost.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Protocol

Lock = threading.Lock
RLock = threading.RLock
Condition = threading.Condition
Event = threading.Event
SimpleQueue = queue.SimpleQueue
Thread = threading.Thread

_sleep = time.sleep


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...


def acquire(lock: _Lock) -> None:
    """Take ``lock``, blocking; if it is held, first hand the interpreter to another thread once.

    A lock's holder needs the GIL to get to its release, and a thread that blocks in the kernel
    on a held lock is handed that lock later by the kernel, while some other thread holds the
    GIL: from then on each acquisition of the lock waits for a GIL switch, and each switch for
    the lock (a convoy; on the Runner's per-task lock it cost one context switch per task). A
    thread that finds the lock held lets the GIL go once (``sleep(0)``), which lets the holder
    finish and release, and so takes the lock itself, with the GIL, most of the time. Only if
    the lock is still held does it block.

    The failed try and the yield change no state, so this is, step for step, a plain blocking
    ``acquire()``: the controlled runtime of ``refsched.explore`` puts one in its place.
    """
    if not lock.acquire(False):
        _sleep(0)
        lock.acquire()


__all__ = ["Condition", "Event", "Lock", "RLock", "SimpleQueue", "Thread", "acquire"]
