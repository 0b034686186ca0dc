"""The synchronisation primitives the schedulers use, taken from one place.

Production code builds every lock, condition, event and thread through this module, so a
controlled runtime can stand in for ``threading`` when interleavings are explored. By default these
are the ``threading`` objects themselves: no wrapper, no cost.
"""

from __future__ import annotations

import threading

Lock = threading.Lock
RLock = threading.RLock
Condition = threading.Condition
Event = threading.Event
Thread = threading.Thread

__all__ = ["Condition", "Event", "Lock", "RLock", "Thread"]
