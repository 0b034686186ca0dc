"""The synchronisation primitives the schedulers use, taken from one place.

Production code builds every lock, condition, event, queue and thread through this module, so a
controlled runtime can stand in for ``threading`` and ``queue`` when interleavings are explored.
By default these are the ``threading`` and ``queue`` objects themselves: no wrapper, no cost.
"""

from __future__ import annotations

import queue
import threading

Lock = threading.Lock
RLock = threading.RLock
Condition = threading.Condition
Event = threading.Event
SimpleQueue = queue.SimpleQueue
Thread = threading.Thread

__all__ = ["Condition", "Event", "Lock", "RLock", "SimpleQueue", "Thread"]
