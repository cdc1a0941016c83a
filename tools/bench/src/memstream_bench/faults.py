"""The processes ``memstream bench chaos`` kills, in order (named here, without the bench)."""

FAULTS = ("tansu", "falkordb", "sequencer", "archiver", "graph-projector", "api")
