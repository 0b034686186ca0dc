"""The protocol as JSON Schema (draft 2020-12): every request and every answer of every system.

The schemas in ``refsched/conform/schema/`` (one file per system, installed with the package)
are written from the protocol's own tables, so they say what the two sides check:
:data:`refsched.conform.dag.wire.OPS` and the TaskScheduler's result types for the dependency
scheduler, each system's :class:`~refsched.conform.wire.Wire` (its ops, the served methods'
argument types, its result types) for the others, every value as
:mod:`refsched.conform.values` sends it. In each file:

- ``#/$defs/request``: any request of the system (one of ``#/$defs/requests/OP``);
- ``#/$defs/answers/OP``: the answer to a request of ``OP``, ``{"id", "ok": RESULT}`` or
  ``{"id", "error": ERROR}``;
- ``#/$defs/error``: an error object.

``python -m refsched.conform.schemas`` writes the files again; a test checks that the shipped
ones are the ones the tables give.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import sys
import types
import typing
from collections.abc import Hashable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal, Union

from refsched.conform import protocol, values
from refsched.conform.dag import wire as dag_wire
from refsched.conform.wire import SYSTEMS
from refsched.conform.wire import get as get_wire
from refsched.types import CloseReport, ParentOutcome, Snapshot, TaskState

__all__ = ["DIALECT", "load", "schema_of", "write"]

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
_ID: Final = "https://refsched.invalid/conform/schema/"

_ID_LIST: Final = {"type": "array", "items": {"type": "string"}}

# The dependency scheduler's arguments (its table, dag_wire.OPS, names them only)
_SCHEDULER_ARGS: Final[Mapping[str, Any]] = {
    "protocol": {"type": "integer"},
    "max_concurrency": {"type": "integer"},
    "task": {"type": "string"},
    "deps": _ID_LIST,
    "optional": _ID_LIST,
    "limit": {"type": ["integer", "null"]},
    "generation": {"type": "integer"},
    "cancel_pending": {"type": "boolean"},
    "actor": {"type": ["string", "null"]},
    "reason": {"type": ["string", "null"]},
}
_SCHEDULER_RESULTS: Final[Mapping[str, Any]] = {
    "new": None, "start": None, "bye": None, "submit": int, "retry": int,
    "ready": list[tuple[str, int]], "complete": TaskState, "fail": TaskState,
    "cancel": TaskState, "acknowledge_cancel": TaskState, "state": TaskState,
    "close": CloseReport, "snapshot": Snapshot, "add_deps": TaskState,
    "input_summary": dict[str, ParentOutcome],
    "provenance": None,  # _PROVENANCE below: what travels of a Provenance
}
# a provenance as ``dag_wire.provenance_to_json`` sends it (its time stays in the process)
_PROVENANCE: Final = {
    "type": ["object", "null"],
    "properties": {"root": {"type": "string"}, "generation": {"type": "integer"},
                   "end": {"enum": [TaskState.FAILED.value, TaskState.CANCELLED.value]},
                   "path": _ID_LIST, "actor": {"type": ["string", "null"]},
                   "reason": {"type": ["string", "null"]}},
    "required": ["root", "generation", "end", "path", "actor", "reason"],
    "additionalProperties": False,
}
# The ``new`` arguments of the other systems (their served classes take them untyped)
_NEW_ARGS: Final[Mapping[str, Mapping[str, Any]]] = {
    "timer": {"rebuild_floor": {"type": "integer"}, "now": {"type": "number"}},
    "pool": {"workers": _ID_LIST, "steal_cap": {"type": "integer", "minimum": 1},
             "spares": _ID_LIST, "max_spares": {"type": "integer", "minimum": 1}},
    "durable": {"max_concurrency": {"type": "integer"}, "max_attempts": {"type": "integer"},
                "aging": {"type": ["number", "null"]}},
}


def type_schema(hint: Any) -> dict[str, Any]:
    """The schema of a value of type ``hint`` as :mod:`refsched.conform.values` sends it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    if origin in (Union, types.UnionType):
        return {"anyOf": [type_schema(arm) for arm in args]}
    if origin is Literal:
        return {"enum": list(args)}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string",
              Hashable: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or (
            issubclass(hint, tuple) and hasattr(hint, "_fields"))):
        fields = values._fields(hint)
        optional = values.absent_as(hint)
        # the fields of an extension (values.extensions) may come too, never required
        extra = [(n, h) for sub in values.extensions(hint) for n, h in values._fields(sub)
                 if n not in dict(fields)]
        return {"type": "object",
                "properties": {n: type_schema(h) for n, h in [*fields, *extra]},
                "required": [n for n, _ in fields if n not in optional],
                "additionalProperties": False}
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return {"type": "array", "prefixItems": [type_schema(a) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if origin in (tuple, list, frozenset, set):
        return {"type": "array", "items": type_schema(args[0] if args else Any)}
    if origin in (dict, collections.abc.Mapping):
        return {"type": "object",
                "additionalProperties": type_schema(args[1] if args else Any)}
    raise TypeError(f"no schema for {hint!r}")


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema["type"]
    return [kind] if isinstance(kind, str) else list(kind)


def _request(op: str, arguments: Mapping[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object",
            "properties": {"id": {"type": "integer"}, "op": {"const": op}, **arguments},
            "required": ["id", "op", *required], "additionalProperties": False}


def _answer(result: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object",
            "properties": {"id": {"type": ["integer", "null"]}, "ok": result,
                           "error": {"$ref": "#/$defs/error"}},
            "required": ["id"], "additionalProperties": False,
            "oneOf": [{"required": ["ok"]}, {"required": ["error"]}]}


_ERROR: Final = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},  # a refsched.errors class name, Unsupported, BadRequest...
        "message": {"type": "string"},
        "cycle": _ID_LIST,
        "cycles": {"type": "array", "items": _ID_LIST},
        "missing": {"type": "array", "items": {"type": "array", "prefixItems": [
            {"type": "string"}, {"type": "string"}], "minItems": 2, "maxItems": 2}},
        "generation": {"type": "integer"},
        "current": {"type": "integer"},
        "attempt": {"type": "integer"},
        "current_attempt": {"type": "integer"},
        "invariant": {"type": "string"},
    },
    "required": ["type", "message"],
    # what identifies a stale call travels with it: the oracle compares it
    "allOf": [{"if": {"properties": {"type": {"const": name}}, "required": ["type"]},
               "then": {"required": list(fields)}}
              for name, fields in (("StaleGenerationError", ("generation", "current")),
                                   ("StaleLeaseError", ("generation", "current", "attempt",
                                                        "current_attempt")))],
}


def _hello(system: str) -> tuple[dict[str, Any], dict[str, Any]]:
    request = _request("hello", {"protocol": {"type": "integer"}}, ("protocol",))
    answer = {"type": "object", "properties": {
        "name": {"type": "string"}, "protocol": {"const": protocol.PROTOCOL_VERSION},
        "system": {"enum": list(SYSTEMS)}, "profile": {"type": "object"}},
        "required": ["name", "protocol"]}
    return request, answer


def _served_arguments(system: str, op: str) -> dict[str, Any]:
    wire = get_wire(system)
    if op == "new":
        return dict(_NEW_ARGS[system])
    hints = typing.get_type_hints(getattr(wire.serve, op))
    arguments = {}
    for name in wire.ops[op].names:
        hint = hints.get(name, Any)
        if system == "durable" and name == "lease" and hint is Any:
            from refsched.durable.scheduler import Lease  # a lease goes back as it came
            hint = Lease
        arguments[name] = type_schema(hint)
    return arguments


def _scheduler_result(op: str) -> dict[str, Any]:
    """The schema of a TaskScheduler op's result as ``dag_wire.result_to_json`` sends it: a
    version's optional deps only when it has some; of a parent's outcome, what identifies it
    (a result or an error given to a callback does not travel)."""
    if op == "provenance":
        return dict(_PROVENANCE)
    schema = type_schema(_SCHEDULER_RESULTS[op])
    if op == "snapshot":
        schema["properties"]["tasks"]["additionalProperties"]["properties"]["optional"] = _ID_LIST
    elif op == "input_summary":
        outcome = schema["additionalProperties"]
        kept = ("generation", "state", "blocked_by")
        outcome["properties"] = {name: outcome["properties"][name] for name in kept}
        outcome["required"] = list(kept)
    return schema


def schema_of(system: str) -> dict[str, Any]:
    """The schema of every request and answer of ``system``."""
    hello_request, hello_answer = _hello(system)
    requests: dict[str, Any] = {"hello": hello_request}
    answers: dict[str, Any] = {"hello": _answer(hello_answer)}
    if system == "scheduler":
        for op, (required, optional) in dag_wire.OPS.items():
            if op == "hello":
                continue
            arguments = {a: _SCHEDULER_ARGS[a] for a in (*required, *optional)}
            for name, default in optional.items():
                if default is None:  # left out or null: the same (cancel's generation)
                    arguments[name] = {"type": sorted({*_types(arguments[name]), "null"})}
            requests[op] = _request(op, arguments, required)
            answers[op] = _answer(_scheduler_result(op))
    else:
        wire = get_wire(system)
        requests["new"] = _request("new", _served_arguments(system, "new"), wire.new.args)
        answers["new"] = _answer({"type": "null"})
        for op, spec in wire.ops.items():
            requests[op] = _request(op, _served_arguments(system, op), spec.args)
            answers[op] = _answer(type_schema(spec.result))
        requests["bye"] = _request("bye", {}, ())
        answers["bye"] = _answer({"type": "null"})
    return {
        "$schema": DIALECT,
        "$id": f"{_ID}{system}.json",
        "title": f"refsched conformance protocol {protocol.PROTOCOL_VERSION}, system {system}",
        "description": "Requests and answers, one JSON object per line (docs/conformance.md). "
                       "A request validates against #/$defs/request; the answer to a request "
                       "of op OP against #/$defs/answers/OP.",
        "$ref": "#/$defs/request",
        "$defs": {
            "request": {"oneOf": [{"$ref": f"#/$defs/requests/{op}"} for op in requests]},
            "requests": requests,
            "answers": answers,
            "error": _ERROR,
        },
    }


def load(system: str) -> dict[str, Any]:
    """The shipped schema of ``system``."""
    text = resources.files("refsched.conform").joinpath("schema", f"{system}.json").read_text(
        encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def write(directory: Path) -> list[Path]:
    """Write every system's schema into ``directory``; the files written."""
    written = []
    for system in SYSTEMS:
        path = directory / f"{system}.json"
        path.write_text(json.dumps(schema_of(system), indent=1) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(__file__).resolve().parent / "schema"):
        print(f"wrote {path}", file=sys.stderr)
