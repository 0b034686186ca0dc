"""Callables named by text: ``module:function`` (a durable task), ``module:factory`` (``--impl``).

A module of its own, importing nothing of refsched, so a worker process resolves a task's
function without loading the command line's tools.
"""

from __future__ import annotations

import importlib
import reprlib
from collections.abc import Callable
from typing import Any

__all__ = ["FactoryError", "UnusableName", "guarded_factory", "import_callable", "load_factory"]


class UnusableName(ValueError):
    """A ``module:attribute`` name that does not lead to a callable; the message says why."""


def import_callable(module_name: str, path: str) -> Callable[..., Any]:
    """The callable at the dotted ``path`` inside the module ``module_name``.

    Raises :class:`UnusableName` saying which part failed. Any exception the module's own import
    raises counts: the name is unusable either way, and the caller reports it as such.
    """
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as e:
        raise UnusableName(f"cannot import {module_name!r}: {e!r}") from None
    for part in path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UnusableName(f"{module_name!r} has no {path!r}") from None
    if not callable(target):
        raise UnusableName(f"{path!r} is not callable")
    found: Callable[..., Any] = target
    return found


class FactoryError(Exception):
    """An ``--impl`` factory raised instead of returning an implementation."""


def load_factory(spec: str) -> Callable[..., Any]:
    """``module:attribute`` -> the callable it names (a scheduler class or factory).

    ``ValueError`` (a usage error for the commands) when ``spec`` names none.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"--impl {spec!r}: expected MODULE:FACTORY, e.g. refsched:TaskScheduler")
    try:
        return import_callable(module_name, attribute)
    except UnusableName as e:
        raise ValueError(f"--impl {spec!r}: {e}") from None


def guarded_factory(spec: str, factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory``, raising :class:`FactoryError` (naming ``spec``, the call and the error)
    for any exception it raises, or a ``SystemExit``: a broken factory is a usage error, not a
    divergence of the implementation and not a traceback."""
    def build(*args: Any, **kwargs: Any) -> Any:
        try:
            return factory(*args, **kwargs)
        except (Exception, SystemExit) as error:
            call = ", ".join([*map(reprlib.repr, args),
                              *(f"{k}={reprlib.repr(v)}" for k, v in kwargs.items())])
            raise FactoryError(f"--impl {spec}: {spec}({call}) raised "
                               f"{type(error).__name__}: {error}") from error
    build.__wrapped__ = factory  # type: ignore[attr-defined]  # a stepped pool needs the class
    return build
