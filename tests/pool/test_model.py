"""The work-stealing pool's reference model on its own, and its spec's variables and names.

Every invariant and action property is checked on every state and step of the traces
instance's graph, and each is shown to fail, alone, on a hand-made state or step that breaks
it. No TLC here: tests/pool/test_tlc.py runs it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any

import pytest

from refsched import WorkStealingPool
from refsched.errors import SchedulerClosedError
from refsched.model.dag.graph import ModelGraph
from refsched.model.pool import (
    ACTION_PROPERTIES,
    ACTIONS,
    INITIAL,
    INVARIANTS,
    Instance,
    Phase,
    PoolSnapshot,
    explore,
    next_steps,
    violated,
    violated_by_step,
    within_bound,
)
from refsched.model.pool.actions import steal_size
from refsched.model.pool.blocking import BLOCKING_ACTIONS
from refsched.verify import system
from refsched.verify.pool.spec import (
    BLOCKING_VARIABLES,
    SPEC_VARIABLES,
    TRACES_CONFIG,
    read_instance,
    show,
    snapshot_of,
    spec_state,
)
from refsched.verify.specstate import NO_TASK, SpecStateError
from refsched.verify.tla import Function, ModelValue
from refsched.verify.tlc import spec_dir
from tests.tlc_support import assert_round_trips_through_tla_text, cfg_section

ACCEPTING, DRAINING, TERMINATED = Phase.ACCEPTING, Phase.DRAINING, Phase.TERMINATED

# spec/MCWorkStealingTraces.cfg, and what TLC finds in it (tests/pool/test_tlc.py)
TRACES = Instance(workers=("w1", "w2"), tasks=("a", "b", "c", "d"), children=("c", "d"))
TRACES_STATES, TRACES_EDGES, TRACES_DEPTH = 3_231, 9_216, 14


def step(s: PoolSnapshot, action: str, *args: Any,
         children: frozenset[Hashable] | None = None, steal_cap: int = 1) -> PoolSnapshot:
    """Take ``action`` in ``s``; it must be enabled."""
    refusal = ACTIONS[action].refused(s, *args, children=children, steal_cap=steal_cap)
    assert refusal is None, refusal
    return ACTIONS[action].step(s, *args, steal_cap=steal_cap)


def run(*steps: tuple[Any, ...], s: PoolSnapshot = INITIAL) -> PoolSnapshot:
    for action, *args in steps:
        s = step(s, action, *args)
    return s


@pytest.fixture(scope="module")
def graph() -> ModelGraph[PoolSnapshot]:
    return explore(TRACES)


# -- The deques ---------------------------------------------------------------------------------

def test_owner_pops_the_newest_task_and_a_thief_steals_the_oldest() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("SubmitExternal", "b", "w1"),
            ("SubmitExternal", "c", "w1"))
    assert s.deque == {"w1": ("a", "b", "c")}
    s = step(s, "Pop", "w1")
    assert s.running == {"w1": "c"} and s.deque == {"w1": ("a", "b")}
    s = step(s, "Steal", "w2", "w1")
    assert s.running == {"w1": "c", "w2": "a"} and s.deque == {"w1": ("b",)}
    assert s.runs == {"a": 1, "c": 1} and s.outstanding == 3


def test_a_child_goes_to_the_bottom_of_its_parents_worker_deque() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("SubmitExternal", "b", "w1"), ("Steal", "w2", "w1"),
            ("SubmitChild", "c", "w2"), ("SubmitChild", "d", "w2"))
    assert s.deque == {"w1": ("b",), "w2": ("c", "d")}
    assert s.parent == {"c": "a", "d": "a"} and s.outstanding == 4
    s = run(("Finish", "w2"), ("Pop", "w2"), s=s)
    assert s.running == {"w2": "d"}  # the child spawned last runs first (depth first)


def test_a_thief_needs_an_empty_deque_no_task_and_a_victim_with_work() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("SubmitExternal", "b", "w2"))
    steal = ACTIONS["Steal"]
    refusal = steal.refused(s, "w2", "w1")
    assert refusal is not None and refusal.error is None and "own deque" in refusal.reason
    s = step(s, "Pop", "w2")
    assert "runs 'b'" in str(steal.refused(s, "w2", "w1"))
    s = step(s, "Finish", "w2")
    assert steal.refused(s, "w1", "w2") is not None  # the thief has work of its own
    assert steal.refused(s, "w2", "w2") is not None  # nor does anyone steal from itself
    assert steal.enabled(s, "w2", "w1")
    s = step(s, "Pop", "w1")
    assert "victim's deque is empty" in str(steal.refused(s, "w2", "w1"))


def test_pop_needs_an_idle_owner_with_tasks() -> None:
    pop = ACTIONS["Pop"]
    assert "empty" in str(pop.refused(INITIAL, "w1"))
    s = run(("SubmitExternal", "a", "w1"), ("SubmitExternal", "b", "w1"), ("Pop", "w1"))
    assert "runs 'b'" in str(pop.refused(s, "w1"))


# -- Submission and shutdown -------------------------------------------------------------------

def test_submit_from_outside_after_shutdown_raises_scheduler_closed_error() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("Shutdown",))
    assert s.phase is DRAINING
    refusal = ACTIONS["SubmitExternal"].refused(s, "b", "w1")
    assert refusal is not None and refusal.error is SchedulerClosedError
    assert issubclass(SchedulerClosedError, RuntimeError)
    assert refusal.reason == "submit('b'): the pool is draining"


def test_a_running_task_spawns_children_while_draining_and_the_pool_waits_for_them() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("Pop", "w1"), ("Shutdown",), ("SubmitChild", "c", "w1"))
    assert s.phase is DRAINING and s.outstanding == 2
    s = step(s, "Finish", "w1")  # the parent ends; its child is still counted
    assert s.phase is DRAINING and s.outstanding == 1
    s = run(("Steal", "w2", "w1"), ("Finish", "w2"), s=s)
    assert s.phase is TERMINATED and s.outstanding == 0
    assert s.finished == {"a", "c"} and not violated(s)


def test_shutdown_with_nothing_outstanding_terminates_at_once_and_twice_is_no_step() -> None:
    s = step(INITIAL, "Shutdown")
    assert s.phase is TERMINATED
    refusal = ACTIONS["Shutdown"].refused(s)
    assert refusal is not None and refusal.error is None
    child = ACTIONS["SubmitChild"].refused(s, "c", "w1")
    assert child is not None and child.error is SchedulerClosedError


def test_finishing_the_last_task_while_accepting_keeps_the_pool_open() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("Pop", "w1"), ("Finish", "w1"))
    assert s.phase is ACCEPTING and s.outstanding == 0


def test_cancel_queued_cancels_only_tasks_not_started() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("SubmitExternal", "b", "w1"),
            ("SubmitExternal", "d", "w2"), ("Pop", "w1"), ("Shutdown",))
    assert "the pool is accepting" in str(ACTIONS["CancelQueued"].refused(INITIAL))
    s = step(s, "CancelQueued")
    assert s.cancelled == {"a", "d"} and s.deque == {} and s.running == {"w1": "b"}
    assert s.phase is DRAINING and s.outstanding == 1
    assert "no task is queued" in str(ACTIONS["CancelQueued"].refused(s))
    s = step(s, "Finish", "w1")
    assert s.phase is TERMINATED and not violated(s)


def test_cancel_queued_with_nothing_running_terminates() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("Shutdown",), ("CancelQueued",))
    assert s.phase is TERMINATED and s.cancelled == {"a"} and s.outstanding == 0


def test_children_names_the_tasks_only_a_running_task_submits() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("Pop", "w1"))
    children = frozenset({"c"})
    assert "is a child" in str(ACTIONS["SubmitExternal"].refused(s, "c", "w2", children=children))
    assert "is a root" in str(ACTIONS["SubmitChild"].refused(s, "b", "w1", children=children))
    # Without the constant (the pool's API), any task may be either.
    assert ACTIONS["SubmitExternal"].enabled(s, "c", "w2")
    assert ACTIONS["SubmitChild"].enabled(s, "b", "w1")
    assert "runs no task" in str(ACTIONS["SubmitChild"].refused(s, "c", "w2"))
    s = step(s, "SubmitChild", "c", "w1")
    assert "already submitted" in str(ACTIONS["SubmitExternal"].refused(s, "c", "w2"))


# -- The state graph ----------------------------------------------------------------------------

def test_the_traces_graph_has_tlcs_counts_and_every_check_holds_on_it(
        graph: ModelGraph[PoolSnapshot]) -> None:
    assert (len(graph.depth), graph.edge_count, max(graph.depth.values())) == (
        TRACES_STATES, TRACES_EDGES, TRACES_DEPTH)
    assert all(within_bound(s, TRACES) for s in graph.depth)
    for s, out in graph.edges.items():
        assert violated(s) == [], show(s)
        for e in out:
            assert violated_by_step(e.source, e.target) == [], (e.action, e.params)


def test_next_steps_names_every_parameter_in_the_specs_order() -> None:
    s = run(("SubmitExternal", "a", "w1"))
    steps = [(name, params) for name, params, _ in next_steps(s, TRACES)]
    assert steps == [
        ("SubmitExternal", {"t": "b", "w": "w1"}), ("SubmitExternal", {"t": "b", "w": "w2"}),
        ("Pop", {"w": "w1"}), ("Steal", {"thief": "w2", "victim": "w1"}), ("Shutdown", {}),
    ]


def test_exactly_the_terminated_states_have_no_step(graph: ModelGraph[PoolSnapshot]) -> None:
    # An accepting pool can always be shut down, and a draining one always has work.
    ends = {s for s, out in graph.edges.items() if not out}
    assert ends == {s for s in graph.depth if s.phase is TERMINATED}


# -- Must-fail: each check catches its own fault, alone ------------------------------------------

BAD_STATES: dict[str, PoolSnapshot] = {
    "TypeOK": PoolSnapshot(phase="accepting"),  # the spec's string, not a Phase
    # a runs on w1 and is still queued on w2
    "ExecutedAtMostOnce": PoolSnapshot(deque={"w2": ("a",)}, running={"w1": "a"}, outstanding=1,
                                       submitted={"a"}, runs={"a": 1}),
    "OutstandingIsQueuedPlusRunning": PoolSnapshot(deque={"w1": ("a",)}, submitted={"a"}),
    "TerminatedOnlyWhenIdle": PoolSnapshot(phase=TERMINATED, running={"w1": "a"}, outstanding=1,
                                           submitted={"a"}, runs={"a": 1}),
    "NoTaskLost": PoolSnapshot(submitted={"a"}),
    "CancelledNeverRan": PoolSnapshot(submitted={"a"}, cancelled={"a"}, runs={"a": 1}),
    # a ran; the pool drains with nothing left and never terminates
    "HaltsOnlyWhenTerminated": PoolSnapshot(phase=DRAINING, submitted={"a"}, finished={"a"},
                                            runs={"a": 1}),
}

_A_RAN = PoolSnapshot(submitted={"a"}, finished={"a"}, runs={"a": 1})
_SIX = PoolSnapshot(deque={"w1": ("a", "b", "c", "d", "e", "f")}, submitted=set("abcdef"),
                    outstanding=6)
BAD_STEPS: dict[str, tuple[PoolSnapshot, PoolSnapshot]] = {
    # c submitted as a's child after a finished
    "ChildCountedBeforeParentCompletes": (
        _A_RAN, _A_RAN.replace(deque={"w1": ("c",)}, outstanding=1, submitted={"a", "c"},
                               parent={"c": "a"})),
    "OwnerTakesBottom": (
        PoolSnapshot(deque={"w1": ("a", "b")}, outstanding=2, submitted={"a", "b"}),
        PoolSnapshot(deque={"w1": ("b",)}, running={"w1": "a"}, outstanding=2,
                     submitted={"a", "b"}, runs={"a": 1})),
    "ThiefTakesTop": (
        PoolSnapshot(deque={"w2": ("a", "b")}, outstanding=2, submitted={"a", "b"}),
        PoolSnapshot(deque={"w2": ("a",)}, running={"w1": "b"}, outstanding=2,
                     submitted={"a", "b"}, runs={"b": 1})),
    "RootsOnlyWhileAccepting": (
        _A_RAN.replace(phase=DRAINING, running={"w1": "a"}, finished=set(), outstanding=1),
        _A_RAN.replace(phase=DRAINING, running={"w1": "a"}, finished=set(), outstanding=2,
                       deque={"w2": ("b",)}, submitted={"a", "b"})),
    "PhasesInOrder": (
        PoolSnapshot(phase=DRAINING, deque={"w1": ("a",)}, outstanding=1, submitted={"a"}),
        PoolSnapshot(phase=ACCEPTING, deque={"w1": ("a",)}, outstanding=1, submitted={"a"})),
    # w2 steals a, b, c, d's top three but keeps them newest on top
    "StolenInOrder": (
        _SIX,
        _SIX.replace(deque={"w1": ("d", "e", "f"), "w2": ("c", "b")}, running={"w2": "a"},
                     runs={"a": 1})),
    # w2 takes four of six
    "StealTakesAtMostHalf": (
        _SIX,
        _SIX.replace(deque={"w1": ("e", "f"), "w2": ("b", "c", "d")}, running={"w2": "a"},
                     runs={"a": 1})),
}


def test_a_batch_steal_takes_the_cap_runs_the_oldest_and_keeps_the_rest_in_order() -> None:
    s = _SIX.replace(deque={"w1": ("a", "b", "c", "d", "e", "f", "g", "h")},
                     submitted=set("abcdefgh"), outstanding=8)
    # eight tasks: a batch of the cap up to 4, a single steal past it (and with cap 1)
    for cap, kept in ((1, ()), (2, ("b",)), (3, ("b", "c")), (4, ("b", "c", "d")), (5, ()),
                      (32, ())):
        name = "StealBatch" if kept else "Steal"
        other = "Steal" if kept else "StealBatch"
        assert ACTIONS[other].refused(s, "w2", "w1", steal_cap=cap) is not None
        after = ACTIONS[name].step(s, "w2", "w1", steal_cap=cap)
        assert after.running == {"w2": "a"} and after.deque.get("w2", ()) == kept
        assert after.deque["w1"] == ("b", "c", "d", "e", "f", "g", "h")[len(kept):]
        assert violated(after) == [] and violated_by_step(s, after) == []
        # the thief pops the newest it kept; another thief takes the oldest
        if kept:
            popped = ACTIONS["Pop"].step(step(after, "Finish", "w2"), "w2")
            assert popped.running["w2"] == kept[-1]
            stolen = ACTIONS["Steal"].step(after, "w3", "w2", steal_cap=cap)
            assert stolen.running["w3"] == kept[0]


@pytest.mark.parametrize(("length", "taken"), [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 3),
                                               (7, 3), (8, 3), (40, 3)])
def test_a_short_deque_gives_a_single_steal_and_the_cap_bounds_a_long_one(
        length: int, taken: int) -> None:
    tasks = tuple(f"t{i}" for i in range(length))
    s = PoolSnapshot(deque={"w1": tasks}, submitted=tasks, outstanding=length)
    assert steal_size(length, 3) == taken
    name = "Steal" if taken == 1 else "StealBatch"
    after = step(s, name, "w2", "w1", steal_cap=3)
    assert (after.running["w2"], *after.deque.get("w2", ())) == tasks[:taken]
    assert 2 * taken <= length or taken == 1


def test_every_check_has_a_must_fail_case() -> None:
    assert set(BAD_STATES) == set(INVARIANTS)
    assert set(BAD_STEPS) == set(ACTION_PROPERTIES)


@pytest.mark.parametrize("name", sorted(BAD_STATES))
def test_a_bad_state_violates_exactly_its_invariant(name: str) -> None:
    assert violated(BAD_STATES[name]) == [name]


@pytest.mark.parametrize("name", sorted(BAD_STEPS))
def test_a_bad_step_violates_exactly_its_action_property(name: str) -> None:
    before, after = BAD_STEPS[name]
    assert violated(before) == [] and violated(after) == []
    assert violated_by_step(before, after) == [name]


def test_the_pool_closing_itself_when_idle_breaks_phases_in_order() -> None:
    busy = run(("SubmitExternal", "a", "w1"), ("Pop", "w1"))
    done = step(busy, "Finish", "w1").replace(phase=TERMINATED)
    assert violated(done) == [] and violated_by_step(busy, done) == ["PhasesInOrder"]


# -- The state value ----------------------------------------------------------------------------

def test_a_snapshot_has_one_normal_form() -> None:
    plain = PoolSnapshot(deque={"w1": ("a",)}, submitted={"a"}, outstanding=1)
    padded = PoolSnapshot(deque={"w1": ("a",), "w2": ()}, runs={"a": 0}, submitted=["a"],
                          outstanding=1)
    assert plain == padded and hash(plain) == hash(padded)
    assert plain.deque == {"w1": ("a",)} and padded.runs == {}
    with pytest.raises(TypeError):
        plain.deque["w2"] = ("b",)


# -- The spec's variables ------------------------------------------------------------------------

def test_read_instance_reads_every_config() -> None:
    assert read_instance(TRACES_CONFIG) == TRACES
    assert read_instance("MCWorkStealing.cfg") == Instance(
        ("w1", "w2", "w3"), ("a", "b", "c", "d", "e", "f", "g"), ("e", "f", "g"))
    assert read_instance("MCWorkStealingLiveness.cfg") == Instance(
        ("w1", "w2"), ("a", "b", "c", "d", "e"), ("c", "d", "e"))
    assert read_instance("MCWorkStealingBatch.cfg") == Instance(
        ("w1", "w2", "w3"), ("a", "b", "c", "d", "e", "f", "g"), ("e", "f", "g"), steal_cap=3)
    assert TRACES.roots == ("a", "b")


def test_spec_state_and_snapshot_of_are_inverse_through_tla_text(
        graph: ModelGraph[PoolSnapshot]) -> None:
    workers = [ModelValue(w) for w in TRACES.workers]
    tasks = [ModelValue(t) for t in TRACES.tasks]
    assert_round_trips_through_tla_text(graph.depth, lambda s: spec_state(s, workers, tasks),
                                        snapshot_of, SPEC_VARIABLES)


def test_spec_state_writes_every_worker_and_task() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("Pop", "w1"), ("SubmitChild", "c", "w1"))
    values = spec_state(s, ["w1", "w2"], ["a", "c"])
    assert values["deque"] == {"w1": ("c",), "w2": ()}
    assert values["running"] == {"w1": "a", "w2": NO_TASK}
    assert values["runs"] == {"a": 1, "c": 0}
    assert values["parent"] == {"a": NO_TASK, "c": "a"}
    assert values["phase"] == "accepting" and values["submitted"] == {"a", "c"}
    with pytest.raises(SpecStateError, match="not in Tasks"):
        spec_state(s, ["w1", "w2"], ["a"])
    with pytest.raises(SpecStateError, match="not in Workers"):
        spec_state(s, ["w2"], ["a", "c"])


def test_snapshot_of_refuses_states_of_another_shape() -> None:
    good: Mapping[str, Any] = spec_state(INITIAL, [ModelValue("w1")], [ModelValue("a")])
    for name, value in [
        ("phase", "closed"),
        ("deque", Function({ModelValue("w1"): frozenset()})),  # not a sequence
        ("running", Function({})),  # not over the workers of deque
        ("runs", Function({ModelValue("a"): -1})),
        ("parent", Function({})),  # not over the tasks of runs
        ("submitted", (ModelValue("a"),)),  # not a set
        ("outstanding", True),
    ]:
        with pytest.raises(SpecStateError):
            snapshot_of({**good, name: value})
    with pytest.raises(SpecStateError):
        snapshot_of({k: v for k, v in good.items() if k != "parent"})
    # ITF writes NoTask as a string
    itf = {**good, "running": Function({"w1": "NoTask"}), "deque": Function({"w1": ()})}
    assert snapshot_of(itf) == INITIAL


def test_show_names_every_worker_deque_and_parent() -> None:
    s = run(("SubmitExternal", "a", "w1"), ("SubmitExternal", "b", "w1"), ("Pop", "w1"),
            ("SubmitChild", "c", "w1"))
    assert show(s) == (
        "accepting outstanding=3 submitted={a, b, c} finished={} cancelled={}\n"
        "  w1: running b, deque (top first) <<a, c>>\n"
        "  runs: b=1\n"
        "  parent: c spawned by b")
    assert show(INITIAL) == "accepting outstanding=0 submitted={} finished={} cancelled={}"


# -- One vocabulary: spec, configs and model name the same things --------------------------------

SPEC = spec_dir() / "WorkStealing.tla"


def test_spec_and_model_have_the_same_actions() -> None:
    block = SPEC.read_text().split("\nNext ==", 1)[1].split("\n\\*", 1)[0]
    names = re.findall(r"(?:\\/|:)\s*([A-Z]\w*)\b(?!\s*\\in)", block)
    assert set(names) == set(ACTIONS) | set(BLOCKING_ACTIONS)


def test_configs_check_the_models_invariants_and_properties() -> None:
    # the batch steals' properties where batch steals happen (StealCap > 1)
    batch = {"StolenInOrder", "StealTakesAtMostHalf"}
    for config in ("MCWorkStealing.cfg", TRACES_CONFIG, "MCWorkStealingLiveness.cfg",
                   "MCWorkStealingBatch.cfg"):
        assert cfg_section(config, "INVARIANTS") == set(INVARIANTS)
        assert cfg_section(config, "PROPERTIES") - {
            "EverySubmittedTaskRuns", "ShutdownTerminates"} == set(ACTION_PROPERTIES) - (
            set() if read_instance(config).steal_cap > 1 else batch)
    assert cfg_section("MCWorkStealingLiveness.cfg", "PROPERTIES") >= {
        "EverySubmittedTaskRuns", "ShutdownTerminates"}


def test_every_named_check_is_defined_in_the_spec() -> None:
    text = SPEC.read_text()
    for name in [*INVARIANTS, *ACTION_PROPERTIES, "EverySubmittedTaskRuns",
                 "ShutdownTerminates", "FairSpec"]:
        assert re.search(rf"^{name} ==", text, re.MULTILINE), name


# -- The system the generic tools see ------------------------------------------------------------

def test_the_pool_system_is_registered_for_the_verification_tools() -> None:
    pool = system.get("pool")
    assert pool.name == "pool" and pool.mc_module == "MCWorkStealing.tla"
    assert pool.variables == (*SPEC_VARIABLES, *BLOCKING_VARIABLES) and pool.initial == INITIAL
    assert pool.optional_variables == BLOCKING_VARIABLES
    assert pool.read_instance(TRACES_CONFIG) == TRACES
    assert pool.constants(TRACES) == {"Workers": ["w1", "w2"], "Tasks": ["a", "b", "c", "d"],
                                      "Children": ["c", "d"], "StealCap": 1}
    assert pool.describe("Steal", {"thief": "w2", "victim": "w1"}) == "Steal(thief=w2, victim=w1)"
    assert system.by_spec_variables(["deque", "outstanding"]) is pool
    assert pool.name in system.REPLAYABLE
    assert pool.default_factory() is WorkStealingPool
    assert pool.constants_error({"Workers": []}) is not None
    assert pool.constants_error({"Workers": ["w1", "w2"]}) is None
