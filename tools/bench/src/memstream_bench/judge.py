"""The calibrated answerability's model (``bench train`` writes it), cross-validated by
conversation (``bench train`` and ``bench locomo`` report it).

Collection (``locomo.judged_packet``): every LoCoMo question (categories 1-5) as one checkout
with the ``learned`` preset and ``explain``: the packet's answerability features
(``meta.answerable.features``: the rules' verdict, the answer's support, what retrieval knows
of the first ten). The label says whether memory answers it: 1 when the question is
answerable (categories 1-4) and one of its evidence turns is in the packet's first ten, else 0
(unanswerable by design, category 5, or evidence the packet missed). Questions of categories
1-4 whose evidence is not in the data are left out.

Evaluation: one fold per conversation (its questions never on both sides). Pooled over the
folds: the expected calibration error (10 bins of equal width), the reliability table, and at
:data:`~memstream.checkout.synthesis.answerable.THRESHOLD` (and a few thresholds around it) the
two abstention rates answerability is judged by, beside the hand-set rules' on the same
packets.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lightgbm
import numpy as np
from memstream.checkout.synthesis.answerable import ANSWER_FEATURES, THRESHOLD, VERDICTS

from memstream_bench.stats import calibration

# Small and regularised, for probabilities that mean what they say: chosen among 12 settings
# (rounds 60/150/300, 3 or 7 leaves, 30 or 60 packets a leaf) by the folds' calibration
# error (0.009 here; 0.017 to 0.092 for the others). Every setting traded the two abstention
# rates along the same curve: the threshold moves along it, the settings barely do.
PARAMS: dict[str, Any] = {
    "objective": "binary",
    "learning_rate": 0.05,
    "num_leaves": 7,
    "min_data_in_leaf": 60,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 2,
    "seed": 7,
    "verbose": -1,
}
ROUNDS = 60
_ABSTAIN = {VERDICTS.index("ask_user"), VERDICTS.index("no_memory")}
_VERDICT = ANSWER_FEATURES.index("verdict")


@dataclass(frozen=True)
class Packet:
    """One question's packet: its conversation, category, features and label."""

    conversation: str
    category: int
    row: list[float]
    label: int  # 1: answerable and its evidence in the first ten

    @property
    def rules_abstain(self) -> bool:
        return int(self.row[_VERDICT]) in _ABSTAIN


def fit(packets: Sequence[Packet]) -> lightgbm.Booster:
    """A binary model of the label over the features."""
    x = np.asarray([p.row for p in packets], dtype=np.float64)
    y = np.asarray([p.label for p in packets], dtype=np.float64)
    data = lightgbm.Dataset(x, y, feature_name=list(ANSWER_FEATURES))
    return lightgbm.train(PARAMS, data, num_boost_round=ROUNDS)


def _share(flags: list[bool]) -> float | None:
    return round(statistics.fmean(flags), 4) if flags else None


def rates(packets: Sequence[Packet], abstains: Sequence[bool]) -> dict[str, Any]:
    """Abstention on unanswerable questions, and on answerable ones whose evidence is in the
    first ten (the share that should have answered and did not)."""
    unanswerable = [a for p, a in zip(packets, abstains, strict=True) if p.category == 5]
    held = [a for p, a in zip(packets, abstains, strict=True) if p.category != 5 and p.label]
    return {
        "abstained_unanswerable": _share(unanswerable),
        "abstained_with_evidence": _share(held),
        "unanswerable": len(unanswerable),
        "answerable_with_evidence": len(held),
    }


def cross_validate(
    packets: Sequence[Packet], threshold: float = THRESHOLD
) -> dict[str, Any] | None:
    """Each held-out conversation scored by the model of the others; pooled (see the module).
    None for fewer than two conversations: nothing to hold out."""
    names = sorted({p.conversation for p in packets})
    if len(names) < 2:
        return None
    scored: list[tuple[Packet, float]] = []
    for held_out in names:
        model = fit([p for p in packets if p.conversation != held_out])
        test = [p for p in packets if p.conversation == held_out]
        probs = model.predict(np.asarray([p.row for p in test], dtype=np.float64))
        scored += [(p, float(x)) for p, x in zip(test, probs, strict=True)]
    ordered = [p for p, _ in scored]
    probs = [x for _, x in scored]
    ece, bins = calibration(probs, [p.label for p in ordered])
    sweep = {f"{t:.2f}": rates(ordered, [x < t for x in probs]) for t in (0.3, 0.4, 0.5, 0.6, 0.7)}
    return {
        "packets": len(ordered),
        "answered_share": round(statistics.fmean(p.label for p in ordered), 4),
        "ece": ece,
        "reliability": bins,
        "threshold": threshold,
        "learned": rates(ordered, [x < threshold for x in probs]),
        "rules": rates(ordered, [p.rules_abstain for p in ordered]),
        "thresholds": sweep,
    }
