"""The timer scheduler's verification adapter, lock-step machine and recorder."""
