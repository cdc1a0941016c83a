"""Snippets: a candidate's text trimmed around what the question is about (cuts marked …)."""

from __future__ import annotations

import re

from memstream.records.packet import Candidate, Snippet, SynthesisPlan
from memstream.text.words import content_stems, stem

CUT = "…"
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_WORD = re.compile(r"\w+(?:['’]\w+)?")
_MAX_SENTENCES = 24  # sentences considered when trimming one long text


def focus_stems(plan: SynthesisPlan) -> frozenset[str]:
    """Stems a snippet is trimmed around: plan terms and entities, else the query words."""
    named = content_stems(" ".join([*plan.terms, *plan.entities]))
    return named or content_stems(plan.query)


def snippet_of(c: Candidate, focus: frozenset[str], max_chars: int) -> Snippet:
    """The candidate's text trimmed around the focus; ``metadata['confidence']`` carries
    the candidate's confidence (absent when unknown)."""
    meta = {k: v for k, v in c.metadata.items() if v is not None and k != "confidence"}
    if c.confidence is not None:
        meta["confidence"] = c.confidence
    return Snippet(
        item_id=c.item_id,
        text=trim_text(c.text, focus, max_chars),
        ref=c.ref,
        type=c.type,
        agent=c.agent,
        occurred_at=c.occurred_at,
        score=c.score,
        metadata=meta,
    )


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.end()))
        start = m.end() + 1
    if start < len(text):
        spans.append((start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def _hits(text: str, focus: frozenset[str]) -> list[tuple[int, int]]:
    """(position, weight) of focus words (2) and numbers (1)."""
    out = []
    for m in _WORD.finditer(text):
        token = m.group()
        if stem(token.lower()) in focus:
            out.append((m.start(), 2))
        elif any(ch.isdigit() for ch in token):
            out.append((m.start(), 1))
    return out


def _join(text: str, spans: list[tuple[int, int]], chosen: list[int]) -> str:
    parts: list[str] = []
    for n, i in enumerate(chosen):
        if (n == 0 and i > 0) or (n > 0 and i != chosen[n - 1] + 1):
            parts.append(CUT)
        parts.append(text[spans[i][0] : spans[i][1]])
    if chosen[-1] < len(spans) - 1:
        parts.append(CUT)
    return " ".join(parts)


def _window(text: str, at: int, limit: int) -> str:
    """``limit`` characters around position ``at``, cut at word boundaries, marked with …."""
    room = limit - 4
    start = max(0, min(at - room // 3, len(text) - room))
    end = min(len(text), start + room)
    if start > 0 and " " in text[start:end]:
        start = text.index(" ", start) + 1
    if end < len(text) and " " in text[start:end]:
        end = text.rindex(" ", start, end)
    body = text[start:end].strip()
    return ("… " if start > 0 else "") + body + (" …" if end < len(text) else "")


def trim_text(text: str, focus: frozenset[str], limit: int) -> str:
    """Whitespace-collapsed ``text`` in at most ``limit`` characters.

    Keeps the sentences with the most focus words (then numbers), in text order; a single
    sentence too long is cut around its first hit; text without hits keeps its beginning.
    Every cut is marked with ``…``.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    if limit < 12:
        return flat[: max(limit - 1, 0)] + CUT if limit > 0 else ""
    spans = _sentences(flat)
    hits = _hits(flat, focus)
    scores = [sum(w for p, w in hits if a <= p < b) for a, b in spans]
    if not any(scores):
        return _window(flat, 0, limit)
    ranked = sorted((i for i in range(len(spans)) if scores[i]), key=lambda i: (-scores[i], i))
    chosen: list[int] = []
    for i in ranked[:_MAX_SENTENCES]:
        trial = sorted([*chosen, i])
        if len(_join(flat, spans, trial)) <= limit:
            chosen = trial
    if chosen:
        return _join(flat, spans, chosen)
    a, b = spans[ranked[0]]
    return _window(flat, next(p for p, _ in hits if a <= p < b), limit)


def shorten(text: str, keep: int) -> str:
    """``text`` cut to its first ``keep`` characters, the cut marked with …."""
    return text if keep >= len(text) else text[:keep].rstrip() + CUT
