"""The durable corpus of one id (traces/durable-cover.jsonl.gz, spec/MCDurableSchedulerTraces.cfg):
current with the spec, and replayed edge for edge against DurableScheduler on SQLite, each
step's state, invariants and counters checked (tests/durable/test_replay_postgresql.py replays it
on PostgreSQL; tests/durable/test_replay.py holds the broken stores and the other instances).
A file of its own: its replay is minutes long, and each test file runs on one process.
"""

from __future__ import annotations

import pytest

from refsched.model.durable import EDGE_ACTIONS
from refsched.verify import system
from refsched.verify.itf import Trace
from tests.replay_support import CorpusTests, corpus_traces

DURABLE = system.get("durable")


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    return corpus_traces(DURABLE)


class TestDurableCorpus(CorpusTests):
    pytestmark = pytest.mark.slow
    system, config = DURABLE, "MCDurableSchedulerTraces.cfg"
    # this instance's gates are off (the edges instance has them on)
    gated_off = EDGE_ACTIONS
