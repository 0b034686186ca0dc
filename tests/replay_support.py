"""What the corpus tests of every system (tests/<system>/test_replay.py) hold its corpus to:
current with the spec and the model, and replayed edge for edge on the production code.

A system's corpus (traces/<system>-cover.jsonl.gz) covers every edge of TLC's state graph of
its traces instance; its manifest records that graph and how many traces, steps and edges the
corpus holds.
"""

from __future__ import annotations

from typing import Any

from refsched.verify import corpus, stategraph
from refsched.verify.itf import Trace, read_traces
from refsched.verify.replay import ReplayReport, format_divergence, replay


def corpus_traces(system: Any) -> list[Trace]:
    """The traces of ``system``'s corpus (a refsched.verify.system.System)."""
    return read_traces(corpus.traces_dir() / system.bundle)


def assert_corpus_is_current(system: Any, config: str) -> None:
    """TLC's graph of ``config``, dumped now, is the graph the corpus was made from (so the
    spec and the model have not moved since)."""
    graph = stategraph.tlc_graph(system=system, workers=1)
    check = corpus.check_corpus(graph)
    assert check.manifest["edges"] == graph.edge_count == check.fresh["edges"]
    assert check.manifest["config"] == config


def assert_replays_every_edge(traces: list[Trace], system: Any, **options: Any) -> ReplayReport:
    """Every trace replays without a divergence (``options`` go to ``replay``), the replay went
    through as many traces, steps and edges as the manifest records, and every action was
    taken on some edge. Returns the report."""
    report = replay(traces, system=system, **options)
    assert report.ok, format_divergence(report.divergences[0])
    manifest = corpus.read_manifest(system=system)
    assert (report.traces, report.steps, report.edges) == (
        manifest["traces"], manifest["steps"], manifest["edges"])
    assert {name for name, c in report.coverage.items() if c.edges == 0} == set()
    return report
