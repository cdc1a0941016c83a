"""Durable ledger segments on disk: one directory per tenant, fsync'd JSON lines."""
