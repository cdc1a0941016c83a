"""The committed JSON Schemas match the pydantic models and validate real documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from memstream import schemas
from memstream.events import EVENT_TYPES, EventAdapter, EventIn
from memstream.events.inbound import InboundAdapter
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "schemas"

SAMPLE_PAYLOADS: dict[str, dict[str, Any]] = {
    "message.user": {"text": "I moved to Lisbon in March."},
    "message.assistant": {"text": "Noted: you live in Lisbon."},
    "tool.call": {"tool": "weather", "call_id": "c1", "arguments": {"city": "Lisbon"}},
    "tool.result": {"tool": "weather", "call_id": "c1", "output": {"temp_c": 21}},
    "observation": {"text": "The build is green.", "source": "ci"},
    "fact.asserted": {
        "subject": "user",
        "predicate": "lives_in",
        "object": "Lisbon",
        "valid_from": "2024-03-01T00:00:00Z",
        "confidence": 0.9,
    },
    "preference.set": {"key": "units", "value": "metric"},
    "task.started": {"task_id": "t1", "goal": "plan a trip"},
    "task.outcome": {"task_id": "t1", "status": "success", "score": 1.0},
    "memory.feedback": {"target_ids": ["e1"], "signal": 0.5},
    "memory.invalidate": {"target_ids": ["e1"], "reason": "wrong city"},
    "memory.purge": {"subject": "user:42"},
}


def _event(event_type: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": f"ev-{event_type}",
        "tenant": "acme",
        "stream": "session-1",
        "agent": "planner",
        "type": event_type,
        "occurred_at": "2024-05-01T12:00:00Z",
        "payload": SAMPLE_PAYLOADS[event_type],
    }
    doc.update(extra)
    return doc


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=FormatChecker())


def test_committed_schemas_match_models() -> None:
    problems = schemas.drift(SCHEMA_DIR)
    assert not problems, (
        "JSON Schemas under schemas/ drifted from the pydantic models; run `make schemas` "
        "(.venv/bin/python -m memstream.schemas schemas):\n  " + "\n  ".join(problems)
    )


def test_expected_files_are_generated() -> None:
    names = set(schemas.generate())
    assert {"event.schema.json", "event_in.schema.json", "ledger_entry.schema.json"} <= names
    assert {f"payloads/{t}.schema.json" for t in EVENT_TYPES} <= names


@pytest.mark.parametrize("name", sorted(schemas.generate()))
def test_generated_schemas_are_valid_draft_2020_12(name: str) -> None:
    schema = schemas.generate()[name]
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == schemas.JSON_SCHEMA_DIALECT


def test_render_is_deterministic() -> None:
    first = {k: schemas.render(v) for k, v in schemas.generate().items()}
    second = {k: schemas.render(v) for k, v in schemas.generate().items()}
    assert first == second
    text = first["event.schema.json"]
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_valid_event_validates_against_schema_and_model(event_type: str) -> None:
    doc = _event(event_type)
    EventAdapter.validate_python(doc)  # the model accepts it ...
    _validator("event.schema.json").validate(doc)  # ... and so does the generated schema
    _validator(f"payloads/{event_type}.schema.json").validate(doc["payload"])
    # a model round trip (JSON mode, defaults filled in) is valid too
    dumped = EventAdapter.dump_python(EventAdapter.validate_python(doc), mode="json")
    _validator("event.schema.json").validate(dumped)


@pytest.mark.parametrize(
    "doc",
    [
        _event("message.user", type="message.unknown"),
        _event("message.user", payload={}),
        _event("message.user", tenant="bad tenant!"),
        _event("message.user", surprise=1),
        _event("task.outcome", payload={"task_id": "t1", "status": "maybe"}),
        {k: v for k, v in _event("observation").items() if k != "stream"},
    ],
    ids=["unknown-type", "missing-text", "bad-tenant", "extra-field", "bad-status", "no-stream"],
)
def test_invalid_event_is_rejected_by_schema(doc: dict[str, Any]) -> None:
    assert list(_validator("event.schema.json").iter_errors(doc))


def test_event_in_schema_accepts_minimal_client_event() -> None:
    doc = {"stream": "s1", "type": "message.user", "payload": {"text": "hi"}}
    EventIn.model_validate(doc)
    validator = _validator("event_in.schema.json")
    validator.validate(doc)
    assert list(validator.iter_errors({"type": "message.user", "payload": {}}))  # no stream


def _ledger_entry(doc: dict[str, Any]) -> dict[str, Any]:
    record = RawRecord(json.dumps(doc).encode(), partition=2, offset=41, topic="memory.events.raw")
    outcome = sequence(record, SequencerState(), "2024-05-01T12:00:01Z")
    assert isinstance(outcome, Sequenced)
    return outcome.entry


def test_ledger_entry_from_sequencer_validates() -> None:
    entry = _ledger_entry(_event("fact.asserted"))
    _validator("ledger_entry.schema.json").validate(entry)
    schemas.LedgerEntry.model_validate(entry)
    assert entry["seq"] == 1 and entry["prev_hash"] == "0" * 64


def test_redacted_ledger_entry_validates() -> None:
    # redaction puts a string marker where the payload schema wants a number
    doc = _event("fact.asserted", security={"redacted_paths": ["payload.confidence"]})
    entry = _ledger_entry(doc)
    assert entry["payload"]["confidence"] == "[REDACTED]"
    _validator("ledger_entry.schema.json").validate(entry)


@pytest.mark.parametrize(
    "change",
    [
        {"seq": 0},
        {"hash": "XYZ"},
        {"prev_hash": "0" * 63},
        {"type": "nope"},
        {"kafka": {"topic": "t"}},
        {"extra": True},
    ],
    ids=["seq-0", "bad-hash", "short-prev-hash", "unknown-type", "partial-kafka", "extra-field"],
)
def test_broken_ledger_entry_is_rejected(change: dict[str, Any]) -> None:
    entry = {**_ledger_entry(_event("message.user")), **change}
    assert list(_validator("ledger_entry.schema.json").iter_errors(entry))
    with pytest.raises(ValueError):
        schemas.LedgerEntry.model_validate(entry)


def test_write_and_drift_roundtrip(tmp_path: Path) -> None:
    assert "missing: event.schema.json" in schemas.drift(tmp_path)
    schemas.write(tmp_path)
    assert schemas.drift(tmp_path) == []
    (tmp_path / "event.schema.json").write_text("{}\n", encoding="utf-8")
    stale = tmp_path / "payloads" / "gone.schema.json"
    stale.write_text("{}\n", encoding="utf-8")
    assert schemas.drift(tmp_path) == [
        "differs: event.schema.json",
        "not generated: payloads/gone.schema.json",
    ]
    assert schemas.main(["--check", str(tmp_path)]) == 1
    schemas.write(tmp_path)
    assert not stale.exists()
    assert schemas.main(["--check", str(tmp_path)]) == 0


def _complete(doc: dict[str, Any]) -> Any:
    return EventIn.model_validate(doc).complete("t")


@pytest.mark.parametrize("validate", [EventAdapter.validate_python, _complete,
                                      InboundAdapter.validate_python])  # fmt: skip
def test_a_validation_error_never_spells_out_event_content(validate: Any) -> None:
    """Its text lands in tracebacks and dead-letter reasons: the reason, not the content."""
    secret = "Kaito Ōshiro-Varga keeps the safe code 7731 under the mat"
    doc = {
        "id": "e-1", "tenant": "t", "stream": "s", "agent": "a", "type": "message.user",
        "occurred_at": "2026-01-01T00:00:00Z", "payload": {"text": secret, "extra": secret},
    }  # fmt: skip
    with pytest.raises(ValidationError) as err:
        validate(doc)
    assert "extra" in str(err.value) and secret not in str(err.value)
    assert "Ōshiro" not in repr(err.value)
