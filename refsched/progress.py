"""The progress display every long command shows: a live line on a terminal, plain lines in logs."""

from __future__ import annotations

import os
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """A one-line progress display on a terminal; occasional plain lines elsewhere (CI logs)."""

    def __init__(self, stream: TextIO, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.live = stream.isatty() and not os.environ.get("CI")
        self._last = 0.0
        self._width = 0

    def update(self, text: str, force: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.live:
            if force or now - self._last > 0.1:
                line = text[:100]
                self.stream.write("\r" + line.ljust(self._width))
                self._width = len(line)
                self.stream.flush()
                self._last = now
        elif force or now - self._last > 10.0:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last = now

    def clear(self) -> None:
        """Erase the live line, if one shows (before a message of another kind)."""
        if self.live and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
            self.stream.flush()

    def done(self, text: str) -> None:
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
