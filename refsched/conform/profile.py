"""What an implementation declares it supports: the oracle generates only what this admits."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["FULL", "STATIC", "Profile", "ProfileError"]

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
        if not isinstance(data, Mapping):
            raise ProfileError(f"profile must be a JSON object, not {data!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ProfileError(f"unknown profile keys: {', '.join(unknown)} "
                               f"(known: {', '.join(sorted(known))})")
        return cls(**dict(data))

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
                        error_types=False)
