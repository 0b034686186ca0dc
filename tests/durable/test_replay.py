"""The durable corpus beyond its replay whole (tests/durable/test_replay_corpus.py on SQLite,
tests/durable/test_replay_postgresql.py on PostgreSQL): able to catch a store that fences,
extends, expires or claims differently, and its other instances replayed in part.

The corpus has six instances, each covering every edge of TLC's state graph of its config:
traces/durable-cover.jsonl.gz (spec/MCDurableSchedulerTraces.cfg, one id), replayed whole by
those two files, and the claims, generations, diamond and time instances
(spec/MCDurableSchedulerCorpus*.cfg) and the edges instance (spec/MCDurableSchedulerEdges.cfg:
optional edges and AddDeps), of which a stratified subset is replayed here (the edges
instance's on PostgreSQL too) and the whole by `refsched verify` (and, on both stores, with
-m big_instance). Replay takes each step through a fresh SQLite store on a virtual clock, the
workers' leases held by the harness (refsched.verify.durable.system); each must-fail test
breaks one thing in a DurableScheduler and asserts the replay names the first step where it
shows.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from refsched.cli import main
from refsched.conform import system_phases
from refsched.conform.durable import broken as broken_durable
from refsched.conform.report import PhaseResult
from refsched.durable import DurableScheduler
from refsched.durable.jobs import NOOP
from refsched.durable.scheduler import Lease
from refsched.durable.store import Tx
from refsched.errors import InvariantViolation
from refsched.model.durable import ACTIONS, EDGE_ACTIONS, INITIAL, Instance
from refsched.verify import corpus, system
from refsched.verify.durable.system import EDGES_CONFIG, TIME_CORPUS_CONFIG
from refsched.verify.itf import Step, Trace, encode_bundle, read_traces, write_traces
from refsched.verify.replay import format_divergence, replay
from tests.conftest import postgres_factory
from tests.durable.support import ClaimRewritten
from tests.replay_support import assert_wrong_state_after, corpus_traces, first_divergence

DURABLE = system.get("durable")


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    return corpus_traces(DURABLE)


@pytest.mark.big_instance  # 310,968 steps: many minutes on each store (a subset: below)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_every_edge_of_the_edges_corpus_replays_on_each_store(
        kind: str, request: pytest.FixtureRequest) -> None:
    # traces/durable-edges-cover.jsonl.gz (spec/MCDurableSchedulerEdges.cfg): optional edges
    # and AddDeps, every edge of TLC's graph, on SQLite (each step checked) and on PostgreSQL
    # (check_invariants() and the counters after each trace's last step).
    traces = read_traces(corpus.traces_dir() / DURABLE.bundle_of(EDGES_CONFIG))
    factory = (DurableScheduler if kind == "sqlite"
               else postgres_factory(request.getfixturevalue("postgres_url")))
    report = replay(traces, factory, system=DURABLE, checks_each_step=kind == "sqlite")
    assert report.ok, format_divergence(report.divergences[0])
    manifest = corpus.read_manifest(system=DURABLE, config=EDGES_CONFIG)
    assert (report.traces, report.steps, report.edges) == (
        manifest["traces"], manifest["steps"], manifest["edges"])
    assert all(report.coverage[a].edges for a in EDGE_ACTIONS), report.coverage
    print(f"{kind}: {report.traces} traces, {report.steps} steps, {report.edges} edges of "
          f"{manifest['edges']}")


# -- Broken stores ------------------------------------------------------------------------------

class CompleteSkipsAttempt(DurableScheduler):
    """complete() fences by generation and worker only: a worker's older attempt of a version
    it took over again is taken for the live one."""

    def complete(self, lease: Lease, result: Any = None) -> Any:
        info = self.info(lease.task_id)
        if info.generation == lease.generation and info.holder == lease.worker:
            lease = lease._replace(attempt=info.attempts)
        return super().complete(lease, result)


class HeartbeatKeepsDeadline(DurableScheduler):
    """heartbeat() checks the lease and hears a cancel, but never extends the lease."""

    def heartbeat(self, lease: Lease) -> bool:
        info = self.info(lease.task_id)
        if (info.generation, info.attempts, info.holder) == (
                lease.generation, lease.attempt, lease.worker) and info.state.value == "running":
            return info.cancel_requested
        return super().heartbeat(lease)


class ExpiryNeverFails(DurableScheduler):
    """An expired last attempt leaves the version running, to be re-claimed, instead of
    failing it."""

    def _expire(self, tx: Tx, now: float) -> int:
        limit = self._max_attempts
        self._max_attempts = limit + 1
        try:
            return super()._expire(tx, now)
        finally:
            self._max_attempts = limit


def test_a_complete_that_skips_the_attempt_is_named_at_the_refused_report(
        traces: list[Trace]) -> None:
    d = first_divergence(traces, CompleteSkipsAttempt, DURABLE).divergences[0]
    assert (d.side, d.action) == ("implementation", "Refused"), format_divergence(d)
    assert d.params["w"] == d.source.holder[d.params["t"]], format_divergence(d)
    assert "complete(Lease(" in d.reason and "returned succeeded" in d.reason, d.reason
    assert d.reason.endswith("expected StaleLeaseError"), d.reason
    assert format_divergence(d).startswith(f"trace {d.trace}, step {d.step}: Refused")


@pytest.mark.parametrize(("factory", "action", "field"), [
    (HeartbeatKeepsDeadline, "Heartbeat", "deadline"),
    (ExpiryNeverFails, "Expire", "state"),
], ids=["heartbeat-keeps-deadline", "expiry-never-fails"])
def test_a_broken_store_is_named_at_its_first_wrong_step(
        traces: list[Trace], factory: Callable[..., Any], action: str, field: str) -> None:
    assert_wrong_state_after(first_divergence(traces, factory, DURABLE).divergences[0],
                             action, field, column=1)


class RepeatAnsweredForAnyAttempt(DurableScheduler):
    """A report on an ended version is answered as a repeat whatever its attempt: the check of
    ``ended_attempt`` is left out, so a worker whose lease expired, and whose version another
    attempt then completed, is told its own report was taken."""

    def _current(self, tx: Tx, call: str, lease: Lease) -> Any:
        row = self._row(tx, call, lease.task_id)
        if (row[0] == lease.generation and row[1] in ("succeeded", "failed", "cancelled")
                and row[6] is not None):
            return None
        return super()._current(tx, call, lease)


class RepeatAppliedAgain(DurableScheduler):
    """A repeated complete() is applied again rather than answered: each repeat of a success
    counts one more success (the fan-in of the success counted twice)."""

    def _current(self, tx: Tx, call: str, lease: Lease) -> Any:
        row = super()._current(tx, call, lease)
        if row is None:
            self._count(tx, "succeeded")
        return row


def test_a_store_that_refuses_a_repeated_report_is_named_at_the_repeat(
        traces: list[Trace]) -> None:
    d = first_divergence(traces, broken_durable.RepeatedReportRefused, DURABLE).divergences[0]
    assert (d.side, d.action) in {("implementation", "RepeatedReport"),
                                  ("implementation", "RepeatedCallback")}, format_divergence(d)
    assert "raised StaleLeaseError" in d.reason, d.reason


def test_a_store_that_answers_a_repeat_of_any_attempt_is_named_at_the_refused_report(
        traces: list[Trace]) -> None:
    d = first_divergence(traces, RepeatAnsweredForAnyAttempt, DURABLE).divergences[0]
    assert (d.side, d.action) == ("implementation", "Refused"), format_divergence(d)
    assert d.reason.endswith("expected StaleLeaseError"), d.reason


def test_a_store_that_applies_a_repeated_report_again_is_named_at_the_repeat(
        traces: list[Trace]) -> None:
    d = first_divergence(traces, RepeatAppliedAgain, DURABLE).divergences[0]
    assert (d.side, d.action) in {("implementation", "RepeatedReport"),
                                  ("implementation", "RepeatedCallback")}, format_divergence(d)


# -- Claim order: two ids, walked through the model ----------------------------------------------

TWO = Instance(tasks=("a", "b"), workers=("w1",), max_concurrency=1, max_attempts=2,
               lease_time=1, max_generation=1, max_time=2)


WIDE = Instance(tasks=("a", "b"), workers=("w1",), max_concurrency=2, max_attempts=2,
                lease_time=1, max_generation=1, max_time=2)


def walked(name: str, *steps: tuple[str, dict[str, Any]], instance: Instance = TWO) -> Trace:
    """A trace of ``instance`` taking ``steps`` through the model (each must be enabled)."""
    state, taken, limits = INITIAL, [], instance.limits
    for action, params in steps:
        args = ACTIONS[action].arguments(params)
        assert ACTIONS[action].enabled(state, *args, limits=limits), (action, params)
        state = ACTIONS[action].step(state, *args, limits=limits)
        taken.append(Step(action, params, DURABLE.spec_state(state, instance)))
    return Trace(name, DURABLE.constants(instance), DURABLE.spec_state(INITIAL, instance),
                 taken)


CLAIM_ORDER = walked(
    "claim-order",
    ("Submit", {"t": "a", "D": frozenset()}), ("Submit", {"t": "b", "D": frozenset()}),
    ("Start", {}), ("Claim", {"w": "w1", "k": 1}),
    ("Complete", {"w": "w1", "t": "a", "g": 1, "a": 1}), ("Claim", {"w": "w1", "k": 1}),
    ("Heartbeat", {"w": "w1", "t": "b", "g": 1, "a": 1}), ("Tick", {}), ("Tick", {}),
    ("Expire", {"t": "b"}), ("Reclaim", {"w": "w1", "t": "b"}),
    ("Refused", {"w": "w1", "t": "b", "g": 1, "a": 1}), ("Crash", {"w": "w1"}),
    ("Close", {"cancelPending": True}), ("RepeatedCallback", {"t": "a"}))


LOST_ANSWERS = walked(
    "lost-answers",
    ("Submit", {"t": "a", "D": frozenset()}), ("Submit", {"t": "b", "D": frozenset()}),
    ("Start", {}), ("ClaimAnswerLost", {"w": "w1", "k": 1}), ("Tick", {}), ("Tick", {}),
    ("Expire", {"t": "a"}), ("ReclaimAnswerLost", {"w": "w1", "t": "a"}), ("Tick", {}),
    ("Tick", {}), ("Expire", {"t": "a"}), ("Claim", {"w": "w1", "k": 1}),
    ("FailAnswerLost", {"w": "w1", "t": "b", "g": 1, "a": 1}),
    ("RepeatedReport", {"w": "w1", "t": "b", "g": 1, "a": 1}), ("Retry", {"t": "b"}),
    ("Claim", {"w": "w1", "k": 1}), ("Cancel", {"t": "b"}),
    ("AcknowledgeCancelAnswerLost", {"w": "w1", "t": "b", "g": 2, "a": 1}),
    ("RepeatedReport", {"w": "w1", "t": "b", "g": 2, "a": 1}), ("Retry", {"t": "b"}),
    ("Claim", {"w": "w1", "k": 1}), ("CompleteAnswerLost", {"w": "w1", "t": "b", "g": 3, "a": 1}),
    ("RepeatedReport", {"w": "w1", "t": "b", "g": 3, "a": 1}),
    ("RepeatedCallback", {"t": "b"}), ("RepeatedCallback", {"t": "a"}))


def test_a_trace_of_lost_answers_replays_cleanly() -> None:
    """A claim whose answer is lost burns the attempt, and the lease expires; a report whose
    answer is lost is made again with the same lease and answered, with no change."""
    report = replay([LOST_ANSWERS], system=DURABLE)
    assert report.ok, format_divergence(report.divergences[0])
    assert report.steps == len(LOST_ANSWERS.steps)


def test_a_store_that_refuses_a_repeat_is_named_at_the_repeated_report() -> None:
    d = replay([LOST_ANSWERS], broken_durable.RepeatedReportRefused,
               system=DURABLE).divergences[0]
    assert (d.side, d.action) == ("implementation", "RepeatedReport"), format_divergence(d)
    assert "fail(Lease(" in d.reason and "raised StaleLeaseError" in d.reason, d.reason


def test_a_store_that_applies_a_repeat_again_is_named_at_the_repeated_report() -> None:
    d = replay([LOST_ANSWERS], RepeatAppliedAgain, system=DURABLE).divergences[0]
    assert (d.side, d.action) == ("implementation", "RepeatedReport"), format_divergence(d)
    assert "succeeded" in d.reason, format_divergence(d)


class ClaimTakesNewest(ClaimRewritten):
    """claim() takes the ready versions of largest seq: the newest work first."""

    rewrite = ("ORDER BY claim_key DESC, claim_due, seq LIMIT",
               "ORDER BY claim_key DESC, claim_due, seq DESC LIMIT")


class CountsOneSuccessTooMany(DurableScheduler):
    """stats() counts one success more than the store holds once anything succeeded."""

    def stats(self) -> Any:
        counts = super().stats()
        return replace(counts, succeeded=counts.succeeded + (counts.succeeded > 0))


class InvariantsBrokenOnceClosed(DurableScheduler):
    """check_invariants() fails once the store is closed."""

    def check_invariants(self) -> None:
        super().check_invariants()
        if self.snapshot().closed:
            raise InvariantViolation("SealedGraph", "closed")


@pytest.mark.parametrize(("factory", "reason"), [
    (CountsOneSuccessTooMany, "stats() is not what the trace's steps count: succeeded"),
    (InvariantsBrokenOnceClosed, "check_invariants() raised InvariantViolation"),
], ids=["miscount", "invariant"])
def test_checks_at_the_end_of_each_trace_still_catch_what_they_check(
        factory: Callable[..., Any], reason: str) -> None:
    each_step = replay([CLAIM_ORDER], factory, system=DURABLE).divergences[0]
    at_end = replay([CLAIM_ORDER], factory, system=DURABLE,
                    checks_each_step=False).divergences[0]
    assert each_step.reason.startswith(reason) and at_end.reason.startswith(reason), (
        each_step.reason, at_end.reason)
    # caught at its first step with every check, at the trace's last step without
    assert each_step.step < at_end.step == len(CLAIM_ORDER.steps)


def test_a_trace_of_two_ids_replays_cleanly_through_every_kind_of_step() -> None:
    report = replay([CLAIM_ORDER], system=DURABLE)
    assert report.ok, format_divergence(report.divergences[0])
    assert report.steps == len(CLAIM_ORDER.steps) == 15


def test_a_claim_that_ignores_seq_order_is_named_at_the_claim() -> None:
    d = first_divergence([CLAIM_ORDER], ClaimTakesNewest, DURABLE).divergences[0]
    assert (d.side, d.action, d.step) == ("implementation", "Claim", 4), format_divergence(d)
    assert d.reason == ("claim('w1', limit=1, lease=1) returned [<<b, 1, 1>>], expected "
                        "[<<a, 1, 1>>]"), d.reason


def test_a_claim_while_a_lease_waits_to_expire_is_not_a_step_the_calls_take() -> None:
    # claim() expires first, so the spec's Claim past a lease nobody expired yet has no call
    # alone; no corpus instance has such a step (those with a clock have one slot).
    early = walked("claim-past-a-deadline", ("Submit", {"t": "a", "D": frozenset()}),
                   ("Submit", {"t": "b", "D": frozenset()}), ("Start", {}),
                   ("Claim", {"w": "w1", "k": 1}), ("Tick", {}), ("Tick", {}),
                   ("Claim", {"w": "w1", "k": 1}), instance=WIDE)
    d = first_divergence([early], DurableScheduler, DURABLE).divergences[0]
    assert (d.side, d.action, d.step) == ("model", "Claim", 7), format_divergence(d)
    assert d.reason == "Claim(w=w1, k=1): claim() would first expire ['a']", d.reason


# -- The store's Expire, alone ------------------------------------------------------------------

def test_expire_ends_only_the_leases_past_their_deadline(tmp_path: Path) -> None:
    db = DurableScheduler(f"sqlite:///{tmp_path / 's.db'}", 2, max_attempts=1,
                          clock="virtual", record=True)
    db.submit("a", fn=NOOP)
    db.start()
    assert [x.task_id for x in db.claim("w1", lease=1)] == ["a"]
    db.expire()  # not yet past: nothing
    assert db.leases()["a"].holder == "w1"
    db.tick(2)
    db.submit("b", fn=NOOP)
    db.expire()
    assert db.leases()["a"].holder is None and db.state("a").value == "failed"
    assert db.state("b").value == "ready"  # expire() claims nothing
    assert [a for a, _ in db.history()] == ["Submit", "Start", "Claim", "Tick", "Submit",
                                            "Expire"]
    db.release()


def test_replay_cli_replays_durable_traces(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "two.jsonl"
    write_traces(path, [CLAIM_ORDER])
    assert main(["replay", "-q", str(path)]) == 0  # the spec is read off the traces
    assert "no divergence" in capsys.readouterr().err
    assert main(["replay", "-q", "--system", "durable",
                 "--impl", "tests.durable.test_replay:ClaimTakesNewest", str(path)]) == 1
    assert "Claim(w=w1, k=1)" in capsys.readouterr().err


# -- The corpus instances beyond one id ---------------------------------------------------------
# Replayed whole they are about 690,000 steps, minutes on two cores: `refsched verify` and
# `refsched replay --system durable` take them whole. Here a deterministic subset of each
# (corpus.stratified) is replayed, and each broken durable scheduler must be rejected by the
# conformance corpus phase alone over those subsets.

MORE = tuple(c for c in DURABLE.instances if c != DURABLE.traces_config)

# The time corpus submits with priorities and delays: it replays on a store whose submit takes
# them (docs/time.md), and until then is expected to fail at its first delayed Submit.
STORE_TAKES_TIMES = {"priority", "delay"} <= set(
    inspect.signature(DurableScheduler.submit).parameters)
NEEDS_DUE_TIMES = pytest.mark.xfail(
    not STORE_TAKES_TIMES, strict=True,
    reason="DurableScheduler.submit takes no priority or delay yet")
HEAD = 200  # the first traces of each instance: the shortest behaviours of its path cover


@cache
def stratified(config: str) -> tuple[list[Trace], frozenset[str]]:
    """The first HEAD traces of the instance and the first that takes each action; and every
    action the instance's corpus takes."""
    return corpus.read_stratified(corpus.traces_dir() / DURABLE.bundle_of(config), HEAD)


def subset(config: str) -> list[Trace]:
    return stratified(config)[0]


@cache
def diamond() -> tuple[Any, Any]:
    """The diamond instance, and the model's graph of it."""
    instance = DURABLE.read_instance("MCDurableSchedulerCorpusDiamond.cfg")
    return instance, DURABLE.explore(instance)


def test_the_durable_corpus_has_an_instance_of_several_ids_slots_and_generations() -> None:
    manifests = {c: corpus.read_manifest(system=DURABLE, config=c) for c in DURABLE.instances}
    assert manifests[DURABLE.traces_config]["bundle"] == "durable-cover.jsonl.gz"
    constants = [m["constants"] for m in manifests.values()]
    assert max(len(c["Tasks"]) for c in constants) == 4
    assert max(c["MaxConcurrency"] for c in constants) == 2
    assert any(len(c["Tasks"]) == 2 and c["MaxGeneration"] == 2 for c in constants)
    assert any(len(c["Tasks"]) == 2 and c["MaxConcurrency"] == 1 and c["MaxTime"] > 0
               for c in constants)
    for config, m in manifests.items():
        assert m["config"] == config and m["bundle"] == DURABLE.bundle_of(config)
        # made from these spec files, and the bundle the manifest describes (the whole
        # regeneration is `refsched traces --system durable --check`, and `refsched verify`)
        assert m["spec"] == corpus.spec_hashes(DURABLE, config), config
        data = (corpus.traces_dir() / m["bundle"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == m["bundle_sha256"], config


def test_the_diamond_instance_is_the_fixed_graph_submitted_layer_by_layer() -> None:
    config = "MCDurableSchedulerCorpusDiamond.cfg"
    _, graph = diamond()
    fixed = {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}
    for s in graph.depth:
        deps = {t: set(v.deps) for t, v in s.scheduler.tasks.items()}
        assert deps == {t: fixed[t] for t in deps}
        assert not s.scheduler.started or len(deps) == 4
    # TLC's count, with FixedGraph of spec/MCDurableSchedulerCorpus.tla
    assert len(graph.depth) == corpus.read_manifest(system=DURABLE, config=config)["states"]


@pytest.mark.parametrize("steps", [
    [("Submit", {"t": "b", "D": frozenset({"a"})})],  # before its layer's sources
    [("Submit", {"t": "a", "D": frozenset({"b"})})],  # other deps than its layer's
    [("Submit", {"t": "a", "D": frozenset()}), ("Start", {})],  # started with ids missing
], ids=["order", "deps", "start"])
def test_the_model_keeps_no_state_the_fixed_graph_forbids(
        steps: list[tuple[str, dict[str, Any]]]) -> None:
    instance, graph = diamond()
    s = INITIAL
    for action, params in steps:
        s = ACTIONS[action].step(s, *params.values(), limits=instance.limits)
    assert not instance.fixed_graph(s)
    assert s not in graph.depth


@pytest.mark.parametrize("config", [
    pytest.param(c, marks=[NEEDS_DUE_TIMES] * (c == TIME_CORPUS_CONFIG)) for c in MORE])
def test_a_stratified_subset_of_each_instance_replays_cleanly_through_every_action(
        config: str) -> None:
    traces = subset(config)
    report = replay(traces, system=DURABLE)
    assert report.ok, format_divergence(report.divergences[0])
    assert {a for a, c in report.coverage.items() if c.edges} == stratified(config)[1]
    print(f"{config}: {report.traces} traces, {report.steps} steps, {report.edges} edges of "
          f"{corpus.read_manifest(system=DURABLE, config=config)['edges']}")


@pytest.mark.parametrize("cls", broken_durable.BROKEN, ids=lambda c: c.__name__)
def test_each_broken_durable_scheduler_is_rejected_by_the_corpus_phase_alone(
        cls: type[DurableScheduler], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The conformance corpus phase, no generated phase, over a traces folder holding the
    # subset of each instance (the one-id corpus has no dependent for a cancel to block); of the
    # time corpus, while the store takes no due times, only the traces that submit with
    # neither a priority nor a delay (any other would reject every scheduler alike).
    for config in DURABLE.instances:
        traces = subset(config)
        if config == TIME_CORPUS_CONFIG and not STORE_TAKES_TIMES:
            traces = [trace for trace in traces if not any(
                step.params.get("p") or step.params.get("d") for step in trace.steps)]
        data = encode_bundle(traces)
        (tmp_path / DURABLE.bundle_of(config)).write_bytes(data)
        manifest = {**corpus.read_manifest(system=DURABLE, config=config),
                    "traces": len(traces), "bundle_sha256": hashlib.sha256(data).hexdigest()}
        (tmp_path / DURABLE.manifest_of(config)).write_text(json.dumps(manifest))
    monkeypatch.setenv("REFSCHED_TRACES_DIR", str(tmp_path))
    phase = PhaseResult("corpus")
    found = system_phases.corpus_phase("durable", cls, phase, None)
    assert found is not None, f"{cls.__name__} passed the corpus phase"
    print(f"{cls.__name__}: {found.reason} ({found.source})")


def subset_folder(folder: Path, edges: dict[str, int] | None = None) -> Path:
    """A traces folder holding the subset of each instance, its manifest saying ``edges``."""
    for config in DURABLE.instances:
        data = encode_bundle(subset(config))
        (folder / DURABLE.bundle_of(config)).write_bytes(data)
        manifest = {**corpus.read_manifest(system=DURABLE, config=config),
                    "bundle_sha256": hashlib.sha256(data).hexdigest()}
        if edges is not None:
            manifest["edges"] = edges[config]
        (folder / DURABLE.manifest_of(config)).write_text(json.dumps(manifest))
    return folder


@NEEDS_DUE_TIMES
def test_replay_of_the_corpus_replays_each_instance_and_counts_its_edges_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    took = {c: replay(subset(c), system=DURABLE).edges for c in DURABLE.instances}
    monkeypatch.setenv("REFSCHED_TRACES_DIR", str(subset_folder(tmp_path, took)))
    assert main(["replay", "-q", "--system", "durable"]) == 0
    out = capsys.readouterr().out
    for config in DURABLE.instances:
        assert f"edges replayed ({config}): {took[config]:,} of {took[config]:,}" in out
    # one instance short of an edge fails the whole, and says which
    short = {**took, "MCDurableSchedulerCorpusDiamond.cfg":
             took["MCDurableSchedulerCorpusDiamond.cfg"] + 1}
    monkeypatch.setenv("REFSCHED_TRACES_DIR", str(subset_folder(tmp_path, short)))
    assert main(["replay", "-q", "--system", "durable"]) == 1
    assert "edges replayed (MCDurableSchedulerCorpusDiamond.cfg)" in capsys.readouterr().out
    # an instance without its manifest: no corpus to judge
    (tmp_path / DURABLE.manifest_of("MCDurableSchedulerCorpusClaims.cfg")).unlink()
    assert main(["replay", "-q", "--system", "durable"]) == 2
    assert "durable-claims-manifest.json does not exist" in capsys.readouterr().err
