"""The durable scheduler's tests; jobs.py and failures.py hold the task functions they name."""
