"""The retrospective pass, pure: binding, credit and blame, proposals, waiting, determinism."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import orjson
from memstream.events.envelope import (
    Event,
    MemoryFeedback,
    MemoryInvalidate,
    Observation,
    TaskOutcome,
    TaskStarted,
)
from memstream.events.payloads import (
    MemoryFeedbackPayload,
    MemoryInvalidatePayload,
    ObservationPayload,
    QuestionFamily,
    TaskOutcomePayload,
    TaskStartedPayload,
)
from memstream.learning.retrospective import (
    STREAM,
    LedgerRecord,
    Proposal,
    Result,
    RetroPolicy,
    Retrospective,
    Settled,
    read_entry,
    read_trace,
)
from memstream.learning.trace import CheckoutTrace
from memstream.ledger.canonical import GENESIS_HASH, canonical_json
from memstream.ledger.entry import build_entry
from memstream.ledger.purge import purged_form

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TENANT = "acme"
FAMILY = QuestionFamily(operation="lookup", entities=["the user"], terms=["coffe", "order"])


def trace(
    packet: str,
    *,
    task: str | None = None,
    stream: str | None = None,
    answer: Sequence[str] = ("obs-oat",),
    cited: Sequence[str] = ("obs-oat", "obs-soy"),
    at: datetime = T0,
    tenant: str = TENANT,
) -> CheckoutTrace:
    return CheckoutTrace(
        packet_id=packet,
        tenant=tenant,
        query="What does the user order at the café?",
        task_id=task,
        stream=stream,
        answerability="answer_from_memory",
        family=FAMILY,
        answer_ids=list(answer),
        cited_ids=list(cited),
        at=at,
        version="v1",
    )


def outcome(
    oid: str,
    task: str,
    status: str,
    *,
    packets: Sequence[str] = (),
    used: Sequence[str] = (),
    score: float | None = None,
    stream: str = "errands",
    at: datetime = T0 + timedelta(minutes=1),
) -> TaskOutcome:
    return TaskOutcome(
        id=oid,
        tenant=TENANT,
        stream=stream,
        agent="barista-bot",
        occurred_at=at,
        type="task.outcome",
        payload=TaskOutcomePayload.model_validate(
            {
                "task_id": task,
                "status": status,
                "score": score,
                "checkout_ids": list(packets),
                "used_ids": list(used),
            }
        ),
    )


def entry(
    event: Event, offset: int, partition: int = 0, ingested: datetime | None = None
) -> LedgerRecord:
    at = ingested or event.occurred_at + timedelta(seconds=1)
    assert isinstance(event, TaskOutcome | TaskStarted | MemoryFeedback | MemoryInvalidate)
    return LedgerRecord(event, partition, offset, at)


def settled(results: list[Result]) -> list[Settled]:
    return [r for r in results if isinstance(r, Settled)]


def proposals(results: list[Result]) -> list[MemoryInvalidate]:
    return [r.event for r in results if isinstance(r, Proposal)]


def feedback(results: list[Result]) -> list[MemoryFeedback]:
    return [e for r in settled(results) for e in r.feedback]


def with_traces(*traces: CheckoutTrace, policy: RetroPolicy | None = None) -> Retrospective:
    retro = Retrospective(policy)
    for t in traces:
        retro.add_trace(t)
    return retro


NOW = T0 + timedelta(minutes=2)


# ---------------------------------------------------------------- binding


def test_an_outcome_binds_to_the_packets_it_names_and_only_those() -> None:
    retro = with_traces(trace("pk-1", task="t-1"), trace("pk-2", task="t-1", answer=["obs-soy"]))
    o = outcome("out-1", "t-1", "failure", packets=["pk-2"])
    results = retro.observe(entry(o, 10), NOW)
    [s] = settled(results)
    assert (s.result, s.binding, s.packets) == ("bound", "checkout_ids", ("pk-2",))
    [fb] = s.feedback
    assert fb.payload.target_ids == ["obs-soy"] and fb.payload.signal == -1.0
    assert fb.payload.packet_id == "pk-2" and fb.payload.family == FAMILY
    assert fb.payload.source == "retrospective" and fb.payload.outcome == "failure"
    assert fb.payload.task_id == "t-1" and fb.caused_by == ["out-1"]
    assert fb.occurred_at == o.occurred_at and fb.stream == STREAM and fb.tenant == TENANT


def test_without_checkout_ids_an_outcome_binds_to_its_tasks_traces() -> None:
    retro = with_traces(
        trace("pk-1", task="t-7", answer=["obs-oat"]),
        trace("pk-2", task="t-7", answer=["obs-oat", "obs-soy"]),
        trace("pk-3", task="t-8", answer=["obs-tea"]),
    )
    [s] = settled(retro.observe(entry(outcome("out-7", "t-7", "success"), 3), NOW))
    assert (s.binding, s.packets) == ("task", ("pk-1", "pk-2"))
    # a memory in two packets of one task is credited once
    assert [(f.payload.packet_id, f.payload.target_ids) for f in s.feedback] == [
        ("pk-1", ["obs-oat"]),
        ("pk-2", ["obs-soy"]),
    ]


def test_without_task_traces_an_outcome_binds_to_its_streams_traces_since_the_task_began() -> None:
    retro = with_traces(
        trace("before", stream="errands", at=T0 - timedelta(minutes=5)),
        trace("during", stream="errands", at=T0 + timedelta(seconds=20)),
        trace("other-task", stream="errands", task="t-9", at=T0 + timedelta(seconds=30)),
        trace("other-stream", stream="chat", at=T0 + timedelta(seconds=30)),
        trace("after", stream="errands", at=T0 + timedelta(minutes=10)),
    )
    started = TaskStarted(
        id="start-1", tenant=TENANT, stream="errands", agent="barista-bot", occurred_at=T0,
        type="task.started", payload=TaskStartedPayload(task_id="t-1"),
    )  # fmt: skip
    assert retro.observe(entry(started, 1, ingested=T0), NOW) == []
    [s] = settled(retro.observe(entry(outcome("out-1", "t-1", "failure"), 2), NOW))
    assert (s.binding, s.packets) == ("stream", ("during",))


def test_without_a_task_start_stream_binding_looks_back_a_bounded_window() -> None:
    retro = with_traces(
        trace("old", stream="errands", at=T0 - timedelta(hours=3)),
        trace("recent", stream="errands", at=T0 - timedelta(minutes=30)),
    )
    [s] = settled(retro.observe(entry(outcome("out-1", "t-1", "success"), 2), NOW))
    assert s.packets == ("recent",)


# ---------------------------------------------------------------- credit and blame


def test_used_ids_are_credited_with_certainty_one_in_the_packet_that_cited_them() -> None:
    retro = with_traces(
        trace("pk-1", task="t-1", answer=["obs-oat"], cited=["obs-oat"]),
        trace("pk-2", task="t-1", answer=["fact-9#0"], cited=["fact-9#0", "obs-soy"]),
    )
    o = outcome("out-1", "t-1", "success", used=["obs-soy", "fact-9", "elsewhere"])
    [s] = settled(retro.observe(entry(o, 1), NOW))
    assert s.basis == "used"
    # "fact-9" names the event behind the cited fact; an id no packet cited goes with the first
    got = [(f.payload.packet_id, f.payload.target_ids, f.payload.certainty) for f in s.feedback]
    assert got == [
        ("pk-1", ["elsewhere"], 1.0),
        ("pk-2", ["obs-soy", "fact-9"], 1.0),
    ]


def test_used_ids_without_any_trace_are_still_credited_once_the_grace_is_over() -> None:
    retro = Retrospective()
    o = outcome("out-1", "t-1", "failure", used=["obs-oat"])
    assert retro.observe(entry(o, 1), NOW) == []
    [s] = settled(retro.settle(NOW + RetroPolicy().grace))
    assert (s.result, s.binding) == ("unbound", "none")
    [fb] = s.feedback
    assert fb.payload.target_ids == ["obs-oat"] and fb.payload.packet_id is None
    assert fb.payload.family is None and fb.payload.certainty == 1.0


def test_without_used_ids_credit_is_spread_over_the_answer_and_the_uncertainty_recorded() -> None:
    retro = with_traces(
        trace("pk-1", task="t-1", answer=["obs-oat", "obs-soy"]),
        trace("pk-2", task="t-2", answer=[], cited=["c-1", "c-2", "c-3", "c-4"]),
    )
    [s1] = settled(retro.observe(entry(outcome("out-1", "t-1", "failure"), 1), NOW))
    [fb] = s1.feedback
    assert s1.basis == "spread" and fb.payload.certainty == 0.5
    assert fb.payload.target_ids == ["obs-oat", "obs-soy"] and "spread" in (fb.payload.reason or "")
    # no answer: the first cited items, each with a third of the certainty
    [s2] = settled(retro.observe(entry(outcome("out-2", "t-2", "success"), 2), NOW))
    assert s2.feedback[0].payload.target_ids == ["c-1", "c-2", "c-3"]
    assert s2.feedback[0].payload.certainty == round(1 / 3, 4)


def test_partial_scores_abandoned_and_partial_without_a_score() -> None:
    retro = with_traces(trace("pk-1", task="t-1"), trace("pk-2", task="t-2"))
    [s] = settled(retro.observe(entry(outcome("o-1", "t-1", "partial", score=0.75), 1), NOW))
    assert s.feedback[0].payload.signal == 0.5 and s.feedback[0].payload.outcome == "partial"
    [s] = settled(retro.observe(entry(outcome("o-2", "t-2", "partial", score=0.1), 2), NOW))
    assert s.feedback[0].payload.signal == -0.8
    for oid, status, score in (("o-3", "abandoned", None), ("o-4", "partial", None),
                               ("o-5", "partial", 0.5)):  # fmt: skip
        [s] = settled(retro.observe(entry(outcome(oid, "t-1", status, score=score), 3), NOW))
        assert (s.result, s.feedback) == ("ignored", ()) and s.reason.startswith(status)
    assert not retro.waiting


# ---------------------------------------------------------------- proposals


def fail_task(retro: Retrospective, n: int, memory: str = "obs-oat", **kw: object) -> list[Result]:
    retro.add_trace(trace(f"pk-f{n}", task=f"tf-{n}", answer=[memory]))
    o = outcome(f"fail-{n}", f"tf-{n}", "failure", used=[memory], **kw)  # type: ignore[arg-type]
    return retro.observe(entry(o, 100 + n), NOW)


def succeed_task(retro: Retrospective, n: int, memory: str = "obs-oat") -> list[Result]:
    retro.add_trace(trace(f"pk-s{n}", task=f"ts-{n}", answer=[memory]))
    o = outcome(f"ok-{n}", f"ts-{n}", "success", used=[memory])
    return retro.observe(entry(o, 200 + n), NOW)


def test_three_failed_tasks_make_one_proposal_two_do_not() -> None:
    retro = Retrospective()
    assert proposals(fail_task(retro, 1) + fail_task(retro, 2)) == []
    [p] = proposals(fail_task(retro, 3))
    assert p.payload.review_status == "proposed" and p.payload.target_ids == ["obs-oat"]
    assert sorted(p.caused_by) == ["fail-1", "fail-2", "fail-3"]
    assert all(t in p.payload.reason for t in ("tf-1", "tf-2", "tf-3"))
    assert p.stream == STREAM and p.occurred_at == outcome("x", "x", "failure").occurred_at
    assert proposals(fail_task(retro, 4)) == []  # one proposal per memory


def test_no_proposal_while_successes_keep_up_with_failures() -> None:
    retro = Retrospective()
    for n in range(3):
        succeed_task(retro, n)
    assert proposals([r for n in range(3) for r in fail_task(retro, n)]) == []
    assert len(proposals(fail_task(retro, 3))) == 1  # now failing more often than succeeding


def test_blame_spread_thin_does_not_count_toward_a_proposal() -> None:
    retro = Retrospective()
    for n in range(4):
        retro.add_trace(trace(f"pk-{n}", task=f"t-{n}", answer=["a", "b", "obs-oat"]))
        results = retro.observe(entry(outcome(f"o-{n}", f"t-{n}", "failure"), n), NOW)
        assert feedback(results)[0].payload.certainty == round(1 / 3, 4)
        assert proposals(results) == []


# ---------------------------------------------------------------- waiting and the commit bound


def test_an_outcome_naming_an_unseen_packet_waits_and_holds_the_commit_floor() -> None:
    retro = Retrospective()
    assert retro.observe(entry(outcome("o-1", "t-1", "success", packets=["pk-9"]), 7), NOW) == []
    assert retro.floor(0) == 7 and retro.floor(1) is None
    retro.add_trace(trace("pk-x", task="t-2"))
    later = retro.observe(entry(outcome("o-2", "t-2", "success"), 8), NOW)
    assert settled(later)[0].result == "bound" and retro.floor(0) == 7  # not past the waiting one
    assert retro.settle(NOW + timedelta(seconds=1)) == []
    retro.add_trace(trace("pk-9", task="t-1"))
    [s] = settled(retro.settle(NOW + timedelta(seconds=2)))
    assert (s.outcome_id, s.result) == ("o-1", "bound") and retro.floor(0) is None


def test_after_the_grace_an_outcome_binds_with_what_exists() -> None:
    grace = timedelta(seconds=30)
    retro = with_traces(trace("pk-1", task="t-1"), policy=RetroPolicy(grace=grace))
    o = outcome("o-1", "t-1", "failure", packets=["pk-1", "pk-lost"])
    assert retro.observe(entry(o, 3), NOW) == []
    assert retro.settle(NOW + grace - timedelta(seconds=1)) == []
    [s] = settled(retro.settle(NOW + grace))
    assert (s.result, s.packets) == ("late", ("pk-1",)) and len(s.feedback) == 1
    nothing = outcome("o-2", "t-2", "failure", packets=["pk-gone"])
    assert retro.observe(entry(nothing, 4), NOW) == []
    [s] = settled(retro.settle(NOW + grace))
    assert (s.result, s.feedback) == ("unbound", ())


def test_forgetting_a_partition_drops_its_waiting_outcomes() -> None:
    retro = Retrospective()
    retro.observe(entry(outcome("o-1", "t-1", "success", packets=["pk-9"]), 7, partition=2), NOW)
    retro.forget([2])
    assert retro.floor(2) is None and not retro.waiting


# ---------------------------------------------------------------- determinism and rebuild


def run_all(retro: Retrospective) -> list[Result]:
    out: list[Result] = []
    for n in range(3):
        out += fail_task(retro, n)
    out += succeed_task(retro, 9)
    return out


def test_the_same_outcomes_give_the_same_events() -> None:
    first, second = run_all(Retrospective()), run_all(Retrospective())
    events = [e.model_dump_json() for e in feedback(first) + proposals(first)]
    assert events == [e.model_dump_json() for e in feedback(second) + proposals(second)]
    ids = [e.id for e in feedback(first)]
    assert len(set(ids)) == len(ids) == 4


def test_reprocessing_an_outcome_repeats_its_ids_and_counts_nothing_twice() -> None:
    retro = Retrospective()
    first = fail_task(retro, 1) + fail_task(retro, 2)
    again = fail_task(retro, 2) + fail_task(retro, 2)
    assert {e.id for e in feedback(again)} == {feedback(first)[1].id}
    assert proposals(again) == []  # still two distinct failed tasks


def test_tallies_rebuild_from_the_ledgered_feedback_and_proposals() -> None:
    live = Retrospective()
    emitted = run_all(live)
    rebuilt = Retrospective()
    for n, e in enumerate(feedback(emitted)):
        rebuilt.rebuild(entry(e, n))
    [p] = proposals(rebuilt.due_proposals())
    [live_p] = proposals(emitted)
    # the same id (the sequencer keeps whichever came first), the same tasks behind it
    assert (p.id, p.caused_by, p.payload.target_ids) == (
        live_p.id,
        live_p.caused_by,
        live_p.payload.target_ids,
    )
    assert rebuilt.due_proposals() == []
    # a proposal already in the ledger is not made again after a restart
    restarted = Retrospective()
    for n, e in enumerate([*feedback(emitted), *proposals(emitted)]):
        restarted.rebuild(entry(e, n))
    assert restarted.due_proposals() == []
    assert proposals(fail_task(restarted, 5)) == []


def test_explicit_feedback_is_not_a_task_record() -> None:
    retro = Retrospective()
    for n in range(5):
        praise = MemoryFeedback(
            id=f"praise-{n}", tenant=TENANT, stream="feedback", agent="someone", occurred_at=T0,
            type="memory.feedback",
            payload=MemoryFeedbackPayload(target_ids=["obs-oat"], signal=-1.0, task_id=f"t-{n}",
                                          outcome="failure"),
        )  # fmt: skip
        assert retro.observe(entry(praise, n), NOW) == []
    assert retro.due_proposals() == []


# ---------------------------------------------------------------- reading records


def ledger_bytes(event: Event) -> bytes:
    _, value = build_entry(
        event.model_dump(mode="json"), 1, GENESIS_HASH, "2026-03-02T09:00:05Z", {"offset": 0}
    )
    return value


def test_reading_ledger_entries() -> None:
    o = outcome("o-1", "t-1", "success")
    record = read_entry(ledger_bytes(o), 3, 42)
    assert isinstance(record, LedgerRecord)
    assert (record.event, record.partition, record.offset) == (o, 3, 42)
    assert record.ingested_at == datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)
    chatter = Observation(
        id="obs-1", tenant=TENANT, stream="s", agent="a", occurred_at=T0, type="observation",
        payload=ObservationPayload(text='she said "type":"task.outcome" once'),
    )  # fmt: skip
    assert read_entry(ledger_bytes(chatter), 0, 0) is None
    broken = orjson.loads(ledger_bytes(o))
    broken["payload"]["status"] = "exploded"
    assert "status" in str(read_entry(orjson.dumps(broken), 0, 0))
    assert str(read_entry(b'{"type":"task.outcome"', 0, 0)).startswith("undecodable")
    assert read_entry(None, 0, 0) is None
    invalidate = MemoryInvalidate(
        id="inv-1", tenant=TENANT, stream="s", agent="a", occurred_at=T0,
        type="memory.invalidate",
        payload=MemoryInvalidatePayload(target_ids=["x"], reason="wrong", review_status="proposed"),
    )  # fmt: skip
    assert isinstance(read_entry(ledger_bytes(invalidate), 0, 0), LedgerRecord)


def test_a_purged_outcome_is_skipped_not_dead_lettered() -> None:
    """After a restart the restored ledger holds purged entries: no content, type kept."""
    purged = purged_form(orjson.loads(ledger_bytes(outcome("o-1", "t-1", "success"))), "p-1")
    assert purged["type"] == "task.outcome" and "payload" not in purged
    assert read_entry(orjson.dumps(purged), 0, 0) is None
    assert read_entry(canonical_json(purged), 0, 0) is None


def test_reading_checkout_traces() -> None:
    t = trace("pk-1", task="t-1")
    assert read_trace(t.model_dump_json().encode()) == t
    naive = orjson.loads(t.model_dump_json())
    naive["at"] = "2026-03-02T09:00:00"
    read = read_trace(orjson.dumps(naive))
    assert isinstance(read, CheckoutTrace) and read.at == T0
    assert str(read_trace(b'{"packet_id": 1}')).startswith("malformed checkout trace")
    too_long = t.model_copy(update={"packet_id": "pk-" + "x" * 300})
    assert "packet_id" in str(read_trace(too_long.model_dump_json().encode()))


def test_the_trace_table_is_bounded_and_its_indexes_follow() -> None:
    retro = with_traces(
        *(trace(f"pk-{n}", task=f"t-{n % 2}", stream="errands") for n in range(5)),
        policy=RetroPolicy(max_traces=3),
    )
    assert len(retro.traces) == 3 and retro.traces.get(TENANT, "pk-1") is None
    assert [t.packet_id for t in retro.traces.of_task(TENANT, "t-0")] == ["pk-2", "pk-4"]
    assert [t.packet_id for t in retro.traces.of_stream(TENANT, "errands")] == [
        "pk-2",
        "pk-3",
        "pk-4",
    ]
    assert all(t.query == "" for t in retro.traces.of_stream(TENANT, "errands"))  # not kept
