"""The DAG TaskScheduler in the oracle: broken implementations and peer adapters."""
