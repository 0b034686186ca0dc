"""The counterexample `refsched conform` prints: shrunk by ddmin until no call can go, found
without replaying the whole corpus, written in the protocol's words, and certified."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import Phase

from refsched import TaskScheduler
from refsched.conform import oracle, system_phases, wire
from refsched.conform.client import HarnessError, InProcessImplementation
from refsched.conform.dag import broken
from refsched.conform.durable import broken as broken_durable
from refsched.conform.main import main as conform_main
from refsched.conform.oracle import check
from refsched.conform.pool import broken as broken_pool
from refsched.conform.report import ConformanceReport, WireRow, found_in
from refsched.conform.shrink import MachineJudge, ddmin, divergence_kind
from refsched.conform.timer import broken as broken_timer
from refsched.verify.stable import stable_labels
from refsched.verify.timer.lockstep import Disagreement as TimerDisagreement
from refsched.verify.timer.lockstep import run_timer_lockstep
from tests.test_conform_broken_systems import corpus_prefix

# -- the ddmin pass -------------------------------------------------------------------------------


def test_ddmin_keeps_only_the_items_the_divergence_needs() -> None:
    runs: list[tuple[int, ...]] = []

    def judge(items: Sequence[int]) -> tuple[Any, int, Any] | None:
        runs.append(tuple(items))
        # diverges once a 3 has been followed by a 7, at the 7
        seen_three = False
        for index, item in enumerate(items):
            seen_three = seen_three or item == 3
            if seen_three and item == 7:
                return "kind", index + 1, None
        return None

    shrunk = ddmin([*range(20), 3, 7, 7], judge)
    assert shrunk is not None and shrunk.complete
    assert shrunk.items == (3, 7) and shrunk.before == 23  # cut at the first 7: 0..7 first
    assert shrunk.runs == len(runs)
    for index in range(len(shrunk.items)):  # 1-minimal: without any one, no divergence
        assert judge(shrunk.items[:index] + shrunk.items[index + 1:]) is None


def test_ddmin_keeps_a_removal_only_when_the_divergence_is_the_same() -> None:
    def judge(items: Sequence[str]) -> tuple[Any, int, Any] | None:
        if "close" in items:
            return ("close", "answer"), items.index("close") + 1, None
        if "x" in items:  # another divergence, which a removal must not trade for
            return ("x", "state"), items.index("x") + 1, None
        return None

    shrunk = ddmin(["x", "a", "b", "close"], judge)
    assert shrunk is not None and shrunk.items == ("close",)
    shrunk = ddmin(["a", "x", "b"], judge)
    assert shrunk is not None and shrunk.items == ("x",)
    assert ddmin(["a", "b"], judge) is None  # no divergence to keep


def test_ddmin_stops_at_its_budget() -> None:
    def judge(items: Sequence[int]) -> tuple[Any, int, Any] | None:
        return (("k", "answer"), len(items), None) if {0, 39} <= set(items) else None

    shrunk = ddmin(list(range(40)), judge, budget=3)
    assert shrunk is not None and not shrunk.complete and shrunk.runs == 3
    assert ddmin(list(range(40)), judge).items == (0, 39)  # type: ignore[union-attr]


def test_divergences_are_the_same_by_call_and_by_how() -> None:
    assert divergence_kind("close", "timer.close(): the implementation returned X, the model Y") \
        == ("close", "answer")
    assert divergence_kind("fail", "fail('b', 1): the snapshots differ after the call")[1] \
        == "state"
    assert divergence_kind("ready", "ready(None): the implementation returned [], the model "
                                    "raised InvalidTransitionError: no")[1] == "refused"
    assert divergence_kind("Cancel", "cancel('a') raised ValueError: x, expected False")[1] \
        == "raised"


def _timer_disagreement() -> TimerDisagreement:
    """Hypothesis's counterexample of a timer whose close() leaves out the running ids:
    close() is held back until 30 calls were made, so its run is long."""
    try:
        with stable_labels():
            run_timer_lockstep(broken_timer.CloseForgetsRunning, examples=200, steps=50, seed=0,
                               python_api=False,
                               hypothesis_settings={"database": None, "print_blob": False})
    except Exception as error:
        found = found_in(error, TimerDisagreement)
        assert found is not None
        return found
    raise AssertionError("CloseForgetsRunning passed the timer's lock-step")


def test_ddmin_shrinks_a_long_run_to_the_calls_a_bug_needs_and_no_call_can_go() -> None:
    found = _timer_disagreement()
    assert len(found.calls) >= 20  # what Hypothesis's own shrinking leaves
    new_machine = system_phases._timer_machine(broken_timer.CloseForgetsRunning, None,
                                               found.rebuild_floor)
    minimized = system_phases.minimized_calls("timer", new_machine, found.calls)
    assert minimized is not None
    _, rows, shrunk = minimized
    assert shrunk.complete and len(shrunk.items) <= 3, [c.text for c in shrunk.items]
    assert [r.method for r in rows][-1] == "close" and not rows[-1].agrees
    # 1-minimal: re-run without any one call, on a fresh instance, it no longer diverges so
    judge = MachineJudge("timer", new_machine, (HarnessError,))
    kind = judge(shrunk.items)
    assert kind is not None and kind[0] == ("close", "answer")
    for index in range(len(shrunk.items)):
        without = judge(shrunk.items[:index] + shrunk.items[index + 1:])
        assert without is None or without[0] != kind[0]


def test_the_oracle_shrinks_its_counterexample_by_ddmin_and_says_so() -> None:
    report = check(InProcessImplementation(broken.ClaimsOverLimit), corpus=False,
                   examples=200, seed=0)
    example = report.counterexample
    assert report.verdict == "diverges" and example is not None, report.format()
    assert example.before_ddmin >= len(example.calls) and example.one_minimal
    assert f"ddmin {example.before_ddmin} -> {len(example.calls)} calls, 1-minimal" \
        in report.format()
    assert report.to_json()["counterexample"]["ddmin"]["after"] == len(example.calls)


# -- the corpus: shortest first, to the first divergence ----------------------------------------

def _json_report(*argv: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    status = conform_main([*argv, "--json", "-q"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert status == report["exit_status"]
    return report


def test_a_diverging_corpus_replay_stops_at_its_first_diverging_trace(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--impl", "refsched.conform.dag.broken:FailDoesNotBlock", "--examples", "0",
            "--max-traces", "3000")
    first = _json_report(*argv, capsys=capsys)
    assert first["verdict"] == "diverges"
    replayed = first["certificate"]["traces_replayed"]
    [corpus] = first["phases"]
    assert replayed == corpus["figures"]["traces_run"] < 3000
    every = _json_report(*argv, "--all-divergences", capsys=capsys)
    assert every["verdict"] == "diverges"
    assert every["certificate"]["traces_replayed"] == 3000
    assert every["phases"][0]["figures"]["divergences"] > 1
    # the shortest traces go first: the first diverging one is as short as any diverging one
    assert len(first["counterexample"]["calls"]) <= len(every["counterexample"]["calls"])


def test_all_divergences_goes_with_the_corpus_phase() -> None:
    with pytest.raises(SystemExit) as exit_:
        conform_main(["--no-corpus", "--all-divergences", "--impl",
                      "refsched.conform.dag.broken:FailDoesNotBlock"])
    assert exit_.value.code == 2


# -- rows in the protocol's words ----------------------------------------------------------------

def test_a_corpus_counterexample_shows_calls_and_answers_as_wire_json() -> None:
    report = check(InProcessImplementation(broken.FailDoesNotBlock), examples=0,
                   max_traces=3000)
    assert report.counterexample is not None, report.format()
    text = report.format()
    assert "TaskState." not in text and "('a',)" not in text, text
    assert '{"op":"fail","task":"a","generation":1}' in text
    assert '{"ok":"failed"}' in text
    for row in report.counterexample.to_json()["calls"]:
        assert set(row["request"]) >= {"op"}
        assert row["implementation"] is None or set(row["implementation"]) <= {"ok", "error"}


def test_a_generated_counterexample_shows_refusals_as_error_objects() -> None:
    report = check(InProcessImplementation(broken.UnknownTaskWrongError), corpus=False,
                   examples=200, seed=0)
    example = report.counterexample
    assert example is not None, report.format()
    failing = example.calls[-1]
    assert not failing.agrees
    model, implementation = json.loads(failing.model), json.loads(failing.implementation)
    assert model["error"]["type"] == "UnknownTaskError"
    assert implementation["error"]["type"] != "UnknownTaskError"
    assert re.search(r'the implementation answered \{"error":', report.format())


# The pool's and the durable scheduler's counterexamples, from either phase: a broken class
# each, whose failing call the model answers otherwise. A generated walk whose calls are each
# one spec step is replayed step by step; one with a call of several steps (a claim that takes
# two expired leases back, a delayed submit's tick) is shown as it was made: ReclaimKeepsAttempt's
# always is, HeartbeatHidesCancel's is with this seed since the walks draw due times.
WIRE_CASES = [
    ("pool", broken_pool.ThiefLeavesLastTask, "corpus"),
    ("pool", broken_pool.ThiefLeavesLastTask, "generated"),
    ("durable", broken_durable.HeartbeatHidesCancel, "corpus"),
    ("durable", broken_durable.HeartbeatHidesCancel, "generated"),
    ("durable", broken_durable.ReclaimKeepsAttempt, "generated"),
]
SEED = {"pool": 0, "durable": 3}  # a seed whose walks show each of these within 200 examples


def _judged_in(system: str, cls: type[Any], phase: str,
               monkeypatch: pytest.MonkeyPatch) -> ConformanceReport:
    impl = InProcessImplementation(cls, system=system)
    if phase == "corpus":  # the first traces of the corpus, read without decoding the rest
        return check(impl, examples=0, traces=corpus_prefix(system, 60), clauses=False)
    # Hypothesis's shrinking of a durable walk takes minutes: the walk is kept as found, and
    # ddmin shrinks what a replay can take
    monkeypatch.setattr(oracle, "_HYPOTHESIS", {**oracle._HYPOTHESIS,
                                                "phases": (Phase.generate,)})
    return check(impl, corpus=False, examples=200, seed=SEED[system], clauses=False)


def _outcome(answer: Any) -> Any:
    """An encoded answer as the comparison reads it: the result, or the error's type."""
    return answer["error"]["type"] if "error" in answer else answer["ok"]


@pytest.mark.parametrize(("system", "cls", "phase"), WIRE_CASES,
                         ids=[f"{s}-{c.__name__}-{p}" for s, c, p in WIRE_CASES])
def test_a_pool_or_durable_counterexample_is_in_the_protocols_words(
        system: str, cls: type[Any], phase: str, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _judged_in(system, cls, phase, monkeypatch)
    example = report.counterexample
    assert report.verdict == "diverges" and example is not None, report.format()
    assert example.phase == phase and example.system == system
    rows = example.calls
    assert rows and all(isinstance(row, WireRow) for row in rows), report.format()
    ops = set(wire.get(system).ops)
    for row in rows:
        assert json.loads(json.dumps(row.request)) == row.request
        assert row.request["op"] in ops, row.request
        for answer in (row.model_answer, row.implementation_answer):
            assert answer is not None and len(answer) == 1 and set(answer) <= {"ok", "error"}
            assert json.loads(json.dumps(answer)) == answer
    *agreeing, failing = rows
    assert all(row.agrees for row in agreeing) and not failing.agrees
    # the reference model beside the implementation answered each earlier call as it did
    assert all(_outcome(row.model_answer) == _outcome(row.implementation_answer)
               for row in agreeing), report.format()
    assert failing.model_answer != failing.implementation_answer, report.format()
    # the verdict names the clause that decides the failing call, as the model answered it
    assert example.rule.startswith(f"{system}."), report.format()
    assert f"the implementation diverges: rule {example.rule}: {failing.text}" \
        in report.format()
    # the model's spec steps stay: in the rows where a replay took them, and as the trace
    assert example.trace is not None and example.trace.steps
    taken = [step for row in rows for step in row.steps]
    if taken:
        assert [action for action, _ in taken] == [s.action for s in example.trace.steps]
    else:  # the run as it was made: its trace is the model's steps along it
        assert phase == "generated" and system == "durable", report.format()
    assert report.to_json()["counterexample"]["calls"][-1]["request"] == failing.request


# -- what is counted, and the certificate --------------------------------------------------------

class FirstSubmissionAnswersTwo(TaskScheduler):
    """Answers generation 2 to the first submission of an id: the initial graph's first call
    diverges."""

    def submit(self, task_id: Any, deps: Any = (), fn: Any = None) -> int:
        return super().submit(task_id, deps, fn) + 1


def test_the_initial_submissions_are_calls_counted_and_shown() -> None:
    report = check(InProcessImplementation(FirstSubmissionAnswersTwo), corpus=False,
                   examples=10, seed=0)
    example = report.counterexample
    assert example is not None and example.calls[0].method == "submit", report.format()
    generated = report.phase("generated")
    assert generated is not None
    assert generated.figures["calls"] >= len(example.calls) >= 1
    assert " 0 calls" not in report.format()


def test_the_json_report_carries_a_certificate(capsys: pytest.CaptureFixture[str]) -> None:
    report = _json_report("--impl", "refsched:TaskScheduler",
                          "--max-traces", "50", "--examples", "20", "--seed", "3",
                          capsys=capsys)
    certificate = report["certificate"]
    from refsched import __version__
    assert certificate["refsched"] == __version__ and certificate["system"] == "scheduler"
    assert re.fullmatch(r"[0-9a-f]{64}", certificate["corpus_sha256"])
    assert certificate["seed"] == 3 and certificate["profile"] == report["profile"]
    assert certificate["traces_replayed"] == report["phases"][0]["figures"]["traces_run"] > 0
    assert certificate["examples"] > 0 and certificate["calls"] > 0
