"""How many ingest requests each tenant has open."""

from __future__ import annotations


class IngestSlots:
    """Ingest requests each tenant has open (on the event loop: no lock). A tenant holding
    ``per_tenant`` of them, slow bodies say, is refused more until one ends; others are not
    touched."""

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self.open: dict[str, int] = {}

    def take(self, tenant: str) -> bool:
        if self.open.get(tenant, 0) >= self.per_tenant:
            return False
        self.open[tenant] = self.open.get(tenant, 0) + 1
        return True

    def give(self, tenant: str) -> None:
        left = self.open.get(tenant, 0) - 1
        if left > 0:
            self.open[tenant] = left
        else:
            self.open.pop(tenant, None)
