"""The packets this process built lately: what each cites (lineage) and its question's family
(feedback on it counts most for questions like it). Bounded, the oldest go first; a purge
forgets those that cite what it removes or whose question named the subject."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Set
from dataclasses import dataclass

from memstream.events.payloads import QuestionFamily


@dataclass(frozen=True)
class RecentPacket:
    """What is kept of one packet."""

    tenant: str
    cited: list[str]
    family: QuestionFamily


class PacketMemory:
    """Recent packets by id, at most ``limit``; safe across request threads."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._packets: OrderedDict[str, RecentPacket] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, packet_id: str, recent: RecentPacket) -> None:
        with self._lock:
            self._packets[packet_id] = recent
            while len(self._packets) > self.limit:
                self._packets.popitem(last=False)

    def get(self, tenant: str, packet_id: str) -> RecentPacket | None:
        """The packet if this process still remembers it and it is ``tenant``'s."""
        recent = self._packets.get(packet_id)
        return recent if recent is not None and recent.tenant == tenant else None

    def reaching(self, tenant: str, ids: Set[str], subject_key: str) -> list[str]:
        """Ids of ``tenant``'s packets that cite any of ``ids`` or whose question named
        ``subject_key``."""
        with self._lock:
            items = list(self._packets.items())
        return [
            pid
            for pid, p in items
            if p.tenant == tenant
            and (not ids.isdisjoint(p.cited) or subject_key in p.family.entities)
        ]

    def named(self, tenant: str) -> set[str]:
        """The entity keys the questions of ``tenant``'s packets named."""
        with self._lock:
            items = list(self._packets.values())
        return {e for p in items if p.tenant == tenant for e in p.family.entities}

    def held(self, tenant: str, ids: Set[str], subject_key: str) -> int:
        """How many packets a purge would forget (:class:`memstream.forget.Forgetting`)."""
        return len(self.reaching(tenant, ids, subject_key))

    def forget(self, tenant: str, ids: Set[str], subject_key: str) -> int:
        """Forget the packets :meth:`reaching` finds; how many went."""
        doomed = self.reaching(tenant, ids, subject_key)
        with self._lock:
            for pid in doomed:
                self._packets.pop(pid, None)
        return len(doomed)
