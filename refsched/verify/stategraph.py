"""TLC's state graph of the spec, read back and matched edge for edge against the model.

``tlc -dump dot,actionlabels FILE`` writes every distinct state and every edge TLC took, with
the action's name as the edge label. The file says ``strict digraph`` but it holds parallel
edges (two action instances reaching one state, e.g. ``Close(FALSE)`` and ``Close(TRUE)``
with nothing waiting): it is read here as a multigraph. Labels carry no parameters, so
:func:`match` recovers each edge's parameters by matching it against the model's successors
(:func:`refsched.model.dag.graph.next_steps`). The two graphs agree only when there is a
one-to-one correspondence of states and of labelled edges, with multiplicity: that is the
proof, on this instance, that the model and the spec are the same transition system.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refsched.model.dag.graph import Edge, ModelGraph
from refsched.types import Snapshot
from refsched.verify import tlc
from refsched.verify.tla import ModelValue, TLAParseError, parse_state

if TYPE_CHECKING:
    from refsched.verify.system import System

__all__ = [
    "TRACES_CONFIG",
    "GraphMismatch",
    "Instance",
    "StateGraph",
    "TLCStateGraph",
    "dump_state_graph",
    "load_dot",
    "match",
    "read_instance",
    "show",
    "tlc_graph",
]

TRACES_CONFIG = "MCSchedulerTraces.cfg"
"""The model-checking instance whose state graph the trace corpus covers."""

LABEL_ACTIONS = {"AnyStaleCallback": "StaleCallback"}
"""Dump labels that are not the model's action name: TLC labels a step with the innermost
operator it expands before a quantifier over a state-dependent range (see the spec)."""


class GraphMismatch(AssertionError):
    """TLC's state graph and the model's differ; the message names the first difference."""


@dataclass(frozen=True, slots=True)
class Instance:
    """The constants of a model-checking instance (a ``MC*.cfg`` of ``MCScheduler``)."""

    tasks: tuple[str, ...]
    max_concurrency: int
    max_generation: int
    optional_edges: bool = False  # OptionalEdges: SubmitOptional has steps
    add_deps: bool = False  # AddDepsAllowed: AddDeps has steps
    record_provenance: bool = False  # RecordProvenance: the steps record provenance
    corpus_bound: bool = False  # MCSchedulerCorpus.tla's CorpusBound is a constraint too


@dataclass
class TLCStateGraph:
    """A state graph as TLC dumped it: states by TLC fingerprint, and labelled edges."""

    states: dict[int, Any]  # the system's model states (a Snapshot for the TaskScheduler)
    initial: list[int]
    edges: list[tuple[int, int, str]]  # (source, target, action name), parallel edges kept


@dataclass
class StateGraph:
    """The matched graph: TLC's states and edges, each edge with its recovered parameters."""

    instance: Any  # the system's constants (an Instance for the TaskScheduler)
    initial: Any
    depth: dict[Any, int]  # BFS level of each state, initial = 1
    edges: dict[Any, list[Edge[Any]]]  # by source, in the model's Next order
    tlc: tlc.TLCResult | None = None  # the run that dumped it, when one did
    dump_bytes: int = 0
    system: str = "scheduler"  # the name of the system it is a graph of
    config: str = ""  # the corpus instance it is the graph of ("": the system's traces config)

    @property
    def state_count(self) -> int:
        return len(self.depth)

    @property
    def edge_count(self) -> int:
        return sum(len(out) for out in self.edges.values())

    def all_edges(self) -> list[Edge[Any]]:
        return [e for out in self.edges.values() for e in out]


# -- Reading the cfg and the dump ------------------------------------------------------------

def read_instance(config: str | Path) -> Instance:
    """The constants ``Tasks``, ``MaxConcurrency``, ``MaxGeneration``, ``OptionalEdges``,
    ``AddDepsAllowed`` and ``RecordProvenance`` of a ``.cfg`` file."""
    path, text, values = tlc.read_config(config, ("Tasks", "MaxConcurrency", "MaxGeneration",
                                                  "OptionalEdges", "AddDepsAllowed",
                                                  "RecordProvenance"))
    tasks = values["Tasks"]
    if not isinstance(tasks, frozenset) or not all(isinstance(t, ModelValue) for t in tasks):
        raise ValueError(f"{path}: Tasks must be a set of model values")
    gates = values["OptionalEdges"], values["AddDepsAllowed"], values["RecordProvenance"]
    if not all(isinstance(v, bool) for v in gates):
        raise ValueError(f"{path}: OptionalEdges, AddDepsAllowed and RecordProvenance must be "
                         "TRUE or FALSE")
    bounded = re.search(r"^CONSTRAINT\b[^\n]*\bCorpusBound\b", text, re.MULTILINE)
    return Instance(tuple(sorted(t.name for t in tasks)), values["MaxConcurrency"],
                    values["MaxGeneration"], *gates, corpus_bound=bounded is not None)


_NODE = re.compile(r'^(-?\d+) \[label="((?:[^"\\]|\\.)*)"(,style = filled)?\];?$')
_EDGE = re.compile(r'^(-?\d+) -> (-?\d+) \[label="([^"]*)"')
_DOT_ESCAPE = re.compile(r"\\(.)")


def _unescape(label: str) -> str:
    return _DOT_ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), label)


def _system(system: System | None) -> System:
    from refsched.verify.system import get  # the systems import this module
    return system if system is not None else get()


def load_dot(path: str | Path, system: System | None = None) -> TLCStateGraph:
    """Read a ``-dump dot,actionlabels`` file as a multigraph of the system's model states."""
    system = _system(system)
    states: dict[int, Hashable] = {}
    initial: list[int] = []
    edges: list[tuple[int, int, str]] = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            edge = _EDGE.match(line)
            if edge is not None:
                label = edge.group(3)
                edges.append((int(edge.group(1)), int(edge.group(2)),
                              system.label_actions.get(label, label)))
                continue
            node = _NODE.match(line)
            if node is None:
                continue
            try:
                snapshot = system.snapshot_of(parse_state(_unescape(node.group(2))))
            except (TLAParseError, ValueError, KeyError, TypeError) as exc:
                raise GraphMismatch(f"{path}:{number}: a TLC state the model cannot "
                                    f"represent: {exc}") from None
            states[int(node.group(1))] = snapshot
            if node.group(3):
                initial.append(int(node.group(1)))
    if not states:
        raise GraphMismatch(f"{path}: no states (not a TLC -dump dot,actionlabels file?)")
    return TLCStateGraph(states, initial, edges)


def dump_state_graph(config: str | None = None, *, workers: int = 2,
                     on_line: Callable[[str], None] | None = None,
                     keep: str | Path | None = None,
                     system: System | None = None) -> tuple[TLCStateGraph, tlc.TLCResult, int]:
    """Run TLC on the system's model-checking module with ``config`` and read its state graph.

    ``config`` defaults to the system's corpus instance. Returns the graph, TLC's result and
    the dump's size in bytes. ``keep`` names a file to keep the dump in; by default it goes to
    a temporary folder.
    """
    system = _system(system)
    config = config or system.traces_config
    with tempfile.TemporaryDirectory(prefix="refsched-graph-") as scratch:
        dump = (Path(keep) if keep is not None else Path(scratch) / "graph").resolve()
        if dump.suffix != ".dot":  # TLC would add it
            dump = dump.with_name(dump.name + ".dot")
        result = tlc.run_tlc(config, system.module_of(config), workers=workers, on_line=on_line,
                             extra_args=["-deadlock", "-dump", "dot,actionlabels", str(dump)])
        if not result.ok:
            raise GraphMismatch(f"TLC found an error in {config}: {result.violation_kind} "
                                f"{result.violated}\n{result.trace or result.output[-2000:]}")
        return load_dot(dump, system), result, dump.stat().st_size


# -- Matching ------------------------------------------------------------------------------

def show(s: Snapshot) -> str:
    """A TaskScheduler state on a few lines, as mismatch messages show it."""
    if not s.tasks:
        return f"started={s.started} closed={s.closed} nextSeq={s.next_seq} (no task submitted)"
    rows = [f"started={s.started} closed={s.closed} nextSeq={s.next_seq}"]
    for t, v in sorted(s.tasks.items(), key=lambda kv: str(kv[0])):
        blocked = f" blockedBy={v.blocked_by}" if v.blocked_by is not None else ""
        optional: frozenset[Hashable] = getattr(v, "optional", frozenset())
        kinds = f" optional={{{', '.join(sorted(map(str, optional)))}}}" if optional else ""
        rows.append(f"  {t}: gen {v.generation} {v.state.value} deps="
                    f"{{{', '.join(sorted(map(str, v.deps)))}}}{kinds} "
                    f"remaining={v.remaining_deps}"
                    f"{blocked} cancelRequested={v.cancel_requested} claims={v.claims} "
                    f"seq={v.seq}")
    for t, r in sorted(s.records.items(), key=lambda kv: str(kv[0])):
        rows.append(f"  {t}: provenance root {r.root} gen {r.generation} {r.end.value} "
                    f"path {' -> '.join(map(str, r.path))}")
    return "\n".join(rows)


def match(dumped: TLCStateGraph, instance: Any, model: ModelGraph[Any] | None = None,
          system: System | None = None) -> StateGraph:
    """Match TLC's graph against the model's over the same constants; raise on any difference.

    States must be the same sets; from each state the multiset of (action, target) of TLC's
    edges must equal the model's. The first difference (in breadth-first order) is named in
    the :class:`GraphMismatch`. On success every TLC edge has its parameters.
    """
    system = _system(system)
    if model is None:
        model = system.explore(instance)
    show_state = system.show
    tlc_states = set(dumped.states.values())
    if len(tlc_states) != len(dumped.states):
        raise GraphMismatch("two TLC states map to one model state")
    initial = [dumped.states[fp] for fp in dumped.initial]
    if initial != [model.initial]:
        raise GraphMismatch(f"initial states differ: TLC has {len(initial)}, first:\n"
                            + "\n".join(show_state(s) for s in initial[:1])
                            + f"\nthe model's is:\n{show_state(model.initial)}")
    only_model = [s for s in model.depth if s not in tlc_states]
    only_tlc = [s for s in tlc_states if s not in model.depth]
    if only_model or only_tlc:
        parts = [f"TLC has {len(tlc_states)} states, the model {len(model.depth)}."]
        if only_model:
            first = min(only_model, key=lambda s: model.depth[s])
            parts.append(f"{len(only_model)} only in the model; the first (depth "
                         f"{model.depth[first]}), reached by "
                         f"{_reached_by(model, first, system)}:\n{show_state(first)}")
        if only_tlc:
            parts.append(f"{len(only_tlc)} only in TLC; one:\n{show_state(only_tlc[0])}")
        raise GraphMismatch("\n".join(parts))

    tlc_out: dict[Hashable, Counter[tuple[str, Hashable]]] = defaultdict(Counter)
    for source, target, label in dumped.edges:
        if source not in dumped.states or target not in dumped.states:
            raise GraphMismatch(f"TLC edge {source} -> {target} names an unknown state")
        tlc_out[dumped.states[source]][(label, dumped.states[target])] += 1
    for s in sorted(model.depth, key=model.depth.__getitem__):
        model_out = Counter((e.action, e.target) for e in model.edges[s])
        if model_out != tlc_out.get(s, Counter()):
                raise GraphMismatch(_edge_difference(s, model, model_out,
                                                 tlc_out.get(s, Counter()), system))
    return StateGraph(instance, model.initial, dict(model.depth), dict(model.edges),
                      system=system.name)


def _reached_by(model: ModelGraph[Any], state: Hashable, system: System) -> str:
    for source, out in model.edges.items():
        for e in out:
            if e.target == state and model.depth[source] < model.depth[state]:
                return system.describe(e.action, e.param_map)
    return "(initial)"


def _edge_difference(s: Hashable, model: ModelGraph[Any],
                     model_out: Counter[tuple[str, Hashable]],
                     tlc_out: Counter[tuple[str, Hashable]], system: System) -> str:
    lines = [f"edges differ from the state at depth {model.depth[s]}:", system.show(s)]
    for key in sorted(set(model_out) | set(tlc_out), key=lambda k: k[0]):
        if model_out[key] == tlc_out[key]:
            continue
        action, target = key
        instances = [system.describe(e.action, e.param_map) for e in model.edges[s]
                     if (e.action, e.target) == key]
        lines.append(f"{action}: model {model_out[key]} edge(s) "
                     f"{', '.join(instances) or ''}, TLC {tlc_out[key]}, to:\n"
                     f"{system.show(target)}")
        break
    return "\n".join(lines)


def tlc_graph(config: str | None = None, *, workers: int = 2,
              on_line: Callable[[str], None] | None = None,
              system: System | None = None) -> StateGraph:
    """Dump TLC's graph of ``config`` (default: the system's corpus instance), match it
    against the model, and return the match."""
    system = _system(system)
    config = config or system.traces_config
    instance = system.read_instance(config)
    dumped, result, size = dump_state_graph(config, workers=workers, on_line=on_line,
                                            system=system)
    graph = match(dumped, instance, system=system)
    graph.tlc = result
    graph.config = config
    graph.dump_bytes = size
    if result.distinct_states is not None and result.distinct_states != graph.state_count:
        raise GraphMismatch(f"TLC reported {result.distinct_states} distinct states but "
                            f"dumped {graph.state_count}")
    return graph
