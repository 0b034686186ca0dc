"""Task functions whose failure text no store can hold as it is (tests/durable/test_failures.py)."""

from __future__ import annotations


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def undecodable_byte() -> None:
    raise ValueError(b"bad \xff byte".decode("utf-8", "surrogateescape"))


def nul() -> None:
    raise ValueError("before \x00 after")


def unprintable() -> None:
    raise Unprintable()
