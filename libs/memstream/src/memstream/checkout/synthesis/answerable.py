"""Answerability as a probability (the ``calibrated`` lever; pure but for the model file, read
once).

The hand-set rules (``synthesis.synthesize``) decide an answerability from vetoes: weak
support, another speaker's words, a who answered by no one… Under this lever their verdicts
become features instead, beside what retrieval knows of the packet's first items: a shipped
LightGBM model (``answerable.txt``, trained by ``memstream bench train``, see docs/ranking.md)
turns them into the probability that the packet's first ten hold what answers the question.

- ``answer_from_memory`` (``refresh_recommended`` where the rules say so: the answer's support
  contradicted or stale) when that probability is at least :data:`THRESHOLD`, ``ask_user`` below it;
  ``no_memory`` stays the rules' (nothing was found at all).
- The first answer's ``confidence`` is the probability; the others keep their share of it.
- A vetoed answer is kept, its veto a warning beside it: the probability says how far to
  trust it. An answer may be absent while memory answers: no single value was extracted, the
  evidence rows and snippets hold it.

No feature is a word: each is a verdict, a count, a share or a rank (:data:`ANSWER_FEATURES`).
A model whose feature names are not today's is refused when it loads.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import get_args

import lightgbm
import numpy as np

from memstream.checkout.retrieve.features import (
    FEATURES,
    Likeness,
    feature_rows,
    plan_features,
    signals,
)
from memstream.checkout.synthesis.selection import coverage
from memstream.records.packet import (
    Answerability,
    Candidate,
    PacketWarning,
    SynthesisPlan,
    SynthesisResult,
    WarningKind,
)
from memstream.text.names import entity_key

MODEL = Path(__file__).with_name("answerable.txt")
# The packet's first items whose retrieval features the model reads (the packet's first ten).
HEAD = 10
# At or above: answered from memory. Chosen by the cross-validated folds of ``bench train``
# (docs/ranking.md): the point where abstaining on questions memory cannot answer and
# answering those whose evidence it holds balance.
THRESHOLD = 0.5
VERDICTS: tuple[str, ...] = get_args(Answerability)
KINDS: tuple[str, ...] = get_args(WarningKind)
_AT = {name: i for i, name in enumerate(FEATURES)}
# Per-item retrieval features read over the head: the first item's, the head's best, its mean.
_OVER_HEAD = ("coverage", "lane_count", "relevance", "fused_score_share")
_COUNTED = ("speaker", "mention")
ANSWER_FEATURES: tuple[str, ...] = (
    "verdict",
    "answers",
    "top_confidence",
    "top_support",
    "support_terms",
    "support_entities",
    "evidence_rows",
    "candidates",
    *(f"warn_{kind}" for kind in KINDS),
    *(f"{f}_{part}" for f in _OVER_HEAD for part in ("first", "best", "mean")),
    *(f"{f}_count" for f in _COUNTED),
    "in_window_share",
    "named_said_best_coverage",
    "others_said_best_coverage",
    "support_said_by_named",
    "operation",
    "answer_type",
    "focus_terms",
    "named",
)


class JudgeMismatchError(ValueError):
    """A model trained on other features than :data:`ANSWER_FEATURES`."""


def _over_head(rows: list[list[float]]) -> list[float]:
    out: list[float] = []
    for name in _OVER_HEAD:
        values = [r[_AT[name]] for r in rows] or [0.0]
        out += [values[0], max(values), statistics.fmean(values)]
    out += [sum(r[_AT[name]] for r in rows) for name in _COUNTED]
    windows = [r[_AT["in_window"]] for r in rows]
    out.append(statistics.fmean(windows) if windows and windows[0] >= 0 else -1.0)
    return out


def _attribution(
    plan: SynthesisPlan, head: list[Candidate], support: list[Candidate]
) -> list[float]:
    """Whose words the head and the answer rest on: the best coverage of the question among
    the head's items said by an entity it names, and among events said by anyone else (-1:
    none), and the share of the answer's support said by a named entity (-1: it names none)."""
    sigs = signals(plan, head)
    named_said = [s.coverage for s in sigs if s.speaker]
    others_said = [
        s.coverage for s, c in zip(sigs, head, strict=True) if not s.speaker and c.kind == "event"
    ]
    named = set(plan.entity_keys())
    by_named = [bool(c.agent) and entity_key(c.agent) in named for c in support]
    return [
        max(named_said, default=-1.0),
        max(others_said, default=-1.0),
        statistics.fmean(by_named) if named and by_named else -1.0,
    ]


def answer_features(
    plan: SynthesisPlan, result: SynthesisResult, pool: Sequence[Candidate]
) -> list[float]:
    """One row of :data:`ANSWER_FEATURES`: the rules' verdict over ``pool`` (``result``, with
    vetoed answers kept) and what retrieval knows of the pool's first :data:`HEAD` items."""
    by_id = {c.item_id: c for c in pool}
    answers = result.answer_candidates
    top = answers[0] if answers else None
    terms, entities = coverage(plan, top.support_ids, by_id) if top else (0.0, 0.0)
    kinds = {w.kind for w in result.warnings}
    head = list(pool[:HEAD])
    # the judge reads no likeness feature (``_OVER_HEAD``): the packet carries no vectors
    rows = feature_rows(plan, head, Likeness.unknown(len(head)))
    support = [by_id[i] for i in (top.support_ids if top else []) if i in by_id]
    return [
        float(VERDICTS.index(result.answerability)),
        float(len(answers)),
        top.confidence if top else 0.0,
        float(len(top.support_ids)) if top else 0.0,
        terms,
        entities,
        float(len(result.evidence)),
        float(len(pool)),
        *(float(kind in kinds) for kind in KINDS),
        *_over_head(rows),
        *_attribution(plan, head, support),
        *plan_features(plan),
    ]


@dataclass(frozen=True)
class Judge:
    """A loaded model and its id (the first 12 hex digits of its file's sha256)."""

    booster: lightgbm.Booster
    model_id: str

    @classmethod
    def from_text(cls, text: str) -> Judge:
        booster = lightgbm.Booster(model_str=text)
        if tuple(booster.feature_name()) != ANSWER_FEATURES:
            raise JudgeMismatchError(
                f"the model reads {booster.feature_name()}, the packet gives "
                f"{list(ANSWER_FEATURES)}"
            )
        return cls(booster, hashlib.sha256(text.encode()).hexdigest()[:12])

    def probability(self, row: list[float]) -> float:
        """The probability that memory answers (one thread: a checkout is one request)."""
        got = self.booster.predict(np.asarray([row], dtype=np.float64), num_threads=1)
        return float(got[0])


@cache
def shipped() -> Judge:
    """The model in the repository (loaded once per process)."""
    return Judge.from_text(MODEL.read_text(encoding="utf-8"))


def judged(result: SynthesisResult, p: float, threshold: float = THRESHOLD) -> SynthesisResult:
    """``result`` (the rules' verdict, vetoed answers kept) with its answerability and the
    answers' confidence taken from ``p`` (see the module)."""
    if result.answerability == "no_memory":
        return result
    answers = result.answer_candidates
    first = answers[0].confidence if answers else 0.0
    scaled = [
        a.model_copy(
            update={"confidence": round(p * min(1.0, a.confidence / first) if first else p, 3)}
        )
        for a in answers
    ]
    warnings = list(result.warnings)
    verdict: Answerability
    if p < threshold:
        verdict = "ask_user"
        msg = f"memory answers this with probability {p:.2f}, below {threshold:.2f}"
        warnings.append(PacketWarning(kind="low_confidence", message=msg, ids=[]))
    elif result.answerability == "refresh_recommended":
        verdict = "refresh_recommended"
    else:
        verdict = "answer_from_memory"
    return result.model_copy(
        update={"answerability": verdict, "answer_candidates": scaled, "warnings": warnings}
    )


def calibrated(
    plan: SynthesisPlan,
    result: SynthesisResult,
    pool: Sequence[Candidate],
    explain: bool = False,
    judge: Judge | None = None,
) -> tuple[SynthesisResult, dict[str, object]]:
    """``result`` (synthesized with vetoes kept) judged by the model (the shipped one unless
    ``judge``), and what a packet's ``meta.answerable`` says of it: the probability, the
    threshold, the model's id, and with ``explain`` the features it read."""
    row = answer_features(plan, result, pool)
    model = judge or shipped()
    p = model.probability(row)
    said: dict[str, object] = {
        "probability": round(p, 4),
        "threshold": THRESHOLD,
        "model": model.model_id,
    }
    if explain:
        said["features"] = dict(zip(ANSWER_FEATURES, row, strict=True))
    return judged(result, p), said
