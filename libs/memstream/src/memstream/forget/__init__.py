"""Forgetting: the purge of a data subject (tombstone, report) across every store."""
