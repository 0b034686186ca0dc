"""Where one contender spends its time: cProfile over every thread it starts, merged.

    python bench/where_time_goes.py runner_refsched --nodes 20000
    python bench/where_time_goes.py core_refsched --nodes 200000 --sort tottime --top 30

cProfile sees only the thread that enables it, so each thread started during the run enables
a profiler of its own on its first event (``threading.setprofile``); the per-thread profiles are
added into one table. Profiling slows the code several times over: read the table for shares
of the time, not for the time itself; ``run.py`` measures that.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

import contenders
from graphs import layered


def profile(name: str, nodes: int) -> pstats.Stats:
    """Run contender ``name`` on a layered DAG of ``nodes`` nodes under cProfile."""
    contender = getattr(contenders, name)
    graph = layered(nodes)
    profiles: list[cProfile.Profile] = []

    def start_in_thread(frame: FrameType, event: str, arg: Any) -> None:
        sys.setprofile(None)  # cProfile installs its own hook for this thread
        thread_profile = cProfile.Profile()
        profiles.append(thread_profile)
        thread_profile.enable()

    main = cProfile.Profile()
    threading.setprofile(start_in_thread)
    try:
        main.enable()
        finished = contender(graph)
        main.disable()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    if finished != len(graph):
        raise SystemExit(f"{name} finished {finished} of {len(graph)} nodes")
    stats = pstats.Stats(main, stream=io.StringIO())
    for thread_profile in profiles:
        thread_profile.disable()
        stats.add(thread_profile)
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("contender", help="a function of bench/contenders.py, e.g. runner_refsched")
    parser.add_argument("--nodes", type=int, default=20_000, help="layered DAG size (20,000)")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime)")
    parser.add_argument("--top", type=int, default=25, help="rows to print (25)")
    args = parser.parse_args(argv)
    if not callable(getattr(contenders, args.contender, None)):
        parser.error(f"no contender {args.contender!r} in bench/contenders.py")
    stats = profile(args.contender, args.nodes)
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.strip_dirs().sort_stats(args.sort).print_stats(args.top)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
