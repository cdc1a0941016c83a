"""memstream retrospective service."""
