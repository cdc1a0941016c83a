"""The graph port and its adapters (FalkorDB embedded, Neo4j distributed)."""
