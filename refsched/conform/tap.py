"""refsched's own server, writing down every request it reads and every answer it gives.

``python -m refsched.conform.tap RECORD [--system NAME]`` serves refsched's implementation of
the system under the full contract, as ``python -m refsched.serve --system NAME`` does, and
appends to the file ``RECORD`` each request line and then its answer line, exactly as they
crossed the wire. :mod:`refsched.conform.vectors` turns the record of a corpus replay into
test vectors.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from typing import IO, Any, TextIO, cast

from refsched.conform.server import DEFAULT_NAME, serve
from refsched.conform.wire import SYSTEMS
from refsched.conform.wire import get as get_wire
from refsched.profile import full_profile

__all__ = ["main"]


class _Tee:
    """A text stream that also appends what passes through it to the record."""

    def __init__(self, stream: IO[str], record: IO[str]) -> None:
        self._stream = stream
        self._record = record

    def readline(self, size: int = -1) -> str:
        line = self._stream.readline(size)
        self._record.write(line if line.endswith("\n") or not line else line + "\n")
        return line

    def write(self, text: str) -> int:
        self._record.write(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._record.flush()  # the record first: it must hold every answer the client read
        self._stream.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve and record until ``bye`` or the end of stdin; exit status 0 (2: usage error)."""
    parser = argparse.ArgumentParser(
        prog="python -m refsched.conform.tap",
        description="Serve refsched's own implementation over the conformance protocol, "
                    "appending every request and answer line to RECORD.")
    parser.add_argument("record", metavar="RECORD", help="the file the lines are appended to")
    parser.add_argument("--system", choices=SYSTEMS, default=SYSTEMS[0])
    args = parser.parse_args(argv)
    factory: Any
    if args.system == "scheduler":
        from refsched import TaskScheduler
        wire, factory, name = None, TaskScheduler, DEFAULT_NAME
    else:
        wire = get_wire(args.system)
        factory, name = wire.default_factory(), wire.title
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape",
                             newline="\n")
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
    sys.stdout = sys.stderr  # whatever the served code prints stays out of the answers
    with open(args.record, "a", encoding="utf-8", newline="\n") as record:
        serve(factory, full_profile(args.system), name, cast(TextIO, _Tee(stdin, record)),
              cast(TextIO, _Tee(stdout, record)), wire=wire)
    return 0


if __name__ == "__main__":
    sys.exit(main())
