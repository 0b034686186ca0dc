"""refsched's own scheduler, recording every line (``refsched.conform.tap RECORD``), whose hello
declares its profile as an adapter written before edge kinds and add_deps does: naming neither
``optional_edges`` nor ``add_deps``. It would take their calls; the record shows none came."""

import sys

from refsched import profile
from refsched.conform import tap

full_to_json = profile.Profile.to_json


def without_edge_flags(self: profile.Profile) -> dict[str, object]:
    return {k: v for k, v in full_to_json(self).items()
            if k not in profile.DECLARED["scheduler"]}


profile.Profile.to_json = without_edge_flags  # type: ignore[method-assign]
sys.exit(tap.main())
