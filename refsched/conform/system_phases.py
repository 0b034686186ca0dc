"""The oracle's two phases for the timer, the pool and the durable scheduler.

The same phases as the TaskScheduler's (:mod:`refsched.conform.oracle`), run by the engines
that check refsched's own implementation of each system, over the implementation's factory
(an instance in another process: :class:`~refsched.conform.wire.Remote`):

1. **corpus**: the system's trace corpus in ``traces/`` (every edge of TLC's state graph of its
   traces instance) replayed by :func:`refsched.verify.replay.replay`, shortest first, to the
   first trace that diverges (every trace when asked for all divergences);
2. **generated**: the system's lock-step machine (``timer_lockstep``, ``pool_lockstep``,
   ``durable_lockstep``), kept to the calls the protocol carries.

A divergence is shrunk by ddmin (:mod:`refsched.conform.shrink`) and becomes a
:class:`~refsched.conform.report.Counterexample`: rows of calls, and the
model's spec steps along them as a trace when they form one (the corpus phase's always; the
generated phase's for the pool and the durable scheduler: a timer run moves its clock by
fractions and backwards, which the spec's whole-tick clock does not).

The rows are the calls as the wire carries them (:class:`~refsched.conform.report.WireRow`):
the shrunk steps are replayed once more with each instance paired with the reference model by
the system's wire (``Wire.paired``), which is asked every call too, so that each row holds
both answers as the protocol encodes them and the spec steps the replay took through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from refsched.conform.admission import (
    admitted_steps,
    admitted_traces,
    durable_admitted_steps,
    timer_admitted_steps,
)
from refsched.conform.client import HarnessError
from refsched.conform.report import (
    Counterexample,
    PhaseResult,
    Row,
    WireRow,
    answer_text,
    found_in,
    wire_rows,
)
from refsched.conform.shrink import MachineJudge, Shrunk, TraceJudge, ddmin
from refsched.profile import FULL, DurableProfile, Profile, TimerProfile
from refsched.verify import corpus as corpus_files
from refsched.verify import system as systems
from refsched.verify.itf import Trace, TraceFormatError
from refsched.verify.replay import Divergence, replay
from refsched.verify.stable import stable_labels

__all__ = ["corpus_phase", "generated_phase"]

Progress = Callable[[str, int, int], None]


class CorpusUnreadable(RuntimeError):
    """The system's corpus cannot be read, or disagrees with its model."""


def read_corpus(system: systems.System, limit: int | None = None,
                counts: Callable[[Trace], bool] = lambda _: True,
                profile: Any = None) -> tuple[list[Trace], int]:
    """The traces of every corpus instance of ``system`` the protocol carries for ``profile``
    (:meth:`~refsched.verify.system.System.protocol_instances_for`), in the order of
    its instances and of each bundle, and how many traces the corpus has (its manifests say);
    with a ``limit``, only up to the trace that makes ``limit`` of those that ``counts``: a
    bundle's later lines are not even parsed (the durable scheduler's first bundle alone takes
    half a minute to decode)."""
    traces: list[Trace] = []
    counted = 0
    try:
        configs = system.protocol_instances_for(profile)
        instances = corpus_files.instance_bundles(system, configs=configs)
        size = sum(int(manifest.get("traces", 0)) for _, _, manifest in instances)
        for trace in corpus_files.instance_traces(system, lazy=limit is not None,
                                                  configs=configs):
            traces.append(trace)
            counted += counts(trace)
            if limit is not None and counted >= limit:
                return traces, size
        return traces, max(size, len(traces))
    except (corpus_files.CorpusMismatch, TraceFormatError, OSError) as e:
        raise CorpusUnreadable(f"cannot read the {system.name} trace corpus: {e}") from None


def _instance_text(system: str, constants: dict[str, Any] | Any) -> str:
    shown = {"timer": ("RebuildFloor",), "pool": ("Workers",),
             "durable": ("MaxConcurrency", "MaxAttempts", "LeaseTime")}[system]
    return ", ".join(f"{name}={constants.get(name)!r}" for name in shown)


def _corpus_counterexample(system: systems.System, trace: Trace,
                           divergence: Divergence) -> Counterexample:
    rows: list[Row] = []
    if divergence.step == 0:
        rows.append(Row("new()", "the initial state", "another state", False, divergence.diff))
    for index, step in enumerate(trace.steps[:divergence.step], start=1):
        text = system.describe(step.action, step.params)
        if index < divergence.step:
            rows.append(Row(text, "taken", "taken", True))
        else:
            rows.append(Row(text, "taken",
                            answer_text(divergence.answer) if divergence.answer
                            else "taken, to another state", False, divergence.diff))
    prefix = Trace(f"{trace.name}-to-step-{divergence.step}", trace.constants, trace.initial,
                   tuple(trace.steps[:divergence.step]),
                   {**trace.meta, "source": f"{trace.name} of the corpus, to the diverging step"})
    return Counterexample(
        "corpus", divergence.reason,
        f"corpus trace {trace.name}, steps 1 to {divergence.step}" if divergence.step
        else f"corpus trace {trace.name}, its initial state",
        int(trace.constants.get("MaxConcurrency", 0)), tuple(rows), prefix,
        instance=_instance_text(system.name, trace.constants), system=system.name,
        model_state=divergence.expected, implementation_state=divergence.actual)


def _admission(profile: Any) -> Callable[[Any, Trace], int] | None:
    """How the profile admits a trace's steps (None: the full contract, every step)."""
    if isinstance(profile, TimerProfile):
        return timer_admitted_steps
    if isinstance(profile, DurableProfile):
        return durable_admitted_steps
    if isinstance(profile, Profile):
        return admitted_steps
    return None


def shrink_trace(system: systems.System, factory: Callable[..., Any], trace: Trace,
                 divergence: Divergence, profile: Any
                 ) -> tuple[Trace, Divergence, Shrunk[Any] | None]:
    """The trace's steps up to its divergence, shrunk by ddmin (re-run by the model and a
    fresh instance from ``factory``, each candidate one the profile admits); the trace and
    divergence as they were when no smaller set of its steps diverges the same way, or the
    re-run did not diverge again."""
    judge = TraceJudge(system, factory, trace.constants, profile, (HarnessError,),
                       f"{trace.name}-to-step-{divergence.step}", _admission(profile))
    shrunk = ddmin(trace.steps[:divergence.step], judge)
    if shrunk is None or len(shrunk.items) >= divergence.step:
        return trace, divergence, shrunk
    shrunk_trace, found = shrunk.divergence
    meta = {**trace.meta, "source": f"{trace.name} of the corpus, to the diverging step, "
                                    f"shrunk by ddmin"}
    return (Trace(shrunk_trace.name, shrunk_trace.constants, shrunk_trace.initial,
                  shrunk_trace.steps, meta), found, shrunk)


class _Twin:
    """An instance each of whose calls the reference model is asked too: both answers (and a
    timer's clock moves) are logged as a run's exchanges, for the report to encode."""

    def __init__(self, implementation: Any, model: Any, log: list[Any],
                 clock: Callable[[], float] | None = None) -> None:
        self._implementation = implementation
        self._model = model
        self._clock = clock
        self._read = None if clock is None else clock()
        self._log = log

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._implementation, name)
        if not callable(attribute) or name.startswith("_") or name in _READS:
            return attribute
        log = self._log

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._clock is not None and self._read is not None:
                now = self._clock()
                if now != self._read:  # logged as the lock-step logs it: by how much it moved
                    log.append((_Asked("advance", (now - self._read,), {}), None, None))
                    self._read = now
            answers: list[tuple[Any, BaseException | None]] = []
            for side in (getattr(self._model, name), attribute):
                try:
                    answers.append((side(*args, **kwargs), None))
                except HarnessError:
                    raise
                except Exception as error:  # an answer like any other
                    answers.append((None, error))
            log.append((_Asked(name, args, kwargs), answers[0], answers[1]))
            value, raised = answers[1]
            if raised is not None:
                raise raised
            return value
        return call


@dataclasses.dataclass(frozen=True)
class _Asked:
    """A call as the report encodes it (the lock-step's ``Call`` has the same fields); the
    spec steps the replay took through it."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    agrees: bool = True
    diff: str = ""
    steps: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def text(self) -> str:
        shown = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.method}({', '.join(shown)})"


class _Marking:
    """A system whose replay marks where each spec step's calls begin in ``log``."""

    def __init__(self, system: systems.System, log: list[Any]) -> None:
        self._system = system
        self._log = log
        self.marks: list[tuple[int, str, dict[str, Any]]] = []  # (first call, action, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._system, name)

    def apply(self, implementation: Any, action: str, params: Mapping[str, Any], before: Any,
              profile: Any, fatal: systems.Fatal) -> None:
        self.marks.append((len(self._log), action, dict(params)))
        self._system.apply(implementation, action, params, before, profile, fatal)


def _wire_rows(system: systems.System, factory: Callable[..., Any], trace: Trace,
               divergence: Divergence, profile: Any) -> tuple[WireRow, ...] | None:
    """The trace's calls once more, the model asked each one too (the system's wire pairs
    each instance with its reference model), as wire rows, each with the spec steps taken
    through it; None when the system has no reference to pair, or the run does not diverge at
    the same step again, or the failing step made no call."""
    from refsched.conform import wire

    paired = wire.get(system.name).paired
    if paired is None or not divergence.step:
        return None
    log: list[Any] = []

    def pair(implementation: Any, model: Any, clock: Callable[[], float] | None = None
             ) -> _Twin:
        return _Twin(implementation, model, log, clock)

    marking = _Marking(system, log)
    again = replay([trace], paired(factory, pair, profile),
                   system=cast(systems.System, marking),
                   profile=profile, fatal=(HarnessError,))
    if (again.ok or again.divergences[0].step != divergence.step or not log
            or len(marking.marks) != divergence.step or marking.marks[-1][0] >= len(log)):
        return None
    # each step to the first call it made; a step that made none (a crash no call tells), and
    # a clock's move, to the call after it
    steps: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    for first, action, params in marking.marks:
        steps.setdefault(first, []).append((action, params))
    exchanges = []
    taken: list[tuple[str, dict[str, Any]]] = []
    for index, (asked, model, implementation) in enumerate(log):
        taken += steps.get(index, ())
        if asked.method == "advance" and model is None:
            exchanges.append((asked, model, implementation))
            continue
        last = index == len(log) - 1
        exchanges.append((dataclasses.replace(
            asked, steps=tuple(taken), agrees=not last, diff=divergence.diff if last else ""),
            model, implementation))
        taken = []
    return wire_rows(system.name, exchanges)


def _in_wire_words(counterexample: Counterexample, system: systems.System,
                   factory: Callable[..., Any], trace: Trace, divergence: Divergence,
                   profile: Any) -> Counterexample:
    """The counterexample with its calls as wire rows (:func:`_wire_rows`), where the trace's
    calls can be made once more with the model beside them; else as it is."""
    rows = _wire_rows(system, factory, trace, divergence, profile)
    return counterexample if rows is None else dataclasses.replace(counterexample, calls=rows)


def _ddmin_fields(shrunk: Shrunk[Any] | None, before: int) -> dict[str, Any]:
    """The counterexample's fields that say what ddmin did."""
    if shrunk is None:
        return {}
    return {"before_ddmin": before, "ddmin_runs": shrunk.runs,
            "one_minimal": shrunk.complete}


def corpus_phase(name: str, factory: Callable[..., Any], phase: PhaseResult,
                 progress: Progress | None, max_traces: int | None = None,
                 profile: Any = None, given: Sequence[Trace] | None = None,
                 all_divergences: bool = False) -> Counterexample | None:
    """Replay the system's corpus (its first ``max_traces`` traces the profile admits, a timer
    trace cut at its first step the profile leaves out) through ``factory``; the shortest
    diverging prefix. ``given`` traces are replayed instead of the corpus."""
    system = systems.get(name)
    admits = (None if not isinstance(profile, TimerProfile | DurableProfile)
              else timer_admitted_steps if isinstance(profile, TimerProfile)
              else durable_admitted_steps)

    def replayed_whole(trace: Trace) -> bool:
        # The replayed traces are the whole admitted ones in corpus order, then prefixes: once
        # max_traces whole ones are read, later traces change nothing replayed.
        return admits is None or admits(profile, trace) == len(trace.steps)

    if given is None:
        everything, size = read_corpus(system, max_traces, replayed_whole, profile)
    else:
        everything = list(given)
        size = len(everything)
    if isinstance(profile, TimerProfile | DurableProfile):
        traces, whole = admitted_traces(
            profile, everything, timer_admitted_steps if isinstance(profile, TimerProfile)
            else durable_admitted_steps)
        replayed_as: Any = profile
    else:
        traces, whole, replayed_as = everything, len(everything), FULL
    found = replay_admitted(system, size, traces, whole, factory, replayed_as,
                            phase, progress, max_traces, all_divergences)
    if found is None:
        return None
    trace, divergence = found
    before = divergence.step
    trace, divergence, shrunk = shrink_trace(system, factory, trace, divergence, replayed_as)
    counterexample = _in_wire_words(_corpus_counterexample(system, trace, divergence),
                                    system, factory, trace, divergence, replayed_as)
    return dataclasses.replace(counterexample, **_ddmin_fields(shrunk, before))


def replay_admitted(system: systems.System, corpus: int, traces: list[Trace], whole: int,
                    factory: Callable[..., Any], profile: Any, phase: PhaseResult,
                    progress: Progress | None,
                    max_traces: int | None,
                    all_divergences: bool = False) -> tuple[Trace, Divergence] | None:
    """Replay ``traces`` (of a ``corpus`` of so many, ``whole`` of them whole, the others
    prefixes; the first ``max_traces``) through ``factory``, counting into ``phase``; the
    trace and the divergence of the shortest diverging prefix, or None.

    The replay stops at the first trace that diverges: shortest first, that one is short, and
    ddmin (:func:`shrink_trace`) takes it further. ``all_divergences`` replays every trace,
    in the order given, and keeps the shortest diverging prefix of all
    (``figures["divergences"]`` counts the traces that diverge). Errors: a trace the model
    disagrees with -> :class:`CorpusUnreadable`.
    """
    if max_traces is not None and len(traces) > max_traces:
        traces, whole = traces[:max_traces], min(whole, max_traces)
    if not all_divergences:  # the first that diverges is then a short one
        traces = sorted(traces, key=lambda t: len(t.steps))  # stable: corpus order if equal
    figures = phase.figures
    figures.update(traces=corpus, admitted=whole, prefixes=len(traces) - whole,
                   steps_admitted=sum(len(t.steps) for t in traces), traces_run=0, steps_run=0)

    def on_progress(done: int, steps: int) -> None:
        figures["traces_run"], figures["steps_run"] = done, steps
        if progress is not None:
            progress("corpus", done, len(traces))

    result = replay(traces, factory, stop_at_first=not all_divergences,
                    on_progress=on_progress, fatal=(HarnessError,), system=system,
                    profile=profile)
    if all_divergences:
        figures["divergences"] = sum(d.side == "implementation" for d in result.divergences)
    if result.ok:
        return None
    wrong = [d for d in result.divergences if d.side == "model"]
    if wrong:
        raise CorpusUnreadable(
            f"trace {wrong[0].trace} of the {system.name} corpus disagrees with the reference "
            f"model at step {wrong[0].step}: {wrong[0].reason} (is the corpus current? "
            f"`refsched traces --system {system.name} --check`)")
    first = min(result.divergences, key=lambda d: d.step)
    return next(t for t in traces if t.name == first.trace), first


# -- the generated phase ----------------------------------------------------------------------

def _ledger(name: str) -> Any:
    """An empty ledger of the system's lock-step machine (it counts examples and calls)."""
    if name == "timer":
        from refsched.verify.timer.lockstep import Ledger as TimerLedger
        return TimerLedger()
    if name == "pool":
        from refsched.verify.pool.lockstep import Ledger as PoolLedger
        return PoolLedger()
    from refsched.verify.durable.lockstep import Ledger as DurableLedger
    return DurableLedger()


def _run(name: str, factory: Callable[..., Any], ledger: Any, *, examples: int, steps: int,
         seed: int | None, settings: dict[str, Any], profile: Any) -> None:
    """Run the system's lock-step machine, counting into ``ledger``."""
    if name == "timer":
        from refsched.verify.timer.lockstep import run_timer_lockstep
        run_timer_lockstep(factory, examples, steps, seed, python_api=False, ledger=ledger,
                           hypothesis_settings=settings, fatal=(HarnessError,),
                           profile=profile)
    elif name == "pool":
        from refsched.verify.pool.lockstep import (
            BATCH_STEAL_CAPS,
            BLOCKING_MAX_SPARES,
            run_pool_lockstep,
        )
        run_pool_lockstep(factory, examples, steps, seed=seed, python_api=False, ledger=ledger,
                          hypothesis_settings=settings, fatal=(HarnessError,))
        if getattr(profile, "batch_steals", False):  # then the same walks with batch steals
            for cap in BATCH_STEAL_CAPS:
                run_pool_lockstep(factory, examples, steps, seed=seed, python_api=False,
                                  ledger=ledger, hypothesis_settings=settings,
                                  fatal=(HarnessError,), steal_cap=cap)
        if getattr(profile, "managed_blocking", False):  # and with spares
            run_pool_lockstep(factory, examples, steps, seed=seed, python_api=False,
                              ledger=ledger, hypothesis_settings=settings,
                              fatal=(HarnessError,), max_spares=BLOCKING_MAX_SPARES)
    else:
        from refsched.verify.durable.lockstep import run_durable_lockstep
        run_durable_lockstep(factory, examples, steps, seed, ledger=ledger,
                             hypothesis_settings=settings, fatal=(HarnessError,),
                             profile=profile)


def minimized_calls(system: str, new_machine: Callable[[], Any], calls: Sequence[Any]
                    ) -> tuple[Any, tuple[WireRow, ...], Shrunk[Any]] | None:
    """A lock-step run's ``calls`` shrunk by ddmin, each candidate re-run on ``new_machine()``
    (a fresh machine over a fresh instance): the disagreement of the shortest, its calls as
    wire rows, and what the pass did; None when the run does not diverge again."""
    judge = MachineJudge(system, new_machine, (HarnessError,))
    shrunk = ddmin(calls, judge)
    if shrunk is None:
        return None
    final = judge.record(shrunk.items)
    if final is None:  # it diverged on each candidate run, not on this one: flaky
        return None
    disagreement = final[2]
    exchanges = [(call, model, implementation) for call, (_, model, implementation)
                 in zip(disagreement.calls, judge.exchanges, strict=False)]
    return disagreement, wire_rows(system, exchanges), shrunk


def _timer_machine(factory: Callable[..., Any], profile: Any,
                   rebuild_floor: int) -> Callable[[], Any]:
    from refsched.verify.timer.lockstep import timer_lockstep_machine

    machine = timer_lockstep_machine(factory, None, python_api=False, fatal=(HarnessError,),
                                     profile=profile)

    def new() -> Any:
        fresh: Any = machine()
        fresh.create(rebuild_floor, [])
        return fresh
    return new


def _instance_of(name: str) -> str:
    return {"pool": "workers w1, w2, w3",
            "durable": "max_concurrency=2, max_attempts=2, lease=1"}.get(name, "")


def _beside_the_model(name: str, factory: Callable[..., Any], profile: Any,
                      last_run: list[Any]) -> Callable[..., Any]:
    """``factory``, each instance it makes paired with the reference model by the system's
    wire (as it is when the wire pairs none), its calls logged into ``last_run`` from the
    start of the last instance made."""
    from refsched.conform import wire

    paired = wire.get(name).paired
    if paired is None:
        return factory

    def pair(implementation: Any, model: Any, clock: Callable[[], float] | None = None
             ) -> _Twin:
        last_run.clear()
        return _Twin(implementation, model, last_run, clock)
    return paired(factory, pair, profile)


def _last_run_rows(name: str, error: BaseException, last_run: Sequence[Any]
                   ) -> tuple[WireRow, ...] | None:
    """The failing run's calls as wire rows, the last one failing; None when the last call
    logged is not the run's failing call (a move no call makes, a crash the store is not told
    of)."""
    shown = tuple(getattr(error, "calls", ()) or getattr(error, "steps", ()))
    if not last_run or not shown or not str(shown[-1]).startswith(last_run[-1][0].method + "("):
        return None
    exchanges = list(last_run)
    asked, model, implementation = exchanges[-1]
    exchanges[-1] = (dataclasses.replace(asked, agrees=False), model, implementation)
    return wire_rows(name, exchanges)


def _generated_counterexample(name: str, error: BaseException, source: str,
                              factory: Callable[..., Any], profile: Any,
                              last_run: Sequence[Any] = ()) -> Counterexample:
    """The shrunk run, shrunk further by ddmin, as wire rows: the timer's calls re-run, the
    pool's and the durable scheduler's spec steps replayed with the model beside each call
    (:func:`_wire_rows`); where those steps cannot be replayed one call each (a claim that
    expires and re-claims several leases at once), the failing run's own calls as they were
    made beside the model."""
    reason = str(getattr(error, "reason", "")) or f"{type(error).__name__}: {error}"
    trace: Trace | None = getattr(error, "trace", None)
    model_state, implementation_state = getattr(error, "states", (None, None))
    if name == "timer" and hasattr(error, "calls"):
        floor = getattr(error, "rebuild_floor", 0)
        found = minimized_calls(name, _timer_machine(factory, profile, floor), error.calls)
        if found is not None:
            disagreement, rows, shrunk = found
            model_state, implementation_state = disagreement.states
            return Counterexample("generated", disagreement.reason, source, 0, rows, None,
                                  instance=f"rebuild_floor={floor}", system=name,
                                  model_state=model_state,
                                  implementation_state=implementation_state,
                                  **_ddmin_fields(shrunk, len(error.calls)))
        return Counterexample("generated", reason, source, 0, tuple(error.calls), None,
                              instance=f"rebuild_floor={floor}", system=name,
                              model_state=model_state,
                              implementation_state=implementation_state)
    if trace is not None and trace.steps:
        system = systems.get(name)
        replayed_as = profile if isinstance(profile, TimerProfile | DurableProfile) else FULL
        judge = TraceJudge(system, factory, trace.constants, replayed_as, (HarnessError,),
                           "conform-counterexample", _admission(replayed_as))
        walk = ddmin(trace.steps, judge)
        if walk is not None:
            shrunk_trace, divergence = walk.divergence
            counterexample = _in_wire_words(
                _corpus_counterexample(system, shrunk_trace, divergence), system, factory,
                shrunk_trace, divergence, replayed_as)
            return dataclasses.replace(
                counterexample, phase="generated", source=source,
                instance=_instance_of(name), **_ddmin_fields(walk, len(trace.steps)))
    as_run = _last_run_rows(name, error, last_run)
    if as_run is not None:
        return Counterexample("generated", reason, source, 0, as_run, trace,
                              instance=_instance_of(name), system=name,
                              model_state=model_state,
                              implementation_state=implementation_state)
    shown = tuple(getattr(error, "steps", ()) or getattr(error, "calls", ()))
    listed = [Row(str(text), "", "", True) for text in shown]
    if listed:
        listed[-1] = Row(listed[-1].text, "", "", False)
    else:
        listed.append(Row("(the run's calls are not known)", "", "", False))
    return Counterexample("generated", reason, source, 0, tuple(listed), trace,
                          instance=_instance_of(name), system=name, model_state=model_state,
                          implementation_state=implementation_state)


# what the comparison reads after each call: no call of the run
_READS = frozenset({"snapshot", "stats", "check_invariants", "leases", "history", "now",
                    "times", "release"})


class _Counted:
    """An instance whose calls (not the comparison's reads) are counted into ``tally[0]``."""

    def __init__(self, target: Any, tally: list[int]) -> None:
        self._target = target
        self._tally = tally

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute) or name.startswith("_") or name in _READS:
            return attribute
        tally = self._tally

        def counted(*args: Any, **kwargs: Any) -> Any:
            tally[0] += 1
            return attribute(*args, **kwargs)
        return counted


def counting(factory: Callable[..., Any], tally: list[int]) -> Callable[..., Any]:
    """``factory``, each instance it makes counting the calls made on it into ``tally[0]``:
    the calls of a run are every call sent, the initial ones and the failing one included."""
    def new(*args: Any, **kwargs: Any) -> Any:
        return _Counted(factory(*args, **kwargs), tally)
    return new


def generated_phase(name: str, factory: Callable[..., Any], phase: PhaseResult, *,
                    examples: int, steps: int, seed: int | None,
                    settings: dict[str, Any], progress: Progress | None,
                    profile: Any = None) -> Counterexample | None:
    """Drive ``factory`` and the model with the system's lock-step machine."""
    made = 0
    ledger = _ledger(name)
    tally = [0]
    # a pool is driven step by step from its class (unwrapped below): its walk's steps count
    instances = factory if name == "pool" else counting(factory, tally)
    # each instance beside the reference model, the calls of the last one made (the run that
    # failed, which Hypothesis makes last) kept with both answers
    last_run: list[Any] = []
    instances = _beside_the_model(name, instances, profile, last_run)

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        phase.figures["examples"] = made
        if progress is not None:
            progress("generated", made, examples)
        return instances(*args, **kwargs)

    counted.drives_steps = getattr(instances, "drives_steps", False)  # type: ignore[attr-defined]
    # a pool class is driven without its threads (pool_driver.SteppedPool), which unwraps the
    # factory to find it: each pool it makes is then not counted here, but in the ledger
    counted.__wrapped__ = factory  # type: ignore[attr-defined]
    try:
        with stable_labels():  # the same seed, the same calls, in every process
            _run(name, counted, ledger, examples=examples, steps=steps, seed=seed,
                 settings=settings, profile=profile)
    except HarnessError:
        raise
    except Exception as error:
        harness = _harness(error)
        if harness is not None:
            raise harness from None
        found = found_in(error, Exception)
        if found is None:
            raise
        source = (f"generated with seed {seed}, shrunk by Hypothesis" if seed is not None
                  else "generated, shrunk by Hypothesis")
        return _generated_counterexample(name, found, source, factory, profile, last_run)
    finally:
        phase.figures.update(examples=ledger.examples,
                             calls=ledger.calls if name == "pool" else tally[0])
    return None


def _harness(error: BaseException) -> HarnessError | None:
    """A harness failure inside what a run raised (Hypothesis may wrap it)."""
    if isinstance(error, HarnessError):
        return error
    cause = error.__cause__ or error.__context__
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _harness(inner)
            if found is not None:
                return found
    return _harness(cause) if cause is not None and cause is not error else None
