"""Managed blocking for :class:`~refsched.pool.pool.WorkStealingPool`: spares that stand in
for a blocked task's thread.

Implements the section "Managed blocking" of ``spec/WorkStealing.tla``. A task that blocks
inside ``pool.blocking()`` is ``Block(x)``: if fewer than ``max_spares`` spares are active, a
spare slot ``s`` (a worker index past the pool's workers, with its own deque and wake-up
condition) is given a thread, which serves as worker ``s`` (``StartSpare(s)``), popping its own
deque and stealing from every other. When the blocking call returns (``Unblock(x)``) the spare
is released; once it is idle with its own deque empty it retires (``Retire(s)``), so it leaves
no task behind, and its thread waits, kept for the next blocker, until the pool terminates.

This module holds the bookkeeping, every field guarded by the pool lock; the pool's methods
take the steps. Keeping retired threads (as ForkJoinPool keeps its compensation threads for a
while) matters: starting a thread costs far more than handing a slot to one that waits.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field
from typing import Final, Literal

from refsched import sync

__all__ = ["DEFAULT_MAX_SPARES", "SpareThread", "Spares"]

DEFAULT_MAX_SPARES: Final = 256
"""Spares a pool may run at once unless told otherwise (ForkJoinPool's default margin, and
the number of blockers past which Scala's global execution context stops compensating)."""

SpareState = Literal["off", "starting", "on"]


@dataclass(slots=True)
class SpareSlot:
    """One spare slot: a worker index past the pool's workers."""

    state: SpareState = "off"  # "off": no thread; "starting": launched; "on": serving
    blocker: int | None = None  # the blocked thread's worker index; None once it returned


@dataclass(slots=True, eq=False)
class SpareThread:
    """A thread that serves spare slots, one at a time, until the pool terminates."""

    wake: threading.Condition  # over the pool lock; the thread waits here between slots
    slot: int | None = None  # the slot it is to serve next (set by Block), or serves now
    thread: threading.Thread | None = field(default=None, repr=False)


class Spares:
    """The spare slots and threads of one pool. Every method is called with the pool lock held.

    ``active`` == number of slots not "off" <= ``bound`` (CompensationBounded).
    """

    __slots__ = ("_free", "_idle", "_released", "_standing", "active", "blocked", "bound",
                 "compensated", "first", "slots", "threads", "uncompensated")

    def __init__(self, first: int, bound: int) -> None:
        self.first: Final = first  # the index of the first spare slot: the pool's workers
        self.bound: Final = bound  # max_spares: slots active at once
        self.slots: dict[int, SpareSlot] = {}  # every slot used so far, by index
        self._free: list[int] = []  # heap of off slots' indexes (the lowest is reused first)
        self._released: set[int] = set()  # active slots whose blocker returned
        self._standing: dict[int, int] = {}  # blocked thread -> the slot standing in for it
        self.active = 0  # slots "starting" or "on"
        self.blocked: set[int] = set()  # threads (by worker index) blocked inside blocking()
        self._idle: list[SpareThread] = []  # threads waiting for a slot
        self.threads: list[SpareThread] = []  # every spare thread started, for shutdown's join
        self.compensated = 0  # == Block steps that a spare stood in for
        self.uncompensated = 0  # == Block steps at the bound with no spare released

    def take_slot(self, blocker: int) -> tuple[int, bool] | None:
        """Block: the slot to stand in for ``blocker``, and whether it needs a thread: a
        released active one (adopted: its thread, launched already, serves on), else an off
        one, now "starting" (the caller gives it a thread and makes a slot new to it usable);
        None at the bound."""
        adoptable = self._released - {blocker}  # a spare does not stand in for itself
        launch = not adoptable
        if adoptable:
            s = adoptable.pop()
            self._released.discard(s)
        elif self.active < self.bound:
            if self._free:
                s = heapq.heappop(self._free)
            else:
                s = self.first + len(self.slots)
                self.slots[s] = SpareSlot()
            self.slots[s].state = "starting"
            self.active += 1
        else:
            self.uncompensated += 1
            return None
        self.slots[s].blocker = blocker
        self._standing[blocker] = s
        self.compensated += 1
        return s, launch

    def idle_thread(self) -> SpareThread | None:
        """A spare thread waiting for a slot, if any (taken off the idle list)."""
        return self._idle.pop() if self._idle else None

    def release(self, blocker: int) -> int | None:
        """Unblock: the slot that stood in for ``blocker`` (None: none), now released."""
        s = self._standing.pop(blocker, None)
        if s is not None:
            self.slots[s].blocker = None
            self._released.add(s)
        return s

    def start(self, s: int) -> None:
        """StartSpare(s): the slot's thread serves."""
        self.slots[s].state = "on"

    def may_retire(self, s: int) -> bool:
        """Whether the serving spare ``s`` is released (the deque check is the caller's)."""
        return s in self._released and self.slots[s].state == "on"

    def retire(self, s: int, thread: SpareThread) -> None:
        """Retire(s): the slot is off, its thread waits for the next one."""
        self.slots[s].state = "off"
        self._released.discard(s)
        heapq.heappush(self._free, s)
        self.active -= 1
        thread.slot = None
        self._idle.append(thread)

    def wake_idle(self) -> None:
        """The pool terminated: every waiting spare thread leaves."""
        for spare in self._idle:
            spare.wake.notify()


def new_spare_thread(lock: threading.Lock) -> SpareThread:
    """A spare thread's record, its thread not yet made."""
    return SpareThread(wake=sync.Condition(lock))
