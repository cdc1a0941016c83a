"""memstream archiver service."""
