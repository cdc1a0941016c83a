"""The data key store: one random key per sealed item, kept outside the log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

# What a key seals: a ledger event, a latent artifact, a checkout trace, a dead letter.
KeyKind = Literal["event", "latent", "packet", "dead_letter"]
KEY_BYTES = 32  # AES-256
_CHUNK = 500  # ids per statement: far below either database's bound-parameter limit


def chunks(ids: Iterable[str]) -> Iterable[list[str]]:
    """``ids`` without repeats, in lists of at most ``_CHUNK``: one statement each."""
    batch: list[str] = []
    for i in dict.fromkeys(ids):
        batch.append(i)
        if len(batch) == _CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


class SealingKeys(Protocol):
    """What sealing needs of a key store: the key of each id (see :meth:`DataKeys.
    create_or_get`). The stack's store, or the keys the API makes for one producer."""

    def create_or_get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]: ...


@dataclass(frozen=True)
class Owned:
    """What :meth:`DataKeys.create_owned` gives: the keys of the ids that are the owner's, and
    the ids whose key another made (an id a purge destroyed is in neither)."""

    keys: dict[str, bytes]
    taken: list[str]


class DataKeys(Protocol):
    """Keys by (tenant, kind, id). Destroyed keys are gone for good: every read leaves them
    out, and no key is ever made again for a destroyed id (the store keeps a tombstone of
    it): a late copy of purged content (a re-sent event, an artifact rebuilt before its
    builder saw the purge, the trace of a purged packet) finds no key and is never written,
    rather than sealed under a new key that would leave the old copies unreadable by mistake
    and the new one readable."""

    def create_or_get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        """The key of every id, created where missing (one write for all): the same id gets
        the same key however often it is asked (a re-sent event seals under its first key).
        A destroyed id is absent from the answer."""
        ...

    def create_owned(self, tenant: str, kind: KeyKind, ids: Iterable[str], owner: str) -> Owned:
        """:meth:`create_or_get` for a producer outside the stack (``owner``: its API key's
        id): a key made now is the owner's; an existing key is given only to the owner that
        made it, so a writer never obtains the key of an event it did not write."""
        ...

    def get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        """The keys that exist; an id whose key was destroyed (or never made) is absent."""
        ...

    def destroy(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> int:
        """Destroy the keys of ``ids`` (and forbid keys for those never made); how many keys
        existed. Idempotent."""
        ...

    def tenant_secret(self, tenant: str) -> bytes:
        """The tenant's secret for keyed digests (created once, never rotated by a purge)."""
        ...

    def close(self) -> None: ...
