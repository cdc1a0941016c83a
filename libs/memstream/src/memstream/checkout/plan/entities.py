"""Query entity resolution against what the tenant's memory knows (pure).

A query names an entity by its key ("payments service"), in another case ("zoe"), without
its accents ("Zoe" for "Zoë Durand"), by part of its name ("Durand"), with a typo
("Carolin"), or by role: "the user", "I/me/my" (the asker is the user), "the assistant".
The lexicon is the tenant's graph entities with their role flags; resolution matches
folded word n-grams of the query against entity keys, longest first.

Precision rule: a capitalised word may resolve to any entity memory knows; a lower-case
word only to an entity memory holds structured knowledge about (an actor, or the subject of
facts or preferences). Lower-case words are mostly plain vocabulary ("research", "support
group"), and every resolved entity narrows what the packet may answer from.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from memstream.records.packet import EntityMention
from memstream.records.projected import EntityView
from memstream.text.names import MARKS, entity_key, name_candidates, sentence_initial
from memstream.text.words import STOPWORDS

MAX_NGRAM = 5
MAX_ALTERNATIVES = 4  # keys one mention may stand for ("Zoe" → two Zoes), best first
FUZZY_MIN = 88  # rapidfuzz ratio: one typo in a name of 8 letters
FUZZY_MIN_CHARS = 5
PARTIAL_MIN_CHARS = 3
USER_KEY, ASSISTANT_KEY = "user", "assistant"
_KNOWN_MATCHES = frozenset({"exact", "partial", "fuzzy"})  # names memory knows

# Words naming a side of the conversation; "the" is folded away by entity_key.
_USER_ROLE = frozenset({"user", "the user"})
_ASSISTANT_ROLE = frozenset({"assistant", "the assistant"})
_USER_PRONOUNS = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
# "tell me", "remind me": the asker as the one addressed, not what the question is about.
_ASKER_ME = re.compile(
    r"\b(?:tell|remind|show|give|let|help|ask|send|get|find|bring)\s+me\b", re.IGNORECASE
)
_LETTERS = rf"[\w{MARKS}]+"  # combining marks too ("Ọ̀kàfor")
_TOKEN = re.compile(rf"{_LETTERS}(?:['’.@/-]{_LETTERS})*", re.UNICODE)


@dataclass(frozen=True)
class _Token:
    text: str  # as written
    key: str  # folded like an entity key
    start: int
    end: int
    initial: bool  # opens a sentence of the query

    @property
    def capitalised(self) -> bool:
        return self.text[:1].isupper()


@dataclass(frozen=True)
class Lexicon:
    """A tenant's entities, indexed by key and by the words of multi-word keys."""

    entities: dict[str, EntityView] = field(default_factory=dict)
    by_word: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, views: Iterable[EntityView]) -> Lexicon:
        entities = {v.key: v for v in views if v.key}
        words: dict[str, list[str]] = defaultdict(list)
        for key in entities:
            parts = key.split()
            if len(parts) > 1:
                for part in dict.fromkeys(parts):
                    if len(part) >= PARTIAL_MIN_CHARS and part not in STOPWORDS:
                        words[part].append(key)
        return cls(entities, {w: tuple(sorted(ks)) for w, ks in words.items()})

    def structured(self, key: str) -> bool:
        """Memory holds structured knowledge about ``key``: an actor or a fact subject."""
        v = self.entities.get(key)
        return v is not None and (v.actor or v.subject)

    def side(self, role: str) -> list[str]:
        """Keys speaking for the user's (or assistant's) side, the role's own key first."""
        own = USER_KEY if role == "user" else ASSISTANT_KEY
        flag = "user_side" if role == "user" else "assistant_side"
        keys = [own] if own in self.entities else []
        keys += sorted(k for k, v in self.entities.items() if getattr(v, flag) and k != own)
        return (keys or [own])[:MAX_ALTERNATIVES]


EMPTY = Lexicon()


def _tokens(query: str) -> list[_Token]:
    return [
        _Token(
            m.group(0),
            entity_key(m.group(0)),
            m.start(),
            m.end(),
            sentence_initial(query, m.start()),
        )
        for m in _TOKEN.finditer(query)
    ]


def _eligible(lexicon: Lexicon, key: str, words: list[_Token]) -> bool:
    if all(t.key in STOPWORDS for t in words):
        # "June", "May", "Will": a name only of someone memory knows (an actor or a fact
        # subject), written as a name: capitalised, and not where a sentence opens ("Will
        # Noor come?"). Where the question writes a date ("in June"), the date wins
        # (``locate_entities``).
        return lexicon.structured(key) and words[0].capitalised and not words[0].initial
    return any(t.capitalised for t in words) or lexicon.structured(key)


def _mention(words: list[_Token], keys: list[str], match: str, score: float) -> EntityMention:
    text = " ".join(t.text for t in words)
    return EntityMention(
        text=text, keys=keys[:MAX_ALTERNATIVES], match=match, score=round(score, 3)
    )


def _role(words: list[_Token], lexicon: Lexicon) -> EntityMention | None:
    phrase = " ".join(t.key for t in words)
    if phrase in _USER_ROLE:
        return _mention(words, lexicon.side("user"), "role", 1.0)
    if phrase in _ASSISTANT_ROLE:
        return _mention(words, lexicon.side("assistant"), "role", 1.0)
    return None


def _exact(words: list[_Token], lexicon: Lexicon) -> EntityMention | None:
    key = entity_key(" ".join(t.text for t in words))
    if key in lexicon.entities and _eligible(lexicon, key, words):
        return _mention(words, [key], "exact", 1.0)
    return None


def _partial(word: _Token, lexicon: Lexicon) -> EntityMention | None:
    """A word of multi-word names ("Zoe" of "zoe durand"); lower-case only as a first word."""
    if len(word.key) < PARTIAL_MIN_CHARS or word.key in STOPWORDS:
        return None
    keys = [
        k
        for k in lexicon.by_word.get(word.key, ())
        if word.capitalised or (lexicon.structured(k) and k.split()[0] == word.key)
    ]
    if not keys:
        return None
    keys.sort(key=lambda k: (not lexicon.structured(k), k))
    return _mention([word], keys, "partial", 0.8)


def _fuzzy(words: list[_Token], lexicon: Lexicon) -> EntityMention | None:
    text = " ".join(t.key for t in words)
    if len(text) < FUZZY_MIN_CHARS or all(t.key in STOPWORDS for t in words):
        return None
    capitalised = any(t.capitalised for t in words)
    choices = [k for k in lexicon.entities if capitalised or lexicon.structured(k)]
    found = process.extract(text, choices, scorer=fuzz.ratio, score_cutoff=FUZZY_MIN, limit=3)
    if not found:
        return None
    keys = [str(k) for k, _score, _i in found]
    return _mention(words, keys, "fuzzy", float(found[0][1]) / 100)


def _match_at(tokens: list[_Token], i: int, lexicon: Lexicon) -> tuple[int, EntityMention] | None:
    """The longest mention starting at token ``i``: (tokens used, mention)."""
    for n in range(min(MAX_NGRAM, len(tokens) - i), 0, -1):
        words = tokens[i : i + n]
        found = _role(words, lexicon) or _exact(words, lexicon)
        if found is not None:
            return n, found
    for n in (2, 1):
        words = tokens[i : i + n]
        if len(words) == n and (found := _fuzzy(words, lexicon)) is not None:
            return n, found
    found = _partial(tokens[i], lexicon) or _short_form(tokens[i], lexicon)
    return (1, found) if found is not None else None


def _short_form(word: _Token, lexicon: Lexicon) -> EntityMention | None:
    """A capitalised short form of one speaker's name ("Val" for Valentina, "Bas" for
    Bastien): the start of the first word of exactly one actor's name, which memory does
    not know as a name of its own."""
    if not word.capitalised or len(word.key) < PARTIAL_MIN_CHARS or word.key in STOPWORDS:
        return None
    keys = [
        k
        for k, v in lexicon.entities.items()
        if v.actor and k.split()[0].startswith(word.key) and k.split()[0] != word.key
    ]
    return _mention([word], keys, "partial", 0.7) if len(keys) == 1 else None


def _unknown_names(query: str, taken: list[tuple[int, int]]) -> list[tuple[int, EntityMention]]:
    """Capitalised names memory does not know: still what the question is about.

    A name that runs into a known one ("Tomás's Bakery" with "Tomás" known) leaves its other
    words as a name of their own ("Bakery"): the question still names it.
    """
    out: list[tuple[int, EntityMention]] = []
    cursor = 0
    for name in name_candidates(query):
        pos = query.find(name, cursor)
        pos = pos if pos >= 0 else query.find(name)
        cursor = pos + len(name)
        for start, text in _outside(name, pos, taken):
            key = entity_key(text)
            if key and key not in STOPWORDS:
                mention = EntityMention(text=text, keys=[key], match="unknown", score=0.0)
                out.append((start, mention))
    return out


def _outside(name: str, pos: int, taken: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """Runs of the words of ``name`` (at ``pos``) that no known mention covers."""
    runs: list[tuple[int, str]] = []
    run_start, run_end = -1, -1
    for m in _TOKEN.finditer(name):
        a, b = pos + m.start(), pos + m.end()
        if any(x <= a < y for x, y in taken):
            if run_start >= 0:
                runs.append((run_start, name[run_start - pos : run_end - pos]))
            run_start = -1
            continue
        run_start = a if run_start < 0 else run_start
        run_end = b
    if run_start >= 0:
        runs.append((run_start, name[run_start - pos : run_end - pos]))
    return [(a, t) for a, t in runs if t[:1].isupper()]


def _asker(query: str, tokens: list[_Token], lexicon: Lexicon) -> Located | None:
    """ "I/my/me" (not "tell me") make the user what the question is about."""
    asker_me = {m.end() - 2 for m in _ASKER_ME.finditer(query)}
    words = [t for t in tokens if t.key in _USER_PRONOUNS and t.start not in asker_me]
    if not words:
        return None
    mention = _mention(words[:1], lexicon.side("user"), "asker", 1.0)
    return Located(words[0].start, words[0].end, mention)


@dataclass(frozen=True)
class Located:
    """A mention and where the query writes it (``query[start:end]``)."""

    start: int
    end: int
    mention: EntityMention


def locate_entities(
    query: str, lexicon: Lexicon = EMPTY, dated: Sequence[tuple[int, int]] = ()
) -> list[Located]:
    """Every place ``query`` names an entity, in query order (a name twice is there twice).

    Pronouns of the asker count only when nothing else is named ("Where do I live?"), so
    "Tell me what Noor bought" stays about Noor. ``dated``: the ``(start, end)`` of the
    query's date expressions; a name that is also a word ("June") is no name inside one.
    """
    tokens = _tokens(query)
    found: list[Located] = []
    i = 0
    while i < len(tokens):
        hit = _match_at(tokens, i, lexicon)
        if hit is None:
            i += 1
            continue
        n, mention = hit
        if not _in_date(tokens[i : i + n], dated):
            found.append(Located(tokens[i].start, tokens[i + n - 1].end, mention))
        i += n
    taken = [(f.start, f.end) for f in found]
    found += [Located(a, a + len(m.text), m) for a, m in _unknown_names(query, taken)]
    if not found and (asker := _asker(query, tokens, lexicon)) is not None:
        found.append(asker)
    return sorted(found, key=lambda f: f.start)


def _in_date(words: list[_Token], dated: Sequence[tuple[int, int]]) -> bool:
    """``words`` are only stopwords ("June", "May") and lie in a date expression."""
    start, end = words[0].start, words[-1].end
    return all(t.key in STOPWORDS for t in words) and any(a < end and start < b for a, b in dated)


def resolve_entities(query: str, lexicon: Lexicon = EMPTY) -> list[EntityMention]:
    """The entities ``query`` names, in query order, each once with the keys it may mean."""
    return distinct(locate_entities(query, lexicon))


def distinct(located: list[Located]) -> list[EntityMention]:
    """The mentions of ``located``, each entity once (its first place)."""
    out: list[EntityMention] = []
    seen: set[str] = set()
    for f in located:
        if f.mention.keys[0] not in seen:
            seen.add(f.mention.keys[0])
            out.append(f.mention)
    return out


def without_known_names(query: str, located: list[Located]) -> str:
    """``query`` with the names of entities memory knows blanked out, offsets kept.

    Words inside a name are not cues: "Where does Spent live now?" asks for a current
    value, not a sum, and "Count Olaf" is no count. Unknown names keep their words (a
    capitalised "Rent" at a sentence start is still the rent).
    """
    spans = [(f.start, f.end) for f in located if f.mention.match in _KNOWN_MATCHES]
    chars = list(query)
    for start, end in spans:
        chars[start:end] = "x" * (end - start)
    return "".join(chars)
