"""The oracle's verdict on an implementation: what ran, what it found, for people and as JSON.

A :class:`ConformanceReport` holds the verdict (``"conforms"``, ``"diverges"``, or the verdict
of a harness failure: ``"crashed"``, ``"timed out"``, ``"protocol violation"``), the profile
the implementation declared, one :class:`PhaseResult` per phase run, and on a divergence the
:class:`Counterexample`: the calls that show it, as a table, and the model's steps along them as
an ITF trace that ``refsched replay`` and ``refsched validate-trace`` read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, TypeVar

from refsched.conform import clauses, protocol, values
from refsched.conform.dag import wire as dag_wire
from refsched.profile import Profile
from refsched.verify.dag.lockstep import Call
from refsched.verify.itf import Trace, trace_to_itf

__all__ = [
    "CONFORMS",
    "DIVERGES",
    "EXIT_STATUS",
    "NOTHING_CHECKED",
    "ConformanceReport",
    "Counterexample",
    "PhaseResult",
    "Row",
    "WireRow",
    "wire_answer",
    "wire_request",
    "wire_rows",
]

CONFORMS: Final = "conforms"
DIVERGES: Final = "diverges"
# every phase ran and none made a call (the profile left out all it would ask): no verdict
NOTHING_CHECKED: Final = "nothing checked"
# the verdict -> the exit status of ``refsched conform``; any harness verdict is 3
EXIT_STATUS: Final = {CONFORMS: 0, DIVERGES: 1, NOTHING_CHECKED: 2}
HARNESS_EXIT_STATUS: Final = 3

_E = TypeVar("_E", bound=BaseException)

_CELL: Final = 60  # characters shown of a cell of an agreeing row; the failing row is shown whole


@dataclass
class PhaseResult:
    """One phase of a check: ``"corpus"`` (trace replay) or ``"generated"`` (lock-step)."""

    name: str
    seconds: float = 0.0
    # corpus: traces (in the corpus), admitted (whole, by the profile), prefixes (of the others,
    # replayed as far as admitted), steps_admitted, traces_run, steps_run (steps replayed
    # without divergence); generated: examples, calls
    figures: dict[str, int] = field(default_factory=dict)
    ok: bool = True  # False: the phase found the divergence, or the harness failed in it

    def summary(self) -> str:
        """The figures in a line."""
        f = self.figures
        if self.name == "clauses":
            return f"{f.get('probes', 0):,} probes, {f.get('calls', 0):,} calls"
        if self.name == "corpus":
            prefixes = (f" and {f['prefixes']:,} prefixes of others" if f.get("prefixes")
                        else "")
            return (f"{f.get('admitted', 0):,} of {f.get('traces', 0):,} traces admitted"
                    f"{prefixes} ({f.get('steps_admitted', 0):,} steps); replayed "
                    f"{f.get('traces_run', 0):,} traces, {f.get('steps_run', 0):,} steps")
        # Hypothesis runs more examples while it shrinks a failure
        shrinking = "" if self.ok else " (shrinking included)"
        return f"{f.get('examples', 0):,} examples{shrinking}, {f.get('calls', 0):,} calls"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "seconds": round(self.seconds, 3),
                "figures": dict(self.figures)}


def answer_text(actual: str) -> str:
    """A replay's "returned X" / "raised E: m" as a counterexample's table shows an answer:
    "X" / "E: m"."""
    for verb in ("returned ", "raised "):
        if actual.startswith(verb):
            return actual[len(verb):]
    return actual


def found_in(error: BaseException, kind: type[_E]) -> _E | None:
    """The first exception of ``kind`` that ``error`` is or holds: Hypothesis groups a flaky
    failure's errors, and the one that shows the disagreement may be any of them."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = found_in(inner, kind)
            if found is not None:
                return found
        return None
    return error if isinstance(error, kind) else None


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


@dataclass(frozen=True)
class Row:
    """One call of a counterexample of a system whose checks name their calls as text."""

    text: str  # the call, or the spec step, as people read it
    model: str  # the model's answer ("" when the run does not say)
    implementation: str  # the implementation's
    agrees: bool  # False only for the failing one
    diff: str = ""  # the fields that differ after it

    def to_json(self) -> dict[str, Any]:
        return {"call": self.text, "model": self.model, "implementation": self.implementation,
                "agrees": self.agrees, "diff": self.diff}


def _plain(value: Any) -> Any:
    """An argument as JSON carries it: a ``Fraction`` run_at as the float it is sent as."""
    if isinstance(value, Fraction):
        return float(value)
    try:
        return values.to_json(value)
    except TypeError:
        return repr(value)


# what a call of the TaskScheduler's API gives that the wire does not carry
_STAYS: Final = frozenset({"fn", "result", "error"})


def wire_request(system: str, method: str, args: Sequence[Any],
                 kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request a call is on the wire: ``{"op": method, argument: value, ...}``, the
    arguments named as the protocol names them (the dependency scheduler's ``dag_wire.OPS``, or
    the system's wire, which also names the op of a method named otherwise)."""
    if system == "scheduler":
        # the API's parameters, of which the wire carries those its table names (a function,
        # a result or an error stays in the process), ``optional`` only when it names an
        # id, and ``actor`` and ``reason`` only when given, as the client sends them
        required, optional = dag_wire.OPS.get(method, ((), {}))
        carried = (*required, *optional)
        names = clauses.PARAMETERS["scheduler"].get(method, carried)
        request: dict[str, Any] = {"op": method}
        given = {names[i] if i < len(names) else f"arg{i}": value
                 for i, value in enumerate(args)}
        for name, value in {**given, **kwargs}.items():
            if name in _STAYS or (name == "optional" and not value) or (
                    name in ("actor", "reason") and value is None):
                continue
            request[name] = _plain(value)
        return request
    from refsched.conform import wire

    spoken = wire.get(system)
    method = spoken.op_of.get(method, method)
    op = spoken.new if method == "new" else spoken.ops.get(method)
    names = () if op is None else op.names
    request = {"op": method}
    for index, value in enumerate(args):
        request[names[index] if index < len(names) else f"arg{index}"] = _plain(value)
    request.update((name, _plain(value)) for name, value in kwargs.items())
    return request


def wire_answer(system: str, method: str,
                answer: tuple[Any, BaseException | None] | None) -> dict[str, Any] | None:
    """An answer as the protocol encodes it: ``{"ok": result}`` or ``{"error": {"type",
    "message", ...}}``; None when the side was not asked."""
    if answer is None:
        return None
    value, error = answer
    if error is not None:
        if isinstance(error, protocol.ForeignError):  # a type refsched does not have
            return {"error": {"type": error.type_name, "message": error.message}}
        return {"error": protocol.error_to_json(error)}
    try:
        result = (dag_wire.result_to_json(method, value) if system == "scheduler"
                  else _system_result(system, method, value))
    except (TypeError, ValueError):  # no result of the op's type: shown as Python has it
        result = repr(value)
    return {"ok": result}


def _system_result(system: str, method: str, value: Any) -> Any:
    """An ok result of a system's op as JSON: null for an op whose result is always null (a
    pool's move, whatever an instance in this process returns for it)."""
    from refsched.conform import wire

    carried = wire.get(system)
    op = carried.ops.get(carried.op_of.get(method, method))
    return None if op is not None and op.result is None else values.to_json(value)


def wire_rows(system: str, exchanges: Sequence[tuple[Any, Any, Any]]) -> tuple[WireRow, ...]:
    """A re-run's calls as wire rows: ``exchanges`` of (call, the model's (value, error), the
    implementation's), each call with ``method``, ``args``, ``kwargs``, ``agrees``, ``diff``,
    ``text``. A timer's clock moving (``advance``) is the request that sets ``now``."""
    rows = []
    now = 0.0
    for call, model, implementation in exchanges:
        if system == "timer" and call.method == "advance":
            now += call.args[0]
            rows.append(WireRow({"op": "advance", "now": _plain(now)}, None, None, True,
                                python=call.text))
            continue
        rows.append(WireRow(wire_request(system, call.method, call.args, call.kwargs),
                            wire_answer(system, call.method, model),
                            wire_answer(system, call.method, implementation), call.agrees,
                            call.diff, call.text, tuple(getattr(call, "steps", ()))))
    return tuple(rows)


def _json_text(message: Mapping[str, Any] | None) -> str:
    if message is None:
        return ""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=repr)


@dataclass(frozen=True)
class WireRow:
    """One call of a counterexample as the protocol carries it: the request, and the answer
    each side gave, encoded as the implementation sends it (``{"ok": ...}`` / ``{"error": ...}``).
    """

    request: Mapping[str, Any]
    model_answer: Mapping[str, Any] | None  # None: the call has no answer (the clock moved)
    implementation_answer: Mapping[str, Any] | None
    agrees: bool  # False only for the failing one
    diff: str = ""  # the fields that differ after it
    python: str = ""  # the call as the lock-step machine names it
    # the spec steps the model took for the call: (action, params) pairs, or action names
    steps: tuple[Any, ...] = ()

    @property
    def method(self) -> str:
        """The operation: the request's ``op``."""
        return str(self.request.get("op", ""))

    @property
    def text(self) -> str:
        return _json_text(self.request)

    @property
    def model(self) -> str:
        return _json_text(self.model_answer)

    @property
    def implementation(self) -> str:
        return _json_text(self.implementation_answer)

    def to_json(self) -> dict[str, Any]:
        return {"request": dict(self.request), "model": self.model_answer,
                "implementation": self.implementation_answer, "agrees": self.agrees,
                "diff": self.diff, "call": self.python,
                "steps": [step if isinstance(step, str) else
                          {"action": step[0], "params": {k: repr(v) for k, v in step[1].items()}}
                          for step in self.steps]}


@dataclass(frozen=True)
class Counterexample:
    """The calls that show a divergence, and the spec behaviour the model took along them.

    ``calls`` end with the failing one; ``trace`` holds the model's spec steps along them (a
    call the model refused took none), starting from ``Init``, or is None when they form no
    behaviour of the spec (a timer's generated run moves its clock in fractions of a tick).
    ``instance`` says what the instance was made with, when it is not ``max_concurrency``.
    ``system`` names the system; ``model_state`` and ``implementation_state`` are the two
    states where they parted (the trace's or the model's, and the implementation's snapshot;
    None when a side could not say), which ``--picture`` draws side by side.
    """

    phase: str  # the phase that found it: "corpus" or "generated"
    reason: str  # the disagreement in a sentence
    source: str  # where it comes from: a corpus trace's prefix, or the shrunk generated run
    max_concurrency: int
    calls: tuple[Call | Row | Any, ...]
    trace: Trace | None
    instance: str = ""
    system: str = "scheduler"
    model_state: Any = None
    implementation_state: Any = None
    # the clause of the contract that decides the failing call (refsched.conform.clauses), as
    # the model answered it; "" when none does or the reason already names it
    rule: str = ""
    # the ddmin pass (refsched.conform.shrink): the calls before it (0: it did not run), the
    # candidates it re-ran, and whether it ended 1-minimal (no single call can go)
    before_ddmin: int = 0
    ddmin_runs: int = 0
    one_minimal: bool = False

    @property
    def wire_reason(self) -> str:
        """The reason, in the protocol's words when the calls are wire rows: the failing
        request as JSON, and the two answers as JSON when they differ."""
        rule = f"rule {self.rule}: " if self.rule else ""
        failing = self.calls[-1] if self.calls else None
        if not isinstance(failing, WireRow):
            return rule + self.reason
        if failing.model != failing.implementation:
            return (f"{rule}{failing.text}: the implementation answered "
                    f"{failing.implementation}, the model {failing.model}")
        if failing.python and self.reason.startswith(failing.python + ":"):
            return rule + failing.text + self.reason[len(failing.python):]
        return rule + self.reason

    def ddmin_text(self) -> str:
        """What the ddmin pass did, in a phrase ("" when it did not run)."""
        if not self.before_ddmin:
            return ""
        ended = "1-minimal" if self.one_minimal else "stopped at its budget"
        return (f"ddmin {self.before_ddmin} -> {len(self.calls)} calls, {ended}, "
                f"{self.ddmin_runs} runs")

    def table(self) -> str:
        """The calls as a table: step, call, the model's answer, the implementation's.

        The failing call is marked ``!`` and followed by the snapshot fields that differ
        after it, when they were compared and differ.
        """
        rows = [("step", "call", "model", "implementation")]
        failing = len(self.calls)
        for number, call in enumerate(self.calls, start=1):
            mark = "!" if not call.agrees else " "
            if number == failing:
                rows.append((f"{mark}{number}", call.text, call.model, call.implementation))
            else:
                rows.append((f"{mark}{number}", _clip(call.text, _CELL), _clip(call.model, _CELL),
                             _clip(call.implementation, _CELL)))
        # a long cell of the failing row overflows its column rather than widen every row
        widths = [max(min(len(r[i]), _CELL) for r in rows) for i in range(3)]
        lines = []
        for index, row in enumerate(rows):
            lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in
                                          enumerate(row[:3])) + "  " + row[3])
            diff = self.calls[index - 1].diff if index else ""
            if diff:
                lines.append("        fields that differ after the call:")
                lines += ["      " + line for line in diff.splitlines()]
        return "\n".join(line.rstrip() for line in lines)

    def format(self) -> str:
        """The counterexample for people: where it comes from, the table, the reason."""
        shrunk = f"; {self.ddmin_text()}" if self.before_ddmin else ""
        return "\n".join([
            f"counterexample ({self.source}{shrunk}; {len(self.calls)} calls, "
            f"{self.instance or f'max_concurrency={self.max_concurrency}'}):",
            self.table(),
            f"the implementation diverges: {self.wire_reason}",
        ])

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "reason": self.wire_reason, "source": self.source,
                "max_concurrency": self.max_concurrency, "instance": self.instance,
                "calls": [c.to_json() for c in self.calls],
                "ddmin": (None if not self.before_ddmin else
                          {"before": self.before_ddmin, "after": len(self.calls),
                           "runs": self.ddmin_runs, "one_minimal": self.one_minimal}),
                "trace": None if self.trace is None else trace_to_itf(self.trace)}


@dataclass
class ConformanceReport:
    """The oracle's verdict on one implementation."""

    implementation: str  # the implementation's name
    profile: Profile | None  # None: unknown (the implementation failed before declaring it)
    verdict: str = CONFORMS  # CONFORMS, DIVERGES, or a harness verdict
    phases: list[PhaseResult] = field(default_factory=list)
    counterexample: Counterexample | None = None
    harness_message: str = ""  # the harness failure, without the stderr tail
    stderr_tail: str = ""  # the implementation's last lines of stderr, on a harness failure
    seed: int | None = 0
    seconds: float = 0.0
    system: str = "scheduler"
    # SHA-256 of the manifests of the system's corpus instances, in order (None: not replayed)
    corpus_sha256: str | None = None
    # the clauses the check drove (refsched.conform.coverage.Coverage), None before any call
    coverage: Any = None

    @property
    def ok(self) -> bool:
        return self.verdict == CONFORMS

    @property
    def exit_status(self) -> int:
        """0 conforms, 1 diverges, 2 nothing checked, 3 a harness verdict (crashed, timed
        out, protocol)."""
        return EXIT_STATUS.get(self.verdict, HARNESS_EXIT_STATUS)

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)

    def headline(self) -> str:
        verdict = {CONFORMS: "conforms to the model",
                   DIVERGES: "DIVERGES from the model"}.get(self.verdict,
                                                           self.verdict.upper())
        profile = "profile unknown" if self.profile is None else self.profile.describe()
        return (f"refsched conform: {self.implementation} {verdict} ({profile}) "
                f"in {self.seconds:.1f}s")

    def format(self) -> str:
        """The report for people: the verdict, a line per phase, then what went wrong."""
        lines = [self.headline()]
        lines += _phase_lines(self.phases)
        if self.coverage is not None and self.profile is not None:
            lines.append(f"  {self.coverage.summary(self.profile)}")
        if self.harness_message:
            lines.append(f"{self.verdict}: {self.harness_message}")
            if self.stderr_tail:
                lines.append("last lines of its stderr:")
                lines += ["  " + line for line in self.stderr_tail.splitlines()]
        if self.counterexample is not None:
            lines.append(self.counterexample.format())
        return "\n".join(lines)

    def certificate(self) -> dict[str, Any]:
        """What the verdict was reached with, to quote beside it: refsched's version, the
        corpus (its manifests' hash), the profile, the seed, and how much ran."""
        from refsched import __version__

        corpus = self.phase("corpus")
        generated = self.phase("generated")
        return {
            "refsched": __version__, "system": self.system,
            "corpus_sha256": self.corpus_sha256,
            "profile": None if self.profile is None else self.profile.to_json(),
            "seed": self.seed,
            "traces_replayed": 0 if corpus is None else corpus.figures.get("traces_run", 0),
            "examples": 0 if generated is None else generated.figures.get("examples", 0),
            "calls": 0 if generated is None else generated.figures.get("calls", 0),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "certificate": self.certificate(),
            "implementation": self.implementation,
            "verdict": self.verdict,
            "ok": self.ok,
            "exit_status": self.exit_status,
            "profile": None if self.profile is None else self.profile.to_json(),
            "seed": self.seed,
            "seconds": round(self.seconds, 3),
            "phases": [p.to_json() for p in self.phases],
            "counterexample": (None if self.counterexample is None
                               else self.counterexample.to_json()),
            "harness": (None if not self.harness_message else
                        {"verdict": self.verdict, "message": self.harness_message,
                         "stderr_tail": self.stderr_tail}),
            "coverage": (None if self.coverage is None or self.profile is None
                         else self.coverage.to_json(self.profile)),
        }


def _phase_lines(phases: Sequence[PhaseResult]) -> list[str]:
    width = max((len(p.name) for p in phases), default=0)
    return [f"  {p.name.ljust(width)}  {'ok  ' if p.ok else 'FAIL'}  {p.seconds:6.1f}s  "
            f"{p.summary()}" for p in phases]
