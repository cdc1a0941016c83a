"""A projector batch opens its sealed entries with the data keys read together (one key store
round trip per tenant): what every record reads as (opened, purged by a destroyed key, a
dead letter and its reason) is what opening them one by one gives."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from memstream.latent.builder import LatentInput, latent_input
from memstream.ledger.entry import decode_entry, load_entry, read_loaded
from memstream.ledger.opening import EntryOpener
from memstream.ledger.sequencing import RawRecord, Sequenced, SequencerState, sequence
from memstream.projection.projectors import read_record as _read
from memstream.projection.purge import read_entry
from memstream.shred.port import KeyKind
from memstream.shred.seal import SEALED, seal
from memstream.shred.sqlite import SqliteDataKeys
from memstream.times import iso_utc
from scratchtopics import journal_event

NOW = iso_utc(datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
TENANTS = ("acme", "Zoe-Angstrom", "second.tenant")


class CountingKeys(SqliteDataKeys):
    """The SQLite store, counting its reads."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: list[tuple[str, int]] = []

    def get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        ids = list(ids)
        self.reads.append((tenant, len(ids)))
        return super().get(tenant, kind, ids)


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[CountingKeys]:
    store = CountingKeys(tmp_path / "keys.sqlite")
    yield store
    store.close()


def _ledgered(store: SqliteDataKeys, doc: dict[str, Any], seq: int) -> dict[str, Any]:
    key = store.create_or_get(doc["tenant"], "event", [doc["id"]])[doc["id"]]
    raw = RawRecord(orjson.dumps(doc), 0, seq, "memory.events.raw")
    out = sequence(raw, SequencerState(), NOW, {(doc["tenant"], doc["id"]): key})
    assert isinstance(out, Sequenced), out
    return out.entry


def _batch(store: SqliteDataKeys) -> list[bytes | None]:
    """Sealed entries of three tenants (one shredded), and records that do not open."""
    entries = [
        _ledgered(
            store, journal_event(f"e{i}", f"Noor met Łukasz in Tromsø, day {i}\t\u200b.", t), i
        )
        for i in range(30)
        for t in TENANTS
    ]
    store.destroy("acme", "event", ["e7"])  # purged: reads as purged, is no dead letter
    good = entries[0]
    odd: list[Any] = [
        {**good, "tenant": 7},  # a tenant that is no string: read one by one, as before
        {k: v for k, v in good.items() if k != "id"},  # no id: does not open
        {**good, "id": "e1", "tenant": "acme"},  # the key of another event: does not open
        {**good, SEALED: seal(bytes(32), b"aad", {})},  # sealed under no known key
        "a JSON string",
        [good],
    ]
    raws: list[bytes | None] = [orjson.dumps(e) for e in entries + odd]
    return [*raws, None, b"{not json", b"\x00\xff"]


def _outcome(found: Any) -> Any:
    if isinstance(found, str):
        return found
    x = found.extraction
    return (
        found.tenant,
        found.purge,
        None if x is None else (x.event.model_dump(), [m.model_dump() for m in x.mentions]),
    )


def test_a_batch_opens_as_its_records_one_by_one(keys: CountingKeys) -> None:
    raws = _batch(keys)
    opener = EntryOpener(keys)
    keys.reads.clear()
    one_by_one = [_outcome(decode_entry(r, lambda e: read_entry(e, True), opener)) for r in raws]
    assert len(keys.reads) > len(raws) - 10
    keys.reads.clear()
    loaded = [load_entry(r) for r in raws]
    batch_opener = opener.for_batch(loaded)
    together = [_outcome(_read(doc, True, batch_opener)) for doc in loaded]
    assert together == one_by_one
    # one read per tenant, and one for the entry whose tenant is no string
    assert sorted(map(str, (t for t, _ in keys.reads))) == sorted([*TENANTS, "7"])
    opened = [o for o in together if not isinstance(o, str) and o[2] is not None]
    assert len(opened) == 3 * 30 - 1  # all but the shredded one (tenant 7 has no key either)
    reasons = [o for o in together if isinstance(o, str)]
    assert len(reasons) == 8 and any("does not open" in r for r in reasons)


def test_without_sealed_entries_or_a_store_the_opener_is_itself(keys: CountingKeys) -> None:
    opener = EntryOpener(keys)
    assert opener.for_batch([{"tenant": "acme", "id": "e1"}, "x", None]) is opener
    sealed = {SEALED: "x", "tenant": "acme", "id": "e1"}
    keys.reads.clear()
    assert opener.for_batch([sealed]) is not opener and keys.reads == [("acme", 1)]
    without = EntryOpener(None)
    assert without.for_batch([sealed]) is without  # and refuses the entry, as before


def test_the_latent_builder_reads_a_batch_as_its_records_one_by_one(
    keys: CountingKeys,
) -> None:
    raws = _batch(keys)
    opener = EntryOpener(keys)
    one_by_one = [decode_entry(r, latent_input, opener) for r in raws]
    keys.reads.clear()
    loaded = [load_entry(r) for r in raws]
    batch_opener = opener.for_batch(loaded)
    together = [read_loaded(doc, latent_input, batch_opener) for doc in loaded]
    assert together == one_by_one
    assert sum(1 for x in together if isinstance(x, LatentInput)) == 3 * 30 - 1
    assert len(keys.reads) == len(TENANTS) + 1  # and the entry whose tenant is no string
