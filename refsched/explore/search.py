"""Exploring a scenario's schedules: depth-first search with partial-order reduction, sampling.

``explore(scenario, config)`` runs the scenario once per schedule under the controlled runtime.

- ``dfs`` (the default) enumerates the choices depth first, re-running the scenario from the start
  with a longer prefix each time (stateless model checking). Preemption bounding (CHESS) keeps
  only schedules with at most ``max_preemptions`` preemptive context switches, a switch away from
  a thread that could have gone on; switches at blocking points are free.
- The reduction (``reduction=True``) skips schedules that only reorder independent steps: two
  steps are independent when they come from different threads and touch no common object
  (locks, conditions, events, threads, a watched scheduler's history, and the clock for timed
  operations). Dynamic partial-order reduction (Flanagan & Godefroid) tries an alternative only
  where a run showed a race that reversing it could change; without a bound, sleep sets
  (Godefroid) also skip runs equivalent to ones done, so every complete run is a new
  Mazurkiewicz trace. Sleep sets are left out under a preemption bound: a schedule put to sleep
  is covered by an equivalent one that may need more preemptions than the bound allows, and the
  bounded search would miss it. Instead, as in loom (Coons et al., bounded partial-order
  reduction), a racing thread is also tried at the last earlier point where the running thread
  changed, where trying it costs no extra preemption. Independence is only about
  synchronisation, which is sound for code whose shared data is touched under a lock: the
  production code guards every field with one.
- ``random`` and ``pct`` (probabilistic concurrency testing, Burckhardt et al.: random thread
  priorities, ``pct_depth - 1`` random points where the running thread drops to the bottom) sample
  schedules, for scenarios too big to enumerate. Hypothesis can draw the schedule instead
  (``schedules()``, ``pct_schedules()`` with ``run_schedule``), so a failing one shrinks.

Every run has a short schedule id: the choices where it left the default (go on with the current
thread, else the first that can move, timeouts last), as (branch, alternative) pairs in base32.
``replay(scenario, id)`` re-runs exactly that schedule. Bounds come from :class:`ExploreConfig`,
whose fields default from ``REFSCHED_*`` environment variables.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import os
import random
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

from hypothesis import strategies as st

from refsched.explore import discipline, runtime
from refsched.explore.context import Context, Scenario
from refsched.explore.dag.scenarios import SCENARIOS
from refsched.explore.linearizability import Verdict
from refsched.explore.runtime import Alternative, Chooser, Decision, Execution, Step

__all__ = [
    "STRATEGIES",
    "ExploreConfig",
    "ExploreReport",
    "Failure",
    "PctPlan",
    "RunResult",
    "ScheduleMismatch",
    "SchedulePlan",
    "compare_reduction",
    "decode_schedule",
    "encode_schedule",
    "explore",
    "pct_schedules",
    "replay",
    "run_schedule",
    "schedules",
]

STRATEGIES = ("dfs", "random", "pct")
_ID_VERSION = 1


# -- configuration -------------------------------------------------------------------------

def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _env_int(name: str, default: int) -> int:
    value = _env(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected an integer") from None


def _env_bound(name: str, default: int) -> int | None:
    value = _env(name)
    if value is not None and value.lower() in ("none", "inf", "unbounded"):
        return None
    return _env_int(name, default)


def _env_bool(name: str, default: bool) -> bool:
    value = _env(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={value!r}: expected 1/0, true/false, yes/no or on/off")


def _env_float(name: str, default: float) -> float:
    value = _env(name)
    try:
        return default if value is None else float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a number") from None


@dataclass(frozen=True)
class ExploreConfig:
    """Every bound of an exploration. A field not given takes its environment variable, if set.

    ``max_preemptions`` (``REFSCHED_MAX_PREEMPTIONS``, ``none`` for no bound), ``max_schedules``
    (``REFSCHED_MAX_SCHEDULES``: runs, pruned ones included), ``max_steps``
    (``REFSCHED_MAX_STEPS``: operations in one run; more fails it as a livelock), ``reduction``
    (``REFSCHED_REDUCTION``: partial-order reduction), ``seed`` (``REFSCHED_SEED``), ``strategy``
    (``REFSCHED_STRATEGY``: dfs, random or pct), ``pct_depth`` (``REFSCHED_PCT_DEPTH``),
    ``run_timeout`` (``REFSCHED_RUN_TIMEOUT``: wall seconds before a run is declared stuck).
    """

    max_preemptions: int | None = field(
        default_factory=lambda: _env_bound("REFSCHED_MAX_PREEMPTIONS", 2))
    max_schedules: int = field(default_factory=lambda: _env_int("REFSCHED_MAX_SCHEDULES", 20_000))
    max_steps: int = field(default_factory=lambda: _env_int("REFSCHED_MAX_STEPS", 5_000))
    reduction: bool = field(default_factory=lambda: _env_bool("REFSCHED_REDUCTION", True))
    seed: int = field(default_factory=lambda: _env_int("REFSCHED_SEED", 0))
    strategy: str = field(default_factory=lambda: _env("REFSCHED_STRATEGY") or "dfs")
    pct_depth: int = field(default_factory=lambda: _env_int("REFSCHED_PCT_DEPTH", 3))
    run_timeout: float = field(default_factory=lambda: _env_float("REFSCHED_RUN_TIMEOUT", 60.0))
    stop_on_failure: bool = True

    def __post_init__(self) -> None:
        if self.max_preemptions is not None and self.max_preemptions < 0:
            raise ValueError(f"max_preemptions={self.max_preemptions}: must be >= 0 or None")
        if self.max_schedules < 1 or self.max_steps < 1 or self.pct_depth < 1:
            raise ValueError("max_schedules, max_steps and pct_depth must be >= 1")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy={self.strategy!r}: must be one of {', '.join(STRATEGIES)}")

    def replace(self, **changes: object) -> ExploreConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


# -- schedule ids --------------------------------------------------------------------------

def encode_schedule(deviations: Iterable[tuple[int, int]]) -> str:
    """The id of a schedule: its (branch, alternative code) pairs that leave the default."""
    out = bytearray([_ID_VERSION])
    last = -1
    for branch, code in deviations:
        if branch <= last or code < 0:
            raise ValueError(f"deviations must be at increasing branches: {branch} after {last}")
        _put_varint(out, branch - last - 1)
        _put_varint(out, code)
        last = branch
    return base64.b32encode(bytes(out)).decode("ascii").rstrip("=").lower()


def decode_schedule(schedule_id: str) -> tuple[tuple[int, int], ...]:
    """The (branch, alternative code) pairs of a schedule id. ``ValueError`` if it is none."""
    text = schedule_id.strip().upper()
    try:
        raw = base64.b32decode(text + "=" * (-len(text) % 8))
    except (binascii.Error, ValueError):
        raise ValueError(f"{schedule_id!r} is not a schedule id") from None
    if not raw or raw[0] != _ID_VERSION:
        raise ValueError(f"{schedule_id!r} is not a schedule id (version {raw[:1]!r})")
    numbers: list[int] = []
    value = shift = 0
    for byte in raw[1:]:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            numbers.append(value)
            value = shift = 0
    if shift or len(numbers) % 2:
        raise ValueError(f"{schedule_id!r} is not a schedule id (truncated)")
    pairs: list[tuple[int, int]] = []
    last = -1
    for gap, code in zip(numbers[::2], numbers[1::2], strict=True):
        last += gap + 1
        pairs.append((last, code))
    return tuple(pairs)


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _alt_text(code: int) -> str:
    return f"thread #{code // 2}" + (" (timeout)" if code % 2 else "")


# -- results -------------------------------------------------------------------------------

class ScheduleMismatch(RuntimeError):
    """A schedule does not fit the scenario: it is not this scenario's, or the scenario is not
    deterministic (its choices differ between two runs of the same schedule)."""


@dataclass(frozen=True)
class Failure:
    """A schedule under which a scenario fails, and how to see it again."""

    scenario: str
    kind: str  # deadlock, lost wake-up, invariant, linearizability, exception, assertion, ...
    message: str
    schedule_id: str
    steps: tuple[Step, ...]
    in_catalogue: bool = False  # the scenario is SCENARIOS[scenario]: the command line has it

    def report(self, max_steps: int = 250) -> str:
        """The failure, the replay call, and the steps that led there (the last ``max_steps``)."""
        steps = self.steps[-max_steps:]
        how = f"replay: refsched.explore.replay(scenario, {self.schedule_id!r})"
        if self.in_catalogue:
            how += f"  or  python -m refsched.explore {self.scenario} --replay {self.schedule_id}"
        lines = [
            f"{self.kind} in scenario {self.scenario!r}, schedule {self.schedule_id}",
            self.message,
            how,
            f"steps ({len(self.steps)}; thread, operation, object; 'preempts' marks a preemption):",
        ]
        if len(steps) < len(self.steps):
            lines.append(f"   ... {len(self.steps) - len(steps)} earlier steps")
        lines += [str(s) for s in steps]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


@dataclass(frozen=True)
class RunResult:
    """One run of a scenario under one schedule."""

    scenario: str
    schedule_id: str
    steps: tuple[Step, ...]
    failure: Failure | None
    pruned: bool  # ended early: the search had already covered what lay ahead
    preemptions: int
    branches: int  # decisions with a choice
    trace: str = ""  # the run's Mazurkiewicz trace (equal for runs that differ only in order of
    #                  independent steps), as a digest

    def raise_on_failure(self) -> None:
        """Raise ``AssertionError`` with the failure's report if the run failed."""
        if self.failure is not None:
            raise AssertionError(self.failure.report())


@dataclass
class ExploreReport:
    """What one exploration did and found."""

    scenario: str
    config: ExploreConfig
    executions: int = 0  # runs started
    schedules: int = 0  # runs that reached the end of the scenario (not pruned)
    pruned: int = 0  # runs ended early: all that lay ahead was asleep (covered already)
    failures: list[Failure] = field(default_factory=list)
    exhausted: bool = False  # dfs: every schedule within the bounds was explored
    bound_hit: bool = False  # dfs: the preemption bound left some alternative out
    seconds: float = 0.0
    longest: int = 0  # most steps in one run
    most_branches: int = 0  # most decisions with a choice in one run
    ids: set[str] = field(default_factory=set, repr=False)  # schedule ids of complete runs
    traces: set[str] = field(default_factory=set, repr=False)  # trace digests of complete runs

    @property
    def coverage(self) -> str:
        """``complete`` (every schedule), ``bounded`` (every schedule within the preemption
        bound), ``cut`` (stopped by max_schedules or a failure) or ``sampled`` (random, pct)."""
        if self.config.strategy != "dfs":
            return "sampled"
        if not self.exhausted:
            return "cut"
        return "bounded" if self.bound_hit else "complete"

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, result: RunResult) -> None:
        self.executions += 1
        if result.pruned and result.failure is None:
            self.pruned += 1
        else:
            self.schedules += 1
            self.ids.add(result.schedule_id)
            self.traces.add(result.trace)
        if result.failure is not None:
            self.failures.append(result.failure)
        self.longest = max(self.longest, len(result.steps))
        self.most_branches = max(self.most_branches, result.branches)

    def summary(self) -> str:
        """One line: scenario, strategy, counts, coverage, time, outcome."""
        c = self.config
        bound = "unbounded" if c.max_preemptions is None else f"<= {c.max_preemptions} preemptions"
        how = (f"dfs {bound}, reduction {'on' if c.reduction else 'off'}" if c.strategy == "dfs"
               else f"{c.strategy} seed {c.seed}")
        outcome = "clean" if self.ok else (f"FAILED ({self.failures[0].kind}, schedule "
                                           f"{self.failures[0].schedule_id})")
        return (f"{self.scenario}: {how}: {self.schedules} schedules ({len(self.traces)} "
                f"traces), {self.pruned} pruned, {self.executions} runs, {self.coverage}, "
                f"{self.seconds:.2f} s, <= {self.longest} steps: {outcome}")

    def raise_on_failure(self) -> None:
        if self.failures:
            raise AssertionError(self.failures[0].report())


# -- choosers ------------------------------------------------------------------------------

class _Follow:
    """Takes the default choice except at the given (branch, alternative code) deviations."""

    def __init__(self, deviations: Iterable[tuple[int, int]]) -> None:
        self.left = dict(deviations)
        self.problem: str | None = None

    def choose(self, d: Decision) -> int:
        if d.branch is None:
            return 0
        code = self.left.pop(d.branch, None)
        if code is None:
            return d.default
        for i, alt in enumerate(d.alternatives):
            if alt.code == code:
                return i
        self.problem = (f"at branch {d.branch} (step {d.step}) the schedule moves "
                        f"{_alt_text(code)}, which cannot move there")
        return -1


@dataclass(slots=True)
class _Node:
    """A decision with a choice on the current DFS path."""

    decision: Decision
    sleep: frozenset[Alternative]  # asleep on arrival: covered by schedules already explored
    preemptions: int  # along the path before this choice
    backtrack: set[int]  # alternatives to explore here: all, or those DPOR found racing
    chosen: int = -1
    done: list[int] = field(default_factory=list)  # explored here so far, chosen last


class _Dfs:
    """Depth first over the decisions with a choice, one path per run; see the module doc.

    Without the reduction every alternative of every decision is explored (within the bound).
    With it, a decision starts with one alternative, and after each run the races of that run
    add others (Flanagan & Godefroid): for every state of the run and every thread's next
    operation there, the last earlier step of another thread that touches a common object and
    that the thread does not know of (not before it in happens-before, kept as vector clocks)
    must also be tried the other way round, so that thread is added where that step was chosen.
    If it could not move there, or its move there is asleep, every alternative there is added:
    some other thread has to start the reversal. With a preemption bound the thread is also added
    at the latest earlier decision where the running thread changed (see ``_add``).
    """

    def __init__(self, config: ExploreConfig, report: ExploreReport) -> None:
        self.bound = config.max_preemptions
        self.reduction = config.reduction
        # Sleep sets only without a bound: see the class doc.
        self.sleep_sets = config.reduction and config.max_preemptions is None
        self.report = report
        self.stack: list[_Node] = []
        self.sleep: set[Alternative] = set()  # the run's sleep set at the current decision
        self.preemptions = 0
        self.problem: str | None = None
        # This run's decisions in order, with the alternative taken (-1: the run stopped there).
        self.trail: list[tuple[Decision, int]] = []

    def new_run(self) -> None:
        self.sleep = set()
        self.preemptions = 0
        self.trail = []

    def choose(self, d: Decision) -> int:
        index = self._choose(d)
        self.trail.append((d, index))
        return index

    def _choose(self, d: Decision) -> int:
        if d.branch is None:
            alt = d.alternatives[0]
            if self.sleep_sets and alt in self.sleep:
                return -1  # the only move leads where an explored schedule already went
            self._advance(alt)
            return 0
        if d.branch < len(self.stack):
            node = self.stack[d.branch]
            if node.decision.alternatives != d.alternatives:
                self.problem = (f"at branch {d.branch} (step {d.step}) the alternatives differ "
                                "from the previous run's: the scenario is not deterministic")
                return -1
            self.sleep = set(node.sleep)
            self.preemptions = node.preemptions
        else:
            every = set(range(len(d.alternatives)))
            node = _Node(d, frozenset(self.sleep), self.preemptions, every)
            first = self._next(node)
            if first is None:
                return -1
            if self.reduction:
                node.backtrack = {first}
            node.chosen = first
            node.done.append(first)
            self.stack.append(node)
        chosen = node.chosen
        alts = d.alternatives
        if self.sleep_sets:
            self.sleep.update(alts[j] for j in node.done[:-1])
        if d.preempts(chosen):
            self.preemptions += 1
        self._advance(alts[chosen])
        return chosen

    def _advance(self, alt: Alternative) -> None:
        if self.sleep:
            self.sleep = {s for s in self.sleep if s.independent(alt)}

    def _next(self, node: _Node) -> int | None:
        """The next alternative to explore at ``node``: default first, then in thread order."""
        d = node.decision
        order = [d.default, *(i for i in range(len(d.alternatives)) if i != d.default)]
        for i in order:
            if i in node.done or i not in node.backtrack:
                continue
            if self.sleep_sets and d.alternatives[i] in node.sleep:
                continue
            if self.bound is not None and node.preemptions + d.preempts(i) > self.bound:
                self.report.bound_hit = True
                continue
            return i
        return None

    def finish_run(self, final: tuple[tuple[int, tuple[int, ...]], ...]) -> None:
        """Add the backtrack points of the run just ended; ``final``: what was left pending."""
        if self.reduction:
            for at, tid in _races(self.trail, final):
                self._add(at, tid)

    def _add(self, at: int, tid: int) -> None:
        """Try thread ``tid`` at the decision before step ``at`` of the trail.

        Under a preemption bound, also at the latest earlier decision where the running thread
        changed: choosing ``tid`` there costs no preemption the run did not already spend, so
        a reversal the bound forbids at ``at`` may be reachable from there.
        """
        self._backtrack(at, tid)
        if self.bound is not None:
            for j in range(at - 1, 0, -1):
                d, index = self.trail[j]
                before, was = self.trail[j - 1]
                if (d.branch is not None and index >= 0
                        and d.alternatives[index].tid != before.alternatives[was].tid):
                    self._backtrack(j, tid)
                    break

    def _backtrack(self, at: int, tid: int) -> None:
        d = self.trail[at][0]
        if d.branch is None or d.branch >= len(self.stack):
            return
        node = self.stack[d.branch]
        mine = [i for i, alt in enumerate(d.alternatives)
                if alt.tid == tid and not (self.sleep_sets and alt in node.sleep)]
        # A thread that cannot move there, or whose move there is asleep (covered by a sibling
        # explored earlier), cannot start the reversal; some other thread must, and without
        # computing which (source sets), every one is tried.
        node.backtrack.update(mine or range(len(d.alternatives)))

    def backtrack(self) -> bool:
        """Move to the next unexplored choice, deepest first; False when none is left."""
        while self.stack:
            node = self.stack[-1]
            nxt = self._next(node)
            if nxt is not None:
                node.chosen = nxt
                node.done.append(nxt)
                return True
            self.stack.pop()
        return False


def _races(trail: Sequence[tuple[Decision, int]],
           final: tuple[tuple[int, tuple[int, ...]], ...]) -> set[tuple[int, int]]:
    """(step, thread) pairs: the thread's operation must also be tried before that step.

    Step ``k`` of the trail is the alternative taken at its decision ``k``. Happens-before is
    program order plus the order of steps on a common object (a thread also knows what its
    creator knew when it started it), kept as vector clocks. For each state, before step ``k``
    (and after the last), and each thread's pending operation there, the candidate is the last
    step on each object of that operation: the latest one by another thread that the thread does
    not know of is the race.
    """
    races: set[tuple[int, int]] = set()
    known: dict[int, dict[int, int]] = {}  # tid -> its vector clock (tid -> steps known)
    on_object: dict[int, tuple[int, int, int]] = {}  # oid -> (step, tid, that tid's count) last
    object_clock: dict[int, dict[int, int]] = {}  # oid -> the clock of its last step
    created: dict[int, dict[int, int]] = {}  # oid of a started Thread -> its creator's clock

    def check(pending: tuple[tuple[int, tuple[int, ...]], ...]) -> None:
        for tid, footprint in pending:
            clock = known.get(tid)
            if clock is None:
                clock = dict(created.get(footprint[0], {}))
                known[tid] = clock
            last = -1
            for oid in footprint:
                hit = on_object.get(oid)
                if hit is None:
                    continue
                step, other, count = hit
                if other != tid and clock.get(other, 0) < count and step > last:
                    last = step
            if last >= 0:
                races.add((last, tid))

    for k, (d, index) in enumerate(trail):
        check(d.pending)
        if index < 0:
            return races
        alt = d.alternatives[index]
        tid = alt.tid
        clock = known.get(tid)
        if clock is None:
            clock = known[tid] = {}
        for oid in alt.footprint:
            for t, c in object_clock.get(oid, {}).items():
                if clock.get(t, 0) < c:
                    clock[t] = c
        clock[tid] = clock.get(tid, 0) + 1
        snapshot = dict(clock)
        for oid in alt.footprint:
            on_object[oid] = (k, tid, clock[tid])
            object_clock[oid] = snapshot
        if alt.kind == runtime.START:
            created[alt.footprint[0]] = snapshot
    check(final)
    return races


class _Random:
    """Uniform among the alternatives."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(self, d: Decision) -> int:
        return self.rng.randrange(len(d.alternatives)) if d.branch is not None else 0


class _Pct:
    """Probabilistic concurrency testing: the highest-priority thread that can move, moves.

    ``priority`` maps tids to starting priorities (>= 0); a thread without one gets
    ``rng.random()`` when first seen (0.0 without ``rng``; ties go to the lower tid). At each
    step in ``change_points`` the thread that reached the decision drops below every other (-1,
    -2, ...). Threads that can move go before timeouts, as in the default schedule.
    """

    def __init__(self, priority: dict[int, float] | None, change_points: Iterable[int],
                 rng: random.Random | None = None) -> None:
        self.priority: dict[int, float] = dict(priority or {})
        self.changes = sorted(change_points)
        self.rng = rng
        self.low = 0.0

    def choose(self, d: Decision) -> int:
        if d.branch is None:
            return 0
        while self.changes and d.step >= self.changes[0]:
            self.changes.pop(0)
            self.low -= 1
            self.priority[d.current] = self.low
        best, best_key = 0, (True, float("-inf"), 0)
        for i, alt in enumerate(d.alternatives):
            if alt.tid not in self.priority:
                self.priority[alt.tid] = self.rng.random() if self.rng is not None else 0.0
            key = (not alt.timeout, self.priority[alt.tid], -alt.tid)
            if i == 0 or key > best_key:
                best, best_key = i, key
        return best


# -- Hypothesis-drawn schedules ------------------------------------------------------------

@dataclass(frozen=True)
class SchedulePlan:
    """A schedule as deviations from the default choice: ``(branch, pick)`` pairs.

    At the decision with a choice numbered ``branch``, ``pick`` >= 1 takes the other alternatives
    (those not the default, in thread order) modulo their number. Branches a run never reaches
    are ignored. Shrinking drops deviations and moves them earlier: toward the default schedule.
    """

    deviations: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PctPlan:
    """A PCT schedule: thread priorities by tid (0 for those beyond), and the steps at which the
    running thread drops to the lowest priority."""

    priorities: tuple[int, ...] = ()
    change_points: tuple[int, ...] = ()


class _Planned:
    """Follows a :class:`SchedulePlan`."""

    def __init__(self, plan: SchedulePlan) -> None:
        self.picks = dict(plan.deviations)

    def choose(self, d: Decision) -> int:
        if d.branch is None:
            return 0
        pick = self.picks.get(d.branch)
        if pick is None:
            return d.default
        others = [i for i in range(len(d.alternatives)) if i != d.default]
        return others[(pick - 1) % len(others)]


def schedules(max_deviations: int = 4, horizon: int = 200) -> st.SearchStrategy[SchedulePlan]:
    """Hypothesis strategy: schedules with up to ``max_deviations`` non-default choices among
    the first ``horizon`` decisions with a choice (so, like preemption bounding, few switches)."""
    pair = st.tuples(st.integers(0, horizon), st.integers(1, 8))
    return st.lists(pair, max_size=max_deviations, unique_by=lambda p: p[0]).map(
        lambda pairs: SchedulePlan(tuple(sorted(pairs))))


def pct_schedules(depth: int = 3, threads: int = 6, horizon: int = 400
                  ) -> st.SearchStrategy[PctPlan]:
    """Hypothesis strategy: PCT schedules with ``depth - 1`` change points in ``horizon`` steps."""
    return st.builds(
        PctPlan,
        st.lists(st.integers(0, 2 * threads), min_size=threads, max_size=threads).map(tuple),
        st.lists(st.integers(1, horizon), max_size=depth - 1).map(lambda xs: tuple(sorted(xs))),
    )


# -- running -------------------------------------------------------------------------------

def _run(scenario: Scenario, chooser: Chooser, config: ExploreConfig,
         verdicts: dict[Hashable, Verdict] | None = None,
         ended: Callable[[tuple[tuple[int, tuple[int, ...]], ...]], None] | None = None,
         ) -> RunResult:
    """One run under the installed runtime; ``ended`` gets what was left pending at its end."""
    ex = Execution(chooser, max_steps=config.max_steps)
    ctx = Context(ex)
    ex.run(partial(ctx._main, scenario.body), timeout=config.run_timeout)
    if ended is not None:
        ended(ex.final_pending)
    problem = ex.failure
    if problem is None and not ex.pruned:
        problem = ctx._verify(verdicts)
    schedule_id = encode_schedule(
        (d.branch, d.alternatives[i].code) for d, i in ex.branches
        if i != d.default and d.branch is not None)
    steps = tuple(ex.steps)
    failure = (Failure(scenario.name, problem.kind, problem.message, schedule_id, steps,
                       SCENARIOS.get(scenario.name) is scenario)
               if problem is not None else None)
    return RunResult(scenario.name, schedule_id, steps, failure, ex.pruned, ex.preemptions,
                     len(ex.branches), _trace_digest(ex.moves))


def _trace_digest(moves: Sequence[Alternative]) -> str:
    """The Mazurkiewicz trace of a run: each thread's steps, and the order of the steps on each
    object. Objects are numbered by creation, so two runs that create them in another order
    count as two traces even when equivalent."""
    by_thread: dict[int, list[tuple[str, bool]]] = {}
    by_object: dict[int, list[int]] = {}
    for alt in moves:
        by_thread.setdefault(alt.tid, []).append((alt.kind, alt.timeout))
        for oid in alt.footprint:
            by_object.setdefault(oid, []).append(alt.tid)
    text = repr((sorted(by_thread.items()), sorted(by_object.items())))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


@contextlib.contextmanager
def _controlled() -> Iterator[None]:
    """The controlled runtime in ``refsched.sync``, with the lock discipline enforced."""
    with runtime.installed(), discipline.enforced():
        yield


def explore(scenario: Scenario, config: ExploreConfig | None = None) -> ExploreReport:
    """Run ``scenario`` under the schedules ``config`` asks for; report what was found."""
    config = config if config is not None else ExploreConfig()
    if config.reduction and not scenario.reduction:
        config = config.replace(reduction=False)
    report = ExploreReport(scenario.name, config)
    started = time.perf_counter()
    with _controlled():
        if config.strategy == "dfs":
            _explore_dfs(scenario, config, report)
        else:
            _explore_sampled(scenario, config, report)
    report.seconds = time.perf_counter() - started
    return report


def _explore_dfs(scenario: Scenario, config: ExploreConfig, report: ExploreReport) -> None:
    dfs = _Dfs(config, report)
    verdicts: dict[Hashable, Verdict] = {}
    while True:
        dfs.new_run()
        result = _run(scenario, dfs, config, verdicts, dfs.finish_run)
        if dfs.problem is not None:
            raise ScheduleMismatch(f"{scenario.name}: {dfs.problem}")
        report.add(result)
        if result.failure is not None and config.stop_on_failure:
            return
        if report.executions >= config.max_schedules:
            return
        if not dfs.backtrack():
            report.exhausted = True
            return


def _explore_sampled(scenario: Scenario, config: ExploreConfig, report: ExploreReport) -> None:
    rng = random.Random(config.seed)
    verdicts: dict[Hashable, Verdict] = {}
    horizon = 1
    for n in range(config.max_schedules):
        chooser: Chooser
        if n == 0:
            chooser = _Follow(())  # the default schedule first; it also sizes PCT's horizon
        elif config.strategy == "random":
            chooser = _Random(rng)
        else:
            points = [rng.randint(1, horizon) for _ in range(config.pct_depth - 1)]
            chooser = _Pct(None, points, rng)
        result = _run(scenario, chooser, config, verdicts)
        horizon = max(horizon, len(result.steps))
        report.add(result)
        if result.failure is not None and config.stop_on_failure:
            return


def replay(scenario: Scenario, schedule_id: str, config: ExploreConfig | None = None
           ) -> RunResult:
    """Re-run ``scenario`` under exactly the schedule ``schedule_id`` names.

    Raises ``ValueError`` for a malformed id and :class:`ScheduleMismatch` when the schedule does
    not fit the scenario.
    """
    deviations = decode_schedule(schedule_id)
    follow = _Follow(deviations)
    config = config if config is not None else ExploreConfig()
    with _controlled():
        result = _run(scenario, follow, config)
    if follow.problem is not None:
        raise ScheduleMismatch(f"{scenario.name}: {follow.problem}")
    if follow.left:
        raise ScheduleMismatch(
            f"{scenario.name}: the run ended before branch {min(follow.left)} of the schedule")
    return result


def run_schedule(scenario: Scenario, plan: SchedulePlan | PctPlan,
                 config: ExploreConfig | None = None) -> RunResult:
    """Run ``scenario`` once under a drawn schedule (``schedules()``, ``pct_schedules()``)."""
    chooser: Chooser
    if isinstance(plan, SchedulePlan):
        chooser = _Planned(plan)
    else:
        chooser = _Pct(dict(enumerate(map(float, plan.priorities))), plan.change_points)
    config = config if config is not None else ExploreConfig()
    with _controlled():
        return _run(scenario, chooser, config)


def compare_reduction(scenario: Scenario, config: ExploreConfig | None = None
                      ) -> tuple[ExploreReport, ExploreReport]:
    """Explore ``scenario`` depth first with and without the reduction: (with, without)."""
    config = (config if config is not None else ExploreConfig()).replace(strategy="dfs")
    return (explore(scenario, config.replace(reduction=True)),
            explore(scenario, config.replace(reduction=False)))

