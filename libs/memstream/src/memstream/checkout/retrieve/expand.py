"""Query expansion: the question's words with the words nearest them in the embedder's table.

A turn that answers "what is her favorite genre?" may say "I love fantasy": BM25 scores
only the words the two share. Each ordinary word of the question brings its nearest
vocabulary words ("married" → marriage, wife, spouse) into the sparse query at a fraction of
a question word's weight, so a turn using them ranks, and a turn using the question's own
words still ranks first. Names are never expanded (a person's nearest words are other
people), nor numbers, nor the parts of a hyphenated compound ("mother-in-law" is not about
law).
"""

from __future__ import annotations

import re

from memstream.embed.port import TermNeighbours
from memstream.records.packet import SynthesisPlan
from memstream.text.words import fold_plural
from memstream.vectors.sparse import STOPWORDS

NEIGHBOURS = 5  # related words per question word
MIN_SIMILARITY = 0.6  # cosine in the token table below which a word is not related
WEIGHT = 0.2  # a related word's query weight per unit of similarity (a question word: 1)
# A lookup costs ~2 ms: a pasted log as the question expands its first words only.
MAX_WORDS = 16

_WORD = re.compile(r"\w+", re.UNICODE)
_COMPOUND = re.compile(r"\w+(?:-\w+)+", re.UNICODE)


def _names(plan: SynthesisPlan) -> set[str]:
    """The question's words that may name something: its entity mentions and every
    capitalised word (at the start of a sentence too: "Ingrid went where?")."""
    named = {w.lower() for m in plan.mentions for w in _WORD.findall(m.text)}
    return named | {w.lower() for w in _WORD.findall(plan.query) if w[:1].isupper()}


def _expandable(plan: SynthesisPlan) -> list[str]:
    """The question's ordinary words (lower case, once, in order)."""
    fixed = _names(plan)
    fixed |= {w.lower() for c in _COMPOUND.findall(plan.query) for w in _WORD.findall(c)}
    words = [w.lower() for w in _WORD.findall(plan.query)]
    keep = [w for w in words if w.isalpha() and len(w) > 2 and w not in STOPWORDS]
    return list(dict.fromkeys(w for w in keep if w not in fixed))


def related_terms(plan: SynthesisPlan, source: TermNeighbours) -> dict[str, float]:
    """Related word → its query weight (``WEIGHT`` × similarity; the best when two question
    words bring the same one). A word the question says, or a form of it, is not added."""
    words = _expandable(plan)[:MAX_WORDS]
    said = {fold_plural(w) for w in _WORD.findall(plan.query.lower())}
    related: dict[str, float] = {}
    for word in words:
        found = 0
        # the table's neighbours include stopwords and the word's own plural: read more
        for other, similarity in source.neighbours(word, 2 * NEIGHBOURS, MIN_SIMILARITY):
            form = fold_plural(other)
            if other in STOPWORDS or form in said:
                continue
            related[other] = max(related.get(other, 0.0), round(WEIGHT * similarity, 4))
            found += 1
            if found == NEIGHBOURS:
                break
    return related
