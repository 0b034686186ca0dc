"""refsched's schedulers, or any implementation with their API, behind the conformance protocol.

``python -m refsched.serve [--system NAME] [--impl MODULE:FACTORY] [--profile JSON] [--name
NAME]`` reads requests on stdin and answers each with one line on stdout
(``docs/conformance.md``): the TaskScheduler's operations by default, the timer's, the pool's or
the durable scheduler's with ``--system`` (their tables in :mod:`refsched.conform.wire`). Errors
from :mod:`refsched.errors` keep their class names; any other exception the scheduler raises is
answered with its own class name, so the oracle sees exactly what was raised.

Every line gets one answer and the server keeps serving, whatever the line holds: one it cannot
read (empty, not UTF-8, not JSON, JSON nested too deeply, longer than :data:`MAX_LINE`) is
answered ``BadRequest`` with the id null. Answers are written in ASCII, so any string read (a
lone surrogate ``"\\ud800"`` included) goes back out as it came in: such an id is an id like
any other, as it is for the client.

:func:`serve` is the loop itself, for any factory ``max_concurrency -> scheduler``; adapters
such as :mod:`refsched.conform.dag.graphlib_adapter` serve through it.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from refsched.conform import protocol
from refsched.conform.dag import wire as dag_wire
from refsched.conform.protocol import Request, Unsupported, WireError
from refsched.conform.wire import SYSTEMS, Wire
from refsched.conform.wire import get as get_wire
from refsched.profile import FULL, Profile, ProfileError, full_profile, profile_from_json

__all__ = ["MAX_LINE", "main", "serve", "serve_stdio"]

DEFAULT_NAME = "refsched.TaskScheduler"
# The longest request line read, in characters (newline excluded); a longer one is answered
# BadRequest and skipped without being held. The client reads answers up to 1 MiB by default.
MAX_LINE = 1 << 20
_SKIP_CHUNK = 1 << 16  # what is read at a time of a line being skipped


def _not_in_profile(profile: Profile, op: str, args: Mapping[str, Any]) -> str | None:
    """Why ``op`` is outside ``profile``, or None when the profile admits it."""
    flag = {"cancel": "cancel", "acknowledge_cancel": "cancel", "retry": "retry",
            "fail": "fail", "close": "close", "snapshot": "snapshot", "add_deps": "add_deps",
            "input_summary": "optional_edges", "provenance": "provenance"}.get(op)
    if flag is not None and not getattr(profile, flag):
        return f"{op}: outside the profile ({flag} is false)"
    if args.get("optional") and not profile.optional_edges:
        return f"{op}: optional edges are outside the profile (optional_edges is false)"
    if (args.get("actor") is not None or args.get("reason") is not None) and not getattr(
            profile, "provenance", True):
        return f"{op}: actor and reason are outside the profile (provenance is false)"
    if op == "ready" and args["limit"] is not None and not profile.limit:
        return "ready: a limit is outside the profile (limit is false)"
    return None


def _notes(args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``actor`` and ``reason`` a request gives, only those given: an adapter without
    provenance need not take them."""
    return {name: args[name] for name in ("actor", "reason") if args.get(name) is not None}


# op -> the scheduler call it makes; arguments are positional so adapters may name them freely
_CALLS: dict[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    # optional edges are passed only when there are some: an adapter without them need not
    # take the argument
    "submit": lambda s, a: (s.submit(a["task"], a["deps"], optional=a["optional"])
                            if a["optional"] else s.submit(a["task"], a["deps"])),
    "add_deps": lambda s, a: s.add_deps(a["task"], a["deps"], optional=a["optional"]),
    "input_summary": lambda s, a: s.input_summary(a["task"]),
    "provenance": lambda s, a: s.provenance(a["task"]),
    "start": lambda s, a: s.start(),
    "ready": lambda s, a: s.ready(a["limit"]),
    "complete": lambda s, a: s.complete(a["task"], a["generation"]),
    "fail": lambda s, a: s.fail(a["task"], a["generation"], **_notes(a)),
    "cancel": lambda s, a: s.cancel(a["task"], a["generation"], **_notes(a)),
    "acknowledge_cancel": lambda s, a: s.acknowledge_cancel(a["task"], a["generation"],
                                                            **_notes(a)),
    "retry": lambda s, a: s.retry(a["task"]),
    "close": lambda s, a: s.close(a["cancel_pending"]),
    "snapshot": lambda s, a: s.snapshot(),
    "state": lambda s, a: s.state(a["task"]),
}


class _Session:
    """The server's side of one connection: the current scheduler instance and the answers.

    ``wire`` is the served system's table of ops (:mod:`refsched.conform.wire`); None serves
    the TaskScheduler's, stated in :mod:`refsched.conform.dag.wire`.
    """

    def __init__(self, factory: Callable[..., Any], profile: Any, name: str,
                 wire: Wire | None = None) -> None:
        self.factory = factory
        self.profile = profile
        self.name = name
        self.wire = wire
        # the instance the last successful ``new`` made; a refused ``new`` leaves it current
        self.scheduler: Any = None

    def answer(self, line: str) -> tuple[dict[str, Any], bool]:
        """The response to one request line, and whether the session ends after it."""
        if not line.strip(_JSON_SPACE):
            return protocol.error_response(None, _bad_request("an empty line is no request")), False
        try:
            message = protocol.decode_line(line)
            req = (dag_wire.decode_request(message) if self.wire is None
                   else protocol.decode_envelope(message))
        except WireError as e:
            return protocol.error_response(e.request_id, _bad_request(str(e))), False
        try:
            return protocol.ok_response(req.id, self._result(req)), req.op == "bye"
        except _BadRequest as e:
            return protocol.error_response(req.id, _bad_request(str(e))), False
        except Exception as e:  # every other exception is an answer: the oracle compares it
            return protocol.error_response(req.id, _error_to_json(e)), False

    def _result(self, req: Request) -> Any:
        op, args = req.op, req.args
        if op == "hello":
            if (type(args["protocol"]) is not int
                    or args["protocol"] != protocol.PROTOCOL_VERSION):
                raise _BadRequest(f"hello: protocol {_shorten(repr(args['protocol']))} is not "
                                  f"spoken here; this server speaks {protocol.PROTOCOL_VERSION}")
            return {"name": self.name, "protocol": protocol.PROTOCOL_VERSION,
                    "system": "scheduler" if self.wire is None else self.wire.system,
                    "profile": self.profile.to_json()}
        if op == "bye":
            return None
        if self.wire is not None:
            return self._wire_result(self.wire, req)
        if op not in dag_wire.OPS:
            raise Unsupported(f"{_shorten(op)}: no such operation")
        why = _not_in_profile(self.profile, op, args)
        if why is not None:
            raise Unsupported(why)
        if op == "new":
            # a refused new changes nothing, as any refused call: the current instance stays
            self.scheduler = self.factory(args["max_concurrency"])
            return None
        if self.scheduler is None:
            raise _BadRequest(f"{op}: no scheduler yet; send new first")
        return dag_wire.result_to_json(op, _CALLS[op](self.scheduler, args))


    def _wire_result(self, wire: Wire, req: Request) -> Any:
        """The answer to a request of the timer's, the pool's or the durable scheduler's."""
        if req.op != "new" and req.op not in wire.ops:
            raise Unsupported(f"{_shorten(req.op)}: no such operation of the {wire.system}")
        flag = None if req.op == "new" else wire.ops[req.op].flag
        if flag is not None and not getattr(self.profile, flag):
            raise Unsupported(f"{req.op}: outside the profile ({flag} is false)")
        try:
            args = wire.check(req.op, req.args)
        except WireError as e:
            raise _BadRequest(str(e)) from None
        if req.op == "new":
            # a refused new changes nothing, as any refused call: the current instance stays,
            # and is let go (a durable store's folder removed) only once its successor exists
            fresh = wire.serve(self.factory, **args)
            previous, self.scheduler = self.scheduler, fresh
            discard = getattr(previous, "discard", None)
            if discard is not None:
                discard()
            return None
        if self.scheduler is None:
            raise _BadRequest(f"{req.op}: no instance yet; send new first")
        return wire.call(self.scheduler, req.op, args)


class _BadRequest(Exception):
    """A request the server could read but that breaks the protocol."""


_JSON_SPACE = " \t\r\n"  # the whitespace JSON allows around a value


def _bad_request(message: str) -> dict[str, Any]:
    return {"type": "BadRequest", "message": message}


def _shorten(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _error_to_json(exc: Exception) -> dict[str, Any]:
    """``protocol.error_to_json(exc)``, or its class name alone when it cannot say more."""
    try:
        return protocol.error_to_json(exc)
    except Exception as e:  # a served scheduler's exception whose str() or fields fail
        return {"type": type(exc).__name__,
                "message": f"its message cannot be read ({type(e).__name__})"}


def _write(stdout: TextIO, response: dict[str, Any]) -> None:
    try:
        line = protocol.encode_line(response)
    except (TypeError, ValueError, RecursionError) as e:
        # the scheduler returned or raised something JSON cannot carry: answer that instead
        line = protocol.encode_line(protocol.error_response(
            response.get("id"), {"type": type(e).__name__,
                                 "message": "the answer cannot be sent as JSON: "
                                            + _shorten(str(e))}))
    stdout.write(line)
    stdout.flush()


def _lines(stdin: TextIO, max_line: int) -> Iterator[str | None]:
    """The lines of ``stdin``, newline included; None for each longer than ``max_line``.

    A line too long is read to its end a chunk at a time and dropped, never held whole.
    """
    while True:
        line = stdin.readline(max_line + 1)
        if not line:
            return
        if len(line) <= max_line or line.endswith("\n"):
            yield line
            continue
        while line and not line.endswith("\n"):
            line = stdin.readline(_SKIP_CHUNK)
        yield None


def serve(factory: Callable[..., Any], profile: Any = FULL, name: str = DEFAULT_NAME,
          stdin: TextIO | None = None, stdout: TextIO | None = None, *,
          max_line: int = MAX_LINE, wire: Wire | None = None) -> None:
    """Answer requests from ``stdin`` on ``stdout`` until ``bye`` or the end of ``stdin``.

    ``factory(max_concurrency)`` makes the scheduler each ``new`` starts; ``profile`` is the
    one declared in the hello, and ops outside it are answered ``Unsupported`` without reaching
    the scheduler. Every line is answered: one that is no request (empty, not JSON, not UTF-8,
    longer than ``max_line`` characters) with a ``BadRequest`` whose id is null.
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    session = _Session(factory, profile, name, wire)
    try:
        _answer_lines(session, stdin, stdout, max_line)
    finally:
        discard = getattr(session.scheduler, "discard", None)
        if discard is not None:
            discard()


def _answer_lines(session: _Session, stdin: TextIO, stdout: TextIO, max_line: int) -> None:
    for line in _lines(stdin, max_line):
        if line is None:
            response, done = protocol.error_response(None, _bad_request(
                f"a line longer than {max_line} characters")), False
        else:
            response, done = session.answer(line)
        _write(stdout, response)
        if done:
            return


def serve_stdio(factory: Callable[..., Any], profile: Any, name: str,
                wire: Wire | None = None) -> None:
    """Serve on this process's stdin and stdout, keeping stdout for the protocol alone."""
    # Bytes that are not UTF-8 come through as lone surrogates, which decode_line refuses: a
    # line that is not UTF-8 is answered BadRequest rather than read as something it is not.
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape",
                             newline="\n")
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
    # Whatever the served code prints must not land among the answers: send it to stderr.
    sys.stdout = sys.stderr
    serve(factory, profile, name, stdin, stdout, wire=wire)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit status 0, or 2 for a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m refsched.serve",
        description="Serve a scheduler over the conformance protocol on stdin/stdout.")
    parser.add_argument("--system", choices=SYSTEMS, default=SYSTEMS[0],
                        help="the system served: its operations and its default "
                             "implementation (default: scheduler)")
    parser.add_argument("--impl", metavar="MODULE:FACTORY",
                        help="the factory to serve, with the system's API (default: "
                             "refsched's own: TaskScheduler, TimerScheduler, WorkStealingPool, "
                             "DurableScheduler)")
    parser.add_argument("--profile", metavar="JSON",
                        help="the capability profile to declare, a JSON object of the "
                             "system's flags (default: the full contract)")
    parser.add_argument("--name", help="the name given in the hello answer")
    args = parser.parse_args(argv)
    wire = None if args.system == "scheduler" else get_wire(args.system)
    try:
        profile = (full_profile(args.system) if args.profile is None
                   else profile_from_json(args.system, json.loads(args.profile)))
    except (ValueError, ProfileError) as e:
        parser.error(f"--profile: {e}")
    factory: Callable[..., Any]
    if args.impl is not None:
        from refsched.loading import load_factory
        try:
            factory = load_factory(args.impl)
        except ValueError as e:
            parser.error(str(e))
    elif wire is not None:
        factory = wire.default_factory()
    else:
        from refsched import TaskScheduler
        factory = TaskScheduler
    default_name = DEFAULT_NAME if wire is None else wire.title
    serve_stdio(factory, profile, args.name or args.impl or default_name, wire)
    return 0


if __name__ == "__main__":
    sys.exit(main())
