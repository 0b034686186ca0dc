"""Huey's side of the durable benchmark: a no-op task on SqliteHuey (the file in HUEY_DB)."""

import os

from huey import SqliteHuey

huey = SqliteHuey(filename=os.environ.get("HUEY_DB", "huey.db"))


@huey.task()
def noop() -> int:
    # Huey stores no result for None, and the clock stops at the last result.
    return 1
