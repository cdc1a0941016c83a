"""``memstream bench ...``: measurements through the real pipeline."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from memstream_cli.common import JsonFlag, err, fail, out, print_json
from memstream_cli.progress import stages
from rich.table import Table

# The benches import the stack supervisor, the MCP server and more (~2 s): every other
# `memstream` command starts without them. Each runner is imported when its bench runs.


def run_chaos_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.chaos import run_chaos_bench as run

    return run(*args, **kwargs)


def run_embed_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.embed import run_embed_bench as run

    return run(*args, **kwargs)


def run_ingest_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.ingest import run_ingest_bench as run

    return run(*args, **kwargs)


def run_learn_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.learn import run_learn_bench as run

    return run(*args, **kwargs)


def run_load_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.load import run_load_bench as run

    return run(*args, **kwargs)


def run_locomo_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.locomo import run_locomo_bench as run

    return run(*args, **kwargs)


def run_train(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.train import run_train as run

    return run(*args, **kwargs)


def run_neighbours_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.neighbours import run_neighbours_bench as run

    return run(*args, **kwargs)


def run_scale_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.scale import run_scale_bench as run

    return run(*args, **kwargs)


def run_read_after_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.read_after import run_read_after_bench as run

    return run(*args, **kwargs)


def run_cli_bench(*args: Any, **kwargs: Any) -> dict[str, Any]:
    from memstream_bench.startup import run_cli_bench as run

    return run(*args, **kwargs)


bench_app = typer.Typer(
    help="Benchmarks (tables and JSON, same-run baselines).", no_args_is_help=True
)


@bench_app.command("ingest")
def ingest(
    events: Annotated[int, typer.Option("--events", help="events through the SDK path")] = 100_000,
    http_events: Annotated[
        int, typer.Option("--http-events", help="events through HTTP (0 = skip)")
    ] = 20_000,
    projections: Annotated[
        bool,
        typer.Option(
            "--projections/--spine-only",
            help="run the graph and vector projectors beside the spine, as `memstream up` does",
        ),
    ] = True,
    json_out: JsonFlag = False,
) -> None:
    """Events/s from the SDK and HTTP into the ledger, beside the raw broker produce rate."""
    with stages(json_out) as progress:
        doc = run_ingest_bench(events, http_events, progress, projections=projections)
    if json_out:
        print_json(doc)
        return
    raw = doc["raw_broker_produce_events_per_s"]
    table = Table("path", "events", "events/s into ledger", "vs raw broker")
    table.add_row("raw broker produce (baseline)", str(events), f"{raw:,}", "1.00")
    table.add_row(
        "SDK -> ledger",
        str(events),
        f"{doc['sdk']['ledger_events_per_s']:,}",
        f"{doc['sdk_ledger_vs_raw']:.2f}",
    )
    if "http" in doc:
        h = doc["http"]
        table.add_row(
            "HTTP -> ledger",
            str(h["events"]),
            f"{h['ledger_events_per_s']:,}",
            f"{doc['http_ledger_vs_raw']:.2f}",
        )
    out.print(table)


@bench_app.command("embed")
def embed(
    docs: Annotated[int, typer.Option("--docs", help="documents to embed")] = 20_000,
    locomo: Annotated[
        Path | None, typer.Option("--locomo", help="LoCoMo file for a recall check beside BM25")
    ] = None,
    keys: Annotated[
        bool, typer.Option("--keys", help="with --locomo: recall per form of index key")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Docs/s of the default embedder (and its LoCoMo recall beside BM25, given --locomo)."""
    with stages(json_out) as progress:
        doc = run_embed_bench(docs, progress, locomo, keys=keys)
    if json_out:
        print_json(doc)
        return
    table = Table("embedder", "dim", "docs", "docs/s")
    table.add_row(doc["embedder"], str(doc["dim"]), str(doc["docs"]), f"{doc['docs_per_s']:,.0f}")
    out.print(table)
    if "locomo" in doc:
        out.print_json(data=doc["locomo"])
    if "locomo_keys" in doc:
        from memstream_bench.keys import keys_table

        out.print(keys_table(doc["locomo_keys"]))


@bench_app.command("locomo")
def locomo(
    data: Annotated[Path, typer.Option("--data", help="LoCoMo JSON (e.g. locomo-dev.json)")],
    k: Annotated[int, typer.Option("--k")] = 10,
    out_file: Annotated[Path | None, typer.Option("--out", help="per-question JSONL")] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", help="first N questions per conversation")
    ] = None,
    user_scopes: Annotated[
        bool,
        typer.Option(
            "--user-scopes",
            help="write each conversation as its own user and read it with a key scoped to "
            "that user (every read inside a scope)",
        ),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Evidence Recall@k / Hit@k per category through the real pipeline, with baselines."""
    if not data.is_file():
        raise typer.BadParameter(f"no such file: {data}", param_hint="--data")
    with stages(json_out) as progress:
        doc = run_locomo_bench(data, k, out_file, progress, limit, user_scopes)
    if json_out:
        print_json(doc)
        return
    table = Table("method", "Recall@k", "Hit@k", "cat 1", "cat 2", "cat 3", "cat 4", "vs BM25")
    base = doc["methods"]["bm25"]["recall"] or 1.0
    for name, m in doc["methods"].items():
        cats = [m["by_category"].get(str(c), {}) for c in (1, 2, 3, 4)]
        table.add_row(
            name,
            f"{m['recall']:.3f}",
            f"{m['hit']:.3f}",
            *(f"{c.get('recall', 0):.3f}/{c.get('hit', 0):.3f}" for c in cats),
            f"{m['recall'] / base:.2f}",
        )
    out.print(table)
    out.print(
        f"category 5 abstention {doc['category5_abstention']}; packet tokens median "
        f"{doc['packet_tokens_median']} p95 {doc['packet_tokens_p95']}; checkout p50 "
        f"{doc['checkout_ms_p50']} ms p95 {doc['checkout_ms_p95']} ms; ingest "
        f"{doc['ingest_seconds']} s; skipped evidence ids {doc['skipped_evidence_ids']}"
    )
    from memstream_bench.report import answerability_lines

    out.print("\n".join(answerability_lines(doc)))


@bench_app.command("train")
def train(
    data: Annotated[
        list[Path],
        typer.Option(
            "--data", help="LoCoMo JSON (e.g. locomo-dev.json), trained on and measured by folds"
        ),
    ],
    model: Annotated[
        Path | None,
        typer.Option("--model", help="write the model trained on every conversation here"),
    ] = None,
    train_only: Annotated[
        list[Path] | None,
        typer.Option(
            "--train-only",
            help="LoCoMo-shaped JSON the ranker also trains on (every fold), never measured",
        ),
    ] = None,
    groups: Annotated[
        Path | None,
        typer.Option(
            "--groups", help="the collected questions (JSONL): read if it exists, else written"
        ),
    ] = None,
    judge: Annotated[
        Path | None,
        typer.Option(
            "--judge", help="write the answerability model trained on every conversation here"
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """The learned ranker cross-validated by conversation beside the fused and hand-set
    orders (Recall@10 / Hit@10 of the fused top 60), and the calibrated answerability beside
    the rules (calibration error, abstention rates); --model and --judge write the models."""
    for hint, paths in (("--data", data), ("--train-only", train_only or [])):
        for path in paths:
            if not path.is_file():
                raise typer.BadParameter(f"no such file: {path}", param_hint=hint)
    from memstream_bench.train import DuplicateConversationError, StaleCollectionError

    with stages(json_out) as progress:
        try:
            doc = run_train(data, model, progress, groups, judge, train_only or [])
        except DuplicateConversationError as exc:
            raise typer.BadParameter(str(exc), param_hint="--data") from exc
        except StaleCollectionError as exc:
            raise typer.BadParameter(str(exc), param_hint="--groups") from exc
    if json_out:
        print_json(doc)
        return
    from memstream_bench.train import table_rows

    table = Table("held out", "order", "Recall@10", "Hit@10", "multi-hop", "questions")
    for row in table_rows(doc):
        table.add_row(*row)
    out.print(table)
    if doc["trained_only"]:
        out.print(f"trained on, never measured: {', '.join(doc['trained_only'])}")
    vs = doc["learned_vs_rerank_recall"]
    out.print(f"learned - rerank Recall@10 {vs['gain']:+.4f}, 95% interval {vs['interval95']}")
    if doc["answerability"] is not None:
        from memstream_bench.report import calibration_lines

        out.print("\n".join(calibration_lines(doc["answerability"])))


@bench_app.command("load")
def load(
    events: Annotated[int, typer.Option("--events", help="events in the workload")] = 10_000,
    tenants: Annotated[int, typer.Option("--tenants")] = 8,
    checkouts: Annotated[int, typer.Option("--checkouts", help="checkouts at the end")] = 200,
    steady_rate: Annotated[
        int, typer.Option("--steady-rate", help="events/s of the steady phase (freshness)")
    ] = 500,
    steady_seconds: Annotated[float, typer.Option("--steady-seconds")] = 15.0,
    json_out: JsonFlag = False,
) -> None:
    """Ingest (emit -> visible), freshness, checkout latency and memory at N events."""
    with stages(json_out) as progress:
        doc = run_load_bench(
            events, tenants, progress, checkouts, steady_rate=steady_rate, steady_s=steady_seconds
        )
    if json_out:
        print_json(doc)
        return
    table = Table("measure", "value")
    for key in (
        "events", "tenants", "broker_produce_events_per_s", "emit_events_per_s",
        "ingest_events_per_s", "freshness_burst_probes", "freshness_burst_missed",
        "freshness_burst_p50_ms", "freshness_burst_p95_ms", "steady_events_per_s",
        "freshness_probes", "freshness_missed", "freshness_p50_ms", "freshness_p95_ms",
        "checkout_p50_ms", "checkout_p95_ms",
    ):  # fmt: skip
        table.add_row(key, str(doc[key]))
    for proc, mb in doc["peak_rss_mb"].items():
        table.add_row(f"peak RSS {proc} (MB)", str(mb))
    out.print(table)


@bench_app.command("scale")
def scale(
    events: Annotated[int, typer.Option("--events", help="events in the workload")] = 20_000,
    tenants: Annotated[int, typer.Option("--tenants")] = 8,
    rate: Annotated[
        int, typer.Option("--rate", help="events/s of the load while a member joins or dies")
    ] = 300,
    replicas: Annotated[
        str, typer.Option("--replicas", help="the replica counts measured, in order, e.g. 1,2")
    ] = "1,2",
    json_out: JsonFlag = False,
) -> None:
    """The same workload at 1 and 2 replicas per group (``--replicas``): ingest, freshness,
    CPU per process, rebalance pauses, events lost or applied twice."""
    counts = tuple(int(r) for r in replicas.split(",") if r.strip().isdigit())
    if not counts or any(c < 1 for c in counts) or len(counts) != len(replicas.split(",")):
        fail(f"--replicas takes counts of 1 or more separated by commas, not {replicas!r}")
    with stages(json_out) as progress:
        doc = run_scale_bench(events, tenants, progress, replicas=counts, rate=rate)
    if json_out:
        print_json(doc)
        return
    rows = doc["rows"]
    table = Table("measure", *(f"{r['replicas']} replica(s)" for r in rows))
    for key in (
        "ingest_events_per_s", "freshness_p95_ms", "freshness_missed", "join_pause_s",
        "kill_pause_s", "events_lost", "events_applied_twice",
    ):  # fmt: skip
        table.add_row(key, *(str(r[key]) for r in rows))
    workers = sorted({w for r in rows for w in r["cpu_s_per_1000_events_by_worker"]})
    for w in workers:
        costs = (str(r["cpu_s_per_1000_events_by_worker"].get(w, "")) for r in rows)
        table.add_row(f"CPU s / 1,000 events: {w}", *costs)
    out.print(table)


@bench_app.command("neighbours")
def neighbours(
    events: Annotated[int, typer.Option("--events", help="events of the two tenants")] = 4000,
    connections: Annotated[
        int, typer.Option("--connections", help="tenant A's connections flooding checkout")
    ] = 20,
    cycles: Annotated[
        int, typer.Option("--cycles", help="quiet and flood windows per setting")
    ] = 3,
    window_seconds: Annotated[float, typer.Option("--window-seconds")] = 20.0,
    json_out: JsonFlag = False,
) -> None:
    """Tenant B's checkout and /healthz latency while tenant A floods, fair share off vs on."""
    with stages(json_out) as progress:
        doc = run_neighbours_bench(events, progress, connections, cycles, window_seconds)
    if json_out:
        print_json(doc)
        return
    table = Table(
        "fair share", "B checkout p50 / p95 quiet", "under flood", "p95 ratio",
        "B /healthz p95 quiet / flood", "A 2xx / 429 / 5xx", "B 429 / 5xx",
    )  # fmt: skip
    for r in doc["runs"]:
        q, f, a = r["quiet"], r["flood"], r["flooder"]["statuses"]
        b = Counter(q["statuses"]) + Counter(f["statuses"])
        table.add_row(
            "on" if r["limits"] else "off",
            f"{q['checkout_p50_ms']} / {q['checkout_p95_ms']} ms",
            f"{f['checkout_p50_ms']} / {f['checkout_p95_ms']} ms ({f['checkouts']})",
            f"{r['checkout_p95_ratio']:.2f}",
            f"{q['healthz_p95_ms']} / {f['healthz_p95_ms']} ms",
            f"{a.get('2xx', 0)} / {a.get('429', 0)} / {a.get('5xx', 0)}",
            f"{b.get('429', 0)} / {b.get('5xx', 0)}",
        )
    out.print(table)


@bench_app.command("read-after")
def read_after(
    bulk: Annotated[int, typer.Option("--bulk", help="tenant A's events through the SDK")] = 20_000,
    probes: Annotated[int, typer.Option("--probes", help="tenant B's marker writes per arm")] = 5,
    json_out: JsonFlag = False,
) -> None:
    """Tenant B's write in its next checkout, with after= its position vs without, while
    tenant A's bulk is in the pipeline."""
    with stages(json_out) as progress:
        doc = run_read_after_bench(bulk, probes, progress)
    if json_out:
        print_json(doc)
        return
    table = Table(
        "checkout", "cited in the first answer", "wait median / max", "stale", "missed, no warning"
    )
    a, b = doc["after"], doc["baseline"]
    table.add_row(
        "after = the write's position",
        f"{a['cited_first_answer']}/{a['probes']}",
        f"{a['waited_ms_median']} / {a['waited_ms_max']} ms",
        str(a["stale"]),
        str(a["missed_silently"]),
    )
    table.add_row(
        "without after (baseline)",
        f"{b['cited_first_answer']}/{b['probes']}",
        "-",
        "-",
        str(b["missed_silently"]),
    )
    out.print(table)
    out.print(
        f"bulk: {doc['bulk_events']} events, emitted at {doc['bulk_emit_events_per_s']:,}/s, "
        f"visible after {doc['bulk_visible_s']} s ({doc['bulk_ingest_events_per_s']:,}/s); "
        f"probes posted during its backlog: {a['during_backlog']} + {b['during_backlog']}; "
        f"read-after bound {doc['read_after_max_wait_s']:g} s"
    )


@bench_app.command("cli")
def cli(
    runs: Annotated[int, typer.Option("--runs", min=1, help="runs of each command")] = 5,
    json_out: JsonFlag = False,
) -> None:
    """Seconds from exec to exit of each light command against a running stack, beside the
    bare interpreter's start (the bar: under 1 s)."""
    with stages(json_out) as progress:
        doc = run_cli_bench(runs, progress)
    if json_out:
        print_json(doc)
        return
    table = Table("command", "median s", "max s", f"under {doc['bar_s']:g} s")
    for r in doc["commands"]:
        under = ("yes" if r["median_s"] < doc["bar_s"] else "NO") if r["light"] else "-"
        table.add_row(r["command"], f"{r['median_s']:.3f}", f"{r['max_s']:.3f}", under)
    out.print(table)
    out.print(
        f"{doc['runs']} runs each on {doc['cpus']} cores; slowest light command: "
        f"{doc['slowest_light']}"
    )


@bench_app.command("report")
def report(
    results: Annotated[Path, typer.Option("--results", help="folder of bench JSON files")],
    pages: Annotated[
        list[Path] | None,
        typer.Option(
            "--page",
            "--readme",
            help="a page holding tables (repeatable; each gets the blocks it marks)",
        ),
    ] = None,
) -> None:
    """Rewrite the result tables of the pages from the JSON the benches wrote: every table
    whose JSON is present lands on each page that marks its block, and on one page at least."""
    from memstream_bench.report import blocks_from, marked, update_readme

    blocks = blocks_from(results)
    if not blocks:
        raise typer.BadParameter(f"no bench JSON in {results}", param_hint="--results")
    chosen = pages or [Path("docs/benchmarks.md")]
    texts = {page: page.read_text() for page in chosen}
    placed = set().union(*(marked(t) for t in texts.values()))
    if missing := sorted(set(blocks) - placed):
        raise typer.BadParameter(f"no page marks the blocks {', '.join(missing)}")
    for page, text in texts.items():
        mine = {name: body for name, body in blocks.items() if name in marked(text)}
        page.write_text(update_readme(text, mine))
        err.print(f"updated {', '.join(sorted(mine))} in {page}")


@bench_app.command("chaos")
def chaos(
    faults: Annotated[
        str | None,
        typer.Option(
            "--faults",
            help="processes to kill, in order, comma-separated (default: every one, in its "
            "order: tansu, falkordb, then the stack's workers and the API)",
        ),
    ] = None,
    settle_seconds: Annotated[
        float, typer.Option("--settle-seconds", help="load after each recovery")
    ] = 5.0,
    json_out: JsonFlag = False,
) -> None:
    """Kill -9 each process of a loaded stack in turn: accepted, ledgered, lost, duplicated."""
    from memstream_bench.faults import FAULTS

    chosen = tuple(f.strip() for f in (faults or ",".join(FAULTS)).split(",") if f.strip())
    if not chosen or not set(chosen) <= set(FAULTS):
        raise typer.BadParameter(f"choose from {', '.join(FAULTS)}", param_hint="--faults")
    with stages(json_out) as progress:
        doc = run_chaos_bench(progress, settle_seconds, chosen)
    if json_out:
        print_json(doc)
        return
    table = Table(
        "fault (kill -9)", "accepted", "ledgered", "lost", "duplicated", "refused",
        "other errors", "longest gap s", "longest wait s", "recover s",
    )  # fmt: skip
    for f in doc["faults"]:
        table.add_row(
            f["fault"],
            str(f["accepted"]),
            str(f["ledgered"]),
            str(f["lost"]),
            str(f["duplicated"]),
            str(f["refused"]),
            str(f["transport_errors"] + f["non_202"]),
            f"{f['longest_gap_s']:.2f}",
            f"{f['longest_wait_s']:.2f}",
            "-" if f["recover_s"] is None else f"{f['recover_s']:.1f}",
        )
    out.print(table)
    out.print(
        "longest gap: the longest time without a 202 in the fault's window (from the kill); "
        "longest wait: the longest time one batch took from its first send to its 202"
    )
    out.print(
        f"accepted {doc['accepted']}, lost {doc['lost']}, duplicated {doc['duplicated']}, "
        f"refused {doc['refused_requests']}, transport errors {doc['transport_errors']}; "
        f"chain verifies: {doc['chain_verifies']}; projections converged: "
        f"{doc['projections_converged']} ({doc['converge_s']} s after the load)"
    )


@bench_app.command("learn")
def learn(
    families: Annotated[int, typer.Option("--families", help="task families (≤ 40)")] = 12,
    rounds: Annotated[int, typer.Option("--rounds", help="checkout → outcome rounds")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="generator seed")] = 7,
    howtos: Annotated[
        int, typer.Option("--howtos", help="how-to questions with a misleading closer match (≤ 8)")
    ] = 8,
    json_out: JsonFlag = False,
) -> None:
    """Share of checkouts whose top answer is the memory that succeeds, learning on vs off."""
    with stages(json_out) as progress:
        doc = run_learn_bench(families, rounds, seed, progress, n_howtos=howtos)
    if json_out:
        print_json(doc)
        return
    table = Table("round", "learning off", "learning on")
    for r in doc["per_round"]:
        table.add_row(str(r["round"]), f"{r['learning_off']:.2f}", f"{r['learning_on']:.2f}")
    adv = doc["adversarial_praise"]
    for when in ("before", "after"):
        table.add_row(
            f"{when} praise x{adv['events_per_arm']}",
            f"{adv[when]['off']['right_on_top']:.2f}",
            f"{adv[when]['on']['right_on_top']:.2f}",
        )
    out.print(table)
    off, on = adv["after"]["off"]["praised_on_top"], adv["after"]["on"]["praised_on_top"]
    out.print(
        f"{doc['families']} families (chance {doc['chance']:.2f}); "
        f"a praised memory on top after the burst: off {off:.2f}, on {on:.2f}"
    )
    if doc["howto"]["per_round"]:
        howto = Table("how-to round", "learning off", "learning on")
        for r in doc["howto"]["per_round"]:
            howto.add_row(str(r["round"]), f"{r['learning_off']:.2f}", f"{r['learning_on']:.2f}")
        out.print(howto)
        out.print(
            f"{doc['howto']['families']} how-to questions; the misleading memory is the closer "
            "lexical match; right answer = the first answer is the memory tasks succeed with"
        )
