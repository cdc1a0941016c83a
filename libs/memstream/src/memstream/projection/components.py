"""The projectors' names: the ``component`` their metrics, dead letters and logs carry (and
the workers of the table of sinks, ``memstream.sinks``). Apart from the projectors, which
import the stores, so that naming them costs nothing to import."""

GRAPH_PROJECTOR = "graph-projector"
VECTOR_PROJECTOR = "vector-projector"
