"""The conformance protocol: refsched.serve and the graphlib adapter over the wire, the
protocol's encoding, and the harness verdicts for implementations that misbehave.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler, errors
from refsched.conform import protocol
from refsched.conform.client import (
    ForeignError,
    HarnessError,
    ImplementationCrashed,
    ImplementationTimedOut,
    InProcessImplementation,
    ProtocolImplementation,
    ProtocolViolation,
    Unsupported,
    load_factory,
)
from refsched.conform.dag import wire as dag_wire
from refsched.conform.dag.graphlib_adapter import GraphlibScheduler
from refsched.profile import FULL, STATIC, Profile
from refsched.serve import serve
from refsched.types import CloseReport, Provenance, Snapshot, TaskState

ROOT = Path(__file__).resolve().parent.parent
IMPLS = Path(__file__).resolve().parent / "conform_impls"
SERVE = [sys.executable, "-m", "refsched.serve"]
GRAPHLIB = [sys.executable, "-m", "refsched.conform.dag.graphlib_adapter"]
SHORT = 2.0  # the timeout given to misbehaving implementations


def script(name: str, *args: str) -> list[str]:
    return [sys.executable, str(IMPLS / name), *args]


def alive(pid: int) -> bool:
    """True while ``pid`` is a process that has not exited (a zombie has exited)."""
    if Path("/proc/self/stat").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_gone(*pids: int) -> None:
    """Every pid has exited; an orphan may take its new parent a moment to notice."""
    deadline = time.monotonic() + 5.0
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in pids if alive(p)], "processes left behind"


def outcome(call: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What a call did: its value, or the type, message and identifying fields of its error."""
    try:
        return ("ok", call(*args))
    except Exception as e:
        extra: tuple[Any, ...] = ()
        if isinstance(e, errors.CycleError):
            extra = (e.cycle, e.cycles)
        elif isinstance(e, errors.UnknownDependencyError):
            extra = (e.missing,)
        return ("raised", type(e), str(e), *extra)


@pytest.fixture(scope="module")
def served() -> Iterator[ProtocolImplementation]:
    with ProtocolImplementation(SERVE, cwd=ROOT) as impl:
        yield impl


# ------------------------------------------------------------------ refsched.serve round trips

# Every op, every error type the wire can carry, in one scheduler's life (max_concurrency 2).
SCRIPT: list[tuple[str, tuple[Any, ...]]] = [
    ("submit", ("a",)),
    ("submit", ("b", ["a"])),
    ("submit", ("c", ["b", "zz"])),
    ("start", ()),  # UnknownDependencyError
    ("submit", ("c", ["b", "d"])),
    ("submit", ("d", ["c"])),
    ("start", ()),  # CycleError c -> d -> c
    ("submit", ("d", [])),  # generation 2 breaks the cycle
    ("submit", ("e", ["e"])),  # InvalidArgumentError: self-dependency
    ("submit", ("e", ["a", "a"])),  # InvalidArgumentError: the same dependency twice
    ("ready", ()),  # InvalidTransitionError: not started
    ("state", ("c",)),
    ("start", ()),
    ("start", ()),  # InvalidTransitionError: already started
    ("ready", (-1,)),  # InvalidArgumentError
    ("ready", (1,)),
    ("submit", ("a",)),  # TaskRunningError
    ("complete", ("a", 2)),  # StaleGenerationError
    ("complete", ("a", "1")),  # InvalidArgumentError: a generation that is not an int
    ("complete", ("b", 1)),  # InvalidTransitionError: pending
    ("state", ("nope",)),  # UnknownTaskError
    ("complete", ("nope", 1)),  # UnknownTaskError
    ("complete", ("a", 1)),
    ("complete", ("a", 1)),  # repeated: the state again
    ("ready", (None,)),
    ("cancel", ("b",)),  # running: a stop request
    ("cancel", ("b", 1)),
    ("acknowledge_cancel", ("b", 1)),  # c becomes blocked
    ("state", ("c",)),
    ("fail", ("d", 2)),
    ("submit", ("f", ["d"])),  # blocked at once by the failed d
    ("submit", ("k", ["nope"])),  # UnknownDependencyError after start
    ("retry", ("b",)),  # b and the c it blocked
    ("retry", ("a",)),  # InvalidTransitionError: succeeded
    ("ready", ()),
    ("fail", ("b", 2)),
    ("cancel", ("f", None)),  # terminal: the state, no step
    ("submit", ("g",)),
    ("submit", ("h", ["g"])),
    ("submit", ("g", ["h"])),  # CycleError after start
    ("close", (False,)),
    ("submit", ("i",)),  # SchedulerClosedError
    ("retry", ("b",)),  # SchedulerClosedError
    ("ready", ()),  # closed: []
    ("close", (True,)),  # already closed: the report again
]


def test_every_op_through_serve_answers_as_the_scheduler_does(
        served: ProtocolImplementation) -> None:
    direct = TaskScheduler(2)
    wire = served.new(2)
    seen_errors = set()
    for op, args in SCRIPT:
        expected = outcome(getattr(direct, op), *args)
        got = outcome(getattr(wire, op), *args)
        assert got == expected, f"{op}{args}"
        if expected[0] == "raised":
            seen_errors.add(expected[1].__name__)
        assert wire.snapshot() == direct.snapshot(), f"after {op}{args}"
    assert seen_errors == {
        "UnknownDependencyError", "CycleError", "InvalidArgumentError", "InvalidTransitionError",
        "TaskRunningError", "StaleGenerationError", "UnknownTaskError", "SchedulerClosedError",
    }


def test_cycle_error_keeps_its_cycle_and_every_component(served: ProtocolImplementation) -> None:
    direct, wire = TaskScheduler(1), served.new(1)
    for s in (direct, wire):
        for task, deps in [("a", ["c"]), ("b", ["a"]), ("c", ["b"]), ("x", ["y"]), ("y", ["x"])]:
            s.submit(task, deps)
    expected, got = outcome(direct.start), outcome(wire.start)
    assert got == expected
    assert got[1] is errors.CycleError and len(got[4]) == 2
    cycle = got[3]
    assert cycle[0] == cycle[-1]


def test_results_have_the_scheduler_types(served: ProtocolImplementation) -> None:
    s = served.new(1)
    assert s.submit("a") == 1
    s.start()
    claims = s.ready()
    assert claims == [("a", 1, None)] and claims[0].task_id == "a"
    assert s.complete("a", 1) is TaskState.SUCCEEDED
    report = s.close()
    assert report == CloseReport(succeeded=("a",))
    assert isinstance(s.snapshot(), Snapshot)
    s.check_invariants()


def test_new_with_a_bad_max_concurrency_raises_the_scheduler_error(
        served: ProtocolImplementation) -> None:
    with pytest.raises(errors.InvalidArgumentError):
        served.new(-1)
    assert served.new(1).submit("a") == 1  # the session goes on


def test_a_refused_new_leaves_the_current_instance_current(
        served: ProtocolImplementation) -> None:
    s = served.new(2)
    s.submit("a")
    for bad in (-1, True, 1.5):
        with pytest.raises(errors.InvalidArgumentError):
            served.new(bad)
    assert s.state("a") is TaskState.READY  # the same instance, still answering
    s.start()
    assert [c.task_id for c in s.ready()] == ["a"]


def test_a_refused_new_of_another_system_leaves_the_current_instance_current() -> None:
    argv = [sys.executable, "-m", "refsched.serve", "--system", "timer"]
    with ProtocolImplementation(argv, cwd=ROOT, system="timer") as impl:
        impl.new_instance(rebuild_floor=1)
        assert impl.request("schedule", task="a", run_at=5) == 1
        with pytest.raises(errors.InvalidArgumentError):
            impl.new_instance(rebuild_floor=-1)
        assert impl.request("state", task="a") == "pending"


def test_an_unknown_op_is_unsupported_not_a_bad_request(served: ProtocolImplementation) -> None:
    with pytest.raises(Unsupported, match="no such operation"):
        served.request("reticulate")
    assert served.new(1).submit("a") == 1  # nothing broke


def test_a_replaced_instance_refuses_calls(served: ProtocolImplementation) -> None:
    old = served.new(1)
    served.new(1)
    with pytest.raises(RuntimeError, match="replaced"):
        old.submit("a")


def test_ids_that_are_not_strings_are_caller_errors(served: ProtocolImplementation) -> None:
    s = served.new(1)
    with pytest.raises(TypeError):
        s.submit(1)
    with pytest.raises(TypeError):
        s.submit("a", [("x",)])
    with pytest.raises(TypeError):
        s.submit("a", "bc")
    with pytest.raises(TypeError):
        s.complete("a", object())  # type: ignore[arg-type]
    assert s.submit("a") == 1  # nothing went out


def test_hello_declares_the_profile_given() -> None:
    profile = {"cancel": False, "retry": False}
    with ProtocolImplementation([*SERVE, "--profile", json.dumps(profile), "--name", "narrow"],
                                cwd=ROOT) as impl:
        assert impl.name == "narrow"
        assert impl.profile == Profile(cancel=False, retry=False)
        s = impl.new(1)
        s.submit("a")
        with pytest.raises(Unsupported):
            s.cancel("a")
        assert s.state("a") is TaskState.READY  # cancel never reached the scheduler


def test_full_profile_by_default(served: ProtocolImplementation) -> None:
    assert served.name == "refsched.TaskScheduler"
    assert served.profile == FULL


def test_serve_impl_serves_another_factory_and_its_foreign_errors() -> None:
    # ClaimsTwice over-commits; list(max_concurrency) raises a TypeError refsched never raises
    with ProtocolImplementation([*SERVE, "--impl", "tests.mutants.broken_schedulers:ClaimsTwice"],
                                cwd=ROOT) as impl:
        s = impl.new(2)
        s.submit("a")
        s.submit("b")
        s.start()
        assert [c.task_id for c in s.ready(1)] == ["a", "b"]
    with ProtocolImplementation([*SERVE, "--impl", "builtins:list"], cwd=ROOT) as impl:
        with pytest.raises(ForeignError) as caught:
            impl.new(1)
        assert caught.value.type_name == "TypeError"
        assert str(caught.value).startswith("TypeError: ")


def test_serve_answers_bad_requests_and_keeps_going() -> None:
    lines = [
        protocol.request(0, "hello", protocol=1),
        protocol.request(1, "submit", task="a"),  # no scheduler yet
        protocol.request(2, "new", max_concurrency=1),
        protocol.request(3, "submit", task=1),
        protocol.request(4, "submit", task="a", deps="b"),
        protocol.request(5, "submit", task="a", colour="red"),
        protocol.request(6, "complete", task="a"),
        protocol.request(7, "frobnicate"),
        protocol.request(8, "hello", protocol=2),
        protocol.request(9, "submit", task="a"),
    ]
    stdin = io.StringIO("".join(protocol.encode_line(x) for x in lines) + "\n[1]\nnot json\n")
    stdout = io.StringIO()
    serve(TaskScheduler, FULL, "test", stdin, stdout)
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [a["id"] for a in answers] == [*range(10), None, None, None]
    kinds = [a["error"]["type"] if "error" in a else "ok" for a in answers]
    assert kinds == ["ok", "BadRequest", "ok", "BadRequest", "BadRequest", "BadRequest",
                     "BadRequest", "Unsupported", "BadRequest", "ok", "BadRequest", "BadRequest",
                     "BadRequest"]
    assert answers[9]["ok"] == 1


def _serve_bytes(data: bytes) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[bytes]]:
    """Run ``python -m refsched.serve`` on ``data`` as its whole stdin; its answers, parsed."""
    done = subprocess.run(SERVE, input=data, capture_output=True, cwd=ROOT, timeout=60)
    assert done.stdout.isascii()
    return [json.loads(line) for line in done.stdout.splitlines()], done


DEEP = 100_000
# (what the line is, the line, the answer expected: its id and its type, "ok" for a result)
HOSTILE: list[tuple[str, bytes, Any, str]] = [
    ("nested 100,000 deep", b"[" * DEEP + b"]" * DEEP, None, "BadRequest"),
    ("deps nested 100,000 deep",
     b'{"id":5,"op":"submit","task":"a","deps":' + b"[" * DEEP + b"]" * DEEP + b"}",
     None, "BadRequest"),
    ("op a lone surrogate", b'{"id":5,"op":"\\ud800"}', 5, "Unsupported"),
    ("NaN", b'{"id":5,"op":"ready","limit":NaN}', None, "BadRequest"),
    ("Infinity", b'{"id":5,"op":"ready","limit":-Infinity}', None, "BadRequest"),
    ("a number past the floats", b'{"id":5,"op":"ready","limit":1e400}', 5,
     "InvalidArgumentError"),
    ("an int of 5,000 digits", b'{"id":5,"op":"ready","limit":' + b"9" * 5000 + b"}", None,
     "BadRequest"),
    ("an id of 4,000 digits", b'{"id":' + b"9" * 4000 + b',"op":"snapshot"}', 10**4000 - 1,
     "ok"),
    ("an array", b"[1,2]", None, "BadRequest"),
    ("a string", b'"hello"', None, "BadRequest"),
    ("null", b"null", None, "BadRequest"),
    ("an empty line", b"", None, "BadRequest"),
    ("a line of blanks", b" \t\r", None, "BadRequest"),
    ("bytes that are not UTF-8", b'{"id":5,"op":"submit","task":"\xff\xfe"}', None,
     "BadRequest"),
    ("a line of 2 MiB", b'{"id":5,"op":"submit","task":"' + b"a" * (2 << 20) + b'"}', None,
     "BadRequest"),
    ("a bool id", b'{"id":true,"op":"start"}', None, "BadRequest"),
    ("hello with protocol true", b'{"id":5,"op":"hello","protocol":true}', 5, "BadRequest"),
    ("cancel_pending a string", b'{"id":5,"op":"close","cancel_pending":"yes"}', 5,
     "InvalidArgumentError"),
]


def test_serve_answers_every_hostile_line_and_keeps_serving() -> None:
    opening = [protocol.request(0, "hello", protocol=1),
               protocol.request(1, "new", max_concurrency=1),
               protocol.request(2, "submit", task="a"),
               protocol.request(3, "start")]
    closing = [protocol.request(6, "state", task="a"), protocol.request(7, "bye")]
    data = b"".join(protocol.encode_line(x).encode() for x in opening)
    data += b"".join(line + b"\n" for _, line, _, _ in HOSTILE)
    data += b"".join(protocol.encode_line(x).encode() for x in closing)
    answers, done = _serve_bytes(data)
    assert done.returncode == 0 and not done.stderr, done.stderr.decode(errors="replace")
    assert len(answers) == len(opening) + len(HOSTILE) + len(closing)
    got = [(a["id"], a["error"]["type"] if "error" in a else "ok")
           for a in answers[len(opening):-len(closing)]]
    assert got == [(request_id, kind) for _, _, request_id, kind in HOSTILE]
    assert answers[-2:] == [{"id": 6, "ok": "ready"}, {"id": 7, "ok": None}]
    for (what, *_), answer in zip(HOSTILE, answers[len(opening):], strict=False):
        if "error" in answer:
            assert len(answer["error"]["message"]) < 1000, what


def test_a_lone_surrogate_id_is_carried_both_ways(served: ProtocolImplementation) -> None:
    direct, wire = TaskScheduler(1), served.new(1)
    for s in (direct, wire):
        assert s.submit("\ud800") == 1
        assert s.submit("b", ["\ud800", "\udfff"]) == 1
    assert outcome(wire.start) == outcome(direct.start)  # the unknown dep, named as sent
    for s in (direct, wire):
        s.submit("\udfff")
        s.start()
    assert wire.ready() == direct.ready() == [("\ud800", 1, None)]
    assert wire.snapshot() == direct.snapshot()
    assert outcome(wire.state, "\udbff") == outcome(direct.state, "\udbff")


def test_close_with_cancel_pending_not_a_bool_is_refused_over_the_wire(
        served: ProtocolImplementation) -> None:
    s = served.new(1)
    s.submit("a")
    with pytest.raises(errors.InvalidArgumentError, match="cancel_pending"):
        s.close("yes")  # type: ignore[arg-type]
    assert s.state("a") is TaskState.READY and not s.snapshot().closed


def test_serve_answers_a_line_too_long_without_reading_it_whole() -> None:
    lines = (protocol.encode_line(protocol.request(0, "new", max_concurrency=1))
             + '{"id":1,"op":"submit","task":"' + "a" * 100 + '"}\n'
             + protocol.encode_line(protocol.request(2, "submit", task="b")))
    stdout = io.StringIO()
    serve(TaskScheduler, FULL, "test", io.StringIO(lines), stdout, max_line=64)
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert answers == [
        {"id": 0, "ok": None},
        {"id": None, "error": {"type": "BadRequest",
                               "message": "a line longer than 64 characters"}},
        {"id": 2, "ok": 1},
    ]


def test_serve_stops_at_bye() -> None:
    stdin = io.StringIO(protocol.encode_line(protocol.request(0, "bye"))
                        + protocol.encode_line(protocol.request(1, "hello", protocol=1)))
    stdout = io.StringIO()
    serve(TaskScheduler, FULL, "test", stdin, stdout)
    assert [json.loads(x) for x in stdout.getvalue().splitlines()] == [{"id": 0, "ok": None}]


# ------------------------------------------------------------------ the graphlib adapter

def test_graphlib_adapter_declares_static_and_runs_a_static_graph() -> None:
    with ProtocolImplementation(GRAPHLIB, cwd=ROOT) as impl:
        assert impl.profile == STATIC
        assert impl.name.startswith("graphlib.TopologicalSorter")
        g, direct = impl.new(4), TaskScheduler(4)
        for s in (g, direct):
            s.submit("b", ["a"])
            s.submit("c", ["a", "b"])
            s.submit("d", ["a"])
            s.submit("a")
            s.start()
        order = []
        while True:
            got, expected = g.ready(), direct.ready()
            assert {c.task_id for c in got} == {c.task_id for c in expected}
            if not got:
                break
            for claim in got:
                assert g.state(claim.task_id) is TaskState.RUNNING
                assert g.complete(claim.task_id, claim.generation) is TaskState.SUCCEEDED
                direct.complete(claim.task_id, claim.generation)
                order.append(claim.task_id)
        assert order[0] == "a" and order[-1] == "c"
        assert g.state("c") is TaskState.SUCCEEDED


def test_graphlib_adapter_shows_where_graphlib_differs() -> None:
    with ProtocolImplementation(GRAPHLIB, cwd=ROOT) as impl:
        g = impl.new(1)
        g.submit("b", ["a"])
        g.submit("a", ["c"])
        g.submit("c", ["b"])
        with pytest.raises(errors.CycleError) as caught:
            g.start()
        assert caught.value.cycle == ["b", "c", "a", "b"]  # as graphlib gives it
        with pytest.raises(ForeignError, match="ValueError"):  # refsched lets you fix it
            g.start()

        g = impl.new(1)
        g.submit("b", ["x"])  # never added: graphlib makes it a node of its own
        g.start()
        assert g.ready() == [("x", 1, None)]
        with pytest.raises(Unsupported):
            g.state("b")  # pending or ready: graphlib cannot say
        with pytest.raises(errors.UnknownTaskError):
            g.state("never")
        assert g.complete("x", 1) is TaskState.SUCCEEDED
        with pytest.raises(ForeignError) as twice:
            g.complete("x", 1)  # refsched answers succeeded again
        assert twice.value.type_name == "ValueError"
        with pytest.raises(Unsupported):
            g.cancel("b")
        with pytest.raises(Unsupported):
            g.ready(1)
        with pytest.raises(Unsupported):
            g.submit("b")


def test_graphlib_scheduler_runs_in_process_too() -> None:
    with InProcessImplementation(GraphlibScheduler, profile=STATIC) as impl:
        assert impl.name == "refsched.conform.dag.graphlib_adapter:GraphlibScheduler"
        g = impl.new(1)
        g.submit("a")
        g.start()
        assert g.ready() == [("a", 1, None)]


# ------------------------------------------------------------------ in-process and loading

def test_in_process_implementation_hands_out_factory_schedulers() -> None:
    impl = InProcessImplementation(TaskScheduler)
    assert impl.name == "refsched.dag.scheduler:TaskScheduler" and impl.profile == FULL
    with impl:
        s = impl.new(3)
        assert isinstance(s, TaskScheduler) and s.max_concurrency == 3


def test_load_factory_names_what_is_missing() -> None:
    assert load_factory("refsched:TaskScheduler") is TaskScheduler
    for bad, named in [("refsched", "MODULE:FACTORY"), ("refsched:NoSuchThing", "NoSuchThing"),
                       ("no_such_module_here:f", "cannot import 'no_such_module_here'")]:
        with pytest.raises(ValueError, match=named):
            load_factory(bad)


# ------------------------------------------------------------------ the encoding

def test_lines_are_ascii_whatever_they_carry() -> None:
    message = protocol.request(1, "submit", task="\ud800\u00e9\u2028\U0001f600", deps=["\udfff"])
    line = protocol.encode_line(message)
    assert line.isascii() and line.endswith("\n") and line.count("\n") == 1
    assert protocol.decode_line(line) == message
    assert protocol.decode_line(line.encode("ascii")) == message


@pytest.mark.parametrize(("line", "says"), [
    ("[" * DEEP + "]" * DEEP, "nested too deeply"),
    ('{"id": 1, "op": "\udcff"}', "not UTF-8"),  # what surrogateescape makes of a byte 0xff
    (b'{"id": 1, "op": "\xff"}', "not UTF-8"),
    ('{"id": 1, "op": "ready", "limit": NaN}', "NaN is not JSON"),
    ("", "Expecting value"),
], ids=["nested too deeply", "a lone surrogate", "not UTF-8", "NaN", "empty"])
def test_lines_that_cannot_be_read_are_wire_errors(line: str | bytes, says: str) -> None:
    with pytest.raises(protocol.WireError, match=says) as caught:
        protocol.decode_line(line)
    assert len(str(caught.value)) < 400


def test_an_answer_nested_too_deeply_is_a_protocol_violation() -> None:
    answer_deeply = ("import sys; sys.stdin.readline(); "
                     f"sys.stdout.write('[' * {DEEP} + ']' * {DEEP} + '\\n'); "
                     "sys.stdout.flush(); sys.stdin.read()")
    impl = ProtocolImplementation([sys.executable, "-c", answer_deeply], timeout=SHORT)
    with pytest.raises(ProtocolViolation, match="nested too deeply"):
        impl.open()
    assert impl.pid is not None
    assert_gone(impl.pid)


def test_snapshot_survives_the_wire() -> None:
    s = TaskScheduler(1)
    s.submit("a")
    s.submit("b", ["a", "c"])
    s.submit("c")
    s.start()
    s.ready()
    snap = s.snapshot()
    assert dag_wire.snapshot_from_json("snapshot", json.loads(json.dumps(
        dag_wire.snapshot_to_json(snap)))) == snap


@pytest.mark.parametrize(("op", "convert", "value"), [
    ("ready", dag_wire.claims_from_json, "everything"),
    ("ready", dag_wire.claims_from_json, [["a", "1"]]),
    ("submit", dag_wire.generation_from_json, True),
    ("state", dag_wire.state_from_json, "done"),
    ("start", dag_wire.null_from_json, 0),
    ("close", dag_wire.close_report_from_json, {"succeeded": []}),
    ("snapshot", dag_wire.snapshot_from_json,
     {"started": True, "closed": False, "next_seq": 1, "tasks": {"a": {}}}),
])
def test_results_of_the_wrong_shape_are_wire_errors(
        op: str, convert: Callable[[str, Any], Any], value: Any) -> None:
    with pytest.raises(protocol.WireError):
        convert(op, value)


def test_errors_decode_to_refsched_classes_or_foreign_errors() -> None:
    for exc in (errors.StaleGenerationError("stale"), errors.UnknownTaskError("who?"),
                errors.UnknownDependencyError("missing", [("a", "b")]),
                errors.CycleError("cycle", [["a", "b", "a"]])):
        back = protocol.error_from_json(json.loads(json.dumps(protocol.error_to_json(exc))))
        assert type(back) is type(exc) and str(back) == str(exc)
    back = protocol.error_from_json({"type": "KeyError", "message": "'a'"})
    assert isinstance(back, ForeignError) and back.type_name == "KeyError"
    assert isinstance(protocol.error_from_json({"type": "Unsupported", "message": "no"}),
                      Unsupported)
    with pytest.raises(protocol.WireError):
        protocol.error_from_json({"type": "CycleError", "message": "no cycle given"})
    with pytest.raises(protocol.WireError):
        protocol.error_from_json({"type": "StaleGenerationError", "message": "no generations"})


def test_a_stale_generation_error_carries_the_generations_across(
        served: ProtocolImplementation) -> None:
    wire = served.new(1)
    wire.submit("a")
    wire.start()
    with pytest.raises(errors.StaleGenerationError) as stale:
        wire.complete("a", 3)
    assert (stale.value.generation, stale.value.current) == (3, 1)


# ------------------------------------------------------------------ misbehaving implementations

def test_crash_after_hello_is_a_crash_with_its_status_and_stderr() -> None:
    with ProtocolImplementation(script("crash_after_hello.py"), timeout=SHORT) as impl:
        pid = impl.pid
        with pytest.raises(ImplementationCrashed) as caught:
            impl.new(1)
    assert caught.value.returncode == 3 and caught.value.verdict == "crashed"
    assert "exited with status 3" in str(caught.value)
    assert "giving up on the first request" in caught.value.stderr_tail
    assert pid is not None
    assert_gone(pid)


def test_silent_exit_before_hello_is_a_crash() -> None:
    impl = ProtocolImplementation(script("silent_exit.py"), timeout=SHORT)
    with pytest.raises(ImplementationCrashed) as caught:
        impl.open()
    assert caught.value.returncode == 0
    assert impl.pid is not None
    assert_gone(impl.pid)


def test_a_program_that_cannot_start_is_a_crash() -> None:
    with pytest.raises(ImplementationCrashed, match="could not be started"):
        ProtocolImplementation([str(IMPLS / "no_such_program")]).open()


def test_hang_times_out_and_stays_broken() -> None:
    impl = ProtocolImplementation(script("hang.py"), timeout=SHORT)
    with impl:
        with pytest.raises(ImplementationTimedOut) as caught:
            impl.new(1)
        assert caught.value.verdict == "timed out"
        with pytest.raises(ImplementationTimedOut):
            impl.new(1)  # at once: the implementation is broken
    assert impl.pid is not None and impl.returncode is not None  # it ignored SIGTERM
    assert_gone(impl.pid)


def test_garbage_is_a_protocol_violation() -> None:
    impl = ProtocolImplementation(script("garbage.py"), timeout=SHORT)
    with pytest.raises(ProtocolViolation, match="not a line of JSON") as caught:
        impl.open()
    assert caught.value.verdict == "protocol violation"
    assert impl.pid is not None
    assert_gone(impl.pid)


def test_an_answer_with_the_wrong_id_is_a_protocol_violation() -> None:
    with ProtocolImplementation(script("out_of_order.py"), timeout=SHORT) as impl, \
            pytest.raises(ProtocolViolation, match="expected 1"):
        impl.new(1)


@pytest.mark.parametrize("mode", [(), ("lines",)])
def test_a_flood_is_cut_off_at_max_line(mode: tuple[str, ...]) -> None:
    with ProtocolImplementation(script("flood.py", *mode), timeout=SHORT,
                                max_line=1 << 16) as impl:
        with pytest.raises(ProtocolViolation):
            impl.new(1)
        pid = impl.pid
    assert pid is not None
    assert_gone(pid)


def test_a_result_of_the_wrong_shape_is_a_protocol_violation() -> None:
    with ProtocolImplementation(script("wrong_shape.py"), timeout=SHORT) as impl:
        s = impl.new(1)
        assert s.submit("a") == 1
        s.start()
        with pytest.raises(ProtocolViolation, match="ready answers a list"):
            s.ready()


# -- edge kinds and add_deps on the wire ---------------------------------------------------------

def test_a_hello_that_names_no_edge_flag_has_neither_and_is_never_sent_them(
        tmp_path: Path) -> None:
    from refsched.conform.oracle import check

    record = tmp_path / "record.jsonl"
    with ProtocolImplementation(script("written_before_edges.py", str(record)),
                                cwd=ROOT) as impl:
        assert impl.profile == Profile(optional_edges=False, add_deps=False, provenance=False)
        report = check(impl, corpus=False, examples=30)
    assert report.verdict == "conforms", report.format()
    assert "dag.add_deps.ok" in report.coverage.left_out(report.profile)
    requests = [json.loads(line) for line in record.read_text().splitlines()[0::2]]
    assert len(requests) > 500
    assert not [r for r in requests if r["op"] in ("add_deps", "input_summary", "provenance")
                or "optional" in r or "actor" in r or "reason" in r]
    assert "dag.provenance.blocked" in report.coverage.left_out(report.profile)


def test_the_generated_phase_drives_edge_kinds_and_add_deps_over_the_wire() -> None:
    from refsched.conform.oracle import check

    with ProtocolImplementation(SERVE, cwd=ROOT) as impl:
        report = check(impl, corpus=False, examples=30, clauses=False)
    assert report.verdict == "conforms", report.format()
    driven = report.coverage.driven
    for clause in ("dag.submit.optional", "dag.add_deps.ok", "dag.add_deps.not-pending",
                   "dag.input_summary.ok"):
        assert driven[clause] > 0, (clause, dict(driven))


def test_profile_from_hello_defaults_the_declared_flags_to_false() -> None:
    from refsched.profile import profile_from_hello, profile_from_json

    assert profile_from_hello("scheduler", {}) == Profile(optional_edges=False, add_deps=False,
                                                          provenance=False)
    assert profile_from_hello("scheduler", {"add_deps": True, "provenance": True}) == Profile(
        optional_edges=False)
    assert profile_from_json("scheduler", {}) == FULL  # a --profile, in this process
    assert profile_from_hello("timer", {}) == profile_from_json("timer", {})


def test_optional_edges_add_deps_and_the_input_summary_over_the_wire(
        served: ProtocolImplementation) -> None:
    s = served.new(2)
    assert s.submit("a") == 1 and s.submit("c") == 1
    assert s.submit("b", ["c"], None, ["a"]) == 1
    assert s.add_deps("b", [], ["d"]) is TaskState.PENDING
    view = s.snapshot().tasks["b"]
    assert (view.deps, getattr(view, "optional", None)) == ({"a", "c", "d"}, {"a", "d"})
    with pytest.raises(errors.InvalidTransitionError):
        s.add_deps("a", ["c"])  # ready: an edge never lands on a version not pending
    with pytest.raises(errors.InvalidArgumentError):
        s.add_deps("b", ["c"])  # a dependency already
    s.submit("d")
    s.start()
    assert [c.task_id for c in s.ready()] == ["a", "c"]
    s.fail("a", 1)
    summary = s.input_summary("b")
    assert list(summary) == ["a"] and summary["a"].state is TaskState.FAILED
    assert summary["a"].generation == 1 and summary["a"].blocked_by is None
    with pytest.raises(errors.UnknownTaskError):
        s.input_summary("z")


def test_a_server_without_edge_flags_answers_their_calls_unsupported() -> None:
    profile = {"optional_edges": False, "add_deps": False}
    with ProtocolImplementation([*SERVE, "--profile", json.dumps(profile)], cwd=ROOT) as impl:
        s = impl.new(1)
        s.submit("a")
        for call in (lambda: s.submit("b", [], None, ["a"]), lambda: s.add_deps("a", ["b"]),
                     lambda: s.input_summary("a")):
            with pytest.raises(Unsupported):
                call()
        assert set(s.snapshot().tasks) == {"a"}


@pytest.mark.parametrize("answer", [
    {"a": {"generation": 1, "state": "failed"}},  # no blocked_by
    {"a": {"generation": "1", "state": "failed", "blocked_by": None}},
    {"a": {"generation": 1, "state": "gone", "blocked_by": None}},
    {"a": {"generation": 1, "state": "failed", "blocked_by": None, "error": "boom"}},
    [["a", "failed"]],
])
def test_a_malformed_input_summary_is_refused(answer: Any) -> None:
    with pytest.raises(protocol.WireError):
        dag_wire.input_summary_from_json("input_summary", answer)


def test_a_snapshot_names_optional_deps_only_among_its_deps() -> None:
    view = {"generation": 1, "state": "pending", "deps": ["a"], "remaining_deps": 1,
            "blocked_by": None, "cancel_requested": False, "claims": 0, "seq": 1}
    snapshot = {"started": False, "closed": False, "next_seq": 2, "tasks": {"b": view}}
    plain = dag_wire.snapshot_from_json("snapshot", snapshot)
    assert not hasattr(plain.tasks["b"], "optional")
    with_empty = dag_wire.snapshot_from_json(
        "snapshot", {**snapshot, "tasks": {"b": {**view, "optional": []}}})
    assert with_empty == plain  # an empty list is the key left out
    read = dag_wire.snapshot_from_json(
        "snapshot", {**snapshot, "tasks": {"b": {**view, "optional": ["a"]}}})
    assert read.tasks["b"].optional == {"a"}  # type: ignore[attr-defined]
    assert dag_wire.snapshot_to_json(read)["tasks"]["b"]["optional"] == ["a"]
    assert "optional" not in dag_wire.snapshot_to_json(plain)["tasks"]["b"]
    with pytest.raises(protocol.WireError):
        dag_wire.snapshot_from_json(
            "snapshot", {**snapshot, "tasks": {"b": {**view, "optional": ["x"]}}})


def test_a_bad_profile_in_the_hello_is_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation, match="bad profile"):
        ProtocolImplementation(script("bad_profile.py"), timeout=SHORT).open()


def test_children_of_a_hung_implementation_are_killed_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    impl = ProtocolImplementation(script("spawns_child.py", str(pid_file)), timeout=SHORT)
    with pytest.raises(ImplementationTimedOut):
        impl.open()
    child = int(pid_file.read_text())
    assert impl.pid is not None
    assert_gone(impl.pid, child)


def test_an_interrupted_caller_leaves_no_process() -> None:
    with pytest.raises(KeyboardInterrupt), ProtocolImplementation(SERVE, cwd=ROOT) as impl:
        impl.new(1).submit("a")
        pid = impl.pid
        raise KeyboardInterrupt
    assert pid is not None
    assert_gone(pid)
    impl.close()  # twice is fine


def test_every_verdict_is_a_harness_error() -> None:
    for cls in (ImplementationCrashed, ImplementationTimedOut, ProtocolViolation):
        assert issubclass(cls, HarnessError)
        assert not issubclass(cls, errors.SchedulerError)
    assert str(ProtocolViolation("bad", "line 1\nline 2")).endswith("line 1\nline 2")


def test_provenance_and_what_ended_the_root_over_the_wire(
        served: ProtocolImplementation) -> None:
    s = served.new(2)
    assert s.submit("a") == 1 and s.submit("b", ["a"]) == 1 and s.submit("c", ["b"]) == 1
    s.start()
    assert [c.task_id for c in s.ready()] == ["a"]
    assert s.fail("a", 1, actor="worker-3", reason="disk full") is TaskState.FAILED
    assert s.provenance("a") is None  # a failed version is a root, with no record of its own
    assert s.provenance("c") == Provenance("a", 1, TaskState.FAILED, ("a", "b", "c"),
                                           "worker-3", "disk full")
    assert s.cancel("a") is TaskState.FAILED
    assert s.retry("a") == 2 and s.provenance("c") is None
    assert s.cancel("c", None, actor="ops", reason="not needed") is TaskState.CANCELLED
    assert s.provenance("c") == Provenance("c", 2, TaskState.CANCELLED, ("c",), "ops",
                                           "not needed")
    with pytest.raises(errors.UnknownTaskError):
        s.provenance("z")


def test_an_actor_that_is_not_text_is_refused_as_the_request_is_read() -> None:
    with pytest.raises(protocol.WireError, match="actor must be a string or null"):
        dag_wire.decode_request({"id": 1, "op": "cancel", "task": "a", "actor": 7})
    request = dag_wire.decode_request({"id": 1, "op": "fail", "task": "a", "generation": 1})
    assert request.args["actor"] is None and request.args["reason"] is None
