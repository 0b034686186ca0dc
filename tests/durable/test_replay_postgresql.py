"""The durable corpus replayed on the PostgreSQL store: the corpus of one id whole, a trace of
lost answers, and a stratified subset of the edges instance (tests/durable/test_replay.py makes
the same replays on SQLite). A file of its own: its replay is minutes long, and each test file
runs on one process.
"""

from __future__ import annotations

import pytest

from refsched.model.durable import EDGE_ACTIONS
from refsched.verify import system
from refsched.verify.durable.system import EDGES_CONFIG
from refsched.verify.itf import Trace
from refsched.verify.replay import format_divergence, replay
from tests.conftest import postgres_factory
from tests.durable.test_replay import LOST_ANSWERS, stratified, subset
from tests.replay_support import assert_replays_every_edge, corpus_traces

DURABLE = system.get("durable")


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    return corpus_traces(DURABLE)


@pytest.mark.slow
def test_every_edge_of_the_durable_corpus_replays_cleanly_on_postgresql(
        traces: list[Trace], postgres_url: str) -> None:
    # The state is compared at every step; check_invariants() and the counters of stats(), a
    # round of queries each, after each trace's last step (test_replay_corpus.py checks them at
    # every step on SQLite, and the lock-step machine at every call on PostgreSQL).
    assert_replays_every_edge(traces, DURABLE, EDGE_ACTIONS,
                              factory=postgres_factory(postgres_url), checks_each_step=False)


def test_a_trace_of_lost_answers_replays_cleanly_on_postgresql(postgres_url: str) -> None:
    # complete() runs on the server there (steps_postgres.py); its repeat falls back to the
    # transaction that answers it.
    report = replay([LOST_ANSWERS], postgres_factory(postgres_url), system=DURABLE)
    assert report.ok, format_divergence(report.divergences[0])
    assert report.steps == len(LOST_ANSWERS.steps)



def test_a_stratified_subset_of_the_edges_instance_replays_on_postgresql(
        postgres_url: str) -> None:
    # every action the edges instance takes, SubmitOptional and AddDeps included, through the
    # PostgreSQL store's server-side submit and claim
    traces = subset(EDGES_CONFIG)
    report = replay(traces, postgres_factory(postgres_url), system=DURABLE,
                    checks_each_step=False)
    assert report.ok, format_divergence(report.divergences[0])
    taken = {a for a, c in report.coverage.items() if c.edges}
    assert taken == stratified(EDGES_CONFIG)[1] and set(EDGE_ACTIONS) <= taken
