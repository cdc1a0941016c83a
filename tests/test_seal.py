"""Sealing (pure) and opening: AES-GCM round trips and refusals, what an event keeps clear, a
sealed ledger entry that verifies without any key, tombstones in the clear, entries whose key
is gone reading as purged, and the keyed digest that names a purged subject."""

from __future__ import annotations

import base64
import hashlib
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from memstream.events.envelope import EventAdapter
from memstream.ledger.canonical import entry_hash
from memstream.ledger.opening import SHREDDED, EntryOpener
from memstream.ledger.purge import is_purged, subject_digest
from memstream.ledger.sequencing import (
    DeadLetter,
    Duplicate,
    RawRecord,
    Sequenced,
    SequencerState,
    Shredded,
    sequence,
)
from memstream.ledger.verify import verify_entries
from memstream.shred.seal import (
    CLEAR_FIELDS,
    SEALED,
    SealBroken,
    event_aad,
    is_sealed,
    needs_key,
    open_event,
    seal,
    seal_event,
    unseal,
)
from memstream.shred.sealer import EventSealer, KeyDestroyed
from memstream.shred.sqlite import SqliteDataKeys
from memstream.times import iso_utc
from scratchtopics import journal_event

NOW = iso_utc(datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
TEXT = "Zoë Ångström-Nuñez met Łukasz Żółć at the Café Müller in Tromsø on 3 März."
CHAIN_FIELDS = {"seq", "prev_hash", "hash", "ingested_at", "kafka"}


def event(eid: str = "e1", text: str = TEXT, **extra: Any) -> dict[str, Any]:
    return journal_event(eid, text, **extra)


def tombstone() -> dict[str, Any]:
    return {
        "id": "t1",
        "tenant": "acme",
        "stream": "purges",
        "agent": "purge",
        "type": "memory.purge",
        "occurred_at": "2026-05-02T10:00:00Z",
        "payload": {"subject": "hmac-sha256:" + "0" * 64, "event_ids": ["e1"]},
    }


def test_seal_round_trips_and_hides_the_content() -> None:
    clear = {"text": TEXT, "n": 3, "odd": "nul\x00 bell\x07 esc\x1b \u2028", "list": [1, "ü"]}
    sealed = seal(KEY, b"aad", clear)
    assert set(sealed) == {"v", "n", "c"}
    wire = orjson.dumps(sealed)
    for marker in ("Zoë", "Müller", "Tromsø", "bell"):
        assert marker.encode() not in wire
        assert marker.encode("unicode_escape") not in wire
    assert unseal(KEY, b"aad", sealed) == clear
    # A fresh nonce each time: the same content never seals to the same bytes.
    assert seal(KEY, b"aad", clear)["c"] != sealed["c"]


def _flip(b64: str, at: int) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[at] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    "alter",
    [
        pytest.param(lambda s: {**s, "c": _flip(s["c"], 0)}, id="ciphertext"),
        pytest.param(lambda s: {**s, "c": _flip(s["c"], -1)}, id="tag"),
        pytest.param(lambda s: {**s, "n": _flip(s["n"], 3)}, id="nonce"),
        pytest.param(lambda s: {**s, "c": s["c"][:-8]}, id="truncated"),
        pytest.param(lambda s: {**s, "c": "not base64 !!"}, id="not-base64"),
        pytest.param(lambda s: {**s, "v": 2}, id="format"),
        pytest.param(lambda s: {"v": 1, "n": s["n"]}, id="no-ciphertext"),
    ],
)
def test_altered_sealed_content_does_not_open(alter: Any) -> None:
    sealed = seal(KEY, b"aad", {"text": TEXT})
    with pytest.raises(SealBroken):
        unseal(KEY, b"aad", alter(sealed))


def test_wrong_aad_or_wrong_key_does_not_open() -> None:
    sealed = seal(KEY, b"acme|journal|e1|message.user", {"text": TEXT})
    with pytest.raises(SealBroken):
        unseal(KEY, b"acme|journal|e2|message.user", sealed)
    with pytest.raises(SealBroken):
        unseal(OTHER_KEY, b"acme|journal|e1|message.user", sealed)
    assert issubclass(SealBroken, ValueError)  # readers treat it as a problem of the record


def test_seal_event_keeps_exactly_the_clear_fields() -> None:
    doc = event(security={"sensitivity": "secret", "redacted_paths": []}, caused_by=["e0"])
    sealed = seal_event(doc, KEY)
    assert set(sealed) == (CLEAR_FIELDS & set(doc)) | {SEALED}
    assert {k: sealed[k] for k in CLEAR_FIELDS} == {k: doc[k] for k in CLEAR_FIELDS}
    assert is_sealed(sealed) and not is_sealed(doc)
    wire = orjson.dumps(sealed)
    for marker in ("Zoë", "Ångström", "Café", "Müller", "Tromsø", "Łukasz", "caused_by"):
        assert marker.encode() not in wire
    assert open_event(sealed, KEY) == doc
    assert seal_event(sealed, OTHER_KEY) == sealed  # sealed once, not twice


def test_sealed_content_moved_onto_another_event_does_not_open() -> None:
    sealed = seal_event(event("e1"), KEY)
    for field, value in (("id", "e2"), ("tenant", "globex"), ("stream", "other")):
        with pytest.raises(SealBroken):
            open_event({**sealed, field: value}, KEY)
    with pytest.raises(SealBroken):
        open_event(sealed, OTHER_KEY)


def test_sealed_content_that_repeats_a_clear_field_is_refused() -> None:
    doc = event()
    forged = {**{k: doc[k] for k in CLEAR_FIELDS}}
    forged[SEALED] = seal(KEY, event_aad(doc), {"payload": {"text": "x"}, "tenant": "globex"})
    with pytest.raises(SealBroken, match="clear fields"):
        open_event(forged, KEY)


def test_a_tombstone_stays_clear() -> None:
    t = tombstone()
    assert not needs_key(t)
    assert seal_event(t, KEY) == t
    assert needs_key(event())


def _sequenced(raw: dict[str, Any], keys: dict[tuple[str, str], bytes]) -> Sequenced:
    out = sequence(
        RawRecord(orjson.dumps(raw), 0, 5, "memory.events.raw"), SequencerState(), NOW, keys
    )
    assert isinstance(out, Sequenced), out
    return out


def test_a_sealed_raw_record_becomes_a_sealed_entry_that_verifies_without_keys() -> None:
    doc = event()
    keys = {("acme", "e1"): KEY}
    out = _sequenced(seal_event(doc, KEY), keys)
    entry = orjson.loads(out.value)
    assert entry == out.entry
    assert set(entry) == (CLEAR_FIELDS & set(doc)) | CHAIN_FIELDS | {SEALED}
    assert TEXT.encode() not in out.value and b"Caf" not in out.value
    assert entry_hash(entry) == entry["hash"]  # the hash covers the sealed form
    assert verify_entries([(entry, "mem")]) is None  # no key anywhere in sight
    opened = open_event(entry, KEY)
    assert opened["payload"] == doc["payload"] and opened["agent"] == doc["agent"]
    EventAdapter.validate_python({k: v for k, v in opened.items() if k not in CHAIN_FIELDS})


def test_an_entry_whose_content_was_altered_fails_verify() -> None:
    entry = _sequenced(event(), {("acme", "e1"): KEY}).entry
    other = seal_event(event(text="something else"), KEY)
    assert verify_entries([({**entry, SEALED: other[SEALED]}, "mem")]) is not None


def test_a_clear_raw_record_is_sealed_by_the_sequencer() -> None:
    out = _sequenced(event(), {("acme", "e1"): KEY})
    assert is_sealed(out.entry) and TEXT.encode() not in out.value


def test_a_sealed_raw_record_is_ledgered_with_the_ciphertext_it_came_with() -> None:
    """Opened to be validated, not sealed again: the ledger keeps the client's seal."""
    sent = seal_event(event(), KEY)
    entry = orjson.loads(_sequenced(sent, {("acme", "e1"): KEY}).value)
    assert entry[SEALED] == sent[SEALED]
    assert open_event(entry, KEY)["payload"] == {"text": TEXT}


def test_a_sealed_raw_record_with_paths_to_redact_is_sealed_again_redacted() -> None:
    doc = event(security={"sensitivity": "secret", "redacted_paths": ["payload.text"]})
    sent = seal_event(doc, KEY)
    entry = orjson.loads(_sequenced(sent, {("acme", "e1"): KEY}).value)
    assert entry[SEALED]["c"] != sent[SEALED]["c"]
    assert TEXT not in str(open_event(entry, KEY)["payload"])


def test_content_sent_beside_a_seal_is_moved_into_it() -> None:
    """A clear field next to the seal is not kept clear in the ledger: sealed again."""
    sent = {**seal_event(event(), KEY), "metadata": {"place": "Café Müller"}}
    out = _sequenced(sent, {("acme", "e1"): KEY})
    entry = orjson.loads(out.value)
    assert "metadata" not in entry and "Müller".encode() not in out.value
    assert open_event(entry, KEY)["metadata"] == {"place": "Café Müller"}


def test_a_sealed_raw_record_whose_key_is_gone_is_skipped_as_purged() -> None:
    """A purge destroyed the key before this copy came (an outbox re-send): nothing can be
    read or ledgered, and it is no dead letter either."""
    raw = orjson.dumps(seal_event(event(), KEY))
    out = sequence(RawRecord(raw, 0, 5, "memory.events.raw"), SequencerState(), NOW, {})
    assert isinstance(out, Shredded) and out.event_id == "e1"


def test_a_resent_sealed_event_is_a_duplicate_even_once_its_key_is_gone() -> None:
    state = SequencerState()
    raw = orjson.dumps(seal_event(event(), KEY))
    first = sequence(RawRecord(raw, 0, 5, "memory.events.raw"), state, NOW, {("acme", "e1"): KEY})
    assert isinstance(first, Sequenced)
    again = sequence(RawRecord(raw, 0, 6, "memory.events.raw"), state, NOW, {})
    assert isinstance(again, Duplicate) and again.event_id == "e1"


def test_a_clear_record_whose_key_is_gone_is_skipped_when_sealing() -> None:
    """A purged id finds no key (none is made again): the event is never ledgered clear."""
    raw = orjson.dumps(event())
    state = SequencerState()
    out = sequence(RawRecord(raw, 0, 5, "memory.events.raw"), state, NOW, {}, seal=True)
    assert isinstance(out, Shredded) and out.event_id == "e1"
    assert state.heads == {}  # nothing of the stream was touched
    # Sealing off: no key is expected, the event is ledgered as it came.
    plain = sequence(RawRecord(raw, 0, 6, "memory.events.raw"), state, NOW, {}, seal=False)
    assert isinstance(plain, Sequenced) and not is_sealed(plain.entry)


def test_a_clear_tombstone_needs_no_key_when_sealing() -> None:
    raw = orjson.dumps(tombstone())
    out = sequence(RawRecord(raw, 0, 5, "memory.events.raw"), SequencerState(), NOW, {}, seal=True)
    assert isinstance(out, Sequenced) and not is_sealed(out.entry)


def test_a_sealed_record_naming_no_valid_tenant_is_a_dead_letter() -> None:
    doc = {**seal_event(event(), KEY), "tenant": "bad\x00tenant"}
    out = sequence(
        RawRecord(orjson.dumps(doc), 0, 7, "memory.events.raw"), SequencerState(), NOW, {}
    )
    assert isinstance(out, DeadLetter)


def test_a_tombstone_is_ledgered_clear() -> None:
    out = _sequenced(tombstone(), {})
    assert not is_sealed(out.entry)
    assert out.entry["payload"]["event_ids"] == ["e1"]


def test_the_event_sealer_writes_no_content_in_the_clear(tmp_path: Path) -> None:
    store = SqliteDataKeys(tmp_path / "keys.sqlite")
    try:
        ev = EventAdapter.validate_python(event("zoe-1"))
        [value] = EventSealer(store).encode([ev])
        assert TEXT.encode() not in value and b"M\\u00fcller" not in value
        key = store.get("acme", "event", [ev.id])[ev.id]
        assert open_event(orjson.loads(value), key)["payload"]["text"] == TEXT
        assert EventSealer(None).encode([ev])[0].count(b"Troms") == 1  # sealing off: clear
    finally:
        store.close()


def test_the_event_sealer_refuses_a_purged_id_and_writes_nothing(tmp_path: Path) -> None:
    store = SqliteDataKeys(tmp_path / "keys.sqlite")
    try:
        sealer = EventSealer(store)
        old, fresh = (EventAdapter.validate_python(event(i)) for i in ("gone-1", "new-1"))
        sealer.encode([old])
        store.destroy("acme", "event", [old.id])
        with pytest.raises(KeyDestroyed, match="gone-1") as refused:
            sealer.encode([fresh, old])
        assert refused.value.refs == [("acme", "gone-1")]
        assert store.get("acme", "event", [old.id]) == {}  # no key was made for it
        # Derived events drop the purged one and keep the rest.
        live = sealer.encode_live([fresh, old])
        assert [e.id for e, _ in live] == ["new-1"]
        key = store.get("acme", "event", ["new-1"])["new-1"]
        assert open_event(orjson.loads(live[0][1]), key)["payload"]["text"] == TEXT
        # A tombstone needs no key: never refused.
        [purge] = sealer.encode([EventAdapter.validate_python(tombstone())])
        assert not is_sealed(orjson.loads(purge))
    finally:
        store.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteDataKeys]:
    s = SqliteDataKeys(tmp_path / "keys.sqlite")
    yield s
    s.close()


def test_the_opener_opens_and_reads_a_shredded_entry_as_purged(store: SqliteDataKeys) -> None:
    key = store.create_or_get("acme", "event", ["e1"])["e1"]
    entry = _sequenced(event(), {("acme", "e1"): key}).entry
    opener = EntryOpener(store)
    assert opener(entry)["payload"]["text"] == TEXT
    store.destroy("acme", "event", ["e1"])
    gone = opener(entry)
    assert is_purged(gone) and gone["purged"] == {"by": SHREDDED}
    assert SEALED not in gone and "payload" not in gone and "agent" not in gone
    assert gone["hash"] == entry["hash"] and gone["seq"] == entry["seq"]


def test_the_opener_passes_clear_entries_and_refuses_without_a_store() -> None:
    t = _sequenced(tombstone(), {}).entry
    assert EntryOpener(None)(t) == t
    sealed = _sequenced(event(), {("acme", "e1"): KEY}).entry
    with pytest.raises(ValueError, match="no data key store"):
        EntryOpener(None)(sealed)


def test_the_opener_refuses_an_entry_sealed_under_another_key(store: SqliteDataKeys) -> None:
    store.create_or_get("acme", "event", ["e1"])
    sealed = _sequenced(event(), {("acme", "e1"): OTHER_KEY}).entry
    with pytest.raises(SealBroken):
        EntryOpener(store)(sealed)


NAMES = ("Zoë Ångström-Nuñez", "zoë ångström-nuñez", "ZOË ÅNGSTRÖM-NUÑEZ")


def _plain_digests(tenant: str, name: str) -> set[str]:
    forms = {name, name.lower(), name.casefold()}
    forms |= {unicodedata.normalize(f, n) for f in ("NFC", "NFD", "NFKC", "NFKD") for n in forms}
    return {hashlib.sha256(f"{tenant}|{n}".encode()).hexdigest() for n in forms} | {
        hashlib.sha256(n.encode()).hexdigest() for n in forms
    }


def test_the_subject_digest_is_keyed_per_tenant_secret(store: SqliteDataKeys) -> None:
    key = "zoë ångström-nuñez"
    one = subject_digest(store.tenant_secret("acme"), "acme", key)
    assert one == subject_digest(store.tenant_secret("acme"), "acme", key)
    assert one != subject_digest(store.tenant_secret("globex"), "acme", key)
    assert one != subject_digest(store.tenant_secret("acme"), "acme", "zoë ångström")
    assert one.startswith("hmac-sha256:")
    hexpart = one.split(":", 1)[1]
    for name in NAMES:
        assert hexpart not in _plain_digests("acme", name)
        assert name.encode() not in one.encode()
