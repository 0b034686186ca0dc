"""The durable scheduler: the TaskScheduler contract in a database, with leases and attempts.

``spec/DurableScheduler.tla`` is the spec and ``docs/durable.md`` the contract.
"""

from .runner import DurableRunner
from .scheduler import (
    DurableInfo,
    DurableScheduler,
    DurableStats,
    Lease,
    LeaseView,
    StoreView,
)
from .worker import Worker

__all__ = ["DurableInfo", "DurableRunner", "DurableScheduler", "DurableStats", "Lease",
           "LeaseView", "StoreView", "Worker"]
