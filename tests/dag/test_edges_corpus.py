"""The corpus of edge kinds takes every cell of the truth table (edge kind x how the parent's
version ended -> the waiting child's fate), and each cell it takes goes the table's way.

Read from the two corpus instances with edge kinds (``scheduler-edges``: 2 ids, 2 generations;
``scheduler-adddeps``: 3 ids, where a parent is blocked by its own parent): a cell is a step in
which a parent of a waiting child ends (succeeded, failed, cancelled, blocked) or, having
ended, is replaced by a new version; the child's state after the step is its fate. Replay
checks each step against the model; this test checks that the steps the corpus holds reach
every cell.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from refsched.types import Snapshot, TaskState
from refsched.verify import specstate
from refsched.verify.itf import read_traces
from refsched.verify.system import get

S = TaskState
WAITING = (S.PENDING, S.READY)
ENDS = ("succeeded", "failed", "cancelled", "blocked", "replaced")


def cells(before: Snapshot, after: Snapshot) -> Iterator[tuple[str, str, TaskState]]:
    """(edge kind, the parent's end, the child's state after) of each waiting child of a
    parent that this step ended or replaced."""
    for child, view in before.tasks.items():
        fate = after.tasks.get(child)
        # the step's own target (a cancelled child, in a cycle of an unstarted graph) is no
        # child whose parent decided its fate
        if (view.state not in WAITING or fate is None or fate.generation != view.generation
                or fate.state not in (*WAITING, S.BLOCKED)):
            continue
        optional = getattr(view, "optional", frozenset())
        for parent in view.deps:
            was, now = before.tasks.get(parent), after.tasks.get(parent)
            if was is None or now is None:
                continue
            if now.generation == was.generation:
                if was.state.is_terminal or not now.state.is_terminal:
                    continue
                end = now.state.value
            elif was.state.is_terminal:
                end = "replaced"
            else:
                continue
            yield ("optional" if parent in optional else "required", end,
                   after.tasks[child].state)


def expected(kind: str, end: str, fate: TaskState) -> bool:
    if end == "replaced":
        return fate is S.PENDING or (kind == "required" and fate is S.BLOCKED)
    if kind == "required" and end != "succeeded":
        return fate is S.BLOCKED
    return fate in WAITING or fate is S.BLOCKED  # blocked only through another required dep


def test_the_edges_corpus_takes_every_cell_of_the_truth_table() -> None:
    system = get("scheduler")
    bundles = [system.bundle_of(c) for c in ("MCSchedulerCorpusEdges.cfg",
                                             "MCSchedulerCorpusAddDeps.cfg")]
    seen: Counter[tuple[str, str]] = Counter()
    freed: Counter[str] = Counter()  # optional parent's end -> children it made ready
    for trace in (t for bundle in bundles for t in read_traces(f"traces/{bundle}")):
        before = specstate.snapshot_of(trace.initial)
        for step in trace.steps:
            after = specstate.snapshot_of(step.state)
            if step.action != "Close":  # which cancels the children too
                for kind, end, fate in cells(before, after):
                    assert expected(kind, end, fate), (trace.name, step.action, kind, end, fate)
                    seen[kind, end] += 1
                    if kind == "optional" and fate is S.READY:
                        freed[end] += 1
            before = after
    missing = [(k, e) for k in ("required", "optional") for e in ENDS if not seen[k, e]]
    assert missing == [], f"cells the corpus never takes: {missing}; taken: {dict(seen)}"
    # an optional parent's end, whatever it is, frees a child that waited for it alone
    assert all(freed[end] for end in ("succeeded", "failed", "cancelled", "blocked")), freed
