"""Phase 1 of checkout: a wide candidate pool from every lane, fused by RRF."""

from memstream.checkout.retrieve.lanes import Retriever

__all__ = ["Retriever"]
