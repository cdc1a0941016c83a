"""memstream projector services."""
