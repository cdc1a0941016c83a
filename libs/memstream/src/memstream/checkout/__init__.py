"""Checkout: answer-first, cited packets over the projections (DESIGN.md §3.4)."""
