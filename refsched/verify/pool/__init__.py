"""The work-stealing pool's verification adapter, lock-step machine, recorder and driver."""
