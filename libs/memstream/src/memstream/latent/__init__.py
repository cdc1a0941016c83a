"""Latent artifacts: the model, the deterministic builder and the memory weave."""
