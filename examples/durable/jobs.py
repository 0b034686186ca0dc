"""The functions of the durable example: what ``refsched worker`` runs.

A worker finds each function by the name the task was submitted with (``"jobs:fetch"``),
importing the module from its own working directory or ``PYTHONPATH``: start workers in this
folder. Arguments come from the task's JSON ``args``; the return value must be JSON too.
"""

from __future__ import annotations

import time


def fetch(url: str) -> dict[str, object]:
    """Pretend to download ``url`` (no network in an example)."""
    return {"url": url, "size": 100 * len(url)}


def parse(pages: int) -> int:
    """Pretend to parse what fetch downloaded."""
    return pages * 2


def slow(seconds: float) -> float:
    """Take ``seconds``: long enough to watch it run with ``refsched status``."""
    time.sleep(seconds)
    return seconds


def broken(path: str) -> None:
    """Fail, as real code does: the error and its traceback are kept in the store."""
    with open(path, encoding="utf-8") as f:  # the file does not exist
        f.read()


def report() -> str:
    """Runs only once parse, broken and slow have all succeeded: here, never."""
    return "all done"


def remind(who: str) -> str:
    """A delayed job: what `later.py` submits to run a few seconds from now."""
    return f"reminded {who}"


def tidy() -> int:
    """A recurring job: what `later.py`'s schedule runs at each of its slots."""
    return 0
