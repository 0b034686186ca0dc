"""CPython's ``graphlib.TopologicalSorter`` behind the conformance protocol, profile STATIC.

``python -m refsched.conform.dag.graphlib_adapter`` serves it through :func:`refsched.serve.serve`.
The adapter is thin on purpose: each operation is one graphlib call, and where graphlib behaves
otherwise than the contract, the oracle sees graphlib's own answer.

========================  ===================================================================
operation                 graphlib
========================  ===================================================================
``new``                   a fresh ``TopologicalSorter()``; ``max_concurrency`` is ignored
``submit(t, deps)``       ``add(t, *deps)``, answering generation 1
``start``                 ``prepare()``; its ``CycleError`` goes out with graphlib's cycle
``ready``                 ``get_ready()``: every ready node, each as ``[node, 1]``
``complete(t, 1)``        ``done(t)``, answering succeeded
``state(t)``              running or succeeded when the adapter saw it handed out or done
========================  ===================================================================

What graphlib lacks, so STATIC leaves it out: versions (re-adding a node merges its
dependencies into the old ones; the adapter answers ``Unsupported``), failure, cancellation,
retry, closing, a concurrency limit and claim order (``get_ready()`` hands out everything ready
at once), additions after ``prepare()``, and any view of pending versus ready. Edge kinds and
added edges (``optional_edges``, ``add_deps``): every edge is required (a node waits for each
predecessor to be ``done()``; none waits only for it to end, and a node is given nothing of how
its predecessors ended), and ``add()`` merges predecessors into a node only before
``prepare()``, raising ``ValueError`` after it; STATIC declares both false.

Where it differs inside STATIC, the difference shows: a dependency never added becomes a node
of its own, ready at once, and ``prepare()`` accepts it; ``done()`` twice, before the node was
handed out, or for a node never added raises ``ValueError`` (refsched returns the state, raises
``InvalidTransitionError``, ``UnknownTaskError``); ``get_ready()`` before ``prepare()`` raises
``ValueError``; a duplicate dependency is accepted, a self-dependency is a cycle at
``prepare()``; after a ``CycleError`` the graph cannot be fixed (``prepare()`` again and
``add()`` raise ``ValueError``).
"""

from __future__ import annotations

import graphlib
import platform
import sys
from collections.abc import Hashable, Iterable

from refsched.conform.protocol import Unsupported
from refsched.conform.server import serve_stdio
from refsched.errors import UnknownTaskError
from refsched.profile import STATIC
from refsched.types import Claim, TaskState

__all__ = ["GraphlibScheduler", "main"]

NAME = (f"graphlib.TopologicalSorter "
        f"({platform.python_implementation()} {platform.python_version()})")


class GraphlibScheduler:
    """One ``TopologicalSorter`` with the part of the TaskScheduler API that STATIC admits."""

    def __init__(self, max_concurrency: int) -> None:
        # graphlib has no concurrency limit: max_concurrency is not used
        self.sorter: graphlib.TopologicalSorter[Hashable] = graphlib.TopologicalSorter()
        self.added: set[Hashable] = set()  # ids given to submit(), whose add() succeeded
        self.named: set[Hashable] = set()  # ids given to submit() or named as a dependency
        self.handed_out: set[Hashable] = set()  # returned by get_ready(), not yet done
        self.done: set[Hashable] = set()  # done() accepted

    def submit(self, task_id: Hashable, deps: Iterable[Hashable] = (), fn: object = None) -> int:
        """``add(task_id, *deps)``; the generation is always 1."""
        if task_id in self.added:
            raise Unsupported(f"submit({task_id!r}): graphlib has no versions; adding a node "
                              f"again merges its dependencies")
        deps = list(deps)
        self.sorter.add(task_id, *deps)
        self.added.add(task_id)
        self.named.add(task_id)
        self.named.update(deps)
        return 1

    def start(self) -> None:
        """``prepare()``."""
        self.sorter.prepare()

    def ready(self, limit: int | None = None) -> list[Claim]:
        """``get_ready()``: every node ready now, each with generation 1."""
        if limit is not None:
            raise Unsupported(f"ready({limit!r}): graphlib hands out every ready node at once")
        nodes = self.sorter.get_ready()
        self.handed_out.update(nodes)
        self.named.update(nodes)
        return [Claim(node, 1, None) for node in nodes]

    def complete(self, task_id: Hashable, generation: int, result: object = None) -> TaskState:
        """``done(task_id)``."""
        if type(generation) is not int or generation != 1:
            raise Unsupported(f"complete({task_id!r}, {generation!r}): graphlib has no "
                              f"generations; every node is generation 1")
        self.sorter.done(task_id)
        self.handed_out.discard(task_id)
        self.done.add(task_id)
        return TaskState.SUCCEEDED

    def state(self, task_id: Hashable) -> TaskState:
        """Succeeded or running, as far as the adapter saw; graphlib keeps no states to ask."""
        if task_id in self.done:
            return TaskState.SUCCEEDED
        if task_id in self.handed_out:
            return TaskState.RUNNING
        if task_id not in self.named:
            raise UnknownTaskError(f"state({task_id!r}): never added", task_id)
        raise Unsupported(f"state({task_id!r}): graphlib does not tell pending from ready")


def main() -> int:
    """Serve :class:`GraphlibScheduler` on stdin and stdout."""
    serve_stdio(GraphlibScheduler, STATIC, NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
