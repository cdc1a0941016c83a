"""Query expansion's pure part: which words of a question bring related words, at what
weight (a hand-written neighbour table), and how the sparse query carries them."""

from __future__ import annotations

import numpy as np
import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.retrieve.expand import MAX_WORDS, NEIGHBOURS, WEIGHT, related_terms
from memstream.embed.hashing import HashingEmbedder
from memstream.embed.port import TermNeighbours
from memstream.embed.static import NEIGHBOURS_KEPT, WEIGHTS_DIR, StaticEmbedder
from memstream.vectors.sparse import query_vector, term_id
from safetensors.numpy import load_file

NOW = "2031-03-10T09:00:00Z"


class Table:
    """Neighbours from a dict; records which words were asked about."""

    def __init__(self, table: dict[str, list[tuple[str, float]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def neighbours(self, word: str, limit: int, min_similarity: float) -> list[tuple[str, float]]:
        self.asked.append(word)
        near = [(w, s) for w, s in self.table.get(word, []) if s >= min_similarity]
        return near[:limit]


TABLE = Table(
    {
        "wedding": [("marriage", 0.8), ("bride", 0.75), ("the", 0.7), ("weddings", 0.7)],
        "cake": [("pastry", 0.7), ("dessert", 0.65), ("bakery", 0.5)],
        "gift": [("present", 0.9), ("dessert", 0.9)],
        "ingrid": [("astrid", 0.9)],
        "law": [("statute", 0.8)],
        "mother": [("mum", 0.7)],
    }
)


def test_each_ordinary_word_brings_its_near_words_at_a_fraction_of_a_question_word() -> None:
    related = related_terms(plan_query("which cake was served at the wedding?", NOW), TABLE)
    assert related == {
        "pastry": round(WEIGHT * 0.7, 4),
        "dessert": round(WEIGHT * 0.65, 4),
        "marriage": round(WEIGHT * 0.8, 4),
        "bride": round(WEIGHT * 0.75, 4),
    }  # "bakery" is not near enough, "the" is a stopword, "weddings" a form of "wedding"


def test_a_word_two_question_words_bring_keeps_its_best_weight() -> None:
    related = related_terms(plan_query("a cake as a gift", NOW), TABLE)
    assert related["dessert"] == round(WEIGHT * 0.9, 4)


def test_a_word_the_question_says_is_not_added() -> None:
    related = related_terms(plan_query("a wedding present and a cake", NOW), TABLE)
    assert "present" not in related and "pastry" in related


@pytest.mark.parametrize(
    "question",
    [
        "What did Ingrid bring?",  # a name the planner recognises
        "what did the user and Ingrid bring?",  # capitalised inside the sentence
        "Ingrid brought what?",  # at the start of the sentence
        "what happened in 2029?",
        "what did the user's mother-in-law bring?",
        "",
    ],
)
def test_names_numbers_and_compounds_bring_nothing(question: str) -> None:
    table = Table(TABLE.table)
    related = related_terms(plan_query(question or "?", NOW), table)
    assert not {"astrid", "statute", "mum"} & set(related)
    assert not {"ingrid", "2029", "law", "mother"} & set(table.asked)


def test_a_capitalised_word_is_kept_as_it_is_said_in_lower_case_it_is_expanded() -> None:
    table = Table({"cake": [("pastry", 0.7)], "bring": [("carry", 0.7)]})
    assert related_terms(plan_query("Bring Cake?", NOW), table) == {}
    related = related_terms(plan_query("bring cake?", NOW), table)
    assert related == {"pastry": round(WEIGHT * 0.7, 4), "carry": round(WEIGHT * 0.7, 4)}


def test_at_most_a_few_words_per_question_word() -> None:
    many = Table({"trip": [(f"word{chr(97 + i)}", 0.9 - i / 100) for i in range(20)]})
    related = related_terms(plan_query("the trip", NOW), many)
    assert len(related) == NEIGHBOURS
    assert "worda" in related and f"word{chr(97 + NEIGHBOURS)}" not in related


def test_control_characters_and_long_questions_expand_like_any_other() -> None:
    question = "which\x00 cake\x01 at the\x7f wedding? " + "filler " * 500
    related = related_terms(plan_query(question, NOW), TABLE)
    assert {"pastry", "marriage"} <= set(related)


def test_a_question_of_many_words_looks_up_its_first_few_only() -> None:
    table = Table(TABLE.table)
    words = " ".join(f"word{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(300))
    related_terms(plan_query("which cake at the wedding? " + words, NOW), table)
    assert table.asked[:2] == ["cake", "wedding"] and len(table.asked) == MAX_WORDS


def test_the_sparse_query_carries_related_words_below_its_own() -> None:
    plain = query_vector("wedding cake")
    expanded = query_vector("wedding cake", {"marriage": 0.16, "Cakes": 0.5})
    weights = dict(zip(expanded.indices, expanded.values, strict=True))
    assert weights[term_id("marriage")] == 0.16
    assert weights[term_id("cake")] == 1.0  # a question word is never lowered
    assert set(plain.indices) < set(expanded.indices)
    assert query_vector("wedding cake", {}) == plain
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="marriage"):
            query_vector("wedding", {"marriage": bad})


def test_the_static_embedder_names_near_whole_words_the_hashing_one_none() -> None:
    static = StaticEmbedder()
    assert isinstance(static, TermNeighbours)
    assert not isinstance(HashingEmbedder(64), TermNeighbours)
    near = static.neighbours("married", 5, 0.6)
    words = [w for w, _ in near]
    assert len(near) == 5 and "marriage" in words and "married" not in words
    assert all(w.isalpha() for w in words)  # no word pieces
    sims = [s for _, s in near]
    assert sims == sorted(sims, reverse=True) and min(sims) >= 0.6
    assert static.neighbours("married", 50, 0.95) == []
    for nothing in ("2029", "xqzvbrt", "", "two words", "\x00"):
        assert static.neighbours(nothing, 5, 0.5) == []
    assert static.neighbours("married", 0, 0.5) == []


def test_the_shipped_nearest_words_are_the_token_tables_own() -> None:
    """The table beside the weights (built by ``scripts/static_neighbours.py``) is what the
    weights give: recomputed here by brute force for words of several kinds."""
    static = StaticEmbedder()
    vocab = static._tokenizer.get_vocab()
    words = sorted(w for w in vocab if w.isalpha())
    table = np.asarray(load_file(str(WEIGHTS_DIR / "model.safetensors"))["embeddings"], "f4")
    rows = np.array([vocab[w] for w in words])
    unit = table[rows] / np.linalg.norm(table[rows], axis=1, keepdims=True)
    for word in ("married", "violin", "cheap", "quickly", "ocean", "angry", words[0], words[-1]):
        own = words.index(word)
        sims = unit @ unit[own]
        sims[own] = -1.0
        shipped = static.neighbours(word, NEIGHBOURS_KEPT, -1.0)
        assert len(shipped) == NEIGHBOURS_KEPT, word
        for other, sim in shipped:
            assert abs(sims[words.index(other)] - sim) < 2e-3, (word, other)
        best_left_out = max(s for w, s in zip(words, sims, strict=True) if w not in dict(shipped))
        assert best_left_out <= shipped[-1][1] + 2e-3, word
