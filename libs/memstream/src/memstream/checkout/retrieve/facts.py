"""How the fact lane ranks facts by predicate (what memory knew when: ``graph.validity``).

Relevance of a predicate to a question: the question's focus words against the predicate's
words ("lives_in", "prefers:beverage"): a shared stem counts fully; otherwise the best cosine
of one focus word and the predicate stands in for synonyms ("drink" ~ "beverage", "job" ~
"employer"), which no word list has to spell out. Words one by one: "drink in the morning"
as a whole is less like "beverage" than "drink" is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memstream.embed.port import Embedder
from memstream.text.words import content_stems

_PREDICATE_SEP = re.compile(r"[_:./-]+")


def predicate_words(predicate: str) -> str:
    """``lives_in`` → ``lives in``; ``prefers:beverage`` → ``prefers beverage``."""
    return _PREDICATE_SEP.sub(" ", predicate).strip()


@dataclass
class PredicateRanker:
    """Scores predicates against one question's focus words (vectors cached per text)."""

    embedder: Embedder
    focus: list[str]  # the question's focus words as written
    _cache: dict[str, float] = field(default_factory=dict)

    def relevance(self, predicate: str) -> float | None:
        """1.0 on a shared stem, else the best cosine of a focus word and the predicate's
        words; None when the question has no focus."""
        if not self.focus:
            return None
        if predicate not in self._cache:
            self._cache[predicate] = self._score(predicate_words(predicate))
        return self._cache[predicate]

    def _score(self, text: str) -> float:
        if content_stems(text) & content_stems(" ".join(self.focus)):
            return 1.0
        vec = _vector(self.embedder, text)
        best = max(float(np.dot(_vector(self.embedder, w), vec)) for w in self.focus)
        return round(max(0.0, best), 3)


_VECTORS: dict[tuple[str, str], npt.NDArray[np.float32]] = {}


def _vector(embedder: Embedder, text: str) -> npt.NDArray[np.float32]:
    # Predicates and question words recur checkout after checkout; their vectors do not change.
    key = (f"{embedder.name}/{embedder.version}", text)
    vec = _VECTORS.get(key)
    if vec is None:
        if len(_VECTORS) > 50_000:
            _VECTORS.clear()
        vec = _VECTORS[key] = embedder.embed([text])[0]
    return vec
