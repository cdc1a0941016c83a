"""HTTP write load for the end-to-end tests that kill processes under it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import httpx
from stackproc import RunningStack


@dataclass
class Load:
    """Posts small batches for two tenants until stopped; remembers what was accepted."""

    stack: RunningStack
    keys: dict[str, str]
    accepted: dict[str, set[str]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # what each request not answered 202 got
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
                    try:
                        r = client.post(
                            f"{self.stack.api_url}/v1/events",
                            json={"events": events},
                            headers={"Authorization": f"Bearer {key}"},
                        )
                    except httpx.HTTPError as exc:
                        self.failed.append(type(exc).__name__)
                        self.stop.wait(0.2)
                        continue
                    if r.status_code == 202:
                        self.accepted.setdefault(tenant, set()).update(ids)
                    else:
                        self.failed.append(f"HTTP {r.status_code}")
                self.stop.wait(0.05)
