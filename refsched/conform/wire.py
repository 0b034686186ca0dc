"""The protocol's operations for the systems beyond the TaskScheduler: one table per system.

The dependency scheduler's operations are stated in :mod:`refsched.conform.dag.wire`. The timer,
the pool and the durable scheduler each state theirs here as a :class:`Wire`: per operation, the
arguments it carries (in the order of the call it makes), their defaults, and the type of its
result, which :mod:`refsched.conform.values` encodes and checks. From one table come both sides:

- the server's (:mod:`refsched.serve` ``--system NAME``): an op's arguments are checked against
  the table, then passed to the served instance's method of the op's name;
- the oracle's (:mod:`refsched.conform.client`): :class:`Remote` is an object with one method per
  op that sends it and decodes its answer; each system's remote class gives those methods the
  signatures of the API the system's replay and lock-step machine drive, so both run over the
  wire unchanged.

The modules ``timer/wire.py``, ``pool/wire.py`` and ``durable/wire.py`` hold the three tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar, cast

from refsched.conform import values
from refsched.conform.protocol import Connection, WireError

__all__ = ["SYSTEMS", "Op", "Remote", "Wire", "get", "lazy"]

_Snapshot = TypeVar("_Snapshot")
_Stats = TypeVar("_Stats")

SYSTEMS: Final = ("scheduler", "timer", "pool", "durable")
"""The systems the protocol speaks of, the first the default (its ops in ``dag.wire.OPS``)."""

# arguments that name a task or a worker: strings on the wire, as the TaskScheduler's ids are
_NAMES: Final = frozenset({"task", "worker", "thief", "victim"})

_MODULES: Final = {"timer": "refsched.conform.timer.wire", "pool": "refsched.conform.pool.wire",
                   "durable": "refsched.conform.durable.wire"}


@dataclass(frozen=True)
class Op:
    """One operation: its arguments, in the order of the call, and its result's type."""

    args: tuple[str, ...] = ()  # arguments it must carry
    optional: Mapping[str, Any] = field(default_factory=dict)  # may be left out: their value
    result: Any = None  # the ok result's type (refsched's annotation); None: always null
    flag: str | None = None  # the profile flag that must be true for the op to be asked

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.args, *self.optional)


@dataclass(frozen=True)
class Wire:
    """A system's operations, and how each side makes an instance.

    ``new`` is the ``new`` request's arguments; ``serve(factory, **args)`` makes the instance
    the server drives, whose methods are named as the ops; ``default_factory()`` is refsched's
    own implementation, which ``serve`` is given unless told otherwise; ``remote`` is the
    oracle's class for one instance; ``paired`` puts the reference model beside each instance
    the checks make, so that a counterexample shows both answers to each call.
    """

    system: str
    title: str  # the served implementation's name in the hello
    new: Op
    ops: Mapping[str, Op]
    serve: Callable[..., Any]
    default_factory: Callable[[], Callable[..., Any]]
    remote: type[Remote[Any, Any]]
    errors: Mapping[str, type[Exception]] = field(default_factory=dict)  # beyond refsched.errors
    # a method of the API the checks drive -> its op, where the names differ (the pool's
    # submit_external is the op submit)
    op_of: Mapping[str, str] = field(default_factory=dict)
    # paired(factory, pair, profile): a factory called as the checks call ``factory``, each
    # instance pair(implementation, model, clock=...) of an instance from ``factory`` and the
    # reference model made alike, which answers each call as the model does under the profile
    # (the counterexample's rows)
    paired: Callable[..., Callable[..., Any]] | None = None

    def check(self, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """``args`` with defaults filled in. Errors: missing or unknown ones, a task or worker
        that is not a string -> ``WireError``."""
        spec = self.new if op == "new" else self.ops[op]
        missing = [a for a in spec.args if a not in args]
        unknown = sorted(set(args) - set(spec.names))
        if missing or unknown:
            raise WireError(f"{op}: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else [])
                + ([f"unknown {', '.join(unknown)}"] if unknown else [])))
        for name in _NAMES & set(args):
            if not isinstance(args[name], str):
                raise WireError(f"{op}: {name} is a string, not {args[name]!r}"[:200])
        return {**spec.optional, **args}

    def call(self, instance: Any, op: str, args: Mapping[str, Any]) -> Any:
        """The served instance's answer to ``op``, as JSON."""
        spec = self.ops[op]
        return values.to_json(getattr(instance, op)(*(args[n] for n in spec.names)))


class Remote(Generic[_Snapshot, _Stats]):
    """One instance inside an implementation over the protocol, for the oracle's side.

    Subclasses give the system's API; each method is one request through :meth:`_call`. An
    error answer raises the refsched exception of that name (or the wire's own), a result of
    the wrong shape is a protocol violation. Every system's instance answers ``snapshot`` and
    ``stats``, of the types it is a ``Remote`` of.
    """

    wire: Wire

    def __init__(self, implementation: Connection, **new: Any) -> None:
        self._impl = implementation
        self._instance = implementation.new_instance(**new)

    def _call(self, op: str, **args: Any) -> Any:
        impl = self._impl
        if impl.instance != self._instance:
            raise RuntimeError(f"{op}: this instance was replaced by a later new()")
        value = impl.request(op, **args)
        result = self.wire.ops[op].result
        return impl.decoded(op, lambda: values.from_json(
            type(None) if result is None else result, value, f"{op}'s result"))

    def check_invariants(self) -> None:
        """Nothing: an implementation's internals are not visible over the wire."""

    def snapshot(self) -> _Snapshot:
        return cast(_Snapshot, self._call("snapshot"))

    def stats(self) -> _Stats:
        return cast(_Stats, self._call("stats"))


def lazy(path: str) -> Callable[[], Callable[..., Any]]:
    """A wire's ``default_factory``: the implementation ``module:attribute`` names, imported
    when first asked for (the oracle's side never needs it)."""
    module, _, attribute = path.partition(":")

    def default() -> Callable[..., Any]:
        factory: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
        return factory
    return default


def get(system: str) -> Wire:
    """The wire of ``system`` (``timer``, ``pool``, ``durable``)."""
    try:
        module = _MODULES[system]
    except KeyError:
        raise ValueError(f"no wire for {system!r}; the systems are "
                         f"{', '.join(_MODULES)}") from None
    wire: Wire = importlib.import_module(module).WIRE
    return wire
