"""The stack's producer proof for tests that run a sequencer over topics of their own: the
records they write carry it, and the sequencers they build check it."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from memstream.keys import KeyStore
from memstream.proof import Prover
from memstream_sequencer.main import Sequencer

SECRET = b"the test suite's producer secret"
PROVER = Prover.internal(SECRET)


def proved(value: bytes) -> list[tuple[str, str | bytes | None]]:
    """The headers that prove ``value`` as the stack's own producers do."""
    return PROVER.headers(value)


def sequencer(bootstrap: str, producer: Producer, **options: Any) -> Sequencer:
    """A sequencer that takes records proved by :data:`PROVER` (no API keys: none exist)."""
    keys = KeyStore(Path(tempfile.gettempdir()) / f"no-keys-{uuid.uuid4().hex}.json")
    return Sequencer(bootstrap, producer, api_keys=keys, internal=SECRET, **options)
