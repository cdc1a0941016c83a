"""The deterministic latent builder: ledger entries in, artifacts out (pure; clock passed in).

Groups and when they are built:
- ``episode_latent``: a stream's events until a pause longer than ``episode_gap_s`` (or
  ``episode_max_events`` events); built
  when the next segment opens, and at ``flush`` (the shell calls it when the ledger is idle).
- ``preference_latent``: a subject's current preferences; built at ``flush``.
- ``procedure_latent`` / ``failure_latent``: finished runs of one goal that worked / failed;
  built at the outcome.
- ``retrieval_policy_latent``: feedback per question family; built at ``flush``.

A group whose inputs changed gets a new artifact that ``supersedes`` the current one, which
is sent again with ``stale_at`` (when its successor's newest input happened). Equal inputs
give equal ids, so re-reading the ledger (a restart, a replay) re-creates nothing.

A ``memory.purge`` tombstone withdraws every current artifact citing a purged event (a
``LatentDeletion``, never a stale re-send: the summary itself holds the purged content) and
drops the purged events from the open groups, which are built again from what remains.
Closed episodes and finished task runs keep no inputs: the shell folds the ledger again
after a tombstone (see ``after_purge``), skipping purged events, to rebuild them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from memstream.events.payloads import (
    MemoryPurgePayload,
    TaskOutcomePayload,
    TaskStartedPayload,
)
from memstream.latent import groups as g
from memstream.ledger.canonical import canonical_json
from memstream.ledger.purge import is_purged
from memstream.projection.extract import extract
from memstream.records.altitudes import ArtifactType
from memstream.records.latent import (
    Details,
    LatentArtifact,
    LatentDeletion,
    LatentRecord,
    Purpose,
    ReviewStatus,
    TaskRun,
    artifact_id,
    input_fingerprint,
)
from memstream.records.projected import Extraction, FactRecord, SourceRef
from memstream.times import to_datetime

# lb-2: names are not key terms
BUILDER_VERSION = "lb-2"
# Entries about memory itself: never part of an episode or a task's steps.
_CONTROL = frozenset({"memory.feedback", "memory.invalidate", "memory.purge"})
MAX_RUNS = 50


class BuilderConfig(BaseModel):
    """Everything whose change changes what the builder writes (hashed into every id)."""

    model_config = ConfigDict(frozen=True)
    version: str = BUILDER_VERSION
    episode_gap_s: float = 7200.0
    # A segment also closes at this many events: an artifact cites every event, and one
    # record must stay far below the broker's message size (about 250 bytes a citation).
    episode_max_events: int = 500
    key_terms: int = 12
    key_entities: int = 8
    values: int = 12
    steps: int = 12

    @property
    def config_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump())).hexdigest()[:16]


@dataclass(frozen=True)
class LatentInput:
    """One ledger entry as the builder reads it: its extraction, a task's payload, and the
    event ids a ``memory.purge`` tombstone names."""

    extraction: Extraction
    task: TaskStartedPayload | TaskOutcomePayload | None = None
    purge: tuple[str, ...] = ()


def latent_input(entry: dict[str, Any]) -> LatentInput | None:
    """A ledger entry (decoded JSON) as the builder reads it, None for a purged entry
    (nothing left to read, nothing wrong with it); raises like ``extract``."""
    if is_purged(entry):
        return None
    x = extract(entry)
    payload = entry.get("payload") or {}
    if x.event.type == "task.started":
        return LatentInput(x, TaskStartedPayload.model_validate(payload))
    if x.event.type == "task.outcome":
        return LatentInput(x, TaskOutcomePayload.model_validate(payload))
    if x.event.type == "memory.purge":
        ids = MemoryPurgePayload.model_validate(payload).event_ids
        return LatentInput(x, purge=tuple(dict.fromkeys(ids)))
    return LatentInput(x)


@dataclass(frozen=True)
class Built:
    """An artifact to send; ``texts`` are an episode's turns (the shell embeds its centroid)."""

    artifact: LatentArtifact
    texts: tuple[str, ...] = ()


# What the builder gives the shell to send, in order.
Output = Built | LatentDeletion


@dataclass(frozen=True)
class _Spec:
    """What varies between artifact types when one is rendered."""

    artifact_type: ArtifactType
    altitude: str
    confidence: float
    review_status: ReviewStatus
    purpose: Purpose
    phase: str


_EPISODE = _Spec("episode_latent", "episode", 0.8, "accepted", "general", "orientation")
_PREFERENCE = _Spec("preference_latent", "latent", 0.9, "accepted", "planning", "planning")
_POLICY = _Spec("retrieval_policy_latent", "latent", 0.5, "proposed", "general", "retrieval")


@dataclass
class LatentBuilder:
    """Builder state: open groups, and the current artifact of every group."""

    config: BuilderConfig = field(default_factory=BuilderConfig)
    current: dict[tuple[str, str], LatentArtifact] = field(default_factory=dict)
    last_seq: dict[tuple[str, str], int] = field(default_factory=dict)
    episodes: dict[tuple[str, str], g.Episode] = field(default_factory=dict)
    preferences: dict[tuple[str, str], g.Preferences] = field(default_factory=dict)
    tasks: dict[tuple[str, str], g.Task] = field(default_factory=dict)
    running: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # task ids per stream
    task_groups: dict[tuple[str, str], g.TaskGroup] = field(default_factory=dict)
    policies: dict[tuple[str, str], g.Policy] = field(default_factory=dict)
    dirty: set[tuple[str, str, str]] = field(default_factory=set)
    purged: set[tuple[str, str]] = field(default_factory=set)  # (tenant, event id)
    deleted: set[tuple[str, str]] = field(default_factory=set)  # (tenant, artifact id)

    def remember(self, record: LatentRecord) -> None:
        """A record already on ``memory.latents`` (read on start, in topic order)."""
        if isinstance(record, LatentDeletion):
            self._forget(record.tenant, record.artifact_id)
            return
        key = (record.tenant, record.group_key)
        if (record.tenant, record.artifact_id) in self.deleted:
            return
        if record.stale_at is None:
            self.current[key] = record
        elif (known := self.current.get(key)) and known.artifact_id == record.artifact_id:
            del self.current[key]

    def note_purge(self, tenant: str, event_ids: tuple[str, ...] | list[str]) -> None:
        """Purged events known before the ledger is folded (the shell's pre-scan of
        tombstones): the broker may still hold their content, they are never folded in."""
        self.purged.update((tenant, i) for i in event_ids)

    def after_purge(self) -> LatentBuilder:
        """An empty builder that knows what this one sent and what was purged: folding the
        ledger into it rebuilds every group from what remains (closed ones included)."""
        fresh = LatentBuilder(self.config, dict(self.current))
        fresh.purged, fresh.deleted = set(self.purged), set(self.deleted)
        return fresh

    def seen(self, item: LatentInput) -> bool:
        """The entry was folded in already (ledger seqs grow per tenant and stream)."""
        e = item.extraction.event
        return e.seq <= self.last_seq.get((e.tenant, e.stream), 0)

    def observe(self, item: LatentInput | None, now: datetime) -> list[Output]:
        """Fold one entry in; what it completes is built now. Entries already seen (the
        shell re-reads the ledger after a restart) and purged ones (None, or named by a
        tombstone) change nothing."""
        if item is None:
            return []
        e = item.extraction.event
        if self.seen(item):
            return []
        self.last_seq[(e.tenant, e.stream)] = e.seq
        if (e.tenant, e.event_id) in self.purged:
            return []
        if e.type == "memory.purge":
            return self._purge(e.tenant, e.event_id, item.purge, now)
        if e.type == "memory.feedback":
            self._feedback(item.extraction)
            return []
        if e.type in _CONTROL:
            return []
        out: list[Output] = [*self._episode(item.extraction, now)]
        for f in item.extraction.facts:
            if f.kind == "preference":
                self._preference(f)
        out += self._task(item, now)
        return out

    def flush(self, now: datetime) -> list[Built]:
        """Build every group whose inputs changed since it was last built."""
        out: list[Built] = []
        for kind, tenant, key in sorted(self.dirty):
            if kind == "episode" and (ep := self.episodes.get((tenant, key))) is not None:
                out += self._build_episode(ep, now)
            elif kind == "preference":
                out += self._build_preferences(self.preferences[(tenant, key)], now)
            elif kind == "policy":
                out += self._build_policy(self.policies[(tenant, key)], now)
        self.dirty.clear()
        return out

    # -- episodes ---------------------------------------------------------------------------

    def _episode(self, x: Extraction, now: datetime) -> list[Built]:
        e = x.event
        at = to_datetime(e.occurred_at)
        key = (e.tenant, e.stream)
        out: list[Built] = []
        ep = self.episodes.get(key)
        gap = timedelta(seconds=self.config.episode_gap_s)
        if ep is not None and (
            at - ep.times[-1] > gap or len(ep.refs) >= self.config.episode_max_events
        ):
            out = self._build_episode(ep, now)
            self.dirty.discard(("episode", e.tenant, e.stream))
            ep = None
        if ep is None:
            ep = self.episodes[key] = g.Episode(e.tenant, e.stream)
        ep.add(x, at)
        self.dirty.add(("episode", e.tenant, e.stream))
        return out

    def _build_episode(self, ep: g.Episode, now: datetime) -> list[Built]:
        c = self.config
        d = ep.details(c.key_terms, c.key_entities, c.values)
        return self._emit(
            _EPISODE,
            ep.tenant,
            ep.group_key,
            g.episode_summary(d),
            d,
            ep.refs,
            ep.fingerprint_parts(),
            (d.start, d.end, d.end),
            now,
            entities=d.key_entities,
            texts=tuple(ep.texts),
        )

    # -- preferences --------------------------------------------------------------------------

    def _preference(self, fact: FactRecord) -> None:
        key = (fact.tenant, fact.subject_key)
        prefs = self.preferences.setdefault(key, g.Preferences(fact.tenant, fact.subject_key))
        if prefs.add(fact):
            self.dirty.add(("preference", fact.tenant, fact.subject_key))

    def _build_preferences(self, prefs: g.Preferences, now: datetime) -> list[Built]:
        facts = prefs.facts()
        d = prefs.details()
        since = max(p.since for p in d.preferences)
        parts = [f"{f.fact_id}={f.value_text}@{f.valid_from}" for f in facts]
        return self._emit(
            _PREFERENCE,
            prefs.tenant,
            prefs.group_key,
            g.preference_summary(d),
            d,
            sorted((f.source for f in facts), key=lambda r: (r.stream, r.seq)),
            parts,
            (since, None, since),
            now,
            entities=[prefs.subject],
        )

    # -- tasks --------------------------------------------------------------------------------

    def _task(self, item: LatentInput, now: datetime) -> list[Built]:
        e = item.extraction.event
        if isinstance(item.task, TaskStartedPayload):
            self.tasks[(e.tenant, item.task.task_id)] = g.Task(
                item.task.task_id, e.stream, item.task.goal or "", started=e.ref, refs=[e.ref]
            )
            self.running.setdefault((e.tenant, e.stream), []).append(item.task.task_id)
            return []
        if isinstance(item.task, TaskOutcomePayload):
            return self._outcome(item.extraction, item.task, now)
        for task_id in self.running.get((e.tenant, e.stream), ()):
            t = self.tasks[(e.tenant, task_id)]
            if len(t.steps) < self.config.steps:
                t.steps.append(g.step_text(item.extraction))
                t.refs.append(e.ref)
        return []

    def _outcome(self, x: Extraction, p: TaskOutcomePayload, now: datetime) -> list[Built]:
        e = x.event
        task = self.tasks.pop((e.tenant, p.task_id), None) or g.Task(p.task_id, e.stream, "")
        running = self.running.get((e.tenant, task.stream), [])
        if p.task_id in running:
            running.remove(p.task_id)
        worked = p.status == "success" or (p.status == "partial" and (p.score or 0) >= 0.5)
        if p.status == "abandoned":
            return []
        kind = "procedure" if worked else "failure"
        goal = task.goal or p.task_id
        terms = g.goal_terms(goal)
        key = f"{kind}:{'|'.join(terms) or goal}"
        group = self.task_groups.setdefault(
            (e.tenant, key), g.TaskGroup(e.tenant, kind, goal, terms)
        )
        run = TaskRun(
            task_id=p.task_id,
            status=p.status,
            outcome_event_id=e.event_id,
            steps=task.steps,
            reason=p.text or "",
        )
        group.runs = [*group.runs, run][-MAX_RUNS:]
        group.refs = [*group.refs, *task.refs, e.ref]
        group.memories += p.used_ids
        group.since = group.since or to_datetime(e.occurred_at)
        return self._build_tasks(group, to_datetime(e.occurred_at), now)

    def _build_tasks(self, group: g.TaskGroup, at: datetime, now: datetime) -> list[Built]:
        d = group.details()
        n = len(d.runs)
        spec = _Spec(
            "procedure_latent" if group.kind == "procedure" else "failure_latent",
            "latent",
            round(n / (n + 1), 3),
            "proposed",
            "execution" if group.kind == "procedure" else "planning",
            "execution" if group.kind == "procedure" else "risk_check",
        )
        return self._emit(
            spec,
            group.tenant,
            group.group_key,
            g.task_summary(group.kind, d),
            d,
            group.refs,
            [r.hash for r in group.refs],
            (group.since or at, None, at),
            now,
        )

    # -- retrieval policy -----------------------------------------------------------------------

    def _feedback(self, x: Extraction) -> None:
        for record in x.feedback:
            probe = g.Policy(record.tenant, record.family)
            key = (record.tenant, probe.group_key)
            self.policies.setdefault(key, probe).add(record, x.event.ref)
            self.dirty.add(("policy", record.tenant, probe.group_key))

    def _build_policy(self, policy: g.Policy, now: datetime) -> list[Built]:
        d = policy.details()
        parts = [r.hash for r in policy.refs]
        spec = _Spec(**{**_POLICY.__dict__, "confidence": min(1.0, d.signals / 10)})
        return self._emit(
            spec,
            policy.tenant,
            policy.group_key,
            g.policy_summary(d),
            d,
            policy.refs,
            parts,
            (policy.since, None, policy.until),
            now,
        )

    # -- purge ----------------------------------------------------------------------------------

    def _purge(
        self, tenant: str, tombstone: str, event_ids: tuple[str, ...], now: datetime
    ) -> list[Output]:
        """Withdraw the artifacts citing ``event_ids``, drop them from the open groups.

        A repeated tombstone finds nothing left to withdraw: it sends nothing.
        """
        ids = set(event_ids)
        self.note_purge(tenant, event_ids)
        out: list[Output] = []
        for key in sorted(self.current):
            a = self.current[key]
            if a.tenant == tenant and ids & set(a.source_ids):
                out.append(LatentDeletion(artifact_id=a.artifact_id, tenant=tenant,
                                          deleted_by=tombstone, deleted_at=now))  # fmt: skip
                self._forget(tenant, a.artifact_id)
        self._purge_open(tenant, ids)
        self._purge_tasks(tenant, ids)
        return out

    def _forget(self, tenant: str, aid: str) -> None:
        """The artifact is deleted: not current, never built or sent again."""
        self.deleted.add((tenant, aid))
        for key, a in list(self.current.items()):
            if a.tenant == tenant and a.artifact_id == aid:
                del self.current[key]

    def _purge_open(self, tenant: str, ids: set[str]) -> None:
        """Open episodes and preferences folded again without ``ids``; they are built at the
        next ``flush`` (their withdrawn artifact is no longer current, so nothing is stale)."""
        for (t, stream), ep in list(self.episodes.items()):
            if t == tenant and ids & {r.event_id for r in ep.refs}:
                kept = ep.without(ids)
                if kept is None:
                    del self.episodes[(t, stream)]
                    self.dirty.discard(("episode", t, stream))
                else:
                    self.episodes[(t, stream)] = kept
                    self.dirty.add(("episode", t, stream))
        for (t, subject), prefs in list(self.preferences.items()):
            if t == tenant and ids & {f.source.event_id for f in prefs.history}:
                left = prefs.without(ids)
                if left is None:
                    del self.preferences[(t, subject)]
                    self.dirty.discard(("preference", t, subject))
                else:
                    self.preferences[(t, subject)] = left
                    self.dirty.add(("preference", t, subject))

    def _purge_tasks(self, tenant: str, ids: set[str]) -> None:
        """Running tasks lose purged steps (a purged start: the whole task, its goal was in
        it). Finished runs and feedback keep no per-event inputs, so a group citing a purged
        event is dropped; ``after_purge`` rebuilds it from the ledger without the purge."""
        for (t, task_id), task in list(self.tasks.items()):
            if t != tenant:
                continue
            if task.started is not None and task.started.event_id in ids:
                del self.tasks[(t, task_id)]
                running = self.running.get((t, task.stream), [])
                if task_id in running:
                    running.remove(task_id)
            else:
                task.drop(ids)
        for key, group in list(self.task_groups.items()):
            if key[0] == tenant and ids & {r.event_id for r in group.refs}:
                del self.task_groups[key]
        for key, policy in list(self.policies.items()):
            if key[0] == tenant and ids & {r.event_id for r in policy.refs}:
                del self.policies[key]
                self.dirty.discard(("policy", *key))

    # -- one artifact ---------------------------------------------------------------------------

    def _emit(
        self,
        spec: _Spec,
        tenant: str,
        group_key: str,
        summary: str,
        details: Details,
        refs: list[SourceRef],
        parts: list[str],
        times: tuple[datetime, datetime | None, datetime],
        now: datetime,
        entities: list[str] | None = None,
        texts: tuple[str, ...] = (),
    ) -> list[Built]:
        """The group's artifact, unless the current one has the same inputs; the one it
        replaces is sent again, stale since ``times[2]`` (its successor's newest input)."""
        fingerprint = input_fingerprint(parts)
        aid = artifact_id(self.config.config_hash, spec.artifact_type, group_key, fingerprint)
        old = self.current.get((tenant, group_key))
        if (old is not None and old.artifact_id == aid) or (tenant, aid) in self.deleted:
            return []
        valid_from, valid_to, changed = times
        new = LatentArtifact(
            artifact_id=aid,
            artifact_type=spec.artifact_type,
            tenant=tenant,
            group_key=group_key,
            altitude="episode" if spec.altitude == "episode" else "latent",
            summary=summary,
            source_event_refs=refs,
            source_entity_refs=entities or [],
            valid_from=valid_from,
            valid_to=valid_to,
            created_at=now,
            projection_version=self.config.version,
            config_hash=self.config.config_hash,
            input_fingerprint=fingerprint,
            confidence=spec.confidence,
            review_status=spec.review_status,
            purpose_profile=spec.purpose,
            reasoning_phase=spec.phase,
            supersedes=[old.artifact_id] if old is not None else [],
            details=details,
            diagnostics={"sources": len(refs), "summary_chars": len(summary)},
        )
        self.current[(tenant, group_key)] = new
        out = [] if old is None else [Built(old.model_copy(update={"stale_at": changed}))]
        return [*out, Built(new, texts)]
