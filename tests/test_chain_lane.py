"""The chain lane: the turns that belong with a hit (``reach.around``), pure and over a real
FalkorDB graph and a Qdrant Edge index."""

from __future__ import annotations

from pathlib import Path

from lanedata import chat_entries, filler, projected
from memstream.checkout.plan import plan_query
from memstream.checkout.retrieve.reach import around, asks
from memstream.records.projected import EventRecord
from memstream.stack.servers import Server


def turn(seq: int, agent: str, text: str) -> EventRecord:
    return EventRecord(
        tenant="t", event_id=f"e{seq}", stream="s", seq=seq, hash="h", prev_hash="p",
        type="message.user", agent=agent, occurred_at="2031-05-01T10:00:00Z",
        ingested_at="2031-05-01T10:00:00Z", text=text,
    )  # fmt: skip


def seqs(chain: list[EventRecord]) -> list[int]:
    return [e.seq for e in chain]


def test_the_answer_to_a_question_asked_about_a_hit_belongs_with_it() -> None:
    chain = [
        turn(3, "Mei", "Did you get out on the water?"),
        turn(4, "Ravi", "I paddled the river canyon in my new kayak on Sunday!"),
        turn(5, "Mei", "That sounds wild. How did the rapids feel?  "),
        turn(6, "Ravi", "Terrifying at first, then pure joy."),
    ]
    assert seqs(around(4, chain)) == [3, 4, 5, 6]


def test_without_a_question_after_the_hit_the_chain_is_its_neighbours() -> None:
    chain = [
        turn(2, "Mei", "Hi!"),
        turn(3, "Ravi", "Hello"),
        turn(4, "Mei", "I paddled the river canyon in my new kayak on Sunday!"),
        turn(5, "Ravi", "Nice. Was it cold? I guess it was."),  # a question, but not at the end
        turn(6, "Mei", "It was."),
    ]
    assert seqs(around(4, chain)) == [3, 4, 5]


def test_a_question_the_speaker_asks_or_answers_alone_brings_no_answer() -> None:
    # the speaker goes on asking themselves
    alone = [turn(4, "Ravi", "I sanded the old oak table."), turn(5, "Ravi", "Guess what?"),
             turn(6, "Mei", "What?")]  # fmt: skip
    assert seqs(around(4, alone)) == [4, 5]
    # the asker answers their own question
    asker = [turn(4, "Ravi", "I sanded the old oak table."), turn(5, "Mei", "Looks smooth?"),
             turn(6, "Mei", "Mine never do.")]  # fmt: skip
    assert seqs(around(4, asker)) == [4, 5]


def test_a_question_reads_past_what_trails_it_in_a_chat() -> None:
    asking = ["Any good?\x00", "Any good? 😋", "Any good?❤️", "好吃吗？", "Any good?\u200b\t\n",
              "هل كان جيدا؟", "¿Qué tal?", "Really?!", "Really?! 😮",
              "x" * 200_000 + "?"]  # fmt: skip
    for text in asking:
        assert asks(text), repr(text[-12:])
    telling = [
        "",
        "!!",
        "Wow!",
        "Looks smooth?" + "😋" * 100_000,  # past the tail that is read: no question
        "Looks smooth?" + "\x00 " * 300_000,
        'Any good?" she asked',
        "\x00\x00",
        "It was good",
        "Why? It was.",
    ]
    for text in telling:
        assert not asks(text), repr(text[-12:])
    chain = [turn(4, "Ravi", "I sanded the old oak table."), turn(5, "Mei", "Looks smooth？\x00"),
             turn(6, "Ravi", "Like glass.")]  # fmt: skip
    assert seqs(around(4, chain)) == [4, 5, 6]


def test_speakers_are_one_person_however_their_name_is_written() -> None:
    # "Zoë" composed (U+00EB) and decomposed (e + U+0308), and in another case, is one person.
    composed, decomposed = "Zo\u00eb", "Zoe\u0308"
    asker = [turn(4, "Ravi", "I sanded the old oak table."), turn(5, composed, "Looks smooth?"),
             turn(6, decomposed.upper(), "Mine never do.")]  # fmt: skip
    assert seqs(around(4, asker)) == [4, 5]
    alone = [turn(4, composed, "I sanded the old oak table."), turn(5, decomposed, "Guess what?"),
             turn(6, "Ravi", "What?")]  # fmt: skip
    assert seqs(around(4, alone)) == [4, 5]


def test_the_ends_of_a_stream_and_a_hit_missing_from_its_chain() -> None:
    assert seqs(around(1, [turn(1, "Ravi", "First!"), turn(2, "Mei", "Why?")])) == [1, 2]
    assert seqs(around(9, [turn(7, "Mei", "Hm?"), turn(8, "Ravi", "Yes")])) == [8]
    assert around(5, []) == []


# Mei asks about what Ravi did; Ravi's answer names none of it.
RIVER = [
    ("Mei", "Hi Ravi, how did your week go?"),
    ("Ravi", "I paddled the Tern river canyon in my new kayak on Sunday with my cousin."),
    ("Mei", "That sounds wild! How did the rapids feel?"),
    ("Ravi", "Terrifying at first, then pure joy, honestly the best day this spring."),
    ("Mei", "I want to come next time."),
    ("Ravi", "The canyon is calm early in the morning, bring a dry bag."),
    ("Mei", "Deal."),
    ("Ravi", "See you soon."),
    *filler("Ravi", "Mei", 30),
]


def test_the_chain_lane_adds_the_answer_to_the_question_asked_about_a_hit(
    falkordb_server: Server, tmp_path: Path
) -> None:
    talk = chat_entries("river", RIVER, "k")
    with projected(falkordb_server, tmp_path, "chain_lane_test", talk) as r:
        question = "What did Ravi think of paddling the canyon in his kayak?"
        plan = plan_query(question, "2031-06-01T00:00:00Z")
        pool = {c.item_id: c for c in r.retrieve("river", plan)}
    assert "chain" in pool["k3"].lanes, pool["k3"].lanes
