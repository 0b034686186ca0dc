"""The contract's clauses: the catalogue, the docs' list of it, the clauses phase and coverage.

Each scheduler of ``refsched.conform.dag.broken.BROKEN_CLAUSES`` breaks one clause that random
calls rarely or never reach; the clauses phase must reject each with a verdict naming that
clause. Served over the protocol, a refusal answered with success is a divergence (exit 1) even
when the snapshot after it is malformed, and a malformed answer alone is a protocol violation
(exit 3).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler
from refsched.conform import clauses
from refsched.conform.client import InProcessImplementation, ProtocolImplementation
from refsched.conform.coverage import Coverage, observed
from refsched.conform.dag import broken
from refsched.conform.dag.probes import PROBES
from refsched.conform.oracle import check
from refsched.conform.pool import broken as broken_pool
from refsched.conform.pool import probes as pool_probes
from refsched.conform.probes import model_answers, run_probes
from refsched.conform.report import PhaseResult
from refsched.conform.timer import broken as broken_timer
from refsched.conform.timer.probes import PROBES as TIMER_PROBES
from refsched.pool.pool import WorkStealingPool
from refsched.profile import FULL, STATIC, PoolProfile, full_profile
from refsched.verify.pool.driver import SteppedPool, StepRefused, stepped_factory

DOCS = Path(__file__).resolve().parent.parent / "docs" / "conformance.md"
_ROW = re.compile(r"^\| `(?P<id>[a-z_.-]+)` \| (?P<ops>[^|]+) \| (?P<outcome>[^|]+) \| "
                  r"(?P<needs>[^|]+) \| (?P<rule>.+) \|$")


def _docs_clauses() -> list[tuple[str, tuple[str, ...], str, tuple[str, ...], str]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## The contract's clauses", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        ops = tuple(o.strip().strip("`") for o in match["ops"].split(","))
        needs_text = match["needs"].strip()
        needs = () if needs_text == "—" else tuple(n.strip().strip("`")
                                                   for n in needs_text.split(","))
        rows.append((match["id"], ops, match["outcome"].strip().strip("`"), needs,
                     match["rule"].strip()))
    return rows


def test_the_docs_list_every_clause_of_the_catalogue_and_no_other() -> None:
    catalogue = [(c.id, c.ops, c.outcome, c.needs, c.sentence)
                 for system in clauses.CATALOGUE.values() for c in system]
    assert _docs_clauses() == catalogue


def test_clause_ids_are_unique_and_name_their_system() -> None:
    prefix = {"scheduler": "dag.", "timer": "timer.", "pool": "pool.", "durable": "durable."}
    ids = [c.id for system in clauses.CATALOGUE.values() for c in system]
    assert len(ids) == len(set(ids))
    for system, catalogue in clauses.CATALOGUE.items():
        assert all(c.id.startswith(prefix[system]) for c in catalogue)
        assert all(set(c.ops) <= set(clauses.PARAMETERS[system]) for c in catalogue)


@pytest.mark.parametrize("probe", PROBES, ids=[p.clause for p in PROBES])
def test_each_probe_drives_its_clause(probe: Any) -> None:
    decided = {getattr(clauses.decide("scheduler", method, args, answer), "id", None)
               for method, args, answer in model_answers("scheduler", probe)}
    assert probe.clause in decided


def test_every_dag_and_timer_clause_has_a_probe() -> None:
    assert {p.clause for p in PROBES} == {c.id for c in clauses.clauses("scheduler")}
    assert {p.clause for p in TIMER_PROBES} == {c.id for c in clauses.clauses("timer")}


def test_the_clauses_phase_drives_every_timer_clause_of_refsched_itself() -> None:
    from refsched.timer.scheduler import TimerScheduler
    coverage = Coverage("timer")
    found = run_probes("timer", observed(TimerScheduler, coverage), full_profile("timer"),
                       PhaseResult("clauses"))
    assert found is None
    assert coverage.not_driven(full_profile("timer")) == []


def test_decide_names_the_narrowest_clause() -> None:
    refused = clauses.decide("scheduler", "submit", ("b", ["a", "a"]),
                             ValueError("not the model's, but its type is what is read"))
    assert refused is None  # ValueError is no outcome of submit's clauses
    from refsched.errors import InvalidArgumentError, StaleGenerationError
    assert clauses.decide("scheduler", "submit", ("b", ["a", "a"]),
                          InvalidArgumentError("")).id == "dag.submit.duplicate-dep"
    assert clauses.decide("scheduler", "submit", ("b", ["b"]),
                          InvalidArgumentError("")).id == "dag.submit.self-dep"
    assert clauses.decide("scheduler", "ready", (True,),
                          InvalidArgumentError("")).id == "dag.ready.limit-not-int"
    assert clauses.decide("scheduler", "ready", (-2,),
                          InvalidArgumentError("")).id == "dag.ready.limit-negative"
    stale = StaleGenerationError("", None, -1, 1)
    assert clauses.decide("scheduler", "complete", ("a", -1),
                          stale).id == "dag.callback.negative-generation"
    assert clauses.decide("scheduler", "complete", ("a", 2), stale).id == "dag.callback.stale"


def test_the_clauses_phase_drives_every_dag_clause_of_refsched_itself() -> None:
    coverage = Coverage("scheduler")
    phase = PhaseResult("clauses")
    found = run_probes("scheduler", observed(TaskScheduler, coverage), FULL, phase)
    assert found is None
    assert coverage.not_driven(FULL) == []
    assert phase.figures["probes"] == len(PROBES)


def test_a_narrower_profile_leaves_clauses_out_and_the_report_says_which() -> None:
    report = check(InProcessImplementation(TaskScheduler, profile=STATIC), corpus=False,
                   examples=0)
    assert report.ok, report.format()
    left_out = report.coverage.left_out(STATIC)
    assert "dag.cancel.running" in left_out and "dag.ready.limit-not-int" in left_out
    summary = next(line for line in report.format().splitlines()
                   if line.strip().startswith("clauses:") and "driven" in line)
    assert "left out by the profile: " in summary
    assert report.to_json()["coverage"]["left_out_by_profile"] == left_out


BROKEN_CLAUSES = [("scheduler", cls) for cls in broken.BROKEN_CLAUSES] + [
    ("timer", cls) for cls in broken_timer.BROKEN_CLAUSES]


@pytest.mark.parametrize(("system", "cls"), BROKEN_CLAUSES, ids=lambda c: getattr(c, "__name__", c))
def test_each_broken_clause_is_a_divergence_naming_its_rule(system: str, cls: type[Any]) -> None:
    report = check(InProcessImplementation(cls, system=system), corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "clauses"
    assert example.wire_reason.startswith(f"rule {cls.rule}: "), example.wire_reason
    assert not example.calls[-1].agrees and all(c.agrees for c in example.calls[:-1])


def _served(name: str) -> ProtocolImplementation:
    return ProtocolImplementation([sys.executable, "-m", "refsched.serve", "--impl",
                                   f"refsched.conform.dag.broken:{name}"], timeout=20)


def test_a_refusal_answered_with_success_is_a_divergence_before_the_snapshot_shape() -> None:
    # DuplicateDepAccepted's snapshot lists a dependency twice, which is no snapshot's shape;
    # the submit's answer already differs from the model's, and that is the verdict
    with _served("DuplicateDepAccepted") as impl:
        report = check(impl, corpus=False, examples=200, clauses=False)
    assert report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "generated"
    assert example.calls[-1].method == "submit"
    assert "the model raised InvalidArgumentError" in example.reason


def test_a_malformed_answer_alone_is_a_protocol_violation() -> None:
    with _served("GenerationAsText") as impl:
        report = check(impl, corpus=False, examples=0)
    assert report.exit_status == 3, report.format()
    assert "answers a generation (an integer)" in report.harness_message


def test_each_broken_clause_served_is_rejected_by_the_clauses_phase() -> None:
    for system, cls in BROKEN_CLAUSES:
        argv = [sys.executable, "-m", "refsched.serve", "--system", system, "--impl",
                f"{cls.__module__}:{cls.__name__}"]
        with ProtocolImplementation(argv, timeout=20, system=system) as impl:
            report = check(impl, corpus=False, examples=0)
        assert report.exit_status == 1, report.format()
        assert report.counterexample is not None
        assert report.counterexample.wire_reason.startswith(f"rule {cls.rule}: ")


# -- the pool ---------------------------------------------------------------------------------

def test_every_pool_clause_has_a_probe_in_the_catalogues_order() -> None:
    assert [p.clause for p in pool_probes.PROBES] == [c.id for c in clauses.clauses("pool")]


@pytest.mark.parametrize("probe", pool_probes.PROBES, ids=[p.clause for p in pool_probes.PROBES])
def test_each_pool_probe_ends_in_its_clause(probe: Any) -> None:
    answers = model_answers("pool", probe)
    decided = [getattr(clauses.decide("pool", method, args, answer), "id", None)
               for method, args, answer in answers]
    assert decided[-1] == probe.clause, answers[-1]
    assert None not in decided, answers  # no call outside the contract (a ValueError)


def test_the_pool_probes_ask_each_refused_move() -> None:
    [refused] = [p for p in pool_probes.PROBES if p.clause == "pool.move.refused"]
    asked = {method for (method, _, answer) in model_answers("pool", refused)
             if isinstance(answer, StepRefused)}
    assert asked == {"pop", "steal", "finish"}


def test_the_pool_probes_ask_each_refused_move_of_managed_blocking() -> None:
    [refused] = [p for p in pool_probes.PROBES if p.clause == "pool.blocking.refused"]
    asked = {method for (method, _, answer) in model_answers("pool", refused)
             if isinstance(answer, StepRefused)}
    assert asked == {"block", "start_spare", "unblock", "retire"}


def test_the_blocking_probes_need_the_managed_blocking_flag() -> None:
    blocking = [p for p in pool_probes.PROBES if pool_probes.needs_of(p)]
    assert {p.clause for p in blocking} == {
        c.id for c in clauses.clauses("pool") if "managed_blocking" in c.needs}
    assert all(pool_probes.needs_of(p) == ("managed_blocking",) for p in blocking)


def test_the_clauses_phase_drives_every_pool_clause_of_refsched_itself() -> None:
    coverage = Coverage("pool")
    phase = PhaseResult("clauses")
    found = run_probes("pool", observed(stepped_factory(WorkStealingPool), coverage),
                       full_profile("pool"), phase)
    assert found is None, found and found.format()
    assert coverage.not_driven(full_profile("pool")) == []
    assert phase.figures["probes"] == len(clauses.clauses("pool"))


def test_a_pool_class_checked_in_this_process_has_its_clauses_counted() -> None:
    # the clauses phase steps the class here: its moves are counted as a served pool's are
    report = check(InProcessImplementation(WorkStealingPool, system="pool"), corpus=False,
                   examples=0)
    assert report.ok, report.format()
    assert report.coverage.not_driven(full_profile("pool")) == []
    without = PoolProfile(managed_blocking=False)
    report = check(InProcessImplementation(WorkStealingPool, system="pool", profile=without),
                   corpus=False, examples=0)
    assert report.ok, report.format()
    assert report.coverage.left_out(without) == [
        c.id for c in clauses.clauses("pool") if "managed_blocking" in c.needs]
    assert report.coverage.not_driven(without) == []


BROKEN_POOL_RULES = {
    broken_pool.ChildGoesRoundRobin: "pool.submit_child.ok",
    broken_pool.ChildRefusedAfterShutdown: "pool.submit_child.ok",
    broken_pool.ThiefLeavesLastTask: "pool.steal.ok",
    broken_pool.FinishLeavesOutstanding: "pool.finish.ok",
    broken_pool.IdleShutdownNeverTerminates: "pool.shutdown.ok",
    broken_pool.CancelFuturesLeavesQueued: "pool.cancel_queued.ok",
}
# the broken pools only a pool made with spares shows (the managed_blocking flag)
BROKEN_BLOCKING_RULES = {
    broken_pool.SpareNeverRetires: "pool.retire.ok",
    broken_pool.SparesBeyondTheBound: "pool.block.ok",
}


def test_every_broken_pool_has_the_rule_its_probe_catches() -> None:
    assert set(BROKEN_POOL_RULES) == set(broken_pool.BROKEN)


class PopTakesOldest(WorkStealingPool):
    """Pop(w): a worker takes the newest task of its own deque (LIFO). Bug: it takes the
    oldest, as a thief does."""

    def _take_locked(self, w: int, victim: int | None = None) -> Any:
        own = self._deques[w]
        return own.popleft() if own else self._steal_locked(w, victim)


class RefusedStealAnsweredNull(SteppedPool):
    """A move the worker cannot take answers ``StepRefused``. Bug: a steal that takes nothing
    answers null, as if the thief had taken a task."""

    drives_steps = True  # RefusedStealAnsweredNull(workers): it takes its moves itself

    def __init__(self, workers: list[str], steal_cap: int = 1, *, spares: Any = (),
                 max_spares: int | None = None) -> None:
        super().__init__(WorkStealingPool, workers, steal_cap, spares=spares,
                         max_spares=max_spares)

    def steal(self, thief: Hashable, victim: Hashable) -> None:
        with contextlib.suppress(StepRefused):
            super().steal(thief, victim)


@pytest.mark.parametrize(("cls", "rule"), [
    *BROKEN_POOL_RULES.items(),
    *BROKEN_BLOCKING_RULES.items(),
    (PopTakesOldest, "pool.pop.ok"),
    (RefusedStealAnsweredNull, "pool.move.refused"),
], ids=lambda c: getattr(c, "__name__", c))
def test_each_broken_pool_is_rejected_by_the_clauses_phase_alone(cls: Any, rule: str) -> None:
    report = check(InProcessImplementation(cls, system="pool"), corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "clauses"
    assert example.wire_reason.startswith(f"rule {rule}: "), example.wire_reason
    assert not example.calls[-1].agrees and all(c.agrees for c in example.calls[:-1])
    assert example.instance.startswith("workers w1, w2")


@pytest.mark.parametrize(("cls", "rule"), BROKEN_BLOCKING_RULES.items(),
                         ids=lambda c: getattr(c, "__name__", c))
def test_a_broken_blocking_pool_served_is_rejected_by_the_clauses_phase(cls: Any,
                                                                         rule: str) -> None:
    argv = [sys.executable, "-m", "refsched.serve", "--system", "pool", "--impl",
            f"{cls.__module__}:{cls.__name__}"]
    with ProtocolImplementation(argv, timeout=20, system="pool") as impl:
        assert impl.profile.managed_blocking
        report = check(impl, corpus=False, examples=0)
    assert report.exit_status == 1, report.format()
    assert report.counterexample is not None
    assert report.counterexample.wire_reason.startswith(f"rule {rule}: ")
    # a profile without managed blocking asks no probe of it: the same pool passes
    without = PoolProfile(managed_blocking=False)
    report = check(InProcessImplementation(cls, system="pool", profile=without),
                   corpus=False, examples=0)
    assert report.ok, report.format()


def test_only_the_clauses_phase_asks_a_steal_with_nothing_to_take() -> None:
    # the generated phase takes only the steps the spec enables: no refused move
    report = check(InProcessImplementation(RefusedStealAnsweredNull, system="pool"),
                   corpus=False, examples=100, clauses=False)
    assert report.ok, report.format()


def test_a_refused_steal_answered_null_names_the_call_and_both_answers() -> None:
    report = check(InProcessImplementation(RefusedStealAnsweredNull, system="pool"),
                   corpus=False, examples=0)
    assert report.counterexample is not None
    failing = report.counterexample.calls[-1]
    assert failing.request == {"op": "steal", "thief": "w1", "victim": "w2"}
    assert failing.model_answer == {"error": {"type": "StepRefused",
                                              "message": "worker 'w1' took no task"}}
    assert failing.implementation_answer == {"ok": None}


def test_a_served_pool_conforms_in_the_clauses_phase_with_every_clause_driven() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "refsched", "conform", "--system", "pool", "--no-corpus",
         "--examples", "0", "--json", "--", sys.executable, "-m", "refsched.serve",
         "--system", "pool"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "conforms"
    assert [phase["name"] for phase in report["phases"]] == ["clauses"]
    assert set(report["coverage"]["driven"]) == {c.id for c in clauses.clauses("pool")}
    assert report["coverage"]["not_driven"] == []


@pytest.mark.parametrize("system, request_, answer, rule", [
    ("scheduler", {"op": "submit", "task": "a", "deps": ["b", "b"]},
     {"error": {"type": "InvalidArgumentError", "message": ""}}, "dag.submit.duplicate-dep"),
    # a request the wire names otherwise than the API: the pool's submit is submit_external
    ("pool", {"op": "submit", "task": "a", "worker": "w1"}, {"ok": None}, "pool.submit.ok"),
    ("pool", {"op": "submit", "task": "a", "worker": "w1"},
     {"error": {"type": "SchedulerClosedError", "message": ""}}, "pool.submit.closed"),
    ("durable", {"op": "claim", "worker": "w1", "limit": 0},
     {"error": {"type": "InvalidArgumentError", "message": ""}}, "durable.claim.invalid"),
])
def test_a_row_on_the_wire_is_decided_by_its_clause(system: str, request_: dict[str, Any],
                                                     answer: dict[str, Any], rule: str) -> None:
    decided = clauses.decide_wire(system, request_, answer)
    assert decided is not None and decided.id == rule
