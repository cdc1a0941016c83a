"""Fair share of the read routes between tenants: who may start a read now (pure, clock passed in).

The read routes (checkout, recall, search, summarize_recall, and the MCP tools that call them)
do CPU-bound work in one process, so one tenant's flood slows every other tenant's reads unless
admission holds it to a share. Each tenant has:

- a **budget of read time**: the CPU seconds its reads spent, refilled at ``share`` seconds
  per second up to ``burst_s``. A read starts only while the budget is positive. It is charged
  the tenant's recent mean cost when it starts and corrected to its measured cost when it ends,
  so a flood starts reads one at a time at the pace its budget refills, never in bursts of
  reads that are all charged later (a tenant not seen yet is charged what reads have cost
  lately). Charging measured time, not a count of requests, holds a tenant to the same
  share whether its reads are cheap recalls or heavy checkouts over a large memory, and
  never charges the wait for an LLM (no CPU). The budget counts only for a read that would
  overlap another tenant's: one in flight, or, for a tenant that already has a read in
  flight, one started within ``CONTENDED_S``. Alone, a tenant may use what nobody else asks
  for, uncharged, and reads sent one after another never spend a budget;
- at most ``concurrency`` reads in flight.

All tenants together have at most ``total`` reads in flight (so the worker threads and the
interpreter lock are never all held by reads), and the last ``reserved`` of those slots go
only to a tenant with no read in flight: a tenant that floods cannot take the room another
tenant's first read needs.

What is refused is refused at once, with the seconds after which a retry can succeed (at
least ``MIN_RETRY_S``). A client that comes back before that time had passed, as a careless
or hostile client does, is refused after a pause of the time it had left (at most
``MAX_PAUSE_S``): answering refusals is work too, and a client that ignores ``Retry-After``
must not be able to spend the process's time on them. A client that honours it never waits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

Reason = Literal["concurrency", "budget", "busy"]
REASONS: tuple[Reason, ...] = ("concurrency", "budget", "busy")
ESTIMATE_WEIGHT = 0.3  # of the newest cost in a tenant's running estimate
MIN_RETRY_S = 1.0  # Retry-After is whole seconds
CONTENDED_S = 60.0  # another tenant's read this recent makes the budgets count
MAX_PAUSE_S = 1.0
_SWEEP_EVERY = 256  # admissions between two sweeps of idle tenants


@dataclass(frozen=True)
class ShareLimits:
    """The limits every tenant shares (``MEMSTREAM_READ_*`` settings)."""

    concurrency: int
    share: float
    burst_s: float
    total: int
    reserved: int

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.total < 1:
            raise ValueError("read concurrency limits must be at least 1")
        if self.share <= 0 or self.burst_s <= 0:
            raise ValueError("a tenant's read share and burst must be positive")
        if not 0 <= self.reserved < self.total:
            raise ValueError(
                f"reserved read slots ({self.reserved}) must be fewer than the total ({self.total})"
            )


@dataclass(frozen=True)
class Admitted:
    """A read that may start; hand it back to ``release`` when it ends. A ``free`` read
    started while no other tenant was reading: it is not charged."""

    tenant: str
    charged_s: float
    free: bool = False


@dataclass(frozen=True)
class Refused:
    """A read refused: say so after ``pause_s``; a retry ``retry_after_s`` after that can
    succeed."""

    tenant: str
    reason: Reason
    retry_after_s: float
    pause_s: float = 0.0


@dataclass
class _Tenant:
    level: float  # seconds of read time left; negative while in debt
    at: float  # when ``level`` was last refilled
    in_flight: int = 0
    estimate_s: float = 0.0  # running mean of this tenant's read costs
    told_until: float = 0.0  # the latest time a refusal told it to come back


class FairShare:
    """Admission decisions for every tenant of one process (thread-safe)."""

    def __init__(self, limits: ShareLimits) -> None:
        self.limits = limits
        self._tenants: dict[str, _Tenant] = {}
        self._in_flight = 0
        self._mean_cost_s = 0.0  # across tenants: what a tenant not seen yet is charged
        self._admissions = 0
        self._latest: list[tuple[str, float]] = []  # (tenant, last start), newest first
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> int:
        """Reads in flight across tenants."""
        return self._in_flight

    def admit(self, tenant: str, now: float) -> Admitted | Refused:
        """Start a read for ``tenant`` at time ``now`` (seconds, monotonic), or say why not."""
        lim = self.limits
        with self._lock:
            self._admissions += 1
            if self._admissions % _SWEEP_EVERY == 0:
                self._sweep(now)
            t = self._refilled(tenant, now)
            if t.in_flight >= lim.concurrency:
                return self._refuse(t, tenant, "concurrency", 0.0, now)
            shared = self._contended(tenant, t, now)
            if t.level <= 0 and (shared or self._neighbour_lately(tenant, now)):
                return self._refuse(t, tenant, "budget", -t.level / lim.share, now)
            room = lim.total - self._in_flight - (lim.reserved if t.in_flight else 0)
            if room <= 0:
                return self._refuse(t, tenant, "busy", 0.0, now)
            t.in_flight += 1
            self._in_flight += 1
            self._started(tenant, now)
            if not shared:
                return Admitted(tenant, 0.0, free=True)
            t.level -= t.estimate_s
            return Admitted(tenant, t.estimate_s)

    def _contended(self, tenant: str, t: _Tenant, now: float) -> bool:
        """Whether the read would share the process with another tenant's: one is in
        flight, or this tenant already has a read in flight while another tenant started one
        lately. Reads sent one after the other (an agent, a script, tenants taking turns)
        never overlap, so they never spend a budget, however many there are."""
        if self._in_flight > t.in_flight:
            return True
        return t.in_flight > 0 and self._neighbour_lately(tenant, now)

    def _neighbour_lately(self, tenant: str, now: float) -> bool:
        """Whether another tenant started a read within ``CONTENDED_S``. A tenant in debt
        (it overlapped its reads with another tenant's) is refused while one has, even
        for a read sent on its own."""
        other = next((at for name, at in self._latest if name != tenant), None)
        return other is not None and now - other < CONTENDED_S

    def _started(self, tenant: str, now: float) -> None:
        """Keep the latest start of the two tenants that started reads last."""
        rest = [(name, at) for name, at in self._latest if name != tenant]
        self._latest = [(tenant, now), *rest[:1]]

    @staticmethod
    def _refuse(t: _Tenant, tenant: str, reason: Reason, wait_s: float, now: float) -> Refused:
        """``wait_s``: how long until the read could start (0: when a read in flight ends)."""
        pause = min(MAX_PAUSE_S, t.told_until - now) if now < t.told_until else 0.0
        retry = max(MIN_RETRY_S, wait_s - pause)
        t.told_until = max(t.told_until, now + pause + retry)
        return Refused(tenant, reason, retry, pause)

    def release(self, read: Admitted, now: float, cost_s: float) -> None:
        """The read ended at ``now`` having spent ``cost_s`` seconds of CPU."""
        cost_s = max(0.0, cost_s)
        with self._lock:
            t = self._refilled(read.tenant, now)
            t.in_flight = max(0, t.in_flight - 1)
            self._in_flight = max(0, self._in_flight - 1)
            if not read.free:
                t.level += read.charged_s - cost_s
            t.estimate_s += ESTIMATE_WEIGHT * (cost_s - t.estimate_s)
            self._mean_cost_s += ESTIMATE_WEIGHT * (cost_s - self._mean_cost_s)

    def _refilled(self, tenant: str, now: float) -> _Tenant:
        t = self._tenants.get(tenant)
        if t is None:
            t = _Tenant(level=self.limits.burst_s, at=now, estimate_s=self._mean_cost_s)
            self._tenants[tenant] = t
            return t
        if now > t.at:
            t.level = min(self.limits.burst_s, t.level + (now - t.at) * self.limits.share)
            t.at = now
        return t

    def _sweep(self, now: float) -> None:
        """Forget tenants with nothing in flight, a full budget and no Retry-After pending: a
        fresh entry is the same, save the cost estimate, which the next read rebuilds."""
        for name in list(self._tenants):
            t = self._refilled(name, now)
            if t.in_flight == 0 and t.level >= self.limits.burst_s and now >= t.told_until:
                del self._tenants[name]

    def tenants(self) -> int:
        """Tenants with state kept (in flight, or a budget not yet full)."""
        with self._lock:
            return len(self._tenants)
