"""``HashingEmbedder``: weightless, deterministic feature hashing for fast unit tests.

Words and adjacent word pairs are hashed (blake2b, so stable across processes and
machines, unlike ``hash()``) into signed buckets. Texts sharing words get similar vectors;
there is no semantics beyond that.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from itertools import pairwise

import numpy as np
import numpy.typing as npt

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
WORD_RE = re.compile(r"\w+")


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbedder:
    """``hash-256``: bag of words + word bigrams, hashed, L2-normalised."""

    version = "1"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        vec = np.zeros(self.dim, dtype=np.float32)
        words = WORD_RE.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in pairwise(words)]
        for feature in features:
            index, sign = _bucket(feature, self.dim)
            vec[index] += sign
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """L2-normalised vectors, shape ``(len(texts), dim)``; empty text -> zero vector."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._vector(text)
        return out

    def count_tokens(self, text: str) -> int:
        """Words and punctuation marks."""
        return len(TOKEN_RE.findall(text))
