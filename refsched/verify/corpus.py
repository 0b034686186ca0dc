"""The trace corpora: sets of behaviours that together take every edge of TLC's state graph.

:func:`path_cover` turns a matched :class:`~refsched.verify.stategraph.StateGraph` into
traces from the initial state such that every edge (with its multiplicity: two action
instances between the same states are two edges) lies on at least one trace. Each trace
starts with the shortest path to its first uncovered edge, then keeps taking uncovered
edges while it can, self-loops first (they cost one state and leave the walk where it is).
Everything here is deterministic: the same spec and model always give the same bytes.

Each system (:mod:`refsched.verify.system`) has its corpus in ``traces/`` (or
``$REFSCHED_TRACES_DIR``):

- the traces, one ITF object per line (see :mod:`refsched.verify.itf`):
  ``scheduler-cover.jsonl.gz``, ``timer-cover.jsonl.gz``;
- a manifest saying what they came from (hashes of the spec files, the constants, TLC's
  version and figures) and what they hold (states, edges, traces, steps, the bundle's hash):
  ``MANIFEST.json`` for the TaskScheduler, ``timer-manifest.json``.

A system may have several corpus instances (``System.instances``: the durable scheduler's
one id, two ids with expiry, two generations, a fixed diamond), each with its own bundle and
manifest named after its config (``durable-claims-cover.jsonl.gz``,
``durable-claims-manifest.json``); :func:`instance_bundles` lists them for a reader.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from refsched.model.dag.graph import Edge
from refsched.verify import system as systems
from refsched.verify import tlc
from refsched.verify.itf import Step, Trace, encode_bundle, iter_traces, read_traces, trace_from_itf
from refsched.verify.stategraph import StateGraph

__all__ = [
    "BUNDLE",
    "MANIFEST",
    "CorpusCheck",
    "CorpusMismatch",
    "check_corpus",
    "cover_traces",
    "instance_bundles",
    "instance_traces",
    "manifest_for",
    "path_cover",
    "read_manifest",
    "read_stratified",
    "spec_hashes",
    "stratified",
    "traces_dir",
    "write_corpus",
]

BUNDLE = "scheduler-cover.jsonl.gz"
"""The TaskScheduler's corpus (``system.get("scheduler").bundle``)."""
MANIFEST = "MANIFEST.json"
"""The TaskScheduler's manifest (``system.get("scheduler").manifest``)."""


class CorpusMismatch(AssertionError):
    """The committed corpus is not the one the current spec and model produce."""


def traces_dir() -> Path:
    """``$REFSCHED_TRACES_DIR``, else the ``traces/`` folder beside ``spec/``."""
    override = os.environ.get("REFSCHED_TRACES_DIR")
    if override:
        return Path(override)
    return tlc.spec_dir().parent / "traces"


def spec_hashes(system: systems.System | None = None,
                config: str | None = None) -> dict[str, str]:
    """SHA-256 of each spec file the system's corpus of ``config`` (default: of its traces
    config) depends on."""
    system = system or systems.get()
    files = system.spec_files_of(config or system.traces_config)
    return {name: hashlib.sha256((tlc.spec_dir() / name).read_bytes()).hexdigest()
            for name in files}


def path_cover(graph: StateGraph) -> list[list[Edge[Any]]]:
    """Paths from the initial state that together take every edge of ``graph``."""
    parent: dict[Hashable, Edge[Any]] = {}
    for source in sorted(graph.edges, key=graph.depth.__getitem__):
        for e in graph.edges[source]:
            if (e.target not in parent and e.target != graph.initial
                    and graph.depth[e.target] == graph.depth[source] + 1):
                parent[e.target] = e

    def prefix(state: Hashable) -> list[Edge[Any]]:
        path: list[Edge[Any]] = []
        while state != graph.initial:
            edge = parent[state]
            path.append(edge)
            state = edge.source
        return path[::-1]

    # Uncovered edges of each state: self-loops first, then the rest in Next order.
    uncovered: dict[Hashable, list[Edge[Any]]] = {
        s: [e for e in out if e.target == s] + [e for e in out if e.target != s]
        for s, out in graph.edges.items()
    }
    by_depth = sorted(uncovered, key=graph.depth.__getitem__)
    paths: list[list[Edge[Any]]] = []
    for start in by_depth:
        while uncovered[start]:
            path = prefix(start)
            here = start
            while uncovered[here]:
                todo = uncovered[here]
                # Prefer an edge whose target still has work: the walk goes on from there.
                pick = next((i for i, e in enumerate(todo)
                             if e.target == here or uncovered[e.target]), 0)
                edge = todo.pop(pick)
                path.append(edge)
                here = edge.target
            paths.append(path)
    return paths


def _config(graph: StateGraph) -> tuple[systems.System, str]:
    """The system of ``graph`` and the corpus instance it is the graph of."""
    system = systems.get(graph.system)
    return system, graph.config or system.traces_config


def cover_traces(graph: StateGraph) -> list[Trace]:
    """The path cover as ITF traces named ``cover-00001``..., states over the instance's ids."""
    system, config = _config(graph)
    constants = system.constants(graph.instance)
    converted: dict[Hashable, dict[str, Any]] = {}

    def state(s: Hashable) -> dict[str, Any]:
        if s not in converted:
            converted[s] = system.spec_state(s, graph.instance)
        return converted[s]

    traces = []
    for number, path in enumerate(path_cover(graph), start=1):
        steps = [Step(e.action, e.param_map, state(e.target)) for e in path]
        traces.append(Trace(f"cover-{number:05d}", constants, state(graph.initial), steps,
                            {"source": f"spec/{config}"}))
    return traces


def manifest_for(graph: StateGraph, traces: list[Trace], bundle_sha256: str) -> dict[str, Any]:
    """The manifest recording where ``traces`` came from and what they hold."""
    result = graph.tlc
    system, config = _config(graph)
    return {
        "spec": spec_hashes(system, config),
        "config": config,
        "constants": system.manifest_constants(graph.instance),
        "tlc": {
            "version": result.version if result else None,
            "states_generated": result.states_generated if result else None,
            "distinct_states": result.distinct_states if result else None,
            "depth": result.depth if result else None,
        },
        "states": graph.state_count,
        "edges": graph.edge_count,
        "traces": len(traces),
        "steps": sum(len(t.steps) for t in traces),
        "bundle": system.bundle_of(config),
        "bundle_sha256": bundle_sha256,
    }


def write_corpus(graph: StateGraph, directory: Path | None = None) -> dict[str, Any]:
    """Write the bundle and the manifest to ``directory`` (default :func:`traces_dir`)."""
    system, config = _config(graph)
    where = directory or traces_dir()
    where.mkdir(parents=True, exist_ok=True)
    traces = cover_traces(graph)
    data = encode_bundle(traces)
    (where / system.bundle_of(config)).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    manifest = manifest_for(graph, traces, digest)
    (where / system.manifest_of(config)).write_text(json.dumps(manifest, indent=2) + "\n",
                                         encoding="utf-8")
    return manifest


def read_manifest(directory: Path | None = None, system: systems.System | None = None,
                  config: str | None = None) -> dict[str, Any]:
    """The manifest of the system's corpus (default: the TaskScheduler's) of the instance
    ``config`` (default: its traces config)."""
    system = system or systems.get()
    path = (directory or traces_dir()) / system.manifest_of(config or system.traces_config)
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusMismatch(f"{path} does not exist: run `refsched traces` to make the "
                             "corpus") from None
    return data


def instance_bundles(system: systems.System, directory: Path | None = None, *,
                     configs: Sequence[str] | None = None
                     ) -> list[tuple[str, Path, dict[str, Any]]]:
    """(config, bundle, manifest) of every corpus instance of ``system`` (or of those of
    ``configs``), in its order.

    Raises :class:`CorpusMismatch` when a manifest is missing.
    """
    where = directory or traces_dir()
    found = []
    for config in system.instances if configs is None else configs:
        manifest = read_manifest(where, system, config)
        found.append((config, where / str(manifest.get("bundle", system.bundle_of(config))),
                      manifest))
    return found


def instance_traces(system: systems.System, directory: Path | None = None, *,
                    lazy: bool = False, configs: Sequence[str] | None = None
                    ) -> Iterator[Trace]:
    """The traces of every corpus instance of ``system`` (or of those of ``configs``),
    instance after instance; ``lazy``
    parses a bundle only as far as it is read (and keeps nothing for the next reader), else
    each bundle is read whole, once per process. Every bundle numbers its traces from
    ``cover-00001``, so a trace of any instance but the first is named after its instance
    too (``edges-cover-00042``): a name then picks one trace of the whole corpus.

    Raises :class:`CorpusMismatch` when a manifest is missing, and what reading a bundle
    raises (:class:`~refsched.verify.itf.TraceFormatError`, :class:`OSError`).
    """
    for config, bundle, _ in instance_bundles(system, directory, configs=configs):
        name = system.instance_name(config)
        for trace in iter_traces(bundle) if lazy else read_traces(bundle):
            yield replace(trace, name=f"{name}-{trace.name}") if name else trace


def _strata(actions: Sequence[Sequence[str]], head: int) -> list[int]:
    """The indexes :func:`stratified` keeps, given the actions each trace takes in order."""
    keep = set(range(min(head, len(actions))))
    seen: set[tuple[str, str]] = set()
    for index, taken in enumerate(actions):
        pairs = set(zip(("init", *taken), taken, strict=False))
        if pairs - seen:
            keep.add(index)
            seen |= pairs
    return sorted(keep)


def stratified(traces: Sequence[Trace], head: int) -> list[Trace]:
    """A deterministic subset of one instance's corpus, for a replay that cannot take it whole:
    its first ``head`` traces and, for every pair of actions one after the other (a Refused
    after a Reclaim, a Claim after a Cancel; ``init`` before the first step), the first trace
    that takes it.

    The path cover starts its traces from the shallowest states first, so the first traces are
    the shortest behaviours; the pairs add, for each way one step can follow another, its
    first occurrence. Every action is in the subset. The subset keeps the corpus's order.
    """
    return [traces[i] for i in _strata([[s.action for s in t.steps] for t in traces], head)]


_ACTION_TAKEN = re.compile(r'"mbt::actionTaken":\s*"([^"\\]*)"')


def read_stratified(path: Path, head: int) -> tuple[list[Trace], frozenset[str]]:
    """:func:`stratified` of the bundle at ``path``, decoding only the traces it keeps (a
    bundle of tens of thousands of traces takes a minute to decode whole), and every action
    the bundle's traces take."""
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        lines = [line for line in handle if line.strip()]
    actions = [_ACTION_TAKEN.findall(line)[1:] for line in lines]  # [0] is the initial "init"
    shared: dict[str, dict[str, Any]] = {}  # the states the traces share, decoded once
    kept = [trace_from_itf(json.loads(lines[i]), f"{path.name}:{i + 1}", cache=shared)
            for i in _strata(actions, head)]
    return kept, frozenset(a for taken in actions for a in taken)


@dataclass(frozen=True)
class CorpusCheck:
    """The committed corpus compared with a fresh one."""

    manifest: Mapping[str, Any]
    fresh: Mapping[str, Any]


def check_corpus(graph: StateGraph, directory: Path | None = None, *,
                 quick: bool = False) -> CorpusCheck:
    """Raise :class:`CorpusMismatch` unless the committed corpus is what ``graph`` gives now.

    The message says which spec files changed, or which figures differ. ``quick`` checks that
    the corpus was made from these spec files, is the bundle its manifest describes, and
    covers a graph with as many states and edges as ``graph``, without making it again.
    """
    system, config = _config(graph)
    where = directory or traces_dir()
    manifest = read_manifest(where, system, config)
    fix = f"run `refsched traces --system {system.name}` and commit traces/"
    changed = [name for name, digest in spec_hashes(system, config).items()
               if manifest.get("spec", {}).get(name) != digest]
    if changed:
        raise CorpusMismatch(f"traces/ was made from another version of {', '.join(changed)}: "
                             f"{fix}")
    bundle = where / str(manifest.get("bundle", system.bundle_of(config)))
    if not bundle.is_file():
        raise CorpusMismatch(f"{bundle} is missing: {fix}")
    if hashlib.sha256(bundle.read_bytes()).hexdigest() != manifest.get("bundle_sha256"):
        raise CorpusMismatch(f"{bundle} is not the file {system.manifest_of(config)} "
                             f"describes: {fix}")
    if quick:
        for key, now in (("states", graph.state_count), ("edges", graph.edge_count)):
            if manifest.get(key) != now:
                raise CorpusMismatch(f"traces/ covers {manifest.get(key)} {key}, the spec and "
                                     f"model now give {now}: {fix}")
        return CorpusCheck(manifest, manifest)
    traces = cover_traces(graph)
    fresh_digest = hashlib.sha256(encode_bundle(traces)).hexdigest()
    fresh = manifest_for(graph, traces, fresh_digest)
    for key in ("states", "edges", "traces", "steps"):
        if manifest.get(key) != fresh[key]:
            raise CorpusMismatch(f"traces/ holds {manifest.get(key)} {key}, the spec and "
                                 f"model now give {fresh[key]}: {fix}")
    if fresh_digest != manifest.get("bundle_sha256"):
        raise CorpusMismatch(f"the traces the spec and model give now differ from {bundle}: "
                             f"{fix}")
    return CorpusCheck(manifest, fresh)
