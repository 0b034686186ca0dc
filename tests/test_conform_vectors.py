"""Test vectors (refsched conform --export-vectors) and the Node.js runner shipped for them, and
refsched conform --traces FILE: a counterexample replayed alone, from ITF or from vectors.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from refsched.conform import vectors
from refsched.conform.main import main as conform_main

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "docs" / "vectors" / "run-vectors.mjs"
NODE = shutil.which("node")
TRACES = 30  # enough corpus traces for each broken implementation below to be caught

# per system: one implementation of refsched's shipped broken ones that the first TRACES corpus
# traces catch
BROKEN = {
    "scheduler": "refsched.conform.dag.broken:ClaimsNewestFirst",
    "timer": "refsched.conform.timer.broken:RescheduleKeepsPriority",
    "pool": "refsched.conform.pool.broken:ThiefLeavesLastTask",
    "durable": "refsched.conform.durable.broken:ReclaimKeepsAttempt",
}
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each system's vectors of its first TRACES corpus traces, written by the command line."""
    out = tmp_path_factory.mktemp("vectors")
    files = {}
    for system in BROKEN:
        files[system] = out / f"{system}.jsonl"
        assert conform_main(["--export-vectors", str(files[system]), "--system", system,
                             "--max-traces", str(TRACES), "-q"]) == 0
    return files


def _serve(system: str, impl: str | None = None) -> list[str]:
    return [sys.executable, "-m", "refsched.serve", "--system", system,
            *(["--impl", impl] if impl else [])]


def _run_vectors(path: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, str(RUNNER), str(path), *command], capture_output=True,
                          text=True, timeout=120)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("system", list(BROKEN))
def test_vectors_hold_a_marker_per_trace_then_its_requests(
        exported: dict[str, Path], system: str) -> None:
    header, *body = _lines(exported[system])
    assert header["vectors"] == vectors.FORMAT and header["system"] == system
    markers = [line for line in body if "trace" in line]
    requests = [json.loads(line["send"]) for line in body if "send" in line]
    assert len(markers) == header["traces"] == TRACES
    assert len(requests) == header["requests"]
    # a marker is followed by the new instance's request, and ids run on from the hello's 0
    for index, line in enumerate(body):
        if "trace" in line:
            assert json.loads(body[index + 1]["send"])["op"] == "new"
    assert [r["id"] for r in requests] == list(range(1, len(requests) + 1))
    assert all("message" not in line["expect"].get("error", {}) for line in body
               if "expect" in line)


@needs_node
@pytest.mark.parametrize("system", list(BROKEN))
def test_node_runner_passes_refsched_own_server(exported: dict[str, Path], system: str) -> None:
    result = _run_vectors(exported[system], _serve(system))
    assert result.returncode == 0, result.stderr
    header = _lines(exported[system])[0]
    assert f"{header['requests']} of {header['requests']} answers as expected" in result.stdout


@needs_node
@pytest.mark.parametrize("system", list(BROKEN))
def test_node_runner_fails_a_broken_implementation(exported: dict[str, Path],
                                                    system: str) -> None:
    result = _run_vectors(exported[system], _serve(system, BROKEN[system]))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "expected" in result.stderr and "got" in result.stderr


# the TaskScheduler's corpus instances of edge kinds and AddDeps -> a bug of the JavaScript
# scheduler their first TRACES traces catch
EDGE_BUNDLES = {"scheduler-edges-cover.jsonl.gz": "optional_failure_blocks",
                "scheduler-adddeps-cover.jsonl.gz": "add_deps_keeps_count"}
JAVASCRIPT = ROOT / "tests" / "conform_impls" / "js" / "dag_scheduler.mjs"


@needs_node
@pytest.mark.parametrize("bundle", sorted(EDGE_BUNDLES))
def test_vectors_of_edge_kinds_and_add_deps_pass_refsched_and_javascript_and_catch_a_bug(
        tmp_path: Path, bundle: str) -> None:
    assert NODE is not None
    out = tmp_path / "edges.jsonl"
    assert conform_main(["--export-vectors", str(out), "--traces",
                         str(ROOT / "traces" / bundle), "--max-traces", str(TRACES),
                         "-q"]) == 0
    sent = [json.loads(line["send"]) for line in _lines(out) if "send" in line]
    assert any(r.get("optional") or r["op"] == "add_deps" for r in sent)
    for command in (_serve("scheduler"), [NODE, str(JAVASCRIPT)]):
        result = _run_vectors(out, command)
        assert result.returncode == 0, result.stderr
    broken = subprocess.run([NODE, str(RUNNER), str(out), NODE, str(JAVASCRIPT)],
                            capture_output=True, text=True, timeout=120,
                            env={"PATH": "", "DAG_BUG": EDGE_BUNDLES[bundle]})
    assert broken.returncode == 1, broken.stdout + broken.stderr


@needs_node
def test_node_runner_compares_sets_as_sets_and_lists_in_order(tmp_path: Path,
                                                              exported: dict[str, Path]) -> None:
    """A close report's ids in another order agree; a claim list in another order does not."""
    header, *body = _lines(exported["scheduler"])
    swapped_sets = tmp_path / "sets.jsonl"
    flipped = 0
    for line in body:
        if "unordered" in line and "/pending" in line["unordered"]:
            line["expect"]["ok"] = {k: v[::-1] for k, v in line["expect"]["ok"].items()}
            flipped += sum(len(v) > 1 for v in line["expect"]["ok"].values())
    assert flipped, "no close report lists two ids: the test would show nothing"
    swapped_sets.write_text("".join(json.dumps(x) + "\n" for x in [header, *body]))
    assert _run_vectors(swapped_sets, _serve("scheduler")).returncode == 0

    header, *body = _lines(exported["scheduler"])
    claims = next(line for line in body if "send" in line
                  and json.loads(line["send"])["op"] == "ready"
                  and len(line["expect"]["ok"]) > 1)
    claims["expect"]["ok"].reverse()
    swapped_order = tmp_path / "order.jsonl"
    swapped_order.write_text("".join(json.dumps(x) + "\n" for x in [header, *body]))
    assert _run_vectors(swapped_order, _serve("scheduler")).returncode == 1


@needs_node
def test_node_runner_leaves_out_the_ignored_fields_alone(tmp_path: Path,
                                                         exported: dict[str, Path]) -> None:
    """A durable stats answer's count of repeated reports is not compared; its claims are."""
    for field, status in (("duplicate_callbacks", 0), ("claimed", 1)):
        header, *body = _lines(exported["durable"])
        stats = [line for line in body if "ignore" in line]
        assert stats and all(json.loads(line["send"])["op"] == "stats" for line in stats)
        stats[-1]["expect"]["ok"][field] += 7
        changed = tmp_path / f"{field}.jsonl"
        changed.write_text("".join(json.dumps(x) + "\n" for x in [header, *body]))
        assert _run_vectors(changed, _serve("durable")).returncode == status, field


def test_the_runner_printed_in_the_docs_is_the_shipped_one() -> None:
    page = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = page[page.index("### The runner"):]
    printed = section[section.index("```js\n") + len("```js\n"):section.index("\n```\n")]
    assert printed + "\n" == RUNNER.read_text(encoding="utf-8")


def test_the_docs_table_of_sets_and_ignored_fields_is_the_code_s() -> None:
    """Every row of the comparison table is what the vectors hold, and no set is missing."""
    from refsched.conform.dag import wire as dag_wire
    from refsched.conform.wire import SYSTEMS
    from refsched.conform.wire import get as get_wire

    page = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("   | ") and len(cells) == 4 and cells[0] in SYSTEMS:
            paths = [[p.strip("` ") for p in c.split(",") if p.strip()] for c in cells[2:]]
            rows[cells[0], cells[1].strip("`")] = tuple(paths)
    expected = {}
    for system in SYSTEMS:
        for op in (dag_wire.OPS if system == "scheduler" else get_wire(system).ops):
            found = (vectors.unordered_paths(system, op), list(vectors.IGNORED.get((system, op),
                                                                                   ())))
            if found != ([], []):
                expected[system, op] = found
    assert rows == {key: tuple(value) for key, value in expected.items()}


def test_unordered_paths_name_the_sets_of_each_system() -> None:
    assert vectors.unordered_paths("scheduler", "snapshot") == ["/tasks/*/deps",
                                                                 "/tasks/*/optional"]
    assert "/pending" in vectors.unordered_paths("scheduler", "close")
    assert vectors.unordered_paths("scheduler", "ready") == []
    assert vectors.unordered_paths("timer", "snapshot") == ["/heap"]
    assert vectors.unordered_paths("durable", "snapshot") == ["/tasks/*/deps"]


def test_traces_file_replays_only_its_traces_and_reproduces_the_counterexample(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counterexample = tmp_path / "ce.itf.json"
    broken = _serve("timer", BROKEN["timer"])
    assert conform_main(["--system", "timer", "--max-traces", "5", "--examples", "0", "-q",
                         "--trace-out", str(counterexample), "--", *broken]) == 1
    capsys.readouterr()
    # alone: one trace, no generated phase
    assert conform_main(["--system", "timer", "--traces", str(counterexample), "--json", "--",
                         *broken]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in report["phases"]] == ["corpus"]
    assert conform_main(["--system", "timer", "--traces", str(counterexample), "-q", "--",
                         *_serve("timer")]) == 0
    # the same counterexample as vectors: the runner and --traces both catch it
    as_vectors = tmp_path / "ce-vectors.jsonl"
    assert conform_main(["--export-vectors", str(as_vectors), "--system", "timer",
                         "--traces", str(counterexample), "-q"]) == 0
    assert vectors.read_trace_file(as_vectors)[0].steps == \
        vectors.read_trace_file(counterexample)[0].steps
    assert conform_main(["--system", "timer", "--traces", str(as_vectors), "-q", "--",
                         *broken]) == 1
    if NODE is not None:
        assert _run_vectors(as_vectors, broken).returncode == 1
        assert _run_vectors(as_vectors, _serve("timer")).returncode == 0


def test_export_refuses_traces_that_are_no_behaviour_of_the_spec(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace whose last state says the wrong time: refsched's server cannot follow it, and no
    vectors are written from it."""
    from refsched.verify.itf import trace_to_itf

    doc = trace_to_itf(vectors.corpus_traces("timer", 3)[2])
    doc["states"][-1]["nextSeq"] = {"#bigint": "99"}
    bogus = tmp_path / "bogus.itf.json"
    bogus.write_text(json.dumps(doc))
    out = tmp_path / "bogus.jsonl"
    assert conform_main(["--export-vectors", str(out), "--system", "timer",
                         "--traces", str(bogus), "-q"]) == 2
    assert "disagrees with the reference model" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("argv, message", [
    (["--traces", "{timer}", "--", "true"], "holds traces of the timer system"),
    (["--traces", "{missing}", "--", "true"], "--traces"),
    (["--traces", "{timer}", "--system", "timer", "--no-corpus", "--", "true"], "--no-corpus"),
    (["--export-vectors", "{out}", "--", "true"], "takes no COMMAND"),
    (["--export-vectors", "{out}", "--examples", "5"], "takes no --examples"),
    (["--export-vectors", "/nonexistent-dir/v.jsonl"], "cannot write"),
])
def test_traces_and_export_usage_errors(tmp_path: Path, exported: dict[str, Path],
                                        capsys: pytest.CaptureFixture[str], argv: list[str],
                                        message: str) -> None:
    filled = [a.format(timer=exported["timer"], missing=tmp_path / "no.jsonl",
                       out=tmp_path / "v.jsonl") for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        conform_main(filled)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
