"""Index keys: the text an event is found by (sparse and dense), apart from the text it shows.

A turn read alone often names nothing: "Yes, last week!" answers the turn before it. The
*context key* writes down what a reader of the conversation knows at that point: who speaks
and on which day, the caption of a shared image, and the message it follows in its stream.
Checkout still shows and cites the event's own text; only what it is found by differs.

The two lanes get different keys, each part kept where it lifted LoCoMo recall (README,
"Index keys"): the sparse (BM25) key carries the day and the previous message; the dense key
the day only (the previous message's words blur a static embedding of a short turn).

Pure: the previous message is given by the caller (the vector projector finds it in its
batch or in the index), so a replay computes the same keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memstream.projection.text import descriptive_metadata
from memstream.records.projected import EventRecord
from memstream.text.names import entity_key, name_candidates
from memstream.times import to_datetime

KeyForm = Literal["context", "plain"]  # a projection version's choice (ProjectionConfig.keys)
# The events that are messages of a conversation: only they follow a previous message.
MESSAGE_TYPES = frozenset({"message.user", "message.assistant"})
PREVIOUS_MAX_WORDS = 60  # a long previous message would outweigh the turn's own words
# Words that stand for the person spoken to, or for someone named before (English).
_SECOND_PERSON = frozenset({"you", "your", "yours", "yourself", "yourselves"})
_THIRD_PERSON = frozenset({"he", "him", "his", "himself", "she", "her", "hers", "herself"})
_WORD = re.compile(r"\w+", re.UNICODE)
# Month names written out, not ``%B``: the key must not depend on the process locale.
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip


@dataclass(frozen=True)
class KeyParts:
    """Which context a key carries."""

    date: bool = False
    previous: bool = False
    pronouns: bool = False  # the addressee for "you", a name for "she"; measured, not kept


SPARSE_PARTS = KeyParts(date=True, previous=True)
DENSE_PARTS = KeyParts(date=True)


@dataclass(frozen=True)
class Turn:
    """An event as a key reads it."""

    agent: str
    text: str
    type: str
    occurred_at: datetime
    metadata: dict[str, Any]

    @classmethod
    def of_event(cls, e: EventRecord) -> Turn:
        return cls(e.agent, e.text, e.type, to_datetime(e.occurred_at), dict(e.metadata))

    @classmethod
    def of(cls, fields: dict[str, Any]) -> Turn:
        """From an event's fields (``EventRecord`` dumped, or an event point's payload)."""
        return cls(
            agent=str(fields.get("agent") or ""),
            text=str(fields.get("text") or ""),
            type=str(fields.get("type") or ""),
            occurred_at=to_datetime(str(fields["occurred_at"])),
            metadata=dict(fields.get("metadata") or {}),
        )


@dataclass(frozen=True)
class IndexKeys:
    """What one event point is found by: its sparse (BM25) text and the text embedded."""

    sparse: str
    dense: str


def plain_key(turn: Turn) -> str:
    """The event alone: speaker, text (the type when there is none), prose metadata."""
    parts = (f"{turn.agent}:", turn.text.strip() or turn.type, descriptive_metadata(turn.metadata))
    return " ".join(p for p in parts if p)


def index_keys(turn: Turn, previous: Turn | None, form: KeyForm) -> IndexKeys:
    """The keys of an event that follows ``previous`` (None: first, or not a message)."""
    if form == "plain":
        key = plain_key(turn)
        return IndexKeys(key, key)
    return IndexKeys(
        sparse=context_key(turn, previous, SPARSE_PARTS),
        dense=context_key(turn, previous, DENSE_PARTS),
    )


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _named_before(turn: Turn, previous: Turn) -> list[str]:
    """The name the previous message gives that the turn's "he"/"she" stands for: only when
    it gives exactly one (else the pronoun is not clear) and the turn does not name it."""
    if not _words(turn.text) & _THIRD_PERSON:
        return []
    known = {entity_key(turn.agent), entity_key(previous.agent)}
    known |= {entity_key(n) for n in name_candidates(turn.text)}
    names = {entity_key(n): n for n in name_candidates(previous.text)}
    left = [n for k, n in names.items() if k not in known]
    return left if len(left) == 1 else []


def _day(at: datetime) -> str:
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year}"


def context_key(turn: Turn, previous: Turn | None, parts: KeyParts) -> str:
    """``<speaker> [on <day>] [to <addressee>]: <text> <caption> [(<name>)]
    [after <previous speaker>: <previous text> <its caption>]``."""
    head = [turn.agent]
    if parts.date:
        head.append(f"on {_day(turn.occurred_at)}")
    pronouns = previous if parts.pronouns else None
    if (
        pronouns is not None
        and entity_key(pronouns.agent) != entity_key(turn.agent)
        and _words(turn.text) & _SECOND_PERSON
    ):
        head.append(f"to {pronouns.agent}")
    body = [
        " ".join(head) + ":",
        turn.text.strip() or turn.type,
        descriptive_metadata(turn.metadata),
    ]
    if pronouns is not None and (named := _named_before(turn, pronouns)):
        body.append(f"({named[0]})")
    if previous is not None and parts.previous:
        said = " ".join(previous.text.split()[:PREVIOUS_MAX_WORDS])
        body.append(f"after {previous.agent}: {said} {descriptive_metadata(previous.metadata)}")
    return " ".join(" ".join(p.split()) for p in body if p.strip())
