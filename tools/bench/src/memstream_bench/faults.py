"""The processes ``memstream bench chaos`` kills, in order (named here, without the bench)."""

from memstream.sinks import SEQUENCER, sink

FAULTS = ("tansu", "falkordb", SEQUENCER, sink("archive").component, sink("graph").component, "api")
