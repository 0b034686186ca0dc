"""``python -m refsched.serve``: refsched's own schedulers behind the conformance protocol.

The server is :mod:`refsched.conform.server`; this module is its public entry point, and keeps
the names a harness imports (``serve``, ``serve_stdio``, ``main``).
"""

from __future__ import annotations

import sys

from refsched.conform.server import DEFAULT_NAME, MAX_LINE, main, serve, serve_stdio

__all__ = ["DEFAULT_NAME", "MAX_LINE", "main", "serve", "serve_stdio"]

if __name__ == "__main__":
    sys.exit(main())
