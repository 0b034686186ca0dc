"""The clauses phase: every clause of the contract asked on purpose, answers compared in full.

A :class:`Probe` is a short run of calls that ends in the case one clause states (a submit
naming a dependency twice, a boolean ``limit``, a close report's order). :func:`run_probes`
makes each probe the implementation's profile admits on the reference model and on the
implementation, call by call, and compares every answer with everything the contract says
is compared (the value; an error's type and what identifies it: an
``UnknownDependencyError``'s ``missing`` pairs as a set, a ``StaleGenerationError``'s
``generation`` and ``current``, a ``CycleError``'s cycle as a cycle of the graph; never the
message), then, with ``snapshot``, the two snapshots. The answers are compared before the
snapshot is read, so a semantic bug (a refusal answered with success) is a divergence at the
call that shows it, never a malformed snapshot after it.

The first difference is a :class:`~refsched.conform.report.Counterexample` whose reason names
the rule: ``rule dag.submit.duplicate-dep: ...``. Each system's probes and how it compares
live in ``refsched.conform.<system>.probes`` (``PROBES``, ``new_model``,
``new_implementation``, ``call``, ``show``, ``states``, ``needs_of``...; ``judge(...)`` where
an answer is judged beyond :func:`differ` with ``comparable(value)``, itself by default;
``align(model, implementation)`` where a fresh model takes something of the fresh
implementation it stands beside, such as where its clock begins; and, where ``new`` takes no
``max_concurrency``, ``instance``); a system without that module has no clauses phase. A
call is shown as the request the system's wire names it (``Wire.op_of``).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from refsched.conform import clauses, wire
from refsched.conform.client import HarnessError
from refsched.conform.report import Counterexample, PhaseResult, WireRow, wire_answer, wire_request

__all__ = ["Probe", "has_probes", "model_answers", "run_probes"]



def _module(system: str) -> str:
    """The module of ``system``'s probes (the TaskScheduler's folder is ``dag``)."""
    return f"refsched.conform.{'dag' if system == 'scheduler' else system}.probes"


@dataclass(frozen=True)
class Probe:
    """The calls that drive ``clause`` (its last call is the case; every call is compared)."""

    clause: str  # the clause id it drives
    calls: tuple[tuple[str, tuple[Any, ...]], ...]  # (method, args); "new" makes an instance
    needs: tuple[str, ...] = ()  # profile flags beyond the clause's and its calls'
    # the state is what the clause is about: a snapshot that differs after any call breaks
    # it (a schedule's slot decided on a tick submits a run: the tick's own clause is kept)
    owns_state: bool = False


def has_probes(system: str) -> bool:
    """Whether ``system`` has clause probes."""
    try:
        return importlib.util.find_spec(_module(system)) is not None
    except ModuleNotFoundError:  # no such system's folder
        return False


def model_answers(system: str, probe: Probe) -> list[tuple[str, tuple[Any, ...], Any]]:
    """Each call of ``probe`` and the reference model's answer to it (the value, or the error
    raised; ``None`` for a ``new`` that made an instance): what the implementation is held to."""
    kit = importlib.import_module(_module(system))
    model: Any = None
    answers = []
    for method, args in probe.calls:
        try:
            answer = kit.new_model(*args) if method == "new" else kit.call(model, method, args)
        except Exception as error:  # the model's refusal is its answer
            answer = error
        if method == "new" and not isinstance(answer, Exception):
            model, answer = answer, None
        answers.append((method, args, answer))
    return answers


def _text(method: str, args: tuple[Any, ...]) -> str:
    return f"{method}({', '.join(repr(a) for a in args)})"


def _show(value: Any, error: BaseException | None, show: Callable[[Any], str]) -> str:
    if error is not None:
        return f"{getattr(error, 'type_name', type(error).__name__)}: {error}"
    return show(value)


def run_probes(system: str, factory: Callable[..., Any], profile: Any, phase: PhaseResult,
               fatal: tuple[type[BaseException], ...] = ()) -> Counterexample | None:
    """Run every probe of ``system`` that ``profile`` admits through ``factory`` and the
    model; the first difference, or None. An exception of a ``fatal`` type (a harness
    failure) goes through."""
    if not has_probes(system):
        return None
    kit = importlib.import_module(_module(system))
    probes = [p for p in kit.PROBES
              if clauses.clause(p.clause).admitted_by(profile)
              and all(getattr(profile, flag, True) for flag in (*p.needs, *kit.needs_of(p)))]
    phase.figures.update(probes=len(probes), calls=0)
    for probe in probes:
        found = _run_probe(system, kit, probe, factory, profile, phase, fatal)
        if found is not None:
            return found
    return None


def _run_probe(system: str, kit: Any, probe: Probe, factory: Callable[..., Any], profile: Any,
               phase: PhaseResult, fatal: tuple[type[BaseException], ...]
               ) -> Counterexample | None:
    rows: list[WireRow] = []
    model: Any = None
    impl: Any = None
    concurrency = 0
    instance = ""  # what the instance was made with, when that is no max_concurrency
    # a call whose request on the wire has another name (the pool's submit_external: submit)
    op_of = {} if system == "scheduler" else wire.get(system).op_of
    made: list[Any] = []  # every instance the probe made, discarded as it ends
    try:
        for method, args in probe.calls:
            phase.figures["calls"] += 1
            args = kit.adapt(method, args, profile)
            expected = actual = None
            expected_error: BaseException | None = None
            actual_error: BaseException | None = None
            before = None if model is None else model.snapshot()
            try:
                expected = (kit.new_model(*args) if method == "new"
                            else kit.call(model, method, args))
            except Exception as e:  # the error itself is what is compared
                expected_error = e
            try:
                actual = (kit.new_implementation(factory, *args) if method == "new"
                          else kit.call(impl, method, args))
            except fatal:
                raise
            except Exception as e:
                actual_error = e
            if method == "new":
                if expected_error is None:
                    model, expected = expected, None
                    made.append(model)
                    if hasattr(kit, "instance"):
                        instance = kit.instance(*args)
                    else:
                        concurrency = args[0]
                if actual_error is None:
                    impl, actual = actual, None
                    made.append(impl)
                if expected_error is None and actual_error is None and hasattr(kit, "align"):
                    kit.align(model, impl)  # the model's clock begins where the other's does
            problem = (kit.judge(method, args, before, expected, expected_error, actual,
                                 actual_error, profile) if hasattr(kit, "judge")
                       else differ(expected, expected_error, actual, actual_error, show=kit.show,
                                   comparable=getattr(kit, "comparable", _itself)))
            diff = ""
            state_differs = False
            # a profile without the flag is a system checked whole: its snapshot is compared
            if problem is None and getattr(profile, "snapshot", True) and model is not None:
                problem, diff = kit.states(model, impl)
                state_differs = problem is not None
            # the call as the wire carries it, each side's answer as the protocol encodes it
            op = op_of.get(method, method)
            rows.append(WireRow(wire_request(system, op, args, {}),
                                wire_answer(system, op, (expected, expected_error)),
                                wire_answer(system, op, (actual, actual_error)),
                                problem is None, diff, _text(method, args)))
            if problem is not None:
                decided = (clauses.clause(probe.clause) if state_differs and probe.owns_state
                           else clauses.decide(system, method, args,
                                               expected_error if expected_error is not None
                                               else expected)
                           or clauses.clause(probe.clause))
                return Counterexample(
                    "clauses", f"{_text(method, args)}: {problem}",
                    f"the probe of rule {probe.clause}", concurrency, tuple(rows), None,
                    instance=instance, system=system,
                    model_state=None if model is None else model.snapshot(),
                    implementation_state=_read_state(impl), rule=decided.id)
        return None
    finally:
        # an instance may hold what outlives it (a store's file): let it go here, at the same
        # point of every run, not when the collector gets to it
        discard = getattr(kit, "discard", None)
        if discard is not None:
            for side in made:
                discard(side)


def _itself(value: Any) -> Any:
    return value


def _read_state(impl: Any) -> Any:
    """The implementation's snapshot for the picture, or None when it cannot say."""
    try:
        return None if impl is None else impl.snapshot()
    except Exception:
        return None


def differ(expected: Any, expected_error: BaseException | None, actual: Any,
           actual_error: BaseException | None, *, show: Callable[[Any], str],
           comparable: Callable[[Any], Any], error_types: bool = True,
           refusal: Callable[[], str | None] = lambda: None) -> str | None:
    """How one probe call's answer differs from the model's, in a sentence, or None: the side
    that raised, the error's class (unless the profile leaves classes out), what identifies
    the error (``refusal``, the system's), or the value as ``comparable`` reads it."""
    name = clauses.outcome_of
    if actual_error is not None:
        if expected_error is None:
            return (f"the implementation raised {name(actual_error)}, the model returned "
                    f"{show(expected)}")
        if not error_types:
            return None
        if name(actual_error) != name(expected_error):
            return (f"the implementation raised {name(actual_error)}, the model "
                    f"{name(expected_error)}")
        return refusal()
    if expected_error is not None:
        return (f"the implementation returned {show(actual)}, the model raised "
                f"{name(expected_error)}")
    if comparable(actual) != comparable(expected):
        return f"the implementation returned {show(actual)}, the model {show(expected)}"
    return None


def snapshots_differ(model: Any, impl: Any, rows: Callable[[Any, Any], str],
                     read: str = "snapshot") -> tuple[str | None, str]:
    """How the implementation's snapshot (or what its method ``read`` answers, such as
    ``leases``) differs from the model's after a probe call: a sentence and ``rows(model's,
    implementation's)``, or None and ""."""
    try:
        impl_state = getattr(impl, read)()
    except HarnessError:
        raise
    except Exception as error:
        return f"{read}() raised {clauses.outcome_of(error)}: {error}", ""
    model_state = getattr(model, read)()
    if impl_state == model_state:
        return None, ""
    return (f"the {'snapshots' if read.endswith('snapshot') else read} differ after the call",
            rows(model_state, impl_state))
