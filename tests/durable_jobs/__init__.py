"""Task functions the durable tests name as "tests.durable_jobs.jobs:NAME"."""
