"""Inline ``[id]`` citations: find them, check them against the candidates, strip them."""

from __future__ import annotations

import re
from collections.abc import Collection

from memstream.summarize.model import Unsupported

# An event id (memstream.events.envelope.ID_PATTERN), a fact id (``<event id>#n``), or several
# separated by commas; a bracketed phrase with plain spaces ("[citation needed]") is not one.
_ID = r"[A-Za-z0-9][A-Za-z0-9._:@/#-]*"
MARKER = re.compile(rf"\[\s*({_ID}(?:\s*[,;]\s*{_ID})*)\s*\]")
_SPLIT = re.compile(r"\s*[,;]\s*")
# A sentence ends at . ! ? followed by space, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def marker_ids(marker: str) -> list[str]:
    """The ids inside one ``[...]`` marker's brackets."""
    return [part for part in _SPLIT.split(marker.strip()) if part]


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (a citation belongs to the sentence it sits in)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def cited_ids(text: str) -> list[str]:
    """Every id cited in ``text``, in the order first cited, without duplicates."""
    found = (i for m in MARKER.finditer(text) for i in marker_ids(m.group(1)))
    return list(dict.fromkeys(found))


def unsupported(text: str, known: Collection[str]) -> list[Unsupported]:
    """One entry per (sentence, id) where the sentence cites an id not in ``known``."""
    out: list[Unsupported] = []
    for sentence in sentences(text):
        bad = [i for i in cited_ids(sentence) if i not in known]
        out += [Unsupported(sentence=sentence, memory_id=i) for i in bad]
    return out


def keep_only(text: str, known: Collection[str]) -> str:
    """``text`` with ids not in ``known`` removed from its markers (empty markers go)."""

    def keep(match: re.Match[str]) -> str:
        ids = [i for i in marker_ids(match.group(1)) if i in known]
        return f"[{', '.join(ids)}]" if ids else ""

    return _tidy(MARKER.sub(keep, text))


def strip_markers(text: str) -> str:
    """``text`` without any ``[id]`` marker (for callers that want no citations)."""
    return _tidy(MARKER.sub("", text))


def _tidy(text: str) -> str:
    # A removed marker leaves "claim ." or "a  b": close the gap it left.
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()
