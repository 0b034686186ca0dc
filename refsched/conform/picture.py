"""``refsched conform --picture``: the state at the first difference, drawn side by side; and a
TaskScheduler's blocked branch with its provenance path (:func:`write_branch`).

A counterexample's table says which fields differ; a reviewer still has to rebuild the state in
their head to see why that is a bug. The picture draws the two states where the model and the
implementation parted (for a corpus counterexample the model's side is the trace's state) as
two Graphviz clusters, with whatever differs between them drawn with a thick red border or in
bold red, and the reason and the failing call in the title.

Each state is first reduced to a :class:`_View`: named nodes with fields as text, and edges.
Both sides are reduced the same way, so "what differs" is a comparison of text, the same for
every system: a node on one side only, a field whose text differs, an edge on one side only.
A node's DOT name is its position among the keys of both sides, so the model's ``m3`` and the
implementation's ``i3`` are the same task.

Ids are arbitrary values: they only ever reach the DOT source inside HTML-like labels, escaped
by :func:`_html`, never as DOT names or quoted strings.
"""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from refsched.conform.report import Counterexample
from refsched.errors import InvalidArgumentError
from refsched.model.durable import DurableSnapshot
from refsched.model.pool import PoolSnapshot
from refsched.types import Provenance, ProvenanceView, Snapshot, TimerEntry, TimerSnapshot

__all__ = ["branch_source", "can_render", "dot_source", "write_branch", "write_picture"]

# Paul Tol's "light" scheme: told apart with every common colour-vision deficiency, and light
# enough for black text. The state is also written in each node: colour is never the only cue.
_GREY, _CYAN, _YELLOW, _MINT = "#DDDDDD", "#99DDFF", "#EEDD88", "#44BB99"
_ORANGE, _PINK, _BLUE, _WHITE = "#EE8866", "#FFAABB", "#77AADD", "#FFFFFF"
_PALETTES: Final[dict[str, dict[str, str]]] = {
    "scheduler": {"pending": _GREY, "ready": _CYAN, "running": _YELLOW, "succeeded": _MINT,
                  "failed": _ORANGE, "blocked": _PINK, "cancelled": _BLUE},
    "timer": {"pending": _GREY, "running": _YELLOW, "completed": _MINT, "failed": _ORANGE,
              "cancelled": _BLUE},
    "pool": {"queued": _CYAN, "running": _YELLOW, "finished": _MINT, "cancelled": _BLUE,
             "submitted": _GREY},
}
_DIFFERS: Final = "#CC0000"  # the border and text of what differs from the other side
_PATH: Final = "#004488"  # a provenance path's edges and nodes (Tol's dark blue)
_WIDTH: Final = 80  # characters shown of an id or a value; a longer one is clipped


# -- text for HTML-like labels ----------------------------------------------------------------

# Brackets too: Graphviz 2.43's label lexer rejects a text that starts with "]".
_ENTITIES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
                    "[": "&#91;", "]": "&#93;"}


def _html(text: str) -> str:
    """``text`` as the text of an HTML-like label: markup characters as entities, and what
    cannot be shown (control characters, lone surrogates, line breaks) as a visible escape."""
    out = []
    for char in text:
        if char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif unicodedata.category(char)[0] in "CZ" and char != " ":
            # \n, \x00, U+2028, a lone surrogate: shown as Python writes it, never sent raw
            out.append(repr(char)[1:-1])
        else:
            out.append(char)
    return "".join(out)


def _clip(text: str) -> str:
    return text if len(text) <= _WIDTH else text[:_WIDTH - 1] + "…"


def _shown(value: Any) -> str:
    """A value as the report's tables show it: a string as itself (as repr when it holds what
    cannot be printed, so that ``'a\\nb'`` is not taken for a line break), anything else as repr."""
    return _clip(value if isinstance(value, str) and value.isprintable() else repr(value))


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return _shown(value)


def _sorted(ids: Iterable[Hashable]) -> list[Hashable]:
    """Ids in a stable order whatever their types (the order the report's tables use)."""
    return sorted(set(ids), key=repr)


# -- a state as nodes, fields and edges -------------------------------------------------------

Key = tuple[Hashable, ...]  # ("task", id), ("worker", w), ("heap",), ("state",)


@dataclass(frozen=True)
class _Field:
    name: str
    value: str
    always: bool = True  # False: shown only when it differs from the other side


@dataclass
class _Node:
    title: str
    fields: list[_Field] = field(default_factory=list)
    fill: str = _WHITE
    placeholder: bool = False  # named by the state (a dependency, a parent), not in it
    listing: bool = False  # the fields are a set's members: one the other side lacks is absent

    def value(self, name: str) -> str | None:
        return next((f.value for f in self.fields if f.name == name), None)


@dataclass
class _View:
    palette: str  # a key of _PALETTES
    nodes: dict[Key, _Node] = field(default_factory=dict)
    edges: list[tuple[Key, Key]] = field(default_factory=list)  # drawn in this order


def _scheduler_view(state: Snapshot, leases: DurableSnapshot | None = None) -> _View:
    """Spec: Scheduler's variables; with ``leases``, DurableScheduler's per task and store."""
    view = _View("scheduler")
    fields = [_Field("started", _shown(state.started)), _Field("closed", _shown(state.closed)),
              _Field("next_seq", _shown(state.next_seq))]
    if leases is not None:
        fields.append(_Field("now", _number(leases.now)))
        fields += [_Field(f"held by {_shown(w)}", ", ".join(sorted(map(_lease, held))))
                   for w, held in sorted(leases.held.items(), key=lambda item: repr(item[0]))]
    view.nodes[("state",)] = _Node("durable store" if leases else "scheduler", fields)
    order = sorted(state.tasks.items(), key=lambda item: (item[1].seq, repr(item[0])))
    for task, version in order:
        fields = [_Field("generation", _shown(version.generation)),
                  _Field("state", version.state.value),
                  _Field("remaining_deps", _shown(version.remaining_deps),
                         always=version.state.value == "pending"),
                  _Field("blocked_by", _shown(version.blocked_by),
                         always=version.blocked_by is not None),
                  _Field("cancel_requested", _shown(version.cancel_requested),
                         always=version.cancel_requested),
                  _Field("claims", _shown(version.claims), always=False),
                  _Field("seq", _shown(version.seq), always=False)]
        if leases is not None:
            for name, mapping in (("attempt", leases.attempt), ("holder", leases.holder),
                                  ("deadline", leases.deadline), ("ends", leases.ends)):
                if task in mapping:
                    fields.append(_Field(name, _shown(mapping[task])))
        view.nodes[("task", task)] = _Node(_shown(task), fields,
                                           _PALETTES["scheduler"][version.state.value])
    for task, version in order:
        for dep in _sorted(version.deps):
            _placeholder(view, dep)
            view.edges.append((("task", dep), ("task", task)))
    return view


def _lease(lease: Any) -> str:
    if isinstance(lease, tuple) and len(lease) == 3:
        task, generation, attempt = lease
        return f"{_shown(task)} g{generation} a{attempt}"
    return _shown(lease)


def _placeholder(view: _View, task: Hashable) -> None:
    if ("task", task) not in view.nodes:
        view.nodes[("task", task)] = _Node(_shown(task), [_Field("state", "not in the state")],
                                           placeholder=True)


def _timer_view(state: TimerSnapshot) -> _View:
    """Spec: TimerQueue's variables: the clock, the tasks, the heap in the order it pops."""
    view = _View("timer")
    view.nodes[("state",)] = _Node("timer scheduler", [
        _Field("now", _number(state.now)), _Field("closed", _shown(state.closed)),
        _Field("next_seq", _shown(state.next_seq))])
    for task, version in sorted(state.tasks.items(),
                                key=lambda item: (item[1].seq, repr(item[0]))):
        view.nodes[("task", task)] = _Node(_shown(task), [
            _Field("version", _shown(version.version)),
            _Field("state", version.state.value),
            _Field("run_at", _number(version.run_at)),
            _Field("priority", _shown(version.priority)),
            _Field("cancel_requested", _shown(version.cancel_requested),
                   always=version.cancel_requested),
            _Field("claims", _shown(version.claims), always=False),
            _Field("seq", _shown(version.seq), always=False),
        ], _PALETTES["timer"][version.state.value])
    entries = [_Field(_entry(entry, state), "") for entry in
               sorted(state.heap, key=lambda e: (e.run_at, e.priority, e.seq, repr(e.task_id)))]
    view.nodes[("heap",)] = _Node("heap, earliest first",
                                  entries or [_Field("(empty)", "")], listing=True)
    return view


def _entry(entry: TimerEntry, state: TimerSnapshot) -> str:
    current = state.tasks.get(entry.task_id)
    live = (current is not None and current.version == entry.version
            and current.state.value == "pending")
    return (f"at {_number(entry.run_at)}, priority {entry.priority}, seq {entry.seq}: "
            f"{_shown(entry.task_id)} v{entry.version}{'' if live else ' (stale)'}")


def _pool_view(state: PoolSnapshot, workers: Iterable[Hashable]) -> _View:
    """Spec: WorkStealing's variables: each worker's deque and run, each task, who spawned whom.

    ``workers`` are drawn even when idle with an empty deque (the state leaves them out), so
    that both sides show the same workers.
    """
    view = _View("pool")
    view.nodes[("state",)] = _Node("pool", [_Field("phase", state.phase.value),
                                            _Field("outstanding", _shown(state.outstanding))])
    status: dict[Hashable, str] = {}
    for worker in _sorted([*workers, *state.deque, *state.running]):
        deque = state.deque.get(worker, ())
        running = state.running.get(worker)
        view.nodes[("worker", worker)] = _Node(f"worker {_shown(worker)}", [
            _Field("running", "idle" if running is None else _shown(running)),
            _Field("deque", "top: " + ", ".join(map(_shown, deque)) + " :bottom" if deque
                   else "empty")])
        for task in deque:
            status[task] = f"queued on {_shown(worker)}"
        if running is not None:
            status[running] = f"running on {_shown(worker)}"
    for task in state.finished:
        status.setdefault(task, "finished")
    for task in state.cancelled:
        status.setdefault(task, "cancelled")
    tasks = {*state.submitted, *status, *state.runs, *state.parent, *state.parent.values()}
    for task in _sorted(tasks):
        shown = status.get(task, "submitted" if task in state.submitted else "not submitted")
        fields = [_Field("status", shown),
                  _Field("runs", _shown(state.runs.get(task, 0)), always=task in state.runs)]
        view.nodes[("task", task)] = _Node(_shown(task), fields,
                                           _PALETTES["pool"].get(shown.split()[0], _WHITE),
                                           placeholder=shown == "not submitted")
    for child, parent in sorted(state.parent.items(), key=repr):
        view.edges.append((("task", parent), ("task", child)))
    return view


def _view(state: Any, other: Any) -> _View | None:
    """``state`` as a view; None when it is none of the systems' states."""
    if isinstance(state, DurableSnapshot):
        return _scheduler_view(state.scheduler, state)
    if isinstance(state, Snapshot):
        return _scheduler_view(state)
    if isinstance(state, TimerSnapshot):
        return _timer_view(state)
    if isinstance(state, PoolSnapshot):
        workers = ([*other.deque, *other.running] if isinstance(other, PoolSnapshot) else [])
        return _pool_view(state, workers)
    return None


# -- the DOT source ---------------------------------------------------------------------------

def _differing(node: _Node, key: Key, other: _View | None) -> set[str] | None:
    """The names of ``node``'s fields that differ from the other side; None when the other
    side has no such node (an empty set: the same, or nothing to compare with)."""
    if other is None:
        return set()
    theirs = other.nodes.get(key)
    if theirs is None:
        return None
    names = {f.name for f in node.fields} | {f.name for f in theirs.fields}
    return {name for name in names if node.value(name) != theirs.value(name)}


def _line(text: str, *, differs: bool = False, bold: bool = False) -> str:
    shown = _html(text)
    if bold or differs:
        shown = f"<b>{shown}</b>"
    if differs:
        shown = f'<font color="{_DIFFERS}">{shown}</font>'
    return shown


def _node_statement(name: str, node: _Node, differing: set[str] | None) -> str:
    lines = [_line(node.title, bold=True)]
    for f in node.fields:
        differs = differing is not None and f.name in differing
        if f.always or differs:
            lines.append(_line(f"{f.name}: {f.value}" if f.value else f.name, differs=differs))
    if differing and not node.listing:  # a field only the other side has, as "none" here
        lines += [_line(f"{name}: none", differs=True) for name in sorted(differing)
                  if node.value(name) is None]
    if differing is None:
        lines.append(_line("(not on the other side)", differs=True))
    style = "dashed,rounded,filled" if node.placeholder else "rounded,filled"
    attributes = [f'label=<{"<br/>".join(lines)}>', f'style="{style}"',
                  f'fillcolor="{node.fill}"']
    if differing is None or differing:
        attributes += [f'color="{_DIFFERS}"', "penwidth=4"]
    return f"    {name} [{', '.join(attributes)}];"


def _cluster(side: str, label: str, view: _View | None, other: _View | None, state: Any,
             names: Mapping[Key, str]) -> list[str]:
    prefix = side[0]
    lines = [f"  subgraph cluster_{side} {{",
             f"    label=<<b>{_html(label)}</b>>;",
             '    style="rounded"; color="#888888"; fontsize=18;']
    if view is None:
        said = ("the implementation could not report its state" if side == "implementation"
                else "the model's state is not known")
        if state is not None:
            said = f"not a state that can be drawn: {_clip(repr(state))}"
        lines.append(f'    {prefix}_none [label=<{_line(said)}>, style="dashed"];')
    else:
        for key, node in view.nodes.items():
            lines.append(_node_statement(f"{prefix}{names[key]}", node,
                                         _differing(node, key, other)))
        theirs = set(other.edges) if other is not None else None
        for source, target in view.edges:
            attributes = ""
            if theirs is not None and (source, target) not in theirs:
                attributes = f' [color="{_DIFFERS}", penwidth=4]'
            lines.append(f"    {prefix}{names[source]} -> {prefix}{names[target]}{attributes};")
    lines.append("  }")
    return lines


def _legend(palette: str) -> list[str]:
    rows = [f'<tr><td bgcolor="{colour}" border="1">{_html(state)}</td></tr>'
            for state, colour in _PALETTES[palette].items()]
    rows.append(f'<tr><td border="4" color="{_DIFFERS}"><font color="{_DIFFERS}"><b>differs '
                'from the other side</b></font></td></tr>')
    rows.append('<tr><td border="1" style="dashed">named, not in the state</td></tr>')
    table = (f'<table border="0" cellspacing="4" cellpadding="4"><tr><td><b>legend</b></td></tr>'
             f'{"".join(rows)}</table>')
    return ["  subgraph cluster_legend {", '    label=""; style="invis";',
            f'    legend [shape=plain, style="", label=<{table}>];', "  }"]


def _title(counterexample: Counterexample) -> str:
    lines = [_line(f"refsched conform, {counterexample.system}: the implementation diverges "
                   f"({counterexample.source})", bold=True)]
    if counterexample.calls:
        failing = counterexample.calls[-1]
        python = getattr(failing, "python", "")  # a wire row: the call, then its request
        lines.append(_line(f"failing call: {python} as {failing.text}" if python
                           else f"failing call: {failing.text}"))
    reason = counterexample.wire_reason.splitlines() or [""]
    lines.append(_line(f"reason: {reason[0]}"))
    # the rest of a reason is a table of fields: kept aligned in a fixed-width font
    lines += [f'<font face="monospace">{_html(line).replace(" ", "&#160;")}</font>'
              for line in reason[1:]]
    return "".join(f'{line}<br align="left"/>' for line in lines)


def dot_source(counterexample: Counterexample) -> str:
    """The Graphviz DOT source of the counterexample's picture: the model's state and the
    implementation's side by side, what differs drawn in red, a legend, the reason on top."""
    model_state = counterexample.model_state
    implementation_state = counterexample.implementation_state
    model = _view(model_state, implementation_state)
    implementation = _view(implementation_state, model_state)
    keys: dict[Key, str] = {}
    for view in (model, implementation):
        for key in view.nodes if view is not None else ():
            keys.setdefault(key, str(len(keys)))
    palette = next((v.palette for v in (model, implementation) if v is not None),
                   counterexample.system if counterexample.system in _PALETTES else "scheduler")
    model_label = ("model: the trace's state" if counterexample.phase == "corpus"
                   else "model")
    lines = ["digraph counterexample {",
             f'  graph [label=<{_title(counterexample)}>, labelloc="t", labeljust="l", '
             'fontname="Helvetica", fontsize=14, nodesep=0.3, ranksep=0.4];',
             '  node [shape=box, fontname="Helvetica", fontsize=12, style="rounded,filled"];',
             '  edge [color="#444444"];',
             *_cluster("model", model_label, model, implementation, model_state, keys),
             *_cluster("implementation", "implementation", implementation, model,
                       implementation_state, keys),
             *_legend(palette),
             "}"]
    return "\n".join(lines) + "\n"


# -- a blocked branch and its provenance path ---------------------------------------------------

def branch_source(scheduler: Any, task_id: Hashable) -> str:
    """The Graphviz DOT source of the blocked branch ``task_id`` is on: the version at its
    root (failed or cancelled) and every version whose provenance names that root, with
    their required edges; the provenance path from the root to ``task_id`` is drawn thick and
    dark blue, its edges with ``class="provenance"``, and the title says what ended the root.

    ``scheduler`` is a ``TaskScheduler`` (or anything with ``snapshot(provenance=True)`` and
    ``provenance(task_id)``). Errors: ``task_id`` has no provenance (neither blocked nor
    cancelled) -> ``InvalidArgumentError``; unknown id -> ``UnknownTaskError``.
    """
    record: Provenance | None = scheduler.provenance(task_id)
    if record is None:
        raise InvalidArgumentError(f"branch_source({task_id!r}): it has no provenance: its "
                                   f"version is neither blocked nor cancelled")
    snapshot: Snapshot = scheduler.snapshot(provenance=True)
    root = (record.root, record.generation)
    branch = [t for t, r in snapshot.records.items() if (r.root, r.generation) == root]
    members = _sorted({record.root, *branch, *record.path})
    names = {t: f"t{i}" for i, t in enumerate(
        sorted(members, key=lambda t: (snapshot.tasks[t].seq if t in snapshot.tasks else 0,
                                       repr(t))))}
    on_path = set(record.path)
    steps = set(zip(record.path, record.path[1:], strict=False))
    lines = ["digraph branch {",
             f'  graph [label=<{_branch_title(task_id, record)}>, labelloc="t", '
             'labeljust="l", fontname="Helvetica", fontsize=14, nodesep=0.3, ranksep=0.4];',
             '  node [shape=box, fontname="Helvetica", fontsize=12, style="rounded,filled"];',
             '  edge [color="#AAAAAA"];']
    for t, name in names.items():
        version = snapshot.tasks.get(t)
        state = "not in the state" if version is None else version.state.value
        text = [_line(_shown(t), bold=True), _line(f"state: {state}")]
        if version is not None:
            text.append(_line(f"generation: {version.generation}"))
            if version.blocked_by is not None:
                text.append(_line(f"blocked_by: {_shown(version.blocked_by)}"))
        fill = _PALETTES["scheduler"].get(state, _WHITE)
        attributes = [f'label=<{"<br/>".join(text)}>', f'fillcolor="{fill}"']
        if t in on_path:
            attributes += [f'color="{_PATH}"', "penwidth=4"]
        lines.append(f"  {name} [{', '.join(attributes)}];")
    for t in names:
        version = snapshot.tasks.get(t)
        if version is None:
            continue
        for dep in _sorted(version.deps - _optional_of(version)):
            if dep not in names:
                continue
            style = (f' [color="{_PATH}", penwidth=4, class="provenance"]'
                     if (dep, t) in steps else "")
            lines.append(f"  {names[dep]} -> {names[t]}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _optional_of(version: Any) -> frozenset[Hashable]:
    return frozenset(getattr(version, "optional", ()) or ())


def _branch_title(task_id: Hashable, record: Provenance | ProvenanceView) -> str:
    said = [f"actor {_shown(value)}" if name == "actor" else f"reason {_shown(value)}"
            for name in ("actor", "reason")
            if (value := getattr(record, name, None)) is not None]
    lines = [_line(f"{_shown(task_id)}: the provenance of its version", bold=True),
             _line(f"root: {_shown(record.root)}, generation {record.generation}, "
                   f"{record.end.value}" + (f" ({', '.join(said)})" if said else "")),
             _line("path: " + " -> ".join(_shown(t) for t in record.path))]
    return "".join(f'{line}<br align="left"/>' for line in lines)


def write_branch(scheduler: Any, task_id: Hashable, path: str | Path) -> str:
    """Draw the blocked branch of ``task_id`` with its provenance path (:func:`branch_source`)
    as SVG at ``path``; what to tell the user. Without Graphviz's ``dot`` the DOT source
    goes next to ``path``, as with :func:`write_picture`. Errors: as :func:`branch_source`.
    """
    return _render(branch_source(scheduler, task_id), Path(path),
                   "the blocked branch and its provenance path")


# -- the file ---------------------------------------------------------------------------------

def can_render() -> bool:
    """True when Graphviz's ``dot`` is on PATH, to turn the DOT source into SVG."""
    return shutil.which("dot") is not None


def write_picture(counterexample: Counterexample, path: str | Path) -> str:
    """Draw the counterexample as SVG at ``path``; what to tell the user.

    Without Graphviz's ``dot`` on PATH (or when it fails), the DOT source goes next to
    ``path`` instead, as ``FILE.dot``, and the message says how to render it. A file that
    cannot be written is said in the message too: the verdict stays the verdict.
    """
    return _render(dot_source(counterexample), Path(path),
                   "the state at the first difference, drawn side by side")


def _render(source: str, out: Path, what: str) -> str:
    """``source`` rendered as SVG at ``out``, or else written next to it as DOT; the message."""
    dot = shutil.which("dot")
    problem = "Graphviz's dot is not on PATH"
    if dot is not None:
        try:
            done = subprocess.run([dot, "-Tsvg", "-o", str(out)], input=source.encode(),
                                  capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            problem = f"dot failed: {e}"
        else:
            if done.returncode == 0:
                return f"wrote {out}: {what}"
            said = done.stderr.decode(errors="replace").strip()
            problem = f"dot failed ({said or f'exit status {done.returncode}'})"
    fallback = out.with_suffix(".dot") if out.suffix != ".dot" else out
    try:
        fallback.write_text(source, encoding="utf-8")
    except OSError as e:
        return f"{problem}, and cannot write {fallback}: {e.strerror or e}"
    return (f"{problem}: wrote the picture's DOT source to {fallback} instead; Graphviz's dot "
            f"renders it (Debian: apt-get install graphviz): dot -Tsvg {fallback} -o {out}")
