"""Checkout, recall and lineage over the live projection version (the I/O shell)."""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.checkout.latents import MAX_LATENT_ITEMS, latent_item, relevant_artifacts
from memstream.checkout.latents import MAX_REFS as ITEM_REFS
from memstream.checkout.lexicons import Lexicons
from memstream.checkout.metrics import ANSWERABILITY, CHECKOUT_SECONDS, PACKET_TOKENS
from memstream.checkout.packet import assemble_packet
from memstream.checkout.packet.budget import measure, weave_tokens
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.retrieve import Retriever
from memstream.checkout.search import Searcher, SearchHit, SearchRequest
from memstream.checkout.synthesis import synthesize
from memstream.embed.port import Embedder
from memstream.embed.registry import get_embedder
from memstream.events.envelope import StreamName
from memstream.events.payloads import QuestionFamily
from memstream.graph.port import GraphStore
from memstream.latent.weave import MAX_REFS as WEAVE_REFS
from memstream.latent.weave import build_weave
from memstream.learning.priors import (
    Adjustment,
    Prior,
    PriorPolicy,
    failure_warnings,
    learned_pool,
    outcome_records,
)
from memstream.learning.trace import CheckoutTrace, family_of, trace_of
from memstream.projection.versions import FileProjectionRegistry, VersionInfo
from memstream.records.latent import LatentArtifact, Purpose, is_artifact_id
from memstream.records.packet import (
    AnswerPool,
    Candidate,
    CheckoutPacket,
    SynthesisPlan,
    SynthesisResult,
)
from memstream.records.projected import EventRecord, InvalidationRecord, SourceRef, VectorHit
from memstream.times import as_utc, iso_utc
from memstream.vectors.port import VectorIndex
from memstream.wire import STORABLE, ItemId, JsonInt, Position, RfcTimestamp

Format = Literal["json", "markdown", "gathered"]
# With a purpose, 1/WEAVE_SHARE of max_tokens is kept free for the weave (more if unused).
WEAVE_SHARE = 4
# With ``top_votes``, each lane's best VOTE_DEPTH x k items vote in the fusion (Lanes.fused).
VOTE_DEPTH = 2
# The source refs of an artifact that a packet or a weave cites; lineage reads them all.
CITED_REFS = max(ITEM_REFS, WEAVE_REFS)
Question = Annotated[str, Field(min_length=1, max_length=4000), STORABLE]


def _lever(what: str, default: str) -> Any:
    """A request's lever: None means the service's default."""
    return Field(default=None, description=f"{what} (None: the service default, {default})")


class CheckoutRequest(BaseModel):
    """``POST /v1/checkout``."""

    # strict: no "10" for 10 (see memstream.wire); the published schema says so
    model_config = ConfigDict(extra="forbid", strict=True)
    query: Question
    as_of: RfcTimestamp | None = None
    max_tokens: JsonInt = Field(default=1500, ge=64, le=64_000)
    k: JsonInt = Field(default=10, ge=1, le=100)
    purpose: Purpose | None = Field(
        default=None, description="adds a memory weave for this reasoning step (prospective pass)"
    )
    stream: StreamName | None = None
    task_id: ItemId | None = Field(
        default=None, description="the task this checkout serves (for learning)"
    )
    format: Format = "json"
    # The levers: one retrieval or packet behaviour switched for this request.
    episodes: bool | None = _lever(
        "the hierarchical lane: rank episodes, then the turns inside the best ones", "off"
    )
    time_lane: bool | None = _lever(
        "the time lane: the turns in the periods the question's dates name, relative dates "
        "resolved against the days of the best hits",
        "on",
    )
    second_hop: bool | None = _lever(
        "a second hop: the question searched again with the entities the best hits name and "
        "the words they share that it does not say",
        "off",
    )
    rerank: bool | None = _lever(
        "rerank the fused top by term coverage, named speakers and entities, and adjacency to "
        "other hits",
        "on",
    )
    top_votes: bool | None = _lever(
        "each lane votes in the fusion with its best 2 x k items only; deeper items stay "
        "candidates, ranked after",
        "on",
    )
    text_rows: bool | None = _lever(
        "an evidence row for every relevant event's text, beside its snippet",
        "off: an event's text is shown once, as a snippet, and the evidence section keeps the "
        "rows carrying a value",
    )
    expand: bool | None = _lever(
        "the keyword searches add the question's related words (the words nearest each of "
        "its words, names and numbers aside, in the embedder's table) at a fifth of a "
        "question word's weight or less",
        "on",
    )
    after: Position | None = Field(
        default=None,
        description="a write's position: answer once every projection this read uses has "
        "applied it (bounded by MEMSTREAM_READ_AFTER_MAX_WAIT_S; past it, or when it can never "
        "be, the answer carries a stale warning naming what was not applied)",
    )


class RecallRequest(BaseModel):
    """``POST /v1/recall``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    query: Question
    k: JsonInt = Field(default=10, ge=1, le=200)
    stream: StreamName | None = None
    mode: Literal["fused", "hybrid", "dense", "sparse"] = Field(
        default="fused", description="fused = every lane; the others = one vector-index lane"
    )
    as_of: RfcTimestamp | None = None
    after: Position | None = Field(
        default=None,
        description="a write's position: answer once every projection this read uses has "
        "applied it (bounded by MEMSTREAM_READ_AFTER_MAX_WAIT_S; past it, or when it can never "
        "be, the answer carries a stale warning naming what was not applied)",
    )


class LeafEvent(BaseModel):
    """What a leaf says: the ledger event's content, as projected."""

    event_id: str
    type: str
    agent: str
    occurred_at: str
    text: str


class Lineage(BaseModel):
    """Sources one hop up and leaves = the ledger events an item rests on."""

    id: str
    kind: Literal["event", "fact", "packet", "latent"]
    sources: list[str]
    leaves: list[SourceRef]
    artifact: LatentArtifact | None = Field(
        default=None, description="for a latent artifact: the artifact itself (suggestive only)"
    )
    events: list[LeafEvent] = Field(
        default_factory=list,
        description="the leaves' content, in leaf order (a purged event has none)",
    )


@dataclass(frozen=True)
class RecentPacket:
    """What the service remembers of a packet it built: for lineage and feedback."""

    tenant: str
    cited: list[str]
    family: QuestionFamily


@dataclass(frozen=True)
class Learned:
    """The priors one checkout found and what they changed."""

    priors: dict[str, Prior] = field(default_factory=dict)
    adjustments: list[Adjustment] = field(default_factory=list)


class UnknownItem(LookupError):
    """No event, fact or recent packet has this id."""


class NoProjection(RuntimeError):
    """No live projection version (or its index) to read from yet."""


# Each lever as ``meta`` reports it, which is also the ``CheckoutService`` attribute holding
# its default, and the ``CheckoutRequest`` field that asks for it.
LEVERS: dict[str, str] = {
    "episode_lane": "episodes",
    "time_lane": "time_lane",
    "second_hop": "second_hop",
    "rerank": "rerank",
    "top_votes": "top_votes",
    "text_rows": "text_rows",
    "expand": "expand",
}


@dataclass
class CheckoutService:
    """Reads the live version from the registry on every call (promote is atomic)."""

    registry: FileProjectionRegistry
    graph_for: Callable[[VersionInfo], GraphStore]
    index_for: Callable[[VersionInfo], VectorIndex | None]
    trace: Callable[[CheckoutTrace], None] = lambda _trace: None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    packets: OrderedDict[str, RecentPacket] = field(default_factory=OrderedDict)
    packet_memory: int = 10_000
    # a tenant's entity lexicon: refreshed in the background after 1 s, rebuilt in the
    # request past 10 s (see ``Lexicons``)
    lexicons: Lexicons = field(default_factory=lambda: Lexicons(ttl=1.0, limit=10.0))
    # seconds a parsed artifact is reused: its document lists up to hundreds of source refs
    artifact_ttl: float = 5.0
    artifacts: dict[tuple[str, str, str], tuple[float, LatentArtifact]] = field(
        default_factory=dict
    )
    prior_policy: PriorPolicy = field(default_factory=PriorPolicy)
    episode_lane: bool = False  # the default of ``CheckoutRequest.episodes`` (see Retriever)
    # Defaults of the query-side levers of ``CheckoutRequest`` (see Retriever): on where they
    # lifted LoCoMo Recall@10 measured on and off in one run (README), off where they did not.
    time_lane: bool = True
    second_hop: bool = False
    rerank: bool = True
    top_votes: bool = True
    text_rows: bool = False
    expand: bool = True

    def live_graph(self) -> GraphStore:
        """The live version's graph store; ``NoProjection`` before one is live."""
        return self.graph_for(self._live())

    def live_index(self) -> VectorIndex | None:
        """The live version's vector index, if this process can read it."""
        return self.index_for(self._live())

    def packets_reaching(self, tenant: str, ids: AbstractSet[str], subject_key: str) -> list[str]:
        """The recent packets of ``tenant`` that cite any of ``ids`` or whose question named
        ``subject_key``."""
        return [
            pid
            for pid, p in list(self.packets.items())
            if p.tenant == tenant
            and (not ids.isdisjoint(p.cited) or subject_key in p.family.entities)
        ]

    def forget_packets(self, tenant: str, ids: AbstractSet[str], subject_key: str) -> int:
        """Forget the recent packets :meth:`packets_reaching` finds (a purge); returns how
        many went."""
        doomed = self.packets_reaching(tenant, ids, subject_key)
        for pid in doomed:
            self.packets.pop(pid, None)
        return len(doomed)

    def live(self) -> VersionInfo:
        """The live version, read from the registry now (:class:`NoProjection`: none yet)."""
        return self._live()

    def _live(self) -> VersionInfo:
        reg = self.registry.load()
        if reg.live is None or reg.live not in reg.versions:
            raise NoProjection("no live projection version yet")
        return reg.versions[reg.live]

    def _retriever(self, info: VersionInfo, pool: int) -> tuple[Retriever, Embedder]:
        index = self.index_for(info)
        if index is None:
            raise NoProjection(f"the vector index of {info.name} is not open yet")
        embedder = get_embedder(info.config.embedder)
        return Retriever(self.graph_for(info), index, embedder, pool=pool), embedder

    def lexicon(self, info: VersionInfo, tenant: str, fresh: bool = False) -> Lexicon:
        """The tenant's entities as the planner resolves names against them (kept briefly and
        refreshed in the background: a name learnt a second ago may not resolve yet, the rest
        of the packet still finds it). ``fresh``: read now (a read after its own write)."""
        graph = self.graph_for(info)
        return self.lexicons.get(
            (info.name, tenant), lambda: Lexicon.build(graph.entities(tenant)), fresh
        )

    def checkout(self, tenant: str, req: CheckoutRequest) -> CheckoutPacket:
        """One packet from the live version: plan, retrieve, synthesize, assemble; then traced."""
        started = time.perf_counter()
        info = self._live()
        now = iso_utc(self.clock().astimezone(UTC))
        as_of_ts = as_utc(req.as_of) if req.as_of is not None else None
        as_of = iso_utc(as_of_ts) if as_of_ts is not None else None
        lexicon = self.lexicon(info, tenant, fresh=req.after is not None)
        plan = plan_query(req.query, now, as_of, lexicon)
        t_plan = time.perf_counter()
        retriever, embedder = self._retriever(info, pool=max(40, 4 * req.k))
        levers = self._levers(req, retriever)
        lane_ms: dict[str, float] = {}
        hits: list[VectorHit] = []
        candidates = retriever.retrieve(
            tenant, plan, stream=req.stream, timings=lane_ms, as_of=as_of_ts, latents=hits
        )
        t_lanes = time.perf_counter()
        candidates = [c for c in candidates if plan.admits(c.type)]  # work answers work only
        candidates = self._invalidated(info, tenant, candidates, as_of)
        t_invalidated = time.perf_counter()
        candidates, learned = self._learned(info, tenant, plan, candidates, as_of_ts)
        t_learned = time.perf_counter()
        artifacts = relevant_artifacts(plan, self._artifacts(info, tenant, hits))
        t_retrieve = time.perf_counter()
        lane_ms |= {  # the graph reads after the lanes, so the retrieve phase adds up
            "invalidations": _ms(t_invalidated - t_lanes),
            "feedback": _ms(t_learned - t_invalidated),
            "artifacts": _ms(t_retrieve - t_learned),
        }
        result = synthesize(plan, candidates, outcomes=outcome_records(learned.priors, candidates))
        shown = [i for a in result.answer_candidates for i in a.support_ids]
        shown += [c.item_id for c in candidates[: max(req.k, 20)]]
        warnings = failure_warnings(learned.priors, shown)
        if warnings:
            result = result.model_copy(update={"warnings": [*result.warnings, *warnings]})
        t_synth = time.perf_counter()
        packet = self._assemble(req, tenant, as_of, plan, result, candidates, artifacts, embedder)
        if req.purpose is not None:
            packet = self._woven(req, req.purpose, packet, artifacts, embedder, info.name)
        elapsed = time.perf_counter() - started
        meta = {
            "version": info.name,
            "candidates": len(candidates),
            "latency_ms": _ms(elapsed),
            "phases_ms": {
                "plan": _ms(t_plan - started),
                "retrieve": _ms(t_retrieve - t_plan),
                "synthesize": _ms(t_synth - t_retrieve),
                "assemble": _ms(started + elapsed - t_synth),
            },
            "lanes_ms": lane_ms,
            "feedback": [asdict(a) for a in learned.adjustments],
            **levers,
        }
        packet = packet.model_copy(update={"meta": meta})
        self._record(req, packet, plan, info.name, elapsed)
        return packet

    def _artifacts(
        self, info: VersionInfo, tenant: str, hits: list[VectorHit]
    ) -> list[LatentArtifact]:
        """The current artifacts behind latent hits, best first. Reading and parsing their
        documents was a checkout's slowest step (p95 ~200 ms at 100k events), so a parsed
        artifact is reused for ``artifact_ttl`` seconds (a purge forgets them at once)."""
        ids = list(dict.fromkeys(str(h.payload.get("artifact_id")) for h in hits))
        now = time.monotonic()
        known: dict[str, LatentArtifact] = {}
        for i in ids:
            cached = self.artifacts.get((info.name, tenant, i))
            if cached is not None and now - cached[0] < self.artifact_ttl:
                known[i] = cached[1]
        if missing := [i for i in ids if i not in known]:
            if len(self.artifacts) > 4096:
                self.artifacts.clear()
            for a in self.graph_for(info).latents_by_id(tenant, missing, refs=CITED_REFS):
                self.artifacts[(info.name, tenant, a.artifact_id)] = (now, a)
                known[a.artifact_id] = a
        return [known[i] for i in ids if i in known and known[i].stale_at is None]

    def forget_tenant(self, tenant: str) -> None:
        """Drop the tenant's parsed artifacts and lexicons (a purge: none may be served
        again)."""
        # list() copies the keys in one step: checkouts on other threads insert meanwhile
        for key in [k for k in list(self.artifacts) if k[1] == tenant]:
            self.artifacts.pop(key, None)
        self.lexicons.forget(tenant)

    def _assemble(
        self,
        req: CheckoutRequest,
        tenant: str,
        as_of: str | None,
        plan: SynthesisPlan,
        result: SynthesisResult,
        candidates: list[Candidate],
        artifacts: list[LatentArtifact],
        embedder: Embedder,
    ) -> CheckoutPacket:
        """The packet; with a purpose, a share of the budget stays free for the weave."""
        reserve = req.max_tokens // WEAVE_SHARE if req.purpose is not None else 0
        return assemble_packet(
            packet_id=f"pk-{uuid.uuid4().hex}",
            tenant=tenant,
            as_of=as_of,
            plan=plan,
            result=result,
            candidates=candidates[: max(req.k, 20)],
            latent=[latent_item(a) for a in artifacts[:MAX_LATENT_ITEMS]],
            max_tokens=req.max_tokens - reserve,
            count_tokens=embedder.count_tokens,
            text_rows=self._lever(req, "text_rows"),
        )

    def _levers(self, req: CheckoutRequest, retriever: Retriever) -> dict[str, bool]:
        """``retriever`` with the request's levers (the service defaults where it is silent);
        returns every lever as ``meta`` reports it."""
        levers = {meta: self._lever(req, meta) for meta in LEVERS}
        retriever.episodes = levers["episode_lane"]
        retriever.time_lane = levers["time_lane"]
        retriever.second_hop = levers["second_hop"]
        retriever.rerank = levers["rerank"]
        retriever.vote_depth = VOTE_DEPTH * req.k if levers["top_votes"] else None
        retriever.expand = levers["expand"]
        return levers

    def _lever(self, req: CheckoutRequest, meta: str) -> bool:
        value: bool | None = getattr(req, LEVERS[meta])
        return bool(getattr(self, meta)) if value is None else value

    def _woven(
        self,
        req: CheckoutRequest,
        purpose: Purpose,
        packet: CheckoutPacket,
        artifacts: list[LatentArtifact],
        embedder: Embedder,
        version: str,
    ) -> CheckoutPacket:
        """The packet with its weave, in what the packet left of ``max_tokens``."""
        weave = build_weave(
            goal=req.query,
            purpose=purpose,
            packet=packet,
            artifacts=artifacts,
            allowed=req.max_tokens - packet.budget.used,
            measure=lambda w: weave_tokens(w, embedder.count_tokens),
            created_at=iso_utc(self.clock().astimezone(UTC)),
            version=version,
        )
        woven = packet.model_copy(update={"memory_weave": weave})
        budget = packet.budget.model_copy(
            update={"max_tokens": req.max_tokens, "used": measure(woven, embedder.count_tokens)}
        )
        return woven.model_copy(update={"budget": budget})

    def _invalidated(
        self, info: VersionInfo, tenant: str, candidates: list[Candidate], as_of: str | None
    ) -> list[Candidate]:
        """The pool with what accepted invalidations (made by ``as_of``) name marked: an
        event by its id, a fact by its id or its source event's. One graph read."""
        ids = {c.item_id for c in candidates} | {c.ref.event_id for c in candidates}
        found = self.graph_for(info).invalidations(tenant, sorted(ids), as_of=as_of)
        if not found:
            return candidates
        first: dict[str, InvalidationRecord] = {}
        for record in found:  # oldest first: the earliest holds
            first.setdefault(record.target_id, record)
        out = []
        for c in candidates:
            v = first.get(c.item_id)
            if v is None and c.kind == "fact":
                v = first.get(c.ref.event_id)
            if v is not None:
                c = c.model_copy(
                    update={"invalidated_by": v.event_id, "invalidation_reason": v.reason}
                )
            out.append(c)
        return out

    def _learned(
        self,
        info: VersionInfo,
        tenant: str,
        plan: SynthesisPlan,
        candidates: list[Candidate],
        as_of: datetime | None,
    ) -> tuple[list[Candidate], Learned]:
        """The pool re-ordered by feedback priors (bounded; see ``learning.priors``)."""
        if not info.config.feedback or not candidates:
            return candidates, Learned()
        ids = {c.item_id for c in candidates} | {c.ref.event_id for c in candidates}
        records = self.graph_for(info).feedback(
            tenant, sorted(ids), as_of=iso_utc(as_of) if as_of else None
        )
        if not records:
            return candidates, Learned()
        now = as_of or self.clock()
        ranked, found, notes = learned_pool(plan, candidates, records, now, self.prior_policy)
        return ranked, Learned(found, notes)

    def _record(
        self,
        req: CheckoutRequest,
        packet: CheckoutPacket,
        plan: SynthesisPlan,
        version: str,
        elapsed: float,
    ) -> None:
        """Remember what the packet cites (for lineage), observe it, and emit its trace."""
        cited = cited_ids(packet)
        self._remember(packet.packet_id, RecentPacket(packet.tenant, cited, family_of(plan)))
        CHECKOUT_SECONDS.observe(elapsed)
        PACKET_TOKENS.observe(packet.budget.used)
        ANSWERABILITY.labels(packet.answerability).inc()
        self.trace(
            trace_of(
                packet,
                plan,
                req.query,
                task_id=req.task_id,
                purpose=req.purpose,
                stream=req.stream,
                cited=cited,
                at=self.clock().astimezone(UTC),
                version=version,
            )
        )

    def recall(self, tenant: str, req: RecallRequest) -> list[Candidate]:
        """The raw fused top-k (no synthesis), for comparison and simple clients; what an
        accepted invalidation names is kept but marked (``invalidated_by``, the reason)."""
        info = self._live()
        retriever, _ = self._retriever(info, pool=max(20, req.k))
        as_of = as_utc(req.as_of) if req.as_of is not None else None
        as_of_text = iso_utc(as_of) if as_of else None
        if req.mode != "fused":
            found = retriever.lane(tenant, req.query, req.mode, req.k, req.stream, as_of)
        else:
            now = iso_utc(self.clock().astimezone(UTC))
            lexicon = self.lexicon(info, tenant, fresh=req.after is not None)
            plan = plan_query(req.query, now, as_of_text, lexicon)
            found = retriever.retrieve(tenant, plan, stream=req.stream, as_of=as_of)[: req.k]
        return self._invalidated(info, tenant, found, as_of_text)

    def answer_pool(self, tenant: str, req: RecallRequest) -> AnswerPool:
        """The fused top-k a synthesis may rest on (summarize_recall's): records of work
        only for a question about the work, invalidations marked, re-ordered by what task
        outcomes taught, with each candidate's outcome record."""
        info = self._live()
        retriever, _ = self._retriever(info, pool=max(20, req.k))
        as_of = as_utc(req.as_of) if req.as_of is not None else None
        as_of_text = iso_utc(as_of) if as_of else None
        now = iso_utc(self.clock().astimezone(UTC))
        lexicon = self.lexicon(info, tenant, fresh=req.after is not None)
        plan = plan_query(req.query, now, as_of_text, lexicon)
        found = retriever.retrieve(tenant, plan, stream=req.stream, as_of=as_of)
        found = [c for c in found if plan.admits(c.type)]
        found = self._invalidated(info, tenant, found, as_of_text)
        ranked, learned = self._learned(info, tenant, plan, found, as_of)
        top = ranked[: req.k]
        return AnswerPool(
            candidates=top,
            outcomes=outcome_records(learned.priors, top),
            operation=plan.operation,
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the live version's tokenizer (the packet budget's)."""
        return get_embedder(self._live().config.embedder).count_tokens(text)

    def _remember(self, packet_id: str, recent: RecentPacket) -> None:
        self.packets[packet_id] = recent
        while len(self.packets) > self.packet_memory:
            self.packets.popitem(last=False)

    def packet_family(self, tenant: str, packet_id: str) -> QuestionFamily | None:
        """The question family of a packet this process still remembers (feedback on it
        counts most for questions like it), else None."""
        recent = self.packets.get(packet_id)
        return recent.family if recent is not None and recent.tenant == tenant else None

    def lineage(self, tenant: str, item_id: str) -> Lineage:
        """Resolve an event id, a fact id (``<event_id>#n``), an artifact id or a recent
        packet id, with what its leaves say."""
        graph = self.graph_for(self._live())
        found = self._lineage(graph, tenant, item_id)
        by_id = {e.event_id: e for e in graph.events(tenant, [r.event_id for r in found.leaves])}
        events = [_leaf_event(by_id[r.event_id]) for r in found.leaves if r.event_id in by_id]
        return found.model_copy(update={"events": events})

    def _lineage(self, graph: GraphStore, tenant: str, item_id: str) -> Lineage:
        if is_artifact_id(item_id):
            return self._artifact_lineage(graph, tenant, item_id)
        recent = self.packets.get(item_id)
        if recent is not None and recent.tenant == tenant:
            cited = recent.cited
            leaves = self._leaves(graph, tenant, cited)
            if leaves is None:
                raise UnknownItem(item_id)
            return Lineage(id=item_id, kind="packet", sources=cited, leaves=leaves)
        if "#" in item_id:
            event_id = item_id.split("#", 1)[0]
            fact = graph.fact(tenant, item_id)
            if fact is None:
                raise UnknownItem(item_id)
            return Lineage(id=item_id, kind="fact", sources=[event_id], leaves=[fact.source])
        event = graph.event(tenant, item_id)
        if event is None:
            raise UnknownItem(item_id)
        return Lineage(id=item_id, kind="event", sources=[], leaves=[event.ref])

    def _artifact_lineage(self, graph: GraphStore, tenant: str, artifact_id: str) -> Lineage:
        """An artifact rests on the ledger events it was derived from (one hop: they are
        both its sources and its leaves), stale or not."""
        artifact = graph.latent(tenant, artifact_id)
        if artifact is None:
            raise UnknownItem(artifact_id)
        leaves = list({r.event_id: r for r in artifact.source_event_refs}.values())
        sources = [r.event_id for r in leaves]
        return Lineage(
            id=artifact_id, kind="latent", sources=sources, leaves=leaves, artifact=artifact
        )

    def search(self, tenant: str, req: SearchRequest) -> list[SearchHit]:
        """The best ``req.k`` items at ``req.altitude`` in the live version."""
        info = self._live()
        index = self.index_for(info)
        if index is None:
            raise NoProjection(f"the vector index of {info.name} is not open yet")
        searcher = Searcher(self.graph_for(info), index, get_embedder(info.config.embedder))
        return searcher.search(tenant, req)

    def latents(
        self,
        tenant: str,
        types: list[str] | None = None,
        stream: str | None = None,
        include_stale: bool = False,
        limit: int = 100,
    ) -> list[LatentArtifact]:
        """The tenant's latent artifacts in the live version, newest first."""
        graph = self.graph_for(self._live())
        return graph.latents(tenant, types, stream, include_stale, limit)

    def _leaves(self, graph: GraphStore, tenant: str, ids: list[str]) -> list[SourceRef] | None:
        event_ids = list(dict.fromkeys(i.split("#", 1)[0] for i in ids))
        events = {e.event_id: e for e in graph.events(tenant, event_ids)}
        if len(events) != len(event_ids):
            return None
        return [events[i].ref for i in event_ids]


def _leaf_event(e: EventRecord) -> LeafEvent:
    return LeafEvent(
        event_id=e.event_id, type=e.type, agent=e.agent, occurred_at=e.occurred_at, text=e.text
    )


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def cited_ids(packet: CheckoutPacket) -> list[str]:
    """Every item id a packet cites, in packet order, once."""
    ids: list[str] = []
    for a in packet.answer_candidates:
        ids += a.support_ids
    ids += [f.fact_id for f in packet.facts]
    ids += [r.support_id for r in packet.evidence]
    ids += [s.item_id for s in packet.snippets]
    return list(dict.fromkeys(ids))
