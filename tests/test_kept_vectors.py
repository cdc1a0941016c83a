"""Vectors kept across calls: the embedder's own vectors, in order, each text embedded once
while kept, never read across models, bounded, and safe on many threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from memstream.embed.kept import KeptVectors
from memstream.embed.port import Embedder
from memstream.embed.registry import get_embedder


@dataclass
class Counting:
    """The shipped embedder, counting the texts it is asked to embed."""

    inner: Embedder
    version: str = ""
    asked: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name, self.dim = self.inner.name, self.inner.dim
        self.version = self.version or self.inner.version

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.asked += texts
        return self.inner.embed(texts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


TEXTS = [
    "Zoë started the cello in March",
    "the café on Rua Augusta",
    "ok",
    "Zoë started the cello in March",
]


def test_the_embedders_vectors_in_order_each_text_embedded_once() -> None:
    emb = Counting(get_embedder())
    kept = KeptVectors()
    got = kept.vectors(emb, TEXTS)
    assert got.shape == (4, emb.dim)
    assert np.allclose(got, emb.inner.embed(TEXTS), atol=1e-6)
    assert sorted(emb.asked) == sorted(set(TEXTS))  # the repeated text once
    again = kept.vectors(emb, list(reversed(TEXTS)))
    assert np.array_equal(again, got[::-1])
    assert len(emb.asked) == 3  # nothing embedded the second time
    assert kept.vectors(emb, []).shape == (0, emb.dim)


def test_another_version_of_the_model_never_reads_a_kept_vector() -> None:
    kept = KeptVectors()
    old, new = Counting(get_embedder()), Counting(get_embedder(), version="retrained")
    kept.vectors(old, TEXTS[:2])
    kept.vectors(new, TEXTS[:2])
    assert new.asked == sorted(TEXTS[:2])


def test_only_the_most_recently_used_are_kept() -> None:
    emb = Counting(get_embedder())
    kept = KeptVectors(size=2)
    kept.vectors(emb, ["a one", "b two"])
    kept.vectors(emb, ["a one"])  # used again: "b two" is now the oldest
    kept.vectors(emb, ["c three"])
    assert len(kept) == 2
    emb.asked.clear()
    kept.vectors(emb, ["a one", "c three", "b two"])
    assert emb.asked == ["b two"]


def test_many_threads_get_the_same_vectors() -> None:
    emb = get_embedder()
    kept = KeptVectors(size=50)
    texts = [f"turn number {i} of the long day" for i in range(200)]
    want = emb.embed(texts)

    def read(start: int) -> bool:
        part = texts[start : start + 40]
        return bool(np.allclose(kept.vectors(emb, part), want[start : start + 40], atol=1e-6))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, [i % 160 for i in range(0, 800, 7)]))
    assert len(kept) <= 50
