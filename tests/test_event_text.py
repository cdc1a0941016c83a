"""What of an event is searchable: its words, its speaker, and prose metadata."""

from __future__ import annotations

from memstream.projection.extract import extract
from memstream.projection.projectors import event_point
from memstream.projection.text import descriptive_metadata


def test_prose_metadata_is_descriptive_and_codes_are_not() -> None:
    meta = {
        "caption": "a red  kayak pulled up\non a pebble beach",
        "ticket": "OPS-1182",
        "turn": "T4:7",
        "session": 3,
        "urgent": True,
        "label": "two words",
    }
    assert descriptive_metadata(meta) == "a red kayak pulled up on a pebble beach"
    assert descriptive_metadata({}) == ""


def entry(metadata: dict[str, object], text: str = "look what we found") -> dict[str, object]:
    return {
        "id": "e-1",
        "tenant": "acme",
        "stream": "trip",
        "agent": "noor",
        "type": "message.user",
        "occurred_at": "2031-06-01T09:00:00Z",
        "payload": {"text": text},
        "metadata": metadata,
        "seq": 1,
        "prev_hash": "0" * 64,
        "hash": "a" * 64,
        "ingested_at": "2031-06-01T09:00:01Z",
        "kafka": {"topic": "memory.ledger", "partition": 0, "offset": 0},
    }


def test_the_indexed_text_carries_speaker_words_and_caption() -> None:
    point = event_point(extract(entry({"caption": "a red kayak on a pebble beach", "n": "7"})))
    assert point.text == "noor on 1 June 2031: look what we found a red kayak on a pebble beach"
    # what checkout cites stays the event's own words
    assert point.payload["text"] == "look what we found"


def test_without_prose_metadata_the_text_is_speaker_and_words() -> None:
    x = extract(entry({"id": "x-1"}))
    assert event_point(x).text == "noor on 1 June 2031: look what we found"
    assert event_point(x, form="plain").text == "noor: look what we found"
