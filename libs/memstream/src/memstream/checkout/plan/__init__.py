"""Phase 0 of checkout: the synthesis plan, read deterministically from the query's wording."""

from memstream.checkout.plan.planner import plan_query

__all__ = ["plan_query"]
