"""The fused top ordered by a learned ranker (the ``learned`` lever; pure but for the model
file, read once).

The model is a LightGBM LambdaRank ensemble over :data:`features.FEATURES` (the rows
``features.feature_rows`` gives), shipped beside
this module as a text file (``ranker.txt``) and trained by ``memstream bench train`` (see
docs/ranking.md); nothing is downloaded. A model whose feature names are not today's
``FEATURES`` is refused when it loads: a retrained feature set needs a retrained model.
The items keep their fused scores, handed out again in the learned order, so the steps after
(feedback priors, the coverage lever) and the items after the top see the same scale.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import lightgbm
import numpy as np

from memstream.checkout.retrieve.features import FEATURES
from memstream.records.packet import Candidate

MODEL = Path(__file__).with_name("ranker.txt")
# The fused items the ranker orders (the rest keep their place after them): deeper than the
# hand-set rerank's 30, since the first 100 hold far more of the evidence than the first 10.
LEARNED_TOP = 60


class RankerMismatchError(ValueError):
    """A model trained on other features than :data:`FEATURES`."""


@dataclass(frozen=True)
class Ranker:
    """A loaded model and its id (the first 12 hex digits of its file's sha256)."""

    booster: lightgbm.Booster
    model_id: str

    @classmethod
    def from_text(cls, text: str) -> Ranker:
        booster = lightgbm.Booster(model_str=text)
        if tuple(booster.feature_name()) != FEATURES:
            raise RankerMismatchError(
                f"the model reads {booster.feature_name()}, the ranker gives {list(FEATURES)}"
            )
        return cls(booster, hashlib.sha256(text.encode()).hexdigest()[:12])

    def scores(self, rows: list[list[float]]) -> list[float]:
        """One score per row, higher first (one thread: a checkout is one request)."""
        if not rows:
            return []
        got = self.booster.predict(np.asarray(rows, dtype=np.float64), num_threads=1)
        return [float(x) for x in got]


@cache
def shipped() -> Ranker:
    """The model in the repository (loaded once per process)."""
    return Ranker.from_text(MODEL.read_text(encoding="utf-8"))


def learned_order(
    fused: list[Candidate], rows: list[list[float]], ranker: Ranker | None = None
) -> list[Candidate]:
    """``fused`` with its first ``len(rows)`` items (``rows``: their :func:`feature_rows`) in
    the ranker's order (ties keep the fused order), each given the fused score of the place it
    takes; the rest follow unchanged."""
    head, tail = fused[: len(rows)], fused[len(rows) :]
    scores = (ranker or shipped()).scores(rows)
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    places = sorted((c.score for c in head), reverse=True)
    return [
        head[i].model_copy(update={"score": place}) for i, place in zip(order, places, strict=True)
    ] + tail
