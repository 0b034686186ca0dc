"""refsched's TaskScheduler, or any scheduler with its API, behind the conformance protocol.

``python -m refsched.serve [--impl MODULE:FACTORY] [--profile JSON] [--name NAME]`` reads
requests on stdin and answers each with one line on stdout (``docs/conformance.md``). Errors
from :mod:`refsched.errors` keep their class names; any other exception the scheduler raises is
answered with its own class name, so the oracle sees exactly what was raised.

:func:`serve` is the loop itself, for any factory ``max_concurrency -> scheduler``; adapters
such as :mod:`refsched.conform.graphlib_adapter` serve through it.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from refsched.conform import protocol
from refsched.conform.profile import FULL, Profile, ProfileError
from refsched.conform.protocol import Request, Unsupported, WireError

__all__ = ["main", "serve", "serve_stdio"]

DEFAULT_NAME = "refsched.TaskScheduler"


def _not_in_profile(profile: Profile, op: str, args: Mapping[str, Any]) -> str | None:
    """Why ``op`` is outside ``profile``, or None when the profile admits it."""
    flag = {"cancel": "cancel", "acknowledge_cancel": "cancel", "retry": "retry",
            "fail": "fail", "close": "close", "snapshot": "snapshot"}.get(op)
    if flag is not None and not getattr(profile, flag):
        return f"{op}: outside the profile ({flag} is false)"
    if op == "ready" and args["limit"] is not None and not profile.limit:
        return "ready: a limit is outside the profile (limit is false)"
    return None


# op -> the scheduler call it makes; arguments are positional so adapters may name them freely
_CALLS: dict[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    "submit": lambda s, a: s.submit(a["task"], a["deps"]),
    "start": lambda s, a: s.start(),
    "ready": lambda s, a: s.ready(a["limit"]),
    "complete": lambda s, a: s.complete(a["task"], a["generation"]),
    "fail": lambda s, a: s.fail(a["task"], a["generation"]),
    "cancel": lambda s, a: s.cancel(a["task"], a["generation"]),
    "acknowledge_cancel": lambda s, a: s.acknowledge_cancel(a["task"], a["generation"]),
    "retry": lambda s, a: s.retry(a["task"]),
    "close": lambda s, a: s.close(a["cancel_pending"]),
    "snapshot": lambda s, a: s.snapshot(),
    "state": lambda s, a: s.state(a["task"]),
}


class _Session:
    """The server's side of one connection: the current scheduler instance and the answers."""

    def __init__(self, factory: Callable[[int], Any], profile: Profile, name: str) -> None:
        self.factory = factory
        self.profile = profile
        self.name = name
        self.scheduler: Any = None  # the instance the last successful ``new`` made

    def answer(self, line: str) -> tuple[dict[str, Any], bool]:
        """The response to one request line, and whether the session ends after it."""
        try:
            req = protocol.decode_request(protocol.decode_line(line))
        except WireError as e:
            return protocol.error_response(e.request_id, _bad_request(str(e))), False
        try:
            return protocol.ok_response(req.id, self._result(req)), req.op == "bye"
        except _BadRequest as e:
            return protocol.error_response(req.id, _bad_request(str(e))), False
        except Exception as e:  # every other exception is an answer: the oracle compares it
            return protocol.error_response(req.id, protocol.error_to_json(e)), False

    def _result(self, req: Request) -> Any:
        op, args = req.op, req.args
        if op == "hello":
            if args["protocol"] != protocol.PROTOCOL_VERSION:
                raise _BadRequest(f"hello: protocol {args['protocol']!r} is not spoken here; "
                                  f"this server speaks {protocol.PROTOCOL_VERSION}")
            return {"name": self.name, "protocol": protocol.PROTOCOL_VERSION,
                    "profile": self.profile.to_json()}
        if op == "bye":
            return None
        if op not in protocol.OPS:
            raise Unsupported(f"{op}: no such operation")
        why = _not_in_profile(self.profile, op, args)
        if why is not None:
            raise Unsupported(why)
        if op == "new":
            self.scheduler = None  # a failed new leaves no instance behind
            self.scheduler = self.factory(args["max_concurrency"])
            return None
        if self.scheduler is None:
            raise _BadRequest(f"{op}: no scheduler yet; send new first")
        return protocol.result_to_json(op, _CALLS[op](self.scheduler, args))


class _BadRequest(Exception):
    """A request the server could read but that breaks the protocol."""


def _bad_request(message: str) -> dict[str, Any]:
    return {"type": "BadRequest", "message": message}


def _write(stdout: TextIO, response: dict[str, Any]) -> None:
    try:
        line = protocol.encode_line(response)
    except (TypeError, ValueError) as e:
        # the scheduler returned or raised something JSON cannot carry: answer that instead
        line = protocol.encode_line(protocol.error_response(
            response.get("id"), {"type": type(e).__name__,
                                 "message": f"the answer cannot be sent as JSON: {e}"}))
    stdout.write(line)
    stdout.flush()


def serve(factory: Callable[[int], Any], profile: Profile = FULL, name: str = DEFAULT_NAME,
          stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
    """Answer requests from ``stdin`` on ``stdout`` until ``bye`` or the end of ``stdin``.

    ``factory(max_concurrency)`` makes the scheduler each ``new`` starts; ``profile`` is the
    one declared in the hello, and ops outside it are answered ``Unsupported`` without reaching
    the scheduler. Blank lines are skipped.
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    session = _Session(factory, profile, name)
    for line in stdin:
        if not line.strip():
            continue
        response, done = session.answer(line)
        _write(stdout, response)
        if done:
            return


def serve_stdio(factory: Callable[[int], Any], profile: Profile, name: str) -> None:
    """Serve on this process's stdin and stdout, keeping stdout for the protocol alone."""
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="\n")
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
    # Whatever the served code prints must not land among the answers: send it to stderr.
    sys.stdout = sys.stderr
    serve(factory, profile, name, stdin, stdout)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit status 0, or 2 for a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m refsched.serve",
        description="Serve a scheduler over the conformance protocol on stdin/stdout.")
    parser.add_argument("--impl", metavar="MODULE:FACTORY",
                        help="the scheduler factory to serve (default: refsched:TaskScheduler)")
    parser.add_argument("--profile", metavar="JSON",
                        help="the capability profile to declare, a JSON object "
                             "(default: the full contract)")
    parser.add_argument("--name", help="the name given in the hello answer")
    args = parser.parse_args(argv)
    try:
        profile = FULL if args.profile is None else Profile.from_json(json.loads(args.profile))
    except (ValueError, ProfileError) as e:
        parser.error(f"--profile: {e}")
    factory: Callable[[int], Any]
    if args.impl is None:
        from refsched import TaskScheduler
        factory = TaskScheduler
    else:
        # refsched.cli imports the verification tooling: load it only when it is needed
        from refsched.cli import load_factory
        try:
            factory = load_factory(args.impl)
        except ValueError as e:
            parser.error(str(e))
    serve_stdio(factory, profile, args.name or args.impl or DEFAULT_NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
