"""Phase 2 of checkout: evidence rows, the plan's operation over them, answerability."""

from memstream.checkout.synthesis.synthesize import synthesize

__all__ = ["synthesize"]
