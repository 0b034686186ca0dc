"""The durable scheduler: the TaskScheduler contract in a database, with leases and attempts.

``spec/DurableScheduler.tla`` is the spec and ``docs/durable.md`` the contract.
"""

from refsched.durable.runner import DurableRunner
from refsched.durable.scheduler import (
    DurableInfo,
    DurableScheduler,
    DurableStats,
    Lease,
    LeaseView,
    StoreView,
    TimeView,
)
from refsched.durable.worker import Worker

__all__ = ["DurableInfo", "DurableRunner", "DurableScheduler", "DurableStats", "Lease",
           "LeaseView", "StoreView", "TimeView", "Worker"]
