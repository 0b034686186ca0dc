"""A Hypothesis state machine that drives the reference model and an implementation in lock-step.

Rules are the spec's actions (through the API calls that take them); ids and dependencies are
drawn from a small pool so collisions, cycles, resubmissions and stale callbacks happen. After
every call the two must agree on the result or on the error's type, their snapshots must be
equal, so must the input summaries of the versions with optional edges
(:mod:`refsched.verify.dag.inputs`), and every counter of the implementation's ``stats()``
must be what the model's steps and refusals so far count (:mod:`refsched.model.dag.counters`;
of the durations, their counts, and ``0 <= max <= total``); the model's invariants, the action
properties of the step and the implementation's own ``check_invariants()`` must hold.

``lockstep_machine(factory)`` builds the machine for any factory with the TaskScheduler API, so the
same machine checks refsched's scheduler and, in the must-fail tests, deliberately broken ones.

A :class:`~refsched.profile.Profile` narrows the machine to the part of the contract an
implementation keeps: its rules make only the calls the profile admits, claims compare as sets
under ready order "any", and without ``snapshot`` only the answers are compared (neither
snapshots nor counters). The default is the full contract. ``python_api`` adds what only the
Python API has: task functions handed back in claims, ``info()``, and a concurrency of 0 (which
no instance of the spec has).

A disagreement raises :class:`Disagreement`, which carries the calls of the run up to the failing
one with both sides' answers (after Hypothesis shrank the run, those of the shortest run it
found) and turns the model's steps along them into a trace of the spec (:meth:`Disagreement.trace`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from refsched.model import ACTIONS, INITIAL, violated, violated_by_step
from refsched.model.dag.counters import Counts
from refsched.model.dag.invariants import violated_by_provenance_step, violated_provenance
from refsched.profile import FULL, Profile
from refsched.types import Snapshot, TaskState
from refsched.verify.dag.inputs import ReferenceWithInputs, provenance_rows, summary_rows
from refsched.verify.dag.recording import TraceRecorder
from refsched.verify.dag.signals import LABELS, SignalLedger, ledger_for
from refsched.verify.itf import Trace
from refsched.verify.lockstep import CallLedger, run_machine
from refsched.verify.replay import Row, counter_rows, format_rows, snapshot_rows
from refsched.verify.system import Fatal

__all__ = [
    "IDS",
    "NEVER_SUBMITTED",
    "Call",
    "Disagreement",
    "Ledger",
    "lockstep_machine",
    "run_lockstep",
]

IDS = ("a", "b", "c", "d")
NEVER_SUBMITTED = "z"  # drawn now and then where an id is picked, for the unknown-id refusals
ids = st.sampled_from(IDS)
generation_offsets = st.sampled_from((0, 0, 0, 0, -1, 1))
CLAIM_LIMITS = (None, None, 1, 1, 2, 0, 3)
# Concurrency 0 is legal in the Python API but not an instance of the spec (MaxConcurrency >= 1).
CONCURRENCY = (2, 2, 3, 1)
PYTHON_CONCURRENCY = (*CONCURRENCY, 0)


def _fn() -> None:
    """A placeholder task function: the scheduler never calls it."""


def _valid_cycle(cycle: list[Hashable], edges: dict[Hashable, frozenset[Hashable]]) -> bool:
    """Each entry a dependency of the next (per ``edges``: id -> deps), closing on itself."""
    if len(cycle) < 2 or cycle[0] != cycle[-1]:
        return False
    return all(b in edges and a in edges[b] for a, b in itertools.pairwise(cycle))


def _spec_params(action: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """The spec parameters of a model history entry (Claim's arguments end with
    MaxConcurrency, which is a constant, not a parameter)."""
    return dict(zip(ACTIONS[action].params, args, strict=False))


def _show_answer(value: Any, error: BaseException | None) -> str:
    """An answer as the counterexample table shows it: a value, or the error's type and text."""
    if error is not None:
        return f"{type(error).__name__}: {error}"
    if isinstance(value, list):
        try:
            return repr([(c.task_id, c.generation) for c in value])
        except AttributeError:
            return repr(value)
    if hasattr(value, "by_state"):
        try:
            states = {t: s for s, members in value.by_state().items() for t in members}
        except (AttributeError, TypeError):
            return repr(value)
        return "{" + ", ".join(f"{t}: {s.value}"
                               for t, s in sorted(states.items(), key=repr)) + "}"
    return repr(value)


def _identifies(expected: BaseException, actual: BaseException) -> str | None:
    """How two errors of the same type differ in what identifies them: an
    ``UnknownDependencyError``'s ``missing`` pairs (as a set), a ``StaleGenerationError``'s
    generation named and current one; None when they agree."""
    if hasattr(expected, "missing"):
        want = {tuple(p) for p in expected.missing}
        got = {tuple(p) for p in getattr(actual, "missing", ())}
        if got != want:
            return (f"the implementation's missing pairs are {sorted(got, key=repr)}, the "
                    f"model's {sorted(want, key=repr)}")
    if hasattr(expected, "current") and hasattr(expected, "generation"):
        want_pair = (expected.generation, expected.current)
        got_pair = (getattr(actual, "generation", None), getattr(actual, "current", None))
        if got_pair != want_pair:
            return (f"the implementation's error names generation {got_pair[0]!r}, current "
                    f"{got_pair[1]!r}; the model's {want_pair[0]!r}, {want_pair[1]!r}")
    return None


@dataclass(frozen=True)
class Call:
    """One call of a lock-step run: what was asked, what each side answered, what followed."""

    method: str  # the API method: "submit", "ready", "complete", ...
    args: tuple[Any, ...]
    model: str  # the model's answer: a value's repr, or "ErrorType: message"
    implementation: str  # the implementation's answer, shown the same way
    agrees: bool  # False only for the failing call
    # the snapshot fields and stats() counters that differ after the call, model vs
    # implementation ("" when equal or not compared)
    diff: str = ""
    # the spec steps the model took for the call: none (a refusal) or one, (action, params)
    steps: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    state: Snapshot = INITIAL  # the model's state after the call
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The call as Python: ``submit('b', ['a'])``, ``ready(limit=1)``."""
        shown = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.method}({', '.join(shown)})"

    def to_json(self) -> dict[str, Any]:
        return {"call": self.text, "method": self.method, "args": [repr(a) for a in self.args],
                "kwargs": {k: repr(v) for k, v in self.kwargs.items()},
                "model": self.model, "implementation": self.implementation,
                "agrees": self.agrees, "diff": self.diff,
                "steps": [{"action": a, "params": {k: repr(v) for k, v in p.items()}}
                          for a, p in self.steps]}


class Disagreement(AssertionError):
    """The implementation and the model disagree.

    ``calls`` are the run's calls up to and including the failing one (the last); after
    Hypothesis has shrunk the run, the shortest failing run it found. ``max_concurrency`` is the
    concurrency both schedulers were built with.
    """

    def __init__(self, message: str, calls: Sequence[Call], max_concurrency: int,
                 states: tuple[Any, Any] = (None, None)) -> None:
        super().__init__(message)
        self.reason = message
        self.calls = tuple(calls)
        self.max_concurrency = max_concurrency
        self.states = states  # (the model's, the implementation's) where they parted

    def trace(self, name: str = "counterexample") -> Trace:
        """The model's spec steps along the calls, as a trace from ``Init``.

        A behaviour of the spec when ``max_concurrency >= 1``: each step is one the model took,
        with the action and parameters the corpus uses, and the state after it.
        """
        recorder = TraceRecorder()
        for call in self.calls:
            # A model call takes one step at most, so its state after the call is the step's;
            # its provenance stays out, as the trace's constants leave RecordProvenance off
            state = (dataclasses.replace(call.state, provenance=None)
                     if isinstance(call.state, Snapshot) else call.state)
            for action, params in call.steps:
                recorder.record(action, dict(params), state)
        return recorder.trace(self.max_concurrency, name=name,
                              meta={"source": "refsched.verify.dag.lockstep"})


def states_at(model: Any, read_implementation: Callable[[], Any]) -> tuple[Any, Any]:
    """The model's state and the implementation's (None when it cannot say) where a run
    parted, as a counterexample's picture draws them."""
    try:
        return model, read_implementation()
    except Exception:  # broken enough not to answer: the picture shows the model alone
        return model, None


class _Fatal(BaseException):
    """Carries a fatal error of the implementation through Hypothesis, which would shrink on
    an ``Exception`` and never sees a ``BaseException`` it does not know."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


@contextlib.contextmanager
def _fatal_passes(fatal: Fatal) -> Iterator[None]:
    try:
        yield
    except fatal as error:
        raise _Fatal(error) from error


class Ledger(CallLedger):
    """What a lock-step run exercised: calls, the spec actions taken, and notable steps."""

    ACTIONS = tuple(ACTIONS)
    EVENTS = (
        "refused call",  # the call raised and the state did not change
        "Settle blocked a chain",  # one step blocked versions at two or more depths
        "Retry renewed several versions",  # the retried task and a blocked descendant
        "Submit re-pended a dependent",  # a succeeded dep was replaced under a ready version
        "cycle refused",  # start() or submit() raised CycleError
        # a parent that ended dead settled an optional edge of a waiting version
        "optional edge settled by a dead parent",
        # a new version of a parent that had ended dead re-pended a waiting optional child
        "optional child waits again",
        "AddDeps blocked the version",  # a new required dep was dead
        # a provenance path recorded through two edges or more (root, a blocked parent, it)
        "provenance through two levels",
        # one Cancel blocked two dependents of the cancelled version, each a branch of its own
        "cancel of a shared dependency blocked two branches",
    )

    def record(self, before: Snapshot, taken: list[str], after: Snapshot,
               error: BaseException | None, method: str = "") -> None:
        self.calls += 1
        if method:
            self.methods[method] += 1
        self.actions.update(taken)
        if error is not None:
            self.events["refused call"] += 1
            if type(error).__name__ == "CycleError":
                self.events["cycle refused"] += 1
        newly_blocked = {t for t, v in after.tasks.items() if v.state is TaskState.BLOCKED
                         and (t not in before.tasks or before.tasks[t].state is not v.state)}
        if any(after.tasks[t].blocked_by in newly_blocked for t in newly_blocked):
            self.events["Settle blocked a chain"] += 1
        if "Retry" in taken and sum(1 for t, v in after.tasks.items()
                                    if before.tasks[t].generation != v.generation) > 1:
            self.events["Retry renewed several versions"] += 1
        if "Submit" in taken and any(
                before.tasks[t].state is TaskState.READY and v.state is TaskState.PENDING
                for t, v in after.tasks.items() if t in before.tasks):
            self.events["Submit re-pended a dependent"] += 1
        waiting = (TaskState.PENDING, TaskState.READY)
        moved = [(before.tasks[t], v) for t, v in after.tasks.items()
                 if t in before.tasks and getattr(v, "optional", None)
                 and before.tasks[t].generation == v.generation
                 and before.tasks[t].state in waiting and v.state in waiting]
        if (set(taken) & {"Fail", "Cancel", "AcknowledgeCancel"}
                and any(v.remaining_deps < was.remaining_deps for was, v in moved)):
            self.events["optional edge settled by a dead parent"] += 1
        if (set(taken) & {"Submit", "SubmitOptional", "Retry"}
                and any(v.remaining_deps > was.remaining_deps for was, v in moved)):
            self.events["optional child waits again"] += 1
        if "AddDeps" in taken and any(v.state is TaskState.BLOCKED and before.tasks[t].state
                                      is TaskState.PENDING for t, v in after.tasks.items()
                                      if t in before.tasks):
            self.events["AddDeps blocked the version"] += 1
        recorded = [r for t, r in after.records.items() if before.records.get(t) != r]
        if any(len(r.path) >= 3 for r in recorded):
            self.events["provenance through two levels"] += 1
        if "Cancel" in taken and len({r.path[1] for r in recorded if len(r.path) >= 2}) >= 2:
            self.events["cancel of a shared dependency blocked two branches"] += 1

    def summary(self) -> str:
        actions = ", ".join(f"{name} {count:,}" for name, count in sorted(self.actions.items()))
        return f"{self.calls:,} calls; actions: {actions}; {self.events_summary()}"


def lockstep_machine(factory: Callable[[int], Any],
                     on_example: Callable[[], None] | None = None,
                     ledger: Ledger | None = None, *,
                     profile: Profile = FULL, python_api: bool = True,
                     fatal: Fatal = (), labels: bool = False) -> type[RuleBasedStateMachine]:
    """The lock-step machine comparing ``factory(max_concurrency)`` with the reference model.

    ``on_example`` is called as each example starts (for a progress display); ``ledger``, when
    given, records every call. ``profile`` (default: the full contract) limits the calls to
    those the implementation supports and says what is compared; ``python_api`` adds task
    functions, ``info()`` and concurrency 0. An exception of a ``fatal`` type raised by the
    implementation (a harness failure: it is no answer) ends the run at once, unshrunk;
    :func:`run_lockstep` re-raises it. With ``labels``, submissions draw a (task type,
    tenant) pair, which an implementation that keeps ``signals()`` is given, and whose
    partitions are then checked against the model's counts after every call.
    """
    if not profile.limit:
        # ready() claims every ready version: with a slot per id the model does the same
        concurrency: tuple[int, ...] = (len(IDS),)
    else:
        concurrency = PYTHON_CONCURRENCY if python_api else CONCURRENCY
    limits = CLAIM_LIMITS if profile.limit else (None,)
    finishes = tuple(how for how, kept in (("complete", True), ("fail", profile.fail),
                                           ("acknowledge_cancel", profile.cancel)) if kept)
    callbacks = (*finishes, *(("cancel",) if profile.cancel else ()))
    offsets = generation_offsets if profile.generations else st.just(0)
    # a submission's (task type, tenant): given only to an implementation keeping signals()
    labels_drawn = st.sampled_from(LABELS) if labels else st.just(None)
    if profile.generations:  # an id may come back in the initial graph: a new version
        initial_graph = st.lists(st.tuples(ids, st.lists(ids, unique=True, max_size=2)),
                                 min_size=2, max_size=5)
    else:
        initial_graph = st.lists(st.tuples(ids, st.lists(ids, unique=True, max_size=2)),
                                 min_size=2, max_size=5, unique_by=lambda entry: entry[0])

    def comparable(value: Any) -> Any:
        """Results as values that compare across implementations (claims by id and generation)."""
        if isinstance(value, list):
            claims = [(c.task_id, c.generation, c.fn) if python_api
                      else (c.task_id, c.generation) for c in value]
            return claims if profile.ready_order == "seq" else sorted(claims, key=repr)
        if hasattr(value, "by_state"):  # a close report: each list in its order (seq order)
            return {state: list(map(repr, members))
                    for state, members in value.by_state().items()}
        return value

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: ReferenceWithInputs | None = None
            self.impl: Any = None
            self.counts = Counts()  # what the model's steps and refusals so far count
            # the same per partition, when the implementation keeps signals()
            self.signal_ledger: SignalLedger | None = None
            self.calls = 0
            self.max_concurrency = 0
            self.log: list[Call] = []

        @initialize(max_concurrency=st.sampled_from(concurrency), graph=initial_graph,
                    start_now=st.booleans())
        def create(self, max_concurrency: int, graph: list[tuple[str, list[str]]],
                   start_now: bool) -> None:
            """A fresh pair of schedulers, given the same initial graph, started or not."""
            if on_example is not None:
                on_example()
            if ledger is not None:
                ledger.examples += 1
            self.max_concurrency = max_concurrency
            self.model = ReferenceWithInputs(max_concurrency)
            self.counts = Counts()
            with _fatal_passes(fatal):
                self.impl = factory(max_concurrency)
            self.signal_ledger = ledger_for(self.impl)
            named = {task_id for task_id, _ in graph}
            for task_id, deps in graph:  # deps among the graph's ids, so start() mostly succeeds
                self.both("submit", task_id, [d for d in deps if d in named and d != task_id])
            if start_now:
                self.both("start")

        # -- the comparison ----------------------------------------------------------------

        def both(self, method: str, *args: Any,
                 labels: tuple[str | None, Hashable] | None = None) -> Any:
            """Make the call on both sides and compare; ``labels``, a submission's
            ``(task_type, tenant)``, go to an implementation that keeps signals() only."""
            assert self.model is not None
            self.calls += 1
            before = self.model.snapshot(provenance=True)
            history_length = len(self.model.history)
            expected: Any = None
            expected_error: BaseException | None = None
            try:
                expected = getattr(self.model, method)(*args)
            except Exception as e:  # the error itself is what is compared
                expected_error = e
            actual: Any = None
            actual_error: BaseException | None = None
            try:
                with _fatal_passes(fatal):
                    actual = getattr(self.impl, method)(*args, **self.labelled(labels))
            except Exception as e:
                actual_error = e
            after = self.model.snapshot(provenance=True)
            taken = self.model.history[history_length:]
            steps = tuple((name, _spec_params(name, step_args)) for name, step_args in taken)
            self.counts = self.counts.call(method, args, before, expected_error,
                                           self.max_concurrency)
            for name, step_args in taken:  # one at most: its state after is ``after``
                self.counts = self.counts.step(name, step_args, before, after)
            if self.signal_ledger is not None:
                self.signal_ledger.count(method, args, labels or (None, None), before, after,
                                         taken, expected_error, self.max_concurrency)
            model_answer = _show_answer(expected, expected_error)
            impl_answer = _show_answer(actual, actual_error)
            problem = self.disagreement(method, args, before, expected, expected_error,
                                        actual, actual_error)
            rows: list[Row] = []
            if profile.snapshot:
                try:
                    rows = self.state_rows(after)
                except _Fatal:
                    if problem is None:
                        raise
                    # the answers differ already: that is the verdict, whatever shape the
                    # snapshot after the call has (a refused submit's, accepted, may list a
                    # dependency twice); the rows only illustrate it
            if rows and problem is None:
                counters = [r[1].removeprefix("stats().") for r in rows
                            if r[1].startswith("stats()")]
                summaries = [r[0] for r in rows if r[1] == "input_summary()"]
                records = [r[0] for r in rows if r[1] == "provenance()"]
                problem = ("the snapshots differ after the call"
                           if len(counters) + len(summaries) + len(records) < len(rows)
                           else f"provenance() is not what the model's steps record after "
                                f"the call: {', '.join(records)}" if records
                           else f"input_summary() is not what the model's steps give after "
                                f"the call: {', '.join(summaries)}" if summaries
                           else f"stats() is not what the model's steps count after the "
                                f"call: {', '.join(counters)}")
            if problem is None and self.signal_ledger is not None:
                with _fatal_passes(fatal):
                    problem = self.signal_ledger.problem(self.impl, after)
            diff = format_rows(("id", "field", "model", "implementation"), rows)
            call = Call(method, args, model_answer, impl_answer, problem is None, diff, steps,
                        after, self.labelled(labels))
            self.log.append(call)
            if problem is not None:
                raise Disagreement(f"{call.text}: {problem}", self.log, self.max_concurrency,
                                   states_at(after, lambda: self.impl.snapshot()))
            if ledger is not None:
                ledger.record(before, [name for name, _ in steps], after, expected_error,
                              method)
            assert violated_by_step(before, after) == [], f"{method}{args!r} broke a property"
            assert violated_by_provenance_step(before, after) == [], (
                f"{method}{args!r} broke a property of the provenance")
            return expected

        def labelled(self, labels: tuple[str | None, Hashable] | None) -> dict[str, Any]:
            """The keywords that give a submission its partition, for an implementation
            that keeps signals()."""
            if labels is None or self.signal_ledger is None:
                return {}
            return {"task_type": labels[0], "tenant": labels[1]}

        def disagreement(self, method: str, args: tuple[Any, ...], before: Snapshot,
                         expected: Any, expected_error: BaseException | None, actual: Any,
                         actual_error: BaseException | None) -> str | None:
            """How the two answers disagree, in a sentence, or None when they agree."""
            if actual_error is not None:
                if expected_error is None:
                    return (f"the implementation raised {_show_answer(None, actual_error)}, "
                            f"the model returned {_show_answer(expected, None)}")
                if profile.error_types and type(actual_error) is not type(expected_error):
                    return (f"the implementation raised {type(actual_error).__name__}, "
                            f"the model {type(expected_error).__name__}")
                if profile.error_types:  # what identifies the error, never its message
                    wrong = _identifies(expected_error, actual_error)
                    if wrong is not None:
                        return wrong
                cycle = getattr(actual_error, "cycle", None)
                if cycle is not None:
                    edges = {t: v.deps for t, v in before.tasks.items()}
                    if method == "submit":  # the cycle runs through the refused new edges
                        optional = args[3] if len(args) > 3 else ()
                        edges[args[0]] = frozenset((*args[1], *optional))
                    elif method == "add_deps":
                        edges[args[0]] = (edges.get(args[0], frozenset())
                                          | frozenset((*args[1], *args[2])))
                    if not _valid_cycle(cycle, edges):
                        return f"the cycle reported, {cycle!r}, is not a cycle of the graph"
                return None
            if expected_error is not None:
                return (f"the implementation returned {_show_answer(actual, None)}, "
                        f"the model raised {_show_answer(None, expected_error)}")
            try:
                same = comparable(actual) == comparable(expected)
            except (AttributeError, TypeError):  # not an answer of the right shape
                same = False
            return None if same else (f"the implementation returned "
                                      f"{_show_answer(actual, None)}, the model "
                                      f"{_show_answer(expected, None)}")

        def state_rows(self, model_state: Snapshot) -> list[Row]:
            """Where the implementation's snapshot differs from ``model_state``, its input
            summaries (with ``optional_edges``) from the model's, and its ``stats()`` (when it
            has one) from the model's counts: (id, field, model, implementation), the
            counters as ``stats().claimed`` with no id."""
            try:
                with _fatal_passes(fatal):
                    impl_state = self.impl.snapshot()
            except Exception as error:
                rows: list[Row] = [("", "snapshot()", "a Snapshot",
                                    f"raised {type(error).__name__}: {error}")]
            else:
                rows = (snapshot_rows(model_state, impl_state)
                        if isinstance(impl_state, Snapshot)
                        else [("", "snapshot()", "a Snapshot", f"{impl_state!r:.200}")])
            if python_api and not rows:  # the Python API records provenance: compare it too
                try:
                    with _fatal_passes(fatal):
                        records = self.impl.snapshot(provenance=True).records
                except Exception as error:
                    rows = [("", "snapshot(provenance=True)", "a Snapshot",
                             f"raised {type(error).__name__}: {error}")]
                else:
                    rows = [(str(t), "provenance", _show_answer(model_state.records.get(t), None),
                             _show_answer(records.get(t), None))
                            for t in sorted({*model_state.records, *records}, key=repr)
                            if model_state.records.get(t) != records.get(t)]
            elif profile.provenance and not rows:  # over the protocol: each dead version's
                assert self.model is not None
                with _fatal_passes(fatal):
                    rows = list(provenance_rows(self.model, self.impl, fatal))
            if profile.optional_edges:  # what each task's function is given
                assert self.model is not None
                with _fatal_passes(fatal):
                    rows += summary_rows(self.model, self.impl, fatal)
            stats = getattr(self.impl, "stats", None)
            if stats is None:
                return rows
            try:
                with _fatal_passes(fatal):
                    impl_stats = stats()
            except Exception as error:
                return [*rows, ("", "stats()", "the counters",
                                f"raised {type(error).__name__}: {error}")]
            return [*rows, *(("", *row) for row in counter_rows(self.counts.expected(),
                                                                  impl_stats))]

        @invariant()
        def invariants_hold(self) -> None:
            if self.model is None:
                return
            assert violated(self.model.snapshot(), self.max_concurrency) == []
            assert violated_provenance(self.model.snapshot(provenance=True),
                                       self.max_concurrency) == []
            check = getattr(self.impl, "check_invariants", None)
            if check is None:
                return
            try:
                with _fatal_passes(fatal):
                    check()
            except Exception as error:
                last = self.log[-1].text if self.log else "the start"
                raise Disagreement(f"after {last}: check_invariants() raised "
                                   f"{type(error).__name__}: {error}", self.log,
                                   self.max_concurrency,
                                   states_at(self.model.snapshot(), lambda: self.impl.snapshot())
                                   ) from None

        # -- helpers -----------------------------------------------------------------------

        def current_generation(self, task_id: str) -> int:
            assert self.model is not None
            view = self.model.snapshot().tasks.get(task_id)
            return 1 if view is None else view.generation

        def enabled_for(self, action: str) -> list[str]:
            """Ids for which the model's action is enabled (callbacks at the current generation)."""
            if self.model is None:
                return []
            s = self.model.snapshot()
            act = ACTIONS[action]
            if action in ("Complete", "Fail", "AcknowledgeCancel"):
                return sorted(t for t, v in s.tasks.items() if act.enabled(s, t, v.generation))
            return sorted(t for t in s.tasks if act.enabled(s, t))

        def pending(self) -> list[str]:
            """The ids whose current version is pending."""
            if self.model is None:
                return []
            return sorted(t for t, v in self.model.snapshot().tasks.items()
                          if v.state is TaskState.PENDING)

        def known(self) -> list[str]:
            """Submitted ids, each four times as likely as one never submitted."""
            assert self.model is not None
            return [*sorted(self.model.snapshot().tasks) * 4, NEVER_SUBMITTED]

        def submittable(self) -> list[str]:
            """The ids a submit may name now under the profile."""
            if self.model is None:
                return []
            s = self.model.snapshot()
            if s.started and not profile.dynamic:
                return []
            return [t for t in IDS if profile.generations or t not in s.tasks]

        # -- rules: one per spec action ----------------------------------------------------
        # Most rules pick among submitted ids so calls do something; a few take any id or
        # malformed arguments so the refusals are compared too. Close is held back until some
        # calls were made, or it would end most runs early. A rule for what the profile leaves
        # out is not defined at all.

        if profile.generations and profile.dynamic:
            @rule(task_id=ids, deps=st.lists(ids, unique=True, max_size=2),
                  with_fn=st.booleans() if python_api else st.just(False), labels=labels_drawn)
            def submit(self, task_id: str, deps: list[str], with_fn: bool,
                       labels: tuple[str | None, Hashable] | None) -> None:
                deps = [d for d in deps if d != task_id]  # submit_malformed: self-dependency
                self.both("submit", task_id, deps, *((_fn if with_fn else None,)
                                                       if python_api else ()), labels=labels)

            @rule(task_id=ids, deps=st.lists(ids, min_size=1, max_size=3),
                  self_dep=st.booleans())
            def submit_malformed(self, task_id: str, deps: list[str], self_dep: bool) -> None:
                # a self-dependency, or a dependency listed twice
                self.both("submit", task_id, [task_id] if self_dep else [*deps, deps[0]])
        else:
            @precondition(lambda self: self.submittable())
            @rule(data=st.data(), deps=st.lists(ids, unique=True, max_size=2),
                  with_fn=st.booleans() if python_api else st.just(False), labels=labels_drawn)
            def submit(self, data: st.DataObject, deps: list[str], with_fn: bool,
                       labels: tuple[str | None, Hashable] | None) -> None:
                task_id = data.draw(st.sampled_from(self.submittable()))
                deps = [d for d in deps if d != task_id]
                self.both("submit", task_id, deps, *((_fn if with_fn else None,)
                                                       if python_api else ()), labels=labels)

            @precondition(lambda self: self.submittable())
            @rule(data=st.data(), deps=st.lists(ids, min_size=1, max_size=3),
                  self_dep=st.booleans())
            def submit_malformed(self, data: st.DataObject, deps: list[str],
                                 self_dep: bool) -> None:
                task_id = data.draw(st.sampled_from(self.submittable()))
                self.both("submit", task_id, [task_id] if self_dep else [*deps, deps[0]])

        if profile.optional_edges:
            @precondition(lambda self: self.submittable())
            @rule(data=st.data(), deps=st.lists(ids, unique=True, max_size=2),
                  optional=st.lists(ids, unique=True, min_size=1, max_size=2),
                  with_fn=st.booleans() if python_api else st.just(False), labels=labels_drawn)
            def submit_optional(self, data: st.DataObject, deps: list[str], optional: list[str],
                                with_fn: bool,
                                labels: tuple[str | None, Hashable] | None) -> None:
                task_id = data.draw(st.sampled_from(self.submittable()))
                optional = [d for d in optional if d != task_id]
                deps = [d for d in deps if d != task_id and d not in optional]
                self.both("submit", task_id, deps, _fn if with_fn else None, optional,
                          labels=labels)

        if profile.add_deps:
            optional_drawn = (st.lists(ids, max_size=1) if profile.optional_edges
                              else st.just([]))

            @precondition(lambda self: self.pending())
            @rule(data=st.data(), deps=st.lists(ids, unique=True, max_size=2),
                  optional=optional_drawn)
            def add_deps(self, data: st.DataObject, deps: list[str], optional: list[str]) -> None:
                """New edges on a pending version: mostly accepted."""
                task_id = data.draw(st.sampled_from(self.pending()))
                assert self.model is not None
                had = self.model.snapshot().tasks[task_id].deps
                fresh = [d for d in deps if d != task_id and d not in had]
                extra = [d for d in optional if d != task_id and d not in had and d not in fresh]
                self.both("add_deps", task_id, fresh, extra)

            @precondition(lambda self: self.model is not None)
            @rule(data=st.data(), deps=st.lists(ids, max_size=2), optional=optional_drawn)
            def add_deps_any(self, data: st.DataObject, deps: list[str],
                             optional: list[str]) -> None:
                """Any id and any edges: the refusals (not pending, no dep, a dep twice or
                already a dep, the task itself, unknown ids) are compared too."""
                self.both("add_deps", data.draw(st.sampled_from(self.known())), deps, optional)

        @precondition(lambda self: self.model is not None and not self.model.snapshot().started)
        @rule()
        def start(self) -> None:  # also when Start is not enabled: its refusals are compared
            self.both("start")

        @rule(limit=st.sampled_from(limits))
        def claim(self, limit: int | None) -> None:
            self.both("ready", limit)

        @precondition(lambda self: self.enabled_for("Complete"))
        @rule(data=st.data(), how=st.sampled_from(finishes))
        def finish_running(self, data: st.DataObject, how: str) -> None:
            task_id = data.draw(st.sampled_from(self.enabled_for("Complete")))
            self.both(how, task_id, self.current_generation(task_id))

        @precondition(lambda self: self.model is not None)
        @rule(data=st.data(), offset=offsets, how=st.sampled_from(callbacks))
        def callback(self, data: st.DataObject, offset: int, how: str) -> None:
            task_id = data.draw(st.sampled_from(self.known()))
            self.both(how, task_id, self.current_generation(task_id) + offset)

        if profile.cancel:
            @precondition(lambda self: self.model is not None)
            @rule(data=st.data())
            def cancel(self, data: st.DataObject) -> None:
                self.both("cancel", data.draw(st.sampled_from(self.known())))

        if profile.retry:
            @precondition(lambda self: self.enabled_for("Retry"))
            @rule(data=st.data())
            def retry(self, data: st.DataObject) -> None:
                self.both("retry", data.draw(st.sampled_from(self.enabled_for("Retry"))))

            @precondition(lambda self: self.model is not None)
            @rule(data=st.data())
            def retry_any(self, data: st.DataObject) -> None:
                self.both("retry", data.draw(st.sampled_from(self.known())))

        if profile.close:
            @precondition(lambda self: self.calls >= 30)
            @rule(cancel_pending=st.booleans())
            def close(self, cancel_pending: bool) -> None:
                self.both("close", cancel_pending)

        @precondition(lambda self: self.model is not None and profile.snapshot)
        @rule(data=st.data())
        def introspect(self, data: st.DataObject) -> None:
            task_id = data.draw(st.sampled_from(self.known()))
            self.both("state", task_id)
            if python_api:
                self.both("info", task_id)

    return Lockstep


def run_lockstep(factory: Callable[[int], Any], examples: int = 200, steps: int = 40,
                 on_example: Callable[[], None] | None = None,
                 ledger: Ledger | None = None, *,
                 profile: Profile = FULL, python_api: bool = True, seed: int | None = None,
                 fatal: Fatal = (), labels: bool = False,
                 hypothesis_settings: Mapping[str, Any] | None = None) -> None:
    """Run the lock-step machine for ``examples`` examples; raise on the first disagreement.

    Hypothesis shrinks a failure to a short sequence of calls and prints it; the exception is a
    :class:`Disagreement` holding those calls (an ``ExceptionGroup`` of them when Hypothesis
    reports several distinct failures). ``profile``, ``python_api``, ``fatal`` and ``labels``
    are :func:`lockstep_machine`'s; a ``fatal`` error is re-raised as it is. ``seed`` fixes
    Hypothesis's random choices (a run with the same seed makes the same calls);
    ``hypothesis_settings`` overrides the settings this function chooses.
    """
    machine = lockstep_machine(factory, on_example, ledger, profile=profile,
                               python_api=python_api, fatal=fatal, labels=labels)
    try:
        run_machine(machine, examples=examples, steps=steps, seed=seed,
                    overrides=hypothesis_settings)
    except _Fatal as stop:
        raise stop.error from None
