"""``bench embed``: embedder throughput, plus a turn-level LoCoMo retrieval check.

Throughput embeds synthetic chat turns generated from this module's own templates. The
optional LoCoMo check ranks each conversation's turns ("date speaker: text") for every
category 1-4 question by dense cosine, by BM25 and by their RRF fusion, and scores
evidence Recall@k / Hit@k; questions, answers and evidence are used only for scoring.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from memstream.embed.port import Embedder
from memstream.embed.registry import DEFAULT_EMBEDDER, get_embedder
from memstream_cli.progress import Report

from memstream_bench.bm25 import BM25, top_k_indices
from memstream_bench.keys import locomo_keys

RRF_K = 60
CATEGORIES = (1, 2, 3, 4)

_NAMES = ["Priya", "Tom", "Aiko", "Marcus", "Lena", "Diego", "Fatima", "Sam", "Olu", "Ingrid"]
_PLACES = ["Lisbon", "the lake cabin", "Osaka", "the farmers market", "Denver", "the gym", "Oslo"]
_THINGS = [
    "the new laptop",
    "a sourdough starter",
    "my bike",
    "the garden shed",
    "a used piano",
    "the kitchen tiles",
    "my running shoes",
    "the camping stove",
]
_ACTIVITIES = [
    "rock climbing",
    "learning Portuguese",
    "painting watercolours",
    "training for a half marathon",
    "building a treehouse",
    "volunteering at the animal shelter",
    "playing chess online",
    "baking bread",
]
_TIMES = ["yesterday", "last weekend", "this morning", "two weeks ago", "on Friday", "in March"]
_FEELINGS = ["thrilled", "exhausted", "a bit nervous", "really proud", "relieved", "curious"]
_TOOLS = ["the billing API", "the deploy script", "our staging cluster", "the search index"]
_SENTENCES = [
    "I went to {place} {time} with {name} and we spent most of the day {activity}.",
    "Honestly I'm {feeling} about {activity}, it has been harder than I expected.",
    "{name} finally fixed {thing}, so we can use it again before the holidays.",
    "Did you ever try {activity}? {name} keeps telling me it changed their life.",
    "We're planning to visit {place} next month, mostly for the food and the views.",
    "I sold {thing} {time} because I needed the space for my new hobby.",
    "My sister started {activity} and she sends me photos every single evening.",
    "Can you remind me what {name} said about {place}? I forgot to write it down.",
    "The deadline moved again, so I'm {feeling}, but at least {name} is helping out.",
    "I bought {thing} {time}; it was cheaper than I thought and works perfectly.",
    "Please check whether {tool} is still failing, {name} saw timeouts {time}.",
    "The migration on {tool} finished {time}, and the error rate dropped to zero.",
    "I prefer morning meetings, afternoons are when I get my real work done.",
    "My doctor said I should walk more, so I've been doing laps around {place}.",
    "Thanks for the recipe! I made it {time} and {name} asked for seconds.",
    "We adopted a rescue dog {time}; she is shy but loves long walks by the river.",
    "I'm {feeling} because the concert in {place} sold out before I could get tickets.",
    "Remember to book the hotel in {place} before prices go up for the festival.",
]


def synthetic_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` chat turns of roughly 20-40 words from fixed templates (deterministic)."""
    rng = random.Random(seed)
    slots = {
        "name": _NAMES,
        "place": _PLACES,
        "thing": _THINGS,
        "activity": _ACTIVITIES,
        "time": _TIMES,
        "feeling": _FEELINGS,
        "tool": _TOOLS,
    }
    out = []
    for _ in range(n):
        parts = []
        for template in rng.sample(_SENTENCES, rng.choice((2, 2, 3))):
            parts.append(template.format(**{k: rng.choice(v) for k, v in slots.items()}))
        out.append(" ".join(parts))
    return out


def machine_info() -> dict[str, Any]:
    """Where the numbers were measured."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for dist in ("numpy", "model2vec", "tokenizers"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "date": datetime.now(UTC).date().isoformat(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **versions,
    }


def _throughput(embedder: Embedder, texts: list[str], progress: Report) -> dict[str, Any]:
    embedder.embed(texts[:256])  # warm caches and lazy init outside the timing
    progress(f"embedding {len(texts)} docs with {embedder.name}")
    t0 = time.perf_counter()
    vectors = embedder.embed(texts)
    seconds = time.perf_counter() - t0
    if vectors.shape != (len(texts), embedder.dim):
        raise RuntimeError(f"{embedder.name} returned shape {vectors.shape}")
    single = []
    for text in texts[:200]:
        t1 = time.perf_counter()
        embedder.embed([text])
        single.append((time.perf_counter() - t1) * 1000.0)
    sample = texts[:1000]
    return {
        "docs": len(texts),
        "docs_per_s": round(len(texts) / seconds, 1) if seconds > 0 else None,
        "seconds": round(seconds, 4),
        "single_doc_ms_p50": round(statistics.median(single), 4) if single else None,
        "words_per_doc": round(statistics.fmean(len(t.split()) for t in sample), 1),
        "tokens_per_doc": round(statistics.fmean(embedder.count_tokens(t) for t in sample), 1),
    }


def load_turns(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dia_id, "date speaker: text")`` for every turn, sessions in numeric order."""
    sessions = sorted(
        (int(key.split("_")[1]), key)
        for key, value in conversation.items()
        if key.startswith("session_") and not key.endswith("date_time") and isinstance(value, list)
    )
    turns = []
    for _, key in sessions:
        date = conversation.get(f"{key}_date_time", "")
        for turn in conversation[key]:
            turns.append((turn["dia_id"], f"{date} {turn['speaker']}: {turn['text']}"))
    return turns


def _rrf(rankings: list[list[int]], n: int) -> npt.NDArray[np.float64]:
    fused = np.zeros(n, dtype=np.float64)
    for ranking in rankings:
        for rank, index in enumerate(ranking):
            fused[index] += 1.0 / (RRF_K + rank + 1)
    return fused


def _summary(rows: list[tuple[int, float, float]]) -> dict[str, Any]:
    def agg(sel: list[tuple[int, float, float]]) -> dict[str, Any]:
        if not sel:
            return {"questions": 0, "recall": None, "hit": None}
        return {
            "questions": len(sel),
            "recall": round(statistics.fmean(r for _, r, _ in sel), 4),
            "hit": round(statistics.fmean(h for _, _, h in sel), 4),
        }

    out = agg(rows)
    out["by_category"] = {str(c): agg([r for r in rows if r[0] == c]) for c in CATEGORIES}
    return out


def locomo_retrieval(
    path: Path, embedder: Embedder, k: int = 10, progress: Report | None = None
) -> dict[str, Any]:
    """Turn-level evidence Recall@k / Hit@k for dense, BM25 and RRF(BM25, dense)."""
    say = progress or (lambda _msg: None)
    samples = json.loads(path.read_text())
    methods = ("dense", "bm25", "rrf")
    rows: dict[str, list[tuple[int, float, float]]] = {m: [] for m in methods}
    skipped_ids = 0
    no_evidence = 0
    n_turns = 0
    embed_seconds = 0.0
    for sample in samples:
        turns = load_turns(sample["conversation"])
        n_turns += len(turns)
        ids = [dia_id for dia_id, _ in turns]
        known = set(ids)
        say(f"locomo {sample['sample_id']}: {len(turns)} turns")
        t0 = time.perf_counter()
        turn_vecs = embedder.embed([text for _, text in turns])
        embed_seconds += time.perf_counter() - t0
        bm25 = BM25([text for _, text in turns])
        questions = [q for q in sample["qa"] if q.get("category") in CATEGORIES]
        if not questions:
            continue
        t0 = time.perf_counter()
        q_vecs = embedder.embed([str(q["question"]) for q in questions])
        embed_seconds += time.perf_counter() - t0
        dense_scores = q_vecs @ turn_vecs.T
        for qi, qa in enumerate(questions):
            evidence = list(dict.fromkeys(str(e) for e in qa.get("evidence", [])))
            valid = [e for e in evidence if e in known]
            skipped_ids += len(evidence) - len(valid)
            if not valid:
                no_evidence += 1
                continue
            dense_rank = top_k_indices(dense_scores[qi], len(ids))
            bm25_rank = top_k_indices(bm25.scores(str(qa["question"])), len(ids))
            ranked = {
                "dense": dense_rank[:k],
                "bm25": bm25_rank[:k],
                "rrf": top_k_indices(_rrf([bm25_rank, dense_rank], len(ids)), k),
            }
            gold = set(valid)
            for method, top in ranked.items():
                found = len(gold & {ids[i] for i in top})
                rows[method].append((int(qa["category"]), found / len(gold), float(found > 0)))
    return {
        "path": path.name,  # the data file, not where it sits on one machine
        "k": k,
        "turn_text": "date speaker: text",
        "conversations": len(samples),
        "turns": n_turns,
        "questions": len(rows["dense"]),
        "skipped_evidence_ids": skipped_ids,
        "questions_without_evidence": no_evidence,
        "embed_seconds": round(embed_seconds, 4),
        **{m: _summary(rows[m]) for m in methods},
    }


def run_embed_bench(
    n_docs: int = 20_000,
    progress: Report | None = None,
    locomo_path: str | Path | None = None,
    *,
    k: int = 10,
    embedder: str | None = None,
    keys: bool = False,
) -> dict[str, Any]:
    """Embed ``n_docs`` synthetic chat turns and, if the file exists, score LoCoMo retrieval."""
    if n_docs < 1:
        raise ValueError("n_docs must be at least 1")
    say = progress or (lambda _msg: None)
    name = embedder or DEFAULT_EMBEDDER
    say(f"loading embedder {name}")
    t0 = time.perf_counter()
    model = get_embedder(name)
    load_seconds = time.perf_counter() - t0
    texts = synthetic_texts(n_docs)
    result: dict[str, Any] = {
        "embedder": model.name,
        "version": model.version,
        "dim": model.dim,
        "load_seconds": round(load_seconds, 4),
        **_throughput(model, texts, say),
        "machine": machine_info(),
    }
    if locomo_path is not None:
        path = Path(locomo_path)
        if path.is_file():
            result["locomo"] = locomo_retrieval(path, model, k=k, progress=say)
            if keys:
                say("locomo: ranking turns per form of index key")
                result["locomo_keys"] = locomo_keys(path, model, k=k)
        else:
            result["locomo"] = {"path": path.name, "skipped": "file not found"}
    return result
