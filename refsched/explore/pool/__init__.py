"""Interleaving scenarios of the work-stealing pool."""
