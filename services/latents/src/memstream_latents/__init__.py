"""Latent builder service."""
