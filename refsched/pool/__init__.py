"""The work-stealing pool: per-worker deques, owner LIFO, thieves FIFO."""

from refsched.pool.pool import WorkStealingPool

__all__ = ["WorkStealingPool"]
