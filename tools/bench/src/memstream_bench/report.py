"""Result tables of docs/benchmarks.md, from the JSON the benches wrote (``make bench-results``).

Each table sits between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` in the page;
``update_readme`` replaces what is between the markers and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstream.checkout.retrieve.config import CHECKOUT, LEVERS

from memstream_bench.keys import keys_table

Doc = dict[str, Any]


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _machine(doc: Doc) -> str:
    m = doc.get("machine") or {}
    cpus = m.get("cpus") or m.get("cpu_count") or "?"
    return f"_Measured {m.get('date', '?')} on a {cpus}-core machine._"


def _machines(docs: list[Doc], label: Callable[[Doc], str]) -> str:
    """The machine line of a table whose rows may come from runs on different days: one
    date, or each date with the rows measured on it."""
    days: dict[str, list[str]] = {}
    for d in docs:
        days.setdefault(str((d.get("machine") or {}).get("date", "?")), []).append(label(d))
    if len(days) <= 1:
        return _machine(docs[0])
    cpus = {str((d.get("machine") or {}).get("cpus", "?")) for d in docs}
    when = "; ".join(f"{day} ({', '.join(rows)})" for day, rows in days.items())
    return f"_Measured {when} on a {'/'.join(sorted(cpus))}-core machine._"


def ingest_table(docs: list[Doc]) -> str:
    rows = [
        "| stack | events | raw broker produce/s | SDK → ledger/s | vs raw "
        "| HTTP → ledger/s | vs raw |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for d in docs:
        http = d.get("http") or {}
        rows.append(
            f"| {d.get('stack', 'full')} | {_n(d['events'])} | "
            f"{_n(d['raw_broker_produce_events_per_s'])} | {_n(d['sdk']['ledger_events_per_s'])} | "
            f"{d['sdk_ledger_vs_raw']:.2f} | {_n(http.get('ledger_events_per_s', 0))} | "
            f"{d.get('http_ledger_vs_raw', 0):.2f} |"
        )
    return "\n".join([*rows, "", _machine(docs[0])]) if docs else ""


def embed_table(doc: Doc) -> str:
    rows = [
        "| embedder | dim | docs | docs/s |",
        "|---|---:|---:|---:|",
        f"| {doc['embedder']} | {doc['dim']} | {_n(doc['docs'])} | {_n(doc['docs_per_s'])} |",
    ]
    lanes = doc.get("locomo")
    if lanes:
        rows += [
            "",
            f"LoCoMo turns ranked per conversation (k = {lanes['k']}, "
            f'{lanes["questions"]} questions of categories 1–4, turn = "{lanes["turn_text"]}"):',
            "",
            "| lane | Recall@10 | Hit@10 |",
            "|---|---:|---:|",
        ]
        names = {"bm25": "BM25", "dense": f"dense ({doc['embedder']})", "rrf": "RRF of both"}
        for key, label in names.items():
            m = lanes[key]
            rows.append(f"| {label} | {m['recall']:.3f} | {m['hit']:.3f} |")
    return "\n".join([*rows, "", _machine(doc)])


def locomo_table(doc: Doc) -> str:
    methods: dict[str, Doc] = doc["methods"]
    base = methods.get("bm25", {}).get("recall") or 1.0
    rows = [
        "| method | Recall@10 | Hit@10 | cat 1 | cat 2 | cat 3 | cat 4 | recall vs BM25 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"packet": "checkout packet", "bm25": "BM25 only", "dense": "dense only"}
    names["recall"] = "`/v1/recall` top-k"
    names["packet_whole"] = "reach: every turn of the packet, any order"
    names |= {f"recall_top{n}": f"reach: `/v1/recall` top {n}" for n in (40, 100)}
    # Each lever under its one name (the request field's words).
    levers = {lever: lever.replace("_", " ") for lever in LEVERS}
    for lever, label in levers.items():
        names[f"packet_{lever}_on"] = f"packet, {label} on"
        names[f"packet_{lever}_off"] = f"packet, {label} off"
    names["packet_plain_keys"] = "packet, plain keys (context keys off)"
    names["bm25_plain_keys"] = "BM25 only, plain keys"
    names["dense_plain_keys"] = "dense only, plain keys"
    for name, m in methods.items():
        cats = [m["by_category"].get(str(c), {}) for c in (1, 2, 3, 4)]
        shown = " | ".join(f"{c.get('recall', 0):.3f} / {c.get('hit', 0):.3f}" for c in cats)
        rows.append(
            f"| {names.get(name, name)} | {m['recall']:.3f} | {m['hit']:.3f} | {shown} | "
            f"{m['recall'] / base:.2f} |"
        )
    lines = [
        *rows,
        "",
        f"Questions: {doc['questions']} ({doc['methods']['packet']['questions']} of categories "
        f"1–4); category cells are Recall / Hit. Category 5 abstention: "
        f"{doc['category5_abstention']}. Packet tokens (Markdown form, the budget's measure): "
        f"median {doc['packet_tokens_median']}, p95 {doc['packet_tokens_p95']}; the same packets "
        f"as JSON: median {doc.get('packet_json_tokens_median', '?')}. Checkout p50 "
        f"{doc['checkout_ms_p50']} ms, p95 {doc['checkout_ms_p95']} ms.",
    ]
    if "packet_whole" in methods:
        lines.append(
            "Rows marked reach are scored deeper than the first ten: every turn the packet "
            "holds, in any order (no reordering of the packet passes it), and the first 40 and "
            "100 turns of one `/v1/recall` for 100 items (what a better ranker over those "
            "candidates could bring up)."
        )
    if levers_ms := doc.get("lever_ms"):
        shown = ", ".join(
            f"{levers.get(name.rsplit('_', 1)[0], name)} {name.rsplit('_', 1)[-1]} "
            f"{v['p50']} / {v['p95']} ms"
            for name, v in levers_ms.items()
        )
        lines.append(f"Checkout p50 / p95 with one lever switched the other way: {shown}.")
    lines += lever_effect_lines(doc, levers)
    answered = doc.get("answered_by_category")
    if answered:
        shown = ", ".join(f"cat {c}: {v:.2f}" for c, v in sorted(answered.items()))
        lines.append(f"Share answered from memory (not abstained), by category: {shown}.")
    return "\n".join([*lines, *answerability_lines(doc), "", _machine(doc)])


def lever_effect_lines(doc: Doc, labels: dict[str, str]) -> list[str]:
    """Each lever's gain in Recall@10, on against off over the same questions, with its
    paired bootstrap interval and the gain per conversation."""
    effects: dict[str, Doc] = doc.get("lever_effects") or {}
    if not effects:
        return []
    rows = [
        "",
        "| lever | Recall@10 on / off | gain | 95% interval | multi-hop gain | per conversation "
        "| clears the bar | on by default |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for lever, e in effects.items():
        low, high = e["interval95"]
        convs = ", ".join(f"{c} {g:+.3f}" for c, g in sorted(e["gain_by_conversation"].items()))
        multi = "–" if e["gain_multi_hop"] is None else f"{e['gain_multi_hop']:+.3f}"
        rows.append(
            f"| {labels.get(lever, lever)} | {e['recall_on']:.3f} / {e['recall_off']:.3f} | "
            f"{e['gain']:+.3f} | [{low:+.3f}, {high:+.3f}] | {multi} | {convs} | "
            f"{_yes(e['keep'])} | {_yes(getattr(CHECKOUT, lever, False))} |"
        )
    rows.append("")
    rows.append(
        "The bar: a gain of at least +0.01 whose paired bootstrap interval (the questions "
        "resampled, 2,000 draws) stays above zero."
    )
    return rows


def _yes(on: bool) -> str:
    return "yes" if on else "no"


def answerability_lines(doc: Doc) -> list[str]:
    """The two answerability rates and the reliability table, when the run has them."""
    rates, bins = doc.get("answerability"), doc.get("reliability")
    if not rates or not bins:
        return []
    lines = [
        "",
        f"Answerability: `ask_user`/`no_memory` on {rates['abstained_with_evidence']:.1%} of "
        f"the {rates['answerable_with_evidence']} answerable questions (categories 1–4) whose "
        f"evidence is in the packet's first ten; abstained on "
        f"{rates['abstained_unanswerable']:.1%} of the {rates['unanswerable']} unanswerable "
        f"ones (category 5); of the {rates['abstained']} abstaining packets, "
        f"{rates['abstention_precision']:.1%} were right to.",
        "",
        "| first answer's confidence | packets answered | evidence in the first ten |",
        "|---|---:|---:|",
    ]
    for b in bins:
        share = "–" if b["evidence_in_top"] is None else f"{b['evidence_in_top']:.3f}"
        lines.append(f"| {b['from']:.1f}–{b['to']:.1f} | {b['packets']} | {share} |")
    if (ece := doc.get("calibration_error")) is not None:
        lines += [
            "",
            f"Expected calibration error of the served confidence {ece:.4f}: the first "
            "answer's confidence (0 when the packet abstains) read as the probability that the "
            "first ten hold the evidence (0 for unanswerable questions), ten bins. The "
            "cross-validated figure of the calibrated answerability follows.",
        ]
    if (judged := doc.get("calibrated")) is not None:
        lines += [
            "",
            "The calibrated answerability (`learned` preset), cross-validated by conversation "
            "on these packets:",
            "",
            *calibration_lines(judged),
        ]
    return lines


def _plain(d: Doc) -> str:
    """The same run's checkout p95 without the levers, and what the levers add to it."""
    overhead = d.get("checkout_lever_p95_overhead")
    if overhead is None:
        return "–"
    span = d.get("checkout_lever_p95_overhead_interval95")
    within = f", 95% interval {span[0]:+.1%} to {span[1]:+.1%}" if span else ""
    return f"{d['checkout_plain_p95_ms']} ms ({overhead:+.1%}{within})"


def _scoped(d: Doc) -> str:
    """The same run's checkout p95 inside one user's scope, and what the scope adds to it."""
    overhead = d.get("checkout_scope_p95_overhead")
    if overhead is None:
        return "–"
    span = d.get("checkout_scope_p95_overhead_interval95")
    within = f", 95% interval {span[0]:+.1%} to {span[1]:+.1%}" if span else ""
    return f"{d['checkout_scoped_p95_ms']} ms ({overhead:+.1%}{within})"


def load_table(docs: list[Doc]) -> str:
    rows = [
        "| events | vector index | broker produce/s | ingest/s (emit → visible) | freshness "
        "p50 / p95, steady | steady load/s | freshness p95, burst | checkout p50 / p95 | "
        "checkout p95, fused lanes alone (the levers add) | checkout p95 inside one user's "
        "scope (the scope adds) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in sorted(docs, key=_load_order):
        index = (
            f"HNSW (built in {d.get('index_build_wait_s', 0):g} s)"
            if d.get("vector_optimize")
            else "exhaustive"
        )
        rows.append(
            f"| {_n(d['events'])} | {index} | {_n(d['broker_produce_events_per_s'])} | "
            f"{_n(d['ingest_events_per_s'])} | {d['freshness_p50_ms']:,.0f} / "
            f"{d['freshness_p95_ms']:,.0f} ms ({d['freshness_probes']} probes) | "
            f"{_n(d.get('steady_events_per_s', 0))} | "
            f"{_burst(d)} | {d['checkout_p50_ms']} / {d['checkout_p95_ms']} ms | "
            f"{_plain(d)} | {_scoped(d)} |"
        )
    rss = [
        f"{_n(d['events'])}{' (HNSW)' if d.get('vector_optimize') else ''}: "
        + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(d["peak_rss_mb"].items()))
        for d in sorted(docs, key=_load_order)
    ]
    parts = [
        f"{_n(d['events'])}{' (HNSW)' if d.get('vector_optimize') else ''}: "
        + ", ".join(f"{k} {v:g}" for k, v in d["checkout_median_ms_by_part"].items())
        for d in sorted(docs, key=_load_order)
        if d.get("checkout_median_ms_by_part")
    ]
    tail = ["", "Peak RSS (MB) — " + "; ".join(rss)]
    learned = [
        f"{_n(d['events'])}: {d['checkout_learned_p95_ms']} ms "
        f"({d['checkout_learned_p95_overhead']:+.1%} against the served levers, 95% interval "
        f"{d['checkout_learned_p95_overhead_interval95'][0]:+.1%} to "
        f"{d['checkout_learned_p95_overhead_interval95'][1]:+.1%})"
        for d in sorted(docs, key=_load_order)
        if d.get("checkout_learned_p95_ms") is not None
    ]
    if learned:
        tail += [
            "",
            "Checkout p95 with the learned ranker (preset `learned`) — " + "; ".join(learned),
        ]
    if parts:
        tail += ["", "Median ms per checkout phase and lane — " + "; ".join(parts)]
    ordered = sorted(docs, key=_load_order)
    return "\n".join([*rows, *tail, "", _machines(ordered, _load_label)])


def train_table(doc: Doc) -> str:
    """``bench train``: each held-out conversation's orders, then all folds pooled."""
    from memstream_bench.train import table_rows

    rows = [
        "| held out | order | Recall@10 | Hit@10 | multi-hop Recall@10 | questions |",
        "|---|---|---:|---:|---:|---:|",
    ]
    rows += ["| " + " | ".join(r) + " |" for r in table_rows(doc)]
    vs = doc["learned_vs_rerank_recall"]
    low, high = vs["interval95"]
    rows += [
        "",
        f"Learned minus hand-set Recall@10 (pooled, paired by question): {vs['gain']:+.4f}, "
        f"95% interval [{low:+.4f}, {high:+.4f}]. Features: {len(doc['features'])}; "
        f"{doc['rounds']} boosting rounds.",
    ]
    if only := doc.get("trained_only"):
        rows += ["", f"The ranker also trained on (never measured): {', '.join(only)}."]
    if (judged := doc.get("answerability")) is not None:
        rows += ["", *calibration_lines(judged)]
    return "\n".join([*rows, "", _machine(doc)])


def _rate(r: Doc, key: str) -> str:
    return "-" if r[key] is None else f"{r[key]:.4f}"


def calibration_lines(a: Doc) -> list[str]:
    """The calibrated answerability's folds pooled: abstention beside the rules', then the
    reliability table and its expected calibration error."""
    lines = [
        "| answerability | abstains on unanswerable | abstains with evidence in the first ten |",
        "|---|---:|---:|",
        f"| rules (hand-set) | {_rate(a['rules'], 'abstained_unanswerable')} | "
        f"{_rate(a['rules'], 'abstained_with_evidence')} |",
    ]
    for t, r in a["thresholds"].items():
        chosen = " (served)" if float(t) == a["threshold"] else ""
        lines.append(
            f"| learned, answers at p ≥ {t}{chosen} | {_rate(r, 'abstained_unanswerable')} | "
            f"{_rate(r, 'abstained_with_evidence')} |"
        )
    lines += [
        "",
        "| probability | packets | mean probability | answered by memory |",
        "|---|---:|---:|---:|",
    ]
    for b in a["reliability"]:
        if b["packets"]:
            lines.append(
                f"| {b['from']:.1f}–{b['to']:.1f} | {b['packets']} | {b['mean_p']:.3f} | "
                f"{b['answered']:.3f} |"
            )
    r = a["learned"]
    lines += [
        "",
        f"Expected calibration error {a['ece']:.4f} over {a['packets']} packets "
        f"({r['unanswerable']} unanswerable, {r['answerable_with_evidence']} answerable with "
        f"their evidence in the first ten; {a['answered_share']:.1%} answered by memory).",
    ]
    return lines


def _burst(d: Doc) -> str:
    """The burst p95, naming the probes recall never found (each counted as the timeout, so
    the figure is then a lower bound); older results did not count them."""
    cell = f"{d.get('freshness_burst_p95_ms', 0):,.0f} ms"
    if "freshness_burst_missed" not in d:
        return cell
    missed, probes = d["freshness_burst_missed"], d["freshness_burst_probes"]
    if not missed:
        return f"{cell} ({probes} probes, none missed)"
    timeout = d.get("freshness_probe_timeout_s", 30)
    return f"≥ {cell} ({missed} of {probes} probes missed, each counted as {timeout:g} s)"


def chaos_table(doc: Doc) -> str:
    rows = [
        "| kill -9 of | accepted (2xx) | in the ledger | lost | duplicated | refused "
        "| other errors | longest gap | longest wait | recovered in |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in doc["faults"]:
        took = "–" if f["recover_s"] is None else f"{f['recover_s']:g} s"
        rows.append(
            f"| {f['fault']} | {_n(f['accepted'])} | {_n(f['ledgered'])} | {f['lost']} | "
            f"{f['duplicated']} | {f['refused']} | {f['transport_errors'] + f['non_202']} | "
            f"{f['longest_gap_s']:g} s | {f['longest_wait_s']:g} s | {took} |"
        )
    converged = (
        f"converged {doc['converge_s']:g} s after the load stopped"
        if doc["projections_converged"]
        else "did not converge"
    )
    tail = (
        f"{_n(doc['accepted'])} events accepted in all, {doc['lost']} lost, "
        f"{doc['duplicated']} duplicated; {doc['refused_requests']} connections refused and "
        f"{doc['transport_errors']} other transport errors (each batch was sent again until "
        f"accepted); the chain {'verifies' if doc['chain_verifies'] else 'is BROKEN'}; "
        f"graph and vector counts {converged}."
    )
    return "\n".join([*rows, "", tail, "", _machine(doc)])


def learn_table(doc: Doc) -> str:
    rows = [
        "| round | right answer on top, learning off | learning on |",
        "|---|---:|---:|",
    ]
    for r in doc["per_round"]:
        rows.append(f"| {r['round']} | {r['learning_off']:.2f} | {r['learning_on']:.2f} |")
    adv = doc["adversarial_praise"]
    for when in ("before", "after"):
        off, on = adv[when]["off"], adv[when]["on"]
        rows.append(
            f"| {when} {_n(adv['events_per_arm'])} praise events | {off['right_on_top']:.2f} | "
            f"{on['right_on_top']:.2f} |"
        )
    b, a = adv["before"], adv["after"]
    tail = (
        f"{doc['families']} task families, {min(doc['memories_per_family'])}–"
        f"{max(doc['memories_per_family'])} competing memories each (chance "
        f"{doc['chance']:.2f}), seed {doc['seed']}; {doc['outcomes_reported']} outcomes reported. "
        f"Praise (+1, {_n(adv['events_per_arm'])} events on {adv['targets']} memories that answer "
        f"no question) put a praised memory on top in {a['off']['praised_on_top']:.2f} (off) and "
        f"{a['on']['praised_on_top']:.2f} (on) of the checkouts (before: "
        f"{b['off']['praised_on_top']:.2f}, {b['on']['praised_on_top']:.2f}); praised memories "
        f"shown per packet went from {b['off']['praised_shown_per_packet']:g} to "
        f"{a['off']['praised_shown_per_packet']:g} (off) and from "
        f"{b['on']['praised_shown_per_packet']:g} to {a['on']['praised_shown_per_packet']:g} (on)."
    )
    return "\n".join([*rows, "", tail, *_howto_rows(doc)])


def _howto_rows(doc: Doc) -> list[str]:
    """The how-to case (a misleading closer match), when the run had it."""
    howto = doc.get("howto") or {}
    if not howto.get("per_round"):
        return []
    rows = [
        "",
        "| how-to round | right answer first (`answer_candidates[0]`), learning off | "
        "learning on |",
        "|---|---:|---:|",
    ]
    for r in howto["per_round"]:
        rows.append(f"| {r['round']} | {r['learning_off']:.2f} | {r['learning_on']:.2f} |")
    tail = (
        f"{howto['families']} how-to questions, two memories each; the misleading one repeats "
        "the question's words (the closer lexical match) and is the newer. A task follows the "
        "first answer; after a failure a second task follows the other memory (learning on "
        "only; the outcomes reported above include theirs)."
    )
    return [*rows, "", tail]


def neighbours_table(doc: Doc) -> str:
    rows = [
        "| fair share | B checkout p50 / p95, quiet | B checkout p50 / p95, A flooding | "
        "p95 ratio | B `/healthz` p95, quiet / A flooding | A: 2xx / 429 / 5xx | B: 429 / 5xx |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["runs"]:
        q, f, a = r["quiet"], r["flood"], r["flooder"]["statuses"]
        b = {k: q["statuses"].get(k, 0) + f["statuses"].get(k, 0) for k in ("429", "5xx")}
        rows.append(
            f"| {'on' if r['limits'] else 'off (baseline)'} | "
            f"{q['checkout_p50_ms']:g} / {q['checkout_p95_ms']:g} ms | "
            f"{f['checkout_p50_ms']:g} / {f['checkout_p95_ms']:g} ms ({f['checkouts']}) | "
            f"{r['checkout_p95_ratio']:.2f} | "
            f"{q['healthz_p95_ms']:g} / {f['healthz_p95_ms']:g} ms | "
            f"{_n(a.get('2xx', 0))} / {_n(a.get('429', 0))} / {_n(a.get('5xx', 0))} "
            f"({r['flooder']['per_s']:g}/s) | {b['429']} / {b['5xx']} |"
        )
    lim = doc["limits"]
    shape = ", ".join(f"{k} {v}" for k, v in doc["flood_checkout"].items())
    tail = (
        f"{_n(doc['events'])} events of two tenants; A floods `/v1/checkout` ({shape}) over "
        f"{doc['flood_connections']} connections from its own process, in {doc['cycles']} "
        f"windows of {doc['window_s']:g} s between as many quiet ones; B starts a checkout and "
        f"a `/healthz` every {doc['neighbour_period_s']:g} s (B's checkouts under the flood in "
        f"brackets). Limits: {lim['read_tenant_concurrency']} "
        f"reads in flight per tenant, a budget of {lim['read_tenant_share']:g} CPU s/s "
        f"(bursts of {lim['read_tenant_burst_s']:g} s), {lim['read_total_concurrency']} in "
        f"flight in all ({lim['read_reserved_slots']} reserved)."
    )
    return "\n".join([*rows, "", tail, "", _machine(doc)])


def read_after_table(doc: Doc) -> str:
    a, b = doc["after"], doc["baseline"]
    rows = [
        "| checkout | cited in the first answer | wait median / max | stale | "
        "missed, no warning | posted during the bulk's backlog |",
        "|---|---:|---:|---:|---:|---:|",
        f"| `after` = the write's position | {a['cited_first_answer']}/{a['probes']} | "
        f"{a['waited_ms_median']:,} / {a['waited_ms_max']:,} ms | {a['stale']} | "
        f"{a.get('missed_silently', '?')} | {a['during_backlog']}/{a['probes']} |",
        f"| without `after` (baseline) | {b['cited_first_answer']}/{b['probes']} | – | – | "
        f"{b.get('missed_silently', '?')} | {b['during_backlog']}/{b['probes']} |",
    ]
    tail = (
        f"Tenant A: {_n(doc['bulk_events'])} events through the SDK, emitted at "
        f"{_n(doc['bulk_emit_events_per_s'])}/s, all visible to checkout after "
        f"{doc['bulk_visible_s']:g} s ({_n(doc['bulk_ingest_events_per_s'])}/s). Tenant B: "
        f"each marker posted over HTTP, then checked out at once; read-after bound "
        f"{doc['read_after_max_wait_s']:g} s (`MEMSTREAM_READ_AFTER_MAX_WAIT_S`)."
    )
    machine = _machine(doc)
    if (load := (doc.get("machine") or {}).get("load_1m_at_start")) is not None:
        machine = f"{machine[:-2]}, 1-minute load average {load:g} at the start._"
    return "\n".join([*rows, "", tail, "", machine])


def scale_table(doc: Doc) -> str:
    """One column per replica count of one ``bench scale`` run; CPU per worker below."""
    rows = doc["rows"]
    head = "| | " + " | ".join(f"{r['replicas']} replica(s) per group" for r in rows) + " |"
    lines = [head, "|---|" + "---:|" * len(rows)]

    def line(label: str, cell: Callable[[Doc], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in rows) + " |")

    line("ingest/s (emit → visible)", lambda r: _n(r["ingest_events_per_s"]))
    line("freshness p95, burst", lambda r: f"{r['freshness_p95_ms']:,.0f} ms")
    line("pause when a sequencer joins", lambda r: f"{r['join_pause_s']:g} s")
    line("pause when one is killed (kill → every partition again)",
         lambda r: f"{r['kill_pause_s']:g} s")  # fmt: skip
    line("events lost / applied twice",
         lambda r: f"{r['events_lost']} / {r['events_applied_twice']}")  # fmt: skip
    workers = sorted({w for r in rows for w in r["cpu_s_per_1000_events_by_worker"]})
    for w in workers:
        line(f"CPU s per 1,000 events: {w}",
             lambda r, w=w: f"{r['cpu_s_per_1000_events_by_worker'].get(w, 0):.3f}")  # type: ignore[misc]  # fmt: skip
    line("CPU s per 1,000 events: all",
         lambda r: f"{sum(r['cpu_s_per_1000_events_by_worker'].values()):.3f}")  # fmt: skip
    events = f"{_n(doc['events'])} events, {doc['tenants']} tenants; load {doc['steady_rate']}/s"
    return "\n".join([*lines, "", f"_{events}._ {_machine(doc)}"])


def _load_label(d: Doc) -> str:
    return f"{_n(d['events'])}{' HNSW' if d.get('vector_optimize') else ''}"


def _load_order(d: Doc) -> tuple[int, bool]:
    return int(d["events"]), bool(d.get("vector_optimize"))


def marked(text: str) -> set[str]:
    """The names of the ``<!-- bench:NAME -->`` blocks ``text`` holds."""
    return set(re.findall(r"<!-- bench:([a-z0-9-]+) -->", text))


def update_readme(text: str, blocks: dict[str, str]) -> str:
    """Replace each ``<!-- bench:NAME -->`` … ``<!-- /bench:NAME -->`` block's body."""
    for name, body in blocks.items():
        pattern = re.compile(rf"(<!-- bench:{name} -->\n).*?(<!-- /bench:{name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"the page has no <!-- bench:{name} --> block")
        text = pattern.sub(lambda m: f"{m.group(1)}{body}\n{m.group(2)}", text)  # noqa: B023
    return text


def blocks_from(results: Path) -> dict[str, str]:
    """The tables whose JSON is present in ``results``."""

    def load(name: str) -> Doc | None:
        p = results / name
        return json.loads(p.read_text()) if p.is_file() else None

    out: dict[str, str] = {}
    ingest = [d for d in (load("ingest-spine.json"), load("ingest-full.json")) if d]
    if ingest:
        out["ingest"] = ingest_table(ingest)
    if (embed := load("embed.json")) is not None:
        out["embed"] = embed_table(embed)
        if "locomo_keys" in embed:
            out["keys"] = "\n".join([keys_table(embed["locomo_keys"]), "", _machine(embed)])
    if (locomo := load("locomo.json")) is not None:
        out["locomo"] = locomo_table(locomo)
    if (train := load("train.json")) is not None:
        out["train"] = train_table(train)
    if (chaos := load("chaos.json")) is not None:
        out["chaos"] = chaos_table(chaos)
    if (learn := load("learn.json")) is not None:
        out["learn"] = learn_table(learn)
    if (neighbours := load("neighbours.json")) is not None:
        out["neighbours"] = neighbours_table(neighbours)
    if (read_after := load("read-after.json")) is not None:
        out["read-after"] = read_after_table(read_after)
    if (scale := load("scale.json")) is not None:
        out["scale"] = scale_table(scale)
    loads = [json.loads(p.read_text()) for p in sorted(results.glob("load-*.json"))]
    if loads:
        out["load"] = load_table(loads)
    return out
