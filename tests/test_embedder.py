"""Embedders: the shipped static model, the hashing test double, the registry, BM25."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from elsewhere import elsewhere
from memstream.embed.hashing import HashingEmbedder
from memstream.embed.port import Embedder
from memstream.embed.registry import EMBEDDERS, get_embedder
from memstream.embed.static import WEIGHTS_DIR, StaticEmbedder
from memstream_bench.bm25 import BM25
from memstream_bench.embed import load_turns, locomo_retrieval, run_embed_bench, synthetic_texts

TEXTS = [
    "I adopted a puppy last week and she chews everything.",
    "We got a new dog a few days ago; it bites all my shoes.",
    "The quarterly tax filing is due at the end of the month.",
    "Our flight to Madrid was delayed by three hours.",
]
FIXED_NONZERO = [21, 186, 233]  # hash-256 buckets of "memory", "stream", "memory stream"


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    embedder = get_embedder("minilm-static-256")
    assert isinstance(embedder, StaticEmbedder)
    return embedder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_static_shape_dtype_and_unit_norm(static: StaticEmbedder) -> None:
    vectors = static.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 256)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert static.embed([]).shape == (0, 256)


def test_static_identity(static: StaticEmbedder) -> None:
    assert static.name == "minilm-static-256"
    assert static.dim == 256
    assert len(static.version) == 12
    assert int(static.version, 16) >= 0
    # the version is a content hash: a fresh load of the same files gives the same one
    assert StaticEmbedder().version == static.version


def test_weights_are_small_and_minimal() -> None:
    names = sorted(p.name for p in WEIGHTS_DIR.iterdir())
    assert names == [
        "PROVENANCE.md", "config.json", "model.safetensors", "neighbours.safetensors",
        "tokenizer.json",
    ]  # fmt: skip
    assert sum(p.stat().st_size for p in WEIGHTS_DIR.iterdir()) < 20 * 2**20


def test_static_deterministic_and_batch_independent(static: StaticEmbedder) -> None:
    batch = static.embed(TEXTS)
    code = (
        "import json; from memstream.embed.static import StaticEmbedder; "
        f"print(json.dumps(StaticEmbedder().embed({TEXTS!r}).tolist()))"
    )
    # The vectors an index was built with come back in every process (hash seeds differ).
    assert np.array_equal(np.array(elsewhere(code, 3), dtype=batch.dtype), batch)
    singles = np.vstack([static.embed([t]) for t in TEXTS])
    assert np.allclose(batch, singles, atol=1e-6)
    many = static.embed(TEXTS * 1500)  # crosses the internal batch size
    assert np.allclose(many[-len(TEXTS) :], batch, atol=1e-6)


def test_static_semantics(static: StaticEmbedder) -> None:
    puppy, dog, tax, flight = static.embed(TEXTS)
    assert cos(puppy, dog) > cos(puppy, tax) + 0.1
    assert cos(puppy, dog) > cos(puppy, flight) + 0.1
    query = static.embed(["When is the tax deadline?"])[0]
    scores = [cos(query, v) for v in (puppy, dog, tax, flight)]
    assert int(np.argmax(scores)) == 2


def test_static_empty_text_is_zero_vector(static: StaticEmbedder) -> None:
    vectors = static.embed(["", "hello"])
    assert not vectors[0].any()
    assert np.isclose(np.linalg.norm(vectors[1]), 1.0)


def test_static_count_tokens(static: StaticEmbedder) -> None:
    assert static.count_tokens("") == 0
    assert static.count_tokens("Hello, world!") == 4  # hello , world !
    assert static.count_tokens("tokenization") == 2  # token ##ization
    long_text = "word " * 2000
    assert static.count_tokens(long_text) == 2000  # no truncation at 512


def test_static_is_an_embedder(static: StaticEmbedder) -> None:
    embedder: Embedder = static
    assert embedder.embed(["x"]).shape == (1, embedder.dim)


def test_registry_default_and_cache() -> None:
    assert "minilm-static-256" in EMBEDDERS
    assert "hash-256" in EMBEDDERS
    assert get_embedder() is get_embedder("minilm-static-256")
    assert get_embedder("hash-256") is get_embedder("hash-256")


def test_registry_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown embedder 'nope'") as info:
        get_embedder("nope")
    assert "hash-256" in str(info.value)
    assert "minilm-static-256" in str(info.value)


def test_hashing_embedder() -> None:
    a, b = HashingEmbedder(), HashingEmbedder()
    assert (a.name, a.dim, a.version) == ("hash-256", 256, "1")
    va, vb = a.embed(TEXTS), b.embed(TEXTS)
    assert np.array_equal(va, vb)
    assert va.dtype == np.float32
    assert va.shape == (len(TEXTS), 256)
    assert np.allclose(np.linalg.norm(va, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a.embed(["Alpha beta"]), a.embed(["alpha BETA"]))  # case-folded
    shared = a.embed(["red apple pie", "red apple tart", "tax filing deadline"])
    assert cos(shared[0], shared[1]) > cos(shared[0], shared[2])
    assert not a.embed([""])[0].any()
    assert a.count_tokens("Hello, world!") == 4


def test_hashing_embedder_fixed_values() -> None:
    # blake2b, not the per-process salted hash(): the same coordinates in every run
    vec = HashingEmbedder().embed(["memory stream"])[0]
    assert [int(i) for i in np.flatnonzero(vec)] == FIXED_NONZERO
    assert np.count_nonzero(vec) == 3  # two words + one bigram (no collisions here)
    assert np.isclose(np.abs(vec[vec != 0]), 1 / np.sqrt(3)).all()


def test_bm25_ranks_matching_document_first() -> None:
    docs = ["the cat sat on the mat", "dogs chase cats", "quarterly tax filing", "the the the"]
    bm25 = BM25(docs)
    assert bm25.top_k("tax", 2)[0] == 2
    assert bm25.top_k("cat mat", 1) == [0]
    assert bm25.scores("unseen").sum() == 0
    assert (bm25.scores("the") >= 0).all()


def test_synthetic_texts_deterministic() -> None:
    texts = synthetic_texts(50)
    code = (
        "import json; from memstream_bench.embed import synthetic_texts; "
        "print(json.dumps(synthetic_texts(50)))"
    )
    assert elsewhere(code, 4) == elsewhere(code, 5) == texts
    assert len(set(texts)) > 40
    words = [len(t.split()) for t in texts]
    assert 15 <= sum(words) / len(words) <= 50


def _tiny_locomo() -> list[dict[str, object]]:
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_2_date_time": "9:00 am on 2 June, 2024",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I sold my old bicycle."}],
        "session_1_date_time": "8:00 am on 1 June, 2024",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "My cat is called Pixel."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "I work as a nurse at night."},
        ],
    }
    qa = [
        {"question": "What is Ann's cat called?", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Bo sell?", "evidence": ["D2:1", "D"], "category": 1},
        {"question": "No evidence here?", "evidence": [], "category": 3},
        {"question": "Unanswerable?", "evidence": ["D1:2"], "category": 5},
    ]
    return [{"sample_id": "toy-1", "conversation": conversation, "qa": qa}]


def test_load_turns_orders_sessions_and_formats_text() -> None:
    conversation = _tiny_locomo()[0]["conversation"]
    assert isinstance(conversation, dict)
    turns = load_turns(conversation)
    assert [t[0] for t in turns] == ["D1:1", "D1:2", "D2:1"]
    assert turns[0][1] == "8:00 am on 1 June, 2024 Ann: My cat is called Pixel."


def test_locomo_retrieval_scoring(tmp_path: Path) -> None:
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(_tiny_locomo()))
    report = locomo_retrieval(path, HashingEmbedder(), k=10)
    assert report["questions"] == 2  # category 5 and the evidence-less one are left out
    assert report["skipped_evidence_ids"] == 1
    assert report["questions_without_evidence"] == 1
    for method in ("dense", "bm25", "rrf"):
        assert report[method]["recall"] == 1.0  # k covers every turn
        assert report[method]["by_category"]["4"]["questions"] == 1
    top1 = locomo_retrieval(path, HashingEmbedder(), k=1)
    assert top1["bm25"]["by_category"]["4"]["hit"] == 1.0


def test_run_embed_bench_report(tmp_path: Path) -> None:
    messages: list[str] = []
    report = run_embed_bench(300, messages.append, tmp_path / "missing.json", embedder="hash-256")
    assert report["embedder"] == "hash-256"
    assert report["dim"] == 256
    assert report["docs"] == 300
    assert report["docs_per_s"] > 0
    assert {"cpu_count", "python"} <= set(report["machine"])
    assert report["locomo"]["skipped"] == "file not found"
    assert messages
