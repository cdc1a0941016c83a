"""The learned ranker: features of the fused top (numbers, never words), the order a model
gives them, the shipped model, and the training's folds (by conversation)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from memstream.checkout.plan import plan_query
from memstream.checkout.retrieve.features import FEATURES, LANES, Likeness, feature_rows
from memstream.checkout.retrieve.lanes import LANE_WEIGHTS
from memstream.checkout.retrieve.learned import (
    Ranker,
    RankerMismatchError,
    learned_order,
    shipped,
)
from memstream.checkout.retrieve.rerank import rerank
from memstream.records.packet import Candidate, SynthesisPlan
from memstream.records.projected import SourceRef
from memstream_bench.train import (
    DuplicateConversationError,
    Group,
    StaleCollectionError,
    _collected,
    _stamp,
    cross_validate,
    fit,
    folds,
    hand_set,
    samples_of,
    score,
)

NOW = "2031-03-10T00:00:00Z"
AT = {name: i for i, name in enumerate(FEATURES)}


def cand(
    item_id: str,
    text: str,
    *,
    seq: int = 0,
    score: float = 0.01,
    lanes: dict[str, int] | None = None,
    at: str = "2031-02-02T10:00:00Z",
) -> Candidate:
    ref = SourceRef(tenant="t", stream="s1", seq=seq, hash="h" * 64, event_id=item_id)
    ranks = lanes or {"dense": seq}
    return Candidate(
        item_id=item_id, kind="event", text=text, ref=ref, type="message.user", agent="Zoë",
        occurred_at=at, score=score, lanes=list(ranks), lane_ranks=ranks,
    )  # fmt: skip


def rows_of(plan: SynthesisPlan, head: list[Candidate]) -> list[list[float]]:
    """Rows without vectors (the likeness features unknown)."""
    return feature_rows(plan, head, Likeness.unknown(len(head)))


def test_every_lane_of_the_pool_is_a_feature() -> None:
    assert set(LANES) == set(LANE_WEIGHTS)


def test_a_row_holds_what_the_lanes_and_the_plan_know() -> None:
    plan = plan_query("Which instrument is Zoë learning in February?", NOW)
    head = [
        cand("chat", "Haha, great!", seq=1, score=0.03, lanes={"dense": 0, "sparse": 3}),
        cand("ans", "I'm learning the cello, my first instrument", seq=40, score=0.02,
             lanes={"sparse": 0}, at="2030-05-01T10:00:00Z"),
    ]  # fmt: skip
    rows = rows_of(plan, head)
    assert [len(r) for r in rows] == [len(FEATURES)] * 2
    chat, ans = rows
    assert (chat[AT["fused_rank"]], ans[AT["fused_rank"]]) == (0.0, 1.0)
    assert chat[AT["fused_score_share"]] == 1.0 and ans[AT["fused_score_share"]] == 0.02 / 0.03
    assert chat[AT["lane_dense"]] == 1.0 and chat[AT["lane_sparse"]] == 0.25
    assert ans[AT["lane_dense"]] == 0.0 and chat[AT["lane_count"]] == 2.0
    assert ans[AT["coverage"]] > chat[AT["coverage"]] == 0.0
    assert chat[AT["in_window"]] == 1.0 and ans[AT["in_window"]] == 0.0  # February 2031
    assert ans[AT["tokens"]] == 7.0
    no_period = rows_of(plan_query("Which instrument is Zoë learning?", NOW), head)
    assert no_period[0][AT["in_window"]] == -1.0


def test_likeness_compares_each_item_with_the_question_and_the_first_others() -> None:
    query = np.asarray([1.0, 0.0, 0.0], dtype=np.float32)
    items = np.asarray(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.6, 0.8], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]],
        dtype=np.float32,
    )
    like = Likeness.of(query, items)
    assert like.to_query == pytest.approx([1.0, 0.0, 0.0, 0.0, 0.6])
    # the best cosine with one of the first three items, never with itself
    assert like.to_top == pytest.approx([0.0, 0.6, 0.6, 0.8, 0.8])
    assert Likeness.of(query, np.zeros((0, 3), dtype=np.float32)) == Likeness([], [])
    assert Likeness.of(query, items[:1]).to_top == [-1.0]  # no other item to be like


def test_the_likeness_and_novelty_of_an_item_in_its_row() -> None:
    plan = plan_query("Which sports and instruments does Zoë play?", NOW)
    head = [
        cand("a", "Zoë plays the cello and the piano", seq=1),
        cand("b", "the cello again, the piano again", seq=30),
        cand("c", "Zoë plays tennis on Sundays: sports matter", seq=60),
    ]
    rows = feature_rows(plan, head, Likeness([0.9, 0.5, 0.7], [0.2, 0.8, 0.4]))
    assert [r[AT["similarity"]] for r in rows] == [0.9, 0.5, 0.7]
    assert [r[AT["similarity_gap"]] for r in rows] == pytest.approx([0.0, 0.4, 0.2])
    assert [r[AT["near_top"]] for r in rows] == [0.2, 0.8, 0.4]
    first, again, sports = (r[AT["novel_coverage"]] for r in rows)
    # the second says only what the first said; the third says a word nobody before said
    assert first > 0 and again == 0.0 and sports > 0
    unknown = rows_of(plan, head)
    assert (
        {r[AT["similarity"]] for r in unknown}
        == {r[AT["similarity_gap"]] for r in unknown}
        == {-1.0}
    )


def test_the_trainings_hand_set_order_is_the_reranks() -> None:
    plan = plan_query("which instrument is the user learning", NOW)
    texts = ["Haha", "the cello is my instrument", "weather", "learning the cello",
             "instrument shop", "ok", "lessons", "I am learning"]  # fmt: skip
    head = [cand(f"i{n}", t, seq=n * 7, score=0.05 - n * 0.004) for n, t in enumerate(texts)]
    by_rerank = [c.item_id for c in rerank(plan, head)]
    scores = hand_set(rows_of(plan, head))
    by_training = [head[i].item_id for i in sorted(range(len(head)), key=lambda i: -scores[i])]
    assert by_training == by_rerank


def _groups(n: int, seed: int = 3) -> list[Group]:
    """Questions whose relevant item is the one saying the focus words, placed anywhere in
    the fused order (the fused rank tells nothing)."""
    rng = random.Random(seed)
    plan = plan_query("which instrument is the user learning", NOW)
    out = []
    for q in range(n):
        answer = rng.randrange(10)
        head = [
            cand(f"q{q}-{i}", "learning the cello instrument" if i == answer else f"filler {i}",
                 seq=i * 9, score=0.05 - i * 0.003)
            for i in range(10)
        ]  # fmt: skip
        out.append(
            Group(
                conversation=f"conv-{q % 4}",
                category=1,
                turns=[c.item_id for c in head],
                rows=rows_of(plan, head),
                evidence=[head[answer].item_id],
            )
        )
    return out


def test_a_model_learns_what_tells_the_answer_and_orders_by_it() -> None:
    model = fit(_groups(120))
    ranker = Ranker.from_text(model.model_to_string())
    plan = plan_query("which instrument is the user learning", NOW)
    head = [cand(f"f{i}", f"filler {i}", seq=i * 9, score=0.05 - i * 0.003) for i in range(9)]
    head.append(cand("told", "learning the cello instrument", seq=90, score=0.01))
    tail = [cand("deep", "learning the cello instrument", seq=200, score=0.001)]
    ordered = learned_order(head + tail, rows_of(plan, head), ranker)
    assert ordered[0].item_id == "told"
    assert ordered[-1].item_id == "deep"  # beyond the top: untouched
    # the fused scores are handed out again in the new order: the scale stays
    assert [c.score for c in ordered[:10]] == sorted((c.score for c in head), reverse=True)


def test_a_model_of_other_features_is_refused() -> None:
    groups = _groups(40)
    model = fit(groups)
    text = model.model_to_string().replace("feature_names=fused_rank", "feature_names=rank", 1)
    with pytest.raises(RankerMismatchError):
        Ranker.from_text(text)


def test_the_shipped_model_loads_and_reads_todays_features() -> None:
    ranker = shipped()
    assert tuple(ranker.booster.feature_name()) == FEATURES
    assert len(ranker.model_id) == 12
    plan = plan_query("which instrument is the user learning", NOW)
    head = [cand(f"i{i}", f"turn {i}", seq=i, score=0.05 - i * 0.001) for i in range(30)]
    ordered = learned_order(head, rows_of(plan, head))
    assert sorted(c.item_id for c in ordered) == sorted(c.item_id for c in head)


def test_folds_never_share_a_conversation_and_cover_every_question() -> None:
    groups = _groups(30)
    seen = []
    for held_out, train, test in folds(groups):
        assert {g.conversation for g in test} == {held_out}
        assert held_out not in {g.conversation for g in train}
        seen += test
    assert sorted(id(g) for g in seen) == sorted(id(g) for g in groups)


def test_a_train_only_conversation_trains_every_fold_and_is_never_measured() -> None:
    groups = _groups(30)  # conversations conv-0 .. conv-3
    got = folds(groups, train_only={"conv-2"})
    assert [held_out for held_out, _, _ in got] == ["conv-0", "conv-1", "conv-3"]
    for held_out, train, test in got:
        assert {g.conversation for g in test} == {held_out}
        assert {g.conversation for g in train} == {"conv-0", "conv-1", "conv-2", "conv-3"} - {
            held_out
        }
    doc = cross_validate(groups, train_only={"conv-2"})
    assert set(doc["folds"]) == {"conv-0", "conv-1", "conv-3"}
    measured = sum(1 for g in groups if g.conversation != "conv-2")
    assert all(doc["pooled"][m]["questions"] == measured for m in ("fused", "rerank", "learned"))


def test_training_files_are_read_together_and_a_conversation_named_twice_is_refused(
    tmp_path: Path,
) -> None:
    def sample(sample_id: str) -> dict[str, object]:
        return {"sample_id": sample_id, "conversation": {}, "qa": []}

    measured, extra = tmp_path / "measured.json", tmp_path / "extra.json"
    measured.write_text(json.dumps([sample("a 1"), sample("b")]))
    extra.write_text(json.dumps([sample("Zoë's")]))
    samples, only = samples_of([measured], [extra])
    assert [s["sample_id"] for s in samples] == ["a 1", "b", "Zoë's"]
    assert only == {"Zo--s"}  # the tenant each is written to
    extra.write_text(json.dumps([sample("a-1")]))  # spelt as the same tenant as "a 1"
    with pytest.raises(DuplicateConversationError, match="a-1"):
        samples_of([measured], [extra])
    with pytest.raises(DuplicateConversationError, match="b"):
        samples_of([measured, measured], [])


def test_recall_and_hit_of_an_order() -> None:
    turns = ["a", "b", "c", "d"]
    assert score(turns, [4, 3, 2, 1], ["a", "d"], k=2) == (0.5, 1.0)
    assert score(turns, [1, 2, 3, 4], ["a", "b"], k=2) == (0.0, 0.0)
    assert score(turns, [1, 1, 1, 1], ["b"], k=2) == (1.0, 1.0)  # ties keep the fused order


def test_a_collection_is_read_again_only_for_the_conversations_and_features_it_came_from(
    tmp_path: Path,
) -> None:
    samples = [{"sample_id": "a-1", "conversation": {"speaker_a": "Zoë"}, "qa": []}]
    group = Group("a-1", 1, ["t1", "t2"], [[0.0] * len(FEATURES)] * 2, ["t2"])
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps(_stamp(samples)) + "\n" + json.dumps(group.__dict__) + "\n")
    path.with_suffix(".packets.jsonl").write_text("")
    assert _collected(samples, print, path) == ([group], [])
    path.with_suffix(".packets.jsonl").unlink()
    with pytest.raises(StaleCollectionError, match="packets"):
        _collected(samples, print, path)
    path.with_suffix(".packets.jsonl").write_text("")
    other = [{**samples[0], "qa": [{"question": "which city?", "category": 1}]}]
    with pytest.raises(StaleCollectionError, match="other conversations or with other features"):
        _collected(other, print, path)
    # a file collected before the stamp existed, or with other features, is refused too
    path.write_text(json.dumps(group.__dict__) + "\n")
    with pytest.raises(StaleCollectionError):
        _collected(samples, print, path)
    for garbage in ("{not json", "\x00\x01", ""):
        path.write_text(garbage)
        with pytest.raises(StaleCollectionError):
            _collected(samples, print, path)
    stamp = _stamp(samples)
    stamp["collection"]["features"] = stamp["collection"]["features"][:-1]
    path.write_text(json.dumps(stamp) + "\n")
    with pytest.raises(StaleCollectionError):
        _collected(samples, print, path)
