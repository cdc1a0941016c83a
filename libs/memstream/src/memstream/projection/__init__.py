"""Projections of the ledger: records derived by extraction, written to graph and vectors."""
