"""The vector-index port and its adapters (Qdrant Edge embedded, Qdrant server)."""
