"""Test vectors: the corpus replay as wire lines, for checking an implementation without Python.

:func:`export` replays traces (a system's corpus, or the traces of a file such as a
counterexample written by ``refsched conform --trace-out``) through refsched's own server as
the oracle replays them, with :mod:`refsched.conform.tap` writing down every line, and turns
the record into a JSON-lines file (``docs/conformance.md``, "Test vectors and the protocol
schema"):

- the first line, the header: ``{"vectors": 1, "protocol", "system", "profile", "traces",
  "requests", "hello", "bye"}``, ``hello`` and ``bye`` the request lines that open and end a
  session;
- per trace, a marker ``{"trace": NAME, "itf": {...}}`` (a new instance starts: the next line
  is its ``new``), with the trace itself as ITF, so that :func:`read_trace_file` gives the trace
  back to ``refsched conform --traces``;
- per request, ``{"send": LINE, "expect": ANSWER, "unordered": [PATH, ...], "ignore": [PATH,
  ...]}``: the request line exactly as the oracle sent it, the answer it must get (an ``ok``
  answer whole but for the fields at the ``ignore`` paths, :data:`IGNORED`; an error by its
  ``type`` and the fields of :data:`ERROR_FIELDS`) and the lists of the ``ok`` result whose
  order means nothing, as paths (``*`` stands for any key or index).

The server's answers are the model's: the export fails unless the oracle judged every one of
them, and every snapshot after every step, the model's.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import itertools
import json
import os
import sys
import tempfile
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final, Union

from refsched.arguments import unwritable
from refsched.conform import protocol, values
from refsched.conform.wire import SYSTEMS
from refsched.conform.wire import get as get_wire
from refsched.profile import full_profile
from refsched.types import CloseReport
from refsched.verify import corpus as corpus_files
from refsched.verify import system as system_registry
from refsched.verify.itf import (
    Trace,
    TraceFormatError,
    read_traces,
    trace_from_itf,
    trace_to_itf,
)

__all__ = ["ERROR_FIELDS", "FORMAT", "IGNORED", "VectorsError", "check_export_arguments", "export",
           "export_command", "read_trace_file", "record_session", "trace_system",
           "traces_argument", "unordered_paths"]

FORMAT: Final = 1
"""The version of the vectors file, the header's ``vectors``."""

IGNORED: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    # the durable store's counts of refused and repeated reports depend on the calls the
    # harness makes, not on the spec's steps: the oracle leaves them out too
    ("durable", "stats"): ("/stale_callbacks", "/duplicate_callbacks"),
}
"""Per (system, op), the fields of the ``ok`` result no model fixes: not compared."""

ERROR_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "StaleGenerationError": ("generation", "current"),
    "StaleLeaseError": ("generation", "current", "attempt", "current_attempt"),
}
"""Per error type, the fields compared beside ``type`` (the ``message`` never is)."""


class VectorsError(ValueError):
    """Vectors cannot be written or read: a file that is not traces nor vectors, traces of
    another system, or a reference implementation that does not follow the traces."""


# -- which lists are sets ---------------------------------------------------------------------

def _paths(hint: Any, at: str = "") -> Iterator[str]:
    """The paths under ``at`` of the lists whose order means nothing in a value of type
    ``hint`` (sets travel as lists, :mod:`refsched.conform.values`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        for arm in args:
            yield from _paths(arm, at)
    elif hint is CloseReport:  # the contract names the list each id is in, not its place
        yield from (f"{at}/{f.name}" for f in dataclasses.fields(CloseReport))
    elif isinstance(hint, type) and (dataclasses.is_dataclass(hint) or (
            issubclass(hint, tuple) and hasattr(hint, "_fields"))):
        for name, field_hint in values._fields(hint):
            yield from _paths(field_hint, f"{at}/{name}")
    elif origin in (frozenset, set):
        yield at
        yield from _paths(args[0] if args else Any, f"{at}/*")
    elif origin in (tuple, list):
        for arm in (args[:1] if len(args) == 2 and args[1] is Ellipsis else args):
            yield from _paths(arm, f"{at}/*")
    elif origin in (dict, Mapping):
        yield from _paths(args[1] if args else Any, f"{at}/*")


def unordered_paths(system: str, op: str) -> list[str]:
    """The lists of ``op``'s ``ok`` result compared as sets: ``close``'s lists of ids, a
    snapshot's ``deps`` and ``optional``, whatever the system's result types hold as sets."""
    if system == "scheduler":
        return {"close": [f"/{f.name}" for f in dataclasses.fields(CloseReport)],
                "snapshot": ["/tasks/*/deps", "/tasks/*/optional"]}.get(op, [])
    spec = get_wire(system).ops.get(op)
    return [] if spec is None else list(dict.fromkeys(_paths(spec.result)))


def expected_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The answer as the vectors hold it: an ``ok`` whole, an error by its compared fields."""
    if "ok" in answer:
        return {"id": answer["id"], "ok": answer["ok"]}
    error = answer["error"]
    kept = ("type", *ERROR_FIELDS.get(error["type"], ()))
    return {"id": answer["id"], "error": {k: error[k] for k in kept if k in error}}


# -- reading traces ---------------------------------------------------------------------------

def _is_vectors(path: Path) -> bool:
    try:
        opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as stream:
            first = json.loads(stream.readline() or "null")
    except (OSError, ValueError, EOFError):
        return False
    return isinstance(first, dict) and "vectors" in first


def _markers(path: Path) -> Iterator[dict[str, Any]]:
    """The trace markers of a vectors file, read a line at a time."""
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as stream:
            for line in stream:
                if line.strip() and not line.startswith('{"send":'):  # the requests: skipped
                    value = json.loads(line)
                    if isinstance(value, dict) and "trace" in value:
                        yield value
    except (OSError, ValueError, EOFError) as e:
        raise VectorsError(f"{path}: not a vectors file: {e}") from None


def read_trace_file(path: str | Path) -> list[Trace]:
    """The traces of ``path``: an ITF file, a ``.jsonl``/``.jsonl.gz`` bundle, or a vectors
    file (the traces its markers hold). Errors: anything else -> :class:`VectorsError`."""
    path = Path(path)
    if not _is_vectors(path):
        try:
            return read_traces(path)
        except TraceFormatError as e:
            raise VectorsError(str(e)) from None
    try:
        traces = [trace_from_itf(line["itf"], str(line["trace"])) for line in _markers(path)]
    except (KeyError, TypeError, TraceFormatError) as e:
        raise VectorsError(f"{path}: a trace marker without its ITF trace: {e}") from None
    if not traces:
        raise VectorsError(f"{path}: a vectors file without a trace")
    return traces


def trace_system(traces: Sequence[Trace]) -> str:
    """The system whose spec the traces are behaviours of (by their variables)."""
    try:
        return system_registry.by_spec_variables(tuple(traces[0].initial)).name
    except ValueError as e:  # a TraceFormatError is one
        raise VectorsError(str(e)) from None


def corpus_traces(system: str, max_traces: int | None) -> list[Trace]:
    """The first ``max_traces`` traces (None: all) of the system's corpus, in the oracle's
    order: instance after instance."""
    traces: list[Trace] = []
    try:
        spec = system_registry.get(system)
        for trace in corpus_files.instance_traces(spec, lazy=max_traces is not None,
                                                  configs=spec.protocol_instances):
            if len(traces) == max_traces:  # only the first ones are parsed
                return traces
            traces.append(trace)
    except (corpus_files.CorpusMismatch, TraceFormatError, OSError, ValueError) as e:
        raise VectorsError(f"cannot read the {system} trace corpus: {e}") from None
    return traces


# -- writing vectors --------------------------------------------------------------------------

def _pairs(record: Path) -> list[tuple[str, dict[str, Any]]]:
    """The record's (request line, answer) pairs: a request line, then its answer line."""
    lines = record.read_text(encoding="utf-8").splitlines()
    return [(lines[i], protocol.decode_line(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]


def _vector_lines(system: str, traces: Sequence[Trace],
                  pairs: Sequence[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """The markers and vectors of a session's pairs, the hello and the bye left out."""
    pending = iter(traces)
    for line, answer in pairs:
        op = json.loads(line)["op"]
        if op in ("hello", "bye"):
            continue
        if op == "new":
            trace = next(pending, None)
            if trace is None:
                raise VectorsError(f"the replay started more instances than the "
                                   f"{len(traces)} traces it replayed")
            yield {"trace": trace.name, "itf": trace_to_itf(trace)}
        vector: dict[str, Any] = {"send": line, "expect": expected_answer(answer)}
        unordered = unordered_paths(system, op)
        if unordered:
            vector["unordered"] = unordered
        if (system, op) in IGNORED and "ok" in answer:
            vector["ignore"] = list(IGNORED[system, op])
        yield vector
    if next(pending, None) is not None:
        raise VectorsError(f"the replay started fewer instances than the {len(traces)} "
                           f"traces it replayed")


def record_session(system: str, traces: Sequence[Trace],
                   progress: Callable[[str, int, int], None] | None = None, *,
                   examples: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """Replay ``traces`` through refsched's own server as the oracle's corpus phase does (then,
    with ``examples``, that many of its generated phase, seed 0); every (request line, answer)
    of the session, the hello first and the bye last.

    Errors: the server does not follow the traces -> :class:`VectorsError`.
    """
    from refsched.conform import client, oracle

    with tempfile.TemporaryDirectory(prefix="refsched-vectors-") as scratch:
        record = Path(scratch) / "record.jsonl"
        impl = client.ProtocolImplementation(
            [sys.executable, "-m", "refsched.conform.tap", str(record), "--system", system],
            system=system)
        try:
            impl.open()
        except client.HarnessError as e:
            raise VectorsError(f"refsched's own {system} server did not start: {e}") from None
        try:
            # every trace, in the order given: each new instance is the next trace's
            report = oracle.check(impl, examples=examples, corpus=bool(traces), seed=0,
                                  progress=progress, traces=traces, steps=20,
                                  all_divergences=True, clauses=False)
        except oracle.OracleError as e:
            raise VectorsError(str(e)) from None
        if report.verdict != "conforms":
            raise VectorsError("refsched's own server does not follow these traces, so they "
                               "are no behaviours of the spec:\n" + report.format())
        return _pairs(record)


def export(out: str | Path, system: str, traces: Sequence[Trace] | None = None, *,
           max_traces: int | None = None,
           progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Write the vectors of ``traces`` (None: the system's corpus, its first ``max_traces``)
    to ``out`` (gzipped when it ends in ``.gz``); the header written.

    Errors: traces of another system, a reference implementation that does not follow them
    (then the traces are not behaviours of the spec) -> :class:`VectorsError`.
    """
    if system not in SYSTEMS:
        raise VectorsError(f"no system {system!r}; the systems are {', '.join(SYSTEMS)}")
    if traces is None:
        chosen = corpus_traces(system, max_traces)
    else:
        if traces and trace_system(traces) != system:
            raise VectorsError(f"the traces are of the {trace_system(traces)}, not the {system}")
        chosen = list(traces)[:max_traces]
    pairs = record_session(system, chosen, progress)
    ids = [request["id"] for request in (json.loads(line) for line, _ in pairs)
           if request["op"] not in ("hello", "bye")]
    header = {
        "vectors": FORMAT, "protocol": protocol.PROTOCOL_VERSION, "system": system,
        "profile": full_profile(system).to_json(), "traces": len(chosen),
        "requests": len(ids),
        "hello": protocol.encode_line(protocol.request(
            0, "hello", protocol=protocol.PROTOCOL_VERSION)).rstrip("\n"),
        "bye": protocol.encode_line(protocol.request(max(ids, default=0) + 1, "bye")
                                    ).rstrip("\n"),
    }
    _write(Path(out), itertools.chain([header], _vector_lines(system, chosen, pairs)))
    return header


def _write(out: Path, lines: Iterable[Mapping[str, Any]]) -> None:
    """Write ``lines`` one at a time (a whole corpus's vectors are hundreds of megabytes),
    gzipped when ``out`` ends in ``.gz``, the same bytes for the same lines."""
    partial = out.with_name(out.name + ".partial")  # OUT is whole, or not there
    try:
        with open(partial, "wb") as raw:
            stream: gzip.GzipFile | BinaryIO = (gzip.GzipFile("", "wb", fileobj=raw, mtime=0)
                                 if out.name.endswith(".gz") else raw)
            for line in lines:
                stream.write(json.dumps(line, separators=(",", ":")).encode("utf-8") + b"\n")
            stream.close()
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)


# -- the command line (refsched conform --traces, --export-vectors) ---------------------------

def traces_argument(parser: argparse.ArgumentParser, path: str, system: str) -> list[Trace]:
    """The traces of ``--traces FILE``, which must be of ``system``; else a usage error."""
    try:
        traces = read_trace_file(path)
        theirs = trace_system(traces)
    except VectorsError as e:
        parser.error(f"--traces: {e}")
    if theirs != system:
        parser.error(f"--traces: {path} holds traces of the {theirs} system, not of the "
                     f"{system}: add --system {theirs}")
    return traces


def check_export_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--export-vectors`` goes with ``--system``, ``--traces``, ``--max-traces`` and ``-q``
    alone: the vectors hold refsched's own answers to the corpus phase."""
    others = [option for option, given in (
        ("COMMAND", bool(args.command)), ("--impl", args.impl), ("--profile", args.profile),
        ("--examples", args.examples is not None), ("--no-corpus", args.no_corpus),
        ("--timeout", args.timeout), ("--trace-out", args.trace_out),
        ("--picture", args.picture), ("--json", args.json)) if given]
    if others:
        parser.error(f"--export-vectors writes refsched's own answers to the corpus phase: "
                     f"it takes no {', '.join(others)}")
    problem = unwritable(Path(args.export_vectors))
    if problem is not None:
        parser.error(f"--export-vectors: cannot write {args.export_vectors}: {problem}")
    args.traces_read = (None if args.traces is None
                        else traces_argument(parser, args.traces, args.system))


def export_command(args: argparse.Namespace) -> int:
    """Write the vectors ``args`` ask for; the exit status (0 written, 2 cannot be)."""
    from refsched.progress import Progress

    display = Progress(sys.stderr, quiet=args.quiet)

    def progress(phase: str, done: int, total: int) -> None:
        display.update(f"  {phase}: {done:,} of {total:,} traces")

    try:
        header = export(args.export_vectors, args.system, args.traces_read,
                        max_traces=args.max_traces, progress=progress)
    except VectorsError as e:
        display.done(f"refsched conform: {e}")
        return 2
    display.done(f"wrote {args.export_vectors}: {header['traces']:,} {args.system} traces, "
                 f"{header['requests']:,} requests with their answers (node "
                 f"docs/vectors/run-vectors.mjs {args.export_vectors} COMMAND...)")
    return 0
