"""The groups a latent artifact summarizes, each folding its inputs in ledger order (pure).

A group knows its inputs and renders one artifact from them; the builder decides when.
Every group's fingerprint is a hash of its inputs' ledger hashes (and, for values that
change without a new event, of those values), so equal inputs give equal artifact ids.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from memstream.events.payloads import QuestionFamily
from memstream.records.latent import (
    EpisodeDetails,
    PolicyDetails,
    PreferenceDetails,
    PreferenceValue,
    TaskDetails,
    TaskRun,
)
from memstream.records.projected import Extraction, FactRecord, FeedbackRecord, SourceRef
from memstream.text.words import STOP_STEMS, clip, stem, words
from memstream.times import to_datetime

MIN_TERM_LETTERS = 3


def _top(counts: Counter[str], n: int, first: dict[str, int]) -> list[str]:
    """The ``n`` most counted keys; ties go to the one seen first (order-stable)."""
    return sorted(counts, key=lambda k: (-counts[k], first[k], k))[:n]


@dataclass
class Episode:
    """A stream segment without a pause longer than the builder's gap."""

    tenant: str
    stream: str
    refs: list[SourceRef] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    speakers: Counter[str] = field(default_factory=Counter)
    entities: Counter[str] = field(default_factory=Counter)
    terms: Counter[str] = field(default_factory=Counter)
    surface: dict[str, Counter[str]] = field(default_factory=dict)
    values: list[str] = field(default_factory=list)
    first_seen: dict[str, int] = field(default_factory=dict)
    # What was folded in, so a purge can fold the segment again without the purged events.
    inputs: list[tuple[Extraction, datetime]] = field(default_factory=list)

    @property
    def group_key(self) -> str:
        # The first event names the segment: it stays the same while the segment grows.
        return f"episode:{self.stream}:{self.refs[0].event_id}"

    def add(self, x: Extraction, at: datetime) -> None:
        n = len(self.refs)
        self.inputs.append((x, at))
        self.refs.append(x.event.ref)
        self.times.append(at)
        self.texts.append(x.event.text)
        self.speakers[x.event.agent] += 1
        self.first_seen.setdefault("s:" + x.event.agent, n)
        for m in x.mentions:
            if m.role != "actor":
                self.entities[m.entity_key] += 1
                self.first_seen.setdefault("e:" + m.entity_key, n)
        # Names are key entities already, not key terms.
        names = {stem(w) for m in x.mentions for w in words(m.entity_key)}
        # A term counts once per turn: a word repeated in one turn says less than a word
        # that comes back across the session.
        for w in dict.fromkeys(words(x.event.text)):
            s = stem(w)
            if len(s) < MIN_TERM_LETTERS or not s.isalpha() or s in STOP_STEMS or s in names:
                continue
            self.terms[s] += 1
            self.surface.setdefault(s, Counter())[w] += 1
            self.first_seen.setdefault("t:" + s, n)
        self.values += [q.text for q in x.quantities] + [d.text for d in x.dates]

    def fingerprint_parts(self) -> list[str]:
        return [r.hash for r in self.refs]

    def without(self, event_ids: set[str]) -> Episode | None:
        """The segment folded again without ``event_ids`` (None when nothing remains)."""
        kept = Episode(self.tenant, self.stream)
        for x, at in self.inputs:
            if x.event.event_id not in event_ids:
                kept.add(x, at)
        return kept if kept.refs else None

    def details(self, key_terms: int, key_entities: int, values: int) -> EpisodeDetails:
        first = {k[2:]: v for k, v in self.first_seen.items()}
        terms = [self.surface[s].most_common(1)[0][0] for s in _top(self.terms, key_terms, first)]
        return EpisodeDetails(
            stream=self.stream,
            events=len(self.refs),
            speakers=_top(self.speakers, 10, first),
            key_entities=_top(self.entities, key_entities, first),
            key_terms=terms,
            values=list(dict.fromkeys(self.values))[:values],
            start=min(self.times),
            end=max(self.times),
        )


def episode_summary(d: EpisodeDetails) -> str:
    span = d.start.date().isoformat()
    if d.end.date() != d.start.date():
        span += f" to {d.end.date().isoformat()}"
    parts = [f"{d.events} events in {d.stream} on {span}", "by " + ", ".join(d.speakers)]
    if d.key_terms:
        parts.append("about " + ", ".join(d.key_terms))
    if d.key_entities:
        parts.append("mentioning " + ", ".join(d.key_entities))
    if d.values:
        parts.append("values " + ", ".join(d.values))
    return "; ".join(parts)


@dataclass
class Preferences:
    """The preferences of one subject that hold now: the newest per key wins."""

    tenant: str
    subject: str
    current: dict[str, FactRecord] = field(default_factory=dict)
    # Every fact taken, superseded ones too: a purge of the newest value brings the one
    # before it back.
    history: list[FactRecord] = field(default_factory=list)

    @property
    def group_key(self) -> str:
        return f"preference:{self.subject}"

    def add(self, fact: FactRecord) -> bool:
        """Take a preference fact; False when an equally new or newer one already holds."""
        self.history.append(fact)
        known = self.current.get(fact.predicate)
        if known is not None and (known.valid_from, known.source.seq) >= (
            fact.valid_from,
            fact.source.seq,
        ):
            return False
        self.current[fact.predicate] = fact
        return True

    def facts(self) -> list[FactRecord]:
        return [self.current[k] for k in sorted(self.current)]

    def without(self, event_ids: set[str]) -> Preferences | None:
        """The subject's preferences taken again without ``event_ids`` (None: none left)."""
        kept = Preferences(self.tenant, self.subject)
        for f in self.history:
            if f.source.event_id not in event_ids:
                kept.add(f)
        return kept if kept.current else None

    def details(self) -> PreferenceDetails:
        return PreferenceDetails(
            subject=self.subject,
            preferences=[
                PreferenceValue(
                    key=f.predicate.removeprefix("prefers:"),
                    value=f.value_text,
                    fact_id=f.fact_id,
                    since=to_datetime(f.valid_from),
                )
                for f in self.facts()
            ],
        )


def preference_summary(d: PreferenceDetails) -> str:
    prefs = "; ".join(f"{p.key}: {p.value}" for p in d.preferences)
    return f"current preferences of {d.subject}: {prefs}"


@dataclass
class Task:
    """One task from ``task.started`` to its outcome, with the steps in its stream."""

    task_id: str
    stream: str
    goal: str
    started: SourceRef | None = None
    steps: list[str] = field(default_factory=list)
    refs: list[SourceRef] = field(default_factory=list)

    def drop(self, event_ids: set[str]) -> None:
        """Forget the steps of ``event_ids`` (``refs`` is the start, then one per step)."""
        steps = zip(self.steps, self.refs[1:], strict=True)
        pairs = [(s, r) for s, r in steps if r.event_id not in event_ids]
        self.steps = [s for s, _ in pairs]
        self.refs = self.refs[:1] + [r for _, r in pairs]


def goal_terms(goal: str) -> list[str]:
    """The goal's content stems, sorted: tasks with the same ones share a procedure."""
    return sorted({s for s in (stem(w) for w in words(goal)) if s and s not in STOP_STEMS})[:8]


@dataclass
class TaskGroup:
    """The finished runs of one goal with one kind of result (worked / failed)."""

    tenant: str
    kind: str  # procedure | failure
    goal: str
    terms: list[str]
    runs: list[TaskRun] = field(default_factory=list)
    refs: list[SourceRef] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    since: datetime | None = None  # the first outcome

    @property
    def group_key(self) -> str:
        return f"{self.kind}:{'|'.join(self.terms) or self.goal}"

    def details(self) -> TaskDetails:
        return TaskDetails(
            goal=self.goal,
            goal_terms=self.terms,
            runs=self.runs,
            memories=list(dict.fromkeys(self.memories))[:50],
        )


def task_summary(kind: str, d: TaskDetails) -> str:
    n = len(d.runs)
    if kind == "procedure":
        steps = " → ".join(d.runs[-1].steps) if d.runs and d.runs[-1].steps else "no steps"
        return f"procedure for '{d.goal}' ({n} successful runs); last: {steps}"
    reasons = "; ".join(dict.fromkeys(r.reason for r in d.runs if r.reason)) or "no reason given"
    relied = f"; relied on {', '.join(d.memories[:5])}" if d.memories else ""
    return f"failure mode of '{d.goal}' ({n} failed runs): {reasons}{relied}"


def step_text(x: Extraction) -> str:
    return f"{x.event.type}: {clip(x.event.text, 80)}" if x.event.text else x.event.type


@dataclass
class Policy:
    """Feedback about one question family: net signal per memory."""

    tenant: str
    family: QuestionFamily | None
    net: dict[str, float] = field(default_factory=dict)
    refs: list[SourceRef] = field(default_factory=list)
    signals: int = 0
    times: list[datetime] = field(default_factory=list)

    @property
    def since(self) -> datetime:
        return min(self.times)

    @property
    def until(self) -> datetime:
        return max(self.times)

    @property
    def group_key(self) -> str:
        f = self.family
        if f is None:
            return "policy:any"
        return f"policy:{f.operation}:{','.join(f.entities)}:{','.join(f.terms[:8])}"

    def add(self, record: FeedbackRecord, ref: SourceRef) -> None:
        self.net[record.target_id] = self.net.get(record.target_id, 0.0) + (
            record.signal * record.certainty
        )
        if not self.refs or self.refs[-1].event_id != ref.event_id:
            self.refs.append(ref)
        self.signals += 1
        self.times.append(to_datetime(record.at))

    def details(self) -> PolicyDetails:
        ranked = sorted(self.net, key=lambda t: (-abs(self.net[t]), t))
        return PolicyDetails(
            family=self.family or QuestionFamily(operation="any"),
            favoured=[t for t in ranked if self.net[t] > 0][:20],
            disfavoured=[t for t in ranked if self.net[t] < 0][:20],
            signals=self.signals,
        )


def policy_summary(d: PolicyDetails) -> str:
    about = " ".join(d.family.entities + d.family.terms[:6]) or "any question"
    return (
        f"retrieval policy for {d.family.operation} questions about {about}: "
        f"favour {', '.join(d.favoured[:5]) or 'none'}; "
        f"disfavour {', '.join(d.disfavoured[:5]) or 'none'} ({d.signals} signals)"
    )
