"""The work-stealing pool in the oracle: its wire and broken implementations."""
