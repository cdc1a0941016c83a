"""The position a write answers: what its delivery reports acknowledged, signed for its tenant.

A read given this position later (``after=``) waits until the projections it reads have
applied every record of the write. The broker epoch is read before the records are sent: a
broker that restarts meanwhile cannot acknowledge them (the producer is renewed), so the
offsets always belong to the epoch named.
"""

from __future__ import annotations

import threading
from pathlib import Path

from anyio import to_thread
from confluent_kafka import Message

from memstream.intake.producer import Refused
from memstream.position import Acknowledged, Position, encode_write
from memstream.shred.port import DataKeys
from memstream.stack.epoch import read_epoch

POSITION_DESCRIPTION = (
    "the write's position: an opaque token a read can wait for with after=, so that it "
    "sees this write; do not parse it"
)


class WritePositions:
    """Signs the positions of one API process's writes (tenant secrets are read once: they
    are never rotated)."""

    def __init__(self, keys: DataKeys, data_dir: Path) -> None:
        self.keys = keys
        self.data_dir = data_dir
        self._secrets: dict[str, bytes] = {}
        self._lock = threading.Lock()

    async def start(self, tenant: str) -> Writing:
        """Collect the delivery reports of one write of ``tenant`` about to be sent. The
        tenant's secret is read first: a key store that fails does so before anything is
        accepted, not after."""
        return Writing(tenant, read_epoch(self.data_dir), await self.secret(tenant))

    async def secret(self, tenant: str) -> bytes:
        """The tenant's secret (read once, then kept)."""
        with self._lock:
            known = self._secrets.get(tenant)
        if known is not None:
            return known
        secret = await to_thread.run_sync(self.keys.tenant_secret, tenant)
        with self._lock:
            self._secrets[tenant] = secret
        return secret


class Writing:
    """One write in flight: the epoch it was sent under and its acknowledgements."""

    def __init__(self, tenant: str, epoch: str, secret: bytes) -> None:
        self.tenant, self.epoch, self._secret = tenant, epoch, secret
        self.acks = Acknowledged()

    def token(self, count: int, segment: int | None) -> str:
        """The token of the write's ``count`` records (``segment``: the outbox segment they
        were spooled to; None without an outbox). A record not yet acknowledged marks the
        position unacknowledged: the outbox segment holds it."""
        raw, acknowledged = self.acks.snapshot()
        pos = Position(self.tenant, self.epoch, raw, segment, acknowledged < count)
        return encode_write(pos, self._secret)

    def report(self, _event_id: str, msg: Message | Refused) -> None:
        """A delivery report (the poll thread)."""
        if not isinstance(msg, Refused):
            partition, offset = msg.partition(), msg.offset()
            if partition is not None and offset is not None and offset >= 0:
                self.acks.add(partition, offset)
