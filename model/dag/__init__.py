"""The DAG TaskScheduler's reference model: spec/Scheduler.tla, action by action."""
