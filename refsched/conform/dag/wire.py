"""The dependency scheduler's operations on the wire (the default system, ``scheduler``).

The ops are the ``TaskScheduler`` API (``docs/semantics.md``), the actions of
``spec/Scheduler.tla`` under their API names. Both sides are built from this module: the server
checks each request's arguments against :data:`OPS` (:func:`decode_request`) and sends each
result as JSON (:func:`result_to_json`); the oracle reads each answer back as the refsched value
it stands for (the ``*_from_json`` decoders).

==========================================  ==============================  ======================
request                                     call                            ``ok`` result
==========================================  ==============================  ======================
``new {max_concurrency}``                   ``TaskScheduler(                ``null``
                                            max_concurrency)``
``submit {task, deps: [],                   ``submit(task, deps,            the generation
optional: []}``                             optional=optional)``
``start {}``                                ``start()``                     ``null``
``ready {limit: null}``                     ``ready(limit)``                ``[[task,
                                                                            generation], ...]``
                                                                            in claim order
``complete`` / ``fail {task,                ``complete`` / ``fail``         a state
generation}``
``cancel {task, generation: null}``         ``cancel(task, generation)``    a state
``acknowledge_cancel {task, generation}``   ``acknowledge_cancel(task,      a state
                                            generation)``
``retry {task}``                            ``retry(task)``                 the new generation
``close {cancel_pending: true}``            ``close(cancel_pending)``       ``{succeeded, failed,
                                                                            blocked, cancelled,
                                                                            running, pending,
                                                                            ready}``
``add_deps {task, deps: [],                 ``add_deps(task, deps,          a state
optional: []}``                             optional=optional)``
``input_summary {task}``                    ``input_summary(task)``         ``{parent: {generation,
                                                                            state, blocked_by}}``
``provenance {task}``                       ``provenance(task)``            ``{root, generation,
                                                                            end, path, actor,
                                                                            reason}`` or ``null``
``snapshot {}``                             ``snapshot()``                  the spec's variables
``state {task}``                            ``state(task)``                 a state
==========================================  ==============================  ======================

``hello`` and ``bye`` are the protocol's own (:mod:`refsched.conform.protocol`); the table
names them too, so that their arguments are checked as any other op's. ``optional``,
``add_deps`` and ``input_summary`` are the edge kinds': an implementation that does not
declare ``optional_edges`` or ``add_deps`` in its hello is never sent them. Likewise
``provenance``, and the ``actor`` and ``reason`` that ``fail``, ``cancel`` and
``acknowledge_cancel`` may carry (text, for the provenance of what the call ends), are sent
only to an implementation that declares ``provenance``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import Any, Final

from refsched.conform.protocol import (
    Request,
    WireError,
    cut_repr,
    cut_text,
    decode_envelope,
    show_cut,
)
from refsched.types import (
    Claim,
    CloseReport,
    OptionalDepsView,
    ParentOutcome,
    Provenance,
    Snapshot,
    TaskState,
    VersionView,
)
from refsched.values import is_int as _is_int

__all__ = [
    "OPS",
    "claims_from_json",
    "close_report_from_json",
    "decode_request",
    "generation_from_json",
    "input_summary_from_json",
    "input_summary_to_json",
    "null_from_json",
    "provenance_from_json",
    "provenance_to_json",
    "result_to_json",
    "snapshot_from_json",
    "snapshot_to_json",
    "state_from_json",
]

# op -> (arguments it must carry, arguments it may leave out and their value when left out)
OPS: Final[Mapping[str, tuple[tuple[str, ...], Mapping[str, Any]]]] = {
    "hello": (("protocol",), {}),
    "new": (("max_concurrency",), {}),
    "submit": (("task",), {"deps": [], "optional": []}),
    "start": ((), {}),
    "ready": ((), {"limit": None}),
    "complete": (("task", "generation"), {}),
    "fail": (("task", "generation"), {"actor": None, "reason": None}),
    "cancel": (("task",), {"generation": None, "actor": None, "reason": None}),
    "acknowledge_cancel": (("task", "generation"), {"actor": None, "reason": None}),
    "retry": (("task",), {}),
    "close": ((), {"cancel_pending": True}),
    "add_deps": (("task",), {"deps": [], "optional": []}),
    "input_summary": (("task",), {}),
    "provenance": (("task",), {}),
    "snapshot": ((), {}),
    "state": (("task",), {}),
    "bye": ((), {}),
}

_STATES: Final = {s.value: s for s in TaskState}
_CLOSE_FIELDS: Final = tuple(f.name for f in dataclasses.fields(CloseReport))
_VIEW_FIELDS: Final = tuple(f.name for f in dataclasses.fields(VersionView))
_SNAPSHOT_FIELDS: Final = ("started", "closed", "next_seq", "tasks")
# a version's optional deps travel under this key, left out when it has none (as the model's
# states hold them only then: a plain VersionView)
_OPTIONAL_FIELD: Final = "optional"
_OUTCOME_FIELDS: Final = ("generation", "state", "blocked_by")
_ID_LISTS: Final = ("deps", "optional")
# what the call that ends a version says of it, which its provenance carries: text or null
_NOTES: Final = ("actor", "reason")
_PROVENANCE_FIELDS: Final = ("root", "generation", "end", "path", "actor", "reason")
_ENDS: Final = (TaskState.FAILED.value, TaskState.CANCELLED.value)


# ------------------------------------------------------------------ requests

def decode_request(message: Mapping[str, Any]) -> Request:
    """Check a request object and fill in the arguments it may leave out.

    An op outside :data:`OPS` is returned with its arguments unchecked (the server answers it
    ``Unsupported``). Errors: no int ``id``, no str ``op``, an argument missing or unknown, a
    ``task`` that is not a string, ``deps`` that are not a list of strings -> ``WireError``.
    """
    request = decode_envelope(message)
    request_id, op, args = request.id, request.op, dict(request.args)
    if op not in OPS:
        return request
    required, optional = OPS[op]
    missing = [a for a in required if a not in args]
    unknown = sorted(set(args) - set(required) - set(optional))
    if missing or unknown:
        raise WireError(
            f"{op}: " + cut_text("; ".join(
                ([f"missing {', '.join(missing)}"] if missing else [])
                + ([f"unknown {', '.join(unknown)}"] if unknown else []))),
            request_id,
        )
    for name, default in optional.items():
        args.setdefault(name, default)
    if "task" in args and not isinstance(args["task"], str):
        raise WireError(f"{op}: task ids are strings, not {show_cut(args['task'])}", request_id)
    for name in _ID_LISTS:
        if name in args and not (isinstance(args[name], list)
                                 and all(isinstance(d, str) for d in args[name])):
            raise WireError(f"{op}: {name} must be a list of strings, not "
                            f"{show_cut(args[name])}", request_id)
    for name in _NOTES:
        if args.get(name) is not None and not isinstance(args[name], str):
            raise WireError(f"{op}: {name} must be a string or null, not "
                            f"{show_cut(args[name])}", request_id)
    return Request(request_id, op, args)


# ------------------------------------------------------------------ results, serving side

def result_to_json(op: str, value: Any) -> Any:
    """The JSON form of what the scheduler returned for ``op``.

    Errors: a value that is not what ``op`` returns (a claim that is not a pair, a state that
    is not a ``TaskState``) -> the ``TypeError`` or ``ValueError`` met while converting it.
    """
    if op in ("new", "start", "bye"):
        return None
    if op == "ready":
        return [[claim[0], claim[1]] for claim in value]
    if op in ("complete", "fail", "cancel", "acknowledge_cancel", "state", "add_deps"):
        return TaskState(value).value
    if op == "input_summary":
        return input_summary_to_json(value)
    if op == "provenance":
        return provenance_to_json(value)
    if op == "close":
        return {name: list(getattr(value, name)) for name in _CLOSE_FIELDS}
    if op == "snapshot":
        return snapshot_to_json(value)
    return value  # submit and retry: the generation


def snapshot_to_json(snapshot: Snapshot) -> dict[str, Any]:
    """A snapshot as the ``snapshot`` op answers it (each version's deps sorted; its optional
    deps, sorted, only when it has some)."""
    return {
        "started": snapshot.started,
        "closed": snapshot.closed,
        "next_seq": snapshot.next_seq,
        "tasks": {task_id: _view_to_json(v) for task_id, v in snapshot.tasks.items()},
    }


def _view_to_json(v: VersionView) -> dict[str, Any]:
    view = {
        "generation": v.generation,
        "state": v.state.value,
        "deps": sorted(v.deps, key=str),  # str ids on the wire: their own order
        "remaining_deps": v.remaining_deps,
        "blocked_by": v.blocked_by,
        "cancel_requested": v.cancel_requested,
        "claims": v.claims,
        "seq": v.seq,
    }
    if isinstance(v, OptionalDepsView) and v.optional:
        view[_OPTIONAL_FIELD] = sorted(v.optional, key=str)
    return view


def input_summary_to_json(summary: Mapping[Hashable, ParentOutcome]) -> dict[str, Any]:
    """An input summary as ``input_summary`` answers it: per optional dependency that ended,
    its generation, state and ``blocked_by`` (a result or an error given to a callback does
    not travel: the callbacks carry none)."""
    return {str(parent): {"generation": outcome.generation, "state": outcome.state.value,
                          "blocked_by": outcome.blocked_by}
            for parent, outcome in sorted(summary.items(), key=lambda item: repr(item[0]))}


def provenance_to_json(record: Provenance | None) -> dict[str, Any] | None:
    """A provenance as ``provenance`` answers it: its root, the root's generation, how the
    root ended, the path from the root and what the call that ended it said; null for a
    version that has none. Its time stays here: the protocol gives an implementation no
    clock, so no two sides' times are comparable."""
    if record is None:
        return None
    return {"root": record.root, "generation": record.generation, "end": record.end.value,
            "path": list(record.path), "actor": record.actor, "reason": record.reason}


# ------------------------------------------------------------------ results, driving side

def null_from_json(op: str, value: Any) -> None:
    """Check the answer of an op that answers ``null``."""
    if value is not None:
        raise WireError(f"{op} answers null, not {cut_repr(repr(value))}")


def generation_from_json(op: str, value: Any) -> int:
    """A generation (``submit``, ``retry``): an integer."""
    if not _is_int(value):
        raise WireError(f"{op} answers a generation (an integer), not {cut_repr(repr(value))}")
    assert isinstance(value, int)
    return value


def state_from_json(op: str, value: Any) -> TaskState:
    """A state name: one of pending, ready, running, succeeded, failed, blocked, cancelled."""
    if not isinstance(value, str) or value not in _STATES:
        raise WireError(f"{op} answers a state name ({', '.join(_STATES)}), "
                        f"not {cut_repr(repr(value))}")
    return _STATES[value]


def claims_from_json(op: str, value: Any) -> list[Claim]:
    """``ready``'s list of ``[task, generation]`` pairs as claims without a function."""
    if not isinstance(value, list):
        raise WireError(f"{op} answers a list of [task, generation], not {cut_repr(repr(value))}")
    claims = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and _is_int(item[1])):
            raise WireError(f"{op}: a claim is [task, generation], not {cut_repr(repr(item))}")
        claims.append(Claim(item[0], item[1], None))
    return claims


def _ids(op: str, where: str, value: Any) -> list[Hashable]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise WireError(f"{op}: {where} must be a list of task ids, not {cut_repr(repr(value))}")
    return list(value)


def _exact_keys(op: str, where: str, value: Any, keys: tuple[str, ...],
                may: tuple[str, ...] = ()) -> dict[str, Any]:
    """``value``, an object with every key of ``keys``, those of ``may`` or not, and no other."""
    if not isinstance(value, dict):
        raise WireError(f"{op}: {where} must be an object, not {cut_repr(repr(value))}")
    if not set(keys) <= set(value) <= {*keys, *may}:
        missing = [k for k in keys if k not in value]
        unknown = sorted(set(value) - {*keys, *may})
        raise WireError(f"{op}: {where} must have exactly the keys {', '.join(keys)}"
                        + (f"; missing {', '.join(missing)}" if missing else "")
                        + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    return value


def close_report_from_json(op: str, value: Any) -> CloseReport:
    """``close``'s object: one list of task ids per state, every state present."""
    report = _exact_keys(op, "the report", value, _CLOSE_FIELDS)
    return CloseReport(**{name: tuple(_ids(op, name, report[name])) for name in _CLOSE_FIELDS})


def snapshot_from_json(op: str, value: Any) -> Snapshot:
    """``snapshot``'s object as the :class:`~refsched.types.Snapshot` it stands for."""
    snap = _exact_keys(op, "the snapshot", value, _SNAPSHOT_FIELDS)
    for name in ("started", "closed"):
        if not isinstance(snap[name], bool):
            raise WireError(f"{op}: {name} must be true or false, not {snap[name]!r}")
    if not _is_int(snap["next_seq"]):
        raise WireError(f"{op}: next_seq must be an integer, not {snap['next_seq']!r}")
    if not isinstance(snap["tasks"], dict):
        raise WireError(f"{op}: tasks must be an object, not {cut_repr(repr(snap['tasks']))}")
    views: dict[Hashable, VersionView] = {}
    for task_id, raw in snap["tasks"].items():
        where = f"task {task_id!r}"
        v = _exact_keys(op, where, raw, _VIEW_FIELDS, (_OPTIONAL_FIELD,))
        for name in ("generation", "remaining_deps", "claims", "seq"):
            if not _is_int(v[name]):
                raise WireError(f"{op}: {where}: {name} must be an integer, not {v[name]!r}")
        if not isinstance(v["cancel_requested"], bool):
            raise WireError(f"{op}: {where}: cancel_requested must be true or false, "
                            f"not {v['cancel_requested']!r}")
        if v["blocked_by"] is not None and not isinstance(v["blocked_by"], str):
            raise WireError(f"{op}: {where}: blocked_by must be a task id or null, "
                            f"not {v['blocked_by']!r}")
        deps = _ids(op, f"{where}: deps", v["deps"])
        if len(set(deps)) != len(deps):
            raise WireError(f"{op}: {where}: deps names a task twice: {deps!r}")
        optional = _ids(op, f"{where}: optional", v.get(_OPTIONAL_FIELD, []))
        if len(set(optional)) != len(optional) or not set(optional) <= set(deps):
            raise WireError(f"{op}: {where}: optional must name deps, each once: "
                            f"{cut_repr(repr(optional))}")
        fields = dict(
            generation=v["generation"],
            state=state_from_json(f"{op}: {where}: state", v["state"]),
            deps=frozenset(deps),
            remaining_deps=v["remaining_deps"],
            blocked_by=v["blocked_by"],
            cancel_requested=v["cancel_requested"],
            claims=v["claims"],
            seq=v["seq"],
        )
        # an empty list is the key left out: a version without optional edges
        views[task_id] = (OptionalDepsView(**fields, optional=frozenset(optional)) if optional
                          else VersionView(**fields))
    return Snapshot(snap["started"], snap["closed"], snap["next_seq"], views)


def input_summary_from_json(op: str, value: Any) -> dict[Hashable, ParentOutcome]:
    """``input_summary``'s object as the ``ParentOutcome`` of each optional dependency that
    ended (without a result or an error: none travels)."""
    if not isinstance(value, dict):
        raise WireError(f"{op} answers an object of parent outcomes, not "
                        f"{cut_repr(repr(value))}")
    summary: dict[Hashable, ParentOutcome] = {}
    for parent, raw in value.items():
        where = f"parent {parent!r}"
        outcome = _exact_keys(op, where, raw, _OUTCOME_FIELDS)
        if not _is_int(outcome["generation"]):
            raise WireError(f"{op}: {where}: generation must be an integer, not "
                            f"{outcome['generation']!r}")
        if outcome["blocked_by"] is not None and not isinstance(outcome["blocked_by"], str):
            raise WireError(f"{op}: {where}: blocked_by must be a task id or null, "
                            f"not {outcome['blocked_by']!r}")
        summary[parent] = ParentOutcome(
            parent, outcome["generation"],
            state_from_json(f"{op}: {where}: state", outcome["state"]),
            blocked_by=outcome["blocked_by"])
    return summary


def provenance_from_json(op: str, value: Any) -> Provenance | None:
    """``provenance``'s object (or null) as the :class:`~refsched.types.Provenance` it stands
    for, with no time (none travels)."""
    if value is None:
        return None
    record = _exact_keys(op, "the provenance", value, _PROVENANCE_FIELDS)
    if not isinstance(record["root"], str):
        raise WireError(f"{op}: root must be a task id, not {cut_repr(repr(record['root']))}")
    if not _is_int(record["generation"]):
        raise WireError(f"{op}: generation must be an integer, not "
                        f"{cut_repr(repr(record['generation']))}")
    if record["end"] not in _ENDS:
        raise WireError(f"{op}: end must be one of {', '.join(_ENDS)}, not "
                        f"{cut_repr(repr(record['end']))}")
    path = _ids(op, "path", record["path"])
    for name in _NOTES:
        if record[name] is not None and not isinstance(record[name], str):
            raise WireError(f"{op}: {name} must be a string or null, not "
                            f"{cut_repr(repr(record[name]))}")
    return Provenance(record["root"], record["generation"], _STATES[record["end"]],
                      tuple(path), record["actor"], record["reason"])
