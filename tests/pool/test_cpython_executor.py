"""CPython's own generic executor tests, run against ``refsched.WorkStealingPool``.

CPython's ``Lib/test/test_concurrent_futures.py`` (3.11, as Debian's ``libpython3.11-testsuite``
installs it) writes the behaviour every ``concurrent.futures.Executor`` shares as mixins:
``ExecutorShutdownTest``, ``WaitTests``, ``AsCompletedTests``, ``ExecutorTest``. It runs each
with an ``executor_type`` mixin; here that type is the pool (:data:`POOLS`: with single steals,
and with batch steals), so the pool passes the tests ``ThreadPoolExecutor`` and
``ProcessPoolExecutor`` pass. The file is loaded by its path: it is not on this interpreter's
path, and only its mixins are used (its own test classes, which run CPython's executors, are not
collected).

:data:`NOT_APPLICABLE` lists the tests of those mixins that do not apply to the pool, each with
why. Without the file the tests are skipped, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import unittest
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from refsched import WorkStealingPool

CPYTHON_TESTS = Path("/usr/lib/python3.11/test/test_concurrent_futures.py")
"""Where ``libpython3.11-testsuite`` installs CPython's executor tests."""

MIXINS = ("ExecutorShutdownTest", "WaitTests", "AsCompletedTests", "ExecutorTest")
"""CPython's generic mixins: every test in them runs against the pool, but those below."""

_SUBPROCESS = ("the child interpreter it starts imports the executor by name from "
               "concurrent.futures, where the pool is not")
NOT_APPLICABLE: dict[str, str] = {
    # ExecutorShutdownTest
    "test_interpreter_shutdown": _SUBPROCESS,
    "test_submit_after_interpreter_shutdown": _SUBPROCESS,
    "test_hang_gh83386": _SUBPROCESS,
    "test_cancel_futures": (
        "it asserts that some of 50 tasks started before shutdown(cancel_futures=True), which "
        "ThreadPoolExecutor gets from starting a thread inside submit() (that waits, letting "
        "the thread take a task); the pool's workers run from its construction, so all 50 may "
        "still be queued and be cancelled, as the spec's CancelQueued allows"),
    # ExecutorTest
    "test_max_workers_negative": (
        "it matches ThreadPoolExecutor's message, 'max_workers must be greater than 0'; the pool "
        "raises the same type (InvalidArgumentError is a ValueError), naming its own parameter, "
        "workers (tests/pool/test_pool.py checks that)"),
}
"""Tests of :data:`MIXINS` that cannot apply to the pool, and why."""


class PoolUnderTest(WorkStealingPool):
    """The pool, built as CPython's tests build an executor: ``max_workers`` is ``workers``."""

    def __init__(self, max_workers: int | None = None, **kwargs: Any) -> None:
        super().__init__(workers=max_workers, **kwargs)


class BatchStealingPoolUnderTest(PoolUnderTest):
    """The same with batch steals (``steal="half"``)."""

    def __init__(self, max_workers: int | None = None, **kwargs: Any) -> None:
        super().__init__(max_workers, steal="half", **kwargs)


POOLS: dict[str, type[WorkStealingPool]] = {"Pool": PoolUnderTest,
                                            "BatchStealingPool": BatchStealingPoolUnderTest}
"""The executors the mixins run against, by the name their test classes start with."""


def _load() -> ModuleType | None:
    if not CPYTHON_TESTS.is_file():
        return None
    spec = importlib.util.spec_from_file_location("cpython_test_concurrent_futures",
                                                  CPYTHON_TESTS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpythons_executor_tests_are_installed() -> None:
    if CPYTHON_TESTS.is_file():
        return
    message = f"{CPYTHON_TESTS} is missing: apt-get install libpython3.11-testsuite"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _pool_case(cpython: ModuleType, pool_name: str, mixin_name: str) -> type[unittest.TestCase]:
    mixin = getattr(cpython, mixin_name)

    class PoolMixin(cpython.ExecutorMixin):  # type: ignore[name-defined,misc]
        executor_type = POOLS[pool_name]

    skipped = {name: unittest.skip(f"not applicable to the pool: {reason}")(getattr(mixin, name))
               for name, reason in NOT_APPLICABLE.items() if hasattr(mixin, name)}
    return type(f"Test{pool_name}{mixin_name}", (PoolMixin, mixin, cpython.BaseTestCase),
                {**skipped, "__module__": __name__})


_CPYTHON = _load()
if _CPYTHON is not None:
    for _pool in POOLS:
        for _name in MIXINS:
            globals()[f"Test{_pool}{_name}"] = _pool_case(_CPYTHON, _pool, _name)


def test_every_test_listed_as_not_applicable_is_one_of_the_mixins() -> None:
    if _CPYTHON is None:
        pytest.skip(f"{CPYTHON_TESTS} is missing")
    names = {n for m in MIXINS for n in dir(getattr(_CPYTHON, m)) if n.startswith("test_")}
    assert set(NOT_APPLICABLE) <= names
