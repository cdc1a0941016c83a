"""The authoritative hash-chained ledger (DESIGN.md §3.2)."""
