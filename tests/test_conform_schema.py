"""The protocol's JSON Schemas (refsched/conform/schema/): what the oracle sends and refsched's
own server answers in a corpus replay validates; malformed answers and requests do not.
"""

from __future__ import annotations

import copy
import functools
import json
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

jsonschema = pytest.importorskip("jsonschema")

from refsched.conform import schemas, vectors  # noqa: E402
from refsched.conform.protocol import WireError, error_from_json  # noqa: E402
from refsched.conform.wire import SYSTEMS  # noqa: E402

TRACES = 20


@functools.cache
def _validator(system: str, where: str) -> Any:
    """A validator of the shipped schema of ``system`` at ``where`` (a $defs path)."""
    schema = {**schemas.load(system), "$ref": f"#/$defs/{where}"}
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def sessions() -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Per system, the (request, answer) pairs of a replay of its first corpus traces."""
    return {system: [(json.loads(line), answer) for line, answer in vectors.record_session(
        system, vectors.corpus_traces(system, TRACES))] for system in SYSTEMS}


def test_shipped_schemas_are_the_ones_the_protocol_tables_give(tmp_path: Path) -> None:
    for path in schemas.write(tmp_path):
        shipped = resources.files("refsched.conform").joinpath("schema", path.name)
        assert json.loads(shipped.read_text(encoding="utf-8")) == json.loads(path.read_text()), (
            f"{path.name} is stale: python -m refsched.conform.schemas")


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_schema_is_draft_2020_12(system: str) -> None:
    schema = schemas.load(system)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_request_and_answer_of_a_corpus_replay_validates(
        sessions: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]], system: str) -> None:
    requests = _validator(system, "request")
    ops = set()
    for request, answer in sessions[system]:
        requests.validate(request)
        _validator(system, f"answers/{request['op']}").validate(answer)
        ops.add(request["op"])
    assert {"hello", "new", "snapshot", "bye"} <= ops  # the session is whole


@pytest.mark.parametrize("system", SYSTEMS)
def test_generated_calls_outside_the_schema_are_refused_and_every_answer_validates(
        system: str) -> None:
    """The generated phase's calls: arguments the corpus never sends (a cancel's generation, a
    close that keeps pending tasks...) validate; the ones the oracle sends malformed on purpose
    (a priority ``true``) do not, and each of those was answered with an error."""
    requests = _validator(system, "request")
    pairs = vectors.record_session(system, [], examples=10)
    assert len(pairs) > 10
    outside = []
    for line, answer in pairs:
        request = json.loads(line)
        if not requests.is_valid(request):
            outside.append(request)
            assert "error" in answer, (request, answer)
        _validator(system, f"answers/{request['op']}").validate(answer)
    assert len(outside) < len(pairs) / 2, outside[:5]


def _first(pairs: list[tuple[dict[str, Any], dict[str, Any]]], op: str,
           ok: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first pair of ``op`` answered ok (a snapshot: one that holds a task)."""
    return copy.deepcopy(next(p for p in pairs if p[0]["op"] == op and ("ok" in p[1]) == ok
                              and (op != "snapshot" or p[1]["ok"].get("tasks", True))))


def _snapshot_task(answer: dict[str, Any]) -> dict[str, Any]:
    return next(iter(answer["ok"]["tasks"].values()))


# (system, op, how to break its answer): each a way an implementation might answer wrongly
MALFORMED_ANSWERS: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    ("scheduler", "submit", lambda a: a.update(ok="1")),
    ("scheduler", "submit", lambda a: a.update(error={"type": "KeyError"}) or a.pop("ok")),
    ("scheduler", "submit", lambda a: a.update(extra=True)),
    ("scheduler", "submit", lambda a: a.pop("id")),
    ("scheduler", "submit", lambda a: a.update(error={"type": "KeyError", "message": "x"})),
    ("scheduler", "ready", lambda a: a.update(ok=[["a"]])),
    ("scheduler", "complete", lambda a: a.update(ok="done")),
    ("scheduler", "snapshot", lambda a: a["ok"].pop("next_seq")),
    ("scheduler", "snapshot", lambda a: _snapshot_task(a).update(deps="a")),
    ("scheduler", "close", lambda a: a["ok"].update(lost=[])),
    ("timer", "snapshot", lambda a: a["ok"].update(heap={})),
    ("timer", "schedule", lambda a: a.update(ok=1.5)),
    ("pool", "snapshot", lambda a: a["ok"].update(submitted="t1")),
    ("pool", "stats", lambda a: a.update(ok=None)),
    ("durable", "claim", lambda a: a.update(ok={"task_id": "a"})),
    ("durable", "leases", lambda a: a.update(ok=[])),
    ("durable", "now", lambda a: a.update(ok="0")),
    ("durable", "hello", lambda a: a["ok"].update(protocol=2)),
]


@pytest.mark.parametrize("system, op, spoil", MALFORMED_ANSWERS)
def test_a_malformed_answer_does_not_validate(
        sessions: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]], system: str, op: str,
        spoil: Callable[[dict[str, Any]], None]) -> None:
    _, answer = _first(sessions[system], op)
    validator = _validator(system, f"answers/{op}")
    validator.validate(answer)  # as answered, it is valid: the change is what breaks it
    spoil(answer)
    assert not validator.is_valid(answer)


@pytest.mark.parametrize("error, dropped", [
    ({"type": "StaleGenerationError", "message": "m", "generation": 1, "current": 2}, "current"),
    ({"type": "StaleLeaseError", "message": "m", "generation": 1, "current": 1, "attempt": 1,
      "current_attempt": 2}, "current_attempt"),
])
def test_a_stale_error_without_what_identifies_it_does_not_validate(
        error: dict[str, Any], dropped: str) -> None:
    validator = _validator("durable", "answers/complete")
    answer = {"id": 1, "error": error}
    validator.validate(answer)
    del error[dropped]
    assert not validator.is_valid(answer)
    with pytest.raises(WireError, match=dropped):  # and the oracle refuses it too
        error_from_json(error)


@pytest.mark.parametrize("system, op, spoil", [
    ("scheduler", "submit", lambda r: r.update(deps="a")),
    ("scheduler", "submit", lambda r: r.pop("task")),
    ("scheduler", "complete", lambda r: r.update(generation="1")),
    ("scheduler", "hello", lambda r: r.update(op="helo")),
    ("timer", "schedule", lambda r: r.update(task=1)),
    ("pool", "steal", lambda r: r.update(thief=None)),
    ("durable", "complete", lambda r: r["lease"].pop("attempt")),
])
def test_a_malformed_request_does_not_validate(
        sessions: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]], system: str, op: str,
        spoil: Callable[[dict[str, Any]], None]) -> None:
    request, _ = _first(sessions[system], op)
    validator = _validator(system, "request")
    validator.validate(request)
    spoil(request)
    assert not validator.is_valid(request)


@pytest.fixture(scope="module")
def clause_session(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict[str, Any],
                                                                           dict[str, Any]]]:
    """The (request, answer) pairs of the durable clauses phase, through refsched's own
    server: the only phase that asks the schedule requests."""
    from refsched.conform import client, oracle

    record = tmp_path_factory.mktemp("clauses") / "record.jsonl"
    with client.ProtocolImplementation(
            [sys.executable, "-m", "refsched.conform.tap", str(record), "--system", "durable"],
            system="durable") as impl:
        report = oracle.check(impl, corpus=False, examples=0)
    assert report.verdict == "conforms", report.format()
    lines = record.read_text(encoding="utf-8").splitlines()
    return [(json.loads(lines[i]), json.loads(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]


def test_every_schedule_request_and_answer_of_the_clauses_phase_validates(
        clause_session: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    requests = _validator("durable", "request")
    ops = set()
    for request, answer in clause_session:
        if requests.is_valid(request):
            _validator("durable", f"answers/{request['op']}").validate(answer)
            ops.add(request["op"])
        else:  # a bad argument the schema cannot carry is answered with an error
            assert "error" in answer, (request, answer)
    assert {"schedule", "unschedule", "pause", "resume", "schedules"} <= ops


@pytest.mark.parametrize("spoil", [
    lambda view: view["slots"][0].update(decision="later"),
    lambda view: view["slots"][0].pop("task"),
    lambda view: view.update(paused="no"),
])
def test_a_malformed_schedules_answer_does_not_validate(
        clause_session: list[tuple[dict[str, Any], dict[str, Any]]],
        spoil: Callable[[dict[str, Any]], None]) -> None:
    answer = copy.deepcopy(next(a for r, a in clause_session
                                if r["op"] == "schedules" and a.get("ok")))
    validator = _validator("durable", "answers/schedules")
    validator.validate(answer)
    spoil(next(iter(answer["ok"].values())))
    assert not validator.is_valid(answer)
