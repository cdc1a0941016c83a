"""The answer's span: the part of a memory that answers, not the whole memory.

A fact answers with its value (the operations do that). An event that says several things
("I moved to Lisbon last spring; my sister Ana lives in Porto.") answers with the clause
about whom the question asks: one naming them, or, said by them, one in the first person —
and not one about someone else it names — preferring a clause with the question's words.
The whole event stays the answer's support.
"""

from __future__ import annotations

import re

from memstream.matching import focus_of
from memstream.records.packet import SynthesisPlan
from memstream.text.names import entity_key, name_candidates
from memstream.text.words import content_stems

# Clause boundaries: sentence ends, semicolons, and a comma or dash before a new subject.
_CLAUSES = re.compile(r"(?<=[.!?;])\s+|\s*;\s*|\s+[-–—]\s+|,\s+(?=(?:and|but|while|whereas)\b)")
MIN_WORDS = 3


def clauses(text: str) -> list[str]:
    """``text`` cut into clauses of at least ``MIN_WORDS`` words (none: the whole text)."""
    parts = [_CONJUNCTION.sub("", p.strip(" ,;.")) for p in _CLAUSES.split(text)]
    kept = [p for p in parts if len(p.split()) >= MIN_WORDS]
    return kept if len(kept) > 1 else []


def span_of(text: str, speaker: str, plan: SynthesisPlan) -> str | None:
    """The clause of ``text`` (said by ``speaker``, an entity key) that answers ``plan``;
    None when the text is one clause or no clause stands out."""
    parts = clauses(text)
    asked = set(plan.entities)
    if not parts or not asked:
        return None
    focus = focus_of(plan).terms
    scored = [(_score(p, speaker, asked, focus), i, p) for i, p in enumerate(parts)]
    best = max(scored, key=lambda s: (s[0], -s[1]))
    runner_up = max((s[0] for s in scored if s is not best), default=-9)
    return best[2] if best[0] > 0 and best[0] > runner_up else None


def _score(clause: str, speaker: str, asked: set[str], focus: frozenset[str]) -> int:
    """+3 when the clause's subject is the one asked about (named first, or the speaker's
    "I"), -3 when it is someone else (another name first, or "my sister …"), +1 with the
    question's words."""
    first = next(iter(_WORDS.findall(clause)), "")
    named = name_candidates(clause)
    if named and clause.startswith(named[0]):
        lead: str | None = entity_key(named[0])
    elif first[:1].isupper() and content_stems(first):  # a name opening a sentence
        lead = entity_key(first)
    else:
        lead = None
    about = (lead is not None and lead in asked) or (speaker in asked and first.lower() in _SELF)
    other = (lead is not None and lead not in asked) or first.lower() in _POSSESSIVE
    words = bool(content_stems(clause) & focus)
    return 3 * about - 3 * other + int(words)


_CONJUNCTION = re.compile(r"^(?:and|but|while|whereas|so|then)\s+", re.IGNORECASE)
_WORDS = re.compile(r"[\w']+")
# A clause whose subject is its speaker, or something of someone's (grammar, not content).
_SELF = frozenset({"i", "i'm", "i've", "i'd", "i'll", "we", "we're", "we've"})
_POSSESSIVE = frozenset({"my", "our", "his", "her", "their", "your"})
