"""The Summarizer: recall k candidates, reuse or make a checked synthesis, answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memstream.checkout.packet.snippets import shorten
from memstream.checkout.request import RecallQuery
from memstream.checkout.synthesis.learned import losing_ids
from memstream.records.packet import AnswerPool, Candidate, OutcomeRecord
from memstream.scope import WHOLE, Scope
from memstream.summarize import metrics
from memstream.summarize.cache import SummaryCache, cache_key
from memstream.summarize.citations import hold, strip_markers
from memstream.summarize.injection import instruction_signals
from memstream.summarize.model import (
    Citation,
    FailureRecordWarning,
    SummarizeRequest,
    SummarizeResult,
    Synthesis,
)
from memstream.summarize.prompt import SYSTEM, user_prompt
from memstream.summarize.providers import LlmProvider, ProviderError
from memstream.text.inert import escape

SNIPPET_CHARS = 200
NOTHING_RECALLED = "No memories match this query, so there is nothing to summarize."
NOTHING_SUPPORTED = (
    "The recalled memories support no cited answer to this query (see unsupported and warnings)."
)

Recall = Callable[[str, RecallQuery], AnswerPool]
TokenCounter = Callable[[str], int]


def check(text: str, candidates: Sequence[Candidate], model: str) -> Synthesis:
    """The model's text held to the candidates: a sentence no recalled id backs is dropped
    and reported, a bogus id removed and reported, a sentence backed only by
    instruction-like memories left out with a warning; what remains is HTML escaped."""
    known = {c.item_id for c in candidates}
    suspect = {c.item_id: s for c in candidates if (s := instruction_signals(c.text))}
    held = hold(text, known, suspect)
    return Synthesis(
        summary=held.summary or NOTHING_SUPPORTED,
        cited=held.cited,
        unsupported=held.unsupported,
        warnings=held.warnings,
        model=model,
    )


def citations(synthesis: Synthesis, candidates: Sequence[Candidate]) -> list[Citation]:
    """A citation per cited candidate, in the order first cited."""
    by_id = {c.item_id: c for c in candidates}
    return [
        Citation(
            memory_id=i,
            snippet=escape(shorten(" ".join(by_id[i].text.split()), SNIPPET_CHARS)),
            score=by_id[i].score,
            layer=by_id[i].kind,
        )
        for i in synthesis.cited
        if i in by_id
    ]


def set_aside(pool: AnswerPool) -> tuple[list[Candidate], list[FailureRecordWarning]]:
    """What the model may read: no memory an accepted invalidation names, and none that
    loses to a proven alternative by its failure record (``losing_ids``), each reported."""
    usable = [c for c in pool.candidates if c.invalidated_by is None]
    records = {r.item_id: r for r in pool.outcomes}
    losing = losing_ids(pool.operation, (c.item_id for c in usable), records)
    proven = [c.item_id for c in usable if c.item_id not in losing and _proven(records, c)]
    warnings = [_failure_warning(records[i], proven) for i in sorted(losing)]
    return [c for c in usable if c.item_id not in losing], warnings


def _proven(records: dict[str, OutcomeRecord], c: Candidate) -> bool:
    return c.item_id in records and records[c.item_id].proven


def _failure_warning(record: OutcomeRecord, instead: list[str]) -> FailureRecordWarning:
    failed = record.failed_tasks
    return FailureRecordWarning(
        memory_id=record.item_id,
        failed_tasks=failed,
        instead=instead,
        message=f"{record.item_id} was left out: {len(failed)} task(s) relying on it failed "
        f"({', '.join(failed)}); {', '.join(instead)} succeeded instead",
    )


def answer(
    synthesis: Synthesis,
    candidates: Sequence[Candidate],
    req: SummarizeRequest,
    hit: bool,
    set_aside: Sequence[FailureRecordWarning] = (),
) -> SummarizeResult:
    """The response for ``req`` (citations and markers only when asked for)."""
    cites = citations(synthesis, candidates)
    return SummarizeResult(
        summary=synthesis.summary if req.include_citations else strip_markers(synthesis.summary),
        citations=cites if req.include_citations else [],
        sources_used=len(cites),
        cache_hit=hit,
        model=synthesis.model,
        unsupported=synthesis.unsupported,
        warnings=[*synthesis.warnings, *set_aside],
    )


@dataclass
class Summarizer:
    """One provider, one cache; ``recall`` is ``CheckoutService.answer_pool`` in
    production."""

    recall: Recall
    provider: LlmProvider
    cache: SummaryCache
    count_tokens: TokenCounter
    clock: Callable[[], float] = time.perf_counter  # for call latency

    def __post_init__(self) -> None:
        metrics.init(self.provider.name, self.provider.model)

    def summarize(
        self, tenant: str, req: SummarizeRequest, scope: Scope = WHOLE
    ) -> SummarizeResult:
        """One answer from what ``scope`` holds (the request's within its key's: the
        caller's to decide). Raises ``NoProjection`` (memory unavailable) and
        ``ProviderError`` (call failed)."""
        recall = RecallQuery(query=req.query, k=req.k, scope=scope, as_of=req.as_of)
        # A summary never rests on what an invalidation names or on a memory whose failure
        # record loses it the answer to a proven alternative.
        candidates, left_out = set_aside(self.recall(tenant, recall))
        if not candidates:  # nothing to synthesize from: refuse without paying for a call
            model = self.provider.model
            empty = Synthesis(summary=NOTHING_RECALLED, cited=[], unsupported=[], model=model)
            return answer(empty, [], req, False, left_out)
        ids = [c.item_id for c in candidates]
        key = cache_key(req.query, tenant, ids, self.provider.model, req.max_tokens)
        cached = None if req.force_refresh else self.cache.get(key)
        metrics.CACHE.labels("miss" if cached is None else "hit").inc()
        synthesis = cached if cached is not None else self._synthesize(req, candidates)
        if cached is None:
            self.cache.put(key, tenant, ids, synthesis)
        result = answer(synthesis, candidates, req, cached is not None, left_out)
        metrics.RAW_TOKENS.inc(sum(self.count_tokens(c.text) for c in candidates))
        metrics.SUMMARY_TOKENS.inc(self.count_tokens(result.summary))
        return result

    def _synthesize(self, req: SummarizeRequest, candidates: Sequence[Candidate]) -> Synthesis:
        name, model = self.provider.name, self.provider.model
        prompt = user_prompt(req.query, candidates)
        started = self.clock()
        try:
            done = self.provider.complete(SYSTEM, prompt, req.max_tokens)
        except ProviderError:
            metrics.LLM_CALLS.labels(name, model, "error").inc()
            raise
        finally:
            metrics.LLM_SECONDS.labels(name, model).observe(self.clock() - started)
        metrics.LLM_CALLS.labels(name, model, "ok").inc()
        metrics.LLM_TOKENS.labels(name, model, "in").inc(done.input_tokens)
        metrics.LLM_TOKENS.labels(name, model, "out").inc(done.output_tokens)
        synthesis = check(done.text, candidates, done.model)
        metrics.UNSUPPORTED.inc(len(synthesis.unsupported))
        return synthesis
