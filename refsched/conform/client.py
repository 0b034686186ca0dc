"""The oracle's side of the conformance protocol: implementations as scheduler factories.

An :class:`Implementation` hands out fresh schedulers with the ``TaskScheduler`` API. A
:class:`ProtocolImplementation` runs a program that speaks the protocol of
``docs/conformance.md`` and turns each call into a request; an
:class:`InProcessImplementation` wraps a Python factory. Whatever the program does (dies, hangs,
writes garbage, floods its output, leaves children behind), the caller gets either an answer or
a :class:`HarnessError` naming the verdict, and no process outlives :meth:`close`.
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Final, Protocol, Self, TypeVar

from refsched.conform import protocol
from refsched.conform.dag import wire as dag_wire
from refsched.conform.protocol import ForeignError, Unsupported, WireError
from refsched.conform.wire import SYSTEMS
from refsched.conform.wire import get as get_wire
from refsched.loading import load_factory as load_factory
from refsched.profile import Profile, ProfileError, full_profile, profile_from_hello
from refsched.types import Claim, CloseReport, ParentOutcome, Provenance, Snapshot, TaskState

__all__ = [
    "ForeignError",
    "HarnessError",
    "Implementation",
    "ImplementationCrashed",
    "ImplementationTimedOut",
    "InProcessImplementation",
    "ProtocolImplementation",
    "ProtocolScheduler",
    "ProtocolViolation",
    "Unsupported",
    "load_factory",
]

STDERR_LINES: Final = 20  # lines of the implementation's stderr kept for a verdict
_STDERR_WIDTH: Final = 500  # characters kept of each of those lines
_CHUNK: Final = 1 << 16
# After bye, how long a well-behaved implementation gets to exit on its own, then how long it
# gets after SIGTERM before its whole process group is killed.
_BYE_GRACE: Final = 2.0
_TERM_GRACE: Final = 1.0
# After stdout closed: how long to wait for the exit status and the last lines of stderr.
_EXIT_GRACE: Final = 1.0


class Implementation(Protocol):
    """A scheduler implementation under test: a named factory of fresh schedulers."""

    @property
    def name(self) -> str:
        """What the implementation calls itself."""
        ...

    @property
    def profile(self) -> Profile:
        """The parts of the contract it keeps."""
        ...

    @property
    def system(self) -> str:
        """The system it implements: ``scheduler``, ``timer``, ``pool`` or ``durable``."""
        ...

    def new(self, max_concurrency: int) -> Any:
        """A fresh scheduler with the ``TaskScheduler`` API."""
        ...

    def remote(self) -> Callable[..., Any]:
        """A factory of fresh instances, called as the system's checks call one."""
        ...

    def close(self) -> None:
        """Release what the implementation holds (its process, if it has one)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


_T = TypeVar("_T")

# ------------------------------------------------------------------ verdicts

class HarnessError(Exception):
    """The implementation did not answer within the protocol; ``verdict`` says how.

    ``stderr_tail`` holds the last lines the implementation wrote to its stderr ('' if none).
    """

    verdict: str = "harness error"

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        if not self.stderr_tail:
            return self.message
        return f"{self.message}\nlast lines of its stderr:\n{self.stderr_tail}"


class ImplementationCrashed(HarnessError):
    """The implementation exited, closed its stdout, or could not be started.

    ``returncode`` is its exit status (negative: killed by that signal), None if still running.
    """

    verdict = "crashed"

    def __init__(self, message: str, stderr_tail: str = "",
                 returncode: int | None = None) -> None:
        super().__init__(message, stderr_tail)
        self.returncode = returncode


class ImplementationTimedOut(HarnessError):
    """No complete answer line came within the timeout."""

    verdict = "timed out"


class ProtocolViolation(HarnessError):
    """An answer that breaks the protocol: not JSON, wrong id, wrong shape, too long, ..."""

    verdict = "protocol violation"


_E = TypeVar("_E", bound=HarnessError)

# ------------------------------------------------------------------ the process

def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group; nothing if it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "closed its stdout but is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


class _StderrTail:
    """Reads a stream to its end on a thread, keeping only its last lines.

    Reading all of it keeps a chatty implementation from blocking on a full pipe; keeping
    the tail bounds the memory it takes.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._partial = b""
        self._lock = threading.Lock()  # guards _lines and _partial
        self._thread = threading.Thread(target=self._run, name="refsched-conform-stderr",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._stream.fileno()
        while True:
            try:
                chunk = os.read(fd, _CHUNK)
            except OSError:
                chunk = b""
            with self._lock:
                if not chunk:
                    if self._partial:
                        self._lines.append(self._decode(self._partial))
                        self._partial = b""
                    return
                *complete, rest = (self._partial + chunk).split(b"\n")
                self._lines.extend(self._decode(line) for line in complete[-STDERR_LINES:])
                self._partial = rest[:_STDERR_WIDTH * 4]

    @staticmethod
    def _decode(line: bytes) -> str:
        text = line[:_STDERR_WIDTH * 4].decode("utf-8", "replace").rstrip("\r")
        return text if len(text) <= _STDERR_WIDTH else text[:_STDERR_WIDTH] + "..."

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the end of the stream; True once it was read to its end."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def text(self) -> str:
        with self._lock:
            lines = list(self._lines)
            if self._partial:
                lines.append(self._decode(self._partial))
        return "\n".join(lines[-STDERR_LINES:])


class ProtocolImplementation:
    """An implementation in another process, driven over the JSON-lines protocol.

    ``argv`` starts it (in a session of its own, so that it and every child it starts can be
    killed together). :meth:`open` (or entering the ``with`` block) exchanges the hello; then
    :attr:`name` and :attr:`profile` are known and :meth:`new` gives schedulers. Every request
    waits at most ``timeout`` seconds for its answer line, and an answer line longer than
    ``max_line`` bytes is a :class:`ProtocolViolation`. After the first :class:`HarnessError`
    of the framing (a crash, a timeout, a line out of step) the implementation is broken: every
    later request raises that error again. A result of the wrong shape in a well-framed answer
    raises a :class:`ProtocolViolation` and leaves the lines in step.
    """

    def __init__(self, argv: Sequence[str], *, timeout: float = 10.0, max_line: int = 1 << 20,
                 env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                 system: str | None = None) -> None:
        if isinstance(argv, str):
            raise TypeError("argv is a sequence of arguments, not one string")
        if system is not None and system not in SYSTEMS:
            raise ValueError(f"no system {system!r}; the systems are {', '.join(SYSTEMS)}")
        # the system the hello must declare (None: any), and the one it declared
        self.expected_system = system
        self._system: str | None = None
        self.argv = list(argv)
        self.timeout = timeout
        self.max_line = max_line
        self.env = None if env is None else dict(env)
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: _StderrTail | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._selector: selectors.BaseSelector | None = None
        self._buffer = bytearray()  # stdout read but not yet returned as a line
        self._scanned = 0  # _buffer[:_scanned] holds no newline
        self._next_id = 0
        # a request went out and its answer was not read (the caller was interrupted): the
        # next line would answer the wrong request, so bye is not worth sending
        self._in_flight = False
        self._broken: HarnessError | None = None
        self._closed = False
        self._name: str | None = None
        self._profile: Any = None  # the system's profile class
        self._instance = 0  # how many ``new`` requests succeeded: the current instance

    # -------------------------------------------------------------- life cycle

    @property
    def name(self) -> str:
        """The name the implementation gave in its hello."""
        return self._opened(self._name)

    @property
    def profile(self) -> Any:
        """The capability profile the implementation declared in its hello (a ``Profile``,
        ``TimerProfile`` or ``WholeProfile``, as its system has)."""
        return self._opened(self._profile)

    @property
    def system(self) -> str:
        """The system the implementation declared in its hello (``scheduler`` unless said)."""
        return self._opened(self._system)

    def _opened(self, value: _T | None) -> _T:
        """``value``, read from the hello: None until the implementation is opened."""
        if value is None:
            raise RuntimeError(f"{self.argv!r}: not opened yet")
        return value

    @property
    def instance(self) -> int:
        """How many ``new`` requests succeeded: the number of the current instance."""
        return self._instance

    def new_instance(self, **args: Any) -> int:
        """Send ``new`` with ``args``; the number of the instance it started.

        Errors: whatever the implementation answers, or a :class:`HarnessError`.
        """
        self._result("new", dag_wire.null_from_json, self.request("new", **args))
        self._instance += 1
        return self._instance

    def remote(self) -> Callable[..., Any]:
        """A factory of instances of the declared system over this connection, called as the
        system's checks call its implementation's factory (the TaskScheduler's: :meth:`new`)."""
        if self.system == "scheduler":
            return self.new
        remote = get_wire(self.system).remote

        def make(*args: Any, **kwargs: Any) -> Any:
            return remote(self, *args, **kwargs)

        # a pool in another process takes its workers' moves itself (pool_driver.driven_pool)
        make.drives_steps = getattr(remote, "drives_steps", False)  # type: ignore[attr-defined]
        return make

    def decoded(self, op: str, decode: Callable[[], _T]) -> _T:
        """``decode()``, a malformed result becoming a :class:`ProtocolViolation`."""
        try:
            return decode()
        except WireError as e:
            raise self._malformed(str(e)) from None

    @property
    def pid(self) -> int | None:
        """The process id of the implementation (the leader of its process group)."""
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The implementation's exit status once it has been reaped, else None."""
        return None if self._proc is None else self._proc.returncode

    def open(self) -> Self:
        """Start the implementation and exchange the hello.

        Errors: it cannot be started, or exits -> :class:`ImplementationCrashed`; no hello
        answer in time -> :class:`ImplementationTimedOut`; a malformed hello, another protocol
        version, a malformed profile -> :class:`ProtocolViolation`. On error it is closed.
        """
        if self._proc is not None:
            raise RuntimeError(f"{self.argv!r}: already opened")
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.env, cwd=self.cwd, start_new_session=True)
        except OSError as e:
            raise ImplementationCrashed(f"{self.argv!r} could not be started: {e}") from e
        # Until close() has run, a garbage-collected object or an interpreter exit still kills
        # the process group.
        self._finalizer = weakref.finalize(self, _kill_group, self._proc.pid)
        try:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            assert self._proc.stderr is not None
            self._stderr = _StderrTail(self._proc.stderr)
            os.set_blocking(self._proc.stdin.fileno(), False)
            os.set_blocking(self._proc.stdout.fileno(), False)
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._proc.stdout.fileno(), selectors.EVENT_READ)
            self._hello()
        except BaseException:
            self.close()
            raise
        return self

    def _hello(self) -> None:
        try:
            answer = self.request("hello", protocol=protocol.PROTOCOL_VERSION)
        except HarnessError:
            raise
        except Exception as e:
            raise self._violation(f"hello answered with an error: {e!r}") from e
        if not isinstance(answer, dict):
            raise self._violation(f"hello answers an object, not {answer!r}")
        name, version = answer.get("name"), answer.get("protocol")
        if not isinstance(name, str):
            raise self._violation(f"hello: name must be a string, not {name!r}")
        if type(version) is not int or version != protocol.PROTOCOL_VERSION:
            raise self._violation(f"hello: speaks protocol {version!r}, the oracle speaks "
                                  f"{protocol.PROTOCOL_VERSION}")
        system = answer.get("system", "scheduler")
        if system not in SYSTEMS:
            raise self._violation(f"hello: system must be one of {', '.join(SYSTEMS)}, not "
                                  f"{system!r}")
        if self.expected_system is not None and system != self.expected_system:
            raise self._violation(f"hello: the implementation is a {system}, the oracle was "
                                  f"asked to check a {self.expected_system}")
        try:
            profile = profile_from_hello(system, answer.get("profile", {}))
        except ProfileError as e:
            raise self._violation(f"hello: bad profile: {e}") from e
        self._name, self._profile, self._system = name, profile, system

    def __enter__(self) -> Self:
        return self if self._proc is not None else self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Say bye, let the implementation exit, then end its whole process group.

        bye is sent only while it still answers; it gets a moment to exit, then SIGTERM, a
        moment more, then SIGKILL for the group. Safe to call twice; never raises a verdict.
        """
        if self._closed or self._proc is None:
            self._closed = True
            return
        self._closed = True
        proc = self._proc
        try:
            if self._broken is None and not self._in_flight and proc.poll() is None:
                with contextlib.suppress(Exception):  # a verdict now changes nothing
                    self._send_and_wait("bye", {}, deadline=time.monotonic() + _BYE_GRACE)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_BYE_GRACE)
        finally:
            self._end_group(proc)

    def _end_group(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM, then SIGKILL, the process group; reap the leader; release the pipes."""
        try:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_TERM_GRACE)
            # Children may outlive the leader (and hold its pipes open): kill the whole group
            # even when the leader is gone.
            _kill_group(proc.pid)
            proc.wait()
        finally:
            if proc.returncode is None:
                # interrupted before the leader was reaped: at least nothing keeps running, and
                # the finalizer stays armed (an unreaped leader keeps its group id from reuse)
                _kill_group(proc.pid)
            elif self._finalizer is not None:
                self._finalizer.detach()
            if self._selector is not None:
                self._selector.close()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            if self._stderr is not None and self._stderr.wait(_EXIT_GRACE) and proc.stderr:
                proc.stderr.close()

    # -------------------------------------------------------------- requests

    def new(self, max_concurrency: int) -> ProtocolScheduler:
        """Start a fresh scheduler instance in the implementation (``new``); it replaces the last.

        Errors: whatever the implementation answers (``InvalidArgumentError`` for a negative
        ``max_concurrency``), or a :class:`HarnessError`.
        """
        self._result("new", dag_wire.null_from_json,
                     self.request("new", max_concurrency=max_concurrency))
        self._instance += 1
        return ProtocolScheduler(self, self._instance, max_concurrency)

    def request(self, op: str, **args: Any) -> Any:
        """Send one request and return its ``ok`` result as JSON, or raise its error.

        Errors: an error answer -> the exception :func:`protocol.error_from_json` gives; the
        implementation misbehaves -> a :class:`HarnessError`; an argument JSON cannot carry ->
        ``TypeError``.
        """
        if self._broken is not None:
            raise self._broken
        if self._closed or self._proc is None:
            raise RuntimeError(f"{self.argv!r}: not open")
        response = self._send_and_wait(op, args, deadline=time.monotonic() + self.timeout)
        if "ok" in response:
            return response["ok"]
        try:
            error = protocol.error_from_json(response["error"])
        except WireError as e:
            raise self._malformed(f"{op}: {e}") from None
        if isinstance(error, ForeignError) and self._system not in (None, "scheduler"):
            own = get_wire(self._system).errors.get(error.type_name)
            if own is not None:  # an error of the system's own (a pool's StepRefused)
                raise own(error.message)
        if isinstance(error, ForeignError) and error.type_name == "BadRequest":
            raise self._violation(f"{op}: the implementation could not read the request: "
                                  f"{error.message}")
        raise error

    def _result(self, op: str, convert: Callable[[str, Any], _T], value: Any) -> _T:
        """``convert(op, value)``, a malformed result becoming a :class:`ProtocolViolation`."""
        try:
            return convert(op, value)
        except WireError as e:
            raise self._malformed(str(e)) from None

    def _send_and_wait(self, op: str, args: Mapping[str, Any], deadline: float
                       ) -> dict[str, Any]:
        request_id = self._next_id
        self._next_id += 1
        try:
            line = protocol.encode_line(protocol.request(request_id, op, **args))
        except (TypeError, ValueError) as e:
            raise TypeError(f"{op}: an argument cannot be sent as JSON: {e}") from None
        self._in_flight = True
        self._write(line.encode("utf-8"), op, deadline)
        raw = self._read_line(op, deadline)
        self._in_flight = False
        try:
            response = protocol.decode_line(raw)
        except WireError as e:
            raise self._violation(f"{op}: {e}") from None
        if type(response.get("id")) is not int or response["id"] != request_id:
            raise self._violation(f"{op}: answered id {response.get('id')!r}, expected "
                                  f"{request_id} (answers must come in order, one per request)")
        if set(response) not in ({"id", "ok"}, {"id", "error"}):
            raise self._violation(
                f"{op}: an answer has id and exactly one of ok or error, and nothing else: "
                f"{sorted(response)}")
        return response

    def _write(self, data: bytes, op: str, deadline: float) -> None:
        # The pipe is non-blocking: an implementation that stops reading cannot hang us.
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        fd = proc.stdin.fileno()
        view = memoryview(data)
        with selectors.DefaultSelector() as writable:
            writable.register(fd, selectors.EVENT_WRITE)
            while view:
                try:
                    sent = os.write(fd, view)
                    view = view[sent:]
                    continue
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    raise self._crashed(op, "it stopped reading its stdin") from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timed_out(f"{op}: it did not read the request within "
                                          f"{self.timeout:g}s")
                writable.select(left)

    def _read_line(self, op: str, deadline: float) -> bytes:
        """The next line of stdout, without its newline."""
        assert self._proc is not None and self._proc.stdout is not None
        assert self._selector is not None
        fd = self._proc.stdout.fileno()
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", self._scanned)
            if end >= 0:
                if end > self.max_line:
                    raise self._violation(f"{op}: an answer line of {end} bytes, longer than "
                                          f"max_line ({self.max_line})")
                line = bytes(buffer[:end])
                del buffer[:end + 1]
                self._scanned = 0
                return line
            self._scanned = len(buffer)
            if len(buffer) > self.max_line:
                # Reading stops here: a line without end cannot take unbounded memory.
                raise self._violation(f"{op}: more than max_line ({self.max_line}) bytes "
                                      f"without a newline")
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out(f"{op}: no answer within {self.timeout:g}s")
            if not self._selector.select(left):
                continue
            try:
                chunk = os.read(fd, _CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                partial = f" after a partial line {bytes(buffer[:80])!r}" if buffer else ""
                raise self._crashed(op, f"its stdout ended{partial}")
            buffer += chunk

    # -------------------------------------------------------------- verdicts

    def _verdict(self, error: _E) -> _E:
        """Record the first verdict: the implementation is broken from now on."""
        if self._broken is None:
            self._broken = error
        return error

    def _tail(self) -> str:
        return "" if self._stderr is None else self._stderr.text()

    def _violation(self, message: str) -> ProtocolViolation:
        return self._verdict(ProtocolViolation(message, self._tail()))

    def _malformed(self, message: str) -> ProtocolViolation:
        """A well-framed answer whose result has the wrong shape: a verdict for whoever lets
        it through, but the lines are still in step, so the implementation is not broken. A
        check that already holds a divergence (a refusal answered with success, whose
        snapshot is then malformed) reads the state for its picture without losing the
        implementation, and goes on shrinking."""
        return ProtocolViolation(message, self._tail())

    def _timed_out(self, message: str) -> ImplementationTimedOut:
        return self._verdict(ImplementationTimedOut(message, self._tail()))

    def _crashed(self, op: str, what: str) -> ImplementationCrashed:
        """A crash verdict, once the exit status and the last of stderr had a moment to come."""
        proc = self._proc
        assert proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(_EXIT_GRACE)
        if self._stderr is not None and proc.returncode is not None:
            self._stderr.wait(_EXIT_GRACE)  # the last lines it wrote before exiting
        return self._verdict(ImplementationCrashed(
            f"{op}: {what}; it {_describe_exit(proc.returncode)}", self._tail(),
            proc.returncode))


# ------------------------------------------------------------------ the scheduler over the wire

def _task(call: str, task_id: Hashable) -> str:
    if not isinstance(task_id, str):
        raise TypeError(f"{call}: task ids on the wire are strings, not {task_id!r}")
    return task_id


def _edges(call: str, task_id: Hashable, deps: Iterable[Hashable],
           optional: Iterable[Hashable]) -> dict[str, list[str]]:
    """A call's ``deps`` and, when it names an id, its ``optional``, as the request carries
    them."""
    edges = {}
    for name, ids in (("deps", deps), ("optional", optional)):
        if isinstance(ids, str):
            raise TypeError(f"{call}({task_id!r}): {name} is a list of task ids, not a string")
        edges[name] = [_task(f"{call}({task_id!r})", d) for d in ids]
    if not edges["optional"]:
        del edges["optional"]
    return edges


def _notes(actor: str | None, reason: str | None) -> dict[str, str]:
    """A call's ``actor`` and ``reason``, sent only when given, so that an implementation
    without provenance gets the requests it always got."""
    return {name: value for name, value in (("actor", actor), ("reason", reason))
            if value is not None}


class ProtocolScheduler:
    """One scheduler instance inside a :class:`ProtocolImplementation`, with the TaskScheduler API.

    Each call is one request. An error answer raises the refsched exception of that type name
    (or :class:`ForeignError`, :class:`Unsupported`); a misbehaving implementation raises a
    :class:`HarnessError`. Task ids are strings; any other id is a ``TypeError``.
    """

    def __init__(self, implementation: ProtocolImplementation, instance: int,
                 max_concurrency: int) -> None:
        self._impl = implementation
        self._instance = instance
        self._max_concurrency = max_concurrency

    @property
    def max_concurrency(self) -> int:
        """The ``max_concurrency`` it was made with."""
        return self._max_concurrency

    def _call(self, op: str, convert: Callable[[str, Any], _T], **args: Any) -> _T:
        impl = self._impl
        if impl._instance != self._instance:
            raise RuntimeError(f"{op}: this scheduler was replaced by a later new()")
        return impl._result(op, convert, impl.request(op, **args))

    def submit(self, task_id: Hashable, deps: Iterable[Hashable] = (),
               fn: Callable[..., Any] | None = None,
               optional: Iterable[Hashable] = ()) -> int:
        """Submit a version of ``task_id`` (``fn`` stays here: a function cannot be sent);
        ``optional`` is sent only when it names an id, so that an implementation without
        optional edges gets the requests it always got."""
        edges = _edges("submit", task_id, deps, optional)
        return self._call("submit", dag_wire.generation_from_json,
                          task=_task("submit", task_id), **edges)

    def add_deps(self, task_id: Hashable, deps: Iterable[Hashable] = (),
                 optional: Iterable[Hashable] = ()) -> TaskState:
        """Make the pending version of ``task_id`` depend on ``deps`` and ``optional`` too."""
        edges = _edges("add_deps", task_id, deps, optional)
        return self._call("add_deps", dag_wire.state_from_json,
                          task=_task("add_deps", task_id), **edges)

    def input_summary(self, task_id: Hashable) -> dict[Hashable, ParentOutcome]:
        """How each optional dependency of the current version of ``task_id`` ended."""
        return self._call("input_summary", dag_wire.input_summary_from_json,
                          task=_task("input_summary", task_id))

    def start(self) -> None:
        """Seal the initial graph and allow claims."""
        self._call("start", dag_wire.null_from_json)

    def ready(self, limit: int | None = None) -> list[Claim]:
        """Claim up to ``limit`` ready versions (spec: Claim); each claim's ``fn`` is None."""
        return self._call("ready", dag_wire.claims_from_json,
                          limit=limit)

    def complete(self, task_id: Hashable, generation: int, result: Any = None) -> TaskState:
        """Report the version ``generation`` of ``task_id`` succeeded (``result`` stays here)."""
        return self._call("complete", dag_wire.state_from_json,
                          task=_task("complete", task_id), generation=generation)

    def fail(self, task_id: Hashable, generation: int, error: Any = None, *,
             actor: str | None = None, reason: str | None = None) -> TaskState:
        """Report the version ``generation`` of ``task_id`` failed (``error`` stays here)."""
        return self._call("fail", dag_wire.state_from_json,
                          task=_task("fail", task_id), generation=generation,
                          **_notes(actor, reason))

    def cancel(self, task_id: Hashable, generation: int | None = None, *,
               actor: str | None = None, reason: str | None = None) -> TaskState:
        """Cancel the current version of ``task_id``, or ask a running one to stop."""
        return self._call("cancel", dag_wire.state_from_json,
                          task=_task("cancel", task_id), generation=generation,
                          **_notes(actor, reason))

    def acknowledge_cancel(self, task_id: Hashable, generation: int, *,
                           actor: str | None = None, reason: str | None = None) -> TaskState:
        """Report the running version ``generation`` of ``task_id`` stopped (cancelled)."""
        return self._call("acknowledge_cancel", dag_wire.state_from_json,
                          task=_task("acknowledge_cancel", task_id), generation=generation,
                          **_notes(actor, reason))

    def provenance(self, task_id: Hashable) -> Provenance | None:
        """How the current version of ``task_id`` came to be blocked or cancelled (its time
        is not compared: none travels), or None."""
        return self._call("provenance", dag_wire.provenance_from_json,
                          task=_task("provenance", task_id))

    def retry(self, task_id: Hashable) -> int:
        """Resubmit a failed, cancelled or blocked task with its blocked descendants."""
        return self._call("retry", dag_wire.generation_from_json,
                          task=_task("retry", task_id))

    def close(self, cancel_pending: bool = True) -> CloseReport:
        """Close the scheduler and report every id by the state of its current version."""
        return self._call("close", dag_wire.close_report_from_json,
                          cancel_pending=cancel_pending)

    def snapshot(self) -> Snapshot:
        """Return the spec variables as the implementation reports them."""
        return self._call("snapshot", dag_wire.snapshot_from_json)

    def state(self, task_id: Hashable) -> TaskState:
        """Return the state of the current version of ``task_id``."""
        return self._call("state", dag_wire.state_from_json,
                          task=_task("state", task_id))

    def check_invariants(self) -> None:
        """Do nothing: an implementation's internals are not visible over the wire."""


# ------------------------------------------------------------------ Python factories

class InProcessImplementation:
    """A Python factory as an :class:`Implementation`: for the TaskScheduler,
    ``max_concurrency -> scheduler``; for another system, called as that system's checks call
    its production class (``TimerScheduler``, ``WorkStealingPool``, ``DurableScheduler``)."""

    def __init__(self, factory: Callable[..., Any], *, profile: Any = None,
                 name: str | None = None, system: str = "scheduler") -> None:
        if system not in SYSTEMS:
            raise ValueError(f"no system {system!r}; the systems are {', '.join(SYSTEMS)}")
        self.factory = factory
        self.profile = full_profile(system) if profile is None else profile
        self.name = name if name is not None else _factory_name(factory)
        self.system = system

    def remote(self) -> Callable[..., Any]:
        """The factory itself."""
        return self.factory

    def new(self, max_concurrency: int) -> Any:
        """``factory(max_concurrency)``."""
        return self.factory(max_concurrency)

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _factory_name(factory: Callable[[int], Any]) -> str:
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    return f"{module}:{qualname}" if module and qualname else repr(factory)


