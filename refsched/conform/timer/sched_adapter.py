"""CPython's ``sched.scheduler`` behind the conformance protocol, as a timer (``--system timer``).

``python -m refsched.conform.timer.sched_adapter`` serves one ``sched.scheduler`` per ``new``, on a
virtual clock (its ``timefunc`` reads the time the oracle last set, its ``delayfunc`` never
sleeps). ``sched`` has no ids, versions or reports, so the profile it declares is narrow:
:data:`PROFILE` keeps ``cancel`` and nothing else beyond ``schedule`` and ``next``.

==========================  =====================================================================
request                     what ``sched`` does
==========================  =====================================================================
``schedule(t, r, p)``       ``enterabs(r, p, action)``, the event kept as ``t``'s; answers 1
``next()``                  ``run(blocking=False)``: ``sched`` picks and pops the first due
                            event itself and calls its action, which stops the run and answers
                            ``Due(t, 1)``; with nothing due, ``run`` answers the delay to the
                            first event (``Wait``), or None when the queue is empty
``cancel(t)``               ``cancel(event)``: true once it is out of the queue; an event that
                            already ran is not in the queue, and ``sched`` raises ``ValueError``
==========================  =====================================================================

An id the adapter never saw is answered ``UnknownTaskError``: that is the adapter's own
bookkeeping, not ``sched``'s. Nothing else is corrected: ties in time are ordered as ``sched``
orders them (lower priority number first), and a past ``run_at`` is due at once, as there.
"""

from __future__ import annotations

import sched
import sys
from collections.abc import Callable, Hashable
from typing import Any, NoReturn

from refsched.conform.protocol import Unsupported
from refsched.errors import UnknownTaskError
from refsched.profile import TimerProfile
from refsched.types import Due, Wait

__all__ = ["PROFILE", "SchedTimer", "main"]

PROFILE = TimerProfile(versions=False, callbacks=False, close=False, snapshot=False,
                       stats=False, validates=False)
"""What ``sched.scheduler`` offers of the timer contract."""


class _Ran(Exception):
    """An event's action was called: ``run`` stops, and the adapter answers its task."""

    def __init__(self, task: Hashable) -> None:
        super().__init__(task)
        self.task = task


def _ran(task: Hashable) -> NoReturn:
    raise _Ran(task)


class SchedTimer:
    """One ``sched.scheduler`` with the part of the ``TimerScheduler`` API it has."""

    def __init__(self, clock: Callable[[], float], *, rebuild_floor: int = 0) -> None:
        self.queue = sched.scheduler(timefunc=clock, delayfunc=lambda seconds: None)
        self.events: dict[Hashable, sched.Event] = {}

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0) -> int:
        self.events[task_id] = self.queue.enterabs(run_at, priority, _ran, (task_id,))
        return 1

    def next(self) -> Due | Wait | None:
        try:
            delay = self.queue.run(blocking=False)
        except _Ran as ran:
            return Due(ran.task, 1, None)
        return None if delay is None else Wait(delay)

    def cancel(self, task_id: Hashable) -> bool:
        event = self.events.get(task_id)
        if event is None:
            raise UnknownTaskError(f"cancel({task_id!r}): never scheduled")
        self.queue.cancel(event)
        return True

    def _unsupported(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise Unsupported("sched.scheduler has no versions, reports, close or snapshot")

    complete = fail = close = snapshot = stats = state = _unsupported


def main() -> int:
    from refsched.conform.server import serve_stdio
    from refsched.conform.wire import get

    serve_stdio(SchedTimer, PROFILE,
                f"sched.scheduler (CPython {'.'.join(map(str, sys.version_info[:3]))})",
                get("timer"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
