"""The conformance oracle accepts refsched's scheduler and rejects each broken one with a short
counterexample whose trace is a behaviour of the spec; profiles narrow what it asks; harness
failures end a check with their verdict; the command and the pytest plugin report all of it.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler, cli
from refsched.conform.client import (
    ImplementationCrashed,
    InProcessImplementation,
    ProtocolImplementation,
)
from refsched.conform.dag import broken
from refsched.conform.main import main as conform_main
from refsched.conform.oracle import admitted_steps, admitted_traces, check
from refsched.profile import FULL, STATIC, Profile
from refsched.verify.itf import read_traces, write_traces
from refsched.verify.replay import replay

pytest_plugins = ["pytester"]

# The longest shrunk counterexample seen for a broken scheduler is 6 calls (seed 0).
MAX_CALLS = 8


def test_refsched_scheduler_conforms() -> None:
    # The first 2,000 corpus traces in process; the whole corpus goes through the shipped
    # server below (and through TaskScheduler itself in tests/dag/test_replay.py).
    report = check(InProcessImplementation(TaskScheduler), examples=30, max_traces=2000)
    assert report.verdict == "conforms", report.format()
    assert report.exit_status == 0 and report.counterexample is None
    corpus = report.phase("corpus")
    assert corpus is not None and corpus.ok
    assert corpus.figures["traces_run"] == 2000 < corpus.figures["traces"]
    assert corpus.figures["steps_run"] == corpus.figures["steps_admitted"] > 10_000
    generated = report.phase("generated")
    assert generated is not None and generated.figures["examples"] >= 30
    assert json.loads(json.dumps(report.to_json()))["verdict"] == "conforms"


@pytest.mark.parametrize("scheduler", broken.BROKEN, ids=lambda cls: cls.__name__)
def test_each_broken_scheduler_is_rejected_with_a_short_spec_behaviour(
        scheduler: type[TaskScheduler]) -> None:
    report = check(InProcessImplementation(scheduler), corpus=False, examples=300, seed=0)
    assert report.verdict == "diverges" and report.exit_status == 1, report.format()
    example = report.counterexample
    assert example is not None and example.phase == "generated"
    assert 1 <= len(example.calls) <= MAX_CALLS, example.format()
    assert not example.calls[-1].agrees and all(c.agrees for c in example.calls[:-1])
    # The model's steps along the calls are a behaviour of the spec: refsched follows it.
    assert replay([example.trace]).ok, example.format()
    assert [s.action for s in example.trace.steps] == [
        action for call in example.calls for action, _ in call.steps]
    assert "the implementation diverges" in report.format()
    json.dumps(report.to_json())


def test_the_same_seed_finds_the_same_counterexample() -> None:
    def calls(seed: int) -> list[str]:
        report = check(InProcessImplementation(broken.ClaimsNewestFirst), corpus=False,
                       examples=100, seed=seed)
        assert report.counterexample is not None
        return [f"{c.text} {c.model} {c.implementation}" for c in report.counterexample.calls]

    assert calls(7) == calls(7)


def test_the_corpus_counterexample_is_the_start_of_a_corpus_trace() -> None:
    report = check(InProcessImplementation(broken.CancelIgnoresRunning), examples=0)
    example = report.counterexample
    assert report.verdict == "diverges" and example is not None, report.format()
    assert example.phase == "corpus" and len(example.calls) <= MAX_CALLS
    assert example.calls[-1].method == "cancel" and "cancel_requested" in example.calls[-1].diff
    assert replay([example.trace]).ok
    assert not replay([example.trace], broken.CancelIgnoresRunning).ok


def test_the_corpus_phase_replays_the_edge_kinds_and_add_deps_instances() -> None:
    # The scheduler's corpus has three instances; a bug that only AddDeps reaches is found by
    # the corpus phase alone, in the AddDeps instance's traces.
    report = check(InProcessImplementation(broken.AddDepsKeepsCount), examples=0,
                   clauses=False)
    example = report.counterexample
    assert report.verdict == "diverges" and example is not None, report.format()
    assert example.phase == "corpus" and example.calls[-1].method == "add_deps"
    assert any(action == "AddDeps" for call in example.calls for action, _ in call.steps)
    assert not replay([example.trace], broken.AddDepsKeepsCount).ok


class Recording:
    """A TaskScheduler that notes every call made to it, and whether it came after start()."""

    def __init__(self, max_concurrency: int, calls: Counter[str]) -> None:
        self.inner = TaskScheduler(max_concurrency)
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            started = self.inner.snapshot().started
            self.calls[name] += 1
            if name == "submit" and started:
                self.calls["submit after start"] += 1
            if name == "ready" and (args[:1] not in ((), (None,)) or kwargs.get("limit")):
                self.calls["ready with a limit"] += 1
            return method(*args, **kwargs)
        return call


def test_a_static_profile_asks_only_what_it_admits() -> None:
    calls: Counter[str] = Counter()
    implementation = InProcessImplementation(lambda n: Recording(n, calls), profile=STATIC,
                                             name="recording")
    report = check(implementation, examples=60)
    assert report.ok, report.format()
    corpus = report.phase("corpus")
    assert corpus is not None and corpus.figures["admitted"] == 0 < corpus.figures["prefixes"]
    assert calls["submit"] and calls["start"] and calls["ready"] and calls["complete"]
    for never in ("retry", "cancel", "fail", "acknowledge_cancel", "close", "snapshot",
                  "state", "info", "submit after start", "ready with a limit"):
        assert calls[never] == 0, (never, calls)


def test_without_error_types_a_refusal_under_another_name_passes_and_a_missing_one_does_not(
        ) -> None:
    names_only = Profile(error_types=False)
    renamed = InProcessImplementation(broken.UnknownTaskWrongError, profile=names_only)
    report = check(renamed, corpus=False, examples=150)
    assert report.ok, report.format()
    missing = InProcessImplementation(broken.StartMissesCycle, profile=names_only)
    report = check(missing, corpus=False, examples=150)
    assert report.verdict == "diverges", report.format()
    assert report.counterexample is not None
    assert "returned" in report.counterexample.reason


def test_admitted_traces_cut_a_trace_at_its_first_step_outside_the_profile() -> None:
    from refsched.verify import corpus

    traces = read_traces(corpus.traces_dir() / corpus.BUNDLE)
    assert admitted_traces(FULL, traces) == (traces, len(traces))
    no_cancel = Profile(cancel=False, retry=False)
    kept, whole = admitted_traces(no_cancel, traces)
    assert 0 < whole < len(kept) < len(traces)
    for trace in kept:
        assert admitted_steps(no_cancel, trace) == len(trace.steps)
        assert not {"Cancel", "AcknowledgeCancel", "Retry"} & {s.action for s in trace.steps}


class Crashing:
    """An implementation whose schedulers crash, as a process would, after some calls."""

    name = "crashing"
    profile = FULL

    def __init__(self, calls_before_crash: int) -> None:
        self.left = calls_before_crash
        self.closed = False

    def new(self, max_concurrency: int) -> Any:
        outer = self

        class Scheduler:
            def __getattr__(self, name: str) -> Any:
                def call(*args: Any, **kwargs: Any) -> Any:
                    outer.left -= 1
                    if outer.left < 0:
                        raise ImplementationCrashed("submit: its stdout ended", "boom\nSegfault")
                    return getattr(inner, name)(*args, **kwargs)
                return call

        inner = TaskScheduler(max_concurrency)
        return Scheduler()

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> Crashing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.mark.parametrize("use_corpus", [True, False], ids=["corpus", "generated"])
def test_a_harness_failure_ends_the_check_with_its_verdict(use_corpus: bool) -> None:
    implementation = Crashing(calls_before_crash=25)
    report = check(implementation, corpus=use_corpus, examples=0 if use_corpus else 50)
    assert report.verdict == "crashed" and report.exit_status == 3, report.format()
    assert report.counterexample is None and implementation.closed
    assert report.stderr_tail == "boom\nSegfault" and "Segfault" in report.format()
    assert not report.phases[-1].ok


def test_the_oracle_speaks_the_protocol_to_a_served_scheduler() -> None:
    command = [sys.executable, "-m", "refsched.serve", "--impl",
               "refsched.conform.dag.broken:ClaimsNewestFirst"]
    with ProtocolImplementation(command) as implementation:
        report = check(implementation, corpus=False, examples=100)
    assert report.verdict == "diverges", report.format()
    assert report.counterexample is not None
    assert report.counterexample.calls[-1].method == "ready"


def test_the_shipped_server_conforms_over_the_protocol_corpus_included(
        capsys: pytest.CaptureFixture[str]) -> None:
    # the plain graph's instance whole and the start of the optional edges' (every instance is
    # replayed whole on the TaskScheduler by `refsched replay`, tests/test_cli.py)
    status = conform_main(["--examples", "40", "-q", "--max-traces", "12000", "--",
                           sys.executable, "-m", "refsched.serve"])
    out = capsys.readouterr().out
    assert status == 0, out
    # it declares edge kinds and add_deps in its hello, and the oracle asks them over the wire
    assert "conforms to the model (full contract)" in out
    assert "12,000 of 36,901 traces admitted" in out


# -- the pytest plugin --------------------------------------------------------------------------

# Before the command's tests, which read other trace files: the corpus read stays cached.
# "-p no:refsched" keeps the plugin's entry point, once installed, from loading it a second time.
PLUGIN = ["-p", "no:refsched", "-p", "refsched.conform.pytest_plugin"]


def test_the_pytest_plugin_passes_a_conforming_scheduler(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*PLUGIN, "--refsched-impl=refsched:TaskScheduler",
                                "--refsched-examples=20", "--refsched-max-traces=3000", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*refsched-conformance::corpus PASSED*",
                                 "*refsched-conformance::generated PASSED*",
                                 "*refsched-conformance::clauses PASSED*"])


@pytest.mark.parametrize("option", ["--refsched-max-traces=0", "--refsched-examples=0"])
def test_the_pytest_plugin_refuses_a_count_below_one(pytester: pytest.Pytester,
                                                    option: str) -> None:
    result = pytester.runpytest(*PLUGIN, "--refsched-impl=refsched:TaskScheduler", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option.split('=')[0]} must be at least 1*"])


def test_the_pytest_plugin_fails_with_the_counterexample(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*PLUGIN, "--refsched-impl=refsched.conform.dag.broken:"
                                "ClaimsNewestFirst", "--refsched-examples=100", "-k", "generated")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*refsched-conformance::generated*",
                                 "*DIVERGES from the model*",
                                 "*counterexample*",
                                 '*{"op":"ready","limit":null}*[["a",1],["b",1]]*'
                                 '[["b",1],["a",1]]*'])


def test_the_pytest_plugin_clauses_item_names_the_broken_rule(pytester: pytest.Pytester) -> None:
    # a bug random calls rarely reach: the clauses item alone reports it, naming its rule
    result = pytester.runpytest(*PLUGIN, "--refsched-impl=refsched.conform.dag.broken:"
                                "DuplicateDepAccepted", "-k", "clauses")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*refsched-conformance::clauses*",
                                 "*DIVERGES from the model*", "*rule dag.submit.duplicate-dep*"])


def test_the_pytest_plugin_adds_nothing_without_an_implementation(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)


# -- the command --------------------------------------------------------------------------------

def test_conform_writes_a_counterexample_refsched_replay_accepts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "counterexample.itf.json"
    status = conform_main(["--impl", "refsched.conform.dag.broken:FailDoesNotBlock", "--no-corpus",
                           "--examples", "300", "--trace-out", str(out), "--json", "-q"])
    assert status == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "diverges" and report["exit_status"] == 1
    assert report["counterexample"]["calls"][-1]["call"].startswith("fail(")
    [trace] = read_traces(out)
    assert [s.action for s in trace.steps][-1] == "Fail"
    assert cli.main(["replay", "-q", str(out)]) == 0
    assert "no divergence" in capsys.readouterr().err


def test_conform_prints_the_table_and_exits_1_on_a_divergence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = tmp_path / "ce.jsonl"
    status = conform_main(["--impl", "refsched.conform.dag.broken:ClaimsOverLimit", "--no-corpus",
                           "--examples", "200", "--trace-out", str(bundle)])
    assert status == 1
    captured = capsys.readouterr()
    assert "DIVERGES" in captured.out and "step  call" in captured.out
    assert "generated: " in captured.err and f"wrote {bundle}" in captured.err
    assert len(read_traces(bundle)) == 1


def test_conform_exits_3_with_the_stderr_of_a_crashing_command(
        capsys: pytest.CaptureFixture[str]) -> None:
    crash = "import sys; sys.stderr.write('no scheduler here\\n'); sys.exit(4)"
    status = conform_main(["-q", "--no-corpus", "--", sys.executable, "-c", crash])
    assert status == 3
    out = capsys.readouterr().out
    assert "CRASHED" in out and "no scheduler here" in out


@pytest.mark.parametrize("argv", [
    [],
    ["--impl", "refsched:TaskScheduler", "--", "prog"],
    ["--profile", "{}", "--", "prog"],
    ["--impl", "refsched:TaskScheduler", "--profile", "{\"bogus\": true}"],
    ["--impl", "refsched:TaskScheduler", "--no-corpus", "--examples", "0", "--no-clauses"],
    ["--system", "pool", "--impl", "refsched:WorkStealingPool", "--no-corpus", "--examples", "0",
     "--no-clauses"],
], ids=["nothing", "both", "profile-with-command", "bad-profile", "nothing-to-check",
        "nothing-to-check-of-a-pool"])
def test_conform_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        conform_main(argv)
    assert stop.value.code == 2


def test_the_clauses_phase_runs_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert conform_main(["--impl", "refsched:TaskScheduler", "--no-corpus", "--examples", "0",
                         "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [phase["name"] for phase in report["phases"]] == ["clauses"]
    assert report["phases"][0]["figures"]["probes"] > 0


# -- TLC --------------------------------------------------------------------------------------

def _counterexample_traces(schedulers: Iterable[type[TaskScheduler]]) -> list[Any]:
    traces = []
    for scheduler in schedulers:
        report = check(InProcessImplementation(scheduler), corpus=False, examples=300)
        assert report.counterexample is not None and report.counterexample.trace is not None
        traces.append(report.counterexample.trace)
    return traces


@pytest.mark.slow
def test_tlc_accepts_the_counterexample_traces(tmp_path: Path) -> None:
    from refsched.verify.validate import validate_trace

    traces = _counterexample_traces([broken.FailDoesNotBlock, broken.CancelIgnoresRunning,
                                     broken.StaleCallbackAccepted])
    bundle = tmp_path / "counterexamples.jsonl"
    write_traces(bundle, traces)
    for trace in read_traces(bundle):
        verdict = validate_trace(trace)
        assert verdict.accepted, trace.name
