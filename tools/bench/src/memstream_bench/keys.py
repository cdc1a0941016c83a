"""``bench embed --keys``: LoCoMo turns ranked under each form of index key, offline.

Every conversation's turns are keyed as the vector projector keys them (``projection.keys``:
speaker, day = session date, the previous turn of the session, caption as metadata), one
part added at a time, and ranked per category 1-4 question by the index's own BM25 (the
sparse vectors of ``vectors.sparse``, IDF over the conversation), by dense cosine and by
their RRF fusion. Questions, answers and evidence are used only for scoring.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from memstream.embed.port import Embedder
from memstream.projection.keys import KeyParts, Turn, context_key, plain_key
from memstream.vectors.sparse import doc_vector, query_vector

from memstream_bench.locomo import _SESSION, session_time

RRF_K = 60
CATEGORIES = (1, 2, 3, 4)
# Each row: (sparse key parts, dense key parts); None = the plain key (the event alone).
FORMS: dict[str, tuple[KeyParts | None, KeyParts | None]] = {
    "plain (speaker, text, caption)": (None, None),
    "+ day": (KeyParts(date=True), KeyParts(date=True)),
    "+ previous turn": (KeyParts(previous=True), KeyParts(previous=True)),
    "+ pronouns": (KeyParts(pronouns=True), KeyParts(pronouns=True)),
    "+ day + previous turn": (
        KeyParts(date=True, previous=True),
        KeyParts(date=True, previous=True),
    ),
    "context keys as indexed (sparse: day + previous; dense: day)": (
        KeyParts(date=True, previous=True),
        KeyParts(date=True),
    ),
}


def _conversation(sample: dict[str, Any]) -> tuple[list[str], list[Turn], list[Turn | None]]:
    """Turn ids, turns and the turn each follows in its session (as the pipeline ingests)."""
    conv = sample["conversation"]
    sessions = sorted((int(m.group(1)), k) for k in conv if (m := _SESSION.match(k)) and conv[k])
    ids: list[str] = []
    turns: list[Turn] = []
    previous: list[Turn | None] = []
    for _, key in sessions:
        start = session_time(conv[f"{key}_date_time"])
        before: Turn | None = None
        for i, t in enumerate(conv[key]):
            meta = {"image_caption": t["blip_caption"]} if t.get("blip_caption") else {}
            turn = Turn(
                agent=t["speaker"],
                text=t["text"] or "(shared an image)",
                type="message.user",
                occurred_at=start + timedelta(seconds=30 * i),
                metadata=meta,
            )
            ids.append(str(t["dia_id"]))
            turns.append(turn)
            previous.append(before)
            before = turn
    return ids, turns, previous


def _keys(turns: list[Turn], previous: list[Turn | None], parts: KeyParts | None) -> list[str]:
    if parts is None:
        return [plain_key(t) for t in turns]
    return [context_key(t, p, parts) for t, p in zip(turns, previous, strict=True)]


def _sparse_ranker(keys: list[str]) -> Callable[[str], list[int]]:
    """BM25 as the index scores it: the document weights of ``doc_vector``, the IDF of the
    engine's modifier over these documents, weight 1 per query term."""
    postings: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for i, key in enumerate(keys):
        vec = doc_vector(key)
        for term, weight in zip(vec.indices, vec.values, strict=True):
            postings[term].append((i, weight))
    n = len(keys)
    idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()}

    def rank(query: str) -> list[int]:
        scores = np.zeros(n)
        for term in query_vector(query).indices:
            for i, weight in postings.get(term, []):
                scores[i] += idf[term] * weight
        return [int(i) for i in np.argsort(-scores, kind="stable")]

    return rank


def _rrf(rankings: list[list[int]], n: int) -> list[int]:
    fused: npt.NDArray[np.float64] = np.zeros(n, dtype=np.float64)
    for ranking in rankings:
        for rank, index in enumerate(ranking):
            fused[index] += 1.0 / (RRF_K + rank + 1)
    return [int(i) for i in np.argsort(-fused, kind="stable")]


def _summary(rows: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "recall": round(statistics.fmean(r for r, _ in rows), 4) if rows else None,
        "hit": round(statistics.fmean(h for _, h in rows), 4) if rows else None,
    }


def locomo_keys(path: Path, embedder: Embedder, k: int = 10) -> dict[str, Any]:
    """Recall@k / Hit@k of the sparse lane, the dense lane and their RRF, per key form."""
    samples = json.loads(path.read_text())
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {
        form: {"sparse": [], "dense": [], "rrf": []} for form in FORMS
    }
    for sample in samples:
        ids, turns, previous = _conversation(sample)
        known = set(ids)
        questions = [
            (str(q["question"]), [e for e in q.get("evidence", []) if e in known])
            for q in sample["qa"]
            if q.get("category") in CATEGORIES
        ]
        questions = [(q, ev) for q, ev in questions if ev]
        q_vecs = embedder.embed([q for q, _ in questions])
        for form, (sparse_parts, dense_parts) in FORMS.items():
            rank = _sparse_ranker(_keys(turns, previous, sparse_parts))
            dense = q_vecs @ embedder.embed(_keys(turns, previous, dense_parts)).T
            for qi, (question, evidence) in enumerate(questions):
                by_sparse = rank(question)
                by_dense = [int(i) for i in np.argsort(-dense[qi], kind="stable")]
                fused = _rrf([by_sparse, by_dense], len(ids))
                for lane, ranking in (("sparse", by_sparse), ("dense", by_dense), ("rrf", fused)):
                    top = {ids[i] for i in ranking[:k]}
                    found = sum(1 for e in evidence if e in top)
                    rows[form][lane].append((found / len(evidence), float(found > 0)))
    return {
        "path": path.name,  # the data file, not where it sits on one machine
        "k": k,
        "questions": len(rows[next(iter(FORMS))]["rrf"]),
        "forms": {f: {lane: _summary(v) for lane, v in lanes.items()} for f, lanes in rows.items()},
    }


def keys_table(doc: dict[str, Any]) -> str:
    """The Markdown table of :func:`locomo_keys`."""
    rows = [
        f"LoCoMo turns ranked per conversation under each key form (k = {doc['k']}, "
        f"{doc['questions']} questions of categories 1–4), Recall@{doc['k']} / Hit@{doc['k']}:",
        "",
        "| key form | BM25 (sparse) | dense | RRF of both |",
        "|---|---:|---:|---:|",
    ]
    for form, lanes in doc["forms"].items():
        cells = " | ".join(
            f"{lanes[lane]['recall']:.3f} / {lanes[lane]['hit']:.3f}"
            for lane in ("sparse", "dense", "rrf")
        )
        rows.append(f"| {form} | {cells} |")
    return "\n".join(rows)
