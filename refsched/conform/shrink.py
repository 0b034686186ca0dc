"""Delta debugging of a counterexample: remove calls until none can go.

Hypothesis shrinks a failing run within what its rules can generate: a rule held back by a
precondition (``close()`` only after 30 calls) keeps calls in the run that the divergence does
not need. A corpus trace is the shortest *diverging prefix* the corpus holds, not the shortest
call sequence. This pass takes either one further, by Zeller's ddmin over its calls: remove a
chunk, re-run what is left against a **fresh** implementation instance and the model, keep the
removal when the run still diverges *the same way* (:func:`divergence_kind`), halve the chunks
when none can go, and end when no single call can go: the result is 1-minimal, every call of it
is needed.

A candidate is re-run by a *judge*: a function from a sequence of items (the lock-step
machine's calls, or a trace's spec steps) to the divergence it shows, or None. Two judges:

- :class:`MachineJudge` (the scheduler and the timer, whose generated runs are API calls): the
  system's lock-step machine, built fresh, takes each call through its own comparison
  (``both``), precondition or not;
- :class:`TraceJudge` (every corpus counterexample, and the pool's and the durable scheduler's
  generated ones, whose runs are spec steps): the model takes the steps (a candidate whose step
  the model does not enable is no run), and :func:`refsched.verify.replay.replay` drives the
  implementation through the trace they make.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Generic, TypeVar

from refsched.verify import system as systems
from refsched.verify.itf import Step, Trace
from refsched.verify.replay import Divergence, replay

__all__ = ["MachineJudge", "Shrunk", "TraceJudge", "ddmin", "divergence_kind", "exchange"]

_T = TypeVar("_T")

BUDGET = 400  # candidate runs at most: a pass over a 40-call run needs far fewer


def divergence_kind(where: str, reason: str) -> tuple[str, str]:
    """What makes two divergences the same: the call (or spec action) that diverges, and how.

    How is one of: the states differ after it (``state``), the counters (``stats``), the
    implementation's own invariants (``invariants``), or the answers, split by which side
    raised (``answer``, ``raised``: the implementation did and the model did not,
    ``refused``: the model did, ``error type``: both, under different names).
    """
    text = reason.lower()
    if "check_invariants()" in text:
        how = "invariants"
    elif "stats()" in text or "counters" in text:
        how = "stats"
    elif ("snapshot" in text or "state after the step" in text or "states differ" in text
          or "state is not" in text or "leases" in text or "history" in text
          or "the workers hold" in text):
        how = "state"
    elif "the implementation raised" in text:
        how = "raised" if "the model returned" in text else "error type"
    elif "the model raised" in text or re.search(r"expected \w*error\b", text):
        how = "refused"
    elif " raised " in text:
        how = "raised"
    else:
        how = "answer"
    return where, how


@dataclass(frozen=True)
class Shrunk(Generic[_T]):
    """What the pass did: the items kept, the divergence they show, how many runs it took."""

    items: tuple[_T, ...]
    divergence: Any  # the judge's divergence of ``items``
    before: int  # items before the pass
    runs: int  # candidates re-run
    complete: bool  # False: the budget ran out before the result was 1-minimal


def ddmin(items: Sequence[_T], judge: Callable[[Sequence[_T]], tuple[Hashable, int, Any] | None],
          *, budget: int = BUDGET) -> Shrunk[_T] | None:
    """Zeller's ddmin over ``items``, with ``judge`` as the test.

    ``judge(candidate)`` answers ``(kind, used, divergence)`` when the candidate diverges:
    ``kind`` compared with the whole sequence's, ``used`` the number of items run up to the
    divergence (what follows is dropped), or None when it does not diverge. None when
    ``items`` themselves do not diverge (the divergence did not come back on a re-run).
    """
    first = judge(items)
    runs = 1
    if first is None:
        return None
    kind, used, divergence = first
    current = list(items[:used])
    chunks = 2
    while len(current) >= 2:
        size = -(-len(current) // chunks)  # ceil: every item in some chunk
        reduced = False
        for start in range(0, len(current), size):
            if runs >= budget:
                return Shrunk(tuple(current), divergence, len(items), runs, False)
            candidate = current[:start] + current[start + size:]
            found = judge(candidate)
            runs += 1
            if found is not None and found[0] == kind:
                current = candidate[:found[1]]
                divergence = found[2]
                chunks = max(chunks - 1, 2)
                reduced = True
                break
        if reduced:
            continue
        if size == 1:  # every single call was tried: none can go
            break
        chunks = min(chunks * 2, len(current))
    return Shrunk(tuple(current), divergence, len(items), runs, True)


# -- re-running lock-step calls -----------------------------------------------------------------

class _Tap:
    """An instance whose method calls are logged as (method, args, kwargs, value, error)."""

    def __init__(self, target: Any, log: list[tuple[str, tuple[Any, ...], Mapping[str, Any],
                                                   Any, BaseException | None]]) -> None:
        self._target = target
        self._log = log

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute
        log = self._log

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                value = attribute(*args, **kwargs)
            except BaseException as error:
                log.append((name, args, kwargs, None, error))
                raise
            log.append((name, args, kwargs, value, None))
            return value
        return call


Exchange = tuple[Any, Any, Any]  # (the call, the model's (value, error), the implementation's)


class MachineJudge:
    """Re-runs a lock-step run's calls on a fresh machine of the scheduler or the timer.

    ``new_machine()`` builds the machine with the implementation's factory and its profile and
    starts it as a run starts, with no initial call (a run's initial calls are among its calls).
    ``exchanges`` holds, after :meth:`record`, each call's raw answers on both sides, which the
    report encodes as the protocol does.
    """

    def __init__(self, system: str, new_machine: Callable[[], Any],
                 fatal: tuple[type[BaseException], ...]) -> None:
        self.system = system
        self.new_machine = new_machine
        self.fatal = fatal
        self.exchanges: list[Exchange] = []

    def __call__(self, calls: Sequence[Any]) -> tuple[Hashable, int, Any] | None:
        return self._run(calls, tap=False)

    def record(self, calls: Sequence[Any]) -> tuple[Hashable, int, Any] | None:
        """Re-run ``calls`` once more, keeping each call's answers in :attr:`exchanges`."""
        return self._run(calls, tap=True)

    def _run(self, calls: Sequence[Any], *, tap: bool) -> tuple[Hashable, int, Any] | None:
        machine = self.new_machine()
        model_log: list[Any] = []
        impl_log: list[Any] = []
        if tap:
            machine.model = _Tap(machine.model, model_log)
            machine.impl = _Tap(machine.impl, impl_log)
            self.exchanges = []
        try:
            for call in calls:
                marks = len(model_log), len(impl_log)
                try:
                    self._take(machine, call)
                finally:
                    if tap:
                        self.exchanges.append((
                            call, _answer(model_log[marks[0]:], call.method),
                            _answer(impl_log[marks[1]:], call.method)))
        except AssertionError as error:  # a Disagreement (the model's own asserts: no run)
            found = getattr(error, "calls", None)
            if not found or not hasattr(error, "reason"):
                return None
            last = found[-1]
            return divergence_kind(last.method, error.reason), len(found), error
        except BaseException as error:
            inner = getattr(error, "error", None)  # the DAG machine's carrier of a fatal one
            if isinstance(inner, self.fatal):
                raise inner from None
            if isinstance(error, self.fatal) or not isinstance(error, Exception):
                raise
            return None  # a call the machine cannot make from here: no run
        finally:
            teardown = getattr(machine, "teardown", None)
            if teardown is not None:
                teardown()
        return None

    def _take(self, machine: Any, call: Any) -> None:
        if self.system == "timer":
            if call.method == "advance":
                machine.clock.advance(call.args[0])
                machine.log.append(call)
                return
            machine.both(call.method, *call.args, **dict(call.kwargs))
            return
        machine.both(call.method, *call.args)
        machine.invariants_hold()


def exchange(calls: Sequence[Any], model: Any, implementation: Any,
             fatal: tuple[type[BaseException], ...]) -> list[Exchange]:
    """Make each call (``method``, ``args``, ``kwargs``) on ``model`` and on ``implementation``
    as they are, comparing nothing: each side's (value, error), for the report to encode."""
    out: list[Exchange] = []
    for call in calls:
        answers: list[tuple[Any, BaseException | None]] = []
        for side in (model, implementation):
            try:
                answers.append((getattr(side, call.method)(*call.args, **dict(call.kwargs)),
                                None))
            except fatal:
                raise
            except Exception as error:  # an answer like any other
                answers.append((None, error))
        out.append((call, answers[0], answers[1]))
    return out


def _answer(log: Sequence[Any], method: str) -> tuple[Any, BaseException | None] | None:
    """The (value, error) of the first call of ``method`` in ``log``; None: not called."""
    for name, _, _, value, error in log:
        if name == method:
            return value, error
    return None


# -- re-running spec steps ------------------------------------------------------------------------

class TraceJudge:
    """Re-runs spec steps: the model takes them from ``Init``, the implementation replays the
    trace they make (``replay``, a fresh instance per candidate)."""

    def __init__(self, system: systems.System, factory: Callable[..., Any],
                 constants: Mapping[str, Any], profile: Any,
                 fatal: tuple[type[BaseException], ...], name: str,
                 admits: Callable[[Any, Trace], int] | None = None) -> None:
        self.system = system
        # how many steps of a trace, from its start, the profile lets the oracle ask (None:
        # all): a candidate the profile does not admit whole is no run
        self.admits = admits
        self.factory = factory
        self.constants = dict(constants)
        self.profile = profile
        self.fatal = fatal
        self.name = name
        self.instance = SimpleNamespace(tasks=tuple(constants.get("Tasks", ())),
                                        workers=tuple(constants.get("Workers", ())),
                                        spares=tuple(constants.get("Spares", ())))
        self.initial_values = system.spec_state(system.initial_state(self.constants),
                                                self.instance)

    def trace(self, steps: Sequence[Step], meta: Mapping[str, Any] | None = None
              ) -> Trace | None:
        """The trace of ``steps`` from ``Init`` as the model takes them; None when the model
        does not enable one of them."""
        system, constants = self.system, self.constants
        source = system.initial_state(constants)
        taken: list[Step] = []
        for step in steps:
            try:
                params = system.spec_params(step.action, step.params, source)
                args = system.model_args(step.action, params, constants)
                if system.model_refusal(step.action, source, args, constants) is not None:
                    return None
                source = system.model_step(step.action, source, args, constants)
            except (ValueError, TypeError, KeyError):
                return None
            taken.append(Step(step.action, dict(step.params),
                              system.spec_state(source, self.instance)))
        return Trace(self.name, constants, self.initial_values, tuple(taken),
                     dict(meta or {"source": "refsched conform, shrunk by ddmin"}))

    def __call__(self, steps: Sequence[Step]) -> tuple[Hashable, int, Any] | None:
        trace = self.trace(steps)
        if trace is None:
            return None
        if self.admits is not None and self.admits(self.profile, trace) < len(trace.steps):
            return None
        report = replay([trace], self.factory, system=self.system, profile=self.profile,
                        fatal=self.fatal)
        if report.ok:
            return None
        found: Divergence = report.divergences[0]
        if found.side != "implementation":
            return None
        return divergence_kind(found.action, found.reason), found.step, (trace, found)
