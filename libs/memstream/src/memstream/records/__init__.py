"""Records every layer shares: what the projections hold, latent artifacts, checkout packets.

Pydantic models and constants only, no behaviour that reaches a store: graph, vectors,
projection, latent, learning and checkout all speak in them, so they sit below all of them.
"""
