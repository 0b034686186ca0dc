"""Model = spec on TLC's state graph, and the edge-covering corpus made from it.

TLC dumps the graph of spec/MCSchedulerTraces.cfg once per module (a few seconds); a wrong
model step and a wrong spec action must each make the match fail, naming the difference.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import itf_py
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refsched.model.dag import actions as A
from refsched.model.dag.graph import explore
from refsched.types import Snapshot, TaskState
from refsched.verify import corpus, stategraph, system, tlc
from refsched.verify.itf import Step, Trace, read_traces, trace_from_itf, trace_to_itf
from refsched.verify.specstate import SpecStateError, snapshot_of, spec_state
from refsched.verify.tla import (
    Function,
    ModelValue,
    TLAParseError,
    decode_string,
    encode_string,
    parse_state,
    parse_value,
    render,
)

INSTANCE = stategraph.Instance(("a", "b"), 2, 2)


@pytest.fixture(scope="module")
def dumped() -> stategraph.TLCStateGraph:
    graph, result, _ = stategraph.dump_state_graph(workers=1)
    assert result.ok
    return graph


@pytest.fixture(scope="module")
def matched(dumped: stategraph.TLCStateGraph) -> stategraph.StateGraph:
    return stategraph.match(dumped, INSTANCE)


# -- TLA+ values -------------------------------------------------------------------------------

def test_tla_values_read_as_tlc_prints_them() -> None:
    assert parse_value('(a :> {b, c} @@ b :> {})') == Function(
        {ModelValue("a"): frozenset({ModelValue("b"), ModelValue("c")}), ModelValue("b"):
         frozenset()})
    assert parse_value('<<1, -2, "x\\"y">>') == (1, -2, 'x"y')
    assert parse_value("[k |-> TRUE, n |-> 3]") == Function({"k": True, "n": 3})
    assert parse_state('/\\ x = 1\n/\\ y = {"a"}') == {"x": 1, "y": frozenset({"a"})}
    for bad in ("(a :> 1", "{1,, 2}", "1 2", "[1 |-> 2]"):
        with pytest.raises(TLAParseError):
            parse_value(bad)


def test_render_reads_back() -> None:
    value = Function({"a": frozenset({"b"}), "b": (1, True, ModelValue("NoTask"))})
    assert parse_value(render(value)) == value
    text = Function({'say "hi"': ("back\\slash", "line\nbreak")})
    assert parse_value(render(text, readable=True)) == text


# What TLC 2.15 lexes in a string literal as it is: printable ASCII but the quote, the
# backslash (escapes) and, kept out of comments, parentheses and stars; '%' is the escape.
TLC_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - set('"\\()*%')


@given(st.text())
def test_encode_string_is_one_to_one_onto_text_tlc_reads(text: str) -> None:
    encoded = encode_string(text)
    assert set(encoded) <= TLC_PLAIN | {"%"}
    assert decode_string(encoded) == text
    assert render(text) == f'"{encoded}"'


@given(st.text(alphabet=sorted(TLC_PLAIN)))
def test_encode_string_keeps_plain_text(text: str) -> None:
    assert encode_string(text) == text


@pytest.mark.parametrize(("text", "encoded"), [
    ("absent", "absent"), ("中", "%E4%B8%AD"), ("a\rb", "a%0Db"), ("a\u2028b", "a%E2%80%A8b"),
    ('"', "%22"), ("\\", "%5C"), ("(*", "%28%2A"), ("*)", "%2A%29"), ("%41", "%2541"),
    ("\ud800", "%ED%A0%80"),  # a lone surrogate, which JSON can carry
])
def test_encode_string_escapes_what_tlc_cannot_lex(text: str, encoded: str) -> None:
    assert encode_string(text) == encoded


# -- Spec state <-> Snapshot ------------------------------------------------------------------

def test_every_reachable_state_converts_both_ways() -> None:
    graph = explore(["a", "b"], 2, 2)
    for s in graph.depth:
        assert snapshot_of(spec_state(s, ["a", "b"])) == s


def test_malformed_spec_states_are_refused() -> None:
    good = spec_state(Snapshot(), ["a"])
    with pytest.raises(SpecStateError, match="lacks"):
        snapshot_of({k: v for k, v in good.items() if k != "claims"})
    with pytest.raises(SpecStateError, match="not absent"):
        snapshot_of({**good, "claims": Function({"a": 1})})
    with pytest.raises(SpecStateError, match="state 'bogus'"):
        snapshot_of({**good, "generation": Function({"a": 1}),
                     "state": Function({"a": "bogus"})})
    with pytest.raises(SpecStateError, match="not in Tasks"):
        spec_state(A.submit_step(Snapshot(), "z", frozenset()), ["a"])


# -- ITF -----------------------------------------------------------------------------------------

def test_a_bundle_line_ends_only_at_a_newline(tmp_path: Path) -> None:
    """JSON strings may hold a raw U+2028 or U+0085, which str.splitlines takes for line
    ends; a bundle line holds its whole trace all the same."""
    s0 = Snapshot()
    trace = Trace("a\u2028b\x85c", {"Tasks": ["a"], "MaxConcurrency": 1}, spec_state(s0, "a"),
                  [])
    line = json.dumps(trace_to_itf(trace), ensure_ascii=False)
    assert "\u2028" in line and "\x85" in line
    bundle = tmp_path / "t.jsonl"
    bundle.write_text(line + "\n" + line + "\n", encoding="utf-8")
    assert [t.name for t in read_traces(bundle)] == [trace.name] * 2


def test_itf_round_trip_and_itf_py_reads_it() -> None:
    s0 = Snapshot()
    s1 = A.submit_step(s0, "a", frozenset())
    trace = Trace("t", {"Tasks": ["a", "b"], "MaxConcurrency": 2}, spec_state(s0, "ab"),
                  [Step("Submit", {"t": "a", "D": frozenset()}, spec_state(s1, "ab"))])
    doc = json.loads(json.dumps(trace_to_itf(trace)))
    back = trace_from_itf(doc)
    assert back.name == "t" and back.constants == trace.constants
    assert back.steps[0].action == "Submit" and back.steps[0].params == {"t": "a", "D": set()}
    assert snapshot_of(back.steps[0].state) == s1
    # The reference ITF reader decodes every variable (itf-py 0.5 cannot decode Quint's
    # Some(...) picks when they hold sets or integers, so the picks are left to our reader).
    state = doc["states"][1]
    assert itf_py.value_from_json(state["mbt::actionTaken"]) == "Submit"
    assert itf_py.value_from_json(state["nextSeq"]) == 2
    assert itf_py.value_from_json(state["deps"]) == {"a": frozenset(), "b": frozenset()}


# -- Model = spec ------------------------------------------------------------------------------

def test_tlc_graph_equals_the_model_graph(dumped: stategraph.TLCStateGraph,
                                          matched: stategraph.StateGraph) -> None:
    assert matched.state_count == len(dumped.states) == 5784
    assert matched.edge_count == len(dumped.edges)
    labels = Counter(label for _, _, label in dumped.edges)
    # every action but the gated ones (off here) appears, under its model name
    assert set(labels) == set(A.ACTIONS) - set(A.EDGE_ACTIONS)
    assert Counter(e.action for e in matched.all_edges()) == labels


def _broken_complete(s: Snapshot, task_id: object, generation: int) -> Snapshot:
    """Complete that forgets to make a dependent ready when its last dep succeeds."""
    tasks = dict(s.tasks)
    tasks[task_id] = replace(tasks[task_id], state=TaskState.SUCCEEDED)
    for x in A.dependents(tasks, task_id):
        v = tasks[x]
        if v.state is TaskState.PENDING:
            tasks[x] = replace(v, remaining_deps=v.remaining_deps - 1)
    return s.replace(tasks=tasks)


def test_a_wrong_model_step_is_named(dumped: stategraph.TLCStateGraph,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(A.ACTIONS, "Complete",
                        A.Action("Complete", ("t", "g"), A.complete_refusal, _broken_complete))
    with pytest.raises(stategraph.GraphMismatch, match="only in the model") as caught:
        stategraph.match(dumped, INSTANCE)
    assert "Complete(t=" in str(caught.value)


def test_a_missing_model_edge_is_named(dumped: stategraph.TLCStateGraph,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def no_repeat(s: Snapshot, task_id: object) -> A.Refusal | None:
        view = s.tasks.get(task_id)
        if view is not None and view.state is TaskState.CANCELLED:
            return A.Refusal(None, "mutant: no repeated callback on cancelled versions")
        return A.repeated_callback_refusal(s, task_id)

    monkeypatch.setitem(A.ACTIONS, "RepeatedCallback",
                        A.Action("RepeatedCallback", ("t",), no_repeat, A._unchanged))
    with pytest.raises(stategraph.GraphMismatch, match="RepeatedCallback: model 0 edge"):
        stategraph.match(dumped, INSTANCE)


def _mutated_spec(tmp_path: Path, old: str, new: str) -> Path:
    for name in ("Scheduler.tla", "MCScheduler.tla", stategraph.TRACES_CONFIG):
        shutil.copy(tlc.spec_dir() / name, tmp_path / name)
    spec = tmp_path / "Scheduler.tla"
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))
    return tmp_path


def test_a_wrong_spec_action_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Cancel of a running version forgets to record the stop request: every invariant still
    # holds, so only the match with the model can see it.
    monkeypatch.setenv("REFSCHED_SPEC_DIR", str(_mutated_spec(
        tmp_path, "/\\ cancelRequested' = [cancelRequested EXCEPT ![t] = TRUE]",
        "/\\ cancelRequested' = cancelRequested")))
    dumped, result, _ = stategraph.dump_state_graph(workers=1)
    assert result.ok
    with pytest.raises(stategraph.GraphMismatch, match="only in the model") as caught:
        stategraph.match(dumped, INSTANCE)
    assert "Cancel(t=" in str(caught.value) and "cancelRequested=True" in str(caught.value)


def test_instance_constants_are_read_from_the_cfg() -> None:
    assert stategraph.read_instance(stategraph.TRACES_CONFIG) == INSTANCE


# -- The corpus --------------------------------------------------------------------------------

def test_the_path_cover_takes_every_edge(matched: stategraph.StateGraph) -> None:
    paths = corpus.path_cover(matched)
    taken: Counter[int] = Counter()
    for path in paths:
        assert path[0].source == matched.initial
        for before, after in itertools.pairwise(path):
            assert before.target == after.source
        taken.update(id(e) for e in path)
    assert {id(e) for e in matched.all_edges()} == set(taken)


def test_the_committed_corpus_is_current(matched: stategraph.StateGraph) -> None:
    check = corpus.check_corpus(matched)
    assert check.manifest["edges"] == matched.edge_count
    traces = read_traces(corpus.traces_dir() / corpus.BUNDLE)
    assert len(traces) == check.manifest["traces"]
    assert sum(len(t.steps) for t in traces) == check.manifest["steps"]


def test_a_stale_corpus_is_refused_with_the_fix(matched: stategraph.StateGraph,
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    corpus.write_corpus(matched, tmp_path / "traces")
    corpus.check_corpus(matched, tmp_path / "traces")
    spec_copy = tmp_path / "spec"
    spec_copy.mkdir()
    _mutated_spec(spec_copy, "(* Invariants *)", "(* Invariants, restated *)")
    monkeypatch.setenv("REFSCHED_SPEC_DIR", str(spec_copy))
    with pytest.raises(corpus.CorpusMismatch, match=r"another version of Scheduler\.tla.*"
                       r"refsched traces"):
        corpus.check_corpus(matched, tmp_path / "traces")
    monkeypatch.delenv("REFSCHED_SPEC_DIR")
    bundle = tmp_path / "traces" / corpus.BUNDLE
    bundle.write_bytes(bundle.read_bytes()[:-10])
    with pytest.raises(corpus.CorpusMismatch, match=r"not the file MANIFEST\.json describes"):
        corpus.check_corpus(matched, tmp_path / "traces")


def test_a_config_is_read_without_its_comments_and_a_missing_constant_is_named(
        tmp_path: Path) -> None:
    from refsched.verify import tlc
    from refsched.verify.pool import spec as poolspec
    from refsched.verify.timer import spec as timerspec

    cfg = tmp_path / "MC.cfg"
    cfg.write_text("CONSTANTS\n  Tasks = {a, b}  \\* was {x}\n  MaxConcurrency = 2\n")
    path, _, values = tlc.read_config(cfg, ("Tasks", "MaxConcurrency"))
    assert path == cfg and values["MaxConcurrency"] == 2
    assert {t.name for t in values["Tasks"]} == {"a", "b"}
    for reader in (stategraph.read_instance, poolspec.read_instance, timerspec.read_instance):
        with pytest.raises(ValueError, match="no constant"):
            reader(cfg)


def test_each_corpus_instance_has_its_own_files_and_module() -> None:
    durable = system.get("durable")
    assert durable.instances[0] == durable.traces_config
    names = {c: (durable.bundle_of(c), durable.manifest_of(c)) for c in durable.instances}
    assert names[durable.traces_config] == ("durable-cover.jsonl.gz", "durable-manifest.json")
    assert names["MCDurableSchedulerCorpusClaims.cfg"] == (
        "durable-claims-cover.jsonl.gz", "durable-claims-manifest.json")
    assert len(set(names.values())) == len(names)
    assert durable.module_of("MCDurableSchedulerCorpusDiamond.cfg") == \
        "MCDurableSchedulerCorpus.tla"
    assert "MCDurableSchedulerCorpus.tla" in durable.spec_files_of(
        "MCDurableSchedulerCorpusDiamond.cfg")
    assert durable.spec_files_of(durable.traces_config) == durable.spec_files
    # a system of one instance keeps its one corpus
    timer = system.get("timer")
    assert timer.instances == (timer.traces_config,) and timer.bundle_of(
        timer.traces_config) == timer.bundle
    # the TaskScheduler's first instance keeps the corpus's first names
    dag = system.get("scheduler")
    assert dag.instances[0] == dag.traces_config and dag.bundle_of(dag.traces_config) == \
        dag.bundle == "scheduler-cover.jsonl.gz"
    assert dag.bundle_of("MCSchedulerCorpusEdges.cfg") == "scheduler-edges-cover.jsonl.gz"
    assert dag.manifest_of("MCSchedulerCorpusAddDeps.cfg") == "scheduler-adddeps-manifest.json"
    assert dag.module_of("MCSchedulerCorpusAddDeps.cfg") == "MCSchedulerCorpus.tla"
    with pytest.raises(ValueError, match="not a corpus instance"):
        durable.bundle_of("MCDurableScheduler.cfg")
