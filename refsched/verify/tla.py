"""TLA+ values as TLC prints them, read into Python values and written back.

TLC prints a state as ``/\\ var = value`` lines (in error traces and in ``-dump dot`` labels).
The values the specs here use map to Python as follows, and :func:`render` writes them back
as TLA+ expressions (for generated trace modules):

==========================  ==========================================
TLA+                        Python
==========================  ==========================================
``TRUE``, ``FALSE``         ``bool``
``42``, ``-1``              ``int``
``"text"``                  ``str``
``a`` (a model value)       :class:`ModelValue`
``{x, y}``                  ``frozenset``
``<<x, y>>``                ``tuple``
``(k1 :> v1 @@ k2 :> v2)``  :class:`Function` (an immutable mapping)
``[f |-> v]``               :class:`Function` with ``str`` keys
==========================  ==========================================

TLC 2.15 reads a string literal of printable ASCII only (a CJK letter, a raw CR or U+2028 is
a lexical error) with few escapes, so :func:`render` writes every string through
:func:`encode_string`: a one-to-one ASCII form, the identity on the specs' own strings
(``"absent"``, action names), so that two strings are equal in TLA+ exactly when they are
equal in Python.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Function",
    "ModelValue",
    "TLAParseError",
    "decode_string",
    "encode_string",
    "parse_state",
    "parse_value",
    "render",
]


class TLAParseError(ValueError):
    """Text that is not a TLA+ value of the kinds listed in this module."""


@dataclass(frozen=True, slots=True, order=True)
class ModelValue:
    """A TLC model value: a constant equal only to itself (``NoTask``, the ids ``a``, ``b``)."""

    name: str

    def __repr__(self) -> str:
        return self.name


class Function(Mapping[Any, Any]):
    """An immutable, hashable TLA+ function (or record): equal when the mappings are equal."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[Any, Any] | None = None) -> None:
        self._items: dict[Any, Any] = dict(items or {})
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __repr__(self) -> str:
        return "(" + " @@ ".join(f"{k!r} :> {v!r}" for k, v in self._items.items()) + ")"


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<int>-?\d+)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct><<|>>|:>|@@|\|->|[{}()\[\],=]|/\\)
    )""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "f": "\f"}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].isspace():
                break
            raise TLAParseError(f"unexpected text at {pos}: {text[pos:pos + 30]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise TLAParseError(f"unexpected end of {self.text[:60]!r}")
        token = self.tokens[self.pos]
        if expected is not None and token[1] != expected:
            raise TLAParseError(f"expected {expected!r}, found {token[1]!r} in {self.text[:60]!r}")
        self.pos += 1
        return token

    def items(self, close: str) -> list[Any]:
        values: list[Any] = []
        if self.peek() == close:
            self.take(close)
            return values
        while True:
            values.append(self.value())
            if self.take()[1] == close:
                return values
            if self.tokens[self.pos - 1][1] != ",":
                raise TLAParseError(f"expected ',' or {close!r} in {self.text[:60]!r}")

    def value(self) -> Any:
        kind, token = self.take()
        if kind == "int":
            return int(token)
        if kind == "string":
            return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), token[1:-1])
        if kind == "word":
            if token in ("TRUE", "FALSE"):
                return token == "TRUE"
            return ModelValue(token)
        if token == "{":
            return frozenset(self.items("}"))
        if token == "<<":
            return tuple(self.items(">>"))
        if token == "(":
            pairs: dict[Any, Any] = {}
            while True:
                key = self.value()
                self.take(":>")
                pairs[key] = self.value()
                if self.take()[1] == ")":
                    return Function(pairs)
                if self.tokens[self.pos - 1][1] != "@@":
                    raise TLAParseError(f"expected '@@' or ')' in {self.text[:60]!r}")
        if token == "[":
            fields: dict[str, Any] = {}
            while True:
                name = self.take()
                if name[0] != "word":
                    raise TLAParseError(f"expected a field name, found {name[1]!r}")
                self.take("|->")
                fields[name[1]] = self.value()
                if self.take()[1] == "]":
                    return Function(fields)
                if self.tokens[self.pos - 1][1] != ",":
                    raise TLAParseError(f"expected ',' or ']' in {self.text[:60]!r}")
        raise TLAParseError(f"unexpected {token!r} in {self.text[:60]!r}")


def parse_value(text: str) -> Any:
    """The Python value of one TLA+ value as TLC prints it."""
    parser = _Parser(text)
    value = parser.value()
    if parser.peek() is not None:
        raise TLAParseError(f"trailing text after a value: {text[:60]!r}")
    return value


def parse_state(text: str) -> dict[str, Any]:
    """A state printed as ``/\\ var = value`` lines, as a dict from variable name to value."""
    parser = _Parser(text)
    state: dict[str, Any] = {}
    while parser.peek() is not None:
        parser.take("/\\")
        kind, name = parser.take()
        if kind != "word":
            raise TLAParseError(f"expected a variable name, found {name!r}")
        parser.take("=")
        state[name] = parser.value()
    return state


# Kept as they are by encode_string: letters, digits and punctuation that neither ends a TLA+
# string nor starts an escape or a comment ('"', '\\', '(', ')', '*' are encoded, as is '%').
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                   " !#$&'+,-./:;<=>?@[]^_`{|}~")


def encode_string(text: str) -> str:
    """``text`` as printable ASCII that a TLA+ string literal holds as it is: each character
    outside a plain set (letters, digits, most punctuation) as ``%XX`` per UTF-8 byte, as in a
    URL. One-to-one (:func:`decode_string` undoes it), and the identity on plain text.

    Lone surrogates (which JSON can carry) are encoded as their three bytes.
    """
    if all(c in _PLAIN for c in text):
        return text
    out: list[str] = []
    for c in text:
        if c in _PLAIN:
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
    return "".join(out)


def decode_string(text: str) -> str:
    """The text :func:`encode_string` encoded as ``text``."""
    return re.sub(r"(?:%[0-9A-F]{2})+",
                  lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode(
                      "utf-8", "surrogatepass"), text)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render(value: Any, *, readable: bool = False) -> str:
    """``value`` as a TLA+ expression TLC reads; sets and functions in a stable (sorted) order.

    Strings are written through :func:`encode_string`. With ``readable``, for people, they are
    written as they are (quotes, backslashes and newlines escaped): :func:`parse_value` reads
    that back, but TLC may not.
    """
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _quoted(value if readable else encode_string(value))
    if isinstance(value, ModelValue):
        return value.name
    if isinstance(value, frozenset | set):
        return "{" + ", ".join(sorted(render(v, readable=readable) for v in value)) + "}"
    if isinstance(value, tuple | list):
        return "<<" + ", ".join(render(v, readable=readable) for v in value) + ">>"
    if isinstance(value, Mapping):
        if not value:
            return "<<>>"
        pairs = sorted((render(k, readable=readable), render(v, readable=readable))
                       for k, v in value.items())
        return "(" + " @@ ".join(f"{k} :> {v}" for k, v in pairs) + ")"
    raise TypeError(f"no TLA+ value for {value!r} ({type(value).__name__})")
