"""The core TaskScheduler's cost as a count of machine instructions, not a time: what a change
costs the core, told apart from a machine whose speed moves between runs.

``python bench/instructions.py [--tree DIR] [--n 1000,10000] [--gc]`` runs, under valgrind's
callgrind (the Debian package ``valgrind``), the core workload of bench/run.py
(``contenders.core_refsched``: submit, start, then ready() / complete() until nothing is
ready) on bench/graphs.py's layered DAG of each size, and prints the instructions it took:
those of the whole process less those of the same process that only builds the graph. DIR
(default: this checkout) is the checkout whose refsched and bench/ are run, so that two
checkouts compare, the ratio being the change's cost. The count repeats exactly from run to
run (``PYTHONHASHSEED=0``; the cyclic garbage collector off unless ``--gc``, as its passes
depend on what else the process allocated); it is blind to what instructions cost (cache
misses, memory), so it complements the timed rounds of bench/run.py and replaces none.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = """
import gc, sys
sys.path[:0] = ["bench"]
import contenders, graphs
if sys.argv[3] == "off":
    gc.disable()
graph = graphs.layered(int(sys.argv[1]))
if sys.argv[2] == "run":
    contenders.core_refsched(graph)
"""

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def instructions(tree: Path, n: int, mode: str, gc: bool) -> int:
    """Instructions of one process of ``_CHILD`` in ``tree``: ``mode`` "run" or "graph"."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "-c", _CHILD, str(n), mode, "on" if gc else "off"],
        cwd=tree, env=env, capture_output=True, text=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind in {tree} (n={n}, {mode}) failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE.parent,
                        help="the checkout to run (default: this one)")
    parser.add_argument("--n", default="1000,10000", help="graph sizes (default 1000,10000)")
    parser.add_argument("--gc", action="store_true", help="leave the garbage collector on")
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    if not (tree / "bench" / "contenders.py").is_file():
        parser.error(f"{tree} has no bench/contenders.py: not a refsched checkout")
    try:
        sizes = [int(n) for n in args.n.split(",")]
    except ValueError:
        parser.error(f"--n {args.n!r}: sizes are ints, comma-separated")
    if not sizes or min(sizes) < 1:
        parser.error(f"--n {args.n!r}: each size is an int >= 1")
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    for n in sizes:
        try:
            cost = (instructions(tree, n, "run", args.gc)
                    - instructions(tree, n, "graph", args.gc))
        except RuntimeError as e:
            print(f"bench/instructions.py: {e}", file=sys.stderr)
            return 1
        print(f"core, layered DAG, V={n:,}: {cost:,} instructions ({cost / n:,.0f} per task)"
              f"{'' if args.gc else ', collector off'}; {tree}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
