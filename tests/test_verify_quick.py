"""``refsched verify --quick``: the same checks on smaller instances, and what makes them fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from refsched.verify import corpus, system
from refsched.verify.itf import read_traces


def verify(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "refsched", "verify", *argv], env=env,
                          capture_output=True, text=True, timeout=600)


def test_quick_runs_the_small_instance_checks_and_no_big_tlc_run() -> None:
    done = verify("--quick", "--system", "pool", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    names = [r["name"] for r in report["results"]]
    # each corpus instance: single steals, with managed blocking, with batch steals
    assert names == ["model = spec (MCWorkStealingTraces.cfg)",
                     "corpus is current (traces/pool-cover.jsonl.gz)",
                     "model = spec (MCWorkStealingCorpusBlocking.cfg)",
                     "corpus is current (traces/pool-blocking-cover.jsonl.gz)",
                     "model = spec (MCWorkStealingCorpusBatch.cfg)",
                     "corpus is current (traces/pool-batch-cover.jsonl.gz)",
                     "corpus replay vs refsched:WorkStealingPool (one trace in 20)",
                     "corpus replay vs refsched:WorkStealingPool (pool-blocking-cover.jsonl.gz)"
                     " (one trace in 20)",
                     "corpus replay vs refsched:WorkStealingPool (pool-batch-cover.jsonl.gz)"
                     " (one trace in 20)",
                     "lock-step pool model vs refsched:WorkStealingPool"]
    replay = report["results"][6]["figures"]
    assert replay["traces"] == len(range(0, 2841, 20)) and replay["edges_replayed"] > 0
    blocking = report["results"][7]["figures"]
    assert blocking["traces"] == len(range(0, 4673, 20)) and blocking["edges_replayed"] > 0
    batch = report["results"][8]["figures"]
    assert batch["traces"] == len(range(0, 2827, 20)) and batch["edges_replayed"] > 0
    assert report["results"][9]["figures"]["examples"] >= 20


def test_quick_fails_when_the_corpus_was_made_from_another_spec(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(corpus.traces_dir(), traces)
    manifest = traces / system.get("pool").manifest
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["spec"]["WorkStealing.tla"] = "0" * 64
    manifest.write_text(json.dumps(data), encoding="utf-8")
    done = verify("--quick", "--system", "pool", "--examples", "0", "--skip-replay",
                  env={**os.environ, "REFSCHED_TRACES_DIR": str(traces)})
    assert done.returncode == 1
    assert "traces/ was made from another version of WorkStealing.tla" in done.stdout


def test_a_stride_reads_one_trace_in_so_many() -> None:
    bundle = corpus.traces_dir() / system.get("pool").bundle
    every = read_traces(bundle)
    sample = read_traces(bundle, stride=7)
    assert [t.name for t in sample] == [t.name for t in every[::7]]
    assert sample == every[::7]
