"""Shared test configuration: Hypothesis profiles.

``ci`` (chosen when CI is set) runs more examples; ``dev`` keeps local runs quick. Failures print
the blob that replays them (``@reproduce_failure``), and the seed is printed with ``-s``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pgserver import PostgresCluster

settings.register_profile(
    "ci", max_examples=300, stateful_step_count=40, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=100, stateful_step_count=30, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# -- A real PostgreSQL server (tests/pgserver.py) ---------------------------------------------
# Only tests that ask for these fixtures start (or attach to) a server. In CI, .ci/run starts one
# and names it in REFSCHED_TEST_PGDATA / REFSCHED_TEST_PGHOST; elsewhere the session starts its own
# in a temporary directory. No server: the tests are skipped, but under CI=true they fail.

_pg_database_numbers = itertools.count(1)


def _postgres_unavailable(reason: object) -> NoReturn:
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"no PostgreSQL server (required when CI=true): {reason}")
    pytest.skip(f"no PostgreSQL server: {reason}")


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A running :class:`pgserver.PostgresCluster` for the whole session."""
    try:
        import psycopg  # noqa: F401  (the SQL helpers and the tests need it)
        from pgserver import PostgresCluster
    except ImportError as exc:
        _postgres_unavailable(exc)
    attached = PostgresCluster.from_env()
    if attached is not None:
        try:
            attached.start()  # no-op when running, as it should be
        except Exception as exc:
            _postgres_unavailable(exc)
        yield attached
        return
    base = tempfile.mkdtemp(prefix="refsched-pg-")
    cluster = PostgresCluster(base)
    try:
        try:
            cluster.start()
        except Exception as exc:
            _postgres_unavailable(exc)
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop()
        if cluster.running:
            with contextlib.suppress(Exception):
                cluster.kill()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """The URL of a fresh database (``test_<pid>_<n>``), dropped after the test."""
    if not postgres_cluster.running:  # an earlier test stopped or killed it
        postgres_cluster.start()
    name = f"test_{os.getpid()}_{next(_pg_database_numbers)}"
    url: str = postgres_cluster.create_database(name)
    yield url
    with contextlib.suppress(Exception):
        if not postgres_cluster.running:
            postgres_cluster.start()
        postgres_cluster.drop_database(name)  # terminates its backends first
