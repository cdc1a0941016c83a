"""``bench locomo``: LoCoMo turns through the real pipeline, one checkout per question.

Only the turns are ingested (one tenant per conversation, one stream per session, the
speaker as agent, the session date as ``occurred_at``, turn id and image caption as event
metadata). Questions, answers and evidence are used for scoring only.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Literal

from memstream.checkout.retrieve.config import LEVERS
from memstream.checkout.synthesis.answerable import ANSWER_FEATURES
from memstream.client import MemoryHttpClient
from memstream.embed.registry import get_embedder
from memstream.events import EventIn
from memstream.kafka.reading import end_offsets, group_lag
from memstream.kafka.topics import (
    LATENT_INPUTS,
    LATENTS,
    LATENTS_GROUP,
    LATENTS_ROUTE_GROUP,
    LEDGER,
)
from memstream.keys import KeyStore
from memstream.projection.embedded import default_config
from memstream.projection.status import caught_up, live_version, projection_status
from memstream.projection.versions import FileProjectionRegistry, registry_path
from memstream.proof import Prover
from memstream.scope import Scope
from memstream.sdk import MemoryClient
from memstream.settings import Settings
from memstream_cli.progress import Report, Stage, stage
from memstream_cli.stack.stackfile import StackInfo

from memstream_bench.judge import Packet, cross_validate
from memstream_bench.stack import throwaway_stack
from memstream_bench.stats import calibration, paired_interval, percentile

ABSTAIN = ("ask_user", "no_memory")
_SESSION = re.compile(r"^session_(\d+)$")


def session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def tenant_of(sample: dict[str, Any]) -> str:
    """The tenant a conversation is written to: its ``sample_id``, spelt as a tenant id."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", sample["sample_id"])


def conversation_events(
    sample: dict[str, Any], user: bool = False
) -> tuple[str, list[Any], set[str]]:
    """The tenant, its turn events (with ``user``: each naming the conversation as its user),
    and the set of turn ids."""
    tenant = tenant_of(sample)
    conv = sample["conversation"]
    events: list[Any] = []
    turns: set[str] = set()
    sessions = sorted((int(m.group(1)), k) for k in conv if (m := _SESSION.match(k)) and conv[k])
    for n, key in sessions:
        start = session_time(conv[f"{key}_date_time"])
        for i, turn in enumerate(conv[key]):
            dia = str(turn["dia_id"])
            turns.add(dia)
            meta: dict[str, Any] = {"dia_id": dia, "session": n}
            if turn.get("blip_caption"):
                meta["image_caption"] = turn["blip_caption"]
            events.append(
                EventIn(
                    id=f"{tenant}.{dia}",
                    stream=f"session-{n}",
                    agent=turn["speaker"],
                    type="message.user",
                    occurred_at=start + timedelta(seconds=30 * i),
                    payload={"text": turn["text"] or "(shared an image)"},
                    metadata=meta,
                ).complete(tenant, user=tenant if user else None)
            )
    return tenant, events, turns


def packet_turns(packet: dict[str, Any]) -> list[str]:
    """Turn ids behind the packet's evidence items, in packet order, once each."""
    ids: list[str] = []
    for a in packet["answer_candidates"]:
        ids += a["support_ids"]
    ids += [f["ref"]["event_id"] for f in packet["facts"]]
    ids += [r["ref"]["event_id"] for r in packet["evidence"]]
    ids += [s["item_id"] for s in packet["snippets"]]
    return _turns(ids)


def _turns(event_ids: list[str]) -> list[str]:
    out: list[str] = []
    for eid in event_ids:
        dia = eid.split("#", 1)[0].split(".", 1)[-1]
        if dia not in out:
            out.append(dia)
    return out


def judged_packet(
    client: MemoryHttpClient, conversation: str, q: dict[str, Any], turns: set[str], k: int
) -> Packet | None:
    """The question asked as a checkout with the ``learned`` preset and ``explain``: its
    answerability features, labelled 1 when it is answerable and one of its evidence turns is
    in the packet's first ``k`` (see ``judge``); None for an answerable question whose
    evidence is not in the data."""
    category = int(q["category"])
    evidence = [e for e in q.get("evidence", []) if e in turns]
    if category != 5 and not evidence:
        return None
    packet = client.checkout(q["question"], k=k, preset="learned", explain=True)
    features = packet["meta"]["answerable"]["features"]
    held = category != 5 and bool(set(packet_turns(packet)[:k]) & set(evidence))
    row = [float(features[f]) for f in ANSWER_FEATURES]
    return Packet(conversation, category, row, int(held))


def _score(retrieved: list[str], evidence: list[str], k: int) -> tuple[float, float]:
    top = set(retrieved[:k])
    found = sum(1 for e in evidence if e in top)
    return found / len(evidence), 1.0 if found else 0.0


def run_locomo_bench(
    data: Path,
    k: int,
    out: Path | None,
    progress: Report,
    limit: int | None = None,
    user_scopes: bool = False,
) -> dict[str, Any]:
    """``user_scopes``: each conversation written as its own user, and read with a key
    scoped to that user (every read then runs inside a scope)."""
    samples = json.loads(data.read_text())
    with throwaway_stack(progress) as (stack, settings):
        assert stack.info is not None
        doc = _run(stack.info, settings, samples, k, out, progress, limit, user_scopes)
        return doc | {"user_scopes": user_scopes}


def _wait_fresh(
    settings: Settings, info: StackInfo, n: int, step: Stage, name: str | None = None
) -> None:
    """The live version (or version ``name``) has projected the ``n`` events."""
    bootstrap = info.kafka_bootstrap
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if sum(end_offsets(bootstrap, LEDGER).values()) >= n:
            status = projection_status(settings, bootstrap, info.metrics_endpoints)
            found = [v for v in status["versions"] if v["name"] == name]
            live = live_version(status) if name is None else (found[0] if found else None)
            if live is not None:
                counts = live["counts"]
                step.update(min(n, counts["graph_events"], counts["vector_points"]))
                if caught_up(live, n):
                    return
        time.sleep(0.5)
    raise TimeoutError("projections did not catch up with the ledger in 900 s")


def _wait_latents(bootstrap: str, groups: list[str]) -> None:
    """The latent builder has read the ledger and the live version has projected what it
    built: no group lags, and memory.latents has stopped growing for a few seconds."""
    deadline = time.monotonic() + 900
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = sum(end_offsets(bootstrap, LATENTS).values())
        if size != last:
            last, since = size, time.monotonic()
        lags = [sum(group_lag(bootstrap, LATENTS_ROUTE_GROUP, LEDGER).values())]
        lags += [sum(group_lag(bootstrap, LATENTS_GROUP, LATENT_INPUTS).values())]
        lags += [sum(group_lag(bootstrap, g, LATENTS).values()) for g in groups]
        if size > 0 and not any(lags) and time.monotonic() - since > 3:
            return
        time.sleep(0.5)
    raise TimeoutError("latent artifacts did not settle in 900 s")


LANES: dict[str, Literal["fused", "dense", "sparse"]] = {
    "packet": "fused",  # the packet itself, not a recall lane
    "bm25": "sparse",
    "dense": "dense",
    "recall": "fused",
}
# Levers are measured on and off in the same run, each by the one name a request switches it
# with and the packet's meta reports it under: every question is checked out again with each
# one flipped.
VARIANTS = tuple(f"packet_{lever}_{side}" for lever in LEVERS for side in ("on", "off"))
# The same ledger projected a second time with plain keys (each event found by its own words
# alone), asked after the live version: the context keys off, in the same run.
PLAIN_VERSION = "plainkeys"
PLAIN: dict[str, Literal["fused", "dense", "sparse"]] = {
    "packet_plain_keys": "fused",
    "bm25_plain_keys": "sparse",
    "dense_plain_keys": "dense",
}
# How far the evidence is within reach, scored deeper than the first k: every turn the packet
# holds, in any order (no reordering of the packet passes it), and the fused candidates of one
# `/v1/recall` for the deepest, cut at each depth (what a better ranker could bring up).
PACKET_WHOLE = "packet_whole"
REACH_DEPTHS = (40, 100)
REACH = (PACKET_WHOLE, *(f"recall_top{depth}" for depth in REACH_DEPTHS))
Conversation = tuple[dict[str, Any], str, set[str], str]  # sample, tenant, turn ids, API key


def _per_method() -> dict[str, dict[int, list[tuple[float, float]]]]:
    return {n: defaultdict(list) for n in (*LANES, *REACH, *VARIANTS, *PLAIN)}


@dataclass
class _Scores:
    """Every question's outcome, gathered across the conversations."""

    k: int
    out: IO[str] | None = None  # per-question JSONL, a line as soon as a question is asked
    per: dict[str, dict[int, list[tuple[float, float]]]] = field(default_factory=_per_method)
    rows: list[dict[str, Any]] = field(default_factory=list)
    abstain: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    # checkout ms of the packets with one lever flipped, by "<lever>_<on|off>" (as ``latencies``)
    lever_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # each lever's Recall@k on and off, question by question: (conversation, category, on, off)
    pairs: dict[str, list[tuple[str, int, float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    tokens: list[float] = field(default_factory=list)
    # The budget counts the Markdown prompt form; the JSON form is reported beside it.
    json_tokens: list[float] = field(default_factory=list)
    skipped: int = 0
    # every question's packet under the learned preset, for the calibrated answerability
    judged: list[Packet] = field(default_factory=list)

    def record(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self.out is not None:
            self.out.write(json.dumps(row) + "\n")


def _run(
    info: StackInfo,
    settings: Settings,
    samples: list[dict[str, Any]],
    k: int,
    out: Path | None,
    progress: Report,
    limit: int | None,
    user_scopes: bool,
) -> dict[str, Any]:
    keys = KeyStore(settings.resolved_keys_file())
    registry = FileProjectionRegistry(registry_path(settings.data_dir))
    plain = registry.register(PLAIN_VERSION, default_config(keys="plain"), live_if_first=False)
    t0 = time.perf_counter()
    convs, total = _ingest(info.kafka_bootstrap, keys, samples, user_scopes)
    step = stage(
        progress,
        f"emitted {total} turns of {len(samples)} conversations; waiting for projections",
        total,
    )
    _wait_fresh(settings, info, total, step)
    ingest_s = time.perf_counter() - t0
    live = registry.load()
    version = live.versions[live.live or ""]
    groups = [version.graph_group, version.vector_group, plain.graph_group, plain.vector_group]
    _wait_latents(info.kafka_bootstrap, groups)
    progress(f"latent artifacts settled {time.perf_counter() - t0:.1f} s after the first emit")
    out_fh = open(out, "w") if out is not None else None  # noqa: SIM115
    scores = _Scores(k, out_fh)
    try:
        for conv in convs:
            _ask_all(info.api_url, conv, scores, progress, limit)
    finally:
        if out_fh is not None:
            out_fh.close()
    _wait_fresh(settings, info, total, stage(progress, "plain keys", total), PLAIN_VERSION)
    registry.promote(PLAIN_VERSION)
    try:
        for conv in convs:
            _ask_plain(info.api_url, conv, scores, progress, limit)
    finally:
        registry.promote(version.name)
    return _document(scores, ingest_s, total)


def _ingest(
    bootstrap: str, keys: KeyStore, samples: list[dict[str, Any]], user_scopes: bool
) -> tuple[list[Conversation], int]:
    """Every conversation's turns emitted, each in a tenant of its own with a key (with
    ``user_scopes``, as a user of its own, and a key scoped to that user); the conversations
    and the number of turns."""
    convs: list[Conversation] = []
    total = 0
    for sample in samples:
        tenant, events, turns = conversation_events(sample, user=user_scopes)
        scope = Scope(user=[tenant]) if user_scopes else None
        key = keys.create(tenant, name="bench locomo", scope=scope)
        with MemoryClient(bootstrap, tenant, prover=Prover.for_key(key)) as client:
            client.emit_many(events)
        total += len(events)
        convs.append((sample, tenant, turns, key))
    return convs, total


def _ask_all(
    api_url: str, conv: Conversation, scores: _Scores, progress: Report, limit: int | None
) -> None:
    """One conversation's questions (the first ``limit``), one checkout each."""
    sample, tenant, turns, key = conv
    qa = sample["qa"][:limit] if limit else sample["qa"]
    step = stage(progress, f"{tenant}: {len(qa)} questions", len(qa))
    count_tokens = get_embedder().count_tokens
    with MemoryHttpClient(api_url, key) as client:
        for qi, q in enumerate(qa):
            _ask(client, scores, sample["sample_id"], qi, q, turns, count_tokens)
            step.advance()


def _ask_plain(
    api_url: str, conv: Conversation, scores: _Scores, progress: Report, limit: int | None
) -> None:
    """The conversation's questions of categories 1-4 again, on the plain-keys version."""
    sample, tenant, turns, key = conv
    qa = sample["qa"][:limit] if limit else sample["qa"]
    step = stage(progress, f"{tenant}: {len(qa)} questions, plain keys", len(qa))
    with MemoryHttpClient(api_url, key) as client:
        for q in qa:
            evidence = [e for e in q.get("evidence", []) if e in turns]
            cat = int(q["category"])
            if cat != 5 and evidence:
                for name, mode in PLAIN.items():
                    if mode == "fused":
                        got = packet_turns(client.checkout(q["question"], k=scores.k))
                    else:
                        items = client.recall(q["question"], k=scores.k, mode=mode)
                        got = _turns([i["item_id"] for i in items])
                    scores.per[name][cat].append(_score(got, evidence, scores.k))
            step.advance()


def _ask(
    client: MemoryHttpClient,
    scores: _Scores,
    sample_id: str,
    qi: int,
    q: dict[str, Any],
    turns: set[str],
    count_tokens: Callable[[str], int],
) -> None:
    """Checkout for one question; its evidence scored in the packet and in every lane."""
    cat = int(q["category"])
    started = time.perf_counter()
    packet = client.checkout(q["question"], k=scores.k)
    latency = (time.perf_counter() - started) * 1000
    scores.latencies.append(latency)
    scores.tokens.append(packet["budget"]["used"])
    scores.json_tokens.append(count_tokens(json.dumps(packet, separators=(",", ":"))))
    retrieved = packet_turns(packet)
    evidence = [e for e in q.get("evidence", []) if e in turns]
    answers = packet["answer_candidates"]
    scores.record(
        {
            "sample_id": sample_id,
            "qa_index": qi,
            "category": cat,
            "retrieved": retrieved,
            "packet_tokens": packet["budget"]["used"],
            "latency_ms": round(latency, 3),
            "answerability": packet["answerability"],
            "confidence": answers[0]["confidence"] if answers else 0.0,
            # None: no evidence to look for (category 5, or its turns are not in the data)
            "evidence_in_top": bool(set(retrieved[: scores.k]) & set(evidence))
            if evidence
            else None,
        }
    )
    if (judged := judged_packet(client, sample_id, q, turns, scores.k)) is not None:
        scores.judged.append(judged)
    if cat == 5:
        scores.abstain.append(1.0 if packet["answerability"] in ABSTAIN else 0.0)
        return
    scores.skipped += len(q.get("evidence", [])) - len(evidence)
    if evidence:
        _score_lanes(client, scores, (sample_id, cat), q, packet, retrieved, evidence)


def _score_lanes(
    client: MemoryHttpClient,
    scores: _Scores,
    asked: tuple[str, int],
    q: dict[str, Any],
    packet: dict[str, Any],
    retrieved: list[str],
    evidence: list[str],
) -> None:
    """The packet as served (``retrieved``: its turns), with each lever switched the other
    way (the others as served), and each recall lane on its own; ``asked``: the question's
    conversation and category."""
    k, per = scores.k, scores.per
    sample_id, cat = asked
    per["packet"][cat].append(_score(retrieved, evidence, k))
    for lever in LEVERS:
        served = bool(packet["meta"].get(lever))
        started = time.perf_counter()
        other = packet_turns(_flipped(client, q["question"], k, lever, not served))
        on, off = (retrieved, other) if served else (other, retrieved)
        scored_on, scored_off = _score(on, evidence, k), _score(off, evidence, k)
        per[f"packet_{lever}_on"][cat].append(scored_on)
        per[f"packet_{lever}_off"][cat].append(scored_off)
        scores.pairs[lever].append((sample_id, cat, scored_on[0], scored_off[0]))
        side = "off" if served else "on"  # the flipped packet's latency, beside the served
        scores.lever_ms[f"{lever}_{side}"].append((time.perf_counter() - started) * 1000)
    for name, mode in LANES.items():
        if name == "packet":
            continue
        items = client.recall(q["question"], k=k, mode=mode)
        got = _turns([i["item_id"] for i in items])
        per[name][cat].append(_score(got, evidence, k))
    _score_reach(client, scores, cat, q["question"], retrieved, evidence)


def _score_reach(
    client: MemoryHttpClient,
    scores: _Scores,
    cat: int,
    question: str,
    retrieved: list[str],
    evidence: list[str],
) -> None:
    """The methods of :data:`REACH`: the whole packet, and the fused candidates to each depth
    (one recall at the deepest, cut for the others)."""
    per = scores.per
    per[PACKET_WHOLE][cat].append(_score(retrieved, evidence, len(retrieved)))
    items = client.recall(question, k=max(REACH_DEPTHS), mode="fused")
    got = _turns([i["item_id"] for i in items])
    for depth in REACH_DEPTHS:
        per[f"recall_top{depth}"][cat].append(_score(got, evidence, depth))


def _flipped(client: MemoryHttpClient, question: str, k: int, lever: str, on: bool) -> Any:
    """The packet with one lever of :data:`LEVERS` switched ``on`` or off."""
    return client.checkout(question, k=k, levers={lever: on})


def _document(scores: _Scores, ingest_s: float, turns: int) -> dict[str, Any]:
    doc = _report(scores, ingest_s, turns)
    doc["packet_json_tokens_median"] = (
        statistics.median(scores.json_tokens) if scores.json_tokens else 0
    )
    by_cat: dict[str, list[float]] = defaultdict(list)
    for row in scores.rows:
        by_cat[str(row["category"])].append(0.0 if row["answerability"] in ABSTAIN else 1.0)
    doc["answered_by_category"] = {c: round(statistics.fmean(v), 3) for c, v in by_cat.items()}
    doc["answerability"] = answerability_rates(scores.rows)
    doc["reliability"] = reliability(scores.rows)
    doc["calibration_error"] = calibration_error(scores.rows)
    doc["calibrated"] = cross_validate(scores.judged)
    doc["lever_effects"] = {lever: lever_effect(rows) for lever, rows in scores.pairs.items()}
    doc["machine"] = {"cpus": os.cpu_count(), "date": datetime.now(UTC).date().isoformat()}
    return doc


MULTI_HOP = 1  # the LoCoMo category of questions whose evidence lies in several sessions
# A lever is kept on only if it lifts Recall@k by this much and its interval stays above zero.
KEEP_GAIN = 0.01


def lever_effect(rows: list[tuple[str, int, float, float]]) -> dict[str, Any]:
    """One lever's Recall@k on against off over the same questions: the mean gain with its
    paired bootstrap interval, the gain per conversation and on multi-hop questions, and
    whether it clears the bar to be kept (``KEEP_GAIN``, interval above zero)."""
    on, off = [r[2] for r in rows], [r[3] for r in rows]
    delta, low, high = paired_interval(on, off)
    by_conv: dict[str, list[float]] = defaultdict(list)
    for sample_id, _, a, b in rows:
        by_conv[sample_id].append(a - b)
    multi = [(a, b) for _, cat, a, b in rows if cat == MULTI_HOP]
    return {
        "questions": len(rows),
        "recall_on": round(statistics.fmean(on), 4) if on else 0.0,
        "recall_off": round(statistics.fmean(off), 4) if off else 0.0,
        "gain": round(delta, 4),
        "interval95": [round(low, 4), round(high, 4)],
        "gain_multi_hop": round(statistics.fmean(a - b for a, b in multi), 4) if multi else None,
        "gain_by_conversation": {s: round(statistics.fmean(v), 4) for s, v in by_conv.items()},
        "keep": delta >= KEEP_GAIN and low > 0,
    }


def answerability_rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How far ``answerability`` tells the truth: on answerable questions (categories 1-4)
    whose evidence is in the packet's first k, the share it still abstains on
    (``ask_user``/``no_memory``); on unanswerable ones (category 5), the share it abstains
    on; and of all abstaining packets, the share that were right to."""
    held = [r for r in rows if r["category"] != 5 and r.get("evidence_in_top")]
    unanswerable = [r for r in rows if r["category"] == 5]
    asked = [r for r in rows if r["answerability"] in ABSTAIN]
    wrongly = sum(1 for r in held if r["answerability"] in ABSTAIN)
    right = sum(1 for r in unanswerable if r["answerability"] in ABSTAIN)
    return {
        "abstained_with_evidence": round(wrongly / len(held), 4) if held else None,
        "answerable_with_evidence": len(held),
        "abstained_unanswerable": round(right / len(unanswerable), 4) if unanswerable else None,
        "unanswerable": len(unanswerable),
        "abstention_precision": round(right / len(asked), 4) if asked else None,
        "abstained": len(asked),
    }


RELIABILITY_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)


def reliability(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answered packets of categories 1-4 with evidence in the split, binned by their first
    answer's confidence: per bin, how many and the share whose first k hold evidence (a
    calibrated confidence rises with it)."""
    answered = [
        r for r in rows if r["category"] != 5 and r["answerability"] not in ABSTAIN
        and r.get("evidence_in_top") is not None
    ]  # fmt: skip
    out = []
    for lo, hi in itertools.pairwise(RELIABILITY_BINS):
        inside = [
            1.0 if r["evidence_in_top"] else 0.0 for r in answered if lo <= r["confidence"] < hi
        ]
        out.append(
            {"from": lo, "to": min(hi, 1.0), "packets": len(inside),
             "evidence_in_top": round(statistics.fmean(inside), 4) if inside else None}
        )  # fmt: skip
    return out


def calibration_error(rows: list[dict[str, Any]]) -> float | None:
    """The served confidence read as a probability that memory answers: the first answer's
    confidence (0 for a packet that abstains or has no answer) against 1 for an answerable
    question whose evidence is in the first k, 0 otherwise (category 5, or evidence missed);
    the expected calibration error over ten bins (``stats.calibration``)."""
    scored = [r for r in rows if r["category"] == 5 or r.get("evidence_in_top") is not None]
    if not scored:
        return None
    probs = [0.0 if r["answerability"] in ABSTAIN else r["confidence"] for r in scored]
    labels = [int(r["category"] != 5 and bool(r["evidence_in_top"])) for r in scored]
    return calibration(probs, labels)[0]


def _report(scores: _Scores, ingest_s: float, turns: int) -> dict[str, Any]:
    methods = {name: _method(cats) for name, cats in scores.per.items()}
    base = methods.get("bm25", {}).get("recall") or 0.0
    tokens, latencies = scores.tokens, scores.latencies
    return {
        "k": scores.k,
        "questions": len(scores.rows),
        "turns": turns,
        "skipped_evidence_ids": scores.skipped,
        "methods": methods,
        "packet_vs_bm25_recall": round(methods["packet"]["recall"] / base, 3) if base else None,
        "category5_abstention": (
            round(statistics.fmean(scores.abstain), 4) if scores.abstain else None
        ),
        "packet_tokens_median": statistics.median(tokens) if tokens else 0,
        "packet_tokens_p95": percentile(tokens, 0.95),
        "checkout_ms_p50": round(percentile(latencies, 0.5), 3),
        "checkout_ms_p95": round(percentile(latencies, 0.95), 3),
        "ingest_seconds": round(ingest_s, 3),
        "lever_ms": {
            name: {"p50": round(percentile(v, 0.5), 3), "p95": round(percentile(v, 0.95), 3)}
            for name, v in scores.lever_ms.items()
            if v
        },
    }


def _method(cats: dict[int, list[tuple[float, float]]]) -> dict[str, Any]:
    """Recall and hit over all questions scored for a method, and per category."""
    allv = [v for c in cats.values() for v in c]
    return {
        "recall": round(statistics.fmean(r for r, _ in allv), 4) if allv else 0.0,
        "hit": round(statistics.fmean(h for _, h in allv), 4) if allv else 0.0,
        "questions": len(allv),
        "by_category": {
            str(c): {
                "recall": round(statistics.fmean(r for r, _ in v), 4),
                "hit": round(statistics.fmean(h for _, h in v), 4),
                "questions": len(v),
            }
            for c, v in sorted(cats.items())
        },
    }
