"""Tenant-fair read-ahead (pure): which records of those read ahead form the next batch.

A consumer reads ahead and queues each record per (topic, partition, tenant); a batch is
built by deficit round robin over the tenants with records queued, so one tenant's burst
does not hold another tenant's record behind it. What the processors rely on is kept:

- Order within a (topic, partition, tenant) queue is the consumed order, so per-stream and
  per-tenant order within a partition hold (a stream's key starts with its tenant); a batch
  lists its records in (topic, partition, offset) order.
- The offset to commit per partition is its low-water mark: the smallest offset still
  queued there (of any tenant), or the last consumed + 1 when nothing is. Everything below
  it was processed; a restart re-reads what is above it, already processed or not, which
  idempotent processors (the sequencer drops ids it has seen) apply once.

The tenant is the key's bytes before the first ``/``, not decoded: ledger and raw records
are keyed ``tenant/stream``, ``memory.latents`` records by the tenant alone. A key without
``/`` is its own tenant (so a tenant's latent artifacts share its turn); records without a
key share one queue of their own (tenant None), apart from every keyed tenant.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import Message

MIN_SHARE = 50  # records a tenant takes per round, however many tenants are queued

Slot = tuple[str, int]  # (topic, partition)
Tenant = bytes | None


def tenant_of(key: bytes | None) -> Tenant:
    """The tenant a record's key names: its bytes before the first ``/`` (the whole key
    when there is none); None for a record without a key."""
    if key is None:
        return None
    cut = key.find(b"/")
    return key if cut < 0 else key[:cut]


def _size(m: Message) -> int:
    return len(m.value() or b"") + len(m.key() or b"")


def _slot(m: Message) -> tuple[Slot, int]:
    topic, partition, offset = m.topic(), m.partition(), m.offset()
    if topic is None or partition is None or offset is None:
        raise ValueError("a consumed record without a topic, partition or offset")
    return (topic, partition), offset


@dataclass
class FairQueue:
    """Records read ahead, per (topic, partition) and tenant; see the module."""

    min_share: int = MIN_SHARE
    bytes: int = 0  # keys and values of the queued records
    _queues: dict[Tenant, dict[Slot, deque[Message]]] = field(default_factory=dict)
    _turns: deque[Tenant] = field(default_factory=deque)  # tenants with records, in turn
    _credit: dict[Tenant, int] = field(default_factory=dict)  # a share a full batch cut
    _next: dict[Slot, int] = field(default_factory=dict)  # last consumed + 1

    @property
    def tenants(self) -> int:
        """Tenants with records queued."""
        return len(self._turns)

    def __len__(self) -> int:
        return sum(len(q) for queues in self._queues.values() for q in queues.values())

    def add(self, msgs: Iterable[Message]) -> None:
        """Queue consumed records (in their consumed order)."""
        for m in msgs:
            slot, offset = _slot(m)
            tenant = tenant_of(m.key())
            queues = self._queues.get(tenant)
            if queues is None:
                queues = self._queues[tenant] = {}
                self._turns.append(tenant)
            queues.setdefault(slot, deque()).append(m)
            self._next[slot] = max(self._next.get(slot, 0), offset + 1)
            self.bytes += _size(m)

    def take(self, limit: int) -> list[Message]:
        """Up to ``limit`` records: each tenant in turn takes ``max(limit // tenants,
        min_share)``; a tenant the limit cut short keeps the rest of its share and goes
        first next time."""
        if not self._turns or limit <= 0:
            return []
        share = max(limit // len(self._turns), self.min_share)
        batch: list[Message] = []
        while self._turns and len(batch) < limit:
            tenant = self._turns[0]
            credit = self._credit.pop(tenant, 0) or share
            want = min(credit, limit - len(batch))
            batch += self._pop(tenant, want)
            if tenant not in self._queues:
                self._turns.popleft()
            elif want < credit:
                self._credit[tenant] = credit - want
            else:
                self._turns.rotate(-1)
        batch.sort(key=_slot)
        return batch

    def _pop(self, tenant: Tenant, n: int) -> list[Message]:
        """``n`` records of ``tenant`` (fewer when it has fewer), spread over its partitions."""
        queues = self._queues[tenant]
        out: list[Message] = []
        while len(out) < n and queues:
            each = max(1, (n - len(out)) // len(queues))
            for slot in list(queues):
                q = queues[slot]
                for _ in range(min(each, n - len(out), len(q))):
                    m = q.popleft()
                    self.bytes -= _size(m)
                    out.append(m)
                if not q:
                    del queues[slot]
                if len(out) >= n:
                    break
        if not queues:
            del self._queues[tenant]
        return out

    def low_marks(self) -> dict[Slot, int]:
        """Per partition consumed: the offset everything below which was taken."""
        marks = dict(self._next)
        for queues in self._queues.values():
            for slot, q in queues.items():
                first = q[0].offset()
                if first is not None and first < marks[slot]:
                    marks[slot] = first
        return marks

    def drop(self, slots: Iterable[Slot]) -> None:
        """Forget the partitions (revoked: they are read again from their committed mark)."""
        gone = set(slots)
        for tenant in list(self._queues):
            queues = self._queues[tenant]
            for slot in gone & queues.keys():
                self.bytes -= sum(_size(m) for m in queues.pop(slot))
            if not queues:
                del self._queues[tenant]
                self._credit.pop(tenant, None)
        self._turns = deque(t for t in self._turns if t in self._queues)
        for slot in gone:
            self._next.pop(slot, None)
