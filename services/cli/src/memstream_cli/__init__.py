"""memstream cli service."""
