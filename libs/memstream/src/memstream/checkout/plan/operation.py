"""What a query asks for, read from its wording: the operation, the answer's type and unit."""

from __future__ import annotations

import re
from typing import Literal

from memstream.records.packet import Operation
from memstream.text.units import normalise_unit

AnswerType = Literal["text", "number", "money", "date", "duration", "entity", "list", "boolean"]

_TIME_UNITS = r"(?:seconds|minutes|hours|days|weeks|months|years)"
_MEASURES = (
    r"(?:seconds|minutes|hours|days|weeks|months|years|km|kilomet(?:er|re)s|miles|meters|metres|"
    r"kg|kilograms|pounds|lbs|calories|steps|pages|dollars|euros|yen|percent|cups|gb|mb)"
)
_MONEY_CUES = re.compile(
    r"[$€£¥]|\b(?:spen[dt]|spending|costs?|pa(?:y|id)|price[ds]?|money|budget|expensive|cheap"
    r"(?:er|est)?|fees?|charged?|earn(?:ed)?|owe[ds]?|salary|rent|dollars?|euros?|usd|eur|gbp|"
    r"yen|afford|worth)\b"
)
# Operation cues in precedence order: the first that matches decides.
_OPERATIONS: list[tuple[Operation, re.Pattern[str]]] = [
    (
        "temporal_interval",
        re.compile(
            rf"\bhow long\b|\bsince when\b|\bduration\b|\bhow many {_TIME_UNITS} (?:ago|have|has|"
            rf"had|passed|elapsed|apart)\b|\bhow many {_TIME_UNITS}\b.*\b(?:between|since|until|"
            r"till|before|after|ago|passed|elapsed|apart|from)\b"
        ),
    ),
    (
        "difference",
        re.compile(
            r"\bdifference\b|\bhow (?:much|many) (?:more|less|fewer|longer|shorter|bigger|"
            r"smaller|higher|lower|cheaper|older|younger|further|farther|heavier|lighter)\b|"
            r"\bcompared (?:to|with)\b"
        ),
    ),
    (
        "average",
        re.compile(
            r"\baverage\b|\bavg\b|\b(?:the|my|our|a|an) mean\b|\bmean (?:value|amount|number)\b"
        ),
    ),
    ("sum", re.compile(r"\btotal\b|\bsum\b|\baltogether\b|\bin all\b|\bcombined\b")),
    ("count", re.compile(r"\bhow many\b|\bnumber of\b|\bhow often\b|\bcount\b")),
    ("sum", re.compile(r"\bspen[dt]\b|\bspending\b")),
    (
        "latest_value",
        re.compile(
            r"\bcurrent(?:ly)?\b|\bnow\b|\blatest\b|\bstill\b|\bthese days\b|\bat the moment\b|"
            r"\bmost recent(?:ly)?\b|\bnowadays\b|\banymore\b|\bat present\b"
        ),
    ),
    (
        "argmin",
        re.compile(r"\bleast\b|\blowest\b|\bsmallest\b|\bcheapest\b|\bfewest\b|\bminimum\b"),
    ),
    (
        "argmax",
        re.compile(
            r"\bmost\b|\bhighest\b|\blargest\b|\bbiggest\b|\bbest\b|\blongest\b|\bmaximum\b|"
            r"\bgreatest\b"
        ),
    ),
    (
        "temporal_order",
        re.compile(
            r"\bfirst\b|\bbefore\b|\bafter\b|\bearlier\b|\blater\b|\bsooner\b|\bwhat order\b|"
            r"\border of\b|\bchronolog"
        ),
    ),
    (
        "list",
        re.compile(
            r"^list\b|\blist (?:all|the|every|my)\b|\bwhich ones\b|\bwhat (?:are|were) all\b|"
            r"\bname (?:the|all|every)\b|\bwhat (?:kinds|types|sorts) of\b|\ball (?:the|of the|"
            r"of my)\b"
        ),
    ),
    (
        "absence",
        re.compile(
            r"\b(?:did|have|has|had|do|does|was|were|is|are)\b.*\bever\b|\bnever\b|"
            r"\b(?:has|have|had|did|does|do)(?:n't| not)\b|"
            r"^(?:has|have|had|did|does|do|is|are|was|were)\b(?:\s+\w+){1,3}\s+not\b"
        ),
    ),
]
_SUM_UNIT = re.compile(rf"\bhow many {_MEASURES}\b|\bnumber of {_MEASURES}\b")
_DATE_Q = re.compile(
    r"^when\b|\bwhen (?:did|was|were|is|will|do|does|had|has)\b|\bwhat (?:date|day|year|month|"
    r"time)\b|\bwhich (?:date|day|year|month)\b|\bsince when\b"
)
# A question about the work itself: its tasks and attempts and how they went. Records
# of work (task.*, feedback, proposals) answer these and nothing else.
_WORK_Q = re.compile(
    r"\b(?:tasks?|attempts?|outcomes?|feedback|retr(?:y|ied|ies)|succe(?:ed|eds|eded|"
    r"ss|ssful|ssfully)|fail(?:s|ed|ing|ures?)?|went wrong|gone wrong)\b"
)
_HOW_TO = re.compile(r"\bhow (?:do|can|could|should|would|shall) (?:i|we|you|one)\b|\bhow to\b")
_HOW_TO_OVERRIDES: frozenset[Operation] = frozenset(
    {"temporal_order", "argmax", "argmin", "absence", "list"}
)
_WHO = re.compile(r"\bwho(?:m|se)?\b|\bwith whom\b")
_YES_NO = re.compile(
    r"^(?:is|are|was|were|do|does|did|have|has|had|can|could|will|would|should|am)\b"
)
_UNIT_Q = re.compile(
    r"\b(?:how many|number of|in|into|total|of)\s+(?P<u>[a-z%°]+)\b|(?P<sym>[$€£¥])"
)
_KNOWN_UNITS = frozenset(
    """
    usd eur gbp jpy hour minute second day week month year km mile m cm mm kg lb % ticket
    item person user book page step calorie cup gb mb tb time
    """.split()  # noqa: SIM905
)


# A question about change: a value replaced by another. Asked of a person ("who changed
# jobs?"), as a yes/no about the past ("did Bob move?", "has Zoë switched teams?"), or as
# "what changed / what's new". A wh-question about the move itself ("where did she move
# from?") asks for a value, and a hypothetical ("would he move?") for an opinion: neither.
_CHANGE_VERB = (
    r"\b(?:chang(?:e|ed|es|ing)|switch(?:ed|es|ing)?|replac(?:e|ed|es|ing)|"
    r"mov(?:e|ed|es|ing)|relocat(?:e|ed|es|ing))\b"
)
_CHANGE = re.compile(
    rf"^(?:who|whom)\b.*{_CHANGE_VERB}|"
    rf"^(?:did|does|do|has|have|had|is|are|was|were)\b.*{_CHANGE_VERB}|"
    r"^what(?:'s| has| have)? changed\b|^what(?:'s| is| was) new\b|"
    r"^what (?:has|have) (?:\w+ )?changed\b"
)
# The change words themselves: not what the changed facts say (kept out of the focus).
CHANGE_WORDS = re.compile(r"^(?:chang|switch|replac)\w*$|^new$")
# Words asking how work went: not what the task records say (kept out of the focus).
OUTCOME_WORDS = re.compile(r"^(?:succe|fail|work|went|wrong|well|why)\w*$")
_CHANGE_OVER: frozenset[Operation] = frozenset({"lookup", "latest_value", "absence", "list"})
# A question about how work went: whether it worked ("did the migration succeed?", "was
# the rotation successful?") or what failed.
_OUTCOME = re.compile(
    r"^(?:did|does|do|has|have|had|was|were|is|are)\b.*\b(?:succe(?:ed|eded|ss|ssful|ssfully)|"
    r"fail(?:ed|s)?|go(?:ne)? (?:well|wrong)|went (?:well|wrong))\b|"
    r"^(?:did|does|has|have|had)\b.*\bwork(?:ed)?\W*$|"
    r"^(?:what|which)\b(?:\s+\w+){0,3}\s+(?:failed|went wrong|succeeded|worked)\b|"
    r"\bhow did\b.*\b(?:go|turn out|end)\b"
)


def classify(query: str) -> Operation:
    """The operation a query's wording asks for (class-level English cues). A how-to question
    asks for a procedure: its "after", "first" or "best" describe the task, not an order or a
    ranking to compute. A question about how work went is an outcome; one about a value
    replaced is a change (unless it asks when, or how long)."""
    q = normalised(query)
    if _OUTCOME.search(q) and not _HOW_TO.search(q):
        return "outcome"
    op = _ranked(q)
    if op in _CHANGE_OVER and _CHANGE.search(q) and not _DATE_Q.search(q) and not _HOW_TO.search(q):
        return "change"
    return op


def _ranked(q: str) -> Operation:
    """The first operation of ``_OPERATIONS`` whose cue ``q`` holds."""
    for op, pattern in _OPERATIONS:
        if pattern.search(q):
            if op == "count" and _SUM_UNIT.search(q):
                return "sum"
            if op in _HOW_TO_OVERRIDES and _HOW_TO.search(q):
                return "lookup"
            return op
    return "lookup"


def asks_about_work(query: str) -> bool:
    """Whether the query asks about tasks and how they went ("did the rotation succeed?",
    "what failed last week?", "did the import work?") rather than about the world."""
    q = normalised(query)
    return bool(_WORK_Q.search(q)) or bool(_OUTCOME.search(q) and not _HOW_TO.search(q))


def answer_type(query: str, op: Operation, unit: str | None = None) -> AnswerType:
    """The expected shape of the answer."""
    q = normalised(query)
    if op == "temporal_interval":
        return "date" if "since when" in q or q.startswith("when") else "duration"
    if _DATE_Q.search(q):
        return "date"
    if op == "list":
        return "list"
    if _WHO.search(q):
        return "entity"
    numeric = op in ("count", "sum", "average", "difference") or bool(
        re.search(r"\bhow (?:much|many)\b", q)
    )
    money = asks_money(query, unit)
    if numeric:
        return "money" if money and op != "count" else "number"
    if op == "absence" or _YES_NO.search(q):
        return "boolean"
    return "text"


def asks_money(query: str, unit: str | None = None) -> bool:
    """Is the query about money: a currency stated, or a money word ("spent", "price")?"""
    return unit in ("USD", "EUR", "GBP", "JPY") or bool(_MONEY_CUES.search(normalised(query)))


def query_unit(query: str) -> str | None:
    """The unit or currency the answer should be in, if the query states one."""
    for m in _UNIT_Q.finditer(normalised(query)):
        unit = normalise_unit(m.group("sym") or m.group("u"))
        if unit in _KNOWN_UNITS or (unit is not None and unit.isupper()):
            return unit
    return None


def normalised(query: str) -> str:
    """The query lower-cased, curly apostrophes straightened, whitespace collapsed: the form
    every wording cue is matched against."""
    return " ".join(query.lower().replace("’", "'").split())
