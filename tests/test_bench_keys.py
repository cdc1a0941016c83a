"""``bench embed --keys``: turns ranked under each form of index key, on a hand-made
conversation where the answer is a reply that names nothing."""

from __future__ import annotations

import json
from pathlib import Path

from memstream.embed.hashing import HashingEmbedder
from memstream_bench.keys import FORMS, keys_table, locomo_keys
from memstream_bench.report import blocks_from


def conversation() -> list[dict[str, object]]:
    filler = [
        {"speaker": "Zoë", "dia_id": f"D1:{i + 3}", "text": f"Small talk number {i} today."}
        for i in range(12)
    ]
    session = [
        {"speaker": "Zoë", "dia_id": "D1:1", "text": "Did you ever finish the kayak repair?"},
        {"speaker": "mateus", "dia_id": "D1:2", "text": "Yes, last week! Took me ages."},
        *filler,
    ]
    return [
        {
            "sample_id": "hand-1",
            "conversation": {
                "speaker_a": "Zoë",
                "speaker_b": "mateus",
                "session_1_date_time": "4:10 pm on 3 March, 2030",
                "session_1": session,
            },
            "qa": [
                {
                    "question": "When did mateus finish the kayak repair?",
                    "category": 2,
                    "evidence": ["D1:2"],
                },
                {"question": "Who is unanswerable?", "category": 5, "evidence": ["D1:1"]},
            ],
        }
    ]


def test_the_previous_turn_in_the_key_finds_a_reply_that_names_nothing(tmp_path: Path) -> None:
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(conversation()))
    doc = locomo_keys(path, HashingEmbedder(), k=1)
    assert doc["questions"] == 1  # category 5 is not scored
    forms = doc["forms"]
    assert set(forms) == set(FORMS)
    # alone, "Yes, last week!" shares no word with the question but "mateus"
    assert forms["plain (speaker, text, caption)"]["sparse"]["hit"] == 0.0
    assert forms["+ previous turn"]["sparse"]["hit"] == 1.0
    table = keys_table(doc)
    assert "| + previous turn | 1.000 / 1.000 |" in table


def test_the_readme_block_is_rendered_from_the_embed_json(tmp_path: Path) -> None:
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(conversation()))
    doc = {
        "embedder": "hash-256",
        "dim": 256,
        "docs": 10,
        "docs_per_s": 1000.0,
        "machine": {"cpu_count": 2, "date": "2031-01-02"},
        "locomo_keys": locomo_keys(path, HashingEmbedder(), k=1),
    }
    results = tmp_path / "results"
    results.mkdir()
    (results / "embed.json").write_text(json.dumps(doc))
    block = blocks_from(results)["keys"]
    assert block.startswith("LoCoMo turns ranked per conversation under each key form (k = 1")
    assert block.endswith("_Measured 2031-01-02 on a 2-core machine._")
