"""Whether a remembered statement can answer: who it is about, and whether it tells at all.

A question about a named speaker ("What did Noor buy?") must not be answered from another
speaker's first-person words ("I bought a kayak", said by Idris), unless those words talk
about the named person. Addressing someone ("Thanks, Noor!") is not talking about them.
A "who" question is not answered by a statement that names no one: no name, no pronoun
for a person, no "by ..." (a cause or a bare event is not a who).
A statement that only asks ("What did you buy, Noor?") repeats the question's words and
tells nothing: where every sentence naming what the question asks about is a question, it is
an echo, not evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from memstream.records.packet import Candidate
from memstream.text.names import entity_key, is_address
from memstream.text.words import STOPWORDS, content_stems

_FIRST_PERSON = re.compile(
    r"\bI\b|\bI['’](?:m|ve|d|ll)\b|\b(?:my|me|mine|myself|we|our|ours|us|ourselves)\b",
    re.IGNORECASE,
)
_LONE_I = re.compile(r"\bi\b")
_OTHER_PERSON = re.compile(
    r"\b(?:you|your|yours|yourself|he|she|they|him|her|his|hers|them|their|theirs|himself"
    r"|herself|themselves)\b",
    re.IGNORECASE,
)
_BY_SOMEONE = re.compile(r"\bby\s+\w", re.IGNORECASE)  # a passive's agent ("fixed by Ana")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
# A sentence: up to its closing punctuation (a run of it), or to the end of the text.
_SENTENCE = re.compile(r"[^.!?…\n]+(?:[.!?…]+|\n|$)")
_CLOSE = re.compile(r"[.!?…]*\s*$")  # a sentence's closing run (always matches)


def first_person(text: str) -> bool:
    """The text speaks of its speaker (I, my, we, our, ...)."""
    hits = [m.group(0) for m in _FIRST_PERSON.finditer(text)]
    # a lower-case lone "i" is more often a list marker or a typo than the pronoun
    return any(not _LONE_I.fullmatch(h) for h in hits)


def talks_about(text: str, name: str) -> bool:
    """``name`` occurs in ``text`` other than as a direct address."""
    for m in re.finditer(rf"\b{re.escape(name)}\b", text, re.IGNORECASE):
        if not is_address(text, m.start(), m.end()):
            return True
    return False


def names_someone(c: Candidate) -> bool:
    """The text could say who: a personal pronoun, a "by ...", an entity besides its
    speaker, or a capitalised word that is no stopword ("The", "Tuesday" and "Yesterday"
    are). Fails open: anything name-like counts, a sentence's first word among them."""
    text = c.text
    if first_person(text) or _OTHER_PERSON.search(text) or _BY_SOMEONE.search(text):
        return True
    if any(k != entity_key(c.agent) for k in c.entity_keys):
        return True
    return any(w[0].isupper() and w.lower() not in STOPWORDS for w in _WORD.findall(text))


def nameless(support_ids: list[str], by_id: Mapping[str, Candidate]) -> str | None:
    """Why the support of a who-question's answer cannot say who, or None if it may: every
    supporting item is an event that names no one (:func:`names_someone`)."""
    support = [by_id[i] for i in support_ids if i in by_id]
    if not support or any(c.kind != "event" or names_someone(c) for c in support):
        return None
    return "the matching memories name no one: they cannot say who"


def named_speakers(entities: Iterable[str], candidates: Iterable[Candidate]) -> list[str]:
    """Entity keys of the question that are speakers (agents) of some candidate event."""
    speakers = {entity_key(c.agent) for c in candidates if c.kind == "event" and c.agent}
    return [e for e in entities if e in speakers]


def misattributed(
    entities: list[str], support_ids: list[str], by_id: Mapping[str, Candidate]
) -> str | None:
    """Why the support speaks of someone other than the named speakers, or None if it may not.

    Fires only when every supporting item is an event said in the first person by another
    speaker that does not talk about any named speaker.
    """
    named = named_speakers(entities, by_id.values())
    support = [by_id[i] for i in support_ids if i in by_id]
    if not named or not support or any(c.kind != "event" for c in support):
        return None
    others: set[str] = set()
    for c in support:
        if entity_key(c.agent) in named or not first_person(c.text):
            return None
        if any(talks_about(c.text, n) for n in named):
            return None
        others.add(c.agent)
    who = ", ".join(sorted(others))
    return f"the matching memories are {who} speaking of themself, not of {', '.join(named)}"


def only_asks(text: str, focus: frozenset[str]) -> bool:
    """Every sentence of ``text`` holding one of the ``focus`` stems is a question: the text
    asks about what the question asks and asserts nothing an answer could rest on."""
    holding = [m.group(0) for m in _SENTENCE.finditer(text) if focus & content_stems(m.group(0))]
    return bool(holding) and all(_asks(s) for s in holding)


def _asks(sentence: str) -> bool:
    close = _CLOSE.search(sentence)
    return close is not None and "?" in close.group(0)
