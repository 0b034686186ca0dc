"""The trace tools answer hostile input with a verdict or a usage error, never a traceback.

`refsched replay` and `refsched validate-trace` read files anyone may hand them: every way a
file can fail to be ITF traces is a usage error (exit 2, one line on stderr), and a file that
holds no trace is one too, since a check that checked nothing has not passed. A factory that
raises is the user's error for replay (2) and a crashed implementation for conform (3). Every
command that starts TLC kills TLC's whole process tree when it is interrupted or terminated,
even when only the parent gets the signal and TLC runs on another thread.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler
from refsched.cli import main
from refsched.verify import tlc as tlc_module
from refsched.verify.dag.recording import TraceRecorder
from refsched.verify.itf import TraceFormatError, iter_traces, read_traces, trace_to_itf
from refsched.verify.tlc import spec_dir

READERS = ("replay", "validate-trace")


def small_trace_doc() -> dict[str, Any]:
    recorder = TraceRecorder()
    s = TaskScheduler(1, recorder=recorder)
    s.submit("a")
    s.start()
    return trace_to_itf(recorder.trace(1, name="small"))


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``refsched ARGV`` in this process: its status, stdout and stderr (argparse's exit too)."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def reading(command: str, *paths: Path) -> list[str]:
    """The arguments that have ``command`` read ``paths`` (with replay's progress display,
    which writes nothing before the error off a terminal)."""
    return [command, *map(str, paths)]


def assert_usage_error(code: int, err: str, command: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith(f"refsched {command}: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], lines[0]


# -- files that are not ITF traces ------------------------------------------------------------

def _corrupt_deflate() -> bytes:
    data = bytearray(gzip.compress(b'{"states": []}\n' * 1000))
    for i in range(12, 40):  # inside the deflate stream: the header stays a gzip header
        data[i] ^= 0x5A
    return bytes(data)


def _nested(depth: int) -> bytes:
    return ("[" * depth + "]" * depth).encode()


def _state(value: Any) -> bytes:
    return json.dumps({"states": [{"nextSeq": value}]}).encode()


BAD_FILES: dict[str, tuple[str, Callable[[], bytes], str]] = {
    # id: (file name, its bytes, words the message must hold)
    "gzip-does-not-inflate": ("t.jsonl.gz", _corrupt_deflate, "not a readable gzip file"),
    "gzip-truncated": ("t.jsonl.gz", lambda: gzip.compress(b'{"states": []}\n' * 50)[:-30],
                       "not a readable gzip file"),
    "gzip-not-gzip": ("t.jsonl.gz", lambda: b"plain text", "not a readable gzip file"),
    "not-utf8": ("t.itf.json", lambda: b'\xff\xfe{"states": []}', "not UTF-8"),
    "gzipped-not-utf8": ("t.jsonl.gz", lambda: gzip.compress(b"\xff\xfe\n"), "not UTF-8"),
    "nested-too-deep": ("t.itf.json", lambda: b'{"states": ' + _nested(100_000) + b"}",
                        "nested too deep"),
    "value-nested-too-deep": ("t.itf.json", lambda: _state(json.loads(_nested(500))),
                              "nested more than"),
    "bigint-too-long": ("t.itf.json", lambda: _state({"#bigint": "7" * 5000}),
                        "5,000 digits"),
    "json-int-too-long": ("t.itf.json", lambda: b'{"states": [{"nextSeq": ' + b"7" * 5000
                          + b"}]}", "digits"),
    "bigint-not-digits": ("t.itf.json", lambda: _state({"#bigint": "12a"}), "#bigint"),
    "states-not-a-list": ("t.itf.json", lambda: b'{"states": {"0": {}}}', "no 'states' list"),
    "not-an-object": ("t.jsonl", lambda: b"[1, 2]\n", "no 'states' list"),
    "unknown-value-kind": ("t.itf.json", lambda: _state({"#weird": 1}),
                           "unknown ITF value kind '#weird'"),
    "set-of-a-number": ("t.itf.json", lambda: _state({"#set": 5}), "#set holds 5"),
    "tuple-of-a-number": ("t.itf.json", lambda: _state({"#tup": 3}), "#tup holds 3"),
    "map-of-a-single": ("t.itf.json", lambda: _state({"#map": [[1]]}), "[key, value] pair"),
    "map-key-twice": ("t.itf.json", lambda: _state({"#map": [["a", 1], ["a", 2]]}), "twice"),
    "float": ("t.itf.json", lambda: _state(1.5), "not an ITF value"),
    "meta-not-an-object": ("t.itf.json", lambda: b'{"#meta": "x", "states": [{}]}', "#meta"),
    "constants-not-an-object": ("t.itf.json",
                                lambda: b'{"#meta": {"constants": 5}, "states": [{}]}',
                                "constants"),
    "not-json": ("t.itf.json", lambda: b"{not json", "not JSON"),
}


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_file_that_is_not_itf_traces_is_a_usage_error(
        case: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, content, words = BAD_FILES[case]
    path = tmp_path / name
    path.write_bytes(content())
    code, _, err = run_main(reading(command, path), capsys)
    assert_usage_error(code, err, command, words)


@pytest.mark.parametrize("command", READERS)
def test_a_missing_file_and_a_directory_are_usage_errors(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path, words in ((tmp_path / "missing.jsonl", "No such file"),
                        (tmp_path, "a directory")):
        code, _, err = run_main(reading(command, path), capsys)
        assert_usage_error(code, err, command, str(path), words)


def test_ids_that_are_not_values_are_a_usage_error_for_validate_trace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = small_trace_doc()
    doc["#meta"]["constants"]["Tasks"] = [{"a": 1}]
    path = tmp_path / "t.itf.json"
    path.write_text(json.dumps(doc))
    code, _, err = run_main(["validate-trace", str(path)], capsys)
    assert_usage_error(code, err, "validate-trace", "all strings or all integers")


def test_integers_tlc_cannot_hold_are_a_usage_error_for_validate_trace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = small_trace_doc()
    doc["states"][-1]["nextSeq"] = {"#bigint": "9" * 40}
    path = tmp_path / "t.itf.json"
    path.write_text(json.dumps(doc))
    code, _, err = run_main(["validate-trace", str(path)], capsys)
    assert_usage_error(code, err, "validate-trace", "out of TLC's integer range")


# -- nothing to check is not a pass ----------------------------------------------------------

@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize(("name", "content"), [
    ("empty.jsonl", b""), ("blank.jsonl", b"  \n\n\t\n"), ("empty.itf.json", b""),
    ("empty.jsonl.gz", gzip.compress(b"", mtime=0)),
    ("blank.jsonl.gz", gzip.compress(b"\n\n", mtime=0)),
], ids=["empty", "blank", "empty-single", "empty-gzip", "blank-gzip"])
def test_a_file_without_traces_is_a_usage_error_not_a_pass(
        command: str, name: str, content: bytes, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run_main(reading(command, path), capsys)
    assert_usage_error(code, err, command, "no trace in the file")
    assert "no divergence" not in out + err and "0 of 0" not in out


# -- a factory that raises --------------------------------------------------------------------

def exploding_factory(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the factory exploded")


def exiting_factory(*args: Any, **kwargs: Any) -> Any:
    sys.exit(5)


@pytest.mark.parametrize(("factory", "error"), [
    ("exploding_factory", "RuntimeError: the factory exploded"),
    ("exiting_factory", "SystemExit: 5"),
])
def test_replay_with_a_factory_that_raises_is_a_usage_error_naming_it(
        factory: str, error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.itf.json"
    path.write_text(json.dumps(small_trace_doc()))
    spec = f"{__name__}:{factory}"
    code, _, err = run_main(["replay", "--quiet", "--impl", spec, str(path)], capsys)
    assert_usage_error(code, err, "replay", f"--impl {spec}", error)


@pytest.mark.parametrize(("factory", "error"), [
    ("exploding_factory", "RuntimeError: the factory exploded"),
    ("exiting_factory", "SystemExit: 5"),
])
def test_conform_with_a_factory_that_raises_reports_a_crash(
        factory: str, error: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{__name__}:{factory}"
    code, out, err = run_main(["conform", "-q", "--no-corpus", "--examples", "3",
                               "--impl", spec], capsys)
    assert code == 3, out + err
    assert "CRASHED" in out and f"the factory {spec} raised {error}" in out
    assert "Traceback" not in out + err


# -- TLC's process tree ends with the command ------------------------------------------------

FAKE_JAVA = """#!/bin/sh
# Stands for java: starts a child of its own, then waits, as a TLC that never finishes.
sleep 600 &
echo "$$ $!" >> "$REFSCHED_TEST_PIDS"
wait
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: only its parent has not read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the thread ended meanwhile
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _default_sigint() -> None:
    # A shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT
    # ignored: give the command Python's usual KeyboardInterrupt, as at a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "refsched", *argv], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


@pytest.fixture
def fake_java(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    java = tmp_path / "java"
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    pids = tmp_path / "pids"
    env = {**os.environ, "REFSCHED_JAVA": str(java), "REFSCHED_TEST_PIDS": str(pids)}
    yield env, pids
    if pids.exists():  # whatever the test found, leave nothing running
        for pid in map(int, pids.read_text().split()):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    trace = tmp_path / "t.itf.json"
    trace.write_text(json.dumps(small_trace_doc()))
    return {
        "explore": ["explore", "ready_cancel"],  # TLC runs on one of the explorer's threads
        "validate-trace": ["validate-trace", str(trace)],
        "verify": ["verify", "--system", "scheduler", "--skip-replay", "--examples", "0",
                   "--runs", "0", "--quiet"],
        "traces": ["traces", "--quiet", "-o", str(tmp_path / "corpus")],
    }


@pytest.mark.parametrize(("name", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("command", ["explore", "validate-trace", "verify", "traces"])
def test_a_signal_to_the_command_alone_kills_the_tlc_it_started(
        command: str, name: str, status: int, tmp_path: Path,
        fake_java: tuple[dict[str, str], Path]) -> None:
    signum = signal.Signals[name]
    env, pids = fake_java
    proc = start(_commands(tmp_path)[command], env, tmp_path)
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, 60,
                   "the command starts TLC")
        tree = [int(p) for p in pids.read_text().split()]
        os.kill(proc.pid, signum)  # the parent only: not its process group
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_until(lambda: not any(map(alive, tree)), 10, f"TLC's tree {tree} ends")
    assert proc.returncode == status, err
    assert "Traceback" not in err


def test_an_interrupt_as_tlc_starts_still_kills_its_tree(
        monkeypatch: pytest.MonkeyPatch, fake_java: tuple[dict[str, str], Path]) -> None:
    # SIGINT arrives the moment the process exists, before run_tlc has noted it: the
    # interrupt must wait until TLC is in the list that the unwinding kills.
    env, pids = fake_java
    monkeypatch.setenv("REFSCHED_JAVA", env["REFSCHED_JAVA"])
    monkeypatch.setenv("REFSCHED_TEST_PIDS", str(pids))
    real_popen = subprocess.Popen

    def popen_then_interrupt(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        process = real_popen(*args, **kwargs)
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, 60,
                   "the fake TLC starts")
        signal.raise_signal(signal.SIGINT)
        return process

    monkeypatch.setattr(tlc_module.subprocess, "Popen", popen_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        tlc_module.run_tlc("MCScheduler.cfg")
    tree = [int(p) for p in pids.read_text().split()]
    wait_until(lambda: not any(map(alive, tree)), 10, f"TLC's tree {tree} ends")
    assert not tlc_module._running


def test_sigint_to_explore_kills_a_real_tlc_running_on_another_thread(tmp_path: Path) -> None:
    # Three ids: a state graph TLC needs minutes for, so that only the kill can end it soon.
    spec = tmp_path / "spec"
    spec.mkdir()
    for source in spec_dir().iterdir():
        if source.suffix in (".tla", ".cfg"):
            (spec / source.name).write_text(source.read_text())
    config = spec / "MCSchedulerTraces.cfg"
    assert config.read_text().count("Tasks = {a, b}") == 1
    config.write_text(config.read_text().replace("Tasks = {a, b}", "Tasks = {a, b, c}"))
    proc = start(["explore", "ready_cancel"], {**os.environ, "REFSCHED_SPEC_DIR": str(spec)},
                 tmp_path)
    java: list[int] = []
    try:
        def tlc_started() -> bool:
            java[:] = [c for c in children(proc.pid) if "tlc2.TLC" in command_line(c)]
            return bool(java) or proc.poll() is not None

        wait_until(tlc_started, 60, "explore starts TLC")
        assert java, proc.communicate()
        # Past its first lines TLC prints once a minute: it would not even notice that its
        # output pipe is gone, and only the kill can end it soon.
        time.sleep(5.0)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        wait_until(lambda: not any(map(alive, java)), 5, f"java {java} ends")
    finally:
        for pid in java:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130 and "refsched: interrupted" in err, err


# -- TLC without a verdict: a timeout, a module it cannot parse ------------------------------

def test_a_tlc_past_its_timeout_is_killed_and_named_with_its_own_status(
        tmp_path: Path, fake_java: tuple[dict[str, str], Path],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env, pids = fake_java
    for name in ("REFSCHED_JAVA", "REFSCHED_TEST_PIDS"):
        monkeypatch.setenv(name, env[name])
    trace = tmp_path / "t.itf.json"
    trace.write_text(json.dumps(small_trace_doc()))
    started = time.monotonic()
    code, out, err = run_main(["validate-trace", "--timeout", "0.5", str(trace)], capsys)
    assert code == 3, out + err
    assert time.monotonic() - started < 30
    assert "small: no verdict: TLC did not finish within 0.5 s" in out
    assert out.rstrip().endswith("0 of 1 traces accepted by TLC, 1 without a verdict "
                                 "(TLC timed out)")
    tree = [int(p) for p in pids.read_text().split()]
    wait_until(lambda: not any(map(alive, tree)), 10, f"TLC's tree {tree} ends")


def test_a_module_tlc_cannot_parse_gives_no_verdict_and_the_bundle_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import refsched.verify.validate as validate

    stated = validate.trace_module

    def broken(trace: Any, module_name: str = "TraceCheck") -> tuple[str, str]:
        module, config = stated(trace, module_name)
        return module.replace("====\n", "(* never closed\n====\n"), config

    monkeypatch.setattr(validate, "trace_module", broken)
    bundle = tmp_path / "t.jsonl"
    line = json.dumps(small_trace_doc())
    bundle.write_text(line + "\n" + line.replace('"small"', '"second"') + "\n")
    code, out, err = run_main(["validate-trace", str(bundle)], capsys)
    assert code == 4, out + err
    lines = out.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines[:2]] == ["small", "second"]
    assert all("no verdict: internal error, not a verdict on the trace" in ln and
               "TLC could not parse" in ln for ln in lines[:2])
    assert lines[2] == "0 of 2 traces accepted by TLC, 2 without a verdict (TLC failed)"
    assert "TLC2 Version" not in out + err and "rejected" not in out


def test_a_bundle_with_one_trace_the_spec_cannot_state_runs_no_tlc(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = small_trace_doc()
    bad = small_trace_doc()
    bad["#meta"]["constants"]["MaxConcurrency"] = 0
    bundle = tmp_path / "t.jsonl"
    bundle.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code, out, err = run_main(["validate-trace", str(bundle)], capsys)
    assert_usage_error(code, err, "validate-trace", "MaxConcurrency")
    assert out == ""  # refused before TLC judged the first


def test_each_tlc_run_has_a_temporary_folder_of_its_own(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """TLC 2.15 copies Integers.tla and the other standard modules into java.io.tmpdir to
    parse them and deletes them after: runs sharing /tmp fail each other's parse."""
    from refsched.verify import tlc

    java = tmp_path / "java"
    java.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    java.chmod(0o755)
    monkeypatch.setenv("REFSCHED_JAVA", str(java))
    (tmp_path / "M.tla").write_text("")
    (tmp_path / "M.cfg").write_text("")
    folders = []
    for _ in range(2):
        args = tlc.run_tlc("M.cfg", "M.tla", directory=tmp_path).output.split()
        tmpdir = next(a for a in args if a.startswith("-Djava.io.tmpdir="))
        folders.append(Path(tmpdir.partition("=")[2]).parent)
        assert Path(args[args.index("-metadir") + 1]).parent == folders[-1]
    assert folders[0] != folders[1]
    assert not any(f.exists() for f in folders)


# -- a bundle read as far as it is needed -----------------------------------------------------

def _one_trace_line(name: str) -> str:
    recorder = TraceRecorder()
    scheduler = TaskScheduler(1, recorder=recorder)
    scheduler.submit("a")
    return json.dumps(trace_to_itf(recorder.trace(1, name=name)))


def test_iter_traces_parses_a_bundle_only_as_far_as_its_reader_goes(tmp_path: Path) -> None:
    path = tmp_path / "bundle.jsonl.gz"
    lines = [_one_trace_line("first"), _one_trace_line("second"), "not json at all"]
    path.write_bytes(gzip.compress("\n".join(lines).encode(), mtime=0))
    read = iter_traces(path)
    assert [next(read).name, next(read).name] == ["first", "second"]
    with pytest.raises(TraceFormatError, match="line 3: not JSON"):
        next(read)
    with pytest.raises(TraceFormatError, match="line 3"):  # the whole read says the same
        read_traces(path)


@pytest.mark.parametrize("content", [b"", b"\n \n"], ids=["empty", "blank"])
def test_iter_traces_of_a_file_without_traces_raises_rather_than_ending(
        tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "none.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match="no trace in the file"):
        list(iter_traces(path))
    with pytest.raises(TraceFormatError, match="a directory"):
        list(iter_traces(tmp_path))
