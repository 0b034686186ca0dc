"""Exits with status 0 before answering anything, the hello included."""

import sys

sys.exit(0)
