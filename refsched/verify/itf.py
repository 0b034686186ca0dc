"""Traces of the spec in ITF, the Informal Trace Format of Apalache and Quint.

One trace is one JSON object (ADR-015)::

    {"#meta": {"format": "ITF", "name": "cover-00001", "source": "...",
               "constants": {"Tasks": ["a", "b"], "MaxConcurrency": 2}},
     "params": [],
     "vars": ["started", ..., "seq", "mbt::actionTaken", "mbt::nondetPicks"],
     "states": [{"#meta": {"index": 0}, "started": false, ...,
                 "mbt::actionTaken": "init",
                 "mbt::nondetPicks": {"t": {"tag": "None", "value": {"#tup": []}}, ...}},
                ...],
     "loop": null}

Every state holds the spec's eleven variables (sets as ``#set``, functions as ``#map``,
integers as JSON numbers, ``NoTask`` as the string ``"NoTask"``) and, following Quint's
model-based-testing convention, the action that produced it (``mbt::actionTaken``; ``"init"``
for the first state) and that action's parameters (``mbt::nondetPicks``: a record with a
``{"tag": "Some", "value": v}`` field for each parameter the action takes, named as in the
spec: ``t``, ``D``, ``k``, ``g``, ``cancelPending``). Parameters the action does not take
are left out rather than written as ``None``. Reading accepts ``None`` picks and plain values
too. (itf-py 0.5 decodes every variable but not these picks: it cannot decode a variant
whose value is a set or an integer, nor one tagged ``None``.) A bundle is a file of
such objects, one per line (``.jsonl``, optionally gzipped: ``.jsonl.gz``); a single trace
may also be a plain ``.itf.json`` file.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refsched.verify import system as systems
from refsched.verify.tla import Function, ModelValue

__all__ = [
    "ACTION_TAKEN",
    "MAX_DEPTH",
    "NONDET_PICKS",
    "PARAMETERS",
    "Step",
    "Trace",
    "TraceFormatError",
    "decode_value",
    "encode_bundle",
    "encode_value",
    "iter_traces",
    "read_traces",
    "trace_from_itf",
    "trace_to_itf",
    "write_traces",
]

ACTION_TAKEN = "mbt::actionTaken"
NONDET_PICKS = "mbt::nondetPicks"
PARAMETERS = ("t", "D", "k", "g", "cancelPending", "r", "p", "v", "w", "thief", "victim", "a",
              "d", "O", "x", "s")
"""Every parameter name the specs' actions take (``spec/Scheduler.tla``, then
``spec/TimerQueue.tla``, then ``spec/WorkStealing.tla``, then ``spec/DurableScheduler.tla``: its
Submit's ``p`` and ``d`` are a priority and a delay; then ``O``, the optional edges of
Scheduler.tla's SubmitOptional and AddDeps; then ``x`` and ``s``, the thread and the spare of
WorkStealing.tla's managed blocking)."""


_SAFE_INTEGER = 2**53


class TraceFormatError(ValueError):
    """A file or object that is not an ITF trace of the spec's variables."""


@dataclass(frozen=True)
class Step:
    """One step of a trace: ``action(params)`` led to ``state`` (the spec's variables)."""

    action: str
    params: Mapping[str, Any]
    state: Mapping[str, Any]


@dataclass(frozen=True)
class Trace:
    """A behaviour of the spec: an initial state and the steps taken from it."""

    name: str
    constants: Mapping[str, Any]  # "Tasks": list of ids, "MaxConcurrency": int
    initial: Mapping[str, Any]
    steps: Sequence[Step]
    meta: Mapping[str, Any] = field(default_factory=dict)  # anything else for #meta

    @property
    def states(self) -> list[Mapping[str, Any]]:
        return [self.initial, *(step.state for step in self.steps)]


def encode_value(value: Any) -> Any:
    """A Python value (as :mod:`refsched.verify.tla` reads TLA+) as ITF JSON."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        # ADR-015: plain JSON numbers within the doubles' exact range, #bigint beyond it
        return value if abs(value) < _SAFE_INTEGER else {"#bigint": str(value)}
    if isinstance(value, ModelValue):
        return value.name
    if isinstance(value, frozenset | set):
        return {"#set": sorted((encode_value(v) for v in value), key=_order)}
    if isinstance(value, tuple | list):
        return [encode_value(v) for v in value]
    if isinstance(value, Mapping):
        pairs = [[encode_value(k), encode_value(v)] for k, v in value.items()]
        return {"#map": sorted(pairs, key=lambda kv: _order(kv[0]))}
    raise TraceFormatError(f"no ITF value for {value!r} ({type(value).__name__})")


def _order(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True)


MAX_DEPTH = 32
"""How deeply ITF values may nest: the specs' values nest four deep (a function of sets of
records); a deeper value is refused before it can exhaust Python's stack."""


def decode_value(value: Any, depth: int = 0) -> Any:
    """ITF JSON as a Python value: ``#map`` and records as Function, ``#set`` as frozenset.

    ``TraceFormatError`` for anything else: a JSON number that is not an integer, an object
    tagged with an unknown ``#`` key, a tag with a value of the wrong shape, a ``#map`` with a
    key twice, a ``#bigint`` that is not an integer or has more digits than Python converts,
    values nested more than :data:`MAX_DEPTH` deep.
    """
    if isinstance(value, bool | str | int):
        return value
    if depth >= MAX_DEPTH:
        raise TraceFormatError(f"a value nested more than {MAX_DEPTH} deep")
    if isinstance(value, list):
        return tuple(decode_value(v, depth + 1) for v in value)
    if not isinstance(value, dict):
        raise TraceFormatError(f"not an ITF value: {_brief(value)}")
    tags = [k for k in value if k.startswith("#")]
    if not tags:
        return Function({k: decode_value(v, depth + 1) for k, v in value.items()})
    tag = tags[0]
    if len(value) != 1:
        raise TraceFormatError(f"an object tagged {tag} has other keys: {sorted(value)[:4]}")
    inner = value[tag]
    if tag == "#bigint":
        return _bigint(inner)
    if tag in ("#set", "#tup", "#map") and not isinstance(inner, list):
        raise TraceFormatError(f"{tag} holds {_brief(inner)}, not a list")
    if tag == "#set":
        return frozenset(decode_value(v, depth + 1) for v in inner)
    if tag == "#tup":
        return tuple(decode_value(v, depth + 1) for v in inner)
    if tag == "#map":
        pairs: dict[Any, Any] = {}
        for pair in inner:
            if not isinstance(pair, list) or len(pair) != 2:
                raise TraceFormatError(f"#map holds {_brief(pair)}, not a [key, value] pair")
            key = decode_value(pair[0], depth + 1)
            if key in pairs:
                raise TraceFormatError(f"#map has the key {_brief(pair[0])} twice")
            pairs[key] = decode_value(pair[1], depth + 1)
        return Function(pairs)
    if tag == "#unserializable":
        raise TraceFormatError(f"unserializable value {_brief(inner)}")
    raise TraceFormatError(f"unknown ITF value kind {tag!r}")


_INTEGER = re.compile(r"-?[0-9]+")


def _bigint(text: Any) -> int:
    if not isinstance(text, str) or not _INTEGER.fullmatch(text):
        raise TraceFormatError(f"#bigint holds {_brief(text)}, not the digits of an integer")
    limit = sys.get_int_max_str_digits()
    digits = len(text.lstrip("-"))
    if limit and digits > limit:
        raise TraceFormatError(f"a #bigint of {digits:,} digits: more than the {limit:,} "
                               "Python converts")
    return int(text)


def _brief(value: Any) -> str:
    """``value`` in a message: its JSON, cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _picks(params: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(params) - set(PARAMETERS)
    if unknown:
        raise TraceFormatError(f"unknown action parameters {sorted(unknown)}")
    return {name: {"tag": "Some", "value": encode_value(params[name])}
            for name in PARAMETERS if name in params}


_VARIABLES: dict[frozenset[str], tuple[str, ...]] = {}


def spec_variables(names: Iterable[str]) -> tuple[str, ...]:
    """The variables, in declaration order, of the spec whose variables include ``names``.

    A state of the spec may omit variables (a recorded trace need not hold them all); the
    others are not the spec's and are ignored. ``TraceFormatError`` if no spec has them.
    """
    key = frozenset(names)
    known = _VARIABLES.get(key)
    if known is None:
        best: tuple[str, ...] = ()
        for name in systems.NAMES:  # the specs share names like "state" and "closed"
            variables = systems.get(name).variables
            if key <= set(variables):
                best = variables
                break
            if len(key & set(variables)) > len(key & set(best)):
                best = variables
        if not key & set(best):
            raise TraceFormatError(f"no spec has the variables {sorted(key)}")
        known = _VARIABLES[key] = best
    return known


def _state_json(index: int, state: Mapping[str, Any], action: str, params: Mapping[str, Any],
                cache: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"#meta": {"index": index}}
    encoded = None if cache is None else cache.get(id(state))
    if encoded is None:
        encoded = {name: encode_value(state[name]) for name in spec_variables(state)
                   if name in state}
        if cache is not None:
            cache[id(state)] = encoded
    out.update(encoded)
    out[ACTION_TAKEN] = action
    out[NONDET_PICKS] = _picks(params)
    return out


def trace_to_itf(trace: Trace, cache: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ITF object of ``trace``.

    ``cache`` (keyed by ``id`` of a state mapping) saves encoding a state object again when
    many traces share it; it is only valid while those state objects are alive and unchanged.
    """
    meta = {"format": "ITF", "name": trace.name,
            "constants": {k: _plain(v) for k, v in trace.constants.items()}, **trace.meta}
    states = [_state_json(0, trace.initial, "init", {}, cache)]
    states += [_state_json(i, step.state, step.action, step.params, cache)
               for i, step in enumerate(trace.steps, start=1)]
    # the spec's variables the trace's states hold: a pool's without managed blocking leave
    # out its variables
    variables = [v for v in spec_variables(trace.initial) if v in trace.initial]
    return {"#meta": meta, "params": [], "vars": [*variables, ACTION_TAKEN, NONDET_PICKS],
            "states": states, "loop": None}


def _plain(value: Any) -> Any:
    if isinstance(value, frozenset | set | tuple | list):
        return [_plain(v) for v in sorted(value, key=repr)] if isinstance(
            value, frozenset | set) else [_plain(v) for v in value]
    return value


def _decode_at(where: str, value: Any) -> Any:
    """:func:`decode_value`, its error prefixed with where the value was."""
    try:
        return decode_value(value)
    except TraceFormatError as exc:
        raise TraceFormatError(f"{where}: {exc}") from None


def _decode_picks(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TraceFormatError(f"{where}: {NONDET_PICKS} is not a record")
    params: dict[str, Any] = {}
    for name, pick in raw.items():
        if isinstance(pick, dict) and set(pick) == {"tag", "value"}:
            if pick["tag"] == "Some":
                params[name] = _decode_at(f"{where}, pick {name}", pick["value"])
            elif pick["tag"] != "None":
                raise TraceFormatError(f"{where}: pick {name} has tag {pick['tag']!r}")
        else:  # a plain value: the parameter was picked
            params[name] = _decode_at(f"{where}, pick {name}", pick)
    return params


def trace_from_itf(doc: Mapping[str, Any], default_name: str = "trace",
                   cache: dict[str, dict[str, Any]] | None = None) -> Trace:
    """A :class:`Trace` from an ITF object. Variables a state omits are simply not recorded.

    ``cache`` maps the JSON text of a state's variables to its decoded value, so that a state
    many traces share is decoded once (and shared: treat decoded states as read-only).
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("states"), list):
        raise TraceFormatError(f"{default_name}: not an ITF trace: no 'states' list")
    meta = doc.get("#meta") or {}
    if not isinstance(meta, Mapping):
        raise TraceFormatError(f"{default_name}: #meta is {_brief(meta)}, not an object")
    meta = dict(meta)
    name = str(meta.pop("name", default_name))
    constants = meta.pop("constants", None) or {}
    if not isinstance(constants, Mapping):
        raise TraceFormatError(f"{name}: the constants are {_brief(constants)}, not an object")
    constants = dict(constants)
    meta.pop("format", None)
    raw_states = doc["states"]
    if not raw_states:
        raise TraceFormatError(f"{name}: the trace has no states")
    states: list[dict[str, Any]] = []
    steps: list[Step] = []
    names: tuple[str, ...] = ()
    for index, raw in enumerate(raw_states):
        where = f"{name}, state {index}"
        if not isinstance(raw, dict):
            raise TraceFormatError(f"{where}: not an object")
        if index == 0:  # the spec is the first state's: later ones are read as its states
            names = spec_variables(k for k in raw if k != "#meta" and not k.startswith("mbt::"))
        variables = {k: v for k, v in raw.items() if k in names}
        key = json.dumps(variables, sort_keys=True) if cache is not None else ""
        state = cache.get(key) if cache is not None else None
        if state is None:
            state = {k: _decode_at(f"{where}, {k}", v) for k, v in variables.items()}
            if cache is not None:
                cache[key] = state
        states.append(state)
        if index == 0:
            continue
        action = raw.get(ACTION_TAKEN)
        if not isinstance(action, str):
            raise TraceFormatError(f"{where}: no {ACTION_TAKEN}")
        steps.append(Step(action, _decode_picks(raw.get(NONDET_PICKS), where), state))
    return Trace(name=name, constants=constants, initial=states[0], steps=tuple(steps), meta=meta)


_READ: dict[tuple[str, int, int], list[Trace]] = {}  # (path, mtime, size) -> its traces


def read_traces(path: str | Path, *, stride: int = 1) -> list[Trace]:
    """Every trace in ``path``: a ``.jsonl``/``.jsonl.gz`` bundle or a single ITF JSON file.

    ``TraceFormatError``, saying why, for anything else: no such file, not a regular file, a
    gzip stream that does not inflate, text that is not UTF-8, lines that are not JSON (or
    nest too deep), objects that are not ITF traces, and a file that holds no trace at all
    (empty or blank): reading nothing must not pass for reading traces.

    A file read before and unchanged since (same modification time and size) is not
    parsed again: the corpus is large, and several checks in one process replay it.
    ``stride`` > 1 reads one trace of a bundle in ``stride`` (the first, then every
    ``stride``-th), parsing only those: a sample, not kept for the next read.
    """
    path = Path(path)
    if stride > 1:
        try:
            return _read_traces(path, stride)
        except RecursionError:
            raise TraceFormatError(f"{path}: JSON nested too deep") from None
    key = _file_key(path)
    if key not in _READ:
        try:
            traces = _read_traces(path)
        except RecursionError:  # a value past what the JSON reader or the encoder can nest
            raise TraceFormatError(f"{path}: JSON nested too deep") from None
        if not traces:
            raise TraceFormatError(f"{path}: no trace in the file (it is empty or blank)")
        _READ.clear()  # keep one file's traces at most
        _READ[key] = traces
    return list(_READ[key])


def _file_key(path: Path) -> tuple[str, int, int]:
    """What tells one file's contents from another's: its path, modification time and size.
    Errors: no such file, a directory -> ``TraceFormatError``."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise TraceFormatError(f"{path}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise TraceFormatError(f"{path}: a directory, not a trace file")
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


_GZIP_MAGIC = b"\x1f\x8b"


def _read_text(path: Path) -> str:
    """The file's text: gunzipped when it is gzip (by its name or its first bytes), UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: {exc.strerror or exc}") from None
    if path.suffix == ".gz" or data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise TraceFormatError(f"{path}: not a readable gzip file: {exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceFormatError(f"{path}: not UTF-8 text: byte 0x{data[exc.start]:02x} on "
                               f"line {line}") from None


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{where}: not JSON: {exc}") from None
    except ValueError as exc:  # an integer with more digits than Python converts
        raise TraceFormatError(f"{where}: not JSON that Python reads: {exc}") from None
    except RecursionError:
        raise TraceFormatError(f"{where}: JSON nested too deep") from None


def _read_traces(path: Path, stride: int = 1) -> list[Trace]:
    return list(_parsed(path, stride))


def _parsed(path: Path, stride: int = 1) -> Iterator[Trace]:
    """The file's traces, each line parsed when its trace is asked for."""
    text = _read_text(path)
    cache: dict[str, dict[str, Any]] = {}
    if text.lstrip().startswith("{") and ".jsonl" not in path.name:
        yield trace_from_itf(_json(text, str(path)), default_name=path.stem, cache=cache)
        return
    # Lines end at "\n" only: str.splitlines would also split a JSON string at a raw U+2028 or
    # "\r", which JSON allows in strings.
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    del text
    for number, line in lines[::stride]:
        yield trace_from_itf(_json(line, f"{path}, line {number}"),
                             default_name=f"{path.name}:{number}", cache=cache)


def iter_traces(path: str | Path) -> Iterator[Trace]:
    """The traces of ``path`` in file order, as :func:`read_traces` reads them, each parsed
    only when the reader asks for it: a reader that stops after the first few of a large bundle
    parses only those. A file :func:`read_traces` has read and kept is not parsed again.

    Errors: as :func:`read_traces`'s, each raised when the reader reaches it (a file that holds
    no trace: at the first).
    """
    path = Path(path)
    kept = _READ.get(_file_key(path))
    if kept is not None:
        yield from kept
        return
    empty = True
    try:
        for trace in _parsed(path):
            empty = False
            yield trace
    except RecursionError:
        raise TraceFormatError(f"{path}: JSON nested too deep") from None
    if empty:
        raise TraceFormatError(f"{path}: no trace in the file (it is empty or blank)")


def encode_bundle(traces: Iterable[Trace], *, compress: bool = True) -> bytes:
    """The bytes of a bundle of ``traces``, one ITF object per line, gzipped by default.

    The gzip header carries no timestamp, so the same traces always give the same bytes.
    """
    traces = list(traces)  # keeps every state object alive while the cache names it
    cache: dict[int, dict[str, Any]] = {}
    lines = [json.dumps(trace_to_itf(t, cache), separators=(",", ":"), sort_keys=True)
             for t in traces]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    return gzip.compress(data, compresslevel=9, mtime=0) if compress else data


def write_traces(path: str | Path, traces: Iterable[Trace]) -> None:
    """Write ``traces`` as a bundle to ``path``, gzipped when it ends with ``.gz``."""
    path = Path(path)
    path.write_bytes(encode_bundle(traces, compress=path.suffix == ".gz"))
