"""The synthesis plan: operation, answer type, entities, terms, unit and time window."""

from __future__ import annotations

from memstream.checkout.plan.entities import (
    EMPTY,
    Lexicon,
    distinct,
    locate_entities,
    without_known_names,
)
from memstream.checkout.plan.operation import (
    CHANGE_WORDS,
    OUTCOME_WORDS,
    answer_type,
    asks_about_work,
    asks_money,
    classify,
    query_unit,
)
from memstream.checkout.plan.terms import query_terms
from memstream.checkout.plan.window import find_window
from memstream.records.packet import SynthesisPlan


def plan_query(
    query: str, now: str, as_of: str | None = None, lexicon: Lexicon = EMPTY
) -> SynthesisPlan:
    """Decide operation, answer type, entities, terms, unit and time window of ``query``.

    Entities are resolved against ``lexicon`` (what the tenant's memory knows). Relative
    dates resolve against ``as_of`` when given, else ``now``; the plan's ``as_of`` is the
    time the answer must hold at (``as_of`` or ``now``). The operation, answer type and
    unit are read with the names memory knows blanked out: a name is not a cue.
    """
    base = as_of or now
    window, spans = find_window(query, base)
    located = locate_entities(query, lexicon, [(pos, pos + len(text)) for pos, text, *_ in spans])
    mentions = distinct(located)
    cues = without_known_names(query, located)
    op = classify(cues)
    unit = query_unit(cues)
    terms = query_terms(query, [text for _pos, text, *_ in spans], unit)
    # "Who changed jobs?": the jobs are what the facts say, not the change; "did the import
    # succeed?": the import is what the task records say, not its success.
    cue_words = {"change": CHANGE_WORDS, "outcome": OUTCOME_WORDS}.get(op)
    if cue_words is not None:
        terms = [t for t in terms if not cue_words.match(t.lower())]
    return SynthesisPlan(
        query=query,
        operation=op,
        answer_type=answer_type(cues, op, unit),
        entities=[m.keys[0] for m in mentions if m.match != "asker"],
        mentions=mentions,
        terms=terms,
        unit=unit,
        money=asks_money(cues, unit),
        about_work=asks_about_work(cues),
        time_window=window,
        as_of=base,
    )
