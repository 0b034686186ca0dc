"""The durable scheduler: the TaskScheduler contract in a database, with leases and attempts.

``spec/DurableScheduler.tla`` is the spec and ``docs/durable.md`` the contract.
"""

from .scheduler import DurableInfo, DurableScheduler, DurableStats, Lease, LeaseView
from .worker import Worker

__all__ = ["DurableInfo", "DurableScheduler", "DurableStats", "Lease", "LeaseView", "Worker"]
