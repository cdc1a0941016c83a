"""The chain lane: the turns that belong with a hit (``reach.around``), pure and over a real
FalkorDB graph and a Qdrant Edge index."""

from __future__ import annotations

from pathlib import Path

from lanedata import chat_entries, filler, projected
from memstream.checkout.plan import plan_query
from memstream.checkout.retrieve.reach import around, asks
from memstream.projection.model import EventRecord
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
        turn(3, "Ana", "Did you cook anything?"),
        turn(4, "Ben", "I made coconut milk ice cream yesterday!"),
        turn(5, "Ana", "Looks delish. What did you think of it?  "),
        turn(6, "Ben", "Super good, rich and creamy."),
    ]
    assert seqs(around(4, chain)) == [3, 4, 5, 6]


def test_without_a_question_after_the_hit_the_chain_is_its_neighbours() -> None:
    chain = [
        turn(2, "Ana", "Hi!"),
        turn(3, "Ben", "Hello"),
        turn(4, "Ana", "I made coconut milk ice cream yesterday!"),
        turn(5, "Ben", "Nice. Is it vegan? I bet it is."),  # a question, but not at the end
        turn(6, "Ana", "It is."),
    ]
    assert seqs(around(4, chain)) == [3, 4, 5]


def test_a_question_the_speaker_asks_or_answers_alone_brings_no_answer() -> None:
    # the speaker goes on asking themselves
    alone = [turn(4, "Ben", "I made ice cream."), turn(5, "Ben", "Guess what?"),
             turn(6, "Ana", "What?")]  # fmt: skip
    assert seqs(around(4, alone)) == [4, 5]
    # the asker answers their own question
    asker = [turn(4, "Ben", "I made ice cream."), turn(5, "Ana", "Any good?"),
             turn(6, "Ana", "Mine never is.")]  # fmt: skip
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
        "Any good?" + "😋" * 100_000,  # past the tail that is read: no question
        "Any good?" + "\x00 " * 300_000,
        'Any good?" she asked',
        "\x00\x00",
        "It was good",
        "Why? It was.",
    ]
    for text in telling:
        assert not asks(text), repr(text[-12:])
    chain = [turn(4, "Ben", "I made ice cream."), turn(5, "Ana", "Any good？\x00"),
             turn(6, "Ben", "Rich and creamy.")]  # fmt: skip
    assert seqs(around(4, chain)) == [4, 5, 6]


def test_speakers_are_one_person_however_their_name_is_written() -> None:
    # "Zoë" composed (U+00EB) and decomposed (e + U+0308), and in another case, is one person.
    composed, decomposed = "Zo\u00eb", "Zoe\u0308"
    asker = [turn(4, "Ben", "I made ice cream."), turn(5, composed, "Any good?"),
             turn(6, decomposed.upper(), "Mine never is.")]  # fmt: skip
    assert seqs(around(4, asker)) == [4, 5]
    alone = [turn(4, composed, "I made ice cream."), turn(5, decomposed, "Guess what?"),
             turn(6, "Ben", "What?")]  # fmt: skip
    assert seqs(around(4, alone)) == [4, 5]


def test_the_ends_of_a_stream_and_a_hit_missing_from_its_chain() -> None:
    assert seqs(around(1, [turn(1, "Ben", "First!"), turn(2, "Ana", "Why?")])) == [1, 2]
    assert seqs(around(9, [turn(7, "Ana", "Hm?"), turn(8, "Ben", "Yes")])) == [8]
    assert around(5, []) == []


# Ana's question repeats what Ben said he made; Ben's answer names none of it.
KITCHEN = [
    ("Ana", "Hey Ben, how was your weekend?"),
    ("Ben", "Busy! I made coconut milk ice cream on Saturday with my niece."),
    ("Ana", "Looks delish! Glad you tried something new. What did you think of it?"),
    ("Ben", "Super good! Rich and creamy, my new favourite snack."),
    ("Ana", "I should try it too."),
    ("Ben", "Coconut milk ice cream is easy, you only need a freezer."),
    ("Ana", "Nice, I will."),
    ("Ben", "Great, talk soon."),
    *filler("Ben", "Ana", 30),
]


def test_the_chain_lane_adds_the_answer_to_the_question_asked_about_a_hit(
    falkordb_server: Server, tmp_path: Path
) -> None:
    talk = chat_entries("cooks", KITCHEN, "k")
    with projected(falkordb_server, tmp_path, "chain_lane_test", talk) as r:
        question = "What did Ben think of the coconut milk ice cream?"
        plan = plan_query(question, "2031-06-01T00:00:00Z")
        pool = {c.item_id: c for c in r.retrieve("cooks", plan)}
    assert "chain" in pool["k3"].lanes, pool["k3"].lanes
