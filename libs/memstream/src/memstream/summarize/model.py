"""Request and response of ``POST /v1/summarize_recall``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.events.envelope import StreamName
from memstream.scope import SCOPE_DESCRIPTION, STREAM_SHORTHAND, Scope
from memstream.wire import STORABLE, STRICT_INPUT, JsonInt, Position, RfcTimestamp


class SummarizeRequest(BaseModel):
    """``POST /v1/summarize_recall``: recall ``k`` candidates, synthesize one answer."""

    # strict: no "10" for 10 (see memstream.wire), as every other request model
    model_config = STRICT_INPUT
    query: Annotated[str, Field(min_length=1, max_length=4000), STORABLE]
    max_tokens: JsonInt = Field(default=500, ge=16, le=4096, description="synthesis budget")
    k: JsonInt = Field(default=10, ge=1, le=50, description="candidates recalled")
    include_citations: bool = Field(
        default=True, description="False: no citations list and no [id] markers in the summary"
    )
    force_refresh: bool = Field(
        default=False, description="bypass the summary cache (and refresh its entry)"
    )
    scope: Scope | None = Field(default=None, description=SCOPE_DESCRIPTION)
    stream: StreamName | None = Field(default=None, description=STREAM_SHORTHAND)
    as_of: RfcTimestamp | None = None
    after: Position | None = Field(
        default=None,
        description="a write's position: answer once every projection this read uses has "
        "applied it (bounded by MEMSTREAM_READ_AFTER_MAX_WAIT_S; past it, or when it can never "
        "be, the answer carries a stale warning naming what was not applied)",
    )


class Citation(BaseModel):
    """A candidate the summary cites: ``memory_id`` is a /v1/recall ``item_id``."""

    memory_id: str
    snippet: str
    score: float
    layer: Literal["event", "fact"]


class Unsupported(BaseModel):
    """A sentence of the model's text that a recalled memory does not back."""

    sentence: str = Field(description="the sentence as the model wrote it (HTML escaped)")
    memory_id: str | None = Field(
        description="an id it cites that was not recalled; null: it cites nothing"
    )
    dropped: bool = Field(
        description="true: no recalled id backs the sentence, so it is not in the summary; "
        "false: it stays, backed by other ids, without this one"
    )


INSTRUCTION_LIKE = (
    "left out of the summary: it cites only memories whose text reads as instructions to "
    "the model, so it may be the model obeying a memory instead of reporting it"
)


class SummaryWarning(BaseModel):
    """A sentence backed only by memories whose text reads as instructions to the model."""

    kind: Literal["instruction_like_source"] = "instruction_like_source"
    sentence: str = Field(description="the sentence, left out of the summary (HTML escaped)")
    memory_ids: list[str] = Field(description="the instruction-like memories it cites")
    signals: list[str] = Field(description="what made them read as instructions")
    message: str = INSTRUCTION_LIKE


class FailureRecordWarning(BaseModel):
    """A recalled memory left out: tasks relying on it failed while another recalled memory
    helped tasks asking this kind of question (checkout's failure-record rule)."""

    kind: Literal["failure_record"] = "failure_record"
    memory_id: str = Field(description="the memory left out of what the model read")
    failed_tasks: list[str] = Field(description="the tasks that relied on it and failed")
    instead: list[str] = Field(description="the recalled memories that succeeded instead")
    message: str = Field(description="the same, in a sentence")


class StaleWarning(BaseModel):
    """The read was given after= and a projection had not applied that position when it
    answered: the summary may miss those writes."""

    kind: Literal["stale"] = "stale"
    message: str = Field(description="what was not applied, by which projection")


class Synthesis(BaseModel):
    """What the model wrote, checked against the candidates (what the cache keeps)."""

    model_config = ConfigDict(frozen=True)
    summary: str  # bogus [id] markers already removed
    cited: list[str]  # candidate ids in the order first cited, no duplicates
    unsupported: list[Unsupported]
    warnings: list[SummaryWarning] = Field(default_factory=list)
    model: str


class SummarizeResult(BaseModel):
    """The answer: a synthesis of recalled memories, its citations checked."""

    summary: str
    citations: list[Citation] = Field(
        description="candidates cited inline as [id]; empty when include_citations is false"
    )
    sources_used: int = Field(description="how many of the candidates the summary cites")
    cache_hit: bool
    model: str
    unsupported: list[Unsupported] = Field(
        description="sentences without a citation, or citing ids that were not recalled: "
        "a sentence no recalled id backs is dropped from the summary"
    )
    warnings: list[SummaryWarning | FailureRecordWarning | StaleWarning] = Field(
        description="sentences left out of the summary because they cite only memories "
        "whose text reads as instructions to the model; kind failure_record: a memory left "
        "out because tasks relying on it failed while another succeeded; kind stale: the "
        "read was given after= and a projection had not applied that position when it "
        "answered"
    )
