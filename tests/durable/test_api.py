"""The durable scheduler's API surface on both stores: one id rule, failures whose text
cannot be stored as given, the traceback, submit-if-absent, a second start(), a store that is
not there, the schema's migration, and one consistent read of the store (``view()``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.jobs import NOOP
from refsched.durable.scheduler import MAX_ID_BYTES, storable
from refsched.durable.store import SCHEMA_VERSION
from refsched.errors import InvalidArgumentError, InvalidTransitionError, StoreError
from refsched.types import TaskState
from tests.conftest import StoreURL
from tests.durable.support import downgrade


def store(url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 2)
    options.setdefault("clock", "virtual")
    return DurableScheduler(url(name), **options)


class StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class StrNotText(Exception):
    def __str__(self) -> Any:
        return 42


# Each failure with the text both stores keep for it: the same text on each.
FAILURES = [
    (ValueError("bad byte \udcff here"), "ValueError: bad byte \\udcff here"),
    (ValueError("nul \x00 here"), "ValueError: nul \\x00 here"),
    (StrRaises(), "StrRaises: <str() of the exception raised RuntimeError>"),
    (StrNotText(), "StrNotText: <str() of the exception raised TypeError>"),
    ("a str with \udc80 and \x00", "a str with \\udc80 and \\x00"),
]


@pytest.mark.parametrize(("error", "text"), FAILURES, ids=range(len(FAILURES)))
def test_a_failure_whose_text_cannot_be_stored_is_stored_sanitised_at_the_first_report(
        durable_url: StoreURL, error: object, text: str) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    assert db.fail(lease, error) is TaskState.FAILED
    info = db.info("a")
    assert (info.state, info.error, info.attempts) == (TaskState.FAILED, text, 1)
    assert db.stats().failed == 1


def test_storable_leaves_ordinary_text_as_it_is() -> None:
    assert storable("naïve ünïcode — 漢字 \t\n") == "naïve ünïcode — 漢字 \t\n"


def _raise_deep() -> None:
    raise KeyError("deep")


def test_fail_keeps_the_formatted_traceback_beside_the_one_line_error(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    try:
        _raise_deep()
    except KeyError as e:
        db.fail(lease, e)
    (job,) = db.view("a").versions
    assert job.error == "KeyError: 'deep'"
    assert job.traceback is not None
    assert job.traceback.startswith("Traceback (most recent call last):")
    assert "_raise_deep" in job.traceback and job.traceback.endswith("KeyError: 'deep'\n")
    db.retry("a")
    assert db.view("a").versions[0].traceback is None  # the new version has no failure


BAD_IDS = [
    ("nul", "a\x00b"),
    ("too long", "x" * (MAX_ID_BYTES + 1)),
    ("a megabyte", "x" * 1_000_000),
    ("long in utf-8", "é" * (MAX_ID_BYTES // 2 + 1)),
    ("lone surrogate", "a\udcffb"),
    ("empty", ""),
]


@pytest.mark.parametrize(("why", "bad"), BAD_IDS, ids=[w for w, _ in BAD_IDS])
def test_both_stores_refuse_the_same_ids_before_any_change(
        durable_url: StoreURL, why: str, bad: str) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    before = (db.snapshot(), db.stats())
    for call in (lambda: db.submit(bad, fn=NOOP), lambda: db.submit("b", [bad], fn=NOOP),
                 lambda: db.cancel(bad), lambda: db.retry(bad), lambda: db.info(bad),
                 lambda: db.state(bad)):
        with pytest.raises(InvalidArgumentError):
            call()
    db.start()
    with pytest.raises(InvalidArgumentError):
        db.claim(bad)
    assert (db.snapshot().tasks, db.stats().submitted) == (before[0].tasks, 1)


def test_the_longest_id_is_taken_by_both_stores(durable_url: StoreURL) -> None:
    db = store(durable_url)
    longest = "é" * (MAX_ID_BYTES // 2)
    db.submit(longest, fn=NOOP)
    db.start()
    (lease,) = db.claim("w" * MAX_ID_BYTES)
    assert db.complete(lease, 1) is TaskState.SUCCEEDED and db.result(longest) == 1


def test_submit_if_absent_keeps_what_the_store_has(durable_url: StoreURL) -> None:
    db = store(durable_url)
    assert db.submit("a", fn=NOOP, if_absent=True) == 1
    assert db.submit("b", ["a"], fn=NOOP, if_absent=True) == 1
    assert db.submit("b", ["a"], fn=NOOP, if_absent=True) == 1  # the script ran twice
    db.start()
    (lease,) = db.claim("w")
    db.complete(lease, "done")
    history = db.stats()
    assert db.submit("a", fn=NOOP, if_absent=True) == 1  # succeeded: not run again
    assert db.submit("c", fn=NOOP, if_absent=True) == 1  # new ids join the started graph
    assert db.state("a") is TaskState.SUCCEEDED and db.state("b") is TaskState.READY
    assert db.stats().submitted == history.submitted + 1
    assert db.submit("a", fn=NOOP) == 2  # without if_absent, a new version, as documented
    with pytest.raises(InvalidArgumentError):
        db.submit("d", fn=NOOP, if_absent=1)  # type: ignore[arg-type]


def test_a_second_start_says_what_to_do_instead(durable_url: StoreURL) -> None:
    db = store(durable_url)
    assert not db.started()
    db.start()
    assert db.started()
    with pytest.raises(InvalidTransitionError, match=r"already started.*if_absent=True"):
        db.start()


def test_an_opener_that_finds_no_store_is_told_so_and_leaves_nothing(
        durable_url: StoreURL, tmp_path: Path) -> None:
    store(durable_url, "real.db")
    with pytest.raises(StoreError, match="no store"):
        DurableScheduler(durable_url("mistyped.db"))
    with pytest.raises(StoreError, match="no store"):
        DurableScheduler(durable_url("mistyped.db"), read_only=True)
    assert not (tmp_path / "mistyped.db").exists()
    assert DurableScheduler(durable_url("real.db")).max_concurrency == 2


def test_a_version_1_store_is_read_as_it_is_and_migrated_by_its_first_writer(
        durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.start()
    downgrade(db, durable_url("s.db"), tmp_path / "s.db", 1)
    reader = DurableScheduler(durable_url("s.db"), read_only=True)
    assert reader.view().settings["schema_version"] == 1
    assert reader.view("a").versions[0].traceback is None
    reader.release()
    writer = DurableScheduler(durable_url("s.db"))
    assert writer.view().settings["schema_version"] == SCHEMA_VERSION
    (lease,) = writer.claim("w")
    writer.fail(lease, ValueError("after the migration"))
    assert "ValueError: after the migration" in (writer.view("a").versions[0].traceback or "")


def test_a_version_6_store_keeps_its_counters_read_as_they_are_and_moved_by_its_first_writer(
        durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.submit("b", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    db.complete(lease)
    before = db.stats()
    downgrade(db, durable_url("s.db"), tmp_path / "s.db", 6)
    reader = DurableScheduler(durable_url("s.db"), read_only=True)
    assert reader.view().settings["schema_version"] == 6
    assert reader.stats() == before and reader.view().settings["count:succeeded"] == 1
    reader.release()
    writer = DurableScheduler(durable_url("s.db"))
    assert writer.view().settings["schema_version"] == SCHEMA_VERSION == 7
    assert writer.stats() == before
    (lease,) = writer.claim("w")
    writer.complete(lease)
    assert (writer.stats().claimed, writer.stats().succeeded) == (2, 2)
    assert writer.view().settings["count:succeeded"] == 2


def test_a_newer_schema_is_refused_by_readers_too(durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    db.release()
    url = durable_url("s.db")
    if url.startswith("sqlite"):
        conn = sqlite3.connect(tmp_path / "s.db")
        conn.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'")
        conn.commit()
        conn.close()
    else:
        import psycopg

        from refsched.durable.postgres import split_url
        conninfo, schema = split_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.meta SET value = '99' WHERE key = 'schema_version'")
    for options in ({}, {"read_only": True}):
        with pytest.raises(StoreError, match="newer than this"):
            DurableScheduler(url, **options)


def test_a_read_only_scheduler_changes_nothing(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    reader = DurableScheduler(durable_url("s.db"), read_only=True)
    with pytest.raises(StoreError):
        reader.submit("b", fn=NOOP)
    with pytest.raises(StoreError):
        reader.start()
    assert not db.started() and [j.task_id for j in reader.view().versions] == ["a"]
