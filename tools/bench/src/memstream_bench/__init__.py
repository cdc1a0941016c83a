"""Benchmarks through the real pipeline, each in its own throw-away stack."""
