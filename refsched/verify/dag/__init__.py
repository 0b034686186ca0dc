"""The DAG TaskScheduler's verification adapter, lock-step machine and recorder."""
