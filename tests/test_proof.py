"""Proofs on the raw topic: who may put a record in front of the sequencer (pure checks),
and the stack's producer secret (made once, whoever asks first)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from memstream.keys import KeyStore
from memstream.ledger.sequencing import (
    DeadLetter,
    RawRecord,
    Sequenced,
    SequencerState,
    sequence,
)
from memstream.proof import (
    INTERNAL,
    Credentials,
    Proven,
    Prover,
    Unproven,
    authenticate,
    credentials,
    producer_secret,
    proof_of,
)
from memstream.scope import Scope
from memstream.settings import Settings
from pydantic import SecretStr

NOW = "2026-05-01T12:00:00.000000Z"
SECRET = b"s" * 32


def event(agent: str = "planner", user: str | None = "ana", tenant: str = "acme") -> bytes:
    doc = {
        "id": f"e-{agent}-{user}",
        "tenant": tenant,
        "stream": "trip",
        "agent": agent,
        "type": "message.user",
        "occurred_at": "2026-05-01T10:00:00Z",
        "payload": {"text": "the train leaves at nine"},
    }
    if user is not None:
        doc["user"] = user
    return orjson.dumps(doc)


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys.json")


def proved(prover: Prover, value: bytes) -> RawRecord:
    headers = {k: v for k, v in prover.headers(value) if isinstance(v, bytes)}
    return RawRecord(value, 0, 0, "memory.events.raw", proof_of(headers))


def outcome(keys: KeyStore, record: RawRecord) -> Sequenced | DeadLetter:
    creds = credentials(keys, SECRET)
    doc = orjson.loads(record.value or b"{}")
    who = authenticate(creds, record.proof, record.value or b"", doc.get("tenant"))
    out = sequence(record, SequencerState(), NOW, proven=who)
    assert isinstance(out, Sequenced | DeadLetter)
    return out


def test_a_record_without_a_proof_is_never_ledgered(keys: KeyStore) -> None:
    out = outcome(keys, RawRecord(event(), 0, 7, "memory.events.raw"))
    assert isinstance(out, DeadLetter) and out.reason.startswith("unauthenticated")


def test_a_key_proves_its_own_tenants_events_inside_its_scope(keys: KeyStore) -> None:
    key = keys.create("acme", scope=Scope.model_validate({"agent": "planner"}))
    prover = Prover.for_key(key)
    assert isinstance(outcome(keys, proved(prover, event())), Sequenced)
    out = outcome(keys, proved(prover, event(agent="coder")))
    assert isinstance(out, DeadLetter) and "outside key" in out.reason
    out = outcome(keys, proved(prover, event(tenant="globex")))
    assert isinstance(out, DeadLetter) and "not a key of tenant" in out.reason


def test_a_proof_of_other_bytes_or_by_a_guessed_key_does_not_hold(keys: KeyStore) -> None:
    key = keys.create("acme")
    prover = Prover.for_key(key)
    value = event()
    forged = RawRecord(event(user="bo"), 0, 0, "memory.events.raw", proved(prover, value).proof)
    assert isinstance(outcome(keys, forged), DeadLetter)  # the MAC covers the value
    guessed = Prover(prover.key_id, b"\x00" * 32)
    assert isinstance(outcome(keys, proved(guessed, value)), DeadLetter)
    unknown = Prover("nosuchkey", prover.secret)
    assert isinstance(outcome(keys, proved(unknown, value)), DeadLetter)


def test_revoked_and_read_only_keys_prove_nothing(keys: KeyStore) -> None:
    reader = keys.create("acme", permissions=["read"])
    out = outcome(keys, proved(Prover.for_key(reader), event()))
    assert isinstance(out, DeadLetter) and "may not write" in out.reason
    writer, record = keys.create_record("acme", permissions=["write"])
    assert isinstance(outcome(keys, proved(Prover.for_key(writer), event())), Sequenced)
    keys.revoke(record.key_id)
    out = outcome(keys, proved(Prover.for_key(writer), event()))
    assert isinstance(out, DeadLetter) and "revoked" in out.reason


def test_a_key_made_before_permissions_still_writes(keys: KeyStore) -> None:
    legacy = keys.create("acme")  # no permissions, no scope: the whole tenant, every power
    assert isinstance(outcome(keys, proved(Prover.for_key(legacy), event(user=None))), Sequenced)


def test_the_stacks_own_proof_holds_for_any_tenant_and_scope() -> None:
    creds = Credentials(SECRET, {})
    value = event(tenant="globex", agent="retrospective", user=None)
    headers = dict((k, v) for k, v in Prover.internal(SECRET).headers(value))
    found = authenticate(creds, proof_of(headers), value, "globex")  # type: ignore[arg-type]
    assert found == Proven(INTERNAL, None, Scope())
    other = Prover.internal(b"t" * 32).headers(value)
    assert isinstance(authenticate(creds, proof_of(dict(other)), value, "globex"), Unproven)  # type: ignore[arg-type]
    # without a producer secret nothing claims to be the stack
    assert isinstance(authenticate(Credentials(None, {}), proof_of(headers), value, "g"), Unproven)  # type: ignore[arg-type]


def test_only_memstream_keys_make_provers() -> None:
    for bad in ["", "sk_abc_def", "ms_", "ms_abc", "ms__x"]:
        with pytest.raises(ValueError):
            Prover.for_key(bad)


def test_the_producer_secret_is_made_once_whoever_asks_first(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    found: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: found.append(producer_secret(settings))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 1 and len(found[0]) == 64
    path = tmp_path / "data" / "producer-secret"
    assert path.stat().st_mode & 0o777 == 0o600
    assert list((tmp_path / "data").iterdir()) == [path]  # no temporary file left
    assert producer_secret(Settings(data_dir=tmp_path / "data")) == found[0]
    given = Settings(data_dir=tmp_path / "x", producer_secret=SecretStr("from-env"))
    assert producer_secret(given) == b"from-env" and not (tmp_path / "x").exists()


def test_credentials_see_a_revocation_at_once(keys: KeyStore) -> None:
    _key, record = keys.create_record("acme")
    assert credentials(keys, None).keys[record.key_id].revoked_at is None
    keys.revoke(record.key_id)
    revoked = credentials(keys, None).keys[record.key_id].revoked_at
    assert isinstance(revoked, datetime) and revoked.tzinfo == UTC
