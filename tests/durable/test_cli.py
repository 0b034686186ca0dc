"""refsched status, jobs, show, retry and cancel: one consistent read, never a write by a reader,
long texts cut but whole in --json, a verdict or a usage error for every input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from refsched import cli
from refsched.durable import DurableScheduler
from refsched.durable.jobs import NOOP
from refsched.durable.urls import open_store
from refsched.errors import StoreError
from tests.conftest import StoreURL


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def started_with_a(folder: Path) -> tuple[str, DurableScheduler]:
    """A started SQLite store ``s.db`` in ``folder`` with one slot and one ready task ``a``:
    its URL, and the scheduler open on it."""
    url = f"sqlite:///{folder / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("a", fn=NOOP)
    db.start()
    return url, db


def test_status_on_an_empty_file_writes_nothing(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.db").write_bytes(b"")
    for command in ("status", "jobs"):
        code, _, err = run(capsys, command, "--db", f"sqlite:///{tmp_path / 'empty.db'}")
        assert code == 2 and "no store there" in err
    assert listing(tmp_path) == {"empty.db": b""}


def test_reading_commands_leave_a_closed_store_byte_for_byte(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, db = started_with_a(tmp_path)
    db.release()  # the last connection: the WAL is checkpointed and removed
    before = listing(tmp_path)
    assert list(before) == ["s.db"]
    for args in (("status",), ("jobs",), ("show", "a"), ("status", "--json")):
        code, _, err = run(capsys, *args, "--db", url)
        assert code == 0, err
    assert listing(tmp_path) == before


def test_status_is_one_read_of_one_state(durable_url: StoreURL,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps taken between the reads of a status (a claim, an expiry, time passing) must not
    show: the leases, the counts and the clock they are judged by are of one state."""
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=4, clock="virtual", max_attempts=5)
    for t in "abcdef":
        db.submit(t, fn=NOOP)
    db.start()
    db.claim("w1", limit=2, lease=30)
    from refsched.durable import status as status_module

    moves = iter([lambda: db.tick(31), lambda: db.claim("w2", limit=4, lease=30),
                  lambda: db.tick(5), lambda: db.claim("w3", limit=4, lease=30)] * 3)
    real = DurableScheduler.__init__

    def opened(self: DurableScheduler, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        read = self._store.read

        def read_then_step(queries: Any) -> Any:
            rows = read(queries)
            next(moves, lambda: None)()
            return rows
        monkeypatch.setattr(self._store, "read", read_then_step)

    monkeypatch.setattr(DurableScheduler, "__init__", opened)
    code, out, err = run(capsys, "status", "--db", url, "--json")
    assert code == 0, err
    report = json.loads(out)
    running = report["by_state"].get("running", 0)
    assert running == len(report["live_leases"]) + len(report["awaiting_reclaim"])
    assert all(0 <= lease["seconds_left"] <= 30 for lease in report["live_leases"])
    assert status_module  # the module under test


def test_status_cuts_a_long_failure_and_json_keeps_it_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, db = started_with_a(tmp_path)
    (lease,) = db.claim("w")
    message = "x" * 5_000_000
    db.fail(lease, ValueError(message))
    code, out, _ = run(capsys, "status", "--db", url)
    assert code == 0 and len(out) < 1000 and "more characters" in out
    code, out, _ = run(capsys, "jobs", "--db", url)
    assert code == 0 and len(out) < 1000
    code, out, _ = run(capsys, "status", "--db", url, "--json")
    assert json.loads(out)["problems"][0]["cause"] == f"ValueError: {message}"
    code, out, _ = run(capsys, "show", "a", "--db", url, "--json")
    shown = json.loads(out)
    assert shown["error"] == f"ValueError: {message}" and "Traceback" not in shown["error"]


def test_jobs_show_retry_and_cancel(durable_url: StoreURL,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.submit("b", ["a"], fn=NOOP)
    db.submit("c", fn=NOOP)
    db.start()
    (first, second) = db.claim("w1", limit=2)
    try:
        raise OSError("disk on fire")
    except OSError as e:
        db.fail(first, e)
    db.complete(second, {"rows": 3})
    code, out, _ = run(capsys, "jobs", "--db", url, "--json")
    rows = {r["task"]: r for r in json.loads(out)}
    assert code == 0 and list(rows) == ["a", "b", "c"]
    assert (rows["a"]["state"], rows["a"]["attempt"], rows["a"]["error"]) == (
        "failed", 1, "OSError: disk on fire")
    assert rows["c"]["result"] == {"rows": 3} and rows["c"]["ran_seconds"] >= 0
    assert rows["b"]["blocked_by"] == "a"
    code, out, _ = run(capsys, "jobs", "--db", url, "--state", "blocked")
    assert code == 0 and "'b'" in out and "'c'" not in out
    code, out, _ = run(capsys, "show", "a", "--db", url)
    assert code == 0 and "Traceback (most recent call last)" in out and "disk on fire" in out
    code, _, err = run(capsys, "show", "zz", "--db", url)
    assert code == 1 and "unknown task" in err
    code, _, err = run(capsys, "retry", "c", "--db", url)
    assert code == 1 and "succeeded" in err
    code, out, _ = run(capsys, "retry", "a", "--db", url, "--json")
    assert code == 0 and json.loads(out) == {"task": "a", "generation": 2}
    assert db.state("b").value == "pending"
    code, out, _ = run(capsys, "cancel", "b", "--db", url)
    assert code == 0 and "cancelled" in out
    code, _, err = run(capsys, "cancel", "b", "--db", url)
    assert code == 1 and "nothing to cancel" in err


HOSTILE_DB = ["postgresql://[bad", "sqlite://", "sqlite:///{tmp}/none.db", "{tmp}",
              "{tmp}/foreign", "{tmp}/empty.db", "sqlite:///" + "x" * 5000, "mysql://h/db",
              "postgresql://u@h/db?schema=Bad", "postgresql://u@h/db?schema=a&schema=b", ""]


@pytest.mark.parametrize("command", [("status",), ("jobs",), ("show", "a"), ("retry", "a"),
                                     ("cancel", "a")])
@pytest.mark.parametrize("db", HOSTILE_DB, ids=range(len(HOSTILE_DB)))
def test_every_command_answers_a_bad_store_with_an_error_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...],
        db: str) -> None:
    (tmp_path / "foreign").write_text("not a database")
    (tmp_path / "empty.db").write_bytes(b"")
    before = listing(tmp_path)
    code, out, err = run(capsys, *command, "--db", db.format(tmp=tmp_path))
    assert code == 2 and err.startswith(f"refsched {command[0]}: ") and not out
    assert listing(tmp_path) == before


@pytest.mark.parametrize("args", [
    ("show",), ("retry",), ("show", "a", "b"), ("jobs", "--state", "done"), ("status",),
    ("status", "--db"), ("show", "\udcff"), ("show", "x" * 100_000), ("cancel", "")])
def test_every_command_answers_bad_arguments_with_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    DurableScheduler(url, max_concurrency=1).submit("a", fn=NOOP)
    full = [*args] if "--db" in args or args == ("status",) else [*args, "--db", url]
    try:
        code, _, err = run(capsys, *full)
    except SystemExit as e:  # argparse's usage error
        code, err = int(e.code or 0), capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err


def test_a_wrong_postgresql_detail_gets_the_servers_own_words(postgres_url: str) -> None:
    from urllib.parse import urlsplit, urlunsplit
    parts = urlsplit(postgres_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    cases = {
        urlunsplit(parts._replace(netloc=f"no_such_role@{host}")):
            'role "no_such_role" does not exist',
        urlunsplit(parts._replace(path="/no_such_database")):
            'database "no_such_database" does not exist',
        urlunsplit(parts._replace(query=f"{parts.query}&bogus_parameter=1".lstrip("&"))):
            "bogus_parameter",
    }
    for url, words in cases.items():
        with pytest.raises(StoreError) as caught:
            open_store(url, connect_timeout=5)
        assert words in str(caught.value) and "pool" not in str(caught.value), url


def test_a_mistyped_schema_is_no_store_there(postgres_url: str) -> None:
    sep = "&" if "?" in postgres_url else "?"
    DurableScheduler(f"{postgres_url}{sep}schema=real", max_concurrency=1).release()
    for options in ({}, {"read_only": True}):
        with pytest.raises(StoreError, match="no store"):
            DurableScheduler(f"{postgres_url}{sep}schema=raal", **options)
    import psycopg
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regnamespace('raal')").fetchone() == (None,)
