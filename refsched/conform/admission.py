"""What of a trace corpus a profile admits: per system, how many steps of a trace an
implementation with a given profile may be asked, and the traces (whole, or their longest
admitted prefixes) the corpus phase then replays.

The TaskScheduler's rule is :func:`admitted_steps`, the timer's :func:`timer_admitted_steps`,
the durable scheduler's :func:`durable_admitted_steps` (the pool's profile has no flags: every
step is admitted). :func:`admitted_traces` applies any of them to a corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from refsched.profile import DurableProfile, Profile, TimerProfile
from refsched.verify.itf import Step, Trace

__all__ = ["admitted_steps", "admitted_traces", "durable_admitted_steps",
           "timer_admitted_steps"]

# The spec actions a profile flag must allow, besides what Submit and Claim depend on.
_NEEDS: Final = {"Fail": "fail", "Cancel": "cancel", "AcknowledgeCancel": "cancel",
                 "Retry": "retry", "Close": "close", "StaleCallback": "generations",
                 "AddDeps": "add_deps"}

_DURABLE_NEEDS: Final = {"Cancel": ("cancel",), "AcknowledgeCancel": ("cancel",),
                         "AcknowledgeCancelAnswerLost": ("cancel",), "Retry": ("retry",),
                         "Close": ("close",), "Heartbeat": ("heartbeat",),
                         "Expire": ("expire",), "RepeatedCallback": ("cancel",),
                         # edge kinds and add_deps: a profile's with deps and edges
                         "SubmitOptional": ("deps", "edges"),
                         "AddDeps": ("deps", "edges")}

_TIMER_NEEDS: Final = {"Complete": ("callbacks",), "Fail": ("callbacks",),
                       "RepeatedCallback": ("callbacks",),
                       "StaleCallback": ("callbacks", "versions"), "Cancel": ("cancel",),
                       "Close": ("close",)}


def _admitted_prefix(trace: Trace, admits: Callable[[Step, Mapping[str, Any]], bool]) -> int:
    """How many steps of ``trace``, from its start, ``admits(step, state before)`` admits. A
    malformed trace is admitted whole: the replay says what is wrong."""
    before = trace.initial
    try:
        for index, step in enumerate(trace.steps):
            if not admits(step, before):
                return index
            before = step.state
    except (KeyError, TypeError, AttributeError):
        return len(trace.steps)
    return len(trace.steps)


def _admits_step(profile: Profile, action: str, params: Mapping[str, Any],
                 before: Mapping[str, Any]) -> bool:
    flag = _NEEDS.get(action)
    if flag is not None and not getattr(profile, flag):
        return False
    if action in ("SubmitOptional", "AddDeps") and not profile.optional_edges and (
            action == "SubmitOptional" or params.get("O")):
        return False
    if flag is not None:
        return True
    if action in ("Submit", "SubmitOptional"):
        if before["started"] and not profile.dynamic:
            return False
        return profile.generations or before["generation"][params["t"]] == 0
    if action == "Claim":  # without a limit, ready() claims every ready version
        return profile.limit or params["k"] == sum(
            1 for state in before["state"].values() if state == "ready")
    return True


def admitted_steps(profile: Profile, trace: Trace) -> int:
    """How many steps of ``trace``, from its start, the oracle may ask of an implementation
    with ``profile`` (``len(trace.steps)``: all of them).

    Left out: Fail, Cancel, AcknowledgeCancel, Retry, Close, StaleCallback and AddDeps steps
    unless the profile has ``fail``, ``cancel``, ``retry``, ``close``, ``generations``,
    ``add_deps``; a SubmitOptional, or an AddDeps of an optional edge, unless it has
    ``optional_edges``; a Submit after Start unless ``dynamic``; a Submit of an id already
    submitted unless ``generations``; without ``limit``, a Claim of fewer than every ready
    version (``ready()`` claims them all). A malformed trace is admitted whole: the replay
    says what is wrong.
    """
    return _admitted_prefix(trace, lambda step, before: _admits_step(
        profile, step.action, step.params, before))


def _admitted(needs: Mapping[str, tuple[str, ...]],
              submitted: Callable[[Any, Step, Mapping[str, Any]], bool],
              profile: Any, trace: Trace) -> int:
    """How many steps of ``trace``, from its start, ``profile`` admits: each action needs the
    flags ``needs`` names, and ``submitted(profile, step, before)`` says whether a submission
    (a Schedule, a Submit) is admitted in the state before it."""
    def admits(step: Step, before: Mapping[str, Any]) -> bool:
        if not all(getattr(profile, flag, False) for flag in needs.get(step.action, ())):
            return False
        return (step.action not in ("Schedule", "Submit")
                or submitted(profile, step, before))
    return _admitted_prefix(trace, admits)


def timer_admitted_steps(profile: TimerProfile, trace: Trace) -> int:
    """How many steps of a timer trace, from its start, ``profile`` admits: a Schedule of an
    id already scheduled needs ``versions``; Complete, Fail, RepeatedCallback ``callbacks``;
    StaleCallback both; Cancel ``cancel``; Close ``close``."""
    def submitted(profile: TimerProfile, step: Step, before: Mapping[str, Any]) -> bool:
        return profile.versions or before["version"][step.params["t"]] == 0
    return _admitted(_TIMER_NEEDS, submitted, profile, trace)


def durable_admitted_steps(profile: DurableProfile, trace: Trace) -> int:
    """How many steps of a durable trace, from its start, ``profile`` admits: a Submit with
    dependencies needs ``deps``, of an id already submitted ``generations``; Cancel and
    AcknowledgeCancel (its answer lost or not) need ``cancel``, Retry ``retry``, Close
    ``close``, Heartbeat ``heartbeat``, Expire ``expire``; RepeatedCallback ``cancel`` too (a
    version no report ended is asked again through ``cancel()``); a Submit with a priority or
    a delay ``time``. Start is admitted without ``start``: it is then taken without a call."""
    def submitted(profile: DurableProfile, step: Step, before: Mapping[str, Any]) -> bool:
        return ((profile.deps or not step.params["D"])
                and (profile.time or not (step.params.get("p") or step.params.get("d")))
                and (profile.generations or before["generation"][step.params["t"]] == 0))
    return _admitted(_DURABLE_NEEDS, submitted, profile, trace)


def _calls_key(steps: Sequence[Step]) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    return tuple((s.action, tuple(sorted(s.params.items()))) for s in steps)


def admitted_traces(profile: Any, traces: Sequence[Trace],
                    admitted: Callable[[Any, Trace], int] = admitted_steps,
                    ) -> tuple[list[Trace], int]:
    """What of ``traces`` the oracle replays under ``profile``, and how many are whole.

    A trace every step of which is admitted is kept whole; of another, its longest admitted
    prefix (a prefix of a behaviour of the spec is one too), named ``<name>-first-<n>``, unless
    it is empty or the start of a trace already kept. Restrictive profiles thus still replay
    the corpus's beginnings. ``admitted(profile, trace)`` says how many steps of a trace the
    profile admits (:func:`admitted_steps`, the TaskScheduler's, unless given).
    """
    whole: list[Trace] = []
    cut: list[Trace] = []
    for trace in traces:
        n = admitted(profile, trace)
        if n == len(trace.steps):
            whole.append(trace)
        elif n > 0:
            cut.append(Trace(f"{trace.name}-first-{n}", trace.constants, trace.initial,
                             tuple(trace.steps[:n]), trace.meta))
    if not cut:
        return whole, len(whole)
    seen: set[tuple[Any, ...]] = set()
    for trace in whole:
        key = _calls_key(trace.steps)
        seen.update(key[:i] for i in range(1, len(key) + 1))
    prefixes: list[Trace] = []
    for trace in sorted(cut, key=lambda t: -len(t.steps)):  # longest first: shorter are starts
        key = _calls_key(trace.steps)
        if key not in seen:
            seen.update(key[:i] for i in range(1, len(key) + 1))
            prefixes.append(trace)
    order = {id(t): i for i, t in enumerate(cut)}
    return whole + sorted(prefixes, key=lambda t: order[id(t)]), len(whole)
