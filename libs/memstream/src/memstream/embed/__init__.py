"""Embedders: offline text -> dense vectors, behind a registry."""
