"""Huey's side of the durable benchmark: a no-op task on SqliteHuey (the file in HUEY_DB)."""

import os

from huey import SqliteHuey

# The busy timeout of refsched's SQLite store (60 s; Huey's default is 5 s): each side waits as
# long for the other processes' write locks.
huey = SqliteHuey(filename=os.environ.get("HUEY_DB", "huey.db"), timeout=60)


@huey.task()
def noop() -> int:
    # Huey stores no result for None, and the clock stops at the last result.
    return 1
