"""Memory for agent frameworks: adapters that let them keep memory in memstream."""
