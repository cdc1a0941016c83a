"""Coverage-first order for questions whose answer is spread over sessions (pure).

The fused top of an aggregation question ("what activities does Ana do?") is often one
cluster: the best hit and its neighbours, all from the session that scored best. In the
head, each item's weight is halved for every better item of its own session, so each
session's strongest item comes before a second from any session unless that second is more
than twice as strong. A session is a stream on one day, so one long stream over many days
still spreads, and the turns of one sitting count together.
"""

from __future__ import annotations

from collections import Counter

from memstream.checkout.plan.spread import spreads
from memstream.records.packet import Candidate, SynthesisPlan
from memstream.times import day_of

COVERAGE_TOP = 30  # the fused items reordered (as many as rerank reads); the rest follow
# Each better item of the same session halves an item's weight in the order: a session's
# second item still beats a weak first from elsewhere (dev LoCoMo: a strict one per session
# first lost more evidence pairs said in one sitting than it found in other sittings).
SESSION_DECAY = 0.5


def session_of(c: Candidate) -> tuple[str, str]:
    """The sitting ``c`` was said in: its stream and its day (UTC)."""
    return c.ref.stream, day_of(c.occurred_at)


def covered(plan: SynthesisPlan, fused: list[Candidate]) -> list[Candidate]:
    """``fused`` in coverage-first order when ``plan`` asks for an aggregation, else as is."""
    return by_coverage(fused) if spreads(plan.query, plan.operation) else fused


def by_coverage(
    fused: list[Candidate], top: int = COVERAGE_TOP, decay: float = SESSION_DECAY
) -> list[Candidate]:
    """``fused`` with its first ``top`` items ordered session-first: each item's score is
    weighed down by ``decay`` once for every better item of its session, and the head is
    sorted by that. The scores are then handed out again in the new order (later steps sort
    by score), so the set of scores and the tail are unchanged."""
    head, tail = fused[:top], fused[top:]
    before: Counter[tuple[str, str]] = Counter()
    weighed: list[tuple[float, Candidate]] = []
    for c in head:
        where = session_of(c)
        weighed.append((c.score * decay ** before[where], c))
        before[where] += 1
    weighed.sort(key=lambda wc: -wc[0])  # stable: ties keep the fused order
    scores = sorted((c.score for c in head), reverse=True)
    ordered = [c for _, c in weighed]
    return [c.model_copy(update={"score": s}) for c, s in zip(ordered, scores, strict=True)] + tail
