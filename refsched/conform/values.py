"""refsched's values as JSON and back, by their type annotations.

The timer, pool and durable operations of the protocol answer refsched's own value types: a
:class:`~refsched.types.TimerSnapshot`, a :class:`~refsched.types.Due`, a
:class:`~refsched.durable.Lease`, a pool's :class:`~refsched.model.pool.PoolSnapshot`. Rather
than one encoder per type, every one of them travels by the same rules, read off its
annotations, so the wire form of a type is exactly its fields:

==============================  ==============================================================
Python                          JSON
==============================  ==============================================================
dataclass, NamedTuple           an object of its fields (a field typed as a callable stays
                                behind: a function cannot be sent, and decodes as None; a
                                dataclass field whose metadata names ``"absent_as"`` another
                                field may be left out, and then decodes as that one's value;
                                an object with the fields a dataclass subclass adds, marked
                                ``"extension"``, decodes as that subclass)
enum                            its value
tuple, list                     a list
frozenset, set                  a list, sorted (its order means nothing)
mapping                         an object (keys are ids: strings)
task and worker ids             strings
numbers, bool, str, None        themselves
==============================  ==============================================================

:func:`from_json` checks the shape as it decodes: a value of another shape is a
:class:`~refsched.conform.protocol.WireError`, which the oracle reports as a protocol violation.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Hashable, Mapping
from functools import cache
from typing import Any, Literal, Union

from refsched.conform.protocol import WireError

__all__ = ["from_json", "to_json"]


def _is_record(cls: Any) -> bool:
    return isinstance(cls, type) and (dataclasses.is_dataclass(cls) or (
        issubclass(cls, tuple) and hasattr(cls, "_fields")))


@cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """A record's fields that travel, with their types (callables stay behind, and so do
    the dataclass fields whose metadata says ``"wire": False``)."""
    hints = typing.get_type_hints(cls)
    names = (cls._fields if issubclass(cls, tuple)  # type: ignore[attr-defined]
             else tuple(f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                        if f.metadata.get("wire", True)))
    return tuple((name, hints[name]) for name in names if not _is_callable(hints[name]))


@cache
def absent_as(cls: type) -> dict[str, str]:
    """The fields of a record an answer may leave out, each with the field whose value it
    then takes (dataclass metadata ``"absent_as"``): a field added to a value type after
    implementations answered it without."""
    if not dataclasses.is_dataclass(cls):
        return {}
    return {f.name: f.metadata["absent_as"] for f in dataclasses.fields(cls)
            if f.metadata.get("wire", True) and "absent_as" in f.metadata}


@cache
def extensions(cls: type) -> tuple[type, ...]:
    """The dataclass subclasses of ``cls`` that add only fields marked ``"extension"`` (with
    defaults): a value of one travels with those fields, and an object that has them decodes
    as it (a durable snapshot's version with optional edges, an ``OptionalDepsView``)."""
    if not dataclasses.is_dataclass(cls):
        return ()
    names = {f.name for f in dataclasses.fields(cls)}
    # (a dataclass with slots is a new class: the one it replaced is a subclass too, until
    # collected; the one its module names is the type)
    named: list[type] = [
        sub for sub in cls.__subclasses__()
        if getattr(sys.modules.get(sub.__module__), sub.__qualname__, None) is sub]
    return tuple(sub for sub in named if dataclasses.is_dataclass(sub) and all(
        f.metadata.get("extension", False) for f in dataclasses.fields(sub)
        if f.name not in names))


def _has_keys_of(cls: type, value: Any) -> bool:
    """``value`` is an object with every field of ``cls`` that travels, the optional ones
    (``absent_as``) aside, and no other key."""
    if not isinstance(value, dict):
        return False
    names = {n for n, _ in _fields(cls)}
    return names - set(absent_as(cls)) <= set(value) <= names


def _is_callable(hint: Any) -> bool:
    if typing.get_origin(hint) is collections.abc.Callable:
        return True
    return any(typing.get_origin(a) is collections.abc.Callable for a in typing.get_args(hint))


def to_json(value: Any) -> Any:
    """``value`` as JSON: records as objects of their fields, sets as sorted lists."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if _is_record(type(value)):
        kind: type = type(value)
        return {name: to_json(getattr(value, name)) for name, _ in _fields(kind)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted((to_json(v) for v in value), key=_order)
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    raise TypeError(f"{type(value).__name__} cannot be sent as JSON")


def _order(value: Any) -> tuple[str, str]:
    return (type(value).__name__, repr(value))


def from_json(hint: Any, value: Any, where: str = "the result") -> Any:
    """``value``, JSON, as the type ``hint`` (a refsched type's annotation).

    Errors: ``value`` does not have the shape of ``hint`` -> :class:`WireError` naming
    ``where`` and the part that is wrong.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        return _union(args, value, where)
    if origin is Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        raise _wrong(where, f"one of {list(args)}", value)
    if hint is type(None):
        if value is None:
            return None
        raise _wrong(where, "null", value)
    if hint is Hashable or hint is str:
        if isinstance(value, str):
            return value
        raise _wrong(where, "a string", value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _wrong(where, "true or false", value)
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _wrong(where, "an integer", value)
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise _wrong(where, "a number", value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise _wrong(where, f"one of {[m.value for m in hint]}", value) from None
    if _is_record(hint):
        return _record(hint, value, where)
    if origin in (tuple, list, frozenset, set):
        if not isinstance(value, list):
            raise _wrong(where, "a list", value)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _wrong(where, f"a list of {len(args)}", value)
            return tuple(from_json(a, v, f"{where}[{i}]")
                         for i, (a, v) in enumerate(zip(args, value, strict=True)))
        items = [from_json(args[0] if args else Any, v, f"{where}[{i}]")
                 for i, v in enumerate(value)]
        return {tuple: tuple, list: list, frozenset: frozenset, set: set}[origin](items)
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise _wrong(where, "an object", value)
        key_type, value_type = args or (Any, Any)
        return {from_json(key_type, k, where): from_json(value_type, v, f"{where}[{k!r}]")
                for k, v in value.items()}
    raise TypeError(f"{where}: no JSON form for {hint!r}")


def _union(members: tuple[Any, ...], value: Any, where: str) -> Any:
    """The first member of the union ``value`` decodes as; records by their exact keys."""
    if value is None and type(None) in members:
        return None
    for member in members:
        if member is type(None):
            continue
        if _is_record(member) and not _has_keys_of(member, value):
            continue
        try:
            return from_json(member, value, where)
        except WireError:
            continue
    shown = " or ".join("null" if m is type(None) else getattr(m, "__name__", str(m))
                        for m in members)
    raise _wrong(where, shown, value)


def _record(cls: type, value: Any, where: str) -> Any:
    fields = _fields(cls)
    optional = absent_as(cls)
    if isinstance(value, dict) and not set(value) <= {n for n, _ in fields}:
        for sub in extensions(cls):
            if _has_keys_of(sub, value):
                return _record(sub, value, where)
    if not _has_keys_of(cls, value):
        required = [n for n, _ in fields if n not in optional]
        extra = f" (and may have {sorted(optional)})" if optional else ""
        raise _wrong(where, f"an object with exactly the keys {required}{extra}", value)
    decoded = {n: from_json(t, value[n], f"{where}.{n}") for n, t in fields if n in value}
    for name, other in optional.items():
        decoded.setdefault(name, decoded[other])
    missing = _left_behind(cls)
    return cls(**decoded, **missing)


@cache
def _left_behind(cls: type) -> dict[str, None]:
    """The fields that do not travel (callables), each None."""
    hints = typing.get_type_hints(cls)
    return {name: None for name, hint in hints.items() if _is_callable(hint)
            and (not dataclasses.is_dataclass(cls)
                 or name in {f.name for f in dataclasses.fields(cls)})}


def _wrong(where: str, expected: str, value: Any) -> WireError:
    shown = repr(value)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return WireError(f"{where} must be {expected}, not {shown}")


