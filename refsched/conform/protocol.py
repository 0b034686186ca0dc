"""The conformance wire protocol: JSON lines between the oracle and an implementation.

Pure encoding and decoding, shared by the serving side (:mod:`refsched.serve`) and the driving
side (:mod:`refsched.conform.client`), whatever the system: a message as one line, a request's
envelope (its id and op), ok and error answers, and errors as the exceptions of
:mod:`refsched.errors`. ``docs/conformance.md`` states the protocol; each system's operations
are stated in its own ``wire.py`` (``refsched/conform/<system>/wire.py``).
"""

from __future__ import annotations

import graphlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol, TypeVar, cast

from refsched import errors

__all__ = [
    "PROTOCOL_VERSION",
    "Connection",
    "ForeignError",
    "Request",
    "Unsupported",
    "WireError",
    "cut_repr",
    "cut_text",
    "decode_envelope",
    "decode_line",
    "encode_line",
    "error_from_json",
    "error_response",
    "error_to_json",
    "ok_response",
    "request",
    "show_cut",
]

PROTOCOL_VERSION: Final = 1

_T = TypeVar("_T")


class Connection(Protocol):
    """An open connection to an implementation, as one instance's remote object uses it
    (:class:`refsched.conform.client.ProtocolImplementation` is one): the wire's remote
    classes need no more, and so need not know the client."""

    @property
    def instance(self) -> int:
        """The number of the current instance (how many ``new`` requests succeeded)."""
        ...

    def new_instance(self, **args: Any) -> int:
        """Send ``new`` with ``args``; the number of the instance it started."""
        ...

    def request(self, op: str, **args: Any) -> Any:
        """Send ``op`` to the current instance; the ok answer's result."""
        ...

    def decoded(self, op: str, decode: Callable[[], _T]) -> _T:
        """``decode()``, a malformed result becoming a protocol violation."""
        ...


# error type name on the wire -> the refsched exception it decodes to
_ERRORS: Final[Mapping[str, type[Exception]]] = {
    name: cls for name in errors.__all__
    if isinstance(cls := getattr(errors, name), type) and issubclass(cls, Exception)
}


class WireError(ValueError):
    """A line, a message or a result that does not have the protocol's shape.

    ``request_id`` is the id of the request it belongs to, when that much could be read.
    """

    def __init__(self, message: str, request_id: int | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class ForeignError(Exception):
    """An error answer whose type is not one of refsched's (``ValueError``, ``KeyError``, ...).

    It is an answer like any other: the implementation raised something refsched never does.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


class Unsupported(Exception):
    """The operation is outside the implementation's capability profile (wire type ``Unsupported``).

    Adapters raise it for calls they cannot map onto the scheduler they wrap.
    """


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request: its id, its op and its arguments (defaults filled in)."""

    id: int
    op: str
    args: Mapping[str, Any]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# ------------------------------------------------------------------ lines

def encode_line(message: Mapping[str, Any]) -> str:
    """One message as one line of JSON, newline included, in ASCII.

    Every string travels, a lone surrogate (``"\\ud800"``) included: whatever is not ASCII is
    written as a JSON escape, so the line is valid UTF-8 whatever it carries. Errors: a value
    JSON cannot carry (a NaN, an object, lists nested too deeply) -> ``TypeError``,
    ``ValueError`` or ``RecursionError``.
    """
    # json.dumps escapes every control character, so the text never holds a raw newline.
    return json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")) + "\n"


def decode_line(line: bytes | str) -> dict[str, Any]:
    """The JSON object one line holds.

    A ``str`` line must be text UTF-8 can carry (no lone surrogate, as reading invalid UTF-8
    with ``errors="surrogateescape"`` gives); a lone surrogate written as a JSON escape is a
    string like any other. Errors: not UTF-8, not JSON (``NaN`` and ``Infinity`` included),
    nested too deeply for the parser, not an object -> WireError.
    """
    try:
        if isinstance(line, bytes):
            text = line.decode("utf-8")
        else:
            text = line
            if not text.isascii():
                text.encode("utf-8")  # raises on a lone surrogate: the line was not UTF-8
    except UnicodeDecodeError as e:
        raise WireError(f"not a line of JSON: {cut_repr(line)} (not UTF-8: {e.reason} at byte "
                        f"{e.start})") from None
    except UnicodeEncodeError as e:
        raise WireError(f"not a line of JSON: {cut_repr(line)} (not UTF-8: a lone surrogate "
                        f"{e.object[e.start]!r} at character {e.start})") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise WireError(f"not a line of JSON: {cut_repr(line)} ({cut_text(str(e))})") from None
    except RecursionError:
        raise WireError(f"not a line of JSON the parser can read: {cut_repr(line)} (nested too "
                        "deeply)") from None
    if not isinstance(value, dict):
        raise WireError(f"not a JSON object: {cut_repr(line)}")
    return value


def cut_repr(line: bytes | str, width: int = 120) -> str:
    """``repr(line)`` cut to ``width`` characters, reading no more of ``line`` than that."""
    text = repr(line[:width + 1])
    return text if len(text) <= width else text[:width - 3] + "..."


def cut_text(text: str, width: int = 200) -> str:
    """``text`` cut to ``width`` characters."""
    return text if len(text) <= width else text[:width - 3] + "..."


def show_cut(value: object, width: int = 120) -> str:
    """``repr(value)`` cut to ``width`` characters, for a value read off the wire."""
    try:
        text = repr(value)
    except RecursionError:
        return f"a {type(value).__name__} nested too deeply to show"
    return text if len(text) <= width else text[:width - 3] + "..."


# ------------------------------------------------------------------ requests

def request(request_id: int, op: str, **args: Any) -> dict[str, Any]:
    """The request object ``{"id": request_id, "op": op, ...args}``."""
    return {"id": request_id, "op": op, **args}


def decode_envelope(message: Mapping[str, Any]) -> Request:
    """A request's id, op and arguments, the arguments unchecked (each system checks its own).

    Errors: no int ``id``, no str ``op`` -> ``WireError``.
    """
    request_id = message.get("id")
    if not _is_int(request_id):
        raise WireError(f"a request needs an integer id, not {show_cut(request_id)}")
    assert isinstance(request_id, int)
    op = message.get("op")
    if not isinstance(op, str):
        raise WireError(f"a request needs a string op, not {show_cut(op)}", request_id)
    return Request(request_id, op, {k: v for k, v in message.items() if k not in ("id", "op")})


# ------------------------------------------------------------------ responses

def ok_response(request_id: int, result: Any) -> dict[str, Any]:
    """The answer ``{"id": request_id, "ok": result}``."""
    return {"id": request_id, "ok": result}


def error_response(request_id: int | None, error: Mapping[str, Any]) -> dict[str, Any]:
    """The answer ``{"id": request_id, "error": error}`` (``error`` from :func:`error_to_json`)."""
    return {"id": request_id, "error": dict(error)}


def error_to_json(exc: BaseException) -> dict[str, Any]:
    """An exception as an error object: its class name, its message and what identifies it.

    A cycle error (refsched's, or graphlib's as graphlib raised it) carries ``cycle``; refsched's
    also ``cycles``; an ``UnknownDependencyError`` its ``missing`` pairs; a
    ``StaleGenerationError`` the ``generation`` named and the ``current`` one (a
    ``StaleLeaseError`` also the ``attempt`` named and the ``current_attempt``); an
    ``Unsupported`` has the type ``Unsupported``.
    """
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, graphlib.CycleError):
        # graphlib.CycleError carries (message, cycle) as its arguments, and refsched's keeps
        # them there too: both answer the cycle exactly as the scheduler found it.
        if exc.args and isinstance(exc.args[0], str):
            error["message"] = exc.args[0]
        error["cycle"] = list(exc.args[1]) if len(exc.args) > 1 else []
        if isinstance(exc, errors.CycleError):
            error["cycles"] = [list(c) for c in exc.cycles]
    elif isinstance(exc, errors.UnknownDependencyError):
        error["missing"] = [[t, d] for t, d in exc.missing]
    elif isinstance(exc, errors.StaleGenerationError):
        error["generation"] = exc.generation
        error["current"] = exc.current
        if isinstance(exc, errors.StaleLeaseError):
            error["attempt"] = exc.attempt
            error["current_attempt"] = exc.current_attempt
    elif isinstance(exc, errors.InvariantViolation):
        error["invariant"] = exc.invariant
    return error


def error_from_json(error: Any) -> Exception:
    """The exception an error object stands for.

    A refsched error type gives that very class (a ``CycleError`` with its ``cycle`` and
    ``cycles``); ``Unsupported`` gives :class:`Unsupported`; any other type a
    :class:`ForeignError`. Errors: not an object with a string ``type`` and ``message``, a
    ``CycleError`` without a list ``cycle``, a ``StaleGenerationError`` without int
    ``generation`` and ``current`` (a ``StaleLeaseError`` also ``attempt`` and
    ``current_attempt``) -> ``WireError``.
    """
    if not isinstance(error, dict):
        raise WireError(f"an error must be an object, not {error!r}")
    type_name = error.get("type")
    message = error.get("message")
    if not isinstance(type_name, str) or not isinstance(message, str):
        raise WireError(f"an error needs a string type and message: {error!r}")
    if type_name == "Unsupported":
        return Unsupported(message)
    cls = _ERRORS.get(type_name)
    if cls is None:
        return ForeignError(type_name, message)
    if cls is errors.CycleError:
        cycle = error.get("cycle")
        if not isinstance(cycle, list) or not all(isinstance(t, str) for t in cycle):
            raise WireError(f"a CycleError needs a cycle, a list of task ids: {error!r}")
        cycles = error.get("cycles", [cycle])
        if not (isinstance(cycles, list) and cycles and cycles[0] == cycle and all(
                isinstance(c, list) and all(isinstance(t, str) for t in c) for c in cycles)):
            raise WireError(f"a CycleError's cycles must be lists of task ids, the first its "
                            f"cycle: {error!r}")
        return errors.CycleError(message, cycles)
    if cls is errors.UnknownDependencyError:
        missing = error.get("missing", [])
        if not (isinstance(missing, list) and all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(t, str) for t in p)
                for p in missing)):
            raise WireError(f"an UnknownDependencyError's missing must be [task, dep] pairs: "
                            f"{error!r}")
        return errors.UnknownDependencyError(message, [(t, d) for t, d in missing])
    if cls is errors.StaleGenerationError or cls is errors.StaleLeaseError:
        fields = (("generation", "current", "attempt", "current_attempt")
                  if cls is errors.StaleLeaseError else ("generation", "current"))
        numbers = [error.get(name) for name in fields]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            raise WireError(f"a {type_name} needs {', '.join(fields)}, as ints: {error!r}")
        return cls(message, None, *cast(list[int], numbers))
    if cls is errors.InvariantViolation:
        # its constructor builds the message from the invariant's name; keep the message sent
        violation = errors.InvariantViolation.__new__(errors.InvariantViolation)
        AssertionError.__init__(violation, message)
        invariant = error.get("invariant")
        violation.invariant = invariant if isinstance(invariant, str) else ""
        return violation
    return cls(message)
