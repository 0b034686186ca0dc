"""bench/run.py's durable rounds: a contender whose run fails never holds up or ends the run.

The durable sections' contenders start worker processes and can fail (a deadline passed, a
worker that exited, a lost job). A failing peer sits out the later rounds and its row says why;
the others' rows keep every round; ours failing ends the row's rounds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def run():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        import run as bench_run
        yield bench_run
    finally:
        sys.path.remove(str(BENCH))


def test_failing_peer_sits_out_later_rounds(run) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []

    def ours(n: int) -> float:
        calls.append("ours")
        return 1.0

    def steady(n: int) -> float:
        calls.append("steady")
        return 2.0

    def flaky(n: int) -> float:
        calls.append("flaky")
        if calls.count("flaky") == 2:
            raise TimeoutError("the flaky workers did not finish\nsecond line")
        return 4.0

    results = run.Results(True, {}, sections=["durable-postgres"])
    run._alternate(results, "durable-postgres", [("w", 10, ours, [steady, flaky], 1.0)], 3)
    steady_row, flaky_row = results.comparisons
    assert steady_row.ours_s == [1.0, 1.0, 1.0] and steady_row.peer_s == [2.0, 2.0, 2.0]
    assert steady_row.failed == ""
    assert flaky_row.ours_s == [1.0] and flaky_row.peer_s == [4.0]
    assert flaky_row.failed == "flaky: TimeoutError: the flaky workers did not finish"
    assert calls.count("flaky") == 2  # not run again after its failure
    table = "\n".join(run._comparison_table(results.comparisons))
    assert "a round failed: flaky: TimeoutError" in table


def test_failing_ours_ends_the_row(run) -> None:  # type: ignore[no-untyped-def]
    def ours(n: int) -> float:
        raise RuntimeError("a durable worker process exited with status 2")

    def peer(n: int) -> float:
        return 1.0

    results = run.Results(True, {}, sections=["durable-postgres"])
    run._alternate(results, "durable-postgres", [("w", 10, ours, peer, None)], 3)
    (row,) = results.comparisons
    assert row.ratios == []
    assert row.failed.startswith("ours: RuntimeError")
    assert "failed: ours: RuntimeError" in "\n".join(run._comparison_table([row]))


def test_other_errors_are_not_swallowed(run) -> None:  # type: ignore[no-untyped-def]
    def ours(n: int) -> float:
        raise KeyError("a bug in the benchmark")

    results = run.Results(True, {}, sections=["durable"])
    with pytest.raises(KeyError):
        run._alternate(results, "durable", [("w", 10, ours, ours, None)], 1)
