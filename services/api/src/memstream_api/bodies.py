"""The bodies of ``POST /v1/checkout`` and ``POST /v1/recall``, and what the service is asked.

Strict like every body (see ``memstream.wire``): no ``"10"`` for 10, and the published schema
says so. A checkout's levers start from a preset (``checkout`` unless the body names one) and
the body's own switches override it: one frozen ``RetrievalConfig`` per request.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from memstream.checkout.request import CheckoutQuery, Mode, RecallQuery
from memstream.checkout.retrieve.config import LEVERS, PRESETS
from memstream.events.envelope import StreamName
from memstream.records.latent import Purpose
from memstream.scope import SCOPE_DESCRIPTION, STREAM_SHORTHAND, Scope
from memstream.wire import STORABLE, STRICT_INPUT, ItemId, JsonInt, Position, RfcTimestamp
from pydantic import BaseModel, Field

Format = Literal["json", "markdown", "gathered"]
Preset = Literal["plain", "checkout", "learned", "wide"]
Question = Annotated[str, Field(min_length=1, max_length=4000), STORABLE]
AFTER = (
    "a write's position: answer once every projection this read uses has applied it "
    "(bounded by MEMSTREAM_READ_AFTER_MAX_WAIT_S; past it, or when it can never be, the "
    "answer carries a stale warning naming what was not applied)"
)


def _lever(what: str) -> Any:
    """A body's lever: None means the preset's."""
    return Field(default=None, description=f"{what} (None: as the preset has it)")


class CheckoutRequest(BaseModel):
    """``POST /v1/checkout``."""

    model_config = STRICT_INPUT
    query: Question
    as_of: RfcTimestamp | None = None
    max_tokens: JsonInt = Field(default=1500, ge=64, le=64_000)
    k: JsonInt = Field(default=10, ge=1, le=100)
    purpose: Purpose | None = Field(
        default=None, description="adds a memory weave for this reasoning step (prospective pass)"
    )
    scope: Scope | None = Field(default=None, description=SCOPE_DESCRIPTION)
    stream: StreamName | None = Field(default=None, description=STREAM_SHORTHAND)
    task_id: ItemId | None = Field(
        default=None, description="the task this checkout serves (for learning)"
    )
    format: Format = "json"
    preset: Preset | None = Field(
        default=None,
        description="the levers to start from: plain (the fused lanes alone), checkout (the "
        "default: rerank, top votes), learned (checkout with the learned ranker instead of "
        "the rerank and the calibrated answerability instead of the rules) or wide "
        "(checkout with the time lane, expand, the episode lane and the second hop)",
    )
    # The levers: one retrieval or packet behaviour switched for this request.
    episode_lane: bool | None = _lever(
        "the episode lane: rank episodes, then the turns inside the best ones"
    )
    time_lane: bool | None = _lever(
        "the time lane: the turns in the periods the question's dates name, relative dates "
        "resolved against the days of the best hits"
    )
    second_hop: bool | None = _lever(
        "a second hop: the question searched again with the entities the best hits name and "
        "the words they share that it does not say"
    )
    rerank: bool | None = _lever(
        "rerank the fused top by term coverage, named speakers and entities, and adjacency to "
        "other hits"
    )
    learned: bool | None = _lever(
        "order the fused top 60 by the learned ranker (instead of the rerank): a model over "
        "what the lanes know of each item (ranks, agreement, coverage, speaker, time, kind)"
    )
    top_votes: bool | None = _lever(
        "each lane votes in the fusion with its best 2 x k items only; deeper items stay "
        "candidates, ranked after"
    )
    text_rows: bool | None = _lever(
        "an evidence row for every relevant event's text, beside its snippet (off: an "
        "event's text is shown once, as a snippet)"
    )
    expand: bool | None = _lever(
        "the keyword searches add the question's related words (the words nearest each of "
        "its words, names and numbers aside, in the embedder's table) at a fifth of a "
        "question word's weight or less"
    )
    coverage: bool | None = _lever(
        'an aggregation question (list, count, "all/every", plural objects, the perfect of a '
        "past act) has its fused top 30 ordered by session: an item's score is halved for each "
        "better item of its session (a stream on one day)"
    )
    calibrated: bool | None = _lever(
        "answerability and the first answer's confidence from the learned probability that "
        "the packet's first ten answer the question (the rules' verdicts read as features)"
    )
    explain: bool = Field(
        default=False,
        description="with the calibrated lever: meta.answerable also gives the features the "
        "probability was read from",
    )
    after: Position | None = Field(default=None, description=AFTER)

    def to_query(self, scope: Scope) -> CheckoutQuery:
        """What the checkout service is asked inside ``scope`` (the body's within its key's:
        the route's to decide, like the ``after`` wait)."""
        switches = {f: getattr(self, f) for f in LEVERS}
        config = PRESETS[self.preset or "checkout"].with_switches(switches)
        return CheckoutQuery(
            query=self.query,
            as_of=self.as_of,
            max_tokens=self.max_tokens,
            k=self.k,
            purpose=self.purpose,
            scope=scope,
            task_id=self.task_id,
            config=config,
            fresh=self.after is not None,
            explain=self.explain,
        )


class RecallRequest(BaseModel):
    """``POST /v1/recall``."""

    model_config = STRICT_INPUT
    query: Question
    k: JsonInt = Field(default=10, ge=1, le=200)
    scope: Scope | None = Field(default=None, description=SCOPE_DESCRIPTION)
    stream: StreamName | None = Field(default=None, description=STREAM_SHORTHAND)
    mode: Mode = Field(
        default="fused", description="fused = every lane; the others = one vector-index lane"
    )
    as_of: RfcTimestamp | None = None
    after: Position | None = Field(default=None, description=AFTER)
    preset: Preset | None = Field(
        default=None,
        description="fused mode: gather and order the pool as a checkout with this preset "
        "would (None: the fused lanes alone)",
    )
    explain: bool = Field(
        default=False,
        description="fused mode: also return `ranked`, the fused top 60 before any "
        "reordering, each item's id with the features a ranker reads",
    )

    def to_query(self, scope: Scope) -> RecallQuery:
        """What the checkout service is asked inside ``scope``."""
        return RecallQuery(
            query=self.query,
            k=self.k,
            scope=scope,
            mode=self.mode,
            as_of=self.as_of,
            fresh=self.after is not None,
            config=PRESETS[self.preset] if self.preset is not None else None,
        )
