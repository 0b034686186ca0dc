"""Interleaving scenarios of the timer scheduler and TimerRunner."""
