"""memstream api service."""
