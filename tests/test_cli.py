"""The refsched command line behaves like other Python CLIs and its verdicts can go both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import refsched
from refsched.cli import main


def test_verify_passes_for_the_production_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--system", "scheduler", "--skip-tlc", "--skip-replay",
                 "--examples", "40", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "1 of 1 checks passed" in out
    assert "snapshots equal after every call" in err


def test_verify_checks_every_scheduler_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--skip-tlc", "--skip-replay", "--examples", "20", "--quiet"]) == 0
    out, _ = capsys.readouterr()
    assert "5 of 5 checks passed" in out
    assert "lock-step model vs refsched:TaskScheduler" in out
    assert "lock-step durable worker model vs refsched.durable.worker:Worker" in out
    assert "lock-step timer model vs refsched:TimerScheduler" in out
    assert "lock-step pool model vs refsched:WorkStealingPool" in out
    assert "lock-step durable model vs refsched.durable:DurableScheduler" in out


def test_verify_of_the_pool_replays_its_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--system", "pool", "--skip-tlc", "--examples", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in report["results"]] == [
        "corpus replay vs refsched:WorkStealingPool",
        "corpus replay vs refsched:WorkStealingPool (pool-blocking-cover.jsonl.gz)",
        "corpus replay vs refsched:WorkStealingPool (pool-batch-cover.jsonl.gz)",
        "lock-step pool model vs refsched:WorkStealingPool"]
    assert report["results"][0]["figures"]["edges_replayed"] == 9216
    assert report["results"][1]["figures"]["edges_replayed"] == 15174  # with managed blocking
    assert report["results"][2]["figures"]["edges_replayed"] == 10672  # with batch steals


def test_verify_fails_for_a_broken_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--system", "scheduler", "--skip-tlc", "--skip-replay",
                 "--examples", "200", "--quiet",
                 "--impl", "tests.mutants.broken_schedulers:FailReportedAsSuccess"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "0 of 1 checks passed" in out
    assert "FAIL lock-step" in err and "disagreement found" in err


@pytest.mark.parametrize("impl", ["nope", "no_such_module:X", "refsched:NoSuchFactory"])
def test_verify_rejects_a_bad_impl_with_usage_status(impl: str) -> None:
    assert main(["verify", "--skip-tlc", "--impl", impl]) == 2


def test_version_and_usage_errors_follow_argparse_conventions() -> None:
    run = subprocess.run([sys.executable, "-m", "refsched", "--version"], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0 and run.stdout.strip() == f"refsched {refsched.__version__}"
    run = subprocess.run([sys.executable, "-m", "refsched", "frobnicate"], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 2 and "invalid choice" in run.stderr
    run = subprocess.run([sys.executable, "-m", "refsched"], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 2 and "usage:" in run.stderr


def test_record_then_validate_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.itf.json"
    assert main(["record", "--seed", "3", "-o", str(run)]) == 0
    assert main(["validate-trace", str(run)]) == 0
    assert "1 of 1 traces accepted by TLC" in capsys.readouterr().out
    doc = json.loads(run.read_text())
    doc["states"][-1]["nextSeq"] += 1  # a state the spec does not reach
    run.write_text(json.dumps(doc))
    assert main(["validate-trace", str(run)]) == 1
    out = capsys.readouterr().out
    assert f"rejected at step {len(doc['states']) - 1}" in out
    assert "0 of 1 traces accepted" in out


def test_unreadable_traces_are_usage_errors(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.itf.json"
    bad.write_text("{not json")
    assert main(["validate-trace", str(bad)]) == 2
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "not JSON" in err and "missing.jsonl" in err


def test_verify_json_is_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--system", "scheduler", "--skip-tlc", "--skip-replay",
                 "--examples", "10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["checks"] == 1
    assert report["results"][0]["figures"]["examples"] >= 10


def test_a_reader_that_goes_away_is_not_a_traceback() -> None:
    # `refsched mutants --list | head -1`, made deterministic: the reader is gone before the
    # first write.
    proc = subprocess.Popen([sys.executable, "-m", "refsched", "mutants", "--list"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.parametrize("argv", [
    ["verify", "--workers", "0"], ["verify", "--examples", "-1"], ["verify", "--runs", "-1"],
    ["traces", "--workers", "0"],
    ["validate-trace", "--workers", "0", "x"], ["validate-trace", "--timeout", "0", "x"],
    ["validate-trace", "--timeout", "-5", "x"], ["validate-trace", "--timeout", "nan", "x"],
    ["validate-trace", "--timeout", "inf", "x"], ["validate-trace", "--timeout", "soon", "x"],
    ["record", "--runs", "0", "-o", "x.jsonl"], ["record", "--tasks", "0", "-o", "x.jsonl"],
    ["record", "--workers", "0", "-o", "x.jsonl"], ["record", "--seed", "1.5", "-o", "x.jsonl"],
    ["explore", "--max-schedules", "0"], ["explore", "--max-steps", "0"],
    ["explore", "--max-preemptions", "-1"], ["explore", "--seed", "x"],
    ["conform", "--examples", "-1", "--impl", "refsched:TaskScheduler"],
    ["conform", "--steps", "0", "--impl", "refsched:TaskScheduler"],
    ["conform", "--timeout", "nan", "--", "true"], ["conform", "--timeout", "0", "--", "true"],
], ids=" ".join)
def test_every_numeric_option_is_checked_before_anything_runs(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written, but never beside the sources
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"argument {argv[1]}" in err.splitlines()[-1] and "Traceback" not in err


@pytest.mark.parametrize(("output", "words"), [
    ("file/run.itf.json", "no folder"),  # under a regular file
    ("folder", "it is a directory"),
    ("run.itf.json", "several runs"),  # with --runs 2
])
def test_record_refuses_an_output_it_cannot_write_before_recording(
        output: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "folder").mkdir()
    before = sorted(tmp_path.rglob("*"))
    runs = ["--runs", "2"] if words == "several runs" else []
    assert main(["record", "-o", str(tmp_path / output), *runs]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err, err
    assert sorted(tmp_path.rglob("*")) == before


def test_record_into_a_folder_the_system_refuses_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    # /proc takes no new file, even from root, whom permission bits do not stop.
    assert main(["record", "-o", "/proc/refsched-run.itf.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refsched record: cannot write /proc/refsched-run.itf.json")
    assert len(err.strip().splitlines()) == 1


def test_every_command_documents_its_exit_statuses() -> None:
    for command in ("verify", "traces", "replay", "validate-trace", "record", "explore",
                    "conform"):
        run = subprocess.run([sys.executable, "-m", "refsched", command, "--help"],
                             capture_output=True, text=True, check=False)
        assert run.returncode == 0 and "Exit status: 0" in run.stdout, command
    run = subprocess.run([sys.executable, "-m", "refsched", "validate-trace", "--help"],
                         capture_output=True, text=True, check=False)
    text = " ".join(run.stdout.split())
    assert "3 TLC did not finish within --timeout" in text and "4 TLC gave no verdict" in text


@pytest.mark.parametrize("content", [None, b"", b"[1]", b"\xff", b'{"mutants": 5}',
                                     b'{"mutants": [{"name": 3}]}', b"{}"])
def test_mutants_from_json_answers_what_is_not_a_report_with_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None) -> None:
    report = tmp_path / "report.json"
    if content is not None:
        report.write_bytes(content)
    assert main(["mutants", "--from-json", str(report)]) == 2
    out, err = capsys.readouterr()
    assert not out and err.startswith("refsched mutants: --from-json ")


def test_mutants_from_json_of_dev_null_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "--from-json", "/dev/null"]) == 2
    assert "not a report of refsched mutants --json" in capsys.readouterr().err


def test_mutants_of_an_unknown_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "no_such_mutant"]) == 2
    assert "refsched mutants: unknown mutant(s) no_such_mutant" in capsys.readouterr().err
