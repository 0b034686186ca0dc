"""The mutant catalogue stays applicable, and each verification layer kills what it should.

Every patch must fit the current scheduler and runner sources exactly once (so the catalogue
cannot rot silently); a few mutants, each killed by a different layer, are run against that
layer alone; a patch that only renames a local variable must be reported as a survivor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from refsched.verify.mutants import (
    CATALOGUE,
    LAYER_NAMES,
    Budget,
    Mutant,
    MutantResult,
    PatchError,
    RunReport,
    format_markdown,
    format_text,
    main,
    patched_source,
    run_mutant,
    source_path,
)

BY_NAME = {m.name: m for m in CATALOGUE}

# A mutant and the one layer expected to kill it, one per layer.
EXPECTED_KILLS = (
    ("concurrency_off_by_one", "unit"),
    ("cancel_of_running_ignored", "lockstep"),
    ("ready_order_not_by_seq", "replay"),
    ("runner_limit_off_by_one", "tlc"),
    ("close_notifies_one_worker", "explore"),
    # Claimed only inside the soak run's worker processes: the kill shows that the processes a
    # layer starts run the mutant too.
    ("durable_claim_newest_first", "tlc"),
)

# Renames a local variable: no behaviour can tell it from the original.
HARMLESS = Mutant(
    "renamed_local", "scheduler",
    """            endings = self._endings
            if endings:
                self._endings = []
                return endings""",
    """            found = self._endings
            if found:
                self._endings = []
                return found""",
    "pop_endings() names its local differently")

# The lock-step walks are derandomized, not seeded: the literals of the modules loaded change
# them (docs/conformance.md, "What it runs"), and cancel_of_running_ignored needs up to 200.
QUICK = replace(Budget(), lockstep_examples=200, tlc_runs=4, explore_max_schedules=500,
                scenarios=None)


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda m: m.name)
def test_every_patch_applies_exactly_once_and_compiles(mutant: Mutant) -> None:
    source = source_path(mutant.file).read_text(encoding="utf-8")
    assert source.count(mutant.original) == 1, (
        f"{mutant.name}: the snippet no longer occurs exactly once in "
        f"refsched/{mutant.file}.py; update the catalogue")
    compile(patched_source(mutant, source), f"{mutant.name}.py", "exec")


def test_the_catalogue_has_named_one_line_mutants_of_every_production_module() -> None:
    assert len(CATALOGUE) >= 30
    assert len(BY_NAME) == len(CATALOGUE)
    assert {m.file for m in CATALOGUE} == {"scheduler", "runner", "timer", "timer_runner", "pool",
                                           "durable", "durable_store", "durable_postgres",
                                           "durable_steps", "durable_schedules", "schedule",
                                           "signals", "pool_blocking", "durable_worker"}
    assert all(m.description and "\n" not in m.description for m in CATALOGUE)


def test_a_patch_that_does_not_fit_once_is_refused() -> None:
    mutant = BY_NAME["double_decrement"]
    with pytest.raises(PatchError, match="0 times"):
        patched_source(mutant, "nothing to patch here")
    with pytest.raises(PatchError, match="2 times"):
        patched_source(mutant, mutant.original + "\n" + mutant.original)


def _expected(item: tuple[str, str]) -> tuple[str, str, MutantResult]:
    name, layer = item
    scenarios = ("runner_chain",) if layer == "explore" else None
    budget = replace(QUICK, scenarios=scenarios)
    return name, layer, run_mutant(BY_NAME[name], [layer], budget=budget)


def _harmless() -> MutantResult:
    budget = replace(QUICK, tlc_runs=1, scenarios=("ready_ready", "runner_chain"))
    return run_mutant(HARMLESS, ["lockstep", "tlc", "explore"], budget=budget)


def test_each_layer_kills_its_mutant_and_a_harmless_patch_survives() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        harmless = pool.submit(_harmless)
        kills = list(pool.map(_expected, EXPECTED_KILLS))
        survivor = harmless.result()

    for name, layer, result in kills:
        (only,) = result.layers
        assert only.status == "killed", f"{name}: {layer} said {only.status}\n{only.evidence}"
        assert result.verdict == "killed" and result.killed_by == [layer]
        assert only.evidence, f"{name}: a kill without evidence"
    evidence = {name: result.evidence for name, _, result in kills}
    assert "schedule " in evidence["close_notifies_one_worker"]  # a replayable schedule id
    assert "record_runner_run(" in evidence["runner_limit_off_by_one"]
    assert "step " in evidence["ready_order_not_by_seq"]

    assert [r.status for r in survivor.layers] == ["survived"] * 3, survivor.layers
    assert survivor.verdict == "survived" and survivor.killed_by == []

    report = RunReport([*(r for _, _, r in kills), survivor], LAYER_NAMES, False, 1.0, QUICK)
    assert not report.ok
    assert "soak_run(" in evidence["durable_claim_newest_first"]
    assert report.count("killed") == 6 and report.count("survived") == 1
    assert report.kill_rate == pytest.approx(6 / 7)
    text = format_text(report)
    assert "renamed_local" in text and "85.7%" in text
    assert "| **survived** |" in format_markdown(report)
    again = RunReport.from_json(json.loads(json.dumps(report.as_json())))
    assert format_text(again) == text


# A mutant that miscounts one counter of stats() in each system: the lock-step machines and
# replay compare every counter with what the model's steps count.
MISCOUNTS = ("claimed_uncounts_stopped_runs", "timer_claimed_uncounts_failed",
             "pool_queue_lengths_skip_empty")


def test_lockstep_and_replay_kill_a_mutant_that_miscounts_in_each_system() -> None:
    def both(name: str) -> MutantResult:
        return run_mutant(BY_NAME[name], ["lockstep", "replay"], budget=QUICK, all_layers=True)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(both, MISCOUNTS))
    for name, result in zip(MISCOUNTS, results, strict=True):
        assert [r.status for r in result.layers] == ["killed", "killed"], (name, result.layers)
        for layer in result.layers:
            assert "stats()" in layer.evidence, (name, layer.layer, layer.evidence)


def test_the_command_lists_the_catalogue_and_refuses_unknown_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == len(CATALOGUE)
    assert main(["no_such_mutant"]) == 2  # a usage error
    assert "unknown mutant(s) no_such_mutant" in capsys.readouterr().err


def _layer_processes(parent: int) -> list[int]:
    """Pids of the layer subprocesses ``parent`` started that still run (zombies excluded)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_terminated_run_leaves_no_layer_process_behind() -> None:
    parent = subprocess.Popen([sys.executable, "-m", "refsched", "mutants", "double_decrement",
                               "--layers", "unit"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _layer_processes(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _layer_processes(parent.pid)
        assert children, "no layer process started"
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while any(map(_alive, children)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_alive, children))
    finally:
        parent.kill()
        parent.wait()
