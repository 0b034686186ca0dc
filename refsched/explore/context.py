"""Scenarios, and the :class:`Context` a scenario's body runs with.

A :class:`Scenario` is a small concurrent program: its ``body(ctx)`` runs on the run's main thread,
builds schedulers, starts two or three threads with ``ctx.spawn`` (joined when the body returns),
and says what must hold: ``ctx.watch(scheduler)`` checks the scheduler's invariants after every
step and its history of calls for linearizability against the reference model at the end;
``ctx.check`` adds a check run after every step, ``ctx.at_end`` one run once every thread is done.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar, cast

from refsched.dag.runner import Runner
from refsched.explore import runtime
from refsched.explore.linearizability import (
    History,
    RecordingProxy,
    SchedulerModel,
    Verdict,
    check,
    history_key,
)
from refsched.explore.tlcgraph import in_tlc_graph
from refsched.model import ReferenceScheduler

__all__ = ["Context", "Scenario", "by_name"]


class _Checked(Protocol):
    """What ``Context.watch`` needs of a scheduler."""

    @property
    def max_concurrency(self) -> int: ...

    def check_invariants(self) -> None: ...


W = TypeVar("W", bound=_Checked)


@dataclass(frozen=True)
class Scenario:
    """A concurrent program to explore; ``body`` runs on the main thread of every run."""

    name: str
    body: Callable[[Context], None]
    description: str = ""
    # False: the partial-order reduction would miss some of its schedules (it reads state no
    # lock orders against the writes), so explore() searches it in full
    reduction: bool = True


def by_name(*scenarios: Scenario) -> dict[str, Scenario]:
    """The scenarios by their names, in the order given."""
    return {s.name: s for s in scenarios}


class Context:
    """The run as a scenario's body sees it."""

    def __init__(self, execution: runtime.Execution) -> None:
        self._ex = execution
        self._threads: list[runtime.Thread] = []
        self._ends: list[tuple[str, Callable[[], None]]] = []
        self._histories: list[tuple[str, History, Callable[[], Any]]] = []

    def spawn(self, target: Callable[..., object], *args: Any, name: str) -> runtime.Thread:
        """Start ``target(*args)`` on a new controlled thread, joined after the body returns."""
        thread = runtime.Thread(target=target, args=args, name=name)
        thread.start()
        self._threads.append(thread)
        return thread

    def watch(self, scheduler: W, *, model: Callable[[], Any] | None = None,
              label: str = "scheduler", tlc_graph: bool = False) -> W:
        """Watch ``scheduler``: return a proxy that records the calls made through it.

        Its ``check_invariants()`` runs after every step; at the end the recorded history must be
        linearizable against ``model()`` (by default a ``ReferenceScheduler`` of the same
        ``max_concurrency``). With ``tlc_graph`` its snapshot after every step must also be a
        state of TLC's graph (:mod:`refsched.explore.tlcgraph`): for scenarios that stay inside
        that instance's bounds, which the check enforces.
        """
        self.check(f"{label}.check_invariants()", scheduler.check_invariants)
        if tlc_graph:
            self.check(f"{label} state in TLC's graph", partial(in_tlc_graph, scheduler))
        if model is None:
            model = partial(ReferenceScheduler, scheduler.max_concurrency)
        history = History()
        self._histories.append((label, history, model))
        # Calls and returns are steps of their own, ordered against each other: the search
        # then tells apart runs whose histories differ, and a run's history does not depend on
        # which of several equivalent interleavings the reduction picked.
        probe = runtime.Probe(label)
        return cast(W, RecordingProxy(scheduler, history, thread=runtime.current_thread_name,
                                      on_event=probe.step))

    def watch_runner(self, runner: Runner, *, label: str = "runner") -> Runner:
        """Watch the TaskScheduler under ``runner`` as :meth:`watch` does (every call the
        runner makes on it is recorded); returns ``runner``."""
        # The Runner builds its scheduler itself and offers no other seam to observe it.
        runner._scheduler = self.watch(runner._scheduler, label=f"{label}.scheduler")
        return runner

    def check(self, name: str, fn: Callable[[], None]) -> None:
        """Run ``fn()`` after every step that released a lock, and at the end; it raises to fail."""
        self._ex.checks.append((name, fn))

    def at_end(self, name: str, fn: Callable[[], None]) -> None:
        """Run ``fn()`` once every thread has finished; it raises (an assertion) to fail."""
        self._ends.append((name, fn))

    # -- used by the search ----------------------------------------------------------------

    def _main(self, body: Callable[[Context], None]) -> None:
        body(self)
        for thread in self._threads:
            thread.join()

    def _verify(self, verdicts: dict[Hashable, Verdict] | None = None
                ) -> runtime.RunFailure | None:
        """The end-of-run checks, called outside the run once every thread has finished.

        ``verdicts`` caches linearizability verdicts by ``history_key`` across runs: many
        schedules differ only in steps that leave the history as it is.
        """
        for _, history, _ in self._histories:
            history.stop()
        for name, fn in self._ex.checks:
            try:
                fn()
            except Exception as exc:
                return runtime.RunFailure(
                    "invariant", f"{name} at the end: {type(exc).__name__}: {exc}")
        for name, fn in self._ends:
            try:
                fn()
            except Exception as exc:
                return runtime.RunFailure("assertion", f"{name}: {type(exc).__name__}: {exc}")
        for label, history, model in self._histories:
            operations = history.operations()
            key = (label, history_key(operations)) if verdicts is not None else None
            verdict = verdicts.get(key) if verdicts is not None else None
            if verdict is None:
                verdict = check(operations, SchedulerModel(model))
                if verdicts is not None:
                    verdicts[key] = verdict
            if not verdict.ok:
                return runtime.RunFailure(
                    "linearizability",
                    f"{label}: no sequential order of its calls gives the responses seen "
                    f"(reference model: {model().__class__.__name__})\n{verdict.explain()}")
        return None
