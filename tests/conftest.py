"""Shared test configuration: Hypothesis profiles.

``ci`` (chosen when CI is set) runs more examples; ``dev`` keeps local runs quick. Failures print
the blob that replays them (``@reproduce_failure``), and the seed is printed with ``-s``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=300, stateful_step_count=40, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=100, stateful_step_count=30, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
