"""Synthesis: candidates → evidence ledger → the plan's operation → answerability.

Answerability, in order:
- ``no_memory``: there are no candidates at all.
- ``ask_user``: nothing relevant survives (no row shares the question's entities and focus
  terms, every match was excluded, the operation found nothing, e.g. no numbers for a sum or
  one side of a difference, or every matching memory only asks what the question asks), or
  the answer's support is weak (its candidates together cover under half the focus terms or
  the named entities — unless the question names a speaker, the answer rests on their own
  memory and no one else's own words cover as much), or it rests on another speaker's
  first-person words when the question is about a named speaker (``misattributed``), or a
  who-question's support names no one (``nameless``: a cause or a bare event is not a who),
  or its confidence is below ``min_confidence``. Unsupported answers are dropped, not guessed.
- ``refresh_recommended``: an answer exists but its support is contradicted, or, for
  latest-value questions, rests on events older than ``stale_after_days``, or a one-value
  question's dates excluded every match and the answer comes from outside them (the date
  named a time that holds nothing about it; the nearest telling is better than none, said so).
- ``answer_from_memory``: otherwise.

Records of work (task.*, feedback, proposals) answer questions about the work only
(``SynthesisPlan.admits``). What task outcomes taught decides the first answer
(``synthesis.learned``): a memory with an open failure record loses it to a proven
alternative, and its confidence reflects the record.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import timedelta

from memstream.checkout.retrieve.candidates import known_by
from memstream.checkout.synthesis.attribution import (
    first_person,
    misattributed,
    named_speakers,
    nameless,
    only_asks,
    talks_about,
)
from memstream.checkout.synthesis.context import Ctx, OpResult, is_fact, make_answer, when
from memstream.checkout.synthesis.evidence import evidence_rows, rate_rows
from memstream.checkout.synthesis.facts import corroborate
from memstream.checkout.synthesis.learned import (
    demoted_ids,
    discounted,
    failure_exclusions,
    order_key,
    proven_ids,
)
from memstream.checkout.synthesis.operations import run_operation
from memstream.checkout.synthesis.outcome import attempts_of
from memstream.checkout.synthesis.selection import (
    HISTORY_OPS,
    LOOSE_OPS,
    confidence_of,
    coverage,
    relevant_rows,
    screen,
)
from memstream.matching import focus_of, row_stems
from memstream.records.packet import (
    DEFAULT_CONFIDENCE,
    Answerability,
    AnswerCandidate,
    Candidate,
    EvidenceRow,
    Exclusion,
    OutcomeRecord,
    PacketWarning,
    SynthesisPlan,
    SynthesisResult,
    WarningKind,
)
from memstream.records.projected import EntityView
from memstream.text.names import entity_key
from memstream.text.words import stem
from memstream.times import day_of, parse_ts

SUPPORT_MIN = 0.5  # share of focus terms / entities an answer's support must mention
# An answer resting on a memory relevant only by its record: at most this support strength.
EARNED_MAX = 0.8
# A single-item answer must mention every entity the question names.
WHOLE_ENTITY_OPS = frozenset({"lookup", "latest_value", "absence"})
MAX_EVIDENCE = 50
# Operations whose answer is one row's word: a row that only asks is passed over for the next.
ONE_ROW_OPS = frozenset({"lookup", "latest_value"})


def _warn(kind: WarningKind, message: str, ids: list[str]) -> PacketWarning:
    return PacketWarning(kind=kind, message=message, ids=list(dict.fromkeys(ids)))


def _merge(own: list[Exclusion], shared: list[Exclusion]) -> list[Exclusion]:
    seen = {(e.item_id, e.reason) for e in own}
    return own + [e for e in shared if (e.item_id, e.reason) not in seen]


def _contradictions(rows: list[EvidenceRow], ctx: Ctx) -> list[PacketWarning]:
    """Current facts with the same subject and predicate but different values."""
    groups: dict[tuple[str, str], list[EvidenceRow]] = defaultdict(list)
    for r in rows:
        if is_fact(r, ctx):
            groups[(str(r.entity), r.label)].append(r)
    out = []
    for (entity, label), group in groups.items():
        values = {str(r.value).strip().lower() for r in group}
        if len(values) > 1:
            shown = ", ".join(sorted(values))
            ids = [r.support_id for r in group]
            out.append(_warn("contradiction", f"{entity} {label}: {shown}", ids))
    return out


def _stale(plan: SynthesisPlan, top: AnswerCandidate, rows: list[EvidenceRow], ctx: Ctx,
           days: float) -> PacketWarning | None:  # fmt: skip
    """A latest value that rests only on events older than the horizon."""
    as_of = parse_ts(plan.as_of)
    used = [r for r in rows if r.support_id in top.support_ids]
    if plan.operation != "latest_value" or as_of is None or not used:
        return None
    if any(is_fact(r, ctx) for r in used):
        return None  # a fact holds until superseded
    newest = max(when(r) for r in used)
    if as_of - newest <= timedelta(days=days):
        return None
    msg = f"newest evidence is from {day_of(newest.isoformat())}, over {days:g} days before as_of"
    return _warn("stale", msg, top.support_ids)


# Yes/no operations whose "no" rests on nothing found: said, and the user asked.
NO_FROM_NOTHING = frozenset({"absence", "change"})


def _abstain(plan: SynthesisPlan, ctx: Ctx) -> list[AnswerCandidate]:
    if plan.operation == "absence":
        return [make_answer("No record of this in memory", False, None, [], ctx)]
    if plan.operation == "change" and plan.answer_type == "boolean":
        return [make_answer("No change of this on record", False, None, [], ctx)]
    return []


def _telling(
    plan: SynthesisPlan, rows: list[EvidenceRow], by_id: dict[str, Candidate], ctx: Ctx
) -> tuple[list[EvidenceRow], list[PacketWarning]]:
    """For a one-row answer: the rows that tell something, and a warning naming those that
    only ask what the question asks (an echo of it is not its answer)."""
    if plan.operation not in ONE_ROW_OPS:
        return rows, []
    echoes = {
        r.support_id
        for r in rows
        if by_id[r.support_id].kind == "event" and only_asks(by_id[r.support_id].text, ctx.focus)
    }
    if not echoes:
        return rows, []
    msg = "the matching memories only ask about it; none tells"
    return [r for r in rows if r.support_id not in echoes], [
        _warn("missing_evidence", msg, sorted(echoes))
    ]


def _facts_then(
    plan: SynthesisPlan, rows: list[EvidenceRow], by_id: dict[str, Candidate]
) -> dict[str, EvidenceRow]:
    """The pool's fact rows memory held at the plan's ``as_of`` (the ends of a change)."""
    at = parse_ts(plan.as_of)
    return {
        r.support_id: r
        for r in rows
        if by_id[r.support_id].kind == "fact" and (at is None or known_by(by_id[r.support_id], at))
    }


def _context(
    plan: SynthesisPlan,
    by_id: dict[str, Candidate],
    ranked: list[tuple[EvidenceRow, float]],
    rows: list[EvidenceRow],
    names: Mapping[str, EntityView],
) -> Ctx:
    relevant = [r for r, _ in ranked]
    return Ctx(
        confidence={i: confidence_of(c) for i, c in by_id.items()},
        kinds={i: c.kind for i, c in by_id.items()},
        speakers={i: entity_key(c.agent) for i, c in by_id.items()},
        focus=focus_of(plan).terms,
        rank={r.row_id: rank for r, rank in ranked},
        stems={r.row_id: row_stems(r, by_id[r.support_id]) for r in relevant},
        valid_to={i: c.valid_to for i, c in by_id.items()},
        rates=rate_rows(list(by_id.values())),
        echoes=frozenset(i for i, c in by_id.items() if c.type == "message.assistant"),
        dated=frozenset(r.row_id for r in relevant if r.time != by_id[r.support_id].occurred_at),
        successor={i: c.superseded_by for i, c in by_id.items() if c.superseded_by},
        facts=_facts_then(plan, rows, by_id) if plan.operation == "change" else {},
        attempts=attempts_of(by_id) if plan.operation == "outcome" else {},
        names=names,
    )


def _relevant(
    plan: SynthesisPlan, rows: list[EvidenceRow], by_id: dict[str, Candidate], earned: set[str]
) -> tuple[list[tuple[EvidenceRow, float]], bool]:
    """Ranked relevant rows, and whether they were found loosely (entity only, no focus term).

    Set operations fall back to everything about the named entities when no row names the
    focus terms: "how many trips did Noor take" still counts her trips told in other words.
    """
    ranked = relevant_rows(plan, rows, by_id, earned=earned)
    loose = not ranked and bool(plan.entities) and plan.operation in LOOSE_OPS
    if loose:
        ranked = relevant_rows(plan, rows, by_id, loose=True, earned=earned)
    return ranked, loose


def _screening_warnings(
    plan: SynthesisPlan,
    relevant: list[EvidenceRow],
    excluded: list[Exclusion],
    by_id: dict[str, Candidate],
    loose: bool,
    min_confidence: float,
) -> list[PacketWarning]:
    """What the reader should know about the rows before any answer: loose matches, unknown
    confidence, superseded and low-confidence items left out."""
    warnings: list[PacketWarning] = []
    if loose and relevant:
        focus = focus_of(plan).terms
        missing = [t for t in plan.terms if stem(t) in focus]
        msg = f"nothing mentions {', '.join(missing)}; used all memory about the entities"
        warnings.append(_warn("missing_evidence", msg, [r.support_id for r in relevant]))
    unknown = [r.support_id for r in relevant if by_id[r.support_id].confidence is None]
    if unknown:
        msg = f"confidence unknown, taken as {DEFAULT_CONFIDENCE:.2f}"
        warnings.append(_warn("default_confidence", msg, unknown))
    if wrong := [e.item_id for e in excluded if e.reason == "invalidated"]:
        warnings.append(_warn("invalidated", "invalidated memories were left out", wrong))
    if old := [e.item_id for e in excluded if e.reason == "superseded"]:
        warnings.append(_warn("superseded", "superseded facts were left out", old))
    if low := [e.item_id for e in excluded if e.reason == "low_confidence"]:
        warnings.append(_warn("low_confidence", f"below {min_confidence:.2f}, left out", low))
    return warnings


def _nothing_found(
    relevant: list[EvidenceRow], kept: list[EvidenceRow], excluded: list[Exclusion]
) -> list[PacketWarning]:
    """Why no answer came out: nothing matched, or every match was excluded."""
    if not relevant:
        return [_warn("missing_evidence", "no memory matches the question", [])]
    if not kept:
        ids = [e.item_id for e in excluded]
        return [_warn("missing_evidence", "every matching memory was excluded", ids)]
    return []  # the operation found nothing to compute (its own warnings say what)


def _support(
    plan: SynthesisPlan,
    top: AnswerCandidate,
    by_id: dict[str, Candidate],
    loose: bool,
    earned: set[str],
) -> tuple[float, PacketWarning | None]:
    """How well the answer's support covers the question (0..1), and a warning if too weakly.
    Support that earned the question by its record covers its entities, its words at least
    ``SUPPORT_MIN``: proven by outcomes, not by words, so never at full confidence."""
    lex, ent = coverage(plan, top.support_ids, by_id)
    if loose:
        lex = max(lex, SUPPORT_MIN)  # entity-only support: answered, at lower confidence
    if earned & set(top.support_ids) and (ent < 1.0 or lex < SUPPORT_MIN):
        lex, ent = min(max(lex, SUPPORT_MIN), EARNED_MAX), 1.0
    strength = min(lex, ent)
    if strength < SUPPORT_MIN or (plan.operation in WHOLE_ENTITY_OPS and ent < 1.0):
        if ent == 1.0 and lex > 0 and _own_words_best(plan, top, by_id, lex):
            return strength, None
        msg = f"weak support: {lex:.0%} of the question's terms, {ent:.0%} of its entities"
        return strength, _warn("missing_evidence", msg, top.support_ids)
    return strength, None


def _own_words_best(
    plan: SynthesisPlan, top: AnswerCandidate, by_id: dict[str, Candidate], lex: float
) -> bool:
    """Support weak by words stands when the question names a speaker, the answer rests on
    what they said or what was said of them, and no one else's own words in the pool cover
    as much of the question: their own memory is the best there is. When someone else's
    words cover as much or more, the question is likely about what that other person did."""
    named = named_speakers(plan.entity_keys(), by_id.values())
    if not named:
        return False
    support = [by_id[i] for i in top.support_ids if i in by_id]
    if not any(_of_them(c, named) for c in support):
        return False
    rival = max(
        (
            coverage(plan, [i], by_id)[0]
            for i, c in by_id.items()
            if c.kind == "event" and not _of_them(c, named) and first_person(c.text)
        ),
        default=0.0,
    )
    return rival < lex


def _of_them(c: Candidate, named: list[str]) -> bool:
    """Said by one of ``named``, or talking about one of them."""
    return entity_key(c.agent) in named or any(talks_about(c.text, n) for n in named)


def _refresh(
    plan: SynthesisPlan,
    top: AnswerCandidate,
    kept: list[EvidenceRow],
    ctx: Ctx,
    op_warnings: list[PacketWarning],
    stale_after_days: float,
) -> tuple[list[PacketWarning], bool]:
    """Contradiction and staleness warnings, and whether they touch the top answer."""
    warnings: list[PacketWarning] = []
    refresh = False
    # Over a history, differing values are the history itself, not a contradiction.
    if plan.operation not in HISTORY_OPS:
        for w in _contradictions(kept, ctx):
            warnings.append(w)
            refresh = refresh or bool(set(w.ids) & set(top.support_ids))
    refresh = refresh or any(
        w.kind == "contradiction" and set(w.ids) & set(top.support_ids) for w in op_warnings
    )
    if (stale := _stale(plan, top, kept, ctx, stale_after_days)) is not None:
        warnings.append(stale)
        refresh = True
    return warnings, refresh


def _operate(
    plan: SynthesisPlan, kept: list[EvidenceRow], ctx: Ctx, records: Mapping[str, OutcomeRecord]
) -> tuple[OpResult, set[str]]:
    """The operation over the rows as learning left them, and the memories that lost the first
    answer: when some do, the answers without them come first (naming why), theirs after."""
    demoted = demoted_ids(plan.operation, kept, records)
    whole = run_operation(plan, kept, ctx)
    if not demoted:
        return whole, demoted
    first = run_operation(plan, [r for r in kept if r.support_id not in demoted], ctx)
    if not any(a.support_ids for a in first.answers):
        return whole, set()  # the alternative does not answer this operation
    why = failure_exclusions(demoted, records, [r.support_id for r in kept])
    answers = [
        a.model_copy(update={"excluded_ids": [*a.excluded_ids, *why]}) for a in first.answers
    ]
    answers += [a for a in whole.answers if demoted & set(a.support_ids)]
    return OpResult(answers, first.exclusions, first.warnings), demoted


def _result(
    answerability: Answerability,
    answers: list[AnswerCandidate],
    warnings: list[PacketWarning],
    kept: list[EvidenceRow],
    demoted: set[str] | None = None,
) -> SynthesisResult:
    """The result, best answer first; evidence the answers cite goes before the rest."""
    evidence = kept[:MAX_EVIDENCE]
    used = {i for a in answers for i in a.support_ids}
    ordered = [r for r in evidence if r.support_id in used]
    ordered += [r for r in evidence if r.support_id not in used]
    return SynthesisResult(
        answerability=answerability,
        answer_candidates=sorted(answers, key=lambda a: order_key(a, demoted or set())),
        warnings=warnings,
        evidence=ordered,
    )


def _answers(
    plan: SynthesisPlan,
    result: OpResult,
    excluded: list[Exclusion],
    by_id: dict[str, Candidate],
    records: Mapping[str, OutcomeRecord],
) -> list[AnswerCandidate]:
    """The operation's answers with every exclusion, corroborated, confidence cut by any
    open failure record of their support."""
    return [
        discounted(
            corroborate(
                plan,
                a.model_copy(
                    update={"excluded_ids": _merge(a.excluded_ids, excluded + result.exclusions)}
                ),
                by_id,
            ),
            records,
        )
        for a in result.answers
        if set(a.support_ids) <= by_id.keys()
    ]


def _unfit(
    plan: SynthesisPlan, top: AnswerCandidate, by_id: dict[str, Candidate]
) -> PacketWarning | None:
    """Why the answer's support cannot tell what the question asks about whom: another
    speaker's first-person words (``misattributed``), or, for a lookup whose answer is
    someone ("who fixed the heater?"), words naming no one (``nameless``)."""
    if (why := misattributed(plan.entity_keys(), top.support_ids, by_id)) is not None:
        return _warn("misattributed", why, top.support_ids)
    asks_who = plan.operation == "lookup" and plan.answer_type == "entity"
    if asks_who and (why := nameless(top.support_ids, by_id)) is not None:
        return _warn("missing_evidence", why, top.support_ids)
    return None


def _window_only(
    plan: SynthesisPlan,
    relevant: list[EvidenceRow],
    kept: list[EvidenceRow],
    excluded: list[Exclusion],
) -> bool:
    """A one-value question whose matches were all left out by its dates alone."""
    return (
        plan.time_window is not None
        and plan.operation in ONE_ROW_OPS
        and bool(relevant)
        and not kept
        and all(e.reason == "out_of_window" for e in excluded)
    )


def _outside_window(
    plan: SynthesisPlan,
    candidates: list[Candidate],
    limits: tuple[float, float],
    outcomes: Iterable[OutcomeRecord],
    names: Mapping[str, EntityView] | None,
    vetoes: bool,
) -> SynthesisResult | None:
    """The answer without the question's dates (``as_of`` still holds; ``limits``: the
    minimum confidence and the staleness horizon), to be checked: at half confidence,
    ``refresh_recommended``, with a warning naming the period that held nothing. None if even
    then nothing answers: the dated result stands."""
    window = plan.time_window
    assert window is not None  # _window_only checked it
    wide = synthesize(
        plan.model_copy(update={"time_window": None}), candidates, *limits, outcomes, names, vetoes
    )
    if wide.answerability not in ("answer_from_memory", "refresh_recommended"):
        return None
    msg = f"nothing matches within {window.text}; the answer comes from outside it"
    note = _warn("missing_evidence", msg, [])
    halved = [
        a.model_copy(update={"confidence": round(a.confidence * 0.5, 3)})
        for a in wide.answer_candidates
    ]
    return wide.model_copy(
        update={
            "answerability": "refresh_recommended",
            "answer_candidates": halved,
            "warnings": [note, *wide.warnings],
        }
    )


def _by_id(candidates: list[Candidate]) -> dict[str, Candidate]:
    """Each candidate by its id, the first of any repeated id."""
    by_id: dict[str, Candidate] = {}
    for c in candidates:
        by_id.setdefault(c.item_id, c)
    return by_id


def synthesize(
    plan: SynthesisPlan,
    candidates: list[Candidate],
    min_confidence: float = 0.3,
    stale_after_days: float = 365.0,
    outcomes: Iterable[OutcomeRecord] = (),
    names: Mapping[str, EntityView] | None = None,
    vetoes: bool = True,
) -> SynthesisResult:
    """Compose an answer from the candidate pool, with support, exclusions and warnings.
    ``names``: the tenant's entities by key (an answer naming an entity says its name);
    ``vetoes`` False: a vetoed answer is kept (``ask_user``, its veto a warning) for
    ``synthesis.answerable``, which reads the verdict as one signal among others.

    Steps: evidence rows → relevant rows → screening (as_of, window, confidence) → the plan's
    operation, as ``outcomes`` (task records) leave it → answerability (module docstring)."""
    records = {r.item_id: r for r in outcomes}
    candidates = [c for c in candidates if plan.admits(c.type)]
    if not candidates:
        return _result("no_memory", [], [], [])
    by_id = _by_id(candidates)
    rows = evidence_rows(plan, list(by_id.values()))
    earned = proven_ids(plan.operation, records)
    ranked, loose = _relevant(plan, rows, by_id, earned)
    relevant = [r for r, _ in ranked]
    kept, excluded = screen(plan, relevant, by_id, min_confidence)
    ctx = _context(plan, by_id, ranked, rows, names or {})
    warnings = _screening_warnings(plan, relevant, excluded, by_id, loose, min_confidence)
    telling, echoes = _telling(plan, kept, by_id, ctx)
    result, demoted = _operate(plan, telling, ctx, records)
    warnings += result.warnings
    answers = _answers(plan, result, excluded, by_id, records)
    if not any(a.support_ids for a in answers):
        if _window_only(plan, relevant, kept, excluded) and (
            wide := _outside_window(
                plan, candidates, (min_confidence, stale_after_days), outcomes, names, vetoes
            )
        ):
            return wide
        warnings += echoes or _nothing_found(relevant, kept, excluded)
        return _result("ask_user", _abstain(plan, ctx), warnings, kept)
    top = min(answers, key=lambda a: order_key(a, demoted))
    strength, weak = _support(plan, top, by_id, loose, earned)
    if (veto := _unfit(plan, top, by_id) or weak) is not None:
        warnings.append(veto)
        kept_answers = answers if not vetoes else _abstain(plan, ctx)
        return _result("ask_user", kept_answers, warnings, kept, demoted)
    scale = 0.5 + 0.5 * strength
    answers = [a.model_copy(update={"confidence": round(a.confidence * scale, 3)}) for a in answers]
    top = min(answers, key=lambda a: order_key(a, demoted))
    doubts, refresh = _refresh(plan, top, kept, ctx, result.warnings, stale_after_days)
    warnings += doubts
    if top.confidence < min_confidence:
        msg = f"answer confidence {top.confidence:.2f} is below {min_confidence:.2f}"
        warnings.append(_warn("low_confidence", msg, top.support_ids))
        return _result("ask_user", answers, warnings, kept, demoted)
    if plan.operation in NO_FROM_NOTHING and top.value is False:
        return _result("ask_user", answers, warnings, kept, demoted)
    answerability: Answerability = "refresh_recommended" if refresh else "answer_from_memory"
    return _result(answerability, answers, warnings, kept, demoted)
