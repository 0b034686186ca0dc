"""The timer's clause probes: for each clause of ``timer.*``, a short run of calls that ends in it.

Both sides read one virtual clock, which ``("advance", (now,))`` moves (it is no call of
either side); ``("new", (rebuild_floor,))`` makes a fresh instance on both, on a clock reading
0 (a refused one leaves the current instance and its clock as they were). Answers are compared
in full: a ``Due`` by its id and version, a ``Wait`` by its seconds, a close report's lists in
their order; an error by its type, never its message. ``refsched.conform.probes`` runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from refsched.conform.probes import Probe, snapshots_differ
from refsched.model.timer import ReferenceTimerScheduler
from refsched.types import Due, TimerCloseReport, Wait

__all__ = ["PROBES", "adapt", "call", "needs_of", "new_implementation", "new_model",
           "show", "states"]

_Call = tuple[str, tuple[Any, ...]]


def _p(clause: str, *calls: _Call, needs: tuple[str, ...] = ()) -> Probe:
    return Probe(clause, tuple(calls), needs)


_NEW: Final[_Call] = ("new", (1,))
_RUNNING_A: Final[tuple[_Call, ...]] = (_NEW, ("schedule", ("a", 5, 0)), ("advance", (5,)),
                                        ("next", ()))

PROBES: Final[tuple[Probe, ...]] = (
    _p("timer.new.ok", _NEW, ("schedule", ("a", 1, 0)), ("new", (0,)), ("next", ())),
    _p("timer.new.invalid", _NEW, ("schedule", ("a", 1, 0)), ("new", (-1,)), ("new", (True,)),
       ("advance", (1,)), ("next", ())),
    _p("timer.schedule.ok", _NEW, ("schedule", ("a", 5, 0)), ("schedule", ("a", 3, 2))),
    _p("timer.schedule.invalid", _NEW, ("schedule", ("a", "5", 0)), ("schedule", ("a", 5, 1.5)),
       ("schedule", ("a", 5, True)), ("schedule", ("a", 5, 0))),
    _p("timer.schedule.closed", _NEW, ("close", ()), ("schedule", ("a", 1, 0))),
    _p("timer.schedule.running", *_RUNNING_A, ("schedule", ("a", 9, 0))),
    _p("timer.next.ok", _NEW, ("schedule", ("b", 5, 0)), ("schedule", ("a", 5, 1)),
       ("schedule", ("c", 3, 0)), ("next", ()), ("advance", (5,)), ("next", ()), ("next", ()),
       ("next", ()), ("next", ())),
    _p("timer.cancel.ok", *_RUNNING_A, ("schedule", ("b", 9, 0)), ("cancel", ("b",)),
       ("cancel", ("a",))),
    _p("timer.callback.ok", *_RUNNING_A, ("complete", ("a", 1)), ("complete", ("a", 1)),
       ("schedule", ("b", 5, 0)), ("next", ()), ("fail", ("b", 1))),
    _p("timer.callback.negative-version", *_RUNNING_A, ("complete", ("a", -1)),
       ("complete", ("a", 1))),
    _p("timer.callback.stale", *_RUNNING_A, ("complete", ("a", 2)), ("fail", ("a", 0))),
    _p("timer.callback.pending", _NEW, ("schedule", ("a", 5, 0)), ("complete", ("a", 1))),
    _p("timer.callback.invalid", *_RUNNING_A, ("complete", ("a", True)),
       ("complete", ("a", 1.5)), ("complete", ("a", 1))),
    _p("timer.call.unknown-task", _NEW, ("state", ("z",)), ("cancel", ("z",)),
       ("complete", ("z", 1))),
    _p("timer.close.ok", *_RUNNING_A, ("schedule", ("d", 9, 0)), ("schedule", ("b", 9, 0)),
       ("schedule", ("c", 9, 0)), ("close", ())),
    _p("timer.snapshot.ok", _NEW, ("schedule", ("a", 5, 0)), ("snapshot", ()),
       ("state", ("a",))),
    _p("timer.stats.ok", *_RUNNING_A, ("complete", ("a", 1)), ("stats", ())),
)
"""One probe per clause of ``timer.*``, in the catalogue's order."""


class _Clock:
    """The clock both sides of a probe read; ``advance`` moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


_clock = _Clock()  # the clock of the probe being run: probes run one at a time
_FLAGS: Final = {"cancel": "cancel", "complete": "callbacks", "fail": "callbacks",
                 "close": "close", "snapshot": "snapshot", "state": "snapshot",
                 "stats": "stats"}


def needs_of(probe: Probe) -> tuple[str, ...]:
    """The profile flags a probe's calls need: each op's flag, a second schedule of an id or
    a version other than the first (``versions``), bad arguments (``validates``)."""
    needs: set[str] = set()
    scheduled: set[Any] = set()
    for method, args in probe.calls:
        if method in _FLAGS:
            needs.add(_FLAGS[method])
        if method == "new":
            scheduled = set()
            if type(args[0]) is not int or args[0] < 0:
                needs.add("validates")
        elif method == "schedule":
            if args[0] in scheduled:
                needs.add("versions")
            scheduled.add(args[0])
            if not isinstance(args[1], int | float) or type(args[2]) is not int:
                needs.add("validates")
        elif method in ("complete", "fail"):
            if type(args[1]) is not int:
                needs.add("validates")
            elif args[1] != 1:
                needs.add("versions")
    return tuple(sorted(needs))


def adapt(method: str, args: tuple[Any, ...], profile: Any) -> tuple[Any, ...]:
    """The arguments as sent: the timer's need no change."""
    return args


def new_model(rebuild_floor: Any) -> ReferenceTimerScheduler:
    """The model of a fresh instance, the probe's clock reading 0; refused, the clock reads
    what it read (the current instance stays current)."""
    before, _clock.now = _clock.now, 0.0
    try:
        return ReferenceTimerScheduler(clock=_clock, rebuild_floor=rebuild_floor)
    except Exception:
        _clock.now = before
        raise


def new_implementation(factory: Callable[..., Any], rebuild_floor: Any) -> Any:
    """A fresh instance of the implementation, on the probe's clock."""
    return factory(_clock, rebuild_floor=rebuild_floor)


def call(instance: Any, method: str, args: tuple[Any, ...]) -> Any:
    """One call on either side; ``advance`` moves the clock both read."""
    if method == "advance":
        _clock.now = float(args[0])
        return None
    return getattr(instance, method)(*args)


def show(value: Any) -> str:
    """An answer as the counterexample table shows it."""
    if isinstance(value, Due):
        return f"Due({value.task_id!r}, {value.version})"
    return repr(value)


def comparable(value: Any) -> Any:
    """An answer as it is compared."""
    if isinstance(value, Due):
        return ("Due", value.task_id, value.version)
    if isinstance(value, Wait):
        return ("Wait", float(value.seconds))
    if isinstance(value, TimerCloseReport):
        return tuple(tuple(getattr(value, f.name)) for f in dataclasses.fields(value))
    return value





def states(model: Any, impl: Any) -> tuple[str | None, str]:
    """How the implementation's snapshot differs from the model's: a sentence, or None."""
    return snapshots_differ(model, impl, lambda m, i: f"model {m}\nimplementation {i}")

