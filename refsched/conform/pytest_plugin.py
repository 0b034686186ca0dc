"""A pytest plugin: the conformance oracle as test items of a project's own test run, one a phase.

Registered as the ``refsched`` plugin (a ``pytest11`` entry point); without ``--refsched-impl`` it
adds nothing. With it::

    pytest --refsched-impl=mypackage.sched:make_scheduler \\
           [--refsched-system=scheduler|timer|pool|durable] \\
           [--refsched-profile='{"retry": false}'] [--refsched-examples=200]

the session gets ``refsched-conformance::corpus`` (the trace corpus replayed through the factory's
schedulers), ``refsched-conformance::generated`` (Hypothesis-generated calls compared with the
reference model) and, for a system with clause probes, ``refsched-conformance::clauses`` (each
clause of the contract the profile admits, asked on purpose). Each runs
:func:`refsched.conform.oracle.check` in-process for its phase alone and fails with the report:
the verdict and, on a divergence, the counterexample's table of calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from refsched.conform.report import ConformanceReport
from refsched.conform.wire import SYSTEMS
from refsched.profile import Profile, ProfileError, full_profile, profile_from_json

__all__ = ["ConformanceFailure", "ConformanceItem", "ConformanceSuite"]

SUITE = "refsched-conformance"
PHASES = ("corpus", "generated", "clauses")
# the checked factory's spec, the factory, its profile, the examples, its system: set when the
# option is
_TARGET = pytest.StashKey[tuple[str, Any, Profile, int, str, "int | None"]]()


class ConformanceFailure(Exception):
    """A conformance item found the implementation does not conform; carries the report."""

    def __init__(self, report: ConformanceReport) -> None:
        super().__init__(report.headline())
        self.report = report


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("refsched", "refsched conformance oracle")
    group.addoption("--refsched-impl", metavar="MODULE:FACTORY", default=None,
                    help="check this scheduler factory (max_concurrency -> scheduler) against "
                         "refsched's reference model, as the items refsched-conformance::corpus, "
                         "::generated and ::clauses")
    group.addoption("--refsched-system", choices=SYSTEMS, default=SYSTEMS[0],
                    help="the system the factory implements (default: scheduler); for the "
                         "others the factory is called as their production class is: "
                         "TimerScheduler, WorkStealingPool, DurableScheduler")
    group.addoption("--refsched-profile", metavar="JSON", default=None,
                    help="the parts of the contract the implementation keeps, a JSON object of "
                         "profile flags (default: the full contract)")
    group.addoption("--refsched-examples", metavar="N", type=int, default=200,
                    help="Hypothesis examples of the generated item (default 200)")
    group.addoption("--refsched-max-traces", metavar="N", type=int, default=None,
                    help="the corpus item replays only the corpus's first N traces the "
                         "profile admits (default: all of them)")


def pytest_configure(config: pytest.Config) -> None:
    """Check the options now: a bad factory or profile is a usage error, not a failing test."""
    spec = config.getoption("refsched_impl")
    if spec is None:
        return
    from refsched.conform.client import load_factory

    try:
        factory = load_factory(spec)
    except ValueError as e:
        raise pytest.UsageError(f"--refsched-impl: {e}") from None
    raw = config.getoption("refsched_profile")
    system = config.getoption("refsched_system")
    try:
        profile = (full_profile(system) if raw is None
                   else profile_from_json(system, json.loads(raw)))
    except (ValueError, ProfileError) as e:  # JSONDecodeError is a ValueError
        raise pytest.UsageError(f"--refsched-profile: {e}") from None
    examples = config.getoption("refsched_examples")
    if examples < 1:
        raise pytest.UsageError("--refsched-examples must be at least 1")
    max_traces = config.getoption("refsched_max_traces")
    if max_traces is not None and max_traces < 1:
        raise pytest.UsageError("--refsched-max-traces must be at least 1")
    config.stash[_TARGET] = (spec, factory, profile, examples, system, max_traces)


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect items: ours can be selected too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if _TARGET not in config.stash:
        return
    suite = ConformanceSuite.from_parent(session, name=SUITE, nodeid=SUITE)
    items.extend(suite.collect())


class ConformanceSuite(pytest.Collector):
    """The conformance items, one per phase of the oracle the system has."""

    def collect(self) -> Iterator[ConformanceItem]:
        from refsched.conform.probes import has_probes

        system = self.config.stash[_TARGET][4]
        for phase in PHASES:
            if phase != "clauses" or has_probes(system):
                yield ConformanceItem.from_parent(self, name=phase)


class ConformanceItem(pytest.Item):
    """One phase of :func:`~refsched.conform.oracle.check` on the ``--refsched-impl`` factory."""

    def runtest(self) -> None:
        from refsched.conform.client import InProcessImplementation
        from refsched.conform.oracle import check

        spec, factory, profile, examples, system, max_traces = self.config.stash[_TARGET]
        implementation = InProcessImplementation(factory, profile=profile, name=spec,
                                                 system=system)
        report = check(implementation, corpus=self.name == "corpus",
                       examples=examples if self.name == "generated" else 0,
                       clauses=self.name == "clauses", max_traces=max_traces)
        if not report.ok:
            raise ConformanceFailure(report)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        if isinstance(excinfo.value, ConformanceFailure):
            return excinfo.value.report.format()
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return SUITE, None, f"{SUITE}::{self.name}"
