"""Whether a question's answer is spread over many moments: an aggregation read from wording.

"What activities does Ana do?", "which cities has she lived in?", "how many times did we
meet?", "list every book I lent": their answer is gathered from several sessions, each
holding one piece, so the packet's first slots should cover those sessions rather than hold
the best one's neighbours. A single-fact question ("where does Ana live?") keeps the order
the scores give. English cues only, class-level: plural objects, the perfect of a past act,
and the words that ask for all of something.
"""

from __future__ import annotations

import re

from memstream.checkout.plan.operation import normalised
from memstream.records.packet import Operation

# Operations that read every matching item, not one.
AGGREGATING: frozenset[Operation] = frozenset({"list", "count", "sum", "average", "difference"})

_AUX = r"(?:do|does|did|has|have|had|is|are|was|were|would|will|can|could|might|should)"
# "what kinds of books does...", "which museums has...", "what new hobbies did..."
_PLURAL_OBJECT = re.compile(
    rf"^(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(?:(?!{_AUX}\b)[\w'-]+\s+)?"
    rf"(?P<noun>[\w'-]{{3,}})\s+{_AUX}\b"
)
# Words that end in -s and are not plural nouns.
_NOT_PLURAL = re.compile(r"(?:ss|us|is|ys|'s)$")
# -s words that stand where the object noun would: pronouns and verb forms.
_NOT_NOUNS = frozenset({"this", "his", "its", "hers", "ours", "yours", "theirs", "does", "goes"})
# "what has Ana painted", "where have they travelled": a past act that may have recurred.
_IRREGULAR_PARTICIPLES = (
    "done been gone seen read made taken written bought won eaten given known met run sung "
    "drawn grown begun built found held kept left lost paid sent spent taught thought told "
    "worn chosen flown driven ridden brought caught sold shown heard felt"
)
_PERFECT = re.compile(
    r"^(?:what|where|which|who)\b.*\b(?:has|have)\s+(?:[\w'-]+\s+){0,3}?"
    rf"(?:\w+ed|{'|'.join(_IRREGULAR_PARTICIPLES.split())})\b"
)
_ALL = re.compile(
    r"\bhow many times\b|\bhow often\b|\b(?:all|every|each)\b|\bso far\b|\bin total\b|"
    r"\bover the (?:years|months|weeks|past)\b|\bwhat else\b|\bother than\b|\bbesides\b"
)


def spreads(query: str, operation: Operation) -> bool:
    """Whether ``query`` gathers its answer from many moments (an aggregation)."""
    if operation in AGGREGATING:
        return True
    q = normalised(query)
    if _ALL.search(q) or _PERFECT.search(q):
        return True
    m = _PLURAL_OBJECT.search(q)
    return m is not None and _plural(m.group("noun"))


def _plural(noun: str) -> bool:
    return noun.endswith("s") and not _NOT_PLURAL.search(noun) and noun not in _NOT_NOUNS
