"""What an implementation declares it supports: the oracle generates only what this admits."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

__all__ = ["DECLARED", "FULL", "STATIC", "TIMER_FULL", "WHOLE", "DurableProfile", "PoolProfile",
           "Profile", "ProfileError", "TimerProfile", "WholeProfile", "full_profile",
           "profile_argument", "profile_from_hello", "profile_from_json"]

READY_ORDERS: Final = ("seq", "any")


class ProfileError(ValueError):
    """A capability profile that is malformed or contradicts itself."""


@dataclass(frozen=True)
class Profile:
    """The parts of the contract an implementation keeps.

    Every flag defaults to the full contract (refsched's own scheduler).
    """

    # submit() over an id already submitted (a new version), and callbacks naming an older
    # generation, answered with StaleGenerationError
    generations: bool = True
    # cancel() and acknowledge_cancel()
    cancel: bool = True
    # retry() of a failed, blocked or cancelled task
    retry: bool = True
    # fail(), and blocked propagation to the dependents of a failed version
    fail: bool = True
    # submit() after start(); False is a static graph: every submit comes before start()
    dynamic: bool = True
    # close(cancel_pending)
    close: bool = True
    # ready(limit) and max_concurrency are honoured; False: ready() always claims every ready
    # version, and the oracle asks for no limit
    limit: bool = True
    # "seq": ready() claims the smallest submission sequence numbers first, in that order;
    # "any": claims are compared as a set (only without ``limit``: then ready() claims all)
    ready_order: str = "seq"
    # snapshot() returns the spec state (started, closed, next_seq, and each task's version)
    # and state() a task's state; False: neither is asked, only the answers of the calls are
    # compared
    snapshot: bool = True
    # refusals are named as in refsched.errors; False (errors with names of their own): only
    # whether a call is refused is compared, not which error it raises
    error_types: bool = True
    # submit(..., optional=[...]): edges that wait for a dependency to end in any state and
    # never block (spec SubmitOptional); False: every edge is required
    optional_edges: bool = True
    # add_deps(task, deps, optional): edges added to a pending version (spec AddDeps)
    add_deps: bool = True
    # the provenance of each blocked or cancelled version (``info(t).provenance``; on the wire
    # the ``provenance`` op), and the ``actor`` and ``reason`` cancel(), fail() and
    # acknowledge_cancel() take for it; False: neither is sent
    provenance: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "ready_order":
                if value not in READY_ORDERS:
                    raise ProfileError(f"ready_order must be one of {READY_ORDERS}, not {value!r}")
            elif not isinstance(value, bool):
                raise ProfileError(f"{f.name} must be true or false, not {value!r}")
        if self.ready_order == "any" and self.limit:
            raise ProfileError("ready_order 'any' needs limit false: with a limit, which "
                               "versions are claimed depends on the order")
        if self.retry and not (self.generations and (self.fail or self.cancel)):
            raise ProfileError("retry needs generations, and fail or cancel (a version to retry)")

    @classmethod
    def from_json(cls, data: Any) -> Profile:
        """A profile from the hello answer's ``profile`` object; absent keys keep the default."""
        return cls(**_known(cls, data))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line: what is left out of the full contract."""
        off = [f.name for f in dataclasses.fields(self)
               if isinstance(getattr(self, f.name), bool) and not getattr(self, f.name)]
        order = "" if self.ready_order == "seq" else f", ready order {self.ready_order}"
        return ("full contract" if not off and not order
                else "without " + ", ".join(off) + order)


FULL: Final = Profile()
# a static graph, run once: what graphlib.TopologicalSorter offers
STATIC: Final = Profile(generations=False, cancel=False, retry=False, fail=False, dynamic=False,
                        close=False, limit=False, ready_order="any", snapshot=False,
                        error_types=False, optional_edges=False, add_deps=False,
                        provenance=False)


class _Flags:
    """A profile of boolean flags, each true in the full contract."""

    def _check_flags(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if not isinstance(getattr(self, f.name), bool):
                raise ProfileError(f"{f.name} must be true or false, not "
                                   f"{getattr(self, f.name)!r}")

    def __post_init__(self) -> None:
        self._check_flags()

    @classmethod
    def from_json(cls, data: Any) -> Self:
        return cls(**_known(cls, data))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]

    def describe(self) -> str:
        """One line: what is left out of the full contract."""
        off = [f.name for f in dataclasses.fields(self)  # type: ignore[arg-type]
               if not getattr(self, f.name)]
        return "full contract" if not off else "without " + ", ".join(off)


@dataclass(frozen=True)
class TimerProfile(_Flags):
    """The parts of the timer's contract (``docs/timer.md``) an implementation keeps."""

    # schedule() of an id already scheduled (a new version, the old entry stale), and
    # callbacks naming another version; False: each id is scheduled once
    versions: bool = True
    # complete() and fail() of a version next() handed out; False: a handed-out version is
    # never reported on (the model keeps it running)
    callbacks: bool = True
    # cancel()
    cancel: bool = True
    # close()
    close: bool = True
    # snapshot() (the spec's variables) and state(); False: only the answers are compared
    snapshot: bool = True
    # stats(), the counters
    stats: bool = True
    # bad arguments (a run_at that is no number, a priority that is no int, a version that is
    # no int) refused with InvalidArgumentError; False: no bad argument is sent
    validates: bool = True


@dataclass(frozen=True)
class DurableProfile(_Flags):
    """The parts of the durable scheduler's contract (``docs/durable.md``) an implementation
    keeps. A job queue without leases or dependencies keeps few of them; what it does with a
    lease that runs out (its worker died, or went quiet) is still compared."""

    # submit() with dependencies; False: every task is independent
    deps: bool = True
    # submit() of an id already submitted (a new generation); False: each id once
    generations: bool = True
    # start(), before which nothing is claimed; False: claims are open from the beginning (the
    # model starts at once, and start() is not sent)
    start: bool = True
    # cancel() and acknowledge_cancel()
    cancel: bool = True
    # retry()
    retry: bool = True
    # close()
    close: bool = True
    # heartbeat()
    heartbeat: bool = True
    # expire() on its own (the expiry claim() does first is compared either way)
    expire: bool = True
    # snapshot(), leases(), now(), stats(), history(); False: only the answers are compared
    snapshot: bool = True
    # bad arguments refused with InvalidArgumentError; False: none is sent
    validates: bool = True
    # due times and priorities (docs/time.md): submit() takes ``priority`` and ``delay``,
    # claim() takes only due versions in the claim-key order, times() is compared; False: no
    # submit names either, and no trace that gives one is replayed
    time: bool = True
    # recurring schedules: schedule(), unschedule(), pause(), resume(), schedules()
    schedules: bool = True
    # edge kinds and added dependencies (docs/dag.md): submit() takes ``optional`` (deps whose
    # end, not success, the version waits for), add_deps() adds deps to a pending version;
    # False: neither is sent, and no trace that takes either is replayed
    edges: bool = True
    # provenance(): how a blocked or cancelled version came to end (docs/durable.md), and the
    # actor and reason cancel() takes for it; False: neither is sent
    provenance: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.retry and not self.generations:
            raise ProfileError("retry needs generations (a retry makes a new generation)")


@dataclass(frozen=True)
class WholeProfile(_Flags):
    """A system checked whole: no flags."""


@dataclass(frozen=True)
class PoolProfile(_Flags):
    """The parts of the work-stealing pool's contract (``docs/pool.md``) an implementation
    keeps."""

    # batch steals (spec StealBatch): ``new`` takes ``steal_cap`` > 1, and a thief then takes
    # steal_cap tasks from a victim's deque of twice as many or more; False: single steals
    # only, and no pool is asked for batches
    batch_steals: bool = True
    # managed blocking (spec Block, StartSpare, Unblock, Retire): ``new`` takes ``spares`` and
    # ``max_spares``, and the moves block, start_spare, unblock, retire and the reading
    # blocking_snapshot are asked; False: no pool is asked for spares
    managed_blocking: bool = True


def _known(cls: type, data: Any) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise ProfileError(f"profile must be a JSON object, not {data!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"unknown profile keys: {', '.join(unknown)} "
                           f"(known: {', '.join(sorted(known)) or 'none'})")
    return dict(data)


TIMER_FULL: Final = TimerProfile()
WHOLE: Final = WholeProfile()
_PROFILES: Final[Mapping[str, Any]] = {"scheduler": Profile, "timer": TimerProfile,
                                       "pool": PoolProfile, "durable": DurableProfile}


def profile_from_json(system: str, data: Any) -> Any:
    """The profile a hello declares for ``system`` (``Profile``, ``TimerProfile``,
    ``PoolProfile`` or ``DurableProfile``). Errors: malformed, unknown keys, contradictions ->
    ``ProfileError``."""
    profile = _PROFILES[system].from_json(data)
    return profile


DECLARED: Final[Mapping[str, tuple[str, ...]]] = {
    "scheduler": ("optional_edges", "add_deps", "provenance"),
    "pool": ("batch_steals", "managed_blocking"),
    "durable": ("edges", "provenance")}
"""Per system, the flags a hello must declare to have them: left out, they are false. They
came after the protocol's first operations, so a program written before them, which declares
nothing of them, is never sent their calls."""


def profile_from_hello(system: str, data: Any) -> Any:
    """The profile a hello answer's ``profile`` object declares for ``system``: a key left out
    keeps the full contract's value, but the flags of :data:`DECLARED`, which are false.
    Errors: as :func:`profile_from_json`."""
    if isinstance(data, Mapping):
        data = {**dict.fromkeys(DECLARED.get(system, ()), False), **data}
    return profile_from_json(system, data)


def profile_argument(system: str, text: str | None) -> Any:
    """The profile a command line's ``--profile JSON`` gives for ``system`` (None: the full
    contract). Errors: not JSON (its message), malformed, unknown keys, contradictions ->
    ``ProfileError``."""
    if text is None:
        return full_profile(system)
    try:
        data = json.loads(text)
    except ValueError as e:  # JSONDecodeError
        raise ProfileError(str(e)) from None
    return profile_from_json(system, data)


def full_profile(system: str) -> Any:
    """The full contract of ``system``."""
    return _PROFILES[system]()
