"""Runner: runs the functions of a TaskScheduler's tasks on worker threads, or through an Executor.

The Runner is a client of ``spec/Scheduler.tla``: it drives one :class:`TaskScheduler` whose
``MaxConcurrency`` is ``max_workers``. Worker threads take ``Claim`` (``ready()``), run the claimed
function and report ``Complete`` / ``Fail`` / ``AcknowledgeCancel``; ``submit``, ``start``,
``cancel``, ``retry`` and ``close`` are the actions of the same names. Each version's outcome
reaches its :class:`TaskFuture` through the scheduler's endings (``pop_endings()``), so a version
that ends by propagation (blocked) or by ``close()`` (cancelled) is resolved like one that ran.

Design:
- One runner lock serialises every scheduler action with the ``pop_endings()`` that follows it,
  so each ending is matched to the future of exactly the version that ended.
- Whoever changes the scheduler (a worker reporting, ``submit``, ``start``, ``retry``, ...) claims
  everything claimable right away (``ready()`` is bounded by the free slots). A worker that just
  reported takes the first claim itself: reporting one version and claiming the next is one
  acquisition of the runner lock. Every other claim is handed to an idle worker through that
  worker's own queue (a ``SimpleQueue``: the put is the wake-up, and a claim put before the
  worker blocks is not lost), or, when no worker is idle, left in a shared queue that a worker
  looks at before it goes idle. Nothing polls.
- Futures are set, and user callbacks run, outside the runner lock; ``wait()`` and ``close()``
  also wait for those settlements (``_resolving``), so a future is resolved when they return.
- User code never costs a worker: whatever a function raises (``BaseException`` included) is its
  version's failure, and whatever a done-callback raises is logged on the ``concurrent.futures``
  logger, as ``Future`` logs an ``Exception``, and the next callback runs. If the runner's own
  machinery fails on a worker (a recorder that raises, a bug), the runner stops instead of
  losing that worker silently: see :meth:`Runner._break_locked`.
"""

from __future__ import annotations

import concurrent.futures._base as _futures
import contextlib
import threading
import types
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import CancelledError, Executor, Future
from concurrent.futures import ThreadPoolExecutor as _ThreadPoolExecutor
from typing import Any, Final

from refsched import runners, sync
from refsched.dag.scheduler import Recorder, TaskScheduler
from refsched.dag.signals import task_type_of
from refsched.errors import (
    BlockedError,
    Cancelled,
    InvalidArgumentError,
    SchedulerError,
    StaleGenerationError,
    UnknownTaskError,
)
from refsched.runners import CancelToken, SchedulerRunner, worker_count
from refsched.types import Claim, CloseReport, TaskInfo, TaskState
from refsched.values import shown as _r

__all__ = ["CancelToken", "Runner", "TaskFuture"]

# The settlement kinds and their applier as module globals: the hot paths read them
# with one lookup.
_RESULT, _ERROR, _CANCEL = runners.RESULT, runners.ERROR, runners.CANCEL
_apply = runners.apply_settlements

_RUNNING = TaskState.RUNNING
_SUCCEEDED = TaskState.SUCCEEDED
_FAILED = TaskState.FAILED
_BLOCKED = TaskState.BLOCKED

# A future, how to resolve it, the value: decided under the runner lock, applied outside it.
_Settlement = tuple["TaskFuture", int, Any]
# A claimed version, how it ended (_RESULT, _ERROR or _CANCEL = AcknowledgeCancel), the value.
_Outcome = tuple[Claim, int, Any]
_Key = tuple[Hashable, int]  # (task_id, generation): one version

_NO_IDS: Final[tuple[()]] = ()  # submit()'s default optional deps


def _listed(ids: Iterable[Hashable]) -> Iterable[Hashable]:
    """A caller's iterable of ids as a tuple, iterated (user code) before the runner lock is
    taken; what is not an iterable, or is a str or bytes, goes as it is, for the scheduler to
    refuse. An error raised while iterating is the caller's, and leaves nothing changed."""
    if isinstance(ids, (tuple, str, bytes)):
        return ids
    try:
        iterator = iter(ids)
    except TypeError:
        return ids
    return tuple(iterator)


class TaskFuture(runners.RunnerFuture):
    """The outcome of one version of a task: a ``concurrent.futures.Future``.

    ``result()`` is the function's return value. A failed version raises the function's exception,
    a blocked one :class:`refsched.BlockedError` (``blocked_by`` names the dependency), a cancelled
    one — by ``cancel()``, by ``close()``, or because a resubmission replaced the version —
    ``concurrent.futures.CancelledError``; if the runner stopped on a failure of its own before
    the version's outcome was settled, :class:`refsched.SchedulerError` (its ``__cause__`` is that
    failure). A done-callback's error, whatever it is, is logged on the ``concurrent.futures``
    logger and the next callback runs: it never reaches the thread that settled the future.
    """

    def __init__(self, runner: Runner, task_id: Hashable, generation: int) -> None:
        # Future.__init__ would build a Condition (and its RLock) per future, the largest cost
        # of a submit; the futures of one runner share the runner's instead. A notify then wakes
        # waiters of other futures too, so result() and exception() wait in a loop (below).
        # One shared condition, not several: concurrent.futures.wait() takes the conditions of
        # all its futures in list order, which would deadlock two waiters over shared stripes.
        self._condition = runner._futures_condition
        self._state = _futures.PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks = runners.NO_CALLBACKS  # most get none: no list until one comes
        self.task_id = task_id
        self.generation = generation  # >= 1 once submit() has it
        self._runner = runner
        self._settled = False
        self._started = False
        # While this is the future of its task's current version it is also the runner's record
        # of that version (``Runner._tasks``), one object per version; under the runner lock:
        self._live = True  # the version is pending, ready or running (not terminal)
        self._blocked_by: Hashable | None = None  # set while the version is blocked

    def result(self, timeout: float | None = None) -> Any:
        """The function's return value; waits up to ``timeout`` seconds (None: no limit)."""
        self._wait_done(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The function's exception, or None; waits up to ``timeout`` seconds (None: no limit)."""
        self._wait_done(timeout)
        return super().exception(0)

    def _wait_done(self, timeout: float | None) -> None:
        """Wait on the shared condition until this future is done or ``timeout`` passes."""
        if timeout is not None:
            # As Future's own result() does: a NaN or negative timeout does not wait (wait_for
            # would spin on a NaN forever), and one longer than a lock can time has no limit.
            if not timeout > 0:
                timeout = 0
            elif timeout > runners.LONGEST_TIMEOUT:
                timeout = None
        runner = self._runner
        with self._condition:
            if self._state in runners.FUTURE_DONE:
                return
            # Counted, so that settling a future notifies only when some thread waits.
            runner._futures_waiting += 1
            try:
                self._condition.wait_for(self._is_done, timeout)
            finally:
                runner._futures_waiting -= 1

    def _is_done(self) -> bool:
        return self._state in runners.FUTURE_DONE

    def cancel(self) -> bool:
        """Cancel this version: pending/ready → cancelled (True); running → request a stop (False).

        A running version gets a cooperative request (its token is set) and the call returns
        False, as ``Future.cancel()`` does for a running future; the future becomes cancelled if
        the function acknowledges by raising ``Cancelled``. Done futures return ``cancelled()``.
        """
        if self.done():
            return self.cancelled()
        # StaleGenerationError: a newer version replaced this one and settled it as cancelled.
        with contextlib.suppress(StaleGenerationError):
            self._runner._cancel(self.task_id, self.generation)
        return self.cancelled()

    def __repr__(self) -> str:
        return f"<TaskFuture {self.task_id!r} generation={self.generation} {super().__repr__()}>"


class Runner(SchedulerRunner[TaskScheduler]):
    """Run a dependency graph of functions on ``max_workers`` threads over a TaskScheduler.

    ``Runner(max_workers=N, executor=None)``; use as a context manager. Submit functions with
    ``submit(task_id, fn, deps)``, call ``start()``, then ``wait()`` or read the futures. With
    ``executor=`` (any ``concurrent.futures.Executor``: a process pool, a cluster client's executor)
    each worker thread hands its function to the executor and waits for the result there, so at
    most ``max_workers`` functions are in the executor at once. Functions must then be picklable
    if the executor needs it; only in-process execution (no executor, or a ThreadPoolExecutor)
    gives a function a real :class:`CancelToken`, any other executor passes ``token=None``.

    Do not call ``wait()`` or ``close()`` (without a timeout) from inside a task's function or a
    future's done-callback: they wait for that very function or callback to finish.

    ``recorder=`` is handed to the TaskScheduler underneath, which gives it every spec step it
    takes, in the order the steps take effect (see :class:`refsched.dag.scheduler.Recorder`).

    A function's exception, whatever it is, fails its version; a done-callback's is logged (on
    the ``concurrent.futures`` logger) and the next callback runs. If the runner's own machinery
    fails on a worker thread (a recorder that raises, a bug), the error is logged and the runner
    stops: it closes (pending and ready versions are cancelled in the scheduler, nothing more is
    claimed), and every future not yet resolved — pending, claimed or running — fails with a
    :class:`refsched.SchedulerError` whose ``__cause__`` is that error. ``wait()`` then returns
    False and ``close()`` returns as usual: both still wait for the functions other workers are
    running, whose outcomes no longer reach their futures. The scheduler may go on listing the
    version the failing worker held as running.
    """

    def __init__(self, max_workers: int | None = None, executor: Executor | None = None, *,
                 recorder: Recorder | None = None, max_partitions: int | None = None) -> None:
        max_workers = worker_count("Runner", max_workers)
        if executor is not None and not isinstance(executor, Executor):
            raise InvalidArgumentError(
                f"Runner(executor={executor!r}): executor must be a concurrent.futures.Executor")
        self._max_workers = max_workers
        self._executor = executor
        # Whether a function's token can be a live CancelToken (it runs in this process).
        self._in_process = executor is None or isinstance(executor, _ThreadPoolExecutor)
        self._scheduler = TaskScheduler(max_workers, track_endings=True, recorder=recorder,
                                        max_partitions=max_partitions)
        # signals() kept: each version's task type is its function's name
        self._typed = max_partitions is not None
        # Every future of this runner waits and is notified here (see TaskFuture.__init__); an
        # RLock, as in Future, since concurrent.futures.wait() takes it once per future. Its
        # lock, not the runner lock, guards the futures' states and _futures_waiting.
        self._futures_lock = sync.RLock()
        self._futures_condition = sync.Condition(self._futures_lock)
        self._futures_waiting = 0  # == threads waiting in TaskFuture._wait_done
        # The runner lock guards every field below and serialises every call on the scheduler.
        self._lock = sync.Lock()
        self._idle = sync.Condition(self._lock)  # wait()/close() wait here for the counters below
        # Claimed versions handed to no worker yet: only while no worker is idle, so
        # ``_queue and _idle_workers`` never holds once the lock is released.
        self._queue: deque[Claim] = deque()
        # The inboxes of the workers waiting for a claim, in the order they went idle (the last
        # is handed the next claim): each is put one claim, or None (closed: exit), and leaves
        # this list when it is.
        self._idle_workers: list[sync.SimpleQueue[Claim | None]] = []
        # every task id submitted through the runner -> the future of its current version
        self._tasks: dict[Hashable, TaskFuture] = {}
        # blocked_by id -> the (task, generation) versions it blocked: the Retry set, mirrored.
        self._blocked_kids: dict[Hashable, list[_Key]] = {}
        self._live = 0  # == number of futures in _tasks with _live set
        # == len(_queue) + versions handed to workers (in an inbox or being run): claimed and
        # not reported
        self._inflight = 0
        self._resolving = 0  # settlements decided under the lock and not yet applied to futures
        self._idle_waiters = 0  # threads waiting on _idle
        self._cancel_requested: set[_Key] = set()  # running versions asked to stop
        self._tokens: dict[_Key, CancelToken] = {}  # tokens of running versions
        self._exec_futures: dict[_Key, Future[Any]] = {}  # executor futures of running versions
        self._started = False
        self._closed = False
        # what stopped the runner: the first error of its own machinery on a worker (None: none)
        self._failure: BaseException | None = None
        self._threads: list[sync.Thread] = []

    # -- public API ------------------------------------------------------------------------

    def submit(self, task_id: Hashable, fn: Callable[..., Any],
               deps: Iterable[Hashable] = (), *,
               optional: Iterable[Hashable] = _NO_IDS, tenant: Hashable = None) -> TaskFuture:
        """Submit a new version of ``task_id`` that runs ``fn()`` once ``deps`` succeed and
        ``optional`` have ended (in any state: an optional dependency never blocks it).

        Spec: Submit (SubmitOptional with ``optional``). A function that takes an ``inputs``
        keyword is called with its input summary: how each optional dependency ended
        (:class:`refsched.ParentOutcome`, by id). Returns the new version's future; a pending
        or ready version it replaces has its future cancelled. Errors are the scheduler's
        (``InvalidArgumentError``, ``SchedulerClosedError``, ``TaskRunningError``, after start
        ``UnknownDependencyError`` / ``CycleError``), plus ``InvalidArgumentError`` when ``fn``
        is not callable; nothing changes when one is raised. ``tenant`` and, on a runner built
        with ``max_partitions``, the function's ``"module:qualname"`` (the task type) are the
        version's partition key in ``scheduler.signals()``; a retry keeps them.
        """
        if not callable(fn):
            raise InvalidArgumentError(
                f"submit({task_id!r}): fn must be callable, not {type(fn).__name__}")
        if type(deps) is not tuple:  # a tuple, the common case, as it is: no call
            deps = _listed(deps)
        if optional is not _NO_IDS:  # () itself, the default: one identity test
            optional = _listed(optional)
        # Built before the lock is taken, to keep that short; it is nobody else's until
        # returned, so its generation is filled in once the scheduler has it.
        future = TaskFuture(self, task_id, 0)
        lock = self._lock
        lock.acquire()  # not ``with``: this runs once per task
        try:
            if self._typed or tenant is not None:
                future.generation = self._scheduler.submit(
                    task_id, deps, fn, optional, tenant=tenant,
                    task_type=task_type_of(fn) if self._typed else None)
            else:
                future.generation = self._scheduler.submit(task_id, deps, fn, optional)
            old = self._renew_locked(task_id, future)
            if old is None and not self._started:
                return future  # a new task before start(): nothing to settle or claim
            out: list[_Settlement] = []
            if old is not None and not old._settled:
                old._settled = True
                out.append((old, _CANCEL, None))
            self._after_change_locked(out)
        finally:
            lock.release()
        if out:
            self._settle(out)
        return future

    def add_deps(self, task_id: Hashable, deps: Iterable[Hashable] = (),
                 optional: Iterable[Hashable] = ()) -> TaskState:
        """Make the pending version of ``task_id`` wait for ``deps`` (required) and ``optional``
        too; return its state. Spec: AddDeps.

        Atomic with respect to the workers' claims: a version a worker claimed first refuses
        with ``InvalidTransitionError``, as a ready, running or ended one does. A dead new
        required dependency blocks it (its future raises ``BlockedError``). Errors are
        ``TaskScheduler.add_deps``'s; nothing changes when one is raised.
        """
        deps = _listed(deps)
        optional = _listed(optional)
        out: list[_Settlement] = []
        with self._lock:
            state = self._scheduler.add_deps(task_id, deps, optional)
            # A new dead required dependency blocks the version, before start() too.
            self._collect_locked(out, None, 0, None)
            self._resolving += len(out)
        if out:
            self._settle(out)
        return state

    def start(self) -> None:
        """Seal the graph (spec: Start), start the worker threads and begin running functions.

        Errors are the scheduler's: ``SchedulerClosedError``, ``InvalidTransitionError`` (already
        started), ``UnknownDependencyError``, ``CycleError``.
        """
        with self._lock:
            self._scheduler.start()
            self._started = True
            for i in range(self._max_workers):
                # daemon: a function still running after close(timeout) must not keep the
                # interpreter from exiting
                # Each worker's inbox is made here, in order: objects made by the threads
                # themselves would be numbered by how they interleave (see refsched.explore).
                inbox: sync.SimpleQueue[Claim | None] = sync.SimpleQueue()
                thread = sync.Thread(target=self._work_loop, args=(inbox,),
                                     name=f"refsched-runner-{i}", daemon=True)
                thread.start()
                self._threads.append(thread)
            self._dispatch_locked(False)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted version is terminal and its future resolved.

        Returns True when that holds, False if ``timeout`` seconds passed first, or if the runner
        was closed with versions left pending (``close(cancel_pending=False)``), which can then
        never end, or stopped on a failure of its own (its futures are resolved, but not every
        version ran). Before ``start()`` nothing runs, so only ``start()`` from another thread (or
        the timeout) ends the wait. ``timeout``: None (no limit) or a finite number of seconds
        >= 0, else ``InvalidArgumentError``.
        """
        seconds = runners.check_timeout("wait", timeout)
        with self._lock:
            self._wait_idle_locked(self._quiet, seconds)
            return self._live == 0 and self._resolving == 0 and self._failure is None

    def cancel(self, task_id: Hashable, *, actor: str | None = None,
               reason: str | None = None) -> TaskState:
        """Cancel the current version of ``task_id``; return its state after. Spec: Cancel.

        pending/ready → cancelled (its future raises CancelledError; dependents become blocked);
        running → stays running, its token is set (a function that raises ``Cancelled`` then ends
        cancelled; one run by an executor that has not started it yet is withdrawn);
        terminal → unchanged. ``actor`` and ``reason`` go into the provenance of what this
        cancels (``scheduler.info(id).provenance``). Raises ``UnknownTaskError`` for an id never
        submitted, ``InvalidArgumentError`` for an ``actor`` or ``reason`` neither None nor a
        str.
        """
        return self._cancel(task_id, None, actor, reason)

    def retry(self, task_id: Hashable) -> TaskFuture:
        """Run a failed, blocked or cancelled task again; return its new version's future.

        Spec: Retry. Every version blocked because of this one (through ``blocked_by``) gets a new
        version too; ``future(id)`` gives their futures. Errors: ``SchedulerClosedError``,
        ``InvalidTransitionError`` (not failed/blocked/cancelled), ``UnknownTaskError``.
        """
        out: list[_Settlement] = []
        with self._lock:
            generation = self._scheduler.retry(task_id)
            for member in self._retry_members_locked(task_id):
                current = self._scheduler.info(member).generation
                if current != self._tasks[member].generation:
                    self._tasks[member] = TaskFuture(self, member, current)  # future() gives it
                    self._live += 1
            future = TaskFuture(self, task_id, generation)
            self._renew_locked(task_id, future)
            self._after_change_locked(out)
        if out:
            self._settle(out)
        return future

    def _renew_locked(self, task_id: Hashable, future: TaskFuture) -> TaskFuture | None:
        """Make ``future``, a new live version's, the record of ``task_id``; return the old one."""
        old = self._tasks.get(task_id)
        if old is None or not old._live:
            self._live += 1
        self._tasks[task_id] = future
        return old

    def _after_change_locked(self, out: list[_Settlement]) -> None:
        """After a submission or retry: resolve what ended, hand out what became claimable."""
        if self._started:
            # Before start() nothing ends but what the calls settle themselves (a replaced
            # version, a cancel), and nothing is claimed: submitting a graph skips both.
            self._collect_locked(out, None, 0, None)
            self._dispatch_locked(False)
        self._resolving += len(out)

    def future(self, task_id: Hashable) -> TaskFuture:
        """Return the future of the current version of ``task_id``.

        Raises ``UnknownTaskError`` for an id never submitted through this runner.
        """
        with self._lock:
            self._scheduler.info(task_id)  # InvalidArgumentError, UnknownTaskError
            future = self._tasks.get(task_id)
        if future is None:
            raise UnknownTaskError(
                f"future({task_id!r}): {task_id!r} was not submitted through this runner",
                task_id)
        return future

    def close(self, timeout: float | None = None, cancel_pending: bool = True) -> CloseReport:
        """Close the scheduler (spec: Close) and wait up to ``timeout`` for running functions.

        No more submissions or claims. With ``cancel_pending`` every pending or ready version is
        cancelled; without it they stay pending/ready in the scheduler and their futures are
        cancelled (they will never run). Functions already running finish; the report gives
        each task's state when close returns, and lists under ``running`` any function still
        running after ``timeout`` — its future resolves when it finishes. A second call waits
        again and returns a fresh report. ``timeout``: None (no limit) or a finite number of
        seconds >= 0; ``cancel_pending``: True or False; anything else raises
        ``InvalidArgumentError`` with nothing changed.
        """
        seconds = runners.check_timeout("close", timeout)
        if not isinstance(cancel_pending, bool):
            raise InvalidArgumentError(
                f"close(cancel_pending={_r(cancel_pending)}): cancel_pending must be True or False")
        out: list[_Settlement] = []
        with self._lock:
            if not self._closed:
                report = self._scheduler.close(cancel_pending)
                self._closed = True
                self._collect_locked(out, None, 0, None)
                for task_id in (*report.pending, *report.ready):
                    future = self._tasks.get(task_id)
                    if future is not None and not future._settled:
                        future._settled = True
                        out.append((future, _CANCEL, None))
                self._release_idle_locked()
                self._resolving += len(out)
        if out:
            self._settle(out)
        with self._lock:
            self._wait_idle_locked(self._all_returned, seconds)
            finished = self._inflight == 0
            report = self._scheduler.close(cancel_pending)  # a fresh report: changes nothing
        if finished:
            me = threading.get_ident()  # close() may be called from a task's function
            for thread in self._threads:
                if thread.ident != me:
                    thread.join()
        return report

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        """Wait for all work if the block ended normally after ``start()``, then ``close()``.

        When the block raised, pending work is cancelled; running functions are waited for.
        """
        if exc_type is None and self._started and not self._closed:
            self.wait()
        self.close()

    # -- the worker ------------------------------------------------------------------------

    def _work_loop(self, inbox: sync.SimpleQueue[Claim | None]) -> None:
        """Take claims, run them, report them; exit once closed with no claim left.

        A worker with nothing to run and no settlement to count goes idle: it puts its ``inbox``
        on ``_idle_workers`` and blocks on it until a claim, or None (closed: exit), is put there.
        Only the bookkeeping under the runner lock can raise (``_run`` and ``_resolve_futures``
        never do): that stops the runner (``_break_locked``), and the worker then exits as on a
        close.
        """
        lock = self._lock
        acquire = sync.acquire  # a held lock is waited for without a convoy: see its docstring
        queue = self._queue
        idle = self._idle_workers
        outcome: _Outcome | None = None  # the version this worker ran, not yet reported
        applied = 0  # settlements this worker applied since it last held the lock
        failure: BaseException | None = None  # what the bookkeeping raised, to log unlocked
        while True:
            out: list[_Settlement] = []
            claim: Claim | None = None
            waits = False  # idle: the next claim comes through the inbox
            acquire(lock)  # not ``with``: once per task, and half the cost
            try:
                self._resolving -= applied
                applied = 0
                if outcome is not None:
                    claim = self._report_locked(outcome, out)
                    outcome = None
                self._resolving += len(out)
                if self._idle_waiters:
                    self._notify_idle_locked()
                if claim is None:
                    if queue:
                        claim = queue.popleft()
                        if self._cancel_requested and (
                                (claim.task_id, claim.generation) in self._cancel_requested):
                            outcome = (claim, _CANCEL, None)  # asked to stop before it started
                            claim = None
                    elif not out and not self._closed:
                        # Settlements applied after the lock is let go are counted at the next
                        # acquisition, which an idle worker may not make for long: only a worker
                        # with none goes idle.
                        idle.append(inbox)
                        waits = True
                exiting = claim is None and outcome is None and not out and not waits
            except BaseException as exc:  # the runner's own machinery failed: it stops
                failure = exc
                # Nothing above can raise but _report_locked (the scheduler, its recorder), which
                # gives back the version's in-flight count first: outcome is then still set, and
                # the settlements it decided are not yet counted as resolving.
                decided = len(out)
                uncounted = decided if outcome is not None else 0
                if claim is not None:
                    self._inflight -= 1  # taken, and never to run now
                outcome = claim = None
                waits = False
                self._break_locked(exc, out)
                self._resolving += uncounted + len(out) - decided
                exiting = False  # apply out, count it back, then exit as on a close
            finally:
                lock.release()
            if failure is not None:
                runners.log_failure("the runner", failure)
                failure = None
            if out:
                self._resolve_futures(out)
                applied = len(out)
            if waits:
                claim = inbox.get()
                if claim is None:
                    return  # closed while idle
            if claim is not None:
                outcome = self._run(claim)
            elif exiting:
                return

    def _run(self, claim: Claim) -> _Outcome:
        """Call the claimed function (here or in the executor); never raises."""
        task_id, generation, fn = claim
        future = self._tasks.get(task_id)  # read without the lock: only for running()
        if future is not None and future.generation == generation:
            future._started = True
        if fn is None:
            return (claim, _RESULT, None)
        try:
            if self._executor is not None:
                value = self._run_in_executor(claim, fn)
            else:
                taken = runners.keywords_taken(fn)
                if not taken:
                    value = fn()
                elif taken == runners.INPUTS:
                    value = fn(inputs=self._scheduler.input_summary(task_id))
                else:
                    value = fn(token=self._new_token(task_id, generation),
                               **self._inputs_for(claim, taken))
        except Cancelled:
            return (claim, _CANCEL, None)
        except BaseException as exc:  # a function's error fails its task, never the worker
            return (claim, _ERROR, exc)
        return (claim, _RESULT, value)

    def _run_in_executor(self, claim: Claim, fn: Callable[..., Any]) -> Any:
        """Hand ``fn`` to the executor and wait for its result; raise Cancelled if withdrawn."""
        assert self._executor is not None
        key = (claim.task_id, claim.generation)
        taken = runners.keywords_taken(fn)
        inputs = self._inputs_for(claim, taken)
        if taken & runners.TOKEN:
            token = self._new_token(*key) if self._in_process else None
            remote = self._executor.submit(fn, token=token, **inputs)
        else:
            remote = self._executor.submit(fn, **inputs)
        with self._lock:
            withdraw = key in self._cancel_requested
            if not withdraw:
                self._exec_futures[key] = remote
        if withdraw:
            remote.cancel()
        try:
            return remote.result()
        except CancelledError:
            if remote.cancelled():
                raise Cancelled(f"{claim.task_id!r} was withdrawn from the executor") from None
            raise

    def _inputs_for(self, claim: Claim, taken: int) -> dict[str, Any]:
        """``{"inputs": ...}`` for a function that takes ``inputs`` (``taken``: the keywords it
        takes, :func:`refsched.runners.keywords_taken`): how each optional dependency of the
        claimed version had ended when it was claimed; else nothing."""
        if not taken & runners.INPUTS:
            return {}
        return {"inputs": self._scheduler.input_summary(claim.task_id)}

    def _new_token(self, task_id: Hashable, generation: int) -> CancelToken:
        token = CancelToken(task_id, generation)
        with self._lock:
            key = (task_id, generation)
            if key in self._cancel_requested:
                token._event.set()
            self._tokens[key] = token
        return token

    # -- under the runner lock -------------------------------------------------------------

    def _report_locked(self, outcome: _Outcome, out: list[_Settlement]) -> Claim | None:
        """Report a run version to the scheduler (Complete / Fail / AcknowledgeCancel).

        Then claims what that made claimable: returns the claim the reporting worker takes
        itself, if any (see ``_dispatch_locked``).
        """
        claim, kind, value = outcome
        task_id, generation = claim.task_id, claim.generation
        # First, so that if what follows raises the count is right (see _work_loop).
        self._inflight -= 1
        try:
            if kind == _RESULT:
                self._scheduler.complete(task_id, generation, value)
            elif kind == _ERROR:
                self._scheduler.fail(task_id, generation, value)
            else:
                self._scheduler.acknowledge_cancel(task_id, generation)
        except SchedulerError:
            pass  # ended behind the runner's back (an action taken on runner.scheduler directly)
        if self._cancel_requested or self._tokens or self._exec_futures:
            key = (task_id, generation)
            self._cancel_requested.discard(key)
            self._tokens.pop(key, None)
            self._exec_futures.pop(key, None)
        self._collect_locked(out, task_id, generation, value)
        return self._dispatch_locked(True)

    def _collect_locked(self, out: list[_Settlement], task_id: Hashable, generation: int,
                        value: Any) -> None:
        """Turn the scheduler's new endings into settlements of the matching futures.

        ``(task_id, generation)`` is the version just reported with ``value`` (generation 0:
        none), whose result or error need not be read back from the scheduler.
        """
        endings = self._scheduler.pop_endings()
        if not endings:
            return
        tasks = self._tasks
        for t, g, state in endings:
            future = tasks.get(t)
            if future is None or future.generation != g:
                continue  # not a version this runner knows of
            if future._live:
                future._live = False
                self._live -= 1
            info: TaskInfo | None = None
            if state is _BLOCKED:
                info = self._scheduler.info(t)
                future._blocked_by = info.blocked_by
                self._blocked_kids.setdefault(info.blocked_by, []).append((t, g))
            if future._settled:
                continue
            future._settled = True
            if g == generation and t == task_id and (state is _SUCCEEDED or state is _FAILED):
                out.append((future, _RESULT if state is _SUCCEEDED else _ERROR,
                            value if state is _SUCCEEDED else _as_exception(t, value)))
                continue
            out.append(_settlement_from_info(future, info or self._scheduler.info(t)))

    def _dispatch_locked(self, self_take: bool) -> Claim | None:
        """Claim every version that fits (spec: Claim) and hand each claim to a worker.

        ``self_take``: the calling worker takes the first claim itself, which is returned (a
        fresh claim: no cancel can have been requested for it yet). Each other claim is put
        into the inbox of an idle worker, which wakes it; those no idle worker is left for go
        to the shared queue, where a worker finds them before it goes idle.
        """
        if not self._started or self._closed:
            return None
        claims = self._scheduler.ready()
        if not claims:
            return None
        self._inflight += len(claims)
        first = 1 if self_take else 0
        if len(claims) > first:
            idle = self._idle_workers
            for i in range(first, len(claims)):
                if not idle:
                    self._queue.extend(claims[i:])
                    break
                idle.pop().put(claims[i])
        return claims[0] if self_take else None

    def _release_idle_locked(self) -> None:
        """Send every idle worker away (closed): no claim will come to its inbox now."""
        for inbox in self._idle_workers:
            inbox.put(None)
        self._idle_workers.clear()

    def _retry_members_locked(self, root: Hashable) -> list[Hashable]:
        """The versions blocked because of ``root`` (the Retry set without root), as mirrored."""
        members: list[Hashable] = []
        stack = [root]
        while stack:
            cause = stack.pop()
            for t, g in self._blocked_kids.pop(cause, ()):
                record = self._tasks.get(t)
                if (record is not None and record.generation == g and not record._live
                        and record._blocked_by == cause):
                    members.append(t)
                    stack.append(t)
        return members

    def _break_locked(self, exc: BaseException, out: list[_Settlement]) -> None:
        """Stop the runner: its own machinery raised ``exc`` on a worker. Adds to ``out``.

        The runner's account of what runs can no longer be trusted, so it closes (the scheduler
        cancels what is pending or ready; nothing more is claimed), drops the claims no worker
        took, and fails every future not yet settled with a SchedulerError caused by ``exc``.
        Functions other workers run go on: ``wait()`` and ``close()`` still wait for them, and their
        outcomes reach no future. The first such error is kept in ``_failure``.
        """
        if self._failure is None:
            self._failure = exc
        error = runners.stopped_error("the runner", exc)
        self._closed = True
        self._inflight -= len(self._queue)
        self._queue.clear()
        # What this raises is the recorder again, most likely, once the close is made; closed or
        # not, the runner claims nothing more now that _closed is set, and exc is what to report.
        with contextlib.suppress(BaseException):
            self._scheduler.close(True)
        for future in self._tasks.values():
            if not future._settled:
                future._settled = True
                out.append((future, _ERROR, error))
        self._release_idle_locked()

    def _quiet(self) -> bool:
        """wait()'s condition: all versions ended, or closed with no function left to return."""
        if self._resolving:
            return False
        return self._live == 0 or (self._closed and self._inflight == 0)

    def _all_returned(self) -> bool:
        """close()'s condition: no claimed version left unreported, every future settled."""
        return self._inflight == 0 and self._resolving == 0

    def _wait_idle_locked(self, condition: Callable[[], bool], seconds: float | None) -> None:
        """Wait on ``_idle`` until ``condition`` holds or ``seconds`` pass, counted among the
        waiters that a change of the counters must wake. Lock held."""
        self._idle_waiters += 1
        try:
            self._idle.wait_for(condition, seconds)
        finally:
            self._idle_waiters -= 1

    def _notify_idle_locked(self) -> None:
        if self._resolving == 0 and (self._live == 0 or self._inflight == 0):
            self._idle.notify_all()

    # -- outside the runner lock -----------------------------------------------------------

    def _cancel(self, task_id: Hashable, generation: int | None, actor: str | None = None,
                reason: str | None = None) -> TaskState:
        out: list[_Settlement] = []
        remote: Future[Any] | None = None
        with self._lock:
            state = self._scheduler.cancel(task_id, generation, actor=actor, reason=reason)
            future = self._tasks.get(task_id)
            if state is _RUNNING and future is not None:
                key = (task_id, future.generation)
                self._cancel_requested.add(key)
                token = self._tokens.get(key)
                if token is not None:
                    token._event.set()
                remote = self._exec_futures.get(key)
            self._collect_locked(out, None, 0, None)
            self._dispatch_locked(False)
            self._resolving += len(out)
        if remote is not None:
            remote.cancel()  # withdraws it if the executor has not started it yet
        if out:
            self._settle(out)
        return state

    def _settle(self, out: list[_Settlement]) -> None:
        """Apply settlements (running done-callbacks), then count them as applied.

        The worker loop applies its own with ``_resolve_futures`` and counts them at its next
        lock acquisition instead, which saves one.
        """
        self._resolve_futures(out)
        with self._lock:
            self._resolving -= len(out)
            if self._idle_waiters:
                self._notify_idle_locked()

    def _resolve_futures(self, out: list[_Settlement]) -> None:
        """``_apply(out)``, with a result (the common settlement) set here in one short hold of
        the futures' lock, notifying only if a thread waits on a future; never raises."""
        lock = self._futures_lock
        for settlement in out:
            future, kind, value = settlement
            if kind != _RESULT:
                _apply((settlement,))
                continue
            try:
                lock.acquire()
                try:
                    if future._state in runners.FUTURE_DONE:
                        continue  # the caller resolved it by hand; the first outcome stands
                    future._result = value
                    future._state = _futures.FINISHED
                    for waiter in future._waiters:  # concurrent.futures.wait(), as_completed()
                        waiter.add_result(future)
                    if self._futures_waiting:
                        self._futures_condition.notify_all()
                finally:
                    lock.release()
                if future._done_callbacks:
                    future._invoke_callbacks()
            except Exception:  # as _apply: the settlements after it are still applied
                runners.FUTURES_LOGGER.exception("exception settling %r", future)


def _settlement_from_info(future: TaskFuture, info: TaskInfo) -> _Settlement:
    state = info.state
    if state is _SUCCEEDED:
        return (future, _RESULT, info.result)
    if state is _FAILED:
        return (future, _ERROR, _as_exception(info.task_id, info.error))
    if state is _BLOCKED:
        return (future, _ERROR, BlockedError(
            f"{info.task_id!r} is blocked: its dependency {info.blocked_by!r} can no longer "
            f"succeed", info.task_id, info.blocked_by))
    return (future, _CANCEL, None)


def _as_exception(task_id: Hashable, error: Any) -> BaseException:
    if isinstance(error, BaseException):
        return error
    return SchedulerError(f"{task_id!r} failed: {error!r}")


