"""TLC's state graph of one instance is dumped once per test run, not once per test file.

Several files need the same graph (a system's corpus check and its model = spec match, the
`refsched traces --check` command and the edge-kind matches), and with pytest-xdist each file
runs in a process of its own, so a module-scoped fixture cannot share it. The dump (TLC's dot
file and its result) is kept in the run's temporary folder, shared by the workers, under a key
made of every input TLC reads: the config and module names, and the bytes of every file of the
spec folder in use (``REFSCHED_SPEC_DIR`` included, so a test's mutated spec is dumped anew).
The graph is read from the dot file every time, by the code under test, and checked as before;
only the java run is not repeated. A test that stands in for TLC (``REFSCHED_JAVA``,
``REFSCHED_TLA2TOOLS``, or its own ``tlc.run_tlc``) gets a run of its own, as does a dump kept
where its caller asked (``keep``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from refsched.verify import stategraph, tlc

_STAND_INS = ("REFSCHED_JAVA", "REFSCHED_TLA2TOOLS")


def _key(config: str, module: str) -> str:
    digest = hashlib.sha256(f"{config}\0{module}\0".encode())
    folder = tlc.spec_dir()
    for path in sorted(folder.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    if Path(config).is_absolute():  # a config outside the spec folder
        digest.update(Path(config).read_bytes())
    return digest.hexdigest()[:32]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Holds ``path`` (a lock file) while one process dumps; the others wait, then read."""
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def dumping_once(folder: Path) -> Callable[..., tuple[stategraph.TLCStateGraph, Any, int]]:
    """A stand-in for ``stategraph.dump_state_graph`` that keeps each dump in ``folder``."""
    dump = stategraph.dump_state_graph
    run_tlc = tlc.run_tlc

    def dump_state_graph(config: str | None = None, *, workers: int = 2,
                         on_line: Callable[[str], None] | None = None,
                         keep: str | Path | None = None,
                         system: Any = None) -> tuple[stategraph.TLCStateGraph, Any, int]:
        if (keep is not None or tlc.run_tlc is not run_tlc
                or any(os.environ.get(name) for name in _STAND_INS)):
            return dump(config, workers=workers, on_line=on_line, keep=keep, system=system)
        chosen = system if system is not None else stategraph._system(None)
        config = config or chosen.traces_config
        key = _key(str(config), chosen.module_of(config))
        dot, saved = folder / f"{key}.dot", folder / f"{key}.result"
        with _locked(folder / f"{key}.lock"):
            if not saved.exists():
                graph, result, size = dump(config, workers=workers, on_line=on_line,
                                           keep=dot, system=chosen)
                saved.write_bytes(pickle.dumps(result))
                return graph, result, size
        result = pickle.loads(saved.read_bytes())
        if on_line is not None:  # the progress the run printed
            for line in result.output.splitlines():
                on_line(line)
        return stategraph.load_dot(dot, chosen), result, dot.stat().st_size

    return dump_state_graph
