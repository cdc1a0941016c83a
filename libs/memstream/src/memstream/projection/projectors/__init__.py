"""The projectors: shells that write what the pure steps extract from each ledger batch."""

from memstream.projection.projectors.graph import GraphProjector
from memstream.projection.projectors.shell import ProjectorShell, by_topic, read_record
from memstream.projection.projectors.vector import (
    OPTIMIZE_IDLE_S,
    OPTIMIZE_MIN_NEW,
    POINTS_EVERY_S,
    IdleOptimizer,
    VectorProjector,
    event_point,
    rekeyed,
    vector_points,
)

__all__ = [
    "OPTIMIZE_IDLE_S",
    "OPTIMIZE_MIN_NEW",
    "POINTS_EVERY_S",
    "GraphProjector",
    "IdleOptimizer",
    "ProjectorShell",
    "VectorProjector",
    "by_topic",
    "event_point",
    "read_record",
    "rekeyed",
    "vector_points",
]
