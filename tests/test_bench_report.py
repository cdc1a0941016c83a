"""README result tables are rendered from bench JSON and replace only their own block."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from memstream_bench.chaos import Answer, Failure, fault_rows, longest_gap
from memstream_bench.load import PROBE_TIMEOUT_S, ProbeLog
from memstream_bench.locomo import answerability_rates, lever_effect, reliability
from memstream_bench.report import (
    answerability_lines,
    blocks_from,
    chaos_table,
    learn_table,
    lever_effect_lines,
    load_table,
    locomo_table,
    update_readme,
)
from memstream_bench.stats import lever_overhead, overhead_interval, paired_interval

MACHINE = {"cpus": 2, "date": "2031-01-02"}


def load_doc(events: int, p50: float) -> dict[str, object]:
    return {
        "events": events,
        "broker_produce_events_per_s": 100_000,
        "ingest_events_per_s": 2_500,
        "freshness_p50_ms": 300.0,
        "freshness_p95_ms": 700.0,
        "freshness_probes": 20,
        "steady_events_per_s": 500,
        "freshness_burst_p95_ms": 4_000.0,
        "checkout_p50_ms": p50,
        "checkout_p95_ms": p50 * 2,
        "peak_rss_mb": {"api": 512.0, "sequencer": 90.0},
        "machine": MACHINE,
    }


def test_load_rows_are_ordered_by_size_and_carry_the_figures() -> None:
    table = load_table([load_doc(100_000, 30.0), load_doc(10_000, 12.5)])
    rows = [r for r in table.splitlines() if r.startswith("| 1")]
    assert rows[0].startswith("| 10,000 |") and rows[1].startswith("| 100,000 |")
    assert "12.5 / 25.0 ms" in rows[0] and "300 / 700 ms (20 probes)" in rows[0]
    assert "_Measured 2031-01-02 on a 2-core machine._" in table


def test_the_levers_overhead_compares_the_same_runs_p95_without_them() -> None:
    plain = [10.0] * 19 + [20.0]
    assert lever_overhead([11.0] * 19 + [22.0], plain) == 0.1
    assert lever_overhead([9.0] * 20, plain) == -0.55  # faster than plain at p95: negative
    assert lever_overhead([], plain) is None and lever_overhead([5.0], []) is None


def test_the_overheads_interval_brackets_it_and_widens_with_a_noisy_tail() -> None:
    plain = [10.0 + (i % 7) for i in range(200)]
    steady = [p * 1.05 for p in plain]  # every checkout 5% slower: no spread at all
    assert overhead_interval(steady, plain) == pytest.approx((0.05, 0.05), abs=1e-3)
    noisy = [p * 1.05 + (40.0 if i % 23 == 0 else 0.0) for i, p in enumerate(plain)]
    low, high = overhead_interval(noisy, plain) or (0.0, 0.0)
    point = lever_overhead(noisy, plain) or 0.0
    assert low <= point <= high and high - low > 0.5
    assert overhead_interval(noisy, plain) == (low, high)  # a fixed seed: repeatable
    with pytest.raises(ValueError, match="not paired"):
        overhead_interval([1.0], [1.0, 2.0])
    assert overhead_interval([], []) is None


def test_load_row_carries_the_plain_and_scoped_p95_and_what_each_adds() -> None:
    measured = load_doc(100_000, 30.0) | {
        "checkout_plain_p95_ms": 50.0,
        "checkout_lever_p95_overhead": 0.2,
        "checkout_lever_p95_overhead_interval95": [0.05, 0.31],
        "checkout_scoped_p95_ms": 61.2,
        "checkout_scope_p95_overhead": 0.02,
        "checkout_scope_p95_overhead_interval95": [-0.04, 0.07],
    }
    older = load_doc(10_000, 12.5)  # written before the plain checkouts were measured
    rows = [r for r in load_table([measured, older]).splitlines() if r.startswith("| 1")]
    assert rows[1].endswith(
        "| 30.0 / 60.0 ms | 50.0 ms (+20.0%, 95% interval +5.0% to +31.0%) "
        "| 61.2 ms (+2.0%, 95% interval -4.0% to +7.0%) |"
    )
    assert rows[0].endswith("| 12.5 / 25.0 ms | – | – |")


def test_burst_cell_names_missed_probes_and_marks_a_lower_bound() -> None:
    missed = load_doc(100_000, 30.0) | {
        "freshness_burst_probes": 40,
        "freshness_burst_missed": 3,
        "freshness_probe_timeout_s": 30.0,
        "freshness_burst_p95_ms": 30_000.0,
    }
    clean = load_doc(10_000, 9.0) | {"freshness_burst_probes": 12, "freshness_burst_missed": 0}
    table = load_table([missed, clean])
    assert "| ≥ 30,000 ms (3 of 40 probes missed, each counted as 30 s) |" in table
    assert "| 4,000 ms (12 probes, none missed) |" in table


def test_probe_quantiles_count_each_miss_as_the_timeout() -> None:
    log = ProbeLog(found=[100.0, 200.0, 300.0], missed=0)
    assert log.probes == 3 and log.p(0.95) == 300.0
    log.missed = 2
    assert log.probes == 5
    assert log.p(0.95) == PROBE_TIMEOUT_S * 1000 and log.p(0.5) == 300.0
    assert ProbeLog().p(0.95) == 0.0


def test_update_replaces_only_the_marked_block() -> None:
    text = "intro\n<!-- bench:load -->\nold table\n<!-- /bench:load -->\noutro\n"
    out = update_readme(text, {"load": "new table"})
    assert out == "intro\n<!-- bench:load -->\nnew table\n<!-- /bench:load -->\noutro\n"
    assert update_readme(out, {"load": "new table"}) == out
    with pytest.raises(ValueError, match="bench:locomo"):
        update_readme(text, {"locomo": "x"})


def test_blocks_come_from_the_files_present(tmp_path: Path) -> None:
    assert blocks_from(tmp_path) == {}
    (tmp_path / "load-10000.json").write_text(json.dumps(load_doc(10_000, 9.0)))
    blocks = blocks_from(tmp_path)
    assert list(blocks) == ["load"] and "| 10,000 |" in blocks["load"]


def test_learn_table_shows_each_round_and_the_praise_burst() -> None:
    snap = {"right_on_top": 0.5, "praised_on_top": 0.0, "praised_shown_per_packet": 1.5}
    doc = {
        "families": 4,
        "memories_per_family": [2, 3, 2, 3],
        "chance": 0.417,
        "seed": 9,
        "outcomes_reported": 8,
        "per_round": [
            {"round": 1, "learning_off": 0.5, "learning_on": 0.5},
            {"round": 2, "learning_off": 0.5, "learning_on": 1.0},
        ],
        "adversarial_praise": {
            "events_per_arm": 1200,
            "targets": 6,
            "before": {"off": snap, "on": {**snap, "right_on_top": 1.0}},
            "after": {"off": {**snap, "praised_on_top": 0.25}, "on": {**snap, "right_on_top": 1.0}},
        },
    }
    table = learn_table(doc)
    assert "| 2 | 0.50 | 1.00 |" in table
    assert "| after 1,200 praise events | 0.50 | 1.00 |" in table
    assert "on top in 0.25 (off) and 0.00 (on)" in table and "2–3 competing" in table
    assert "how-to round" not in table  # a run without the case: no empty table
    howto = {"families": 8, "per_round": [{"round": 2, "learning_off": 0.0, "learning_on": 0.875}]}
    table = learn_table({**doc, "howto": howto})
    assert "| how-to round |" in table and "| 2 | 0.00 | 0.88 |" in table
    assert "8 how-to questions" in table


def test_a_chaos_window_counts_its_answers_failures_gap_and_wait() -> None:
    ids = [f"e{i}" for i in range(6)]
    answers = [
        Answer(first_sent=0.0, answered=1.0, ids=(ids[0],)),
        Answer(first_sent=9.0, answered=11.0, ids=(ids[1], ids[2])),  # sent before the kill
        Answer(first_sent=11.0, answered=18.5, ids=(ids[3],)),
        Answer(first_sent=19.0, answered=19.5, ids=(ids[4], ids[5])),
    ]
    failures = [
        Failure(12.0, "refused", "ConnectError"),
        Failure(13.0, "transport", "RemoteProtocolError"),
        Failure(14.0, "status", "503"),
    ]
    counts = Counter({ids[0]: 1, ids[1]: 1, ids[2]: 2, ids[3]: 1, ids[4]: 1})
    rows = [
        {"fault": "none", "killed_at": 0.0, "recover_s": None},
        {"fault": "tansu", "killed_at": 10.0, "recover_s": 3.04},
    ]
    quiet, fault = fault_rows(rows, 20.0, answers, failures, counts)
    assert quiet["accepted"] == 1 and quiet["refused"] == 0 and quiet["longest_gap_s"] == 9.0
    assert fault["accepted"] == 5 and fault["ledgered"] == 4 and fault["lost"] == 1
    assert fault["duplicated"] == 1
    assert (fault["refused"], fault["transport_errors"], fault["non_202"]) == (1, 1, 1)
    assert fault["errors"] == {"RemoteProtocolError": 1, "503": 1}
    assert fault["longest_gap_s"] == 7.5  # 11.0 -> 18.5 without a 202
    assert fault["longest_wait_s"] == 7.5 and fault["recover_s"] == 3.0


def test_longest_gap_counts_from_the_kill_and_to_the_end() -> None:
    assert longest_gap(0.0, 10.0, []) == 10.0
    assert longest_gap(0.0, 10.0, [6.0, 7.0]) == 6.0
    assert longest_gap(0.0, 10.0, [1.0, 2.0]) == 8.0


def test_the_chaos_table_shows_refusals_errors_gap_and_wait() -> None:
    fault = {
        "fault": "tansu", "accepted": 1200, "ledgered": 1200, "lost": 0, "duplicated": 0,
        "refused": 0, "transport_errors": 1, "non_202": 2, "longest_gap_s": 1.25,
        "longest_wait_s": 0.5, "recover_s": None,
    }  # fmt: skip
    doc = {
        "faults": [fault], "accepted": 1200, "lost": 0, "duplicated": 0,
        "refused_requests": 0, "transport_errors": 1, "chain_verifies": True,
        "projections_converged": True, "converge_s": 0.5, "machine": MACHINE,
    }  # fmt: skip
    (row,) = [r for r in chaos_table(doc).splitlines() if r.startswith("| tansu")]
    assert row == "| tansu | 1,200 | 1,200 | 0 | 0 | 0 | 3 | 1.25 s | 0.5 s | – |"
    assert "0 connections refused and 1 other transport errors" in chaos_table(doc)


def neighbours_doc() -> dict[str, object]:
    def phase(limits: bool, p95: float, flood_p95: float) -> dict[str, object]:
        quiet = {
            "checkouts": 200,
            "checkout_p50_ms": 20.0,
            "checkout_p95_ms": p95,
            "healthz_p95_ms": 3.5,
            "statuses": {"2xx": 400},
        }
        flood = {
            "checkouts": 150,
            "checkout_p50_ms": 30.0,
            "checkout_p95_ms": flood_p95,
            "healthz_p95_ms": 9.0,
            "statuses": {"2xx": 299, "5xx": 1},
        }
        a = {"2xx": 40, "429": 12_000} if limits else {"2xx": 900}
        return {
            "limits": limits,
            "quiet": quiet,
            "flood": flood,
            "checkout_p95_ratio": round(flood_p95 / p95, 2),
            "flooder": {"per_s": 200.5, "statuses": a},
        }

    return {
        "events": 4000,
        "flood_connections": 20,
        "flood_checkout": {"max_tokens": 8000, "k": 50},
        "cycles": 4,
        "window_s": 15.0,
        "neighbour_period_s": 0.25,
        "limits": {
            "read_tenant_concurrency": 4,
            "read_tenant_share": 0.25,
            "read_tenant_burst_s": 2.0,
            "read_total_concurrency": 8,
            "read_reserved_slots": 2,
        },
        "runs": [phase(False, 40.0, 400.0), phase(True, 40.0, 60.0)],
        "machine": MACHINE,
    }


def test_neighbours_table_shows_off_and_on_with_every_status(tmp_path: Path) -> None:
    (tmp_path / "neighbours.json").write_text(json.dumps(neighbours_doc()))
    table = blocks_from(tmp_path)["neighbours"]
    off, on = [r for r in table.splitlines() if r.startswith(("| off", "| on"))]
    assert "| 20 / 40 ms | 30 / 400 ms (150) | 10.00 |" in off
    assert "| 900 / 0 / 0 (200.5/s) | 0 / 1 |" in off  # B's one 5xx is shown, not hidden
    assert "| 1.50 |" in on and "| 40 / 12,000 / 0 (200.5/s) |" in on
    assert "a budget of 0.25 CPU s/s (bursts of 2 s)" in table
    assert "_Measured 2031-01-02 on a 2-core machine._" in table


def test_the_locomo_table_names_each_lever_row_and_its_latency() -> None:
    cell = {
        "recall": 0.5,
        "hit": 0.6,
        "questions": 2,
        "by_category": {"1": {"recall": 0.5, "hit": 0.6}},
    }
    methods = {
        name: cell
        for name in ("packet", "bm25", "packet_whole", "recall_top40", "packet_time_lane_on",
                     "packet_rerank_off")
    }  # fmt: skip
    doc = {
        "methods": methods, "questions": 3, "category5_abstention": 0.5,
        "packet_tokens_median": 1400, "packet_tokens_p95": 1490, "checkout_ms_p50": 20.0,
        "checkout_ms_p95": 30.0, "machine": {"cpus": 2, "date": "2031-01-01"},
        "lever_ms": {
            "time_lane_off": {"p50": 18.5, "p95": 27.0},
            "second_hop_on": {"p50": 25.0, "p95": 40.0},
        },
    }  # fmt: skip
    table = locomo_table(doc)
    assert "| packet, time lane on | 0.500 | 0.600 |" in table
    assert "| packet, rerank off | 0.500 | 0.600 |" in table
    assert "time lane off 18.5 / 27.0 ms, second hop on 25.0 / 40.0 ms" in table
    assert "| reach: every turn of the packet, any order | 0.500 | 0.600 |" in table
    assert "| reach: `/v1/recall` top 40 | 0.500 | 0.600 |" in table
    assert "Rows marked reach are scored deeper than the first ten" in table


def test_a_paired_interval_brackets_the_mean_gain_and_is_repeatable() -> None:
    on = [1.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.5] * 10
    off = [1.0, 0.5, 0.5, 0.0, 0.0, 1.0, 0.5, 0.5] * 10
    mean, low, high = paired_interval(on, off)
    assert mean == pytest.approx(0.25)
    assert 0.0 < low < mean < high < 0.5
    assert paired_interval(on, off) == (mean, low, high)
    assert paired_interval([0.5, 0.5], [0.5, 0.5]) == (0.0, 0.0, 0.0)
    assert paired_interval([], []) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="not paired"):
        paired_interval([1.0], [])


def test_a_lever_clears_the_bar_only_with_gain_and_an_interval_above_zero() -> None:
    # (conversation, category, Recall@k on, off): two conversations, one multi-hop question
    helps = [("c-a", 1, 1.0, 0.5), ("c-a", 4, 1.0, 1.0), ("c-b", 2, 0.5, 0.0)] * 20
    effect = lever_effect(helps)
    assert effect["keep"] is True and effect["questions"] == 60
    assert effect["gain"] == pytest.approx(1 / 3, abs=1e-4)
    assert effect["gain_multi_hop"] == 0.5
    assert effect["gain_by_conversation"] == {"c-a": 0.25, "c-b": 0.5}
    mixed = [("c-a", 1, 1.0, 0.0), ("c-a", 1, 0.0, 1.0), ("c-b", 4, 0.5, 0.5)] * 20
    assert lever_effect(mixed)["keep"] is False  # no gain, the interval crosses zero
    small = [("c-a", 4, 0.505, 0.5)] * 50  # above zero, under +0.01
    assert lever_effect(small)["keep"] is False
    doc = {"lever_effects": {"coverage": lever_effect(helps), "rerank": lever_effect(small)}}
    rows = "\n".join(lever_effect_lines(doc, {"coverage": "coverage first"}))
    assert "| coverage first | 0.833 / 0.500 | +0.333 |" in rows
    assert rows.count("| yes | no |") == 1  # clears the bar, off by default
    assert "| rerank |" in rows and "| no | yes |" in rows  # under the bar, on by default


def test_load_rows_from_runs_on_different_days_each_name_their_day() -> None:
    old = {**load_doc(1_000_000, 90.0), "machine": {"cpus": 2, "date": "2031-01-05"}}
    hnsw = {**load_doc(100_000, 31.0), "vector_optimize": True}
    table = load_table([old, load_doc(100_000, 30.0), load_doc(10_000, 12.5), hnsw])
    assert table.splitlines()[-1] == (
        "_Measured 2031-01-02 (10,000, 100,000, 100,000 HNSW); 2031-01-05 (1,000,000) "
        "on a 2-core machine._"
    )


def test_the_answerability_rates_and_reliability_come_from_the_rows() -> None:
    """Rows written here: two answerable with evidence in the first ten (one abstained),
    one answerable without, three unanswerable (two abstained)."""
    rows = [
        {"category": 1, "answerability": "ask_user", "confidence": 0.0, "evidence_in_top": True},
        {"category": 2, "answerability": "answer_from_memory", "confidence": 0.9,
         "evidence_in_top": True},
        {"category": 4, "answerability": "answer_from_memory", "confidence": 0.7,
         "evidence_in_top": False},
        {"category": 5, "answerability": "no_memory", "confidence": 0.0, "evidence_in_top": None},
        {"category": 5, "answerability": "ask_user", "confidence": 0.0, "evidence_in_top": None},
        {"category": 5, "answerability": "answer_from_memory", "confidence": 0.8,
         "evidence_in_top": None},
    ]  # fmt: skip
    rates = answerability_rates(rows)
    assert rates["abstained_with_evidence"] == 0.5 and rates["answerable_with_evidence"] == 2
    assert rates["abstained_unanswerable"] == 0.6667 and rates["unanswerable"] == 3
    assert rates["abstention_precision"] == 0.6667 and rates["abstained"] == 3
    bins = {(b["from"], b["packets"], b["evidence_in_top"]) for b in reliability(rows)}
    assert (0.6, 1, 0.0) in bins and (0.8, 1, 1.0) in bins and (0.0, 0, None) in bins
    doc = {"answerability": rates, "reliability": reliability(rows)}
    lines = "\n".join(answerability_lines(doc))
    assert "on 50.0% of the 2 answerable questions" in lines and "| 0.8–1.0 | 1 | 1.000 |" in lines


def scale_row(replicas: int, per_s: int, seq: float) -> dict[str, object]:
    return {
        "replicas": replicas,
        "ingest_events_per_s": per_s,
        "freshness_p95_ms": 1234.5,
        "join_pause_s": 0.2,
        "kill_pause_s": 9.5 + replicas,
        "events_lost": 0,
        "events_applied_twice": 0,
        "cpu_s_per_1000_events_by_worker": {"sequencer": seq, "api": 0.5},
    }


def test_the_scale_table_has_a_column_per_replica_count_and_cpu_per_worker(
    tmp_path: Path,
) -> None:
    doc = {"events": 20_000, "tenants": 8, "steady_rate": 300, "machine": MACHINE,
           "rows": [scale_row(1, 961, 0.113), scale_row(2, 1_002, 0.121)]}  # fmt: skip
    (tmp_path / "scale.json").write_text(json.dumps(doc))
    table = blocks_from(tmp_path)["scale"]
    assert "| | 1 replica(s) per group | 2 replica(s) per group |" in table
    assert "| ingest/s (emit → visible) | 961 | 1,002 |" in table
    assert "| CPU s per 1,000 events: sequencer | 0.113 | 0.121 |" in table
    assert "| CPU s per 1,000 events: all | 0.613 | 0.621 |" in table
    assert "| events lost / applied twice | 0 / 0 | 0 / 0 |" in table
    assert "10.5 s | 11.5 s |" in table and "2031-01-02" in table
