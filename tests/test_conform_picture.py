"""``refsched conform --picture``: the state at the first difference, drawn side by side.

Each system's picture is checked on its DOT source (every task drawn, what differs in red);
hostile ids must leave the source well formed with Graphviz or without it; and the CLI writes
the SVG, or the DOT source when Graphviz's ``dot`` is not on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from refsched.conform import client, oracle
from refsched.conform.picture import dot_source, write_picture
from refsched.conform.report import Counterexample, Row
from refsched.model.durable import DurableSnapshot
from refsched.model.pool import Phase, PoolSnapshot
from refsched.types import (
    Snapshot,
    TaskState,
    TimerEntry,
    TimerSnapshot,
    TimerState,
    TimerVersionView,
    VersionView,
)

ALTER = str(Path(__file__).parent / "conform_impls" / "alter_values.py")
RED = "#CC0000"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed")


def counterexample(system: str, model: Any, implementation: Any, *,
                   phase: str = "generated", reason: str = "the states differ") -> Counterexample:
    return Counterexample(phase, reason, "built by hand", 2,
                          (Row("submit('a', [])", "1", "1", True),
                           Row("fail('b', 1)", "failed", "failed", False)),
                          None, system=system, model_state=model,
                          implementation_state=implementation)


def version(generation: int, state: TaskState, deps: frozenset[Hashable] = frozenset(), *,
            seq: int = 1, remaining: int = 0, blocked_by: Hashable | None = None) -> VersionView:
    return VersionView(generation, state, deps, remaining, blocked_by, False,
                       int(state is not TaskState.PENDING and state is not TaskState.READY), seq)


def clusters(source: str) -> tuple[str, str]:
    """The model's and the implementation's clusters of ``source``."""
    model = source.index("subgraph cluster_model")
    implementation = source.index("subgraph cluster_implementation")
    legend = source.index("subgraph cluster_legend")
    return source[model:implementation], source[implementation:legend]


def node(side: str, title: str) -> str:
    """The DOT name of the node of ``side`` titled ``title``."""
    found = re.search(rf"^    (\w+) \[label=<<b>{re.escape(title)}</b>", side, re.MULTILINE)
    assert found is not None, f"no node {title}"
    return found.group(1)


def highlighted(text: str) -> str:
    return f'<font color="{RED}"><b>{text}</b></font>'


def labels(source: str) -> list[str]:
    """Every HTML-like label of ``source``: the title's, the clusters', the nodes'."""
    return re.findall(r"label=<(.*?)>(?:, |;$|\];$)", source, flags=re.MULTILINE)


def label_text(label: str) -> str:
    """A label's text as Graphviz reads it: it must be well-formed markup."""
    return "".join(ET.fromstring(f"<label>{label}</label>").itertext())


# -- each system's picture --------------------------------------------------------------------

def test_scheduler_picture_draws_every_task_and_highlights_the_state_that_differs() -> None:
    # a real counterexample: the implementation's complete() forgets to release b
    factory = client.load_factory("refsched.conform.dag.broken:CompleteForgetsDependents")
    impl = client.InProcessImplementation(factory, name="forgets", system="scheduler")
    report = oracle.check(impl, examples=200, corpus=False)
    found = report.counterexample
    assert found is not None and found.system == "scheduler"
    model, implementation = clusters(dot_source(found))
    for side, state in ((model, found.model_state), (implementation, found.implementation_state)):
        assert isinstance(state, Snapshot)
        for task in state.tasks:
            assert f"<b>{task}</b>" in side
    assert highlighted("state: ready") in model
    assert highlighted("state: pending") in implementation
    assert f"{node(model, 'a')} -> {node(model, 'b')};" in model  # b depends on a
    assert f"{node(implementation, 'a')} -> {node(implementation, 'b')};" in implementation
    assert "failing call: complete(&#39;" in dot_source(found)


def test_scheduler_picture_draws_a_dependency_not_submitted_and_a_missing_edge() -> None:
    model = Snapshot(True, False, 3, {
        "a": version(1, TaskState.BLOCKED, frozenset({"b"}), blocked_by="b", remaining=1),
        "b": version(1, TaskState.FAILED, seq=2)})
    implementation = Snapshot(True, False, 3, {"a": version(1, TaskState.PENDING, remaining=1)})
    source = dot_source(counterexample("scheduler", model, implementation))
    mine, theirs = clusters(source)
    assert "not in the state" not in mine and "(not on the other side)" in mine
    assert highlighted("state: blocked") in mine and highlighted("state: pending") in theirs
    assert highlighted("blocked_by: b") in mine
    edge = re.search(r"m\d+ -> m\d+ \[color=\"#CC0000\", penwidth=4\];", mine)
    assert edge is not None, "the dependency only the model has is drawn in red"
    assert "->" not in theirs


def test_timer_picture_shows_the_clock_the_tasks_and_the_heap_in_order() -> None:
    def task(priority: int) -> TimerVersionView:
        return TimerVersionView(2, TimerState.PENDING, 5.0, priority, 3, False, 0)
    heap = {TimerEntry(1.5, 0, 1, "late", 1), TimerEntry(0.5, 0, 2, "early", 1)}
    model = TimerSnapshot(now=0.25, next_seq=4, tasks={
        "a": task(-1), "early": TimerVersionView(1, TimerState.PENDING, 0.5, 0, 2, False, 0),
        "late": TimerVersionView(1, TimerState.RUNNING, 1.5, 0, 1, False, 1)},
        heap=frozenset({*heap, TimerEntry(5.0, -1, 3, "a", 2)}))
    implementation = model.replace(tasks={**model.tasks, "a": task(0)},
                                   heap=frozenset({*heap, TimerEntry(5.0, 0, 3, "a", 2)}))
    mine, theirs = clusters(dot_source(counterexample("timer", model, implementation)))
    for side in (mine, theirs):
        assert "now: 0.25" in side
        assert all(f"<b>{task}</b>" in side for task in ("a", "early", "late"))
        early, late = side.index("at 0.5, priority 0"), side.index("at 1.5, priority 0")
        assert early < late, "the heap is drawn in the order it pops"
        assert "late v1 (stale)" in side  # its version runs: the entry is spent
    assert highlighted("priority: -1") in mine and highlighted("priority: 0") in theirs
    assert highlighted("at 5, priority -1, seq 3: a v2") in mine
    assert highlighted("at 5, priority 0, seq 3: a v2") in theirs


def test_pool_picture_draws_each_worker_deque_and_who_spawned_whom() -> None:
    model = PoolSnapshot(Phase.DRAINING, deque={"w1": ("c", "d")}, running={"w2": "p"},
                         outstanding=3, submitted={"p", "c", "d", "done"}, finished={"done"},
                         runs={"p": 1, "done": 1}, parent={"c": "p", "d": "p"})
    implementation = model.replace(deque={"w1": ("d", "c")})
    mine, theirs = clusters(dot_source(counterexample("pool", model, implementation)))
    for side in (mine, theirs):
        assert all(f"<b>{task}</b>" in side for task in ("p", "c", "d", "done"))
        assert "<b>worker w2</b><br/>running: p" in side and "phase: draining" in side
        assert len(re.findall(r"[mi]\d+ -> [mi]\d+;", side)) == 2  # p -> c, p -> d
    assert highlighted("deque: top: c, d :bottom") in mine
    assert highlighted("deque: top: d, c :bottom") in theirs


def test_pool_picture_of_a_real_counterexample_highlights_outstanding() -> None:
    command = [sys.executable, ALTER, sys.executable, "-m", "refsched.serve", "--system", "pool"]
    impl = client.ProtocolImplementation(command, system="pool")
    impl.open()
    found = oracle.check(impl, examples=10, corpus=False).counterexample
    assert found is not None and isinstance(found.model_state, PoolSnapshot)
    mine, theirs = clusters(dot_source(found))
    assert highlighted(f"outstanding: {found.model_state.outstanding}") in mine
    assert highlighted(f"outstanding: {found.implementation_state.outstanding}") in theirs
    for task in found.model_state.submitted:
        assert f"<b>{task}</b>" in mine


def test_durable_picture_adds_each_task_lease_to_the_scheduler_part() -> None:
    tasks = {"a": version(1, TaskState.RUNNING), "b": version(1, TaskState.PENDING,
                                                               frozenset({"a"}), seq=2,
                                                               remaining=1)}
    model = DurableSnapshot(Snapshot(True, False, 3, tasks), attempt={"a": 1},
                            holder={"a": "w1"}, deadline={"a": 2}, now=1,
                            held={"w1": frozenset({("a", 1, 1)})})
    implementation = model.replace(attempt={"a": 2}, deadline={"a": 3})
    source = dot_source(counterexample("durable", model, implementation, phase="corpus"))
    mine, theirs = clusters(source)
    assert "model: the trace&#39;s state" in mine
    for side in (mine, theirs):
        assert "<b>a</b>" in side and "<b>b</b>" in side and "holder: w1" in side
        assert "now: 1" in side and "held by w1: a g1 a1" in side
    assert highlighted("attempt: 1") in mine and highlighted("deadline: 2") in mine
    assert highlighted("attempt: 2") in theirs and highlighted("deadline: 3") in theirs


def test_a_side_that_could_not_say_is_drawn_as_a_box_saying_so() -> None:
    model = Snapshot(True, False, 2, {"a": version(1, TaskState.READY)})
    mine, theirs = clusters(dot_source(counterexample("scheduler", model, None)))
    assert "the implementation could not report its state" in theirs
    assert "<b>a</b>" in mine and RED not in mine, "nothing to compare with: nothing in red"


def test_the_title_holds_the_reason_and_the_failing_call() -> None:
    model = Snapshot(True, False, 2, {"a": version(1, TaskState.READY)})
    found = counterexample("scheduler", model, model.replace(next_seq=3),
                           reason="fields differ:\n  id  field     model  impl")
    title = labels(dot_source(found))[0]
    assert "failing call: fail(&#39;b&#39;, 1)" in title and "reason: fields differ:" in title
    assert "&#160;&#160;id&#160;&#160;field" in title  # the reason's table keeps its columns


# -- ids that are not plain names -------------------------------------------------------------

HOSTILE: tuple[Hashable, ...] = (
    'quo"te', "back\\slash", "new\nline", "<b>&amp;</b>", "ünï🙂", "}; x -> y; {",
    "\ud800", "'", ("tuple", 1), 7, "]", "\x00",
)


def hostile_counterexample() -> Counterexample:
    tasks = {t: version(1, TaskState.PENDING, frozenset({HOSTILE[(n + 1) % len(HOSTILE)]}),
                        seq=n + 1, remaining=1) for n, t in enumerate(HOSTILE)}
    model = Snapshot(True, False, len(HOSTILE) + 1, tasks)
    changed = {**tasks, HOSTILE[0]: version(2, TaskState.READY, seq=1)}
    return counterexample("scheduler", model, Snapshot(True, False, len(HOSTILE) + 1, changed),
                          reason='a <b>"reason"</b> & \\ \n  with\ta table')


def test_hostile_ids_leave_every_label_well_formed_without_dot() -> None:
    source = dot_source(hostile_counterexample())
    source.encode("utf-8")  # no lone surrogate reaches the file
    shown = [label_text(label) for label in labels(source)]  # each label is well formed
    # Graphviz's label lexer trips on a text starting with "]": brackets go as entities
    assert not any(re.search(r"[][]", label) for label in labels(source))
    text = "\n".join(shown)
    for expected in ('quo"te', "back\\slash", "'new\\nline'", "<b>&amp;</b>", "ünï🙂",
                     "}; x -> y; {", "'\\ud800'", "('tuple', 1)", "'\\x00'"):
        assert expected in text, expected
    # the only statements are the ones the module writes: no id became DOT syntax
    for line in source.splitlines():
        assert re.fullmatch(r"(digraph counterexample \{|  (graph|node|edge) \[.*\];|  subgraph "
                            r"cluster_\w+ \{|    (label|style)=.*;|    [mi]\d+ \[label=<.*\];|"
                            r"    [mi]\d+ -> [mi]\d+( \[.*\])?;|    legend \[.*\];|  \}|\})",
                            line), line


@needs_dot
def test_hostile_ids_render_with_dot(tmp_path: Path) -> None:
    out = tmp_path / "hostile.svg"
    message = write_picture(hostile_counterexample(), out)
    assert message.startswith(f"wrote {out}")
    svg = "".join(ET.parse(out).getroot().itertext())
    assert "<b>&amp;</b>" in svg and 'quo"te' in svg and "ünï🙂" in svg


# -- the command ------------------------------------------------------------------------------

def conform(*argv: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None if path is None else {"PATH": path}
    return subprocess.run([sys.executable, "-m", "refsched", "conform", *argv],
                          capture_output=True, text=True, timeout=300, env=env)


def diverging(picture: Path) -> list[str]:
    return ["--system", "pool", "--no-corpus", "--examples", "10", "--picture", str(picture),
            "--", sys.executable, ALTER, sys.executable, "-m", "refsched.serve",
            "--system", "pool"]


@needs_dot
def test_cli_writes_the_picture_as_svg(tmp_path: Path) -> None:
    out = tmp_path / "first-difference.svg"
    done = conform(*diverging(out))
    assert done.returncode == 1, done.stderr
    assert f"wrote {out}" in done.stderr
    assert ET.parse(out).getroot().tag.endswith("svg")
    assert not out.with_suffix(".dot").exists()


def test_cli_without_dot_writes_the_dot_source_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "first-difference.svg"
    done = conform("-q", *diverging(out), path=str(tmp_path))  # a PATH with no dot on it
    assert done.returncode == 1, done.stderr  # the verdict is the verdict
    assert not out.exists()
    assert "Graphviz's dot is not on PATH" in done.stderr
    assert str(out.with_suffix(".dot")) in done.stderr
    assert out.with_suffix(".dot").read_text(encoding="utf-8").startswith("digraph")


def test_cli_without_a_counterexample_writes_no_picture(tmp_path: Path) -> None:
    out = tmp_path / "none.svg"
    done = conform("--no-corpus", "--examples", "3", "--picture", str(out),
                   "--impl", "refsched:TaskScheduler")
    assert done.returncode == 0, done.stderr
    assert f"no counterexample: {out} not written" in done.stderr
    assert not out.exists() and not out.with_suffix(".dot").exists()


@pytest.mark.parametrize("where, why", [("missing/x.svg", "no folder"),
                                        (".", "it is a directory")])
def test_cli_refuses_a_picture_it_cannot_write_before_checking(tmp_path: Path, where: str,
                                                               why: str) -> None:
    done = conform("--picture", str(tmp_path / where), "--impl", "refsched:TaskScheduler")
    assert done.returncode == 2
    assert "--picture: cannot write" in done.stderr and why in done.stderr
    assert "conforms" not in done.stdout, "refused before the check ran"


# -- a blocked branch with its provenance path --------------------------------------------------

def _failed_branch() -> Any:
    from refsched import TaskScheduler

    scheduler = TaskScheduler(2)
    for task, deps in (("fetch", []), ("parse", ["fetch"]), ("index", ["parse"]),
                       ("report", ["parse", "index"]), ("other", [])):
        scheduler.submit(task, deps)
    scheduler.start()
    scheduler.ready()
    scheduler.fail("fetch", 1, actor="worker-3", reason="disk full")
    return scheduler


def _edges(source: str) -> dict[tuple[str, str], str]:
    """Each edge of the DOT source by its nodes' labels' first lines, and its attributes."""
    names = {m[1]: m[2] for m in re.finditer(r"^  (t\d+) \[label=<<b>([^<]*)</b>", source, re.M)}
    return {(names[m[1]], names[m[2]]): m[3] or ""
            for m in re.finditer(r"^  (t\d+) -> (t\d+)(?: \[(.*)\])?;$", source, re.M)}


def test_a_blocked_branch_highlights_the_provenance_path_from_the_root() -> None:
    from refsched.conform.picture import branch_source

    source = branch_source(_failed_branch(), "report")
    edges = _edges(source)
    # the branch: the root and every version blocked from it; "other" is not on it
    assert set(edges) == {("fetch", "parse"), ("parse", "index"), ("parse", "report"),
                          ("index", "report")}
    highlighted = {edge for edge, attributes in edges.items() if 'class="provenance"' in attributes}
    assert highlighted == {("fetch", "parse"), ("parse", "report")}  # report's path, not index's
    assert all("penwidth=4" in edges[edge] for edge in highlighted)
    assert "worker-3" in source and "disk full" in source and ">other<" not in source


def test_a_version_with_no_provenance_has_no_branch_to_draw() -> None:
    from refsched.conform.picture import branch_source
    from refsched.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="neither blocked nor cancelled"):
        branch_source(_failed_branch(), "fetch")  # a failed root keeps no record of its own


@needs_dot
def test_a_blocked_branch_renders_as_svg_with_its_path_classed(tmp_path: Path) -> None:
    from refsched.conform.picture import write_branch

    out = tmp_path / "branch.svg"
    said = write_branch(_failed_branch(), "index", out)
    assert said.startswith(f"wrote {out}"), said
    svg = ET.parse(out).getroot()
    classed = [g for g in svg.iter("{http://www.w3.org/2000/svg}g")
               if "provenance" in (g.get("class") or "").split()]
    assert len(classed) == 2  # fetch -> parse -> index
