"""Engine-neutral encoding shared by both adapters: BM25 sparse vectors and point ids.

Computed by us, offline, so the Edge and server adapters behave the same.

Documents get BM25 term-frequency weights; queries get weight 1 per unique term. The IDF
factor is applied by the engine (sparse vector ``bm25`` with the IDF modifier), so the dot
product of the two is the classic BM25 score.
"""

from __future__ import annotations

import functools
import hashlib
import re
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from memstream.text.words import fold_plural

SPARSE_VERSION = "bm25-v1"  # bump when tokens, ids or weights change (part of a projection key)

K1 = 1.2
B = 0.75
AVG_DOC_LEN = 24.0  # tokens after stopwords: memory texts are chat turns, facts, summaries

RRF_K = 60  # reciprocal-rank-fusion constant, set explicitly so both engines agree
POINT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "memstream:vector-point")  # never change

_WORD = re.compile(r"\w+", re.UNICODE)

_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves s t d ll m re ve don doesn didn isn aren wasn weren hasn haven hadn
    wouldn shouldn couldn
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lowercased unicode word tokens, stopwords dropped, plurals folded."""
    out: list[str] = []
    for raw in _WORD.findall(text.lower()):
        token = raw.strip("_")
        if not token or token in STOPWORDS:
            continue
        if len(token) == 1 and not token.isdigit():
            continue
        out.append(fold_plural(token))
    return out


@functools.lru_cache(maxsize=1 << 18)
def term_id(token: str) -> int:
    """Stable 31-bit term id (blake2b), the same in every process and on every machine."""
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class SparseVec:
    """Engine-neutral sparse vector: sorted unique ``indices`` with their ``values``."""

    indices: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.indices)


def _sorted(weights: dict[int, float]) -> SparseVec:
    keys = sorted(weights)
    return SparseVec(keys, [weights[k] for k in keys])


def doc_vector(
    text: str, *, k1: float = K1, b: float = B, avg_len: float = AVG_DOC_LEN
) -> SparseVec:
    """BM25 document weights ``tf*(k1+1)/(tf+k1*(1-b+b*len/avg_len))`` per term id."""
    tokens = tokenize(text)
    if not tokens:
        return SparseVec([], [])
    tfs = Counter(term_id(t) for t in tokens)
    norm = k1 * (1.0 - b + b * len(tokens) / avg_len)
    return _sorted({tid: tf * (k1 + 1.0) / (tf + norm) for tid, tf in tfs.items()})


def query_vector(text: str, related: Mapping[str, float] | None = None) -> SparseVec:
    """Weight 1 per unique query term (the engine multiplies in the IDF); each ``related``
    word (query expansion) at its own weight, never below the weight a query term has."""
    weights = dict.fromkeys((term_id(t) for t in tokenize(text)), 1.0)
    for word, weight in (related or {}).items():
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"related word {word!r}: weight {weight} outside (0, 1]")
        for token in tokenize(word):
            tid = term_id(token)
            weights[tid] = max(weights.get(tid, 0.0), weight)
    return _sorted(weights)


def point_id(point_key: str) -> str:
    """Deterministic point id: UUIDv5 of ``point_key`` (idempotent upserts)."""
    return str(uuid.uuid5(POINT_NAMESPACE, point_key))


def prefetch_limit(limit: int) -> int:
    """Per-lane candidate pool for hybrid fusion: overfetch so RRF sees both lanes' tails."""
    return max(limit * 4, 40)
