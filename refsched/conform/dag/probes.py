"""The TaskScheduler's clause probes: for each clause, a short run of calls that ends in it.

The generated phase draws its calls at random and may never reach a case the contract states
(a boolean ``limit``, a negative ``max_concurrency``, the order of a close report); each probe
here reaches one on purpose, so that every clause of ``dag.*`` (:mod:`refsched.conform.clauses`)
is asked of every implementation whose profile admits it. ``refsched.conform.probes`` runs them
through the model and the implementation and compares every answer.

A call is ``(method, args)``; ``("new", (n,))`` makes a fresh instance on both sides (a refused
one leaves the current instance current). The ids are ``a`` to ``d`` (``x``, ``y`` and ``z`` are
never submitted), so that without ``limit`` a concurrency of four claims every ready version.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, Final

from refsched.conform import clauses
from refsched.conform.client import HarnessError
from refsched.conform.probes import Probe, differ, snapshots_differ
from refsched.errors import CycleError, StaleGenerationError, UnknownDependencyError
from refsched.profile import Profile
from refsched.types import CloseReport, Provenance, Snapshot
from refsched.verify.dag.inputs import (
    ReferenceWithInputs,
    show_provenance,
    show_summary,
    summary_rows,
)
from refsched.verify.dag.lockstep import IDS
from refsched.verify.replay import format_rows, snapshot_rows

__all__ = ["PROBES", "adapt", "call", "judge", "needs_of", "new_implementation", "new_model",
           "refusal_differs", "show", "states"]

_CLOSE: Final = tuple(f.name for f in dataclasses.fields(CloseReport))
_ROW_HEADS: Final = ("id", "field", "model", "implementation")
# the calls that take an actor and a reason (the provenance of what they end), by keyword,
# after this many positional arguments
_NOTED: Final = {"fail": 3, "cancel": 2, "acknowledge_cancel": 2}


def _p(clause: str, *calls: tuple[str, tuple[Any, ...]], needs: tuple[str, ...] = (),
       owns_state: bool = False) -> Probe:
    return Probe(clause, tuple(calls), needs, owns_state)


_Call = tuple[str, tuple[Any, ...]]
_NEW: Final[_Call] = ("new", (2,))
_STARTED: Final[tuple[_Call, ...]] = (_NEW, ("submit", ("a", [])), ("start", ()))
_RUNNING_A: Final[tuple[_Call, ...]] = (*_STARTED, ("ready", (None,)))

PROBES: Final[tuple[Probe, ...]] = (
    _p("dag.new.ok", ("new", (0,)), ("submit", ("a", [])), ("start", ()), ("ready", (None,)),
       ("new", (1,)), ("submit", ("b", [])), ("start", ()), ("ready", (None,))),
    _p("dag.new.invalid", _NEW, ("submit", ("a", [])), ("new", (-1,)), ("submit", ("b", [])),
       ("new", (True,)), ("new", (1.5,)), ("start", ()), ("ready", (None,))),
    _p("dag.submit.optional", _NEW, ("submit", ("a", [])), ("submit", ("c", [])),
       ("submit", ("b", ["c"], None, ["a"])), ("start", ()), ("ready", (1,)),
       ("complete", ("a", 1)), ("ready", (None,)), ("complete", ("c", 1))),
    _p("dag.submit.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("a", [])), needs=("generations",)),
    _p("dag.submit.duplicate-dep", _NEW, ("submit", ("a", [])),
       ("submit", ("b", ["a", "a"])), ("submit", ("c", []))),
    _p("dag.submit.duplicate-dep", _NEW, ("submit", ("a", [])),
       ("submit", ("b", ["a"], None, ["a"])), ("submit", ("c", [], None, ["a", "a"])),
       ("submit", ("d", [], None, ["d"]))),
    _p("dag.submit.self-dep", _NEW, ("submit", ("a", ["a"])), ("submit", ("b", []))),
    _p("dag.submit.closed", _NEW, ("submit", ("a", [])), ("close", (True,)),
       ("submit", ("b", []))),
    _p("dag.submit.running", *_RUNNING_A, ("submit", ("a", []))),
    _p("dag.submit.unknown-dep", *_STARTED, ("submit", ("b", ["x", "a", "y"]))),
    _p("dag.submit.cycle", _NEW, ("submit", ("a", ["b"])), ("submit", ("b", [])),
       ("start", ()), ("submit", ("b", ["a"])), needs=("generations",)),
    _p("dag.start.ok", _NEW, ("submit", ("b", ["a"])), ("submit", ("a", [])), ("start", ())),
    _p("dag.start.closed", _NEW, ("submit", ("a", [])), ("close", (False,)), ("start", ())),
    _p("dag.start.twice", *_STARTED, ("start", ())),
    _p("dag.start.unknown-dep", _NEW, ("submit", ("a", ["x", "y"])), ("submit", ("b", ["x"])),
       ("start", ()), ("submit", ("x", [])), ("submit", ("y", [])), ("start", ())),
    _p("dag.start.cycle", _NEW, ("submit", ("b", ["a"])), ("submit", ("c", ["b"])),
       ("submit", ("a", ["c"])), ("start", ())),
    _p("dag.ready.ok", _NEW, ("submit", ("c", [])), ("submit", ("b", [])),
       ("submit", ("a", [])), ("submit", ("d", ["b"])), ("start", ()), ("ready", (1,)),
       ("ready", (None,)), ("complete", ("c", 1)), ("ready", (None,)), ("complete", ("b", 1)),
       ("ready", (0,)), ("ready", (None,))),
    _p("dag.ready.limit-not-int", *_STARTED, ("ready", (True,)), ("ready", (1.5,)),
       ("ready", ("1",)), ("ready", (False,)), ("ready", (1,))),
    _p("dag.ready.limit-negative", *_STARTED, ("ready", (-1,)), ("ready", (1,))),
    _p("dag.ready.not-started", _NEW, ("submit", ("a", [])), ("ready", (None,))),
    _p("dag.complete.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])), ("start", ()),
       ("ready", (None,)), ("complete", ("a", 1)), ("complete", ("a", 1)), ("ready", (None,))),
    _p("dag.fail.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", ["b"])), ("start", ()), ("ready", (None,)), ("fail", ("a", 1)),
       ("fail", ("a", 1))),
    _p("dag.acknowledge_cancel.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("start", ()), ("ready", (None,)), ("acknowledge_cancel", ("a", 1)),
       ("acknowledge_cancel", ("a", 1))),
    _p("dag.callback.waiting", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("start", ()), ("complete", ("b", 1)), ("complete", ("a", 1))),
    _p("dag.callback.generation-not-int", *_RUNNING_A, ("complete", ("a", True)),
       ("complete", ("a", 1.5)), ("complete", ("a", "1")), ("complete", ("a", 1))),
    _p("dag.callback.negative-generation", *_RUNNING_A, ("complete", ("a", -1)),
       ("complete", ("a", 1))),
    _p("dag.callback.stale", *_RUNNING_A, ("complete", ("a", 2)), ("complete", ("a", 0)),
       ("complete", ("a", 1))),
    _p("dag.call.unknown-task", _NEW, ("submit", ("a", [])), ("state", ("z",)),
       ("complete", ("z", 1)), ("retry", ("z",)), ("cancel", ("z", None))),
    _p("dag.cancel.running", *_RUNNING_A, ("cancel", ("a", None)), ("cancel", ("a", 1)),
       ("cancel", ("a", None)), ("acknowledge_cancel", ("a", 1))),
    _p("dag.cancel.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("cancel", ("a", None)), ("cancel", ("a", None)), ("start", ())),
    _p("dag.retry.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("cancel", ("a", None)), ("retry", ("a",)), ("start", ()), ("ready", (None,)),
       ("fail", ("a", 2)), ("retry", ("a",)), ("ready", (None,))),
    _p("dag.retry.closed", _NEW, ("submit", ("a", [])), ("cancel", ("a", None)),
       ("close", (True,)), ("retry", ("a",))),
    _p("dag.retry.not-dead", _NEW, ("submit", ("a", [])), ("retry", ("a",))),
    _p("dag.edge.optional-succeeded", _NEW, ("submit", ("a", [])),
       ("submit", ("b", [], None, ["a"])), ("start", ()), ("ready", (None,)),
       ("input_summary", ("b",)), ("complete", ("a", 1)), ("input_summary", ("b",)),
       owns_state=True),
    _p("dag.edge.optional-dead", _NEW, ("submit", ("a", [])), ("submit", ("c", [])),
       ("submit", ("b", ["c"], None, ["a"])), ("start", ()), ("ready", (None,)),
       ("fail", ("a", 1)), ("input_summary", ("b",)), ("complete", ("c", 1)),
       ("ready", (None,)), ("input_summary", ("b",)), owns_state=True),
    _p("dag.edge.optional-dead", _NEW, ("submit", ("a", [])), ("submit", ("c", [])),
       ("submit", ("d", ["c"])), ("submit", ("b", [], None, ["a", "d"])),
       ("cancel", ("c", None)), ("input_summary", ("b",)), ("start", ()), ("ready", (None,)),
       ("acknowledge_cancel", ("a", 1)), ("input_summary", ("b",)), owns_state=True),
    _p("dag.input_summary.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", [], None, ["a"])),
       ("input_summary", ("b",)), ("start", ()), ("ready", (None,)), ("complete", ("a", 1)),
       ("submit", ("a", [])), ("input_summary", ("b",)), ("ready", (None,)),
       ("complete", ("a", 2)), ("ready", (None,)), ("submit", ("a", [])),
       ("input_summary", ("b",)), ("input_summary", ("z",)), owns_state=True),
    _p("dag.provenance.cancelled", _NEW, ("submit", ("a", [])), ("submit", ("b", [])),
       ("cancel", ("a", None, "ops", "not needed")), ("provenance", ("a",)),
       ("cancel", ("b", 1)), ("provenance", ("b",))),
    _p("dag.provenance.cancelled", *_RUNNING_A, ("cancel", ("a", 1, "ops", "stop")),
       ("provenance", ("a",)), ("acknowledge_cancel", ("a", 1, "worker", "stopped")),
       ("provenance", ("a",))),
    _p("dag.provenance.cancelled", _NEW, ("submit", ("a", [])), ("close", (True,)),
       ("provenance", ("a",))),
    _p("dag.provenance.blocked", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", ["b"])), ("submit", ("d", ["a", "c"])), ("start", ()),
       ("ready", (None,)), ("fail", ("a", 1, None, "worker", "disk full")),
       ("provenance", ("b",)), ("provenance", ("d",)), ("provenance", ("c",))),
    _p("dag.provenance.blocked", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", ["b"])), ("cancel", ("a", None, None, "superseded")),
       ("provenance", ("c",))),
    _p("dag.provenance.none", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("provenance", ("a",)), ("start", ()), ("ready", (None,)),
       ("fail", ("a", 1, None, "worker", "bad input")), ("provenance", ("a",)),
       ("retry", ("a",)), ("provenance", ("b",)), ("cancel", ("a", None)),
       ("submit", ("a", [])), ("provenance", ("a",))),
    _p("dag.call.unknown-task", _NEW, ("submit", ("a", [])), ("provenance", ("z",))),
    _p("dag.add_deps.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", [])), ("add_deps", ("b", ["c"])), ("start", ()), ("ready", (None,)),
       ("complete", ("a", 1)), ("complete", ("c", 1)), ("ready", (None,)), owns_state=True),
    _p("dag.add_deps.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", [])), ("submit", ("d", ["a"])), ("start", ()), ("ready", (None,)),
       ("fail", ("c", 1)), ("add_deps", ("b", ["c"])), ("add_deps", ("d", [], ["c"])),
       ("complete", ("a", 1)), ("input_summary", ("d",)), owns_state=True),
    _p("dag.add_deps.twice", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", [])), ("add_deps", ("b", ["c", "c"])), ("add_deps", ("z", ["c", "c"])),
       ("add_deps", ("b", ["c"]))),
    _p("dag.add_deps.twice", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", [])), ("add_deps", ("b", ["c"], ["c"])), ("add_deps", ("b", [], ["c"]))),
    _p("dag.add_deps.invalid", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", [])), ("add_deps", ("b", [])), ("add_deps", ("b", ["b"])),
       ("add_deps", ("b", ["a"])), ("add_deps", ("b", ["c", "a"])), ("add_deps", ("b", ["c"]))),
    _p("dag.add_deps.closed", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("close", (False,)), ("add_deps", ("b", ["x"])), ("add_deps", ("a", ["x"]))),
    _p("dag.add_deps.not-pending", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("submit", ("c", [])), ("add_deps", ("a", ["c"])), ("start", ()), ("ready", (None,)),
       ("add_deps", ("a", ["x"])), ("complete", ("a", 1)), ("add_deps", ("b", ["c"])),
       ("add_deps", ("a", ["c"]))),
    _p("dag.add_deps.unknown-dep", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("add_deps", ("b", ["y"])), ("submit", ("y", [])), ("start", ()),
       ("add_deps", ("b", ["x", "c"]))),
    _p("dag.add_deps.cycle", _NEW, ("submit", ("d", [])), ("submit", ("a", ["d"])),
       ("submit", ("b", ["a"])), ("start", ()), ("add_deps", ("a", ["b"])),
       ("add_deps", ("a", ["c", "b"]))),
    _p("dag.close.ok", _NEW, ("submit", ("c", [])), ("submit", ("b", [])),
       ("submit", ("a", [])), ("submit", ("d", ["c"])), ("start", ()), ("ready", (1,)),
       ("close", (True,))),
    _p("dag.close.ok", _NEW, ("submit", ("d", [])), ("submit", ("b", [])),
       ("submit", ("a", ["d"])), ("start", ()), ("ready", (1,)), ("complete", ("d", 1)),
       ("close", (False,)), ("close", (True,))),
    _p("dag.close.flag-not-bool", _NEW, ("submit", ("a", [])), ("close", ("yes",)),
       ("close", (1,)), ("submit", ("b", []))),
    _p("dag.snapshot.ok", _NEW, ("submit", ("b", [])), ("submit", ("a", ["b"])),
       ("snapshot", ())),
    _p("dag.state.ok", _NEW, ("submit", ("a", [])), ("submit", ("b", ["a"])),
       ("state", ("a",)), ("state", ("b",))),
)
"""One probe per clause of ``dag.*`` at least, in the catalogue's order."""


# -- how the scheduler's answers are compared ---------------------------------------------------

def needs_of(probe: Probe) -> tuple[str, ...]:
    """The profile flags a probe's calls need: each op's flag, a limit, a submit after start
    (``dynamic``) or of an id already submitted (``generations``), a stale generation, an
    optional edge (``optional_edges``)."""
    needs: set[str] = set()
    started = False
    submitted: set[Any] = set()
    flags = {"cancel": ("cancel",), "acknowledge_cancel": ("cancel",), "retry": ("retry",),
             "fail": ("fail",), "close": ("close",), "snapshot": ("snapshot",),
             "state": ("snapshot",), "add_deps": ("add_deps",),
             "input_summary": ("optional_edges", "snapshot"), "provenance": ("provenance",)}
    optional_at = {"submit": 3, "add_deps": 2}  # where a call's ``optional`` ids are
    for method, args in probe.calls:
        needs.update(flags.get(method, ()))
        if len(args) > _NOTED.get(method, len(args)):  # an actor and a reason
            needs.add("provenance")
        if method in optional_at and len(args) > optional_at[method] and args[
                optional_at[method]]:
            needs.add("optional_edges")
        if method == "new":
            started, submitted = False, set()
        elif method == "start":
            started = True
        elif method == "ready" and args[0] is not None:
            needs.add("limit")
        elif method == "submit":
            if started:
                needs.add("dynamic")
            if args[0] in submitted:
                needs.add("generations")
            submitted.add(args[0])
        elif method in ("complete", "fail", "acknowledge_cancel", "cancel") and (
                len(args) > 1 and isinstance(args[1], int) and args[1] != 1):
            needs.add("generations")
    return tuple(sorted(needs))


def adapt(method: str, args: tuple[Any, ...], profile: Profile) -> tuple[Any, ...]:
    """Without ``limit`` an implementation claims every ready version: a slot per id."""
    if (method == "new" and not profile.limit and type(args[0]) is int
            and args[0] >= 0):
        return (len(IDS),)
    return args


def new_model(max_concurrency: Any) -> ReferenceWithInputs:
    """The model of a fresh instance (with the input summaries its steps imply)."""
    return ReferenceWithInputs(max_concurrency)


def new_implementation(factory: Callable[..., Any], max_concurrency: Any) -> Any:
    """A fresh instance of the implementation."""
    return factory(max_concurrency)


def call(instance: Any, method: str, args: tuple[Any, ...]) -> Any:
    """One call of the API on either side: a callback's or ``cancel``'s arguments after its
    positional ones are its ``actor`` and ``reason``, which the API takes by keyword."""
    at = _NOTED.get(method, len(args))
    notes = dict(zip(("actor", "reason"), args[at:], strict=False))
    return getattr(instance, method)(*args[:at], **notes)


def show(value: Any) -> str:
    """An answer as the counterexample table shows it."""
    if isinstance(value, list):
        return repr([(c.task_id, c.generation) for c in value])
    if isinstance(value, CloseReport):
        return "{" + ", ".join(f"{name}: {list(getattr(value, name))}" for name in _CLOSE
                               if getattr(value, name)) + "}"
    if isinstance(value, dict):  # an input summary
        return show_summary(value)
    if isinstance(value, Provenance):
        return show_provenance(value)
    return repr(value)


def _valid_cycle(cycle: list[Any], edges: dict[Any, frozenset[Any]]) -> bool:
    """Each entry a dependency of the next, closing on itself: a cycle of the graph, from
    whichever of its entries."""
    if len(cycle) < 2 or cycle[0] != cycle[-1]:
        return False
    return all(b in edges and a in edges[b] for a, b in itertools.pairwise(cycle))


def refusal_differs(method: str, args: tuple[Any, ...], before: Snapshot | None,
                    expected: BaseException, actual: BaseException,
                    system: str = "scheduler") -> str | None:
    """How two refusals of the same type differ in what identifies them, or None (``args``
    named by ``system``'s parameters: the durable scheduler's refusals are read here too)."""
    if isinstance(expected, UnknownDependencyError):
        want = {tuple(p) for p in expected.missing}
        got = {tuple(p) for p in getattr(actual, "missing", ())}
        if got != want:
            return (f"the implementation's missing pairs are {sorted(got)}, the model's "
                    f"{sorted(want)} (compared as sets)")
    if isinstance(expected, StaleGenerationError):
        want_pair = (expected.generation, expected.current)
        got_pair = (getattr(actual, "generation", None), getattr(actual, "current", None))
        if got_pair != want_pair:
            return (f"the implementation's StaleGenerationError names generation "
                    f"{got_pair[0]!r}, current {got_pair[1]!r}; the model's "
                    f"{want_pair[0]!r}, {want_pair[1]!r}")
    if isinstance(expected, CycleError) and before is not None:
        edges = {t: v.deps for t, v in before.tasks.items()}
        named = dict(zip(clauses.PARAMETERS[system].get(method, ()), args, strict=False))
        new = frozenset((*named.get("deps", ()), *(named.get("optional") or ())))
        if method == "submit":  # the new version's edges, required and optional
            edges[args[0]] = new
        elif method == "add_deps":  # the pending version's edges and the new ones
            edges[args[0]] = edges.get(args[0], frozenset()) | new
        cycle = list(getattr(actual, "cycle", ()))
        if not _valid_cycle(cycle, edges):
            return f"the cycle reported, {cycle!r}, is not a cycle of the graph"
    return None


def judge(method: str, args: tuple[Any, ...], before: Snapshot | None, expected: Any,
          expected_error: BaseException | None, actual: Any,
          actual_error: BaseException | None, profile: Profile) -> str | None:
    """How the implementation's answer differs from the model's, in a sentence, or None."""
    return differ(expected, expected_error, actual, actual_error, show=show,
                  comparable=lambda value: _comparable(value, profile),
                  error_types=profile.error_types,
                  refusal=lambda: (refusal_differs(method, args, before, expected_error,
                                                   actual_error)
                                   if expected_error is not None and actual_error is not None
                                   else None))



def _comparable(value: Any, profile: Profile) -> Any:
    """Claims by id and generation (as a set under ready order "any"); a close report's
    lists in their order, which the contract states (``seq`` order)."""
    if isinstance(value, list):
        try:
            claims = [(c.task_id, c.generation) for c in value]
        except AttributeError:
            return value
        return claims if profile.ready_order == "seq" else sorted(claims, key=repr)
    if isinstance(value, CloseReport):
        return tuple(tuple(getattr(value, name)) for name in _CLOSE)
    return value


def states(model: Any, impl: Any) -> tuple[str | None, str]:
    """How the implementation's snapshot differs from the model's, or else its input
    summaries (of the versions with optional edges): a sentence and the rows of the fields,
    or None and ""."""
    problem, rows = snapshots_differ(model, impl, lambda m, i: format_rows(
        _ROW_HEADS, snapshot_rows(m, i)))
    if problem is not None:
        return problem, rows
    summaries = summary_rows(model, impl, (HarnessError,))
    if summaries:
        return ("input_summary() is not what the model's steps give after the call",
                format_rows(_ROW_HEADS, summaries))
    return None, ""

