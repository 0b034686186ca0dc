"""The argparse types of refsched's commands (``refsched ...``, the worker, the soak), one set,
and the check that an output file can be written.

A module of its own, importing nothing of refsched, so a worker process starts without loading
the verification tools that ``refsched.cli`` brings.
"""

from __future__ import annotations

import argparse
import math
import os
import threading
from pathlib import Path

__all__ = ["non_negative_int", "positive_int", "positive_seconds", "unwritable"]


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 1")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 0")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (and within what a wait can take)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= threading.TIMEOUT_MAX):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of seconds")
    return value


def unwritable(out: Path) -> str | None:
    """Why ``out`` cannot be written (None if it seems it can), checked before recording."""
    if out.is_dir():
        return "it is a directory"
    if not out.parent.is_dir():
        return f"no folder {out.parent}"
    if not os.access(out.parent, os.W_OK | os.X_OK) or (out.exists()
                                                        and not os.access(out, os.W_OK)):
        return "permission denied"
    return None
