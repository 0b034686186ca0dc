"""Verification tooling: TLC runner, model-vs-implementation checks. Schedulers never import it."""
