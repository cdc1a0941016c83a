"""The authoritative hash-chained ledger."""
