"""The oracle for the timer, the pool and the durable scheduler: the wire, the served
implementations, and the verdicts ``refsched conform --system`` gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from refsched.conform import values, wire
from refsched.conform.client import ProtocolImplementation, ProtocolViolation
from refsched.conform.protocol import WireError
from refsched.durable.scheduler import Lease, LeaseView
from refsched.model.pool import Phase, PoolSnapshot
from refsched.types import (
    Due,
    Snapshot,
    TaskState,
    TimerEntry,
    TimerSnapshot,
    TimerState,
    TimerVersionView,
    VersionView,
    Wait,
)
from refsched.verify.itf import read_traces

pytest_plugins = ["pytester"]

SYSTEMS = ("timer", "pool", "durable")
ALTER = str(Path(__file__).parent / "conform_impls" / "alter_values.py")


def serve(system: str) -> list[str]:
    return [sys.executable, "-m", "refsched.serve", "--system", system]


def conform(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "refsched", "conform", *argv],
                          capture_output=True, text=True, timeout=timeout)


def exchange(system: str, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    """The answers of ``python -m refsched.serve --system`` to ``requests``, in order."""
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(serve(system), input=lines, capture_output=True, text=True,
                          timeout=60, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


# -- the values on the wire -------------------------------------------------------------------

@pytest.mark.parametrize("hint, value", [
    (TimerSnapshot, TimerSnapshot(
        now=1.5, closed=False, next_seq=3,
        tasks={"a": TimerVersionView(2, TimerState.PENDING, 1.0, -1, 2, False, 0)},
        heap=frozenset({TimerEntry(1.0, -1, 2, "a", 2), TimerEntry(0, 0, 1, "a", 1)}))),
    (Due | Wait | None, Due("a", 3, None)),
    (Due | Wait | None, Wait(0.5)),
    (Due | Wait | None, None),
    (PoolSnapshot, PoolSnapshot(
        phase=Phase.DRAINING, deque={"w1": ("a", "b"), "w2": ()}, running={"w2": "c"},
        outstanding=3, submitted=frozenset("abc"), finished=frozenset(),
        cancelled=frozenset(), runs={"c": 1}, parent={"b": "c"})),
    (Snapshot, Snapshot(True, False, 2, {"a": VersionView(
        1, TaskState.BLOCKED, frozenset({"b"}), 1, "b", False, 0, 1)})),
    (list[Lease], [Lease("a", 1, 2, 4.0, "m:f", {"x": [1]}, "w1")]),
    (dict[str, LeaseView], {"a": LeaseView(2, None, None)}),
])
def test_a_value_goes_over_the_wire_and_comes_back_equal(hint: Any, value: Any) -> None:
    sent = json.loads(json.dumps(values.to_json(value)))
    assert values.from_json(hint, sent) == value


@pytest.mark.parametrize("hint, sent", [
    (TimerSnapshot, {"now": 0}),  # keys missing
    (Due | Wait | None, {"task_id": "a"}),  # neither a Due nor a Wait
    (TimerVersionView, {"version": True, "state": "pending", "run_at": 0, "priority": 0,
                        "seq": 1, "cancel_requested": False, "claims": 0}),  # a bool version
    (TimerState, "done"),
    (PoolSnapshot, []),
])
def test_a_value_of_another_shape_is_a_wire_error(hint: Any, sent: Any) -> None:
    with pytest.raises(WireError):
        values.from_json(hint, sent)


# -- the served implementations ---------------------------------------------------------------

@pytest.mark.parametrize("system", SYSTEMS)
def test_the_hello_declares_the_system(system: str) -> None:
    hello, = exchange(system, {"id": 0, "op": "hello", "protocol": 1})
    assert hello["ok"]["system"] == system
    assert hello["ok"]["protocol"] == 1


def test_a_served_timer_answers_its_operations_and_refuses_bad_requests() -> None:
    answers = exchange(
        "timer",
        {"id": 0, "op": "schedule", "task": "a", "run_at": 1},  # before new
        {"id": 1, "op": "new", "rebuild_floor": 2},
        {"id": 2, "op": "schedule", "task": "a", "run_at": 1, "priority": 3},
        {"id": 3, "op": "next"},
        {"id": 4, "op": "advance", "now": 1},
        {"id": 5, "op": "next"},
        {"id": 6, "op": "complete", "task": "a", "version": 2},
        {"id": 7, "op": "schedule", "task": 1, "run_at": 1},  # a task that is no string
        {"id": 8, "op": "schedule", "task": "b"},  # run_at missing
        {"id": 9, "op": "steal", "thief": "w1", "victim": "w2"},  # the pool's
        {"id": 10, "op": "schedule", "task": "b", "run_at": "soon"},
    )
    assert answers[0]["error"]["type"] == "BadRequest"
    assert answers[2] == {"id": 2, "ok": 1}
    assert answers[3] == {"id": 3, "ok": {"seconds": 1}}
    assert answers[5] == {"id": 5, "ok": {"task_id": "a", "version": 1}}
    assert answers[6]["error"]["type"] == "StaleGenerationError"
    assert (answers[6]["error"]["generation"], answers[6]["error"]["current"]) == (2, 1)
    assert [a["error"]["type"] for a in answers[7:]] == [
        "BadRequest", "BadRequest", "Unsupported", "InvalidArgumentError"]


def test_a_served_pool_takes_its_workers_moves_on_request() -> None:
    answers = exchange(
        "pool",
        {"id": 1, "op": "new", "workers": ["w1", "w2"]},
        {"id": 2, "op": "submit", "task": "a", "worker": "w1"},
        {"id": 3, "op": "submit", "task": "b", "worker": "w1"},
        {"id": 4, "op": "steal", "thief": "w2", "victim": "w1"},
        {"id": 5, "op": "pop", "worker": "w1"},
        {"id": 6, "op": "pop", "worker": "w2"},  # w2 runs a task already
        {"id": 7, "op": "snapshot"},
        {"id": 8, "op": "new", "workers": []},
    )
    snapshot = values.from_json(PoolSnapshot, answers[6]["ok"])
    assert snapshot.running == {"w2": "a", "w1": "b"}  # the thief took the oldest
    assert answers[5]["error"]["type"] == "ValueError"
    assert answers[7]["error"]["type"] == "ValueError"


def test_a_served_durable_scheduler_fences_reports_by_attempt() -> None:
    # the lease claim() hands w1 (its deadline is the store's clock, 0, plus the lease, 1)
    first = {"task_id": "a", "generation": 1, "attempt": 1, "deadline": 1.0,
             "fn": "refsched.durable.jobs:noop", "args": {}, "worker": "w1"}
    second = {**first, "attempt": 2, "deadline": 3.0, "worker": "w2"}
    answers = exchange(
        "durable",
        {"id": 1, "op": "new", "max_concurrency": 1, "max_attempts": 3},
        {"id": 2, "op": "submit", "task": "a"},
        {"id": 3, "op": "start"},
        {"id": 4, "op": "claim", "worker": "w1", "lease": 1},
        {"id": 5, "op": "tick", "seconds": 2},
        {"id": 6, "op": "claim", "worker": "w2", "lease": 1},  # w1's lease expired
        {"id": 7, "op": "crash", "worker": "w1"},
        {"id": 8, "op": "history"},
        {"id": 9, "op": "complete", "lease": first},  # attempt 1 comes back late
        {"id": 10, "op": "complete", "lease": second},
        {"id": 11, "op": "heartbeat", "lease": "not a lease"},
    )
    assert answers[3]["ok"] == [first] and answers[5]["ok"] == [second]
    assert [step[0] for step in answers[7]["ok"]] == ["Submit", "Start", "Claim", "Tick",
                                                      "Expire", "Reclaim"]
    assert answers[8]["error"]["type"] == "StaleLeaseError"
    assert answers[9] == {"id": 10, "ok": "succeeded"}
    assert answers[10]["error"]["type"] == "InvalidArgumentError"


# -- the oracle -------------------------------------------------------------------------------

@pytest.mark.parametrize("system", SYSTEMS)
def test_the_shipped_server_conforms(system: str) -> None:
    done = conform("--system", system, "--max-traces", "60", "--examples", "15", "--json",
                   "--", *serve(system))
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["verdict"] == "conforms"
    corpus, generated = report["phases"][:2]  # then the clauses phase, where it has probes
    assert corpus["figures"]["traces_run"] == 60 and corpus["figures"]["steps_run"] > 300
    assert generated["figures"]["examples"] >= 15 and generated["figures"]["calls"] > 100


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("corpus", [True, False], ids=["corpus", "generated"])
def test_a_proxy_that_alters_values_is_a_divergence_not_a_protocol_error(
        system: str, corpus: bool) -> None:
    phase = ["--max-traces", "5", "--examples", "0"] if corpus else ["--no-corpus",
                                                                       "--examples", "20"]
    done = conform("--system", system, *phase, "--json", "--",
                   sys.executable, ALTER, *serve(system))
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges"), done.stdout
    assert report["counterexample"]["phase"] == ("corpus" if corpus else "generated")
    assert len(report["counterexample"]["calls"]) <= 3


def test_a_server_of_another_system_is_a_protocol_violation() -> None:
    done = conform("--system", "pool", "--", *serve("timer"))
    assert done.returncode == 3
    assert "the implementation is a timer, the oracle was asked to check a pool" in done.stdout


def test_the_client_refuses_a_result_of_the_wrong_shape() -> None:
    script = ("import json,sys\n"
              "for line in sys.stdin:\n"
              "    r = json.loads(line)\n"
              "    ok = {'name': 'x', 'protocol': 1, 'system': 'timer'} if r['op'] == 'hello' "
              "else (None if r['op'] == 'new' else 'one')\n"
              "    print(json.dumps({'id': r['id'], 'ok': ok}), flush=True)\n")
    with ProtocolImplementation([sys.executable, "-c", script], system="timer") as impl:
        timer = impl.remote()(lambda: 0, rebuild_floor=1)
        with pytest.raises(ProtocolViolation, match="schedule's result must be an integer"):
            timer.schedule("a", 0)


@pytest.mark.parametrize("system", ["timer", "durable"])
def test_a_corpus_counterexample_is_a_trace_replay_reads(system: str, tmp_path: Path) -> None:
    out = tmp_path / "ce.itf.json"
    done = conform("--system", system, "--max-traces", "5", "--examples", "0",
                   "--trace-out", str(out), "--", sys.executable, ALTER, *serve(system))
    assert done.returncode == 1
    trace, = read_traces(out)
    replayed = subprocess.run([sys.executable, "-m", "refsched", "replay", "--system", system,
                               str(out)], capture_output=True, text=True, timeout=120)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "to the diverging step" in trace.meta["source"]


def test_a_generated_pool_counterexample_is_a_trace_of_the_spec(tmp_path: Path) -> None:
    out = tmp_path / "ce.itf.json"
    done = conform("--system", "pool", "--no-corpus", "--examples", "20", "--trace-out",
                   str(out), "--", sys.executable, ALTER, *serve("pool"))
    assert done.returncode == 1
    replayed = subprocess.run([sys.executable, "-m", "refsched", "replay", "--system", "pool",
                               str(out)], capture_output=True, text=True, timeout=120)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_every_system_has_a_wire() -> None:
    assert wire.SYSTEMS == ("scheduler", "timer", "pool", "durable")
    for system in SYSTEMS:
        table = wire.get(system)
        assert table.system == system and table.remote.wire is table


# -- profiles, and sched.scheduler --------------------------------------------------------------

NARROW_TIMER = {"versions": False, "callbacks": False, "close": False, "snapshot": False,
                "stats": False, "validates": False}


def test_a_served_timer_answers_unsupported_outside_its_profile() -> None:
    lines = "".join(json.dumps(r) + "\n" for r in (
        {"id": 0, "op": "hello", "protocol": 1},
        {"id": 1, "op": "new", "rebuild_floor": 0},
        {"id": 2, "op": "snapshot"},
        {"id": 3, "op": "complete", "task": "a", "version": 1},
        {"id": 4, "op": "cancel", "task": "a"}))
    done = subprocess.run([*serve("timer"), "--profile", json.dumps(NARROW_TIMER)], input=lines,
                          capture_output=True, text=True, timeout=60, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["ok"]["profile"] == {**NARROW_TIMER, "cancel": True}
    assert [a["error"]["type"] for a in answers[2:4]] == ["Unsupported", "Unsupported"]
    assert answers[4]["error"]["type"] == "UnknownTaskError"  # cancel is in the profile


def test_the_shipped_timer_conforms_under_a_narrow_profile() -> None:
    done = conform("--system", "timer", "--max-traces", "60", "--examples", "20", "--json",
                   "--", *serve("timer"), "--profile", json.dumps(NARROW_TIMER))
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    corpus = report["phases"][0]["figures"]
    assert corpus["admitted"] + corpus["prefixes"] == corpus["traces_run"] == 60
    assert report["profile"] == {"versions": False, "callbacks": False, "cancel": True,
                                 "close": False, "snapshot": False, "stats": False,
                                 "validates": False}


def test_sched_scheduler_hands_out_a_version_it_cannot_stop() -> None:
    done = conform("--system", "timer", "--no-corpus", "--examples", "200", "--json", "--",
                   sys.executable, "-m", "refsched.conform.timer.sched_adapter")
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges")
    calls = report["counterexample"]["calls"]
    assert [c["call"].split("(")[0] for c in calls] == [
        "timer.schedule", "timer.next", "timer.cancel"]
    assert calls[-1]["model"] == {"ok": False}
    assert calls[-1]["implementation"]["error"]["type"] == "ValueError"


def test_sched_scheduler_orders_equal_times_by_the_lower_priority_number() -> None:
    profile = {**NARROW_TIMER, "cancel": False}
    done = conform("--system", "timer", "--no-corpus", "--examples", "200", "--json",
                   "--impl", "refsched.conform.timer.sched_adapter:SchedTimer",
                   "--profile", json.dumps(profile))
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges")
    last = report["counterexample"]["calls"][-1]
    assert last["call"] == "timer.next()" and last["model"] != last["implementation"]
    assert "priority" in " ".join(c["call"] for c in report["counterexample"]["calls"])


NARROW_DURABLE = {"deps": False, "generations": False, "start": False, "cancel": False,
                  "retry": False, "close": False, "heartbeat": False, "expire": False,
                  "snapshot": False, "validates": False}


def test_the_shipped_durable_scheduler_conforms_under_a_narrow_profile() -> None:
    # refsched's own scheduler has a start phase: a profile without one is another contract
    profile = {**NARROW_DURABLE, "start": True}
    done = conform("--system", "durable", "--max-traces", "40", "--examples", "15", "--json",
                   "--", *serve("durable"), "--profile", json.dumps(profile))
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert report["phases"][0]["figures"]["steps_run"] > 0
    assert report["phases"][1]["figures"]["calls"] > 50


@pytest.mark.parametrize("system, broken, seed", [
    ("timer", "refsched.conform.timer.broken:RescheduleKeepsPriority", 0),
    ("pool", "refsched.conform.pool.broken:ChildGoesRoundRobin", 0),
    # The first 100 traces are of the durable corpus's one-id instance (no dependents to
    # block), so here the generated phase catches it. Its walks are the same on every run of a
    # seed: with seed 0, 100 examples miss the bug (200 find it); seeds 1 and 3 find it in 100,
    # and seed 1's walk shrinks to 3 calls in a seventh of seed 3's time.
    ("durable", "refsched.conform.durable.broken:CancelDoesNotBlock", 1),
])
def test_conform_rejects_a_broken_implementation_in_process(system: str, broken: str,
                                                            seed: int) -> None:
    done = conform("--system", system, "--max-traces", "100", "--examples", "100", "--seed",
                   str(seed), "--json", "--impl", broken)
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges"), done.stdout
    assert len(report["counterexample"]["calls"]) <= 6


def test_conform_rejects_a_broken_pool_served_over_the_protocol() -> None:
    done = conform("--system", "pool", "--max-traces", "100", "--examples", "0", "--json", "--",
                   *serve("pool"), "--impl",
                   "refsched.conform.pool.broken:CancelFuturesLeavesQueued")
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (1, "diverges"), done.stdout
    assert report["implementation"] == "refsched.conform.pool.broken:CancelFuturesLeavesQueued"
    # its calls as the wire carried them, the last one the move that left the queued tasks
    calls = report["counterexample"]["calls"]
    assert [call["request"]["op"] for call in calls][-1] == "cancel_queued", calls
    assert calls[-1]["steps"] == [{"action": "CancelQueued", "params": {}}]
    assert report["counterexample"]["reason"].startswith("rule pool.cancel_queued.ok: ")


@pytest.mark.parametrize("system, broken, traces, failing, answers", [
    ("pool", "ThiefLeavesLastTask", "100", '!2    {"op":"steal","thief":"w2","victim":"w1"}',
     ('{"ok":null}', '{"error":{"type":"StepRefused"')),
    # the first 30 traces of the durable corpus hold a report repeated after the version ended
    ("durable", "RepeatedReportRefused", "30", '!5    {"op":"complete","lease":{"task_id":"a"',
     ('{"ok":"succeeded"}', '{"error":{"type":"StaleLeaseError"')),
], ids=["pool", "durable"])
def test_a_served_broken_implementations_counterexample_reads_as_the_wire_carried_it(
        system: str, broken: str, traces: str, failing: str, answers: tuple[str, str]) -> None:
    done = conform("--system", system, "--max-traces", traces, "--examples", "0", "--",
                   *serve(system), "--impl", f"refsched.conform.{system}.broken:{broken}")
    assert done.returncode == 1, done.stdout + done.stderr
    table = done.stdout.split("counterexample (", 1)[1]
    assert "  step  call  " in table and failing in table, done.stdout
    model, implementation = answers
    verdict = next(line for line in table.splitlines()
                   if line.startswith("the implementation diverges: "))
    assert verdict.startswith(f"the implementation diverges: rule {system}.")
    assert f"the implementation answered {implementation}" in verdict, verdict
    assert verdict.endswith(f"the model {model}"), verdict
    assert "taken" not in table  # no spec steps' words: the calls are the wire's


# -- the pytest plugin, and TLC on a counterexample ---------------------------------------------

PLUGIN = ["-p", "no:refsched", "-p", "refsched.conform.pytest_plugin"]


def test_the_pytest_plugin_checks_a_timer(pytester: pytest.Pytester) -> None:
    passed = pytester.runpytest(*PLUGIN, "--refsched-system=timer",
                                "--refsched-impl=refsched:TimerScheduler",
                                "--refsched-examples=10", "-k", "generated")
    passed.assert_outcomes(passed=1, deselected=2)
    failed = pytester.runpytest(*PLUGIN, "--refsched-system=timer",
                                "--refsched-impl=refsched.conform.timer.broken:WaitFromStaleEntry",
                                "--refsched-examples=100", "-k", "generated")
    failed.assert_outcomes(failed=1, deselected=2)
    failed.stdout.fnmatch_lines(["*WaitFromStaleEntry DIVERGES from the model*",
                                 "*counterexample*", '*!*{"op":"next"}*{"ok":{"seconds":*'])


def test_tlc_judges_a_timer_counterexample_as_a_behaviour_of_its_spec(tmp_path: Path) -> None:
    out = tmp_path / "ce.itf.json"
    done = conform("--system", "timer", "--max-traces", "5", "--examples", "0",
                   "--trace-out", str(out), "--", sys.executable, ALTER, *serve("timer"))
    assert done.returncode == 1 and out.exists()
    judged = subprocess.run([sys.executable, "-m", "refsched", "validate-trace", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert "accepted" in judged.stdout and "TimerQueue" in judged.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("profile", "verdict"), [
    (None, "diverges"), ('{"batch_steals": false}', "conforms"),
], ids=["batch-steals", "single-steals-only"])
def test_a_batch_steal_bug_is_caught_only_where_the_profile_has_batch_steals(
        profile: str | None, verdict: str) -> None:
    # the bug shows on a batch of three: 300 walks of seed 0 reach one
    done = conform("--system", "pool", "--max-traces", "20", "--examples", "300", "--seed", "0",
                   "--json", "--impl", "refsched.conform.pool.broken:BatchKeepsNewestOnTop",
                   *(("--profile", profile) if profile else ()))
    report = json.loads(done.stdout)
    assert report["verdict"] == verdict, done.stdout
    if verdict == "diverges":
        assert report["counterexample"]["reason"].startswith("rule pool.steal.ok: ")


def test_a_pool_profile_declares_batch_steals_or_is_not_asked_for_them() -> None:
    from refsched.profile import PoolProfile, full_profile, profile_from_hello

    assert full_profile("pool") == PoolProfile(batch_steals=True)
    assert profile_from_hello("pool", {}) == PoolProfile(batch_steals=False,
                                                         managed_blocking=False)
    assert profile_from_hello("pool", {"batch_steals": True}).batch_steals


def test_a_pool_stats_answer_may_leave_out_stolen_tasks_and_never_carries_blocking() -> None:
    from refsched.pool.pool import PoolStats

    sent = {"executed": 4, "stolen": 2, "queue_lengths": [0, 1], "parked": 1, "outstanding": 1,
            "state": "accepting"}
    assert values.from_json(PoolStats, sent).stolen_tasks == 2  # absent: single steals
    assert values.from_json(PoolStats, {**sent, "stolen_tasks": 5}).stolen_tasks == 5
    with pytest.raises(WireError, match="may have"):
        values.from_json(PoolStats, {**sent, "spares": 0})
    with pytest.raises(WireError, match="exactly the keys"):
        values.from_json(PoolStats, {k: v for k, v in sent.items() if k != "stolen"})
    local = PoolStats(executed=4, stolen=2, queue_lengths=(0, 1), parked=1, outstanding=1,
                      state="accepting", spares=1, blocked=1, compensated=1, stolen_tasks=3)
    assert set(values.to_json(local)) == {*sent, "stolen_tasks"}


def test_a_pool_that_answers_stats_without_stolen_tasks_conforms() -> None:
    # an implementation written before batch steals: no batch_steals flag, no stolen_tasks
    proxy = str(Path(__file__).parent / "conform_impls" / "stats_without_stolen_tasks.py")
    done = conform("--system", "pool", "--max-traces", "20", "--examples", "20", "--json",
                   "--", sys.executable, proxy, *serve("pool"))
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"]) == (0, "conforms"), done.stdout
