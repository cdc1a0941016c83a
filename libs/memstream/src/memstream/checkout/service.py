"""Checkout, recall and lineage over the live projection version: the orchestrator.

A checkout runs plan → pool (lanes, invalidations, what outcomes taught, latent artifacts) →
synthesize → assemble (→ weave) → record. The steps are pure functions elsewhere in this
package; here they are wired to the live version's stores, the recent packets
(:mod:`memory`), the artifact cache (:mod:`artifacts`) and the trace sink.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from memstream.checkout.artifacts import ArtifactCache
from memstream.checkout.latents import MAX_LATENT_ITEMS, latent_item, relevant_artifacts
from memstream.checkout.lexicons import Lexicons
from memstream.checkout.lineage import Lineage, lineage
from memstream.checkout.memory import PacketMemory, RecentPacket
from memstream.checkout.metrics import ANSWERABILITY, CHECKOUT_SECONDS, PACKET_TOKENS
from memstream.checkout.packet import assemble_packet
from memstream.checkout.packet.budget import measure, weave_tokens
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.pool import mark_invalidated
from memstream.checkout.request import CheckoutQuery, RecallQuery
from memstream.checkout.retrieve.config import CHECKOUT, PLAIN, RetrievalConfig
from memstream.checkout.retrieve.lanes import Retriever
from memstream.checkout.scoped import artifacts_in, records_in
from memstream.checkout.search import Searcher, SearchHit, SearchRequest
from memstream.checkout.synthesis import synthesize
from memstream.checkout.synthesis.answerable import calibrated
from memstream.checkout.timing import Laps, ms
from memstream.embed.port import Embedder
from memstream.embed.registry import get_embedder
from memstream.events.payloads import QuestionFamily
from memstream.graph.port import GraphReader
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
from memstream.projection.live import LiveStores
from memstream.projection.versions import VersionInfo
from memstream.records.latent import LatentArtifact
from memstream.records.packet import (
    AnswerPool,
    Candidate,
    CheckoutPacket,
    SynthesisPlan,
    SynthesisResult,
)
from memstream.records.projected import EntityView, StreamPage, VectorHit
from memstream.scope import WHOLE, Scope
from memstream.times import as_utc, iso_utc

# With a purpose, 1/WEAVE_SHARE of max_tokens is kept free for the weave (more if unused).
WEAVE_SHARE = 4


@dataclass(frozen=True)
class Learned:
    """The priors one checkout found and what they changed."""

    priors: dict[str, Prior] = field(default_factory=dict)
    adjustments: list[Adjustment] = field(default_factory=list)


@dataclass(frozen=True)
class Pool:
    """What one question found: its plan and the candidates, invalidations marked,
    re-ordered by what outcomes taught; the latent hits when asked for."""

    info: VersionInfo
    plan: SynthesisPlan
    candidates: list[Candidate]
    learned: Learned
    hits: list[VectorHit]
    embedder: Embedder
    lanes_ms: dict[str, float]
    names: Mapping[str, EntityView] = field(default_factory=dict)  # the tenant's, by key


@dataclass(frozen=True)
class _Ask:
    """The question as the pool is gathered for it."""

    query: str
    as_of: datetime | None
    fresh: bool
    scope: Scope
    pool: int  # how many candidates each lane overfetches
    k: int
    latents: bool  # collect the latent artifacts' hits
    raw: bool = False  # recall: every type, no re-ordering by outcomes
    explain: list[tuple[str, list[float]]] | None = None  # gets the fused top's features


@dataclass
class CheckoutService:
    """Reads the live version's stores (:class:`LiveStores`: the registry is read on every
    call, so a promote is atomic)."""

    stores: LiveStores
    trace: Callable[[CheckoutTrace], None] = lambda _trace: None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    packets: PacketMemory = field(default_factory=PacketMemory)
    # a tenant's entity lexicon: refreshed in the background after 1 s, rebuilt in the
    # request past 10 s (see ``Lexicons``)
    lexicons: Lexicons = field(default_factory=lambda: Lexicons(ttl=1.0, limit=10.0))
    artifacts: ArtifactCache = field(default_factory=ArtifactCache)
    prior_policy: PriorPolicy = field(default_factory=PriorPolicy)
    defaults: RetrievalConfig = CHECKOUT  # the levers of a checkout that names none

    def lexicon(self, info: VersionInfo, tenant: str, fresh: bool = False) -> Lexicon:
        """The tenant's entities as the planner resolves names against them (kept briefly and
        refreshed in the background: a name learnt a second ago may not resolve yet, the rest
        of the packet still finds it). ``fresh``: read now (a read after its own write)."""
        graph = self.stores.graph_for(info)
        return self.lexicons.get(
            (info.name, tenant), lambda: Lexicon.build(graph.entities(tenant)), fresh
        )

    def checkout(self, tenant: str, q: CheckoutQuery) -> CheckoutPacket:
        """One packet from the live version: plan, pool, synthesize, assemble; then traced."""
        laps = Laps()
        config = q.config or self.defaults
        ask = _Ask(q.query, q.as_of, q.fresh, q.scope, max(40, 4 * q.k), q.k, latents=True)
        pool = self._pool(tenant, ask, config, laps)
        step = Laps()
        graph = self.stores.graph_for(pool.info)
        found = self.artifacts.current(graph, pool.info.name, tenant, pool.hits)
        found = artifacts_in(q.scope, graph, tenant, found)
        artifacts = relevant_artifacts(pool.plan, found)
        pool.lanes_ms["artifacts"] = ms(step.elapsed())
        laps.lap("retrieve")
        result, judge = self._synthesize(q, config, pool)
        laps.lap("synthesize")
        packet = self._assemble(tenant, q, config, pool, result, artifacts)
        laps.lap("assemble")
        meta = {
            "version": pool.info.name,
            "candidates": len(pool.candidates),
            "latency_ms": ms(laps.elapsed()),
            "phases_ms": laps.ms,
            "lanes_ms": pool.lanes_ms,
            "feedback": [asdict(a) for a in pool.learned.adjustments],
            **config.as_meta(),
            **({"answerable": judge} if judge else {}),
        }
        packet = packet.model_copy(update={"meta": meta})
        self._record(q, packet, pool.plan, pool.info.name, laps.elapsed())
        return packet

    def _pool(self, tenant: str, ask: _Ask, config: RetrievalConfig, laps: Laps) -> Pool:
        """Plan the question, then the pool every lane finds for it: only records of work
        for a question about the work, invalidations marked, re-ordered by what outcomes
        taught. ``laps`` gets the plan's time; the pool's lanes get theirs."""
        info = self.stores.live()
        when = as_utc(ask.as_of) if ask.as_of is not None else None
        as_of = iso_utc(when) if when is not None else None
        now = iso_utc(self.clock().astimezone(UTC))
        lexicon = self.lexicon(info, tenant, ask.fresh)
        plan = plan_query(ask.query, now, as_of, lexicon)
        laps.lap("plan")
        embedder = get_embedder(info.config.embedder)
        graph = self.stores.graph_for(info)
        index = self.stores.open_index(info)
        retriever = Retriever(graph, index, embedder, pool=ask.pool, config=config, k=ask.k)
        lanes_ms: dict[str, float] = {}
        hits: list[VectorHit] = []
        step = Laps()
        found = retriever.retrieve(
            tenant,
            plan,
            scope=ask.scope,
            timings=lanes_ms,
            as_of=when,
            latents=hits if ask.latents else None,
            explain=ask.explain,
        )
        step.lap("lanes")
        if ask.raw:
            found = self._invalidated(graph, tenant, found[: ask.k], as_of, ask.scope)
            return Pool(info, plan, found, Learned(), hits, embedder, lanes_ms)
        found = [c for c in found if plan.admits(c.type)]  # work answers work only
        found = self._invalidated(graph, tenant, found, as_of, ask.scope)
        step.lap("invalidations")
        found, learned = self._learned(info, graph, tenant, plan, found, when, ask.scope)
        step.lap("feedback")
        lanes_ms |= {k: v for k, v in step.ms.items() if k != "lanes"}
        return Pool(info, plan, found, learned, hits, embedder, lanes_ms, lexicon.entities)

    def _synthesize(
        self, q: CheckoutQuery, config: RetrievalConfig, pool: Pool
    ) -> tuple[SynthesisResult, dict[str, object]]:
        """The answer, with a warning for each shown item that has a failure record; with the
        ``calibrated`` lever, answerability from the learned probability, and what it read
        (``meta.answerable``: the probability, threshold and model; with ``explain`` the
        features)."""
        priors = pool.learned.priors
        outcomes = outcome_records(priors, pool.candidates)
        result = synthesize(
            pool.plan,
            pool.candidates,
            outcomes=outcomes,
            names=pool.names,
            vetoes=not config.calibrated,
        )
        judge: dict[str, object] = {}
        if config.calibrated:
            result, judge = calibrated(pool.plan, result, pool.candidates, q.explain)
        shown = [i for a in result.answer_candidates for i in a.support_ids]
        shown += [c.item_id for c in pool.candidates[: max(q.k, 20)]]
        if warnings := failure_warnings(priors, shown):
            result = result.model_copy(update={"warnings": [*result.warnings, *warnings]})
        return result, judge

    def _assemble(
        self,
        tenant: str,
        q: CheckoutQuery,
        config: RetrievalConfig,
        pool: Pool,
        result: SynthesisResult,
        artifacts: list[LatentArtifact],
    ) -> CheckoutPacket:
        """The packet; with a purpose, a share of the budget stays free for the weave, which
        then takes what the packet left."""
        reserve = q.max_tokens // WEAVE_SHARE if q.purpose is not None else 0
        count = pool.embedder.count_tokens
        packet = assemble_packet(
            packet_id=f"pk-{uuid.uuid4().hex}",
            tenant=tenant,
            as_of=iso_utc(as_utc(q.as_of)) if q.as_of is not None else None,
            plan=pool.plan,
            result=result,
            candidates=pool.candidates[: max(q.k, 20)],
            latent=[latent_item(a) for a in artifacts[:MAX_LATENT_ITEMS]],
            max_tokens=q.max_tokens - reserve,
            count_tokens=count,
            text_rows=config.text_rows,
        )
        if q.purpose is None:
            return packet
        weave = build_weave(
            goal=q.query,
            purpose=q.purpose,
            packet=packet,
            artifacts=artifacts,
            allowed=q.max_tokens - packet.budget.used,
            measure=lambda w: weave_tokens(w, count),
            created_at=iso_utc(self.clock().astimezone(UTC)),
            version=pool.info.name,
        )
        woven = packet.model_copy(update={"memory_weave": weave})
        budget = packet.budget.model_copy(
            update={"max_tokens": q.max_tokens, "used": measure(woven, count)}
        )
        return woven.model_copy(update={"budget": budget})

    def _invalidated(
        self,
        graph: GraphReader,
        tenant: str,
        candidates: list[Candidate],
        as_of: str | None,
        scope: Scope,
    ) -> list[Candidate]:
        """The pool with what accepted invalidations (made by ``as_of``, inside ``scope``)
        name marked. One graph read (two with a scope)."""
        ids = {c.item_id for c in candidates} | {c.ref.event_id for c in candidates}
        found = graph.invalidations(tenant, sorted(ids), as_of=as_of)
        found = records_in(scope, graph, tenant, found, lambda v: v.event_id)
        return mark_invalidated(candidates, found) if found else candidates

    def _learned(
        self,
        info: VersionInfo,
        graph: GraphReader,
        tenant: str,
        plan: SynthesisPlan,
        candidates: list[Candidate],
        as_of: datetime | None,
        scope: Scope,
    ) -> tuple[list[Candidate], Learned]:
        """The pool re-ordered by feedback priors (bounded; see ``learning.priors``): the
        feedback written inside ``scope`` only."""
        if not info.config.feedback or not candidates:
            return candidates, Learned()
        ids = {c.item_id for c in candidates} | {c.ref.event_id for c in candidates}
        records = graph.feedback(tenant, sorted(ids), as_of=iso_utc(as_of) if as_of else None)
        records = records_in(scope, graph, tenant, records, lambda r: r.event_id)
        if not records:
            return candidates, Learned()
        now = as_of or self.clock()
        ranked, found, notes = learned_pool(plan, candidates, records, now, self.prior_policy)
        return ranked, Learned(found, notes)

    def _record(
        self,
        q: CheckoutQuery,
        packet: CheckoutPacket,
        plan: SynthesisPlan,
        version: str,
        elapsed: float,
    ) -> None:
        """Remember what the packet cites (for lineage), observe it, and emit its trace."""
        cited = cited_ids(packet)
        self.packets.remember(packet.packet_id, RecentPacket(packet.tenant, cited, family_of(plan)))
        CHECKOUT_SECONDS.observe(elapsed)
        PACKET_TOKENS.observe(packet.budget.used)
        ANSWERABILITY.labels(packet.answerability).inc()
        self.trace(
            trace_of(
                packet,
                plan,
                q.query,
                task_id=q.task_id,
                purpose=q.purpose,
                stream=q.scope.stream[0] if q.scope.stream and len(q.scope.stream) == 1 else None,
                cited=cited,
                at=self.clock().astimezone(UTC),
                version=version,
            )
        )

    def recall(self, tenant: str, q: RecallQuery) -> list[Candidate]:
        """The raw fused top-k (no synthesis; the levers of ``q.config``, none without it),
        or one index lane alone; what an accepted invalidation names is kept but marked
        (``invalidated_by``, the reason)."""
        if q.mode == "fused":
            return self.ranked(tenant, q)[0]
        info = self.stores.live()
        graph = self.stores.graph_for(info)
        embedder = get_embedder(info.config.embedder)
        retriever = Retriever(graph, self.stores.open_index(info), embedder, pool=max(20, q.k))
        as_of = as_utc(q.as_of) if q.as_of is not None else None
        found = retriever.lane(tenant, q.query, q.mode, q.k, q.scope, as_of)
        when = iso_utc(as_of) if as_of else None
        return self._invalidated(graph, tenant, found, when, q.scope)

    def ranked(
        self, tenant: str, q: RecallQuery
    ) -> tuple[list[Candidate], list[tuple[str, list[float]]]]:
        """The fused top-k, and the fused top before any reordering as a ranker reads it:
        each item's id and ``features.FEATURES`` (what ``bench train`` learns from)."""
        config = q.config or PLAIN
        pool = max(20, q.k) if q.config is None else max(40, 4 * q.k)
        explained: list[tuple[str, list[float]]] = []
        ask = _Ask(q.query, q.as_of, q.fresh, q.scope, pool, q.k, False, True, explained)
        return self._pool(tenant, ask, config, Laps()).candidates, explained

    def answer_pool(self, tenant: str, q: RecallQuery) -> AnswerPool:
        """The fused top-k a synthesis may rest on (summarize_recall's): records of work
        only for a question about the work, invalidations marked, re-ordered by what task
        outcomes taught, with each candidate's outcome record."""
        ask = _Ask(q.query, q.as_of, q.fresh, q.scope, max(20, q.k), q.k, latents=False)
        pool = self._pool(tenant, ask, PLAIN, Laps())
        top = pool.candidates[: q.k]
        return AnswerPool(
            candidates=top,
            outcomes=outcome_records(pool.learned.priors, top),
            operation=pool.plan.operation,
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the live version's tokenizer (the packet budget's)."""
        return get_embedder(self.stores.live().config.embedder).count_tokens(text)

    def packet_family(self, tenant: str, packet_id: str) -> QuestionFamily | None:
        """The question family of a packet this process still remembers (feedback on it
        counts most for questions like it), else None."""
        recent = self.packets.get(tenant, packet_id)
        return recent.family if recent is not None else None

    def lineage(self, tenant: str, item_id: str, scope: Scope = WHOLE) -> Lineage:
        """See :func:`memstream.checkout.lineage.lineage`."""
        return lineage(self.stores.graph(), self.packets, tenant, item_id, scope)

    def stream_events(
        self, tenant: str, stream: str, limit: int, scope: Scope = WHOLE, before: int | None = None
    ) -> StreamPage:
        """Up to ``limit`` of one stream's events in the live version, newest written first
        (below seq ``before``, if given); of those, the ones inside ``scope``. The page
        resumes below the last it read, whether or not the scope admitted it."""
        found = self.stores.graph().stream_page(tenant, stream, limit, before)
        inside = [e for e in found if scope.admits(user=e.user, agent=e.agent, stream=e.stream)]
        more = len(found) == limit  # a full page: there may be older ones
        return StreamPage(events=inside, next_before=found[-1].seq if more else None)

    def search(self, tenant: str, req: SearchRequest, scope: Scope = WHOLE) -> list[SearchHit]:
        """The best ``req.k`` items at ``req.altitude`` in the live version, inside ``scope``
        (the request's, within its key's: the caller's to decide)."""
        info = self.stores.live()
        embedder = get_embedder(info.config.embedder)
        searcher = Searcher(self.stores.graph_for(info), self.stores.open_index(info), embedder)
        return searcher.search(tenant, req, scope)

    def latents(
        self,
        tenant: str,
        types: list[str] | None = None,
        scope: Scope = WHOLE,
        include_stale: bool = False,
        limit: int = 100,
    ) -> list[LatentArtifact]:
        """The tenant's latent artifacts in the live version, newest first: those with a
        source event in ``scope``, each citing only those."""
        graph = self.stores.graph()
        if scope.empty:
            return graph.latents(tenant, types, None, include_stale, limit)
        found = graph.latents_in(tenant, scope, types, include_stale, limit)
        return artifacts_in(scope, graph, tenant, found)

    def forget_tenant(self, tenant: str) -> None:
        """Drop the tenant's parsed artifacts and lexicons (a purge: none may be served
        again)."""
        self.artifacts.forget(tenant)
        self.lexicons.forget(tenant)


def cited_ids(packet: CheckoutPacket) -> list[str]:
    """Every item id a packet cites, in packet order, once."""
    ids: list[str] = []
    for a in packet.answer_candidates:
        ids += a.support_ids
    ids += [f.fact_id for f in packet.facts]
    ids += [r.support_id for r in packet.evidence]
    ids += [s.item_id for s in packet.snippets]
    return list(dict.fromkeys(ids))
