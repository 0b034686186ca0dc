"""The conformance oracle: an implementation of the TaskScheduler API judged by the reference model.

:func:`check` runs two phases against an :class:`~refsched.conform.client.Implementation` (a
program speaking the protocol of ``docs/conformance.md``, or a Python factory):

1. **corpus**: the traces of ``traces/`` (every edge of TLC's state graph of the spec) that the
   implementation's :class:`~refsched.profile.Profile` admits, replayed through its API
   by :func:`refsched.verify.replay.replay`: each call's answer, and the snapshot after each
   step when the profile has ``snapshot``, must be the trace's;
2. **generated**: Hypothesis drives the model and the implementation with the same calls
   (:mod:`refsched.verify.dag.lockstep`, narrowed to the profile) and compares every answer, and
   every snapshot when the profile has them.

The first phase that finds a divergence ends the check with a
:class:`~refsched.conform.report.Counterexample`: the calls that show it (a corpus trace up to the
step that diverges, the corpus's traces replayed shortest first and the replay stopped at the
first that diverges; or the run Hypothesis shrank), shrunk further by ddmin
(:mod:`refsched.conform.shrink`: no call of it can go), each call as the request and the two
answers the protocol carries, and the model's spec steps along them as an ITF trace. A harness
failure (the implementation crashed,
hung or broke the protocol) ends the check with that verdict. The implementation is closed
when the check ends, whatever happened.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from hypothesis import HealthCheck, Phase, Verbosity

from refsched.conform import clauses, probes, system_phases
from refsched.conform.admission import admitted_steps, admitted_traces
from refsched.conform.client import HarnessError, Implementation
from refsched.conform.coverage import Coverage, ObservedImplementation
from refsched.conform.report import (
    CONFORMS,
    DIVERGES,
    NOTHING_CHECKED,
    ConformanceReport,
    Counterexample,
    PhaseResult,
    WireRow,
    answer_text,
    found_in,
    wire_rows,
)
from refsched.conform.shrink import exchange
from refsched.profile import Profile
from refsched.verify import corpus as corpus_files
from refsched.verify import system as system_registry
from refsched.verify.dag.inputs import ReferenceWithInputs
from refsched.verify.dag.lockstep import (
    Call,
    Disagreement,
    Ledger,
    lockstep_machine,
    run_lockstep,
)
from refsched.verify.itf import Trace
from refsched.verify.replay import Divergence, step_call
from refsched.verify.specstate import snapshot_of
from refsched.verify.stable import stable_labels

__all__ = ["OracleError", "Progress", "admitted_steps", "admitted_traces", "check",
           "corpus_hash", "harness_failure"]

Progress = Callable[[str, int, int], None]
"""Called with (phase, done, total) as a check goes: corpus traces, generated examples."""

# Quiet, one failure, no health checks (a slow implementation is not a bad test), no database
# (the lock-step runners set none); with the labels of stable_labels, the same seed makes the
# same calls and finds the same counterexample in every process.
_HYPOTHESIS: Final[Mapping[str, Any]] = {
    "verbosity": Verbosity.quiet, "report_multiple_bugs": False, "print_blob": False,
    "database": None,
    "suppress_health_check": list(HealthCheck), "phases": (Phase.generate, Phase.shrink),
}


class OracleError(RuntimeError):
    """The oracle cannot judge: the trace corpus is missing or unreadable, or disagrees with
    the reference model (then the corpus or the model is wrong, not the implementation)."""


# -- the corpus phase -------------------------------------------------------------------------

def corpus_hash(system: str, profile: Any = None) -> str | None:
    """SHA-256 of the manifests of ``system``'s corpus instances replayed for ``profile``
    (None: the full contract), in their order: each names its bundle's SHA-256 and the spec's,
    so this names the corpus replayed (None: a manifest is missing, and the corpus phase will
    say so)."""
    digest = hashlib.sha256()
    spec = system_registry.get(system)
    try:
        for config in spec.protocol_instances_for(profile):
            digest.update((corpus_files.traces_dir() / spec.manifest_of(config)).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _read_corpus(profile: Profile, max_traces: int | None) -> tuple[list[Trace], int]:
    """Every corpus instance's traces, in the order of the system's instances: the plain
    graph's, then those with optional edges and with AddDeps (a profile's admission then
    keeps what the implementation declares it takes); and how many traces the corpus has.
    With ``max_traces``, only up to the trace that makes ``max_traces`` of those ``profile``
    admits whole: the replay takes the whole ones first, in corpus order, so later traces
    change nothing it replays, and their lines are not even parsed."""
    def whole(trace: Trace) -> bool:
        return admitted_steps(profile, trace) == len(trace.steps)

    try:
        return system_phases.read_corpus(system_registry.get("scheduler"), max_traces, whole)
    except system_phases.CorpusUnreadable as e:
        raise OracleError(str(e)) from None


def _corpus_counterexample(trace: Trace, divergence: Divergence, profile: Profile,
                           max_concurrency: int) -> Counterexample:
    """The trace up to its diverging step, as calls and as a (shorter) trace of the spec."""
    calls: list[Call] = []
    if divergence.step == 0:  # a new scheduler is not in Init
        calls.append(Call("new", (max_concurrency,), "an empty scheduler", "another state",
                          False, divergence.diff))
    before = snapshot_of(trace.initial)
    for index, step in enumerate(trace.steps[:divergence.step], start=1):
        api = step_call(step.action, step.params, before, profile=profile)
        after = snapshot_of(step.state)
        failing = index == divergence.step
        calls.append(Call(
            api.method, api.args, api.answer,
            answer_text(divergence.answer or api.answer) if failing else api.answer,
            not failing, divergence.diff if failing else "",
            ((step.action, dict(step.params)),), after, api.kwargs))
        before = after
    prefix = Trace(f"{trace.name}-to-step-{divergence.step}", trace.constants, trace.initial,
                   tuple(trace.steps[:divergence.step]),
                   {**trace.meta, "source": f"{trace.name} of the corpus, to the diverging step"})
    return Counterexample(
        "corpus", divergence.reason,
        f"corpus trace {trace.name}, steps 1 to {divergence.step}", max_concurrency,
        tuple(calls), prefix, model_state=divergence.expected,
        implementation_state=divergence.actual)


def _corpus_phase(impl: Implementation, profile: Profile, phase: PhaseResult,
                  progress: Progress | None, max_traces: int | None,
                  given: Sequence[Trace] | None = None,
                  all_divergences: bool = False) -> Counterexample | None:
    if given is None:
        everything, size = _read_corpus(profile, max_traces)
    else:
        everything = list(given)
        size = len(everything)
    traces, whole = admitted_traces(profile, everything)
    system = system_registry.get("scheduler")
    try:
        found = system_phases.replay_admitted(
            system, size, traces, whole, impl.new, profile, phase, progress,
            max_traces, all_divergences)
    except system_phases.CorpusUnreadable as e:
        raise OracleError(str(e)) from None
    if found is None:
        return None
    trace, first = found
    before = first.step
    trace, first, shrunk = system_phases.shrink_trace(system, impl.new, trace, first, profile)
    max_concurrency = int(trace.constants.get("MaxConcurrency", 0))
    counterexample = _corpus_counterexample(trace, first, profile, max_concurrency)
    if first.step:  # the calls again, on a fresh model and instance: their answers to encode
        calls = counterexample.calls
        answers = exchange(calls, ReferenceWithInputs(max_concurrency),
                           impl.new(max_concurrency), (HarnessError,))
        counterexample = dataclasses.replace(counterexample,
                                             calls=wire_rows("scheduler", answers))
    if shrunk is None:
        return counterexample
    return dataclasses.replace(counterexample, before_ddmin=before, ddmin_runs=shrunk.runs,
                               one_minimal=shrunk.complete)


# -- the generated phase ----------------------------------------------------------------------

def _generated_phase(impl: Implementation, profile: Profile, phase: PhaseResult, *,
                     examples: int, steps: int, seed: int | None,
                     progress: Progress | None) -> Counterexample | None:
    ledger = Ledger()
    tally = [0]  # every call sent: the ledger counts only the calls both sides agreed on

    def on_example() -> None:
        phase.figures.update(examples=ledger.examples + 1, calls=tally[0])
        if progress is not None:
            progress("generated", ledger.examples + 1, examples)

    try:
        with stable_labels():
            run_lockstep(system_phases.counting(impl.new, tally), examples=examples,
                         steps=steps, on_example=on_example, ledger=ledger,
                         profile=profile, python_api=False, seed=seed,
                         fatal=(HarnessError,), hypothesis_settings=_HYPOTHESIS)
    except Exception as error:
        found = found_in(error, Disagreement)
        if found is None:
            raise
        source = (f"generated with seed {seed}, shrunk by Hypothesis" if seed is not None
                  else "generated, shrunk by Hypothesis")
        machine = lockstep_machine(impl.new, profile=profile, python_api=False,
                                   fatal=(HarnessError,))

        def new_machine() -> Any:
            fresh: Any = machine()
            fresh.create(found.max_concurrency, [], False)  # a run's first calls are its own
            return fresh

        minimized = system_phases.minimized_calls("scheduler", new_machine, found.calls)
        if minimized is None:  # it did not diverge again: Hypothesis's run as it found it
            return Counterexample(
                "generated", found.reason, source, found.max_concurrency, found.calls,
                found.trace("conform-counterexample"), model_state=found.states[0],
                implementation_state=found.states[1])
        disagreement, rows, shrunk = minimized
        return Counterexample(
            "generated", disagreement.reason, source, found.max_concurrency, rows,
            disagreement.trace("conform-counterexample"),
            model_state=disagreement.states[0], implementation_state=disagreement.states[1],
            before_ddmin=len(found.calls), ddmin_runs=shrunk.runs,
            one_minimal=shrunk.complete)
    finally:
        phase.figures.update(examples=ledger.examples, calls=tally[0])
    return None


# -- the check --------------------------------------------------------------------------------

def check(impl: Implementation, *, examples: int = 200, steps: int = 40, corpus: bool = True,
          seed: int | None = 0, progress: Progress | None = None,
          max_traces: int | None = None, traces: Sequence[Trace] | None = None,
          all_divergences: bool = False, clauses: bool = True) -> ConformanceReport:
    """Judge ``impl`` against the reference model; close it; return the report.

    ``impl`` must be open (a ``ProtocolImplementation`` entered or ``open()``-ed): its name
    and profile are read first. ``corpus`` runs the corpus phase (``max_traces``: over the
    first so many traces the profile admits); ``examples`` (0: none)
    Hypothesis examples of at most ``steps`` calls each run the generated phase, with
    ``seed`` fixing its choices (None: a random run); ``clauses`` then runs the clauses
    phase (:mod:`refsched.conform.probes`). ``progress(phase, done, total)`` is
    called as traces and examples go by. ``traces``, when given, are replayed in the corpus
    phase instead of the system's corpus (a counterexample written by ``--trace-out``). The
    corpus phase replays the shortest traces first and stops at the first that diverges,
    unless ``all_divergences`` (then it replays every one and keeps the shortest diverging
    prefix). A counterexample is shrunk further by ddmin (:mod:`refsched.conform.shrink`).
    The verdict is ``"conforms"``, ``"diverges"`` (with
    the counterexample) or the harness verdict (``"crashed"``, ``"timed out"``,
    ``"protocol violation"``, with the implementation's last lines of stderr).

    Errors: :class:`OracleError` when the corpus cannot be read or disagrees with the model.
    """
    started = time.monotonic()
    try:
        profile = impl.profile
        system = getattr(impl, "system", "scheduler")
        report = ConformanceReport(implementation=impl.name, profile=profile, seed=seed,
                                   system=system,
                                   corpus_sha256=corpus_hash(system, profile) if corpus else None)
        report.coverage = Coverage(system)
        observed = ObservedImplementation(impl, report.coverage, (HarnessError,))
        current: PhaseResult | None = None
        try:
            clauses = clauses and probes.has_probes(system)
            for name in [n for n, wanted in (("corpus", corpus), ("generated", examples > 0),
                                             ("clauses", clauses)) if wanted]:
                current = PhaseResult(name)
                report.phases.append(current)
                phase_started = time.monotonic()
                try:
                    found = _phase(observed, profile, current, name, examples=examples,
                                   steps=steps, seed=seed, progress=progress,
                                   max_traces=max_traces, traces=traces,
                                   all_divergences=all_divergences)
                finally:
                    current.seconds = time.monotonic() - phase_started
                if found is not None:
                    current.ok = False
                    report.verdict = DIVERGES
                    report.counterexample = _named_by_its_rule(found)
                    break
            if report.verdict == CONFORMS and not any(
                    p.figures.get("calls", 0) or p.figures.get("steps_run", 0)
                    for p in report.phases):
                report.verdict = NOTHING_CHECKED
                report.harness_message = (
                    "no phase made a call: the profile leaves out every one they would ask; "
                    "give more examples, the corpus, or an implementation that keeps more")
        except HarnessError as error:
            if current is not None:
                current.ok = False
            _record_harness_failure(report, error)
    finally:
        impl.close()
    report.seconds = time.monotonic() - started
    return report


def _named_by_its_rule(found: Counterexample) -> Counterexample:
    """The counterexample whose reason names the clause of the contract that decides its
    failing call, as the model answered it (a probe's names it already)."""
    if found.rule:
        return found
    failing = next((c for c in reversed(found.calls)
                    if isinstance(c, WireRow) and not c.agrees), None)
    if failing is None:
        return found
    clause = clauses.decide_wire(found.system, failing.request, failing.model_answer)
    if clause is None:
        return found
    return dataclasses.replace(found, rule=clause.id)


def _phase(impl: Implementation, profile: Profile, phase: PhaseResult, name: str, *,
           examples: int, steps: int, seed: int | None, progress: Progress | None,
           max_traces: int | None, traces: Sequence[Trace] | None = None,
           all_divergences: bool = False) -> Counterexample | None:
    """Run one phase of the check on the implementation's system."""
    system = getattr(impl, "system", "scheduler")
    if name == "clauses":
        # an observed implementation steps a pool class here, so that its moves are counted
        factory = (impl.new if system == "scheduler"
                   else getattr(impl, "probed", impl.remote)())
        return probes.run_probes(system, factory, profile, phase, fatal=(HarnessError,))
    if system == "scheduler":
        if name == "corpus":
            return _corpus_phase(impl, profile, phase, progress, max_traces, traces,
                                 all_divergences)
        return _generated_phase(impl, profile, phase, examples=examples, steps=steps,
                                seed=seed, progress=progress)
    factory = impl.remote()
    try:
        if name == "corpus":
            return system_phases.corpus_phase(system, factory, phase, progress, max_traces,
                                              profile, traces, all_divergences)
        return system_phases.generated_phase(system, factory, phase, examples=examples,
                                             steps=steps, seed=seed, settings=dict(_HYPOTHESIS),
                                             progress=progress, profile=profile)
    except system_phases.CorpusUnreadable as e:
        raise OracleError(str(e)) from None


def _record_harness_failure(report: ConformanceReport, error: HarnessError) -> None:
    report.verdict = error.verdict
    report.harness_message = error.message
    report.stderr_tail = error.stderr_tail


def harness_failure(implementation: str, error: HarnessError) -> ConformanceReport:
    """The report on an implementation that failed before a check could start (at its hello):
    the harness verdict, no phase, no profile."""
    report = ConformanceReport(implementation=implementation, profile=None, seed=None)
    _record_harness_failure(report, error)
    return report

