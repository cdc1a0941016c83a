"""HTTP write load for the end-to-end tests that kill processes under it."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field

import httpx
from memstream.projection.status import caught_up
from stackproc import RunningStack, memstream, wait_until

# A kept-alive connection the server closes just as the next request goes out: the request
# never reached the API, and any HTTP client sends it again (the same ids: idempotent).
RESENT = (httpx.RemoteProtocolError,)


@dataclass
class Load:
    """Posts small batches for two tenants until stopped; remembers what was accepted, and
    every request that was not answered 202 (a read timeout and a reset connection included:
    only a connection closed before any answer is sent again, once, and counted apart)."""

    stack: RunningStack
    keys: dict[str, str]
    accepted: dict[str, set[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # what each request not answered 202 got
    resent: list[str] = field(default_factory=list)  # requests sent a second time, and why
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                for tenant, key in self.keys.items():
                    ids = [f"{tenant}-{n}-{i}" for i in range(10)]
                    n += 1
                    events = [
                        {"id": i, "stream": f"s{n % 3}", "type": "message.user",
                         "agent": "load", "payload": {"text": f"{tenant} note {i}"}}
                        for i in ids
                    ]  # fmt: skip
                    if self._post(client, key, events):
                        self.accepted.setdefault(tenant, set()).update(ids)
                self.stop.wait(0.05)

    def _post(self, client: httpx.Client, key: str, events: list[dict[str, object]]) -> bool:
        """One batch, answered 202 or recorded in ``failed``."""
        for attempt in (1, 2):
            try:
                r = client.post(
                    f"{self.stack.api_url}/v1/events",
                    json={"events": events},
                    headers={"Authorization": f"Bearer {key}"},
                )
            except RESENT as exc:
                if attempt == 1:
                    self.resent.append(type(exc).__name__)
                    continue
                self.failed.append(type(exc).__name__)
                return False
            except httpx.HTTPError as exc:
                self.failed.append(type(exc).__name__)
                self.stop.wait(0.2)
                return False
            if r.status_code == 202:
                return True
            self.failed.append(f"HTTP {r.status_code}")
            return False
        return False

    def answered_every_write(self) -> None:
        """Every batch was answered 202: no refused connection, no timeout, no reset, no
        error status; a resend after a closed kept-alive connection is rare."""
        assert self.failed == [], self.failed[:20]
        sent = sum(len(a) for a in self.accepted.values()) // 10
        assert len(self.resent) <= max(3, sent // 50), (len(self.resent), sent)

    def lost_nothing_and_doubled_nothing(self) -> None:
        """Every event answered 202 is in the ledger exactly once, the chain verifies, and
        the graph and the vectors converge to the ledger."""
        stack, tenants = self.stack, set(self.keys)
        accepted = set().union(*self.accepted.values())

        def ledgered() -> Counter[str]:
            return Counter(e["id"] for e in stack.ledger() if e["tenant"] in tenants)

        wait_until(lambda: accepted <= set(ledgered()), 120, "every accepted event in the ledger")
        counts = ledgered()
        assert max(counts.values()) == 1, [i for i, c in counts.items() if c > 1][:5]
        assert memstream("verify", data_dir=stack.data_dir, check=False).returncode == 0
        total = len(stack.ledger())
        wait_until(lambda: converged(stack, total), 180, "graph and vectors to match the ledger")


def converged(stack: RunningStack, n: int) -> bool:
    """The live version's graph and vectors hold exactly the ledger's ``n`` entries."""
    res = memstream("projections", "list", "--json", data_dir=stack.data_dir, check=False)
    if res.returncode != 0:
        return False
    (v,) = [v for v in json.loads(res.stdout)["versions"] if v["live"]]
    return caught_up(v, n, exact=True)
