"""The ``memory.checkouts`` record: what one checkout answered from, for the retrospective."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from memstream.events.payloads import QuestionFamily
from memstream.records.packet import CheckoutPacket, SynthesisPlan
from memstream.text.words import jaccard, stem

MAX_FAMILY_TERMS = 40


class CheckoutTrace(BaseModel):
    """One checkout, as the retrospective pass binds it to the task's outcome."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    packet_id: str
    tenant: str
    query: str
    task_id: str | None = None
    purpose: str | None = None
    stream: str | None = None
    as_of: str | None = None
    answerability: str
    family: QuestionFamily
    # The top answer's support, best first: what the agent most likely relied on.
    answer_ids: list[str] = Field(default_factory=list)
    cited_ids: list[str] = Field(default_factory=list)
    at: datetime
    version: str


def family_of(plan: SynthesisPlan) -> QuestionFamily:
    """The question family of a plan: operation, named entities, stemmed content words."""
    terms = sorted({stem(t) for t in plan.terms if t})[:MAX_FAMILY_TERMS]
    return QuestionFamily(
        operation=plan.operation, entities=sorted(set(plan.entities))[:20], terms=terms
    )


def family_similarity(a: QuestionFamily, b: QuestionFamily) -> float:
    """0..1: Jaccard over entities and terms, halved when the operation differs."""
    left = frozenset([f"e:{e}" for e in a.entities] + [f"t:{t}" for t in a.terms])
    right = frozenset([f"e:{e}" for e in b.entities] + [f"t:{t}" for t in b.terms])
    overlap = jaccard(left, right) if left or right else 1.0
    return overlap if a.operation == b.operation else overlap / 2


def trace_of(
    packet: CheckoutPacket,
    plan: SynthesisPlan,
    query: str,
    *,
    task_id: str | None,
    purpose: str | None,
    stream: str | None,
    cited: list[str],
    at: datetime,
    version: str,
) -> CheckoutTrace:
    """The trace of one packet."""
    top = packet.answer_candidates[0].support_ids if packet.answer_candidates else []
    return CheckoutTrace(
        packet_id=packet.packet_id,
        tenant=packet.tenant,
        query=query,
        task_id=task_id,
        purpose=purpose,
        stream=stream,
        as_of=packet.as_of,
        answerability=packet.answerability,
        family=family_of(plan),
        answer_ids=list(top),
        cited_ids=cited,
        at=at,
        version=version,
    )
