"""Inline ``[id]`` citations: find them, check them against the candidates, strip them.

The rule a summary is held to: every sentence carries a citation to a recalled memory, or it
is dropped and reported; a sentence whose recalled citations all point at instruction-like
memories is dropped too and reported as a warning (it may be the model obeying a memory).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from memstream.summarize.model import SummaryWarning, Unsupported
from memstream.text.inert import escape

# An event id (memstream.events.envelope.ID_PATTERN), a fact id (``<event id>#n``), or several
# separated by commas; a bracketed phrase with plain spaces ("[citation needed]") is not one.
_ID = r"[A-Za-z0-9][A-Za-z0-9._:@/#-]*"
MARKER = re.compile(rf"\[\s*({_ID}(?:\s*[,;]\s*{_ID})*)\s*\]")
_SPLIT = re.compile(r"\s*[,;]\s*")
# A sentence ends at . ! ? followed by space, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# A period that ends an abbreviation or an initial ("Dr. Okafor", "J. R. Tolkien", "3 p.m.
# on Friday") does not end the sentence, nor one followed by a lower-case word.
_ABBREVIATION = re.compile(
    r"(?:^|[\s(])(?:[^\W\d_]|dr|mr|mrs|ms|mx|prof|st|jr|sr|vs|etc|e\.g|i\.e|a\.m|p\.m|nr|"
    r"approx|fig|ca|cf)\.$",
    re.IGNORECASE,
)
# Markers opening a sentence ("Claim. [id] Next.") belong to the sentence before.
_LEADING_MARKERS = re.compile(rf"^(?:\s*\[\s*{_ID}(?:\s*[,;]\s*{_ID})*\s*\])+")


def marker_ids(marker: str) -> list[str]:
    """The ids inside one ``[...]`` marker's brackets."""
    return [part for part in _SPLIT.split(marker.strip()) if part]


def cited_ids(text: str) -> list[str]:
    """Every id cited in ``text``, in the order first cited, without duplicates."""
    found = (i for m in MARKER.finditer(text) for i in marker_ids(m.group(1)))
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Held:
    """A model's text held to the rule: what stays, what was dropped and why."""

    summary: str  # kept sentences, ids that were not recalled removed, HTML escaped
    cited: list[str]  # recalled ids the kept sentences cite, in order, no duplicates
    unsupported: list[Unsupported]
    warnings: list[SummaryWarning]


def segments(text: str) -> list[tuple[str, str]]:
    """``text`` cut into (sentence, the separator after it); joined back they give ``text``
    up to where a marker opening a sentence was moved to the sentence before."""
    cut: list[tuple[str, str]] = []
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        cut.append((text[pos : m.start()], m.group()))
        pos = m.end()
    cut.append((text[pos:], ""))
    cut = _rejoin_false_ends(cut)
    out: list[tuple[str, str]] = []
    for sentence, sep in cut:
        lead = _LEADING_MARKERS.match(sentence)
        if lead and out:
            before, before_sep = out[-1]
            out[-1] = (f"{before} {lead.group().strip()}", before_sep)
            sentence = sentence[lead.end() :]
        if sentence.strip():
            out.append((sentence.strip(), sep))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + sep)
    return out


def _rejoin_false_ends(cut: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for sentence, sep in cut:
        if out and "\n" not in out[-1][1]:
            before, before_sep = out[-1]
            if _ABBREVIATION.search(before) or sentence[:1].islower():
                out[-1] = (before + before_sep + sentence, sep)
                continue
        out.append((sentence, sep))
    return out


def hold(text: str, known: Collection[str], suspect: Mapping[str, list[str]] | None = None) -> Held:
    """``text`` held to ``known`` (recalled ids); ``suspect`` = the instruction-like ones
    with their signals."""
    suspect = suspect or {}
    kept: list[tuple[str, str]] = []
    cited: list[str] = []
    dropped: list[Unsupported] = []
    warnings: list[SummaryWarning] = []
    for sentence, sep in segments(text):
        ids = cited_ids(sentence)
        good = [i for i in ids if i in known]
        bad = [i for i in ids if i not in known]
        stays = bool(good) and not all(i in suspect for i in good)
        shown = escape(sentence)
        dropped += [Unsupported(sentence=shown, memory_id=i, dropped=not stays) for i in bad]
        if not ids:
            dropped.append(Unsupported(sentence=shown, memory_id=None, dropped=True))
        if stays:
            kept.append((escape(keep_only(sentence, known)), "\n" if "\n" in sep else " "))
            cited += good
            continue
        if good:
            signals = list(dict.fromkeys(x for i in good for x in suspect[i]))
            shown = escape(keep_only(sentence, known))
            warnings.append(SummaryWarning(sentence=shown, memory_ids=good, signals=signals))
        if kept and "\n" in sep:  # the line break after a dropped sentence still ends a line
            kept[-1] = (kept[-1][0], "\n")
    summary = "".join(s + sep for s, sep in kept).strip()
    return Held(summary, list(dict.fromkeys(cited)), dropped, warnings)


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
