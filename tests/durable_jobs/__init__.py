"""Functions that durable tests name as 'tests.durable_jobs.jobs:NAME' (importable from the root)."""
