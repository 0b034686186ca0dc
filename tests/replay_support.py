"""What the corpus tests of every system (tests/<system>/test_replay.py) hold its corpus to:
current with the spec and the model, and replayed edge for edge on the production code; and
where a broken implementation first diverges from it.

A system's corpus (traces/<system>-cover.jsonl.gz) covers every edge of TLC's state graph of
its traces instance; its manifest records that graph and how many traces, steps and edges the
corpus holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from refsched.verify import corpus, stategraph
from refsched.verify.itf import Trace, read_traces
from refsched.verify.replay import Divergence, ReplayReport, format_divergence, replay


def corpus_traces(system: Any, config: str | None = None) -> list[Trace]:
    """The traces of ``system``'s corpus (a refsched.verify.system.System) of the instance
    ``config`` (default: its traces config)."""
    return read_traces(corpus.traces_dir() / system.bundle_of(config or system.traces_config))


def assert_corpus_is_current(system: Any, config: str) -> None:
    """TLC's graph of ``config``, dumped now, is the graph the corpus was made from (so the
    spec and the model have not moved since)."""
    graph = stategraph.tlc_graph(config, system=system, workers=1)
    check = corpus.check_corpus(graph)
    assert check.manifest["edges"] == graph.edge_count == check.fresh["edges"]
    assert check.manifest["config"] == config


def assert_replays_every_edge(traces: list[Trace], system: Any, gated_off: Collection[str] = (),
                              config: str | None = None, **options: Any) -> ReplayReport:
    """Every trace replays without a divergence (``options`` go to ``replay``), the replay went
    through as many traces, steps and edges as the manifest of the instance ``config``
    (default: the traces config) records, and every action was taken on some edge, but those
    of ``gated_off`` (actions the corpus instance's constants disable). Returns the report."""
    report = replay(traces, system=system, **options)
    assert report.ok, format_divergence(report.divergences[0])
    manifest = corpus.read_manifest(system=system, config=config)
    assert (report.traces, report.steps, report.edges) == (
        manifest["traces"], manifest["steps"], manifest["edges"])
    assert {name for name, c in report.coverage.items() if c.edges == 0} == set(gated_off)
    return report


class CorpusTests:
    """The tests of every system's corpus: a system's test_replay.py subclasses this as
    ``Test<System>Corpus``, naming the system and the config its corpus is made from, beside a
    fixture ``traces`` (:func:`corpus_traces`) of that instance."""

    system: Any  # the refsched.verify.system.System whose corpus it is
    config: str  # the traces instance the manifest must name: "MCTimerQueueTraces.cfg"
    gated_off: Collection[str] = ()  # actions the traces instance's constants disable

    def test_the_corpus_is_the_one_the_spec_and_model_give(self) -> None:
        assert_corpus_is_current(self.system, self.config)

    def test_every_edge_of_the_corpus_replays_cleanly(self, traces: list[Trace]) -> None:
        assert_replays_every_edge(traces, self.system, self.gated_off, self.config)


def first_divergence(traces: list[Trace], factory: Callable[..., Any],
                     system: Any) -> ReplayReport:
    """The replay of ``traces`` on ``factory``'s implementation of ``system``, which must
    diverge."""
    report = replay(traces, factory, system=system)
    assert not report.ok, f"{factory} replayed {report.steps:,} steps without a divergence"
    return report


def assert_wrong_state_after(d: Divergence, action: str, field: str, column: int) -> None:
    """``d`` is the implementation's step ``action``, whose answers were right but whose state
    after it is not the trace's: the first row of its diff names ``field`` in its ``column``-th
    word (0, or 1 after an id), and the divergence is shown under the step's number."""
    assert (d.side, d.action) == ("implementation", action), format_divergence(d)
    assert d.reason == "the state after the step is not the trace's", d.reason
    assert d.diff.splitlines()[1].split()[column] == field, d.diff
    assert format_divergence(d).startswith(f"trace {d.trace}, step {d.step}: {action}")
