"""The first answer follows what task outcomes taught (synthesis.learned), whatever the priors
could do to the ranking: the closer lexical match that failed loses the first answer to the
memory that succeeded, its confidence reflects its record, and it stays in the packet, flagged.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.checkout.plan import plan_query
from memstream.checkout.synthesis import synthesize
from memstream.checkout.synthesis.learned import demoted_ids, discounted
from memstream.events.payloads import QuestionFamily
from memstream.learning.priors import (
    apply_priors,
    learned_pool,
    outcome_records,
    priors,
    relevant_ids,
)
from memstream.learning.trace import family_of
from memstream.records.packet import (
    AnswerCandidate,
    Candidate,
    EvidenceRow,
    OutcomeRecord,
    SynthesisResult,
)
from memstream.records.projected import FeedbackRecord
from synthdata import NOW, event, fact, ref

CLOCK = datetime(2024, 6, 12, 10, 0, tzinfo=UTC)
QUESTION = "How do I restart the nightly payment worker on the staging cluster?"
# The misleading memory shares six words with the question, the right one three (enough
# support): the bounded prior (±1 focus term each way) cannot turn the ranking on its own.
CLOSE = event(
    "restart-a",
    "To restart the nightly payment worker on the staging cluster, reboot the cluster host.",
    "2024-05-20T09:00:00Z",
    score=0.04,
)
FAR = event(
    "restart-b",
    "The payment worker restarts cleanly with kubectl rollout of deploy/payments.",
    "2024-05-01T09:00:00Z",
    score=0.02,
)
UNRELATED = event("lunch", "Lunch with the Ørsted team was at Café Noir.", score=0.01)
POOL = [CLOSE, FAR, UNRELATED]


def record(
    target: str,
    signal: float,
    n: int,
    outcome: str | None,
    family: QuestionFamily | None,
) -> FeedbackRecord:
    return FeedbackRecord(
        tenant="t1",
        feedback_id=f"fb-{target}-{n}#0",
        event_id=f"fb-{target}-{n}",
        target_id=target,
        signal=signal,
        source="retrospective" if outcome else "explicit",
        task_id=f"task-{target}-{n}" if outcome else None,
        outcome=outcome,
        family=family,
        at="2024-06-10T10:00:00Z",
    )


def outcomes(
    query: str, failed: str, succeeded: str, n: int = 3, family_of_success: str | None = None
) -> list[FeedbackRecord]:
    """``n`` failures on ``failed`` and ``n`` successes on ``succeeded`` for ``query`` (the
    successes for another question when ``family_of_success`` is given)."""
    fam = family_of(plan_query(query, NOW))
    other = family_of(plan_query(family_of_success, NOW)) if family_of_success else fam
    return [record(failed, -1.0, i, "failure", fam) for i in range(n)] + [
        record(succeeded, 1.0, i, "success", other) for i in range(n)
    ]


def answer(query: str, pool: list[Candidate], records: list[FeedbackRecord]) -> SynthesisResult:
    """The checkout's learning and synthesis steps, as the service runs them."""
    plan = plan_query(query, NOW)
    ranked, found, _ = learned_pool(plan, pool, records, CLOCK)
    return synthesize(plan, ranked, outcomes=outcome_records(found, ranked))


def top(res: SynthesisResult) -> list[str]:
    return res.answer_candidates[0].support_ids if res.answer_candidates else []


def of(res: SynthesisResult, item_id: str) -> AnswerCandidate:
    (found,) = [a for a in res.answer_candidates if item_id in a.support_ids]
    return found


def flagged(res: SynthesisResult, item_id: str) -> bool:
    """The first answer names ``item_id`` as left out for its failure record, and no answer
    resting on it keeps over half its confidence."""
    first = res.answer_candidates[0]
    named = any(e.item_id == item_id and e.reason == "failure_record" for e in first.excluded_ids)
    rest = [a.confidence for a in res.answer_candidates if item_id in a.support_ids]
    return named and all(c <= 0.5 for c in rest)


def test_without_outcomes_the_closer_match_answers_at_full_confidence() -> None:
    res = answer(QUESTION, POOL, [])
    assert top(res) == ["restart-a"] and res.answer_candidates[0].confidence == 1.0


def test_the_priors_alone_leave_the_closer_match_on_top() -> None:
    """Why the rule is needed: ranking moves by one focus term at most."""
    plan = plan_query(QUESTION, NOW)
    found = priors(outcomes(QUESTION, "restart-a", "restart-b"), family_of(plan), CLOCK)
    ranked, _ = apply_priors(POOL, found, relevant_ids(plan, POOL))
    assert top(synthesize(plan, ranked)) == ["restart-a"]


def test_failures_and_a_successful_alternative_turn_the_first_answer() -> None:
    res = answer(QUESTION, POOL, outcomes(QUESTION, "restart-a", "restart-b"))
    assert top(res) == ["restart-b"] and "kubectl" in res.answer_candidates[0].answer
    assert res.answerability == "answer_from_memory"
    failed = of(res, "restart-a")  # still in the packet, after the first answer
    assert res.answer_candidates.index(failed) == 1
    assert failed.confidence < 0.1  # three failures, no success: the record shows
    (why,) = [e for e in res.answer_candidates[0].excluded_ids if e.reason == "failure_record"]
    assert why.item_id == "restart-a"
    assert all(f"task-restart-a-{i}" in why.detail for i in range(3))
    assert all(f"fb-restart-a-{i}" in why.detail for i in range(3))
    assert "restart-b succeeded instead" in why.detail and "task-restart-b-0" in why.detail


def test_other_phrasings_the_user_and_accented_names_turn_the_same_way() -> None:
    cases = [
        (
            "how can we restart the staging cluster's nightly payment worker",
            CLOSE,
            FAR,
        ),
        (
            "How does the user open the garage of Zoë Müller-Şahin?",
            event(
                "garage-a",
                "The user opens the garage of Zoë Müller-Şahin with the garage remote.",
                score=0.05,
            ),
            event("garage-b", "zoë müller-şahin's garage opens with code 2231 at the keypad."),
        ),
    ]
    for query, close, far in cases:
        pool = [close, far, UNRELATED]
        assert top(answer(query, pool, [])) == [close.item_id], query
        res = answer(query, pool, outcomes(query, close.item_id, far.item_id))
        assert top(res) == [far.item_id], (query, res.answer_candidates)
        assert flagged(res, close.item_id)


def test_an_open_failure_record_never_leaves_full_confidence() -> None:
    """No alternative: the memory still answers, but its confidence says what happened."""
    blame = outcomes(QUESTION, "restart-a", "nobody")
    res = answer(QUESTION, POOL, blame)
    assert top(res) == ["restart-a"]
    assert res.answer_candidates[0].confidence < 0.5
    assert res.answerability == "ask_user"  # below min_confidence: the agent asks
    assert not [e for e in res.answer_candidates[0].excluded_ids if e.reason == "failure_record"]


def test_one_failure_outweighed_by_successes_is_no_open_record() -> None:
    fam = family_of(plan_query(QUESTION, NOW))
    mixed = [record("restart-a", -1.0, 0, "failure", fam)] + [
        record("restart-a", 1.0, i, "success", fam) for i in range(1, 5)
    ]
    res = answer(QUESTION, POOL, mixed + outcomes(QUESTION, "nobody", "restart-b")[3:])
    assert top(res) == ["restart-a"] and res.answer_candidates[0].confidence == 1.0


def test_praise_alone_never_makes_an_alternative() -> None:
    fam = family_of(plan_query(QUESTION, NOW))
    blame = outcomes(QUESTION, "restart-a", "nobody")
    praise = [record(i, 1.0, n, None, fam) for i in ("lunch", "restart-b") for n in range(50)]
    res = answer(QUESTION, POOL, blame + praise)
    assert top(res) == ["restart-a"]
    assert all("lunch" not in a.support_ids for a in res.answer_candidates)


def test_a_success_on_another_question_is_no_alternative_here() -> None:
    records = outcomes(
        QUESTION, "restart-a", "restart-b", family_of_success="When is the dentist of anaïs?"
    )
    res = answer(QUESTION, POOL, records)
    assert top(res) == ["restart-a"] and res.answer_candidates[0].confidence < 0.5


def test_invalidated_memories_are_never_an_answer() -> None:
    records = outcomes(QUESTION, "restart-a", "restart-b")
    gone = FAR.model_copy(update={"invalidated_by": "inv-1", "invalidation_reason": "wrong"})
    res = answer(QUESTION, [CLOSE, gone, UNRELATED], records)
    assert all("restart-b" not in a.support_ids for a in res.answer_candidates)
    assert top(res) == ["restart-a"] and res.answer_candidates[0].confidence < 0.5
    both = CLOSE.model_copy(update={"invalidated_by": "inv-2", "invalidation_reason": "wrong"})
    res = answer(QUESTION, [both, FAR, UNRELATED], records)
    assert top(res) == ["restart-b"]
    assert all("restart-a" not in a.support_ids for a in res.answer_candidates)


def test_facts_follow_the_record_of_their_source_event() -> None:
    """Feedback names the event a task used; the answer may come from its fact."""
    query = "What is the wifi password of café Lumière?"
    old = fact(
        "wifi-b#0", "café Lumière", "wifi_password", obj="sésame-12", valid_from="2024-03-01"
    )
    new = fact(
        "wifi-a#0", "café Lumière", "wifi_password", obj="lumière-77", valid_from="2024-05-01"
    )
    pool = [new, old]
    assert top(answer(query, pool, [])) == ["wifi-a#0"]
    res = answer(query, pool, outcomes(query, "wifi-a", "wifi-b"))
    assert top(res) == ["wifi-b#0"] and "sésame-12" in res.answer_candidates[0].answer
    assert flagged(res, "wifi-a#0")


def _row(item_id: str) -> EvidenceRow:
    return EvidenceRow(row_id=item_id, support_id=item_id, label=item_id, ref=ref(item_id))


def test_the_rule_itself() -> None:
    failing = OutcomeRecord(item_id="a", prior=-0.01, failed_tasks=["t1"])
    proven = OutcomeRecord(item_id="b", prior=0.4, succeeded_tasks=["t2"], family_success=True)
    praised = OutcomeRecord(item_id="c", prior=0.9)  # explicit praise: no task, no family
    rows = [_row("a"), _row("b"), _row("c")]
    assert demoted_ids("lookup", rows, {"a": failing, "b": proven}) == {"a"}
    assert demoted_ids("latest_value", rows, {"a": failing, "b": proven}) == {"a"}
    assert demoted_ids("lookup", rows, {"a": failing, "c": praised}) == set()
    both = {"a": failing, "b": proven}
    assert demoted_ids("lookup", rows[::2], both) == set()  # b is not among the rows
    assert demoted_ids("count", rows, both) == set()  # over a set, b is no alternative to a
    full = AnswerCandidate(answer="x", confidence=1.0, support_ids=["a", "b"])
    assert discounted(full, {"a": failing}).confidence < 0.5
    assert discounted(full, {"b": proven}).confidence == 1.0


def test_over_a_set_a_failure_record_cuts_confidence_and_removes_nothing() -> None:
    query = "How many workers did I restart on the staging cluster?"
    pool = [
        event("r1", "I restarted the payment worker on the staging cluster.", "2024-03-03"),
        event("r2", "I restarted the search worker on the staging cluster.", "2024-03-09"),
        event("r3", "I restarted the mailer worker on the staging cluster.", "2024-03-12"),
    ]
    plain = answer(query, pool, [])
    res = answer(query, pool, outcomes(query, "r1", "r2"))
    assert plain.answer_candidates[0].value == res.answer_candidates[0].value == 3
    assert sorted(res.answer_candidates[0].support_ids) == ["r1", "r2", "r3"]
    assert res.answer_candidates[0].confidence < plain.answer_candidates[0].confidence
    assert not [e for e in res.answer_candidates[0].excluded_ids if e.reason == "failure_record"]


def test_the_same_rule_for_turns_reached_through_an_episode_latent() -> None:
    """A latent never answers; the turns an episode latent leads to are events like any
    other, and their records count the same."""
    turn = FAR.model_copy(update={"lanes": ["episode"], "type": "message.assistant"})
    res = answer(QUESTION, [CLOSE, turn, UNRELATED], outcomes(QUESTION, "restart-a", "restart-b"))
    assert top(res) == ["restart-b"] and flagged(res, "restart-a")


def test_hostile_task_ids_are_named_as_given() -> None:
    fam = family_of(plan_query(QUESTION, NOW))
    tasks = ["t\x00nul", "t\x1b[31mred", "tâche-é" * 40]
    blame = [
        record("restart-a", -1.0, n, "failure", fam).model_copy(update={"task_id": t})
        for n, t in enumerate(tasks)
    ]
    res = answer(QUESTION, POOL, blame + outcomes(QUESTION, "nobody", "restart-b")[3:])
    (why,) = [e for e in res.answer_candidates[0].excluded_ids if e.reason == "failure_record"]
    assert all(t in why.detail for t in tasks)


# A how-to written without the place's name ("there"), as runbooks often are: it shares only
# "renew" and "certificate" with the question and names none of its entities.
GATEWAY_Q = "how do we renew the TLS certificate on the Þórsmörk ingress gateway?"
NAMED = event(
    "tls-a",
    "To renew the TLS certificate on the Þórsmörk ingress gateway, delete the secret.",
    score=0.05,
)
UNNAMED = event("tls-b", "Certificates there are renewed by certbot with its deploy hook.")


def test_an_alternative_proven_on_the_question_answers_without_naming_its_entities() -> None:
    pool = [NAMED, UNNAMED, UNRELATED]
    assert top(answer(GATEWAY_Q, pool, [])) == ["tls-a"]
    res = answer(GATEWAY_Q, pool, outcomes(GATEWAY_Q, "tls-a", "tls-b"))
    assert top(res) == ["tls-b"] and "certbot" in res.answer_candidates[0].answer
    assert res.answerability == "answer_from_memory"
    # proven by outcomes, not by words: never full confidence
    assert 0.3 <= res.answer_candidates[0].confidence < 1.0
    assert flagged(res, "tls-a")
    # another phrasing of the same question, lower case, learns the same
    again = answer("How can I renew the tls certificate of the þórsmörk ingress gateway", pool,
                   outcomes(GATEWAY_Q, "tls-a", "tls-b"))  # fmt: skip
    assert top(again) == ["tls-b"]


def test_successes_about_another_entity_earn_nothing_here() -> None:
    """Tasks that asked about the Hekla gateway say nothing of the Þórsmörk one."""
    pool = [NAMED, UNNAMED, UNRELATED]
    other = "how do we renew the TLS certificate on the Hekla ingress gateway?"
    res = answer(GATEWAY_Q, pool, outcomes(GATEWAY_Q, "tls-a", "tls-b", family_of_success=other))
    assert all("tls-b" not in a.support_ids for a in res.answer_candidates)
    assert top(res) == ["tls-a"] and res.answer_candidates[0].confidence < 0.5


def test_praise_alone_never_makes_a_memory_answer_without_the_question_s_words() -> None:
    fam = family_of(plan_query(GATEWAY_Q, NOW))
    praise = [record("tls-b", 1.0, n, None, fam) for n in range(50)]
    res = answer(GATEWAY_Q, [NAMED, UNNAMED, UNRELATED], praise)
    assert top(res) == ["tls-a"]
    assert all("tls-b" not in a.support_ids for a in res.answer_candidates)


def test_over_a_set_a_record_never_adds_a_member() -> None:
    query = "How many certificates did we renew on the Þórsmörk ingress gateway?"
    pool = [
        event("c1", "We renewed the wildcard certificate on the Þórsmörk ingress gateway."),
        event("c2", "We renewed the api certificate on the Þórsmörk ingress gateway."),
        UNNAMED,
    ]
    plain = answer(query, pool, [])
    res = answer(query, pool, outcomes(query, "nobody", "tls-b"))
    assert res.answer_candidates[0].value == plain.answer_candidates[0].value == 2
    assert "tls-b" not in res.answer_candidates[0].support_ids


def test_successes_asked_in_lower_case_earn_it_for_the_capitalised_question_and_back() -> None:
    """A question typed in lower case names no entity: it conflicts with none."""
    pool = [NAMED, UNNAMED, UNRELATED]
    lower = GATEWAY_Q.lower()
    res = answer(GATEWAY_Q, pool, outcomes(GATEWAY_Q, "tls-a", "tls-b", family_of_success=lower))
    assert top(res) == ["tls-b"]
    res = answer(lower, pool, outcomes(lower, "tls-a", "tls-b", family_of_success=GATEWAY_Q))
    assert top(res) == ["tls-b"]
