"""The shared text and time rules, pinned: the BM25 index and the ledger store their output."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from memstream.text.words import content_stems, fold_plural, stem, words
from memstream.times import day_of, epoch_seconds, iso_utc, iso_z, parse_ts, z_suffix
from memstream.vectors.sparse import SPARSE_VERSION, doc_vector, term_id, tokenize

# Full stemmer (synthesis): plurals, -ing/-ed, a final -e, irregular forms, possessives.
STEMS = {
    "tickets": "ticket",
    "cities": "city",
    "classes": "class",
    "buses": "bus",
    "bus": "bus",
    "status": "status",
    "analysis": "analysis",
    "boxes": "box",
    "wishes": "wish",
    "churches": "church",
    "caches": "cach",
    "axes": "axe",
    "glasses": "glass",
    "running": "run",
    "stopped": "stop",
    "hopped": "hop",
    "filled": "fill",
    "buzzed": "buzz",
    "hiking": "hik",
    "baked": "bak",
    "make": "mak",
    "cake": "cak",
    "bought": "buy",
    "children": "child",
    "people": "person",
    "went": "go",
    "she's": "she",
    "Marta’s": "marta",
    "it's": "it",
    "1990s": "1990",
    "mp3s": "mp3",
    "2024": "2024",
    "i've": "i'v",
    "don't": "don't",
    "was": "was",
    "has": "has",
    "this": "this",
    "news": "new",
    "dogs": "dog",
    "going": "go",
    "agreed": "agr",
    "studies": "study",
    "flies": "fly",
    "ties": "tie",
    "yes": "yes",
}
# BM25 plural folding (the sparse index): alphabetic words over three letters only.
FOLDS = {
    "tickets": "ticket",
    "cities": "city",
    "classes": "class",
    "buses": "buse",
    "bus": "bus",
    "status": "status",
    "analysis": "analysis",
    "boxes": "box",
    "wishes": "wish",
    "churches": "church",
    "caches": "cach",
    "axes": "ax",
    "glasses": "glass",
    "running": "running",
    "1990s": "1990s",
    "mp3s": "mp3s",
    "ties": "tie",
    "dogs": "dog",
    "was": "was",
    "has": "has",
}
# Tokens and term ids are stored in every sparse vector: changing them needs a new
# SPARSE_VERSION (and a replay), so these stay byte-identical.
TOKENS = [
    (
        "I bought 4 tickets for the concerts in two cities!",
        ["bought", "4", "ticket", "concert", "two", "city"],
        [1821351958, 1625113531, 432855261, 544611001, 186403405, 2036550374],
    ),
    (
        "Churches, boxes & glasses: Marta’s 1990s mp3s",
        ["church", "box", "glass", "marta", "1990s", "mp3s"],
        [829331531, 949278947, 454814975, 71095130, 1561574554, 2094407144],
    ),
    (
        "The __init__ of naïve cafés, don't we?",
        ["init", "naïve", "café"],
        [1709297416, 1134681014, 755221974],
    ),
]


def test_stem_is_pinned() -> None:
    assert {w: stem(w) for w in STEMS} == STEMS


def test_bm25_plural_folding_is_pinned() -> None:
    assert {w: fold_plural(w) for w in FOLDS} == FOLDS


def test_bm25_tokens_and_term_ids_are_pinned() -> None:
    assert SPARSE_VERSION == "bm25-v1"
    for text, tokens, ids in TOKENS:
        assert tokenize(text) == tokens
        assert [term_id(t) for t in tokens] == ids
        assert doc_vector(text).indices == sorted(set(ids))


def test_words_keep_every_script_and_letters_without_a_decomposition() -> None:
    """A letter that does not decompose (þ, ø, ł, ß) is part of its word, and other
    scripts are words too; Latin accents still fold."""
    assert words("Þórsmörk, Øresund; Łódź: straße & Zoë") == [
        "þorsmork", "øresund", "łodz", "straße", "zoe",
    ]  # fmt: skip
    assert words("Москва и 東京, हिन्दी") == ["москва", "и", "東京", "हिन्दी"]
    assert words("Inès's café, 12 p.m.") == ["ines's", "cafe", "12", "p", "m"]
    # a question and a memory in Cyrillic share their content words
    assert content_stems("Где живёт Ольга?") & content_stems("Ольга живёт в Казани.")


def test_ledger_time_form_is_pinned() -> None:
    # hashed into every ledger entry: the bytes must never change
    assert iso_utc(datetime(2026, 5, 1, 12, 0, tzinfo=UTC)) == "2026-05-01T12:00:00Z"
    assert (
        iso_utc(datetime(2026, 5, 1, 12, 0, 0, 5000, tzinfo=UTC)) == "2026-05-01T12:00:00.005000Z"
    )
    plus_two = timezone(timedelta(hours=2))
    assert iso_utc(datetime(2026, 5, 1, 12, 0, tzinfo=plus_two)) == "2026-05-01T12:00:00+02:00"
    assert z_suffix("2024-03-01T10:00:00+00:00") == "2024-03-01T10:00:00Z"


def test_parse_keeps_the_written_offset_and_reads_naive_as_utc() -> None:
    late = parse_ts("2024-03-01T23:30:00-05:00")
    assert late is not None and late.utcoffset() == timedelta(hours=-5)
    assert day_of("2024-03-01T23:30:00-05:00") == "2024-03-01"
    assert parse_ts("2024-03-01T10:00:00") == datetime(2024, 3, 1, 10, tzinfo=UTC)
    assert parse_ts("2024-03-01") == datetime(2024, 3, 1, tzinfo=UTC)
    assert parse_ts("yesterday") is None and parse_ts("") is None and parse_ts(None) is None
    assert day_of("nonsense") == ""
    assert epoch_seconds("1970-01-01T00:01:00Z") == 60.0
    with pytest.raises(ValueError):
        epoch_seconds("nonsense")


def test_graph_time_form_is_fixed_width() -> None:
    assert iso_z("2024-03-01T12:00:00.5+02:00") == "2024-03-01T10:00:00.500000Z"
    with pytest.raises(ValueError, match="not an ISO 8601 timestamp: 'yesterday'"):
        iso_z("yesterday")
