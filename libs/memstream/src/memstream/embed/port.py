"""``Embedder``: offline, deterministic text embedding."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt


class Embedder(Protocol):
    name: str
    version: str  # changes when weights or preprocessing change (part of the config hash)
    dim: int

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """L2-normalised vectors, shape (len(texts), dim)."""

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the offline tokenizer (budgeting, packet sizes)."""


@runtime_checkable
class TermNeighbours(Protocol):
    """An embedder that can name the words nearest one word (query expansion, checkout)."""

    def neighbours(self, word: str, limit: int, min_similarity: float) -> list[tuple[str, float]]:
        """Up to ``limit`` other whole words with cosine ≥ ``min_similarity`` to ``word``,
        nearest first; empty when ``word`` is not one token of the vocabulary."""
