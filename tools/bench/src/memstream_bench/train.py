"""``bench train``: the learned ranker, trained on labelled questions and cross-validated by
conversation.

Collection: LoCoMo turns through the real pipeline (as ``bench locomo`` writes them); for each
question with evidence (categories 1-4), one ``/v1/recall`` with the checkout preset and
``explain``: the fused top 60 before any reordering, each item's features. An item is
relevant when it is one of the question's evidence turns. Nothing of a question's words
reaches the model: only the features.

Evaluation: folds by conversation — a conversation's questions are never in both the train and
the test side of a fold. Each fold scores three orders of the same items, Recall@10 and
Hit@10 over the turns: ``fused`` (no reordering), ``rerank`` (the hand-set weights, recomputed
from the same features) and ``learned`` (the fold's model). The model trained on every
conversation is written where ``--model`` says (the shipped one lives beside
``memstream.checkout.retrieve.learned``).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np
from memstream.checkout.retrieve.features import FEATURES, Signals
from memstream.checkout.retrieve.rerank import RERANK_TOP, gain
from memstream.client import MemoryHttpClient
from memstream.keys import KeyStore
from memstream_cli.progress import Report, stage

from memstream_bench import judge
from memstream_bench.judge import Packet
from memstream_bench.locomo import (
    Conversation,
    _ingest,
    _turns,
    _wait_fresh,
    judged_packet,
    tenant_of,
)
from memstream_bench.stack import throwaway_stack
from memstream_bench.stats import paired_interval

K = 10
# Small and regularised: a few hundred questions train it. Chosen among 12 settings (rounds
# 60/150/300, 7 or 15 leaves, 20 or 60 items a leaf) by the same folds: every one gained
# +0.010 to +0.031 Recall@10 over the hand-set order; this one's neighbours agree with it.
PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": [K],
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
ROUNDS = 150
METHODS = ("fused", "rerank", "learned")
_AT = {name: i for i, name in enumerate(FEATURES)}


@dataclass(frozen=True)
class Group:
    """One question: its conversation, category, the items' turns, features and labels."""

    conversation: str
    category: int
    turns: list[str]  # the turn of each item, in fused order
    rows: list[list[float]]
    evidence: list[str]

    @property
    def labels(self) -> list[int]:
        return [int(t in self.evidence) for t in self.turns]


def hand_set(rows: list[list[float]]) -> list[float]:
    """The rerank's score of each row: fused score x gain over its first ``RERANK_TOP``, the
    rest after them in the fused order (as ``retrieve.rerank``)."""
    deep = [-1e9 - i for i in range(len(rows) - RERANK_TOP)]
    return [
        r[_AT["fused_score_share"]]
        * gain(
            Signals(
                coverage=r[_AT["coverage"]],
                speaker=bool(r[_AT["speaker"]]),
                mention=bool(r[_AT["mention"]]),
                adjacent=int(r[_AT["adjacent"]]),
            )
        )
        for r in rows[:RERANK_TOP]
    ] + deep


def score(
    turns: list[str], scores: Sequence[float], evidence: list[str], k: int = K
) -> tuple[float, float]:
    """(Recall@k, Hit@k) of the items ordered by ``scores`` (ties keep the fused order)."""
    order = sorted(range(len(turns)), key=lambda i: (-scores[i], i))
    top = {turns[i] for i in order[:k]}
    found = sum(1 for e in evidence if e in top)
    return found / len(evidence), float(found > 0)


def fit(groups: Sequence[Group]) -> lightgbm.Booster:
    """A LambdaRank model on the groups holding at least one relevant item."""
    useful = [g for g in groups if any(g.labels)]
    x = np.asarray([r for g in useful for r in g.rows], dtype=np.float64)
    y = np.asarray([label for g in useful for label in g.labels], dtype=np.float64)
    data = lightgbm.Dataset(x, y, group=[len(g.rows) for g in useful], feature_name=list(FEATURES))
    return lightgbm.train(PARAMS, data, num_boost_round=ROUNDS)


def folds(
    groups: Sequence[Group], train_only: Collection[str] = ()
) -> list[tuple[str, list[Group], list[Group]]]:
    """One fold per conversation not in ``train_only``: (held-out conversation, train groups,
    test groups); a ``train_only`` conversation is on the training side of every fold."""
    names = sorted({g.conversation for g in groups} - set(train_only))
    return [
        (n, [g for g in groups if g.conversation != n], [g for g in groups if g.conversation == n])
        for n in names
    ]


def _scored(
    test: Sequence[Group], model: lightgbm.Booster
) -> dict[str, list[tuple[int, float, float]]]:
    out: dict[str, list[tuple[int, float, float]]] = {m: [] for m in METHODS}
    for g in test:
        fused = [-float(i) for i in range(len(g.rows))]
        learned = [float(x) for x in model.predict(np.asarray(g.rows, dtype=np.float64))]
        for name, scores in (("fused", fused), ("rerank", hand_set(g.rows)), ("learned", learned)):
            out[name].append((g.category, *score(g.turns, scores, g.evidence)))
    return out


def _summary(scored: list[tuple[int, float, float]]) -> dict[str, Any]:
    multi = [r for c, r, _ in scored if c == 1]
    return {
        "recall": round(statistics.fmean(r for _, r, _ in scored), 4) if scored else 0.0,
        "hit": round(statistics.fmean(h for _, _, h in scored), 4) if scored else 0.0,
        "multi_hop_recall": round(statistics.fmean(multi), 4) if multi else None,
        "questions": len(scored),
    }


def cross_validate(groups: Sequence[Group], train_only: Collection[str] = ()) -> dict[str, Any]:
    """Each fold's figures and all folds pooled, per method (see the module); the
    ``train_only`` conversations train every fold and are never measured."""
    pooled: dict[str, list[tuple[int, float, float]]] = {m: [] for m in METHODS}
    per_fold: dict[str, dict[str, Any]] = {}
    for held_out, train, test in folds(groups, train_only):
        scored = _scored(test, fit(train))
        per_fold[held_out] = {m: _summary(s) for m, s in scored.items()}
        for m, s in scored.items():
            pooled[m] += s
    gain, low, high = paired_interval(
        [r for _, r, _ in pooled["learned"]], [r for _, r, _ in pooled["rerank"]]
    )
    return {
        "folds": per_fold,
        "pooled": {m: _summary(s) for m, s in pooled.items()},
        "learned_vs_rerank_recall": {
            "gain": round(gain, 4),
            "interval95": [round(low, 4), round(high, 4)],
        },
    }


def collect(api_url: str, conv: Conversation, progress: Report) -> tuple[list[Group], list[Packet]]:
    """One conversation's questions with evidence, as groups (see the module); and every
    question's packet for the answerability model (``judge``)."""
    sample, tenant, turns, key = conv
    step = stage(progress, f"{tenant}: {len(sample['qa'])} questions", len(sample["qa"]))
    groups, packets = [], []
    with MemoryHttpClient(api_url, key) as client:
        for q in sample["qa"]:
            step.advance()
            if (packet := judged_packet(client, tenant, q, turns, K)) is not None:
                packets.append(packet)
            # Category 5 is unanswerable by design (its evidence is a trap): no ranking to learn.
            if int(q["category"]) == 5 or not [e for e in q.get("evidence", []) if e in turns]:
                continue
            _items, ranked = client.ranked(q["question"], k=K, preset="checkout")
            ids = [r["item_id"] for r in ranked]
            groups.append(
                Group(
                    conversation=tenant,
                    category=int(q["category"]),
                    turns=[t for i in ids for t in _turns([i])],
                    rows=[[float(r["features"][f]) for f in FEATURES] for r in ranked],
                    evidence=[e for e in q["evidence"] if e in turns],
                )
            )
    return groups, packets


class DuplicateConversationError(ValueError):
    """One conversation in two places: it could end up on both sides of a fold."""


def samples_of(data: Sequence[Path], train_only: Sequence[Path]) -> tuple[list[Any], set[str]]:
    """Every conversation of the files, and the tenants of those that only train; a
    conversation named twice (in one file or two) is refused."""
    samples: list[Any] = []
    only: set[str] = set()
    for path in [*data, *train_only]:
        got = json.loads(path.read_text())
        samples += got
        if path in train_only:
            only |= {tenant_of(s) for s in got}
    names = [tenant_of(s) for s in samples]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise DuplicateConversationError(f"conversations named more than once: {', '.join(twice)}")
    return samples, only


def gather(samples: list[Any], progress: Report) -> tuple[list[Group], list[Packet]]:
    """Every question of the conversations through the pipeline: the groups of those with
    evidence, and every question's packet."""
    groups: list[Group] = []
    packets: list[Packet] = []
    with throwaway_stack(progress) as (stack, settings):
        assert stack.info is not None
        keys = KeyStore(settings.resolved_keys_file())
        convs, total = _ingest(stack.info.kafka_bootstrap, keys, samples, False)
        _wait_fresh(settings, stack.info, total, stage(progress, "projecting", total))
        for conv in convs:
            got, seen = collect(stack.info.api_url, conv, progress)
            groups += got
            packets += seen
    return groups, packets


class StaleCollectionError(ValueError):
    """A ``--groups`` file collected from other conversations or with other features."""


def _stamp(samples: list[Any]) -> dict[str, Any]:
    """What a collection was made from: the conversations' content and the features (a file
    collected from other data, or before a feature changed, would train on the wrong rows)."""
    body = json.dumps(samples, sort_keys=True, ensure_ascii=False).encode()
    return {"collection": {"data_sha256": hashlib.sha256(body).hexdigest(),
                           "features": list(FEATURES)}}  # fmt: skip


def _stamp_of(line: str) -> Any:
    """The stamp a collection's first line holds (None when it holds none: an old file, or
    not a collection at all)."""
    try:
        return json.loads(line)
    except ValueError:
        return None


def _collected(
    samples: list[Any], progress: Report, groups_file: Path | None
) -> tuple[list[Group], list[Packet]]:
    """Read from ``groups_file`` (and its ``.packets`` sibling) when it exists and was
    collected from these conversations with these features (else refused: it is not reused
    for other data); else collect, and write them there when it is named."""
    packets_file = groups_file.with_suffix(".packets.jsonl") if groups_file else None
    stamp = _stamp(samples)
    if groups_file is not None and packets_file is not None and groups_file.is_file():
        head, *lines = groups_file.read_text().splitlines() or [""]
        if _stamp_of(head) != stamp:
            raise StaleCollectionError(
                f"{groups_file} was collected from other conversations or with other features "
                "than these: name a new file (or delete it) to collect again"
            )
        if not packets_file.is_file():
            raise StaleCollectionError(f"{groups_file} has no {packets_file.name} beside it")
        return [Group(**json.loads(line)) for line in lines], [
            Packet(**json.loads(line)) for line in packets_file.read_text().splitlines()
        ]
    groups, packets = gather(samples, progress)
    if groups_file is not None and packets_file is not None:
        rows = [stamp, *(asdict(g) for g in groups)]
        groups_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        packets_file.write_text("".join(json.dumps(asdict(p)) + "\n" for p in packets))
    return groups, packets


def run_train(
    data: Sequence[Path],
    model: Path | None,
    progress: Report,
    groups_file: Path | None = None,
    judge_model: Path | None = None,
    train_only: Sequence[Path] = (),
) -> dict[str, Any]:
    """Collect (or read ``groups_file`` when it exists and was collected from the same
    conversations with the same features; write it when it does not exist),
    cross-validate both models by conversation (the ranker with the ``train_only`` files'
    conversations on the training side of every fold, never measured; the answerability on
    the ``data`` ones alone), then write the ranker trained on every conversation to
    ``model`` and the answerability model to ``judge_model`` (each when named)."""
    samples, only = samples_of(data, train_only)
    groups, every_packet = _collected(samples, progress, groups_file)
    # A probability is calibrated to the population it learnt from: conversations of another
    # share of answerable questions would skew it, so the answerability learns from the
    # measured conversations only (the order is learnt per question: no share to skew).
    packets = [p for p in every_packet if p.conversation not in only]
    doc = cross_validate(groups, only) | {
        "trained_only": sorted(only),
        "features": list(FEATURES),
        "rounds": ROUNDS,
        "answerability": judge.cross_validate(packets),
        "machine": {"cpus": os.cpu_count(), "date": datetime.now(UTC).date().isoformat()},
    }
    if model is not None:
        fit(groups).save_model(str(model))
        doc["model"] = str(model)
    if judge_model is not None:
        judge.fit(packets).save_model(str(judge_model))
        doc["judge_model"] = str(judge_model)
    return doc


def table_rows(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """(fold, method, Recall@10, Hit@10, multi-hop) rows: each fold, then pooled."""
    rows: list[tuple[str, ...]] = []
    parts: list[tuple[str, dict[str, Any]]] = [*doc["folds"].items(), ("pooled", doc["pooled"])]
    for name, methods in parts:
        for m in METHODS:
            s = methods[m]
            multi = s["multi_hop_recall"]
            rows.append(
                (name, m, f"{s['recall']:.4f}", f"{s['hit']:.4f}",
                 "-" if multi is None else f"{multi:.4f}", str(s["questions"]))
            )  # fmt: skip
    return rows
