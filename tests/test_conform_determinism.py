"""The oracle's generated phase makes the same calls with the same seed, in every process.

For each system, a correct and a broken implementation are judged twice with one seed, in two
processes whose ``PYTHONHASHSEED`` differs (a string's ``hash()`` is not the same in them, nor,
with what each allocated before, a function's address). Every call the lock-step machine makes
on the implementation is recorded, with its arguments; the two records must be equal call for
call, and the verdicts too. Hypothesis labels strategies by ``hash()``, and its generator and
shrinker follow the labels; ``refsched.verify.stable.stable_labels`` labels them by name
(``test_a_label_is_the_same_in_two_processes`` fails without it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

# Runs in a fresh process: judge IMPL (a class) of SYSTEM with the oracle's generated phase,
# recording every public call made on it, and print the verdict and the calls as JSON.
RECORD = r"""
import json, re, sys
from refsched.loading import load_factory
from refsched.conform import client, oracle
from refsched.verify import stable

system, spec, seed, examples, steps, stable_on = sys.argv[1:7]
calls = []
ADDRESS = re.compile(r" at 0x[0-9a-f]+|refsched-[a-z-]+-[a-z0-9_]+")


def recording(cls):
    def wrap(name, method):
        def call(self, *args, **kwargs):
            shown = [a for a in args if not (isinstance(a, str) and a.startswith("sqlite:"))]
            calls.append(ADDRESS.sub("", f"{name}{shown!r}{sorted(kwargs.items())!r}"))
            return method(self, *args, **kwargs)
        return call
    names = {n for k in cls.__mro__ if k is not object for n, v in vars(k).items()
             if callable(v) and not n.startswith("_")}
    body = {n: wrap(n, getattr(cls, n)) for n in sorted(names)}
    body["__init__"] = wrap("new", cls.__init__)
    return type(cls.__name__, (cls,), body)


if stable_on == "0":  # the labels Hypothesis computes by itself, from hash()
    import contextlib
    stable.stable_labels = contextlib.nullcontext
    oracle.stable_labels = contextlib.nullcontext
    import refsched.conform.system_phases as phases
    phases.stable_labels = contextlib.nullcontext
impl = client.InProcessImplementation(recording(load_factory(spec)), system=system, name=spec)
report = oracle.check(impl, examples=int(examples), steps=int(steps), corpus=False,
                      seed=int(seed))
print(json.dumps({"verdict": report.verdict, "calls": calls}))
"""

# (system, a correct class, a broken class, examples: enough for the broken one to be found with
# SEED; the counterexample is then shrunk, which makes most of the calls)
CASES = [
    ("scheduler", "refsched:TaskScheduler", "refsched.conform.dag.broken:ClaimsNewestFirst", 30),
    ("timer", "refsched:TimerScheduler",
     "refsched.conform.timer.broken:RescheduleReplacesRunning", 100),
    ("pool", "refsched:WorkStealingPool", "refsched.conform.pool.broken:ThiefLeavesLastTask", 30),
    ("durable", "refsched.durable:DurableScheduler",
     "refsched.conform.durable.broken:CancelIgnoresRunning", 30),
]
SEED = 0
STEPS = 20


def judged(system: str, spec: str, hash_seed: int, examples: int,
           stable: bool = True) -> dict[str, Any]:
    """The verdict and the calls of one judgement of ``spec``, in a fresh process."""
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    done = subprocess.run(
        [sys.executable, "-c", RECORD, system, spec, str(SEED), str(examples), str(STEPS),
         "1" if stable else "0"],
        capture_output=True, text=True, timeout=600, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def first_difference(a: list[str], b: list[str]) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
              min(len(a), len(b)))
    return f"call {at + 1} of {len(a)} / {len(b)}: {a[at:at + 2]} vs {b[at:at + 2]}"


@pytest.mark.parametrize(("system", "correct", "broken", "examples"), CASES,
                         ids=[c[0] for c in CASES])
def test_a_seed_makes_the_same_calls_in_two_processes(system: str, correct: str, broken: str,
                                                      examples: int) -> None:
    for spec, verdict in ((correct, "conforms"), (broken, "diverges")):
        first, second = judged(system, spec, 1, examples), judged(system, spec, 2, examples)
        assert first["verdict"] == second["verdict"] == verdict, spec
        assert len(first["calls"]) > 50
        assert first["calls"] == second["calls"], (
            f"{spec}: {first_difference(first['calls'], second['calls'])}")


# Prints the labels of strategies the lock-step machines make: ids sampled (a string's hash
# depends on PYTHONHASHSEED) and fresh lambdas sampled (a function's hash is its address).
LABELS = r"""
import sys
from hypothesis import strategies as st
from refsched.verify.stable import stable_labels

def labels():
    ids = st.sampled_from(("a", "b", "c", "d"))
    calls = [st.sampled_from([("bad", lambda: None)]) for _ in range(3)]
    return [ids.label, *(c.label for c in calls)]

if sys.argv[1] == "1":
    with stable_labels():
        print(labels())
else:
    print(labels())
"""


@pytest.mark.parametrize("stable", [True, False])
def test_a_label_is_the_same_in_two_processes(stable: bool) -> None:
    def labels(hash_seed: int) -> list[int]:
        done = subprocess.run([sys.executable, "-c", LABELS, "1" if stable else "0"],
                              capture_output=True, text=True, timeout=120, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(hash_seed)})
        found: list[int] = json.loads(done.stdout)
        return found

    first, second = labels(1), labels(2)
    if stable:
        assert first == second and len(set(first[1:])) == 1
    else:  # what Hypothesis does by itself: the labels the oracle must not depend on
        assert first[0] != second[0] and len(set(first[1:])) > 1
