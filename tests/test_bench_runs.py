"""Every ``memstream bench`` command, run for real at a tiny size: its JSON document and the
figures a reader relies on (nothing lost or doubled, counts that add up, baselines present).

Each bench starts its own throw-away stack (or none: embed, report), as the command does for
a user; so each test here owns one, by design of the command under test. The sizes are the
smallest that exercise every phase, not measurements: the numbers are not judged, only
their presence, their shape and the invariants.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from stackproc import BIN, LLM_ENV

ROOT = Path(__file__).resolve().parents[1]


def bench(tmp_path: Path, *args: str, timeout: float = 600) -> dict[str, Any]:
    """``memstream bench ARGS --json``: its one JSON document (stdout holds nothing else)."""
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env["TMPDIR"] = str(tmp_path)  # the throw-away stack's data dir
    res = subprocess.run(
        [str(BIN / "memstream"), "bench", *args, "--json"],
        capture_output=True, text=True, env=env, timeout=timeout,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def tiny_locomo() -> list[dict[str, Any]]:
    """Two conversations written for this test, in the benchmark's file format."""
    first = {
        "speaker_a": "Ines", "speaker_b": "Kofi",
        "session_1_date_time": "9:00 am on 3 March, 2031",
        "session_1": [
            {"speaker": "Ines", "dia_id": "D1:1", "text": "I adopted a grey kitten called Pebble."},
            {"speaker": "Kofi", "dia_id": "D1:2", "text": "Lovely! I started night shifts."},
            {"speaker": "Ines", "dia_id": "D1:3", "text": "Pebble sleeps on my keyboard."},
        ],
        "session_2_date_time": "6:00 pm on 9 March, 2031",
        "session_2": [
            {"speaker": "Kofi", "dia_id": "D2:1", "text": "I sold my old road bike for 200 euros."},
            {"speaker": "Ines", "dia_id": "D2:2", "text": "Good price! Pebble learnt to fetch."},
        ],
    }  # fmt: skip
    second = {
        "speaker_a": "Aiko", "speaker_b": "Lars",
        "session_1_date_time": "10:00 am on 1 April, 2031",
        "session_1": [
            {"speaker": "Aiko", "dia_id": "D1:1", "text": "I planted tomatoes and basil today."},
            {"speaker": "Lars", "dia_id": "D1:2", "text": "I am learning the cello."},
        ],
    }  # fmt: skip
    return [
        {"sample_id": "tiny-1", "conversation": first, "qa": [
            {"question": "What is Ines's kitten called?", "evidence": ["D1:1"],
             "category": 4},
            {"question": "What did Kofi sell?", "evidence": ["D2:1"], "category": 1},
            {"question": "When did Kofi sell his bike?", "evidence": ["D2:1"], "category": 2},
            {"question": "What is Ines's favourite opera?", "evidence": [], "category": 5,
             "adversarial_answer": "Tosca"},
        ]},
        {"sample_id": "tiny-2", "conversation": second, "qa": [
            {"question": "What did Aiko plant?", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument is Lars learning?", "evidence": ["D1:2"],
             "category": 3},
        ]},
    ]  # fmt: skip


def test_bench_cli_times_every_light_command_beside_the_interpreter(tmp_path: Path) -> None:
    doc = bench(tmp_path, "cli", "--runs", "1")
    rows = {r["command"]: r for r in doc["commands"]}
    assert {"--help", "status", "checkout", "lineage", "emit"} <= set(rows)
    assert not rows["python -c pass (baseline)"]["light"] and rows["--help"]["light"]
    assert all(r["runs"] == 1 and r["median_s"] > 0 for r in rows.values())
    assert doc["baseline_interpreter_s"] < rows["--help"]["median_s"]
    assert doc["slowest_light"] in rows and isinstance(doc["light_all_under_bar"], bool)


@pytest.mark.timeout(900)
def test_bench_ingest_counts_every_event_into_the_ledger(tmp_path: Path) -> None:
    doc = bench(tmp_path, "ingest", "--events", "400", "--http-events", "200")
    assert doc["raw_broker_produce_events_per_s"] > 0
    assert doc["sdk"]["ledger_events_per_s"] > 0 and doc["http"]["ledger_events_per_s"] > 0
    assert doc["http"]["events"] == 200
    assert doc["sdk_ledger_vs_raw"] > 0 and doc["http_ledger_vs_raw"] > 0


def test_bench_embed_times_the_embedder_and_scores_a_locomo_file(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(tiny_locomo()))
    doc = bench(tmp_path, "embed", "--docs", "200", "--locomo", str(data), "--keys")
    assert doc["docs"] == 200 and doc["docs_per_s"] > 0 and doc["dim"] > 0
    assert doc["locomo"]["questions"] == 5  # category 5 (no evidence) is not scored
    for method in ("dense", "bm25", "rrf"):
        # Each conversation has fewer turns than k: every method's top holds every turn.
        assert doc["locomo"][method]["recall"] == doc["locomo"][method]["hit"] == 1.0, method
    assert doc["locomo_keys"]


@pytest.mark.timeout(900)
def test_bench_train_measures_the_data_and_trains_on_the_labelled_conversations_too(
    tmp_path: Path,
) -> None:
    from memstream.checkout.retrieve.learned import Ranker
    from memstream.checkout.synthesis.answerable import Judge

    data, groups = tmp_path / "tiny.json", tmp_path / "groups.jsonl"
    data.write_text(json.dumps(tiny_locomo()))
    labelled = ROOT / "bench" / "labelled" / "scenarios.json"
    extra = [s["sample_id"] for s in json.loads(labelled.read_text())]
    model, judge = tmp_path / "ranker.txt", tmp_path / "answerable.txt"
    doc = bench(
        tmp_path, "train", "--data", str(data), "--train-only", str(labelled),
        "--groups", str(groups), "--model", str(model), "--judge", str(judge),
    )  # fmt: skip
    assert set(doc["folds"]) == {"tiny-1", "tiny-2"} and doc["trained_only"] == sorted(extra)
    # the tiny conversations' five questions with evidence are the only ones measured
    assert all(doc["pooled"][m]["questions"] == 5 for m in ("fused", "rerank", "learned"))
    # tiny's six questions, category 5 included: the answerability learns from them alone
    assert doc["answerability"]["packets"] == 6
    Ranker.from_text(model.read_text())  # refused if it reads other features than today's
    Judge.from_text(judge.read_text())
    # the labelled conversations were collected: in the groups file, beside tiny's
    stamp, *rows = groups.read_text().splitlines()
    assert {json.loads(line)["conversation"] for line in rows} == {"tiny-1", "tiny-2", *extra}
    # read again for the same conversations (no stack); refused for others
    again = bench(tmp_path, "train", "--data", str(data), "--train-only", str(labelled),
                  "--groups", str(groups))  # fmt: skip
    assert again["pooled"] == doc["pooled"]
    res = subprocess.run(
        [str(BIN / "memstream"), "bench", "train", "--data", str(data), "--groups", str(groups)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode != 0 and "--groups" in res.stderr and "collected from other" in res.stderr
    assert groups.read_text().splitlines()[0] == stamp  # the refused run left it as it was


ABSTAINING = ("ask_user", "no_memory")


@pytest.mark.timeout(900)
def test_bench_locomo_scores_the_packet_beside_its_baselines(tmp_path: Path) -> None:
    data, rows = tmp_path / "tiny.json", tmp_path / "rows.jsonl"
    data.write_text(json.dumps(tiny_locomo()))
    doc = bench(tmp_path, "locomo", "--data", str(data), "--out", str(rows))
    methods = doc["methods"]
    assert {"packet", "bm25", "dense", "recall"} <= set(methods)
    for name, m in methods.items():
        # per question, the share of evidence found is at most "some evidence found"
        assert m["recall"] <= m["hit"], name
    assert methods["packet"]["hit"] > 0  # some evidence of these few turns is found
    # reach is scored deeper than the first k, over the same questions
    assert methods["packet_whole"]["recall"] >= methods["packet"]["recall"]
    assert methods["recall_top100"]["recall"] >= methods["recall_top40"]["recall"]
    assert methods["recall_top40"]["recall"] >= methods["recall"]["recall"]
    assert methods["packet_whole"]["questions"] == methods["packet"]["questions"]
    assert doc["packet_tokens_median"] > 0 and doc["checkout_ms_p95"] > 0
    lines = [json.loads(x) for x in rows.read_text().splitlines()]
    assert {(r["sample_id"], r["qa_index"]) for r in lines} >= {("tiny-1", 0), ("tiny-2", 1)}
    keys = {"sample_id", "qa_index", "category", "retrieved", "packet_tokens", "latency_ms",
            "answerability", "confidence", "evidence_in_top"}  # fmt: skip
    assert all(keys <= set(r) for r in lines)
    rates = doc["answerability"]
    assert rates["unanswerable"] == sum(1 for r in lines if r["category"] == 5)
    assert rates["abstained"] == sum(1 for r in lines if r["answerability"] in ABSTAINING)
    assert sum(b["packets"] for b in doc["reliability"]) == sum(
        1 for r in lines
        if r["category"] != 5 and r["answerability"] not in ABSTAINING
        and r["evidence_in_top"] is not None
    )  # fmt: skip
    assert 0.0 <= doc["calibration_error"] <= 1.0
    # every question with its evidence in the data (and the unanswerable one), held out by
    # conversation under the learned preset
    judged = doc["calibrated"]
    assert judged["packets"] == len(lines) == 6
    assert judged["learned"]["unanswerable"] == judged["rules"]["unanswerable"] == 1
    assert sum(b["packets"] for b in judged["reliability"]) == 6


@pytest.mark.timeout(900)
def test_bench_neighbours_runs_both_settings_with_no_5xx(tmp_path: Path) -> None:
    doc = bench(tmp_path, "neighbours", "--events", "200", "--connections", "4", "--cycles",
                "1", "--window-seconds", "3")  # fmt: skip
    runs = {r["limits"]: r for r in doc["runs"]}
    assert set(runs) == {False, True}
    for r in runs.values():
        assert r["quiet"]["checkouts"] > 0 and r["flood"]["checkouts"] > 0
        assert r["flooder"]["statuses"].get("5xx", 0) == 0
    assert runs[False]["flooder"]["statuses"].get("429", 0) == 0  # no fair share: no 429


@pytest.mark.timeout(900)
def test_bench_chaos_loses_and_doubles_nothing(tmp_path: Path) -> None:
    doc = bench(tmp_path, "chaos", "--faults", "sequencer,api", "--settle-seconds", "2")
    assert [f["fault"] for f in doc["faults"]] == ["none", "sequencer", "api"]
    assert doc["accepted"] > 0 and doc["lost"] == 0 and doc["duplicated"] == 0
    assert doc["chain_verifies"] and doc["projections_converged"]
    assert all(f["recover_s"] is not None for f in doc["faults"][1:])


@pytest.mark.timeout(900)
def test_bench_learn_runs_learning_off_and_on(tmp_path: Path) -> None:
    doc = bench(tmp_path, "learn", "--families", "3", "--rounds", "2", "--howtos", "1")
    assert doc["families"] == 3 and len(doc["per_round"]) == 2
    for rounds in (doc["per_round"], doc["howto"]["per_round"]):
        # Without outcomes nothing changes from round to round; before the first outcome the
        # two arms hold the same memories and answer alike.
        assert len({r["learning_off"] for r in rounds}) == 1, rounds
        assert rounds[0]["learning_on"] == rounds[0]["learning_off"], rounds
    for r in doc["per_round"]:  # shares of three families
        assert round(r["learning_on"] * 3, 2) in (0, 1, 2, 3), r
    # Praise is bounded: it never lifts a memory that does not answer the question to the top.
    assert doc["adversarial_praise"]["after"]["on"]["praised_on_top"] == 0, doc
    assert doc["howto"]["families"] == 1


@pytest.mark.timeout(900)
def test_bench_load_reports_ingest_freshness_and_checkouts(tmp_path: Path) -> None:
    doc = bench(tmp_path, "load", "--events", "300", "--tenants", "2", "--checkouts", "10",
                "--steady-rate", "20", "--steady-seconds", "2")  # fmt: skip
    assert doc["events"] == 300 and doc["tenants"] == 2
    assert doc["checkout_p95_ms"] > 0 and doc["ingest_events_per_s"] > 0
    # the same questions asked with the fused lanes alone: what the levers cost, same run
    assert doc["checkout_plain_p95_ms"] > 0 and doc["checkouts"] == 10
    overhead = doc["checkout_lever_p95_overhead"]
    # (from the unrounded latencies: the ms in the document are rounded to 0.01)
    assert overhead == pytest.approx(
        doc["checkout_p95_ms"] / doc["checkout_plain_p95_ms"] - 1, abs=2e-3
    )
    # and inside one user's scope: what a scope costs, against the same levers without one
    assert doc["checkout_scoped_p95_ms"] > 0
    scoped = doc["checkout_scope_p95_overhead"]
    assert scoped == pytest.approx(
        doc["checkout_scoped_p95_ms"] / doc["checkout_p95_ms"] - 1, abs=2e-3
    )
    # and with the learned ranker in place of the rerank
    assert doc["checkout_learned_p95_ms"] > 0
    assert doc["checkout_learned_p95_overhead"] == pytest.approx(
        doc["checkout_learned_p95_ms"] / doc["checkout_p95_ms"] - 1, abs=2e-3
    )


@pytest.mark.timeout(900)
def test_bench_scale_runs_two_replicas_and_loses_nothing(tmp_path: Path) -> None:
    # One row, at two replicas (the row at one runs the same code with one member less).
    doc = bench(tmp_path, "scale", "--events", "300", "--tenants", "2", "--rate", "60",
                "--replicas", "2", timeout=900)  # fmt: skip
    ((row,),) = [doc["rows"]]
    assert row["replicas"] == 2
    assert row["events_lost"] == 0 and row["events_applied_twice"] == 0, row
    assert row["events_lost_at"] == [] and row["events_applied_twice_at"] == [], row
    assert row["ingest_events_per_s"] > 0
    assert row["join_pause_s"] > 0 and row["kill_pause_s"] > 0, row
    by_worker = row["cpu_s_per_1000_events_by_worker"]
    assert by_worker["sequencer"] > 0 and by_worker["graph-projector"] > 0, by_worker
    two = row["cpu_s_per_1000_events"]
    assert {"sequencer", "sequencer-2", "graph-projector-2", "retrospective-2"} <= set(two)
    res = subprocess.run([str(BIN / "memstream"), "bench", "scale", "--replicas", "1,0"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 1 and "--replicas" in res.stderr


def test_bench_report_rewrites_the_readme_tables_from_bench_json(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "embed.json").write_text(json.dumps(bench(tmp_path, "embed", "--docs", "100")))
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- bench:embed -->\nold table\n<!-- /bench:embed -->\n")
    res = subprocess.run(
        [str(BIN / "memstream"), "bench", "report", "--results", str(results), "--readme",
         str(readme)], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    text = readme.read_text()
    assert "old table" not in text and "docs/s" in text
    assert text.startswith("# x\n\n<!-- bench:embed -->\n")
    # a table whose JSON is present but that no page marks is refused, nothing written
    (results / "scale.json").write_text(json.dumps({"rows": [], "events": 1, "tenants": 1,
                                                    "steady_rate": 1}))  # fmt: skip
    res = subprocess.run(
        [str(BIN / "memstream"), "bench", "report", "--results", str(results), "--page",
         str(readme)], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode != 0 and "no page marks the blocks scale" in res.stderr
    assert readme.read_text() == text
