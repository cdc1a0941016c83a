"""The content words of a query: what it is about, minus stopwords, units and date spans."""

from __future__ import annotations

import re

from memstream.text.units import is_currency, normalise_unit
from memstream.text.words import STOP_STEMS, stem, words


def query_terms(query: str, skip: list[str], unit: str | None = None) -> list[str]:
    """Content words: lower-case words minus stopwords, unit words and ``skip`` spans."""
    text = query
    for span in skip:
        text = re.sub(re.escape(span), " ", text, flags=re.IGNORECASE)
    out: list[str] = []
    for w in words(text):
        w = w.replace("’", "'").removesuffix("'s")
        u = normalise_unit(w)
        if u is not None and (u == unit or is_currency(u)):
            continue
        if stem(w) not in STOP_STEMS and w not in out and not w.isdigit():
            out.append(w)
    return out
