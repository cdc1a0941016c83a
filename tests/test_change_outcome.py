"""Change and outcome questions: values replaced over validity intervals, and task histories
(attempts linked by task id or a retry's ``retry_of``), answered with both ends cited."""

from __future__ import annotations

import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.plan.entities import Lexicon
from memstream.checkout.plan.operation import classify
from memstream.checkout.synthesis import synthesize
from memstream.records.packet import Candidate, SynthesisResult
from memstream.records.projected import EntityView
from synthdata import NOW, event, fact


def job(fact_id: str, who: str, employer: str, start: str, **kw: str) -> Candidate:
    # The fact lane marks a predicate that means the question's words (the predicate ranker).
    made = fact(fact_id, who, "works_at", obj=employer, valid_from=start, **kw)  # type: ignore[arg-type]
    return made.model_copy(update={"relevance": 0.9})


JOBS = [
    job("bob-1#0", "Bob Marley-Kent", "Initech", "2024-01-05T00:00:00Z",
        valid_to="2024-04-01T00:00:00Z", superseded_by="bob-2#0"),
    job("bob-2#0", "Bob Marley-Kent", "Globex", "2024-04-01T00:00:00Z"),
    job("zoe-1#0", "Zoë Åberg", "Hooli", "2024-02-01T00:00:00Z",
        valid_to="2024-05-20T00:00:00Z", superseded_by="zoe-2#0"),
    job("zoe-2#0", "Zoë Åberg", "Umbrella", "2024-05-20T00:00:00Z"),
    job("carl-1#0", "Carl", "Initech", "2024-01-10T00:00:00Z"),
    event("lock", "The lock timeout happened because the nightly batch job held a lock on "
          "orders.", "2024-05-02T10:00:00Z", agent="ops"),
]  # fmt: skip


# What the tenant's graph knows: lower-case and accent-free questions still find them.
PEOPLE = Lexicon.build(
    EntityView(key=k, name=n, kind="person", subject=True)
    for k, n in [("bob marley-kent", "Bob Marley-Kent"), ("zoe aberg", "Zoë Åberg"),
                 ("carl", "Carl")]
)  # fmt: skip


def ask(query: str, cands: list[Candidate], as_of: str | None = None) -> SynthesisResult:
    return synthesize(plan_query(query, NOW, as_of, PEOPLE), cands, names=PEOPLE.entities)


@pytest.mark.parametrize(
    ("query", "op"),
    [
        ("Who changed jobs?", "change"),
        ("who switched employers?", "change"),
        ("Did Bob change jobs?", "change"),
        ("did zoë move?", "change"),
        ("What changed for the user since Monday?", "change"),
        ("When did Bob move to Oslo?", "lookup"),
        ("Where did Ana Ruiz move from?", "lookup"),
        ("Would Ana move back home?", "lookup"),
        ("What new hobby did Ana start?", "lookup"),
        ("what's new with the user?", "change"),
        ("How long ago did Bob change jobs?", "temporal_interval"),
        ("How do I change my password?", "lookup"),
        ("Did the orders database migration succeed?", "outcome"),
        ("was the key rotation successful?", "outcome"),
        ("Did the fix work?", "outcome"),
        ("What failed and why?", "outcome"),
        ("Did Bob work at Initech?", "lookup"),
    ],
)
def test_change_and_outcome_are_read_from_the_wording(query: str, op: str) -> None:
    assert classify(query) == op


@pytest.mark.parametrize(
    "query", ["Who changed jobs?", "who switched jobs?", "who has changed jobs"]
)
def test_who_changed_names_each_subject_with_a_replaced_value(query: str) -> None:
    res = ask(query, JOBS)
    assert res.answerability == "answer_from_memory"
    top = res.answer_candidates[0]
    assert top.value == ["Zoë Åberg", "Bob Marley-Kent"]  # their names; newest change first
    assert set(top.support_ids) == {"bob-1#0", "bob-2#0", "zoe-1#0", "zoe-2#0"}
    assert "lock" not in top.support_ids and "carl-1#0" not in top.support_ids
    assert "Initech (until 2024-04-01) → Globex (from 2024-04-01)" in top.answer


@pytest.mark.parametrize(
    ("query", "old", "new"),
    [
        ("Did Bob Marley-Kent change jobs?", "bob-1#0", "bob-2#0"),
        ("did bob marley-kent switch employers?", "bob-1#0", "bob-2#0"),
        ("Has Zoë Åberg changed jobs?", "zoe-1#0", "zoe-2#0"),
        ("did zoe aberg change jobs", "zoe-1#0", "zoe-2#0"),
    ],
)
def test_did_x_change_y_is_yes_citing_both_ends(query: str, old: str, new: str) -> None:
    res = ask(query, JOBS)
    assert res.answerability == "answer_from_memory"
    top = res.answer_candidates[0]
    assert top.value is True and top.answer.startswith("Yes")
    assert top.support_ids == [new, old]


def test_the_words_of_a_facts_own_event_make_it_what_the_question_asks() -> None:
    # No predicate means "jobs" here; the new value's own event says so, and the old value
    # is its other end.
    bare = [f.model_copy(update={"relevance": None}) for f in JOBS[:5]]
    told = event("bob-2", "Bob Marley-Kent left Initech for a new job at Globex",
                 "2024-04-01T09:00:00Z", agent="bob")  # fmt: skip
    moved = event("zoe-2", "Zoë Åberg moved her things to the Umbrella office",
                  "2024-05-20T09:00:00Z", agent="zoe")  # fmt: skip
    res = ask("Who changed jobs?", [*bare, told, moved])
    assert res.answerability == "answer_from_memory"
    top = res.answer_candidates[0]
    assert top.value == ["Bob Marley-Kent"]
    assert set(top.support_ids) == {"bob-1#0", "bob-2#0"}
    assert ask("Who changed jobs?", bare).answerability == "ask_user"  # nothing says jobs


def test_no_replacement_on_record_asks_the_user() -> None:
    res = ask("Did Carl change jobs?", JOBS)
    assert res.answerability == "ask_user"
    assert res.answer_candidates[0].value is False and not res.answer_candidates[0].support_ids


def test_a_change_question_is_never_answered_from_a_sentence() -> None:
    # Only the cause sentence: no fact tells a change, so nothing answers.
    res = ask("Who changed jobs?", [JOBS[-1], JOBS[4]])
    assert res.answerability == "ask_user"
    assert not any(a.support_ids for a in res.answer_candidates)


def test_what_changed_since_keeps_changes_inside_the_period() -> None:
    res = ask("What changed since May 1, 2024?", JOBS)
    top = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert set(top.support_ids) == {"zoe-1#0", "zoe-2#0"}  # Bob's change was in April


def test_what_changed_for_the_user_lists_the_users_own_changes() -> None:
    home = [
        fact("u-1#0", "user", "lives_in", obj="Oslo", valid_from="2024-01-01T00:00:00Z",
             valid_to="2024-05-10T00:00:00Z", superseded_by="u-2#0"),
        fact("u-2#0", "user", "lives_in", obj="Bergen", valid_from="2024-05-10T00:00:00Z"),
    ]  # fmt: skip
    res = ask("what changed for the user since May 1, 2024?", [*JOBS, *home])
    top = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert top.support_ids == ["u-2#0", "u-1#0"]
    assert "Oslo (until 2024-05-10) → Bergen (from 2024-05-10)" in top.answer


def test_as_of_before_a_change_sees_none() -> None:
    res = ask("Did Bob Marley-Kent change jobs?", JOBS, as_of="2024-03-01T00:00:00Z")
    assert res.answerability == "ask_user"
    assert res.answer_candidates[0].value is False


def task(item_id: str, text: str, at: str, type: str = "task.outcome", **meta: str) -> Candidate:
    made = event(item_id, text, at, agent="coder", type=type)
    return made.model_copy(update={"metadata": dict(meta)})


MIGRATION = [
    task("m-start", "task t-mig started: migrate the orders database to v2",
         "2024-05-01T09:00:00Z", type="task.started"),
    task("m-fail", "task t-mig failure: orders database migration hit a lock timeout",
         "2024-05-01T09:30:00Z"),
    task("r-start", "task t-mig-2 started: retry the orders database migration",
         "2024-05-02T09:00:00Z", type="task.started", retry_of="t-mig"),
    task("r-ok", "task t-mig-2 success: done", "2024-05-02T09:40:00Z"),
    task("k-start", "task t-keys started: rotate the signing keys", "2024-05-03T09:00:00Z",
         type="task.started"),
]  # fmt: skip


@pytest.mark.parametrize(
    "query",
    [
        "Did the orders database migration succeed?",
        "did the orders database migration work?",
        "Was the orders database migration successful?",
    ],
)
def test_an_outcome_is_the_latest_attempt_citing_earlier_failures(query: str) -> None:
    res = ask(query, MIGRATION)
    assert res.answerability == "answer_from_memory"
    top = res.answer_candidates[0]
    assert top.value is True and top.answer.startswith("Yes: task t-mig-2 success")
    assert top.support_ids == ["r-ok", "m-fail"]
    assert "lock timeout" in top.answer  # the earlier failure's cause


def test_a_start_alone_never_answers_whether_it_worked() -> None:
    res = ask("Did the signing key rotation succeed?", MIGRATION)
    assert res.answerability == "ask_user"
    assert not any(a.support_ids for a in res.answer_candidates)
    assert any("only the start" in w.message for w in res.warnings)


def test_a_retry_caused_by_the_failure_joins_its_history() -> None:
    # No shared task id and no retry_of: the retry's start was caused by the failed outcome.
    retried = task("b-start", "task t-backfill-b started: backfill the invoices table again",
                   "2024-05-06T09:00:00Z", type="task.started")  # fmt: skip
    retried = retried.model_copy(update={"caused_by": ["b-fail"]})
    history = [
        task("b-fail", "task t-backfill failure: invoices backfill ran out of disk",
             "2024-05-05T09:00:00Z"),
        retried,
        task("b-ok", "task t-backfill-b success: finished", "2024-05-06T10:00:00Z"),
    ]  # fmt: skip
    res = ask("Did the invoices backfill succeed?", history)
    top = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert top.value is True and top.support_ids == ["b-ok", "b-fail"]
    assert "out of disk" in top.answer


def test_the_latest_failure_is_a_no() -> None:
    failed_again = [*MIGRATION[:4], task("r-fail", "task t-mig-3 failure: disk full",
                                         "2024-05-04T09:00:00Z", retry_of="t-mig-2")]  # fmt: skip
    res = ask("Did the orders database migration succeed?", failed_again)
    top = res.answer_candidates[0]
    assert top.value is False and top.answer.startswith("No: task t-mig-3 failure: disk full")
    assert top.support_ids[0] == "r-fail"


def test_what_failed_names_the_cause_and_what_came_after() -> None:
    res = ask("What failed and why?", MIGRATION)
    top = res.answer_candidates[0]
    assert res.answerability == "answer_from_memory"
    assert top.value == [
        "task t-mig failure: orders database migration hit a lock timeout "
        "(then task t-mig-2 succeeded)"
    ]
    assert top.support_ids == ["m-fail", "r-ok"]


def test_what_failed_in_a_period_keeps_to_its_failures() -> None:
    recent = task("w-fail", "task t-report failure: weekly report timed out on the archive",
                  "2024-06-05T09:00:00Z")  # fmt: skip
    res = ask("what failed last week?", [*MIGRATION, recent])  # NOW is 2024-06-12
    top = res.answer_candidates[0]
    assert top.support_ids == ["w-fail"]
    assert top.value == ["task t-report failure: weekly report timed out on the archive"]
    none = ask("what failed last week?", MIGRATION)
    assert not any(a.support_ids for a in none.answer_candidates)


def test_whether_it_worked_in_a_period_reads_only_outcomes_in_it() -> None:
    res = ask("Did the orders database migration succeed last week?", MIGRATION)
    assert res.answerability == "ask_user"
    assert not any(a.support_ids for a in res.answer_candidates)
    assert [w.kind for w in res.warnings] == ["missing_evidence"]


def test_a_world_question_with_fail_in_it_is_not_answered_from_work() -> None:
    world = [event("exam", "Carl failed his driving test in March.", "2024-03-20T10:00:00Z")]
    res = ask("Did Carl fail his driving test?", world + MIGRATION)
    top = res.answer_candidates[0]
    assert top.support_ids == ["exam"] and top.value is True


@pytest.mark.parametrize(
    ("text", "speaker", "query", "span"),
    [
        ("I moved to Lisbon last spring; my sister Ana lives in Porto.", "Inês",
         "Where does Inês live?", "I moved to Lisbon last spring"),
        ("My sister Ana lives in Porto, and I moved to Lisbon last spring.", "Inês",
         "where does ines live", "I moved to Lisbon last spring"),
        ("Tom Ward lives in Oslo. Inês Sousa lives in Lisbon.", "Tom Ward",
         "Where does Inês Sousa live?", "Inês Sousa lives in Lisbon"),
    ],
)  # fmt: skip
def test_the_answer_is_the_clause_about_whom_the_question_asks(
    text: str, speaker: str, query: str, span: str
) -> None:
    said = event("said", text, "2024-05-01T10:00:00Z", agent=speaker)
    people = Lexicon.build(
        EntityView(key=k, name=n, kind="person", actor=True)
        for k, n in [("ines", "Inês"), ("ines sousa", "Inês Sousa"), ("tom ward", "Tom Ward")]
    )
    res = synthesize(plan_query(query, NOW, None, people), [said])
    top = res.answer_candidates[0]
    assert top.answer == span and top.support_ids == ["said"]  # the whole event supports it


def test_one_clause_or_no_clear_subject_keeps_the_whole_memory() -> None:
    for text in ("I live in Lisbon these days.", "I love living here. I live in Lisbon."):
        said = event("said", text, "2024-05-01T10:00:00Z", agent="Inês")
        res = synthesize(plan_query("Where does Inês live?", NOW), [said])
        assert res.answer_candidates[0].answer == text


@pytest.mark.parametrize(
    "text",
    [
        "Ana fixed the heater on Tuesday.",
        "The heater was fixed by the plumber on Tuesday.",
        "the heater was fixed by ana",
        "I fixed the heater yesterday.",
        "She fixed the heater on Tuesday, finally.",
        "You fixed the heater on Tuesday.",
        "Zoë Åberg-Lind fixed the heater.",
    ],
)
def test_a_who_question_is_answered_by_a_memory_that_can_say_who(text: str) -> None:
    res = synthesize(plan_query("Who fixed the heater?", NOW), [event("e", text, agent="ops")])
    assert res.answerability == "answer_from_memory", res
    assert res.answer_candidates[0].support_ids == ["e"]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("The heater was fixed on Tuesday after the lock timeout.", "Who fixed the heater?"),
        ("The heater was fixed on Tuesday after the lock timeout.", "who fixed the heater"),
        ("The migration failed because the nightly batch job held a lock on orders.",
         "Who broke the migration?"),
    ],
)  # fmt: skip
def test_a_who_question_is_not_answered_by_a_memory_naming_no_one(text: str, query: str) -> None:
    res = synthesize(plan_query(query, NOW), [event("e", text, agent="ops")])
    assert res.answerability == "ask_user"
    assert not any(a.support_ids for a in res.answer_candidates)
    assert any("name no one" in w.message for w in res.warnings)
