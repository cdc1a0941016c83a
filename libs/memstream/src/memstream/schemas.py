"""JSON Schemas generated from the pydantic models.

Run ``python -m memstream.schemas [--check] [OUTDIR]`` (default ``schemas``) to (re)write them;
``--check`` only reports drift and exits 1 when the files differ from the models.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from memstream.events.envelope import EVENT_TYPES, Envelope, Event, EventAdapter, EventIn

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_SUFFIX = ".schema.json"
HEX64_PATTERN = r"^[0-9a-f]{64}$"


class KafkaCoordinates(BaseModel):
    """Where the sequencer read the raw event; not hashed, may change on restore."""

    model_config = ConfigDict(extra="allow", frozen=True)
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class LedgerEntry(Envelope):
    """A ledger entry: the envelope plus chain fields.

    ``payload`` is an untyped object: redaction replaces values at ``redacted_paths`` with a
    marker before hashing, so a redacted payload need not match its event type's payload schema.
    """

    type: str = Field(json_schema_extra={"enum": list(EVENT_TYPES)})
    payload: dict[str, Any] = Field(
        description="the event payload after redaction of security.redacted_paths"
    )
    seq: int = Field(ge=1, description="per tenant/stream, gapless, from 1")
    prev_hash: str = Field(pattern=HEX64_PATTERN, description="hash of seq-1; 64 zeros at seq 1")
    hash: str = Field(
        pattern=HEX64_PATTERN, description="SHA-256 of the canonical JSON without hash and kafka"
    )
    ingested_at: AwareDatetime
    kafka: KafkaCoordinates

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in EVENT_TYPES:
            raise ValueError(f"unknown event type {value!r}")
        return value


def payload_models() -> dict[str, type[BaseModel]]:
    """Event type → payload model, read from the members of the ``Event`` union."""
    union = get_args(Event)[0]
    out: dict[str, type[BaseModel]] = {}
    for member in get_args(union):
        (event_type,) = get_args(member.model_fields["type"].annotation)
        payload = member.model_fields["payload"].annotation
        assert isinstance(payload, type) and issubclass(payload, BaseModel)
        out[event_type] = payload
    return out


def _finish(schema: dict[str, Any], title: str) -> dict[str, Any]:
    out = {"$schema": JSON_SCHEMA_DIALECT, **schema}
    out.setdefault("title", title)
    return out


def generate() -> dict[str, dict[str, Any]]:
    """Every schema file, keyed by its path relative to the schemas directory."""
    schemas: dict[str, dict[str, Any]] = {
        "event.schema.json": _finish(EventAdapter.json_schema(), "Event"),
        "event_in.schema.json": _finish(EventIn.model_json_schema(), "EventIn"),
        "ledger_entry.schema.json": _finish(TypeAdapter(LedgerEntry).json_schema(), "LedgerEntry"),
    }
    for event_type, model in sorted(payload_models().items()):
        schemas[f"payloads/{event_type}{SCHEMA_SUFFIX}"] = _finish(
            model.model_json_schema(), model.__name__
        )
    return schemas


def render(schema: dict[str, Any]) -> str:
    """Deterministic text: sorted keys, indent 2, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _existing(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob(f"*{SCHEMA_SUFFIX}")}


def drift(directory: Path) -> list[str]:
    """Files under ``directory`` that are missing, stale or no longer generated."""
    expected = {name: render(schema) for name, schema in generate().items()}
    problems: list[str] = []
    for name, text in sorted(expected.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"missing: {name}")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"differs: {name}")
    problems += [f"not generated: {name}" for name in sorted(_existing(directory) - set(expected))]
    return problems


def write(directory: Path | str) -> list[Path]:
    """Write every schema under ``directory`` and delete generated files no longer produced."""
    root = Path(directory)
    schemas = generate()
    written: list[Path] = []
    for name, schema in schemas.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = render(schema)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    if root.is_dir():
        for stale in sorted(_existing(root) - set(schemas)):
            (root / stale).unlink()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memstream.schemas [--check] [OUTDIR]``."""
    parser = argparse.ArgumentParser(prog="python -m memstream.schemas", description=__doc__)
    parser.add_argument("outdir", nargs="?", default="schemas", type=Path)
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        problems = drift(args.outdir)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("schemas drifted from the models: run `make schemas`", file=sys.stderr)
        return 1 if problems else 0
    paths = write(args.outdir)
    print(f"wrote {len(paths)} schemas under {args.outdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
