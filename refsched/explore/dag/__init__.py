"""Interleaving scenarios of the TaskScheduler and Runner."""
