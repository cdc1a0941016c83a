"""Proofs of a key on the raw topic: who may put a record in front of the sequencer.

Anyone who reaches the broker can produce to ``memory.events.raw``; the ledger takes a record
only when its producer proved a credential in two headers: ``memstream-key`` (a key id) and
``memstream-proof`` (HMAC-SHA256 over the record's value). Two credentials prove:

- an API key: the HMAC is keyed by the SHA-256 of the key, which the key store keeps (the
  Kafka SDK, given a key). The sequencer checks, as the API does, that the key is live, of
  the event's tenant, may ``write``, and that the event lies inside the key's scope.
- the stack's own producer secret (key id ``internal``): the API, which checked the caller's
  key before it accepted the write, and the workers that write derived events. Kept in the
  data dir (0600) or ``MEMSTREAM_PRODUCER_SECRET``.

The trust boundary is therefore the key store and the data dir, not the broker: a process
that can read them can prove anything, one that can only reach Kafka can prove nothing.
The check itself is pure (:func:`authenticate`, :func:`admitted`); the sequencer's shell
reads the key store once per batch.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memstream.keys import KEY_PREFIX, KeyRecord, KeyStore, hash_key
from memstream.scope import WHOLE, Scope
from memstream.settings import PRODUCER_SECRET_FILE, Settings

KEY_ID_HEADER = "memstream-key"
PROOF_HEADER = "memstream-proof"
INTERNAL = "internal"  # the key id the stack's own producers prove with
UNAUTHENTICATED = "unauthenticated"  # the dead letter's reason starts so


@dataclass(frozen=True)
class Prover:
    """A producer's credential: the key id it names and the secret it proves with."""

    key_id: str
    secret: bytes

    @classmethod
    def for_key(cls, api_key: str) -> Prover:
        """The credential of an API key (``ms_<id>_<secret>``; ValueError otherwise)."""
        prefix, _, rest = api_key.partition("_")
        key_id, sep, _ = rest.partition("_")
        if prefix != KEY_PREFIX or not sep or not key_id:
            raise ValueError("not a memstream API key (ms_<id>_<secret>)")
        return cls(key_id, bytes.fromhex(hash_key(api_key)))

    @classmethod
    def internal(cls, secret: bytes) -> Prover:
        """The stack's own producers' credential."""
        return cls(INTERNAL, secret)

    def headers(self, value: bytes) -> list[tuple[str, str | bytes | None]]:
        """The two headers that prove ``value`` (the record's value, as produced)."""
        return [(KEY_ID_HEADER, self.key_id.encode()), (PROOF_HEADER, _mac(self.secret, value))]


@dataclass(frozen=True)
class Proof:
    """What a raw record's headers claim: a key id and a MAC of its value."""

    key_id: str
    mac: bytes


def proof_of(headers: Mapping[str, bytes]) -> Proof | None:
    """The proof a record's headers carry, or None when they carry none."""
    key_id, mac = headers.get(KEY_ID_HEADER), headers.get(PROOF_HEADER)
    if key_id is None or mac is None:
        return None
    return Proof(key_id.decode(errors="replace"), mac)


@dataclass(frozen=True)
class Credentials:
    """What proofs are checked against: the producer secret and the key store's records by
    id (a snapshot: the shell takes one per batch, so a revocation holds from the next)."""

    internal: bytes | None
    keys: Mapping[str, KeyRecord]


@dataclass(frozen=True)
class Proven:
    """A record whose proof holds: as the stack itself (any tenant, any scope) or as a key
    (its tenant, its scope)."""

    key_id: str
    tenant: str | None  # None: the stack's own producer
    scope: Scope


@dataclass(frozen=True)
class Unproven:
    """Why a record's proof does not hold (the dead letter's reason)."""

    reason: str


def authenticate(
    creds: Credentials, proof: Proof | None, value: bytes, tenant: object
) -> Proven | Unproven:
    """Whether ``proof`` proves ``value`` for ``tenant`` (the record's, as it says): a live key
    of that tenant that may write, or the stack's producer secret."""
    if proof is None:
        return _refused("no key proof (memstream-key and memstream-proof headers)")
    if proof.key_id == INTERNAL:
        if creds.internal is not None and _holds(creds.internal, value, proof.mac):
            return Proven(INTERNAL, None, WHOLE)
        return _refused("the stack's producer proof does not hold")
    record = creds.keys.get(proof.key_id)
    if record is None or not _holds(bytes.fromhex(record.hash), value, proof.mac):
        return _refused(f"key {proof.key_id!r} is unknown or its proof does not hold")
    if record.revoked_at is not None:
        return _refused(f"key {proof.key_id!r} is revoked")
    if record.tenant != tenant:
        return _refused(f"key {proof.key_id!r} is not a key of tenant {tenant!r}")
    if "write" not in record.granted():
        return _refused(f"key {proof.key_id!r} may not write")
    return Proven(record.key_id, record.tenant, record.scope or WHOLE)


def admitted(proven: Proven, user: str | None, agent: str, stream: str) -> Unproven | None:
    """None when the event lies inside the proving key's scope, else why not."""
    if proven.scope.admits(user=user, agent=agent, stream=stream):
        return None
    return _refused(f"the event lies outside key {proven.key_id!r}'s scope")


def _refused(why: str) -> Unproven:
    return Unproven(f"{UNAUTHENTICATED}: {why}")


def _mac(secret: bytes, value: bytes) -> bytes:
    return hmac.new(secret, value, hashlib.sha256).digest()


def _holds(secret: bytes, value: bytes, mac: bytes) -> bool:
    return hmac.compare_digest(_mac(secret, value), mac)


def producer_secret(settings: Settings) -> bytes:
    """The stack's producer secret: ``MEMSTREAM_PRODUCER_SECRET``, else the data dir's file,
    made (0600, 32 random bytes) by the first process that asks."""
    if settings.producer_secret is not None:
        return settings.producer_secret.get_secret_value().encode()
    path = settings.data_dir / PRODUCER_SECRET_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read_secret(path)
    _create_secret(path)
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    found = path.read_text().strip()
    if not found:
        raise RuntimeError(f"{path} is empty: remove it, or set MEMSTREAM_PRODUCER_SECRET")
    return found.encode()


def _create_secret(path: Path) -> None:
    """Write a new secret whole, unless another process wrote one first (a hard link is
    made at once or not at all: nobody reads a half-written secret)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


def credentials(keys: KeyStore, internal: bytes | None) -> Credentials:
    """A snapshot of what proofs are checked against (reads the key file when it changed)."""
    return Credentials(internal, {r.key_id: r for r in keys.list()})
