"""The durable scheduler's verification adapter, lock-step machines, history and validation."""
