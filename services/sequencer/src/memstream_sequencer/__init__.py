"""memstream sequencer service."""
