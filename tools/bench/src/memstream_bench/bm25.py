"""A small Okapi BM25 (numpy) used as the lexical baseline in benchmarks."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import numpy as np
import numpy.typing as npt

WORD_RE = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (no stemming, no stop words)."""
    return WORD_RE.findall(text.lower())


class BM25:
    """Okapi BM25 over a fixed corpus; idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        tokenized = [tokenize(d) for d in docs]
        self.n_docs = len(tokenized)
        lengths = np.array([len(t) for t in tokenized], dtype=np.float64)
        avg = float(lengths.mean()) if self.n_docs and lengths.sum() > 0 else 1.0
        self._norm = k1 * (1.0 - b + b * lengths / avg)
        # term -> (doc indices, term frequencies)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, toks in enumerate(tokenized):
            for term, tf in Counter(toks).items():
                docs_tf = postings.setdefault(term, ([], []))
                docs_tf[0].append(i)
                docs_tf[1].append(tf)
        self._postings = {
            term: (np.array(ix, dtype=np.int64), np.array(tf, dtype=np.float64))
            for term, (ix, tf) in postings.items()
        }
        self._idf = {
            term: math.log(1.0 + (self.n_docs - len(ix) + 0.5) / (len(ix) + 0.5))
            for term, (ix, _) in postings.items()
        }

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """BM25 score of every document for ``query`` (repeated query terms count again)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in tokenize(query):
            posting = self._postings.get(term)
            if posting is None:
                continue
            ix, tf = posting
            out[ix] += self._idf[term] * tf * (self.k1 + 1.0) / (tf + self._norm[ix])
        return out

    def top_k(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best documents, best first (ties: earlier document first)."""
        return top_k_indices(self.scores(query), k)


def top_k_indices(scores: npt.NDArray[np.floating[Any]], k: int) -> list[int]:
    """Indices of the ``k`` highest scores, descending; ties keep index order."""
    order = np.argsort(-scores, kind="stable")
    return [int(i) for i in order[:k]]
