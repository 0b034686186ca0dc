"""The durable scheduler in the oracle: its wire, broken implementations and peer adapter."""
