"""What every system's lock-step machine shares: how Hypothesis runs it, what a walk over the
model's actions counts, and the disagreement a walk ends with.

Each system's machine (``refsched.verify.<system>.lockstep``) says its calls and how it
compares them; :func:`run_machine` runs it with the settings every one chooses (no deadline,
no example database, no explain phase), :class:`WalkLedger` counts the steps of walks per
action, and :class:`WalkDisagreement` carries where a walk parted from the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from refsched.verify.itf import Trace

__all__ = ["CallLedger", "WalkDisagreement", "WalkLedger", "run_machine"]


def run_machine(machine: type[RuleBasedStateMachine], *, examples: int, steps: int,
                seed: int | None, overrides: Mapping[str, Any] | None = None,
                shrink: bool = True, slow: bool = False, **options: Any) -> None:
    """Run ``machine`` for ``examples`` examples of up to ``steps`` steps each.

    ``seed`` fixes Hypothesis's random choices (a run with the same seed makes the same calls);
    ``shrink`` false skips shrinking (a quicker verdict); ``slow`` suppresses the health check
    of slow data generation (a machine whose calls are slow is not a bad test); ``options`` add
    settings; ``overrides`` (the caller's) replace any of them. Hypothesis's explain phase is
    skipped: it reruns the shrunk run under a tracer to annotate its lines, which costs more
    than finding and shrinking the failure, and the machine's listing of its calls says what
    the run did.
    """
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    skipped = {Phase.explain} if shrink else {Phase.explain, Phase.shrink}
    chosen: dict[str, Any] = {
        "max_examples": examples, "stateful_step_count": steps, "deadline": None,
        "database": None, "phases": [p for p in Phase if p not in skipped],
        # one failure, shrunk, and the blob that replays it: what a lock-step verdict reports
        "report_multiple_bugs": False, "print_blob": True, **options}
    if slow:
        chosen["suppress_health_check"] = [HealthCheck.too_slow]
    chosen.update(overrides or {})
    # typed through cast: Hypothesis releases differ on whether this function is annotated
    run = cast(Callable[..., None], run_state_machine_as_test)
    with _drawn_without_local_constants() if seed is not None else _nothing():
        run(machine, settings=settings(**chosen))


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def _drawn_without_local_constants() -> Iterator[None]:
    """Hypothesis (from 6.131) now and then draws a literal found in the source of the modules
    the process has loaded from outside site-packages. Which modules those are depends on what
    ran before in the process (a test module, a caller's script), so a seed would make different
    calls in different processes. A seeded run draws from Hypothesis's own constants alone; on a
    release without these internals there is nothing to set aside."""
    try:
        from hypothesis.internal.conjecture import providers
        loaded = providers._get_local_constants
        cache = providers.CONSTANTS_CACHE.cache
        none = providers.Constants()  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        yield
        return
    cache.clear()  # pools computed with the local constants
    providers._get_local_constants = lambda: none
    try:
        yield
    finally:
        providers._get_local_constants = loaded
        cache.clear()


@dataclass
class WalkLedger:
    """What the random walks took: examples, and steps per action (refusals by their error)."""

    ACTIONS: ClassVar[Iterable[str]] = ()  # the model's actions, which a walk should take

    examples: int = 0
    actions: Counter[str] = field(default_factory=Counter)

    @property
    def calls(self) -> int:
        """Steps taken and calls refused, over every walk."""
        return sum(self.actions.values())

    def missing(self) -> list[str]:
        """The actions no walk took."""
        return [name for name in self.ACTIONS if self.actions[name] == 0]

    def summary(self) -> str:
        taken = ", ".join(f"{name} {n:,}" for name, n in sorted(self.actions.items()))
        return f"{self.examples:,} examples; steps: {taken}"


class CallLedger:
    """What lock-step runs exercised: calls, the spec actions taken, and notable steps.

    A check that never takes an action cannot find a bug in it; the ledger shows which were
    taken and how often. A machine's ledger names the model's actions (``ACTIONS``) and the
    notable steps it looks for (``EVENTS``), and records each call its own way.
    """

    ACTIONS: ClassVar[Iterable[str]] = ()
    EVENTS: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.examples = 0
        self.calls = 0
        self.actions: Counter[str] = Counter()
        self.events: Counter[str] = Counter()
        self.methods: Counter[str] = Counter()  # the API calls made, by method

    def missing(self) -> list[str]:
        """Spec actions and notable steps the runs never exercised."""
        return ([a for a in self.ACTIONS if not self.actions[a]]
                + [e for e in self.EVENTS if not self.events[e]])

    def events_summary(self) -> str:
        """How often each notable step was seen, in :attr:`EVENTS` order."""
        return ", ".join(f"{name} {self.events[name]:,}" for name in self.EVENTS)


class WalkDisagreement(AssertionError):
    """A walk and the model parted: what the walk did so far, and where they differ.

    ``reason`` says how; ``walk`` is what the walk did as people read it, up to and including
    the failing move (its subclass names it: ``steps``, ``calls``); ``trace`` is the model's
    spec steps along the walk, from ``Init``; ``states`` the model's and the implementation's
    where they parted.
    """

    heading: ClassVar[str] = "steps"

    def __init__(self, reason: str, walk: Iterable[str], trace: Trace,
                 states: tuple[Any, Any] = (None, None)) -> None:
        moves = tuple(walk)
        listing = "\n".join(f"  {i}. {s}" for i, s in enumerate(moves, start=1))
        super().__init__(f"{reason}\n{self.heading}:\n{listing}")
        self.reason = reason
        self.walk = moves
        self.trace = trace
        self.states = states
