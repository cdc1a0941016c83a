"""Nothing accepted is lost, whatever its size or shape: a real stack, as a hostile tenant.

Events of growing size up to the ingest body limit, alone and inside batches of small ones:
every event answered 2xx is in the ledger, every refused one is named in its 413 (and nothing
of its batch is produced). A record refused by the broker for good (an outbox segment left
with one past today's record limit) is dead-lettered without holding its neighbours. Slow
bodies are refused by their pace, and one tenant's slow connections by its cap, while
another tenant writes.

One tenant's backlog fills only its share of the outbox: with the sequencer paused, that
tenant alone is answered 429 while another writes, and status names the outbox's oldest
event; resumed, both drain.

This module owns its stack: its limits are set small (a 256 KiB record limit, an 8 MiB
ingest body, a 2 s body grace, two ingest requests a tenant, a 16 MiB outbox) so the growing
sizes, the slow bodies and the backlog take seconds; it pauses the sequencer, and the poison
case stops and restarts the stack.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from memstream.events import EventAdapter
from memstream.kafka.topics import DLQ
from memstream.metrics import read_samples
from memstream.shred.sealer import EventSealer
from memstream.shred.sqlite import SqliteDataKeys
from stackproc import BIN, RunningStack, healthy_status, memstream, start_stack, wait_until
from topicread import read_topic

RECORD_LIMIT = 256 << 10
BODY_LIMIT = 8 << 20
ENV = {
    "MEMSTREAM_MAX_RECORD_BYTES": str(RECORD_LIMIT),
    "MEMSTREAM_API_MAX_INGEST_BODY_BYTES": str(BODY_LIMIT),
    "MEMSTREAM_API_BODY_GRACE_S": "2",
    "MEMSTREAM_API_BODY_MIN_RATE": "1024",
    "MEMSTREAM_API_BODY_DEADLINE_S": "6",
    "MEMSTREAM_API_TENANT_INGEST_CONCURRENCY": "2",
    "MEMSTREAM_OUTBOX_MAX_BYTES": str(16 << 20),  # a tenant's share: 4 MiB
}
# Content sizes: well inside, around the limit (sealed: base64 grows content by a third),
# well past it, and up to the body limit.
SIZES = [1_001, 60_000, 150_001, 190_000, 200_000, 260_001, 1_000_000, 4_000_001, 8_200_000,
         8_400_000]  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    s = start_stack(tmp_path_factory.mktemp("large") / "data", env=dict(ENV))
    try:
        healthy_status(s.data_dir)
        yield s
    finally:
        s.stop()


JSON = {"Content-Type": "application/json"}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def tool_result(eid: str, size: int) -> dict[str, Any]:
    """A tool output of ``size`` characters, accented (two bytes each in UTF-8) half the time."""
    text = ("ø" if size % 2 else "x") * (size // (2 if size % 2 else 1))
    return {"id": eid, "stream": "tools", "type": "tool.result",
            "payload": {"tool": "fetch", "output": text}}  # fmt: skip


def ledger_ids(stack: RunningStack, tenant: str) -> set[str]:
    return {e["id"] for e in stack.ledger() if e.get("tenant") == tenant}


def test_every_2xx_event_is_ledgered_and_every_refused_one_named(stack: RunningStack) -> None:
    key = memstream("keys", "create", "--tenant", "big-t", data_dir=stack.data_dir).stdout.strip()
    accepted: set[str] = set()
    refused: list[str] = []
    with httpx.Client(base_url=stack.api_url, headers=auth(key), timeout=120) as http:
        for size in SIZES:
            alone = tool_result(f"alone-{size}", size)
            resp = http.post("/v1/events", content=orjson.dumps(alone), headers=JSON)
            if resp.status_code == 202:
                accepted.add(alone["id"])
                continue
            body = resp.json()
            if len(orjson.dumps(alone)) > BODY_LIMIT:  # the body limit answers first
                assert resp.status_code == 413 and "route's limit" in body["detail"]
                continue
            assert resp.status_code == 413, resp.text
            assert body["limit"] == RECORD_LIMIT and body["too_large"][0]["id"] == alone["id"]
            assert f"record limit of {RECORD_LIMIT} bytes" in body["detail"]
            assert body["detail"].startswith(f"event (id alone-{size})")
            refused.append(alone["id"])
            mixed = [tool_result(f"m{size}-a", 10), tool_result(f"m{size}-b", size),
                     tool_result(f"m{size}-c", 20)]  # fmt: skip
            resp = http.post("/v1/events", json={"events": mixed})
            assert resp.status_code == 413, resp.text
            body = resp.json()
            assert [(t["index"], t["id"]) for t in body["too_large"]] == [(1, f"m{size}-b")]
            refused += [e["id"] for e in mixed]
        fitting = [tool_result(f"fit-{i}", 190_000) for i in range(3)]
        resp = http.post("/v1/events", json={"events": fitting})
        assert resp.status_code == 202, resp.text
        accepted |= {e["id"] for e in fitting}
    # The boundary lies between 190k and 200k characters of content (sealed, base64).
    assert {"alone-1001", "alone-60000", "alone-150001", "alone-190000"} <= accepted
    assert {"alone-200000", "alone-260001", "alone-1000000", "alone-8200000"} <= set(refused)
    wait_until(lambda: ledger_ids(stack, "big-t") >= accepted, 90, "the accepted events")
    assert not ledger_ids(stack, "big-t") & set(refused)  # nothing of a refused batch
    doc = healthy_status(stack.data_dir)
    assert doc["healthy"], doc["problems"]


def raw_request(stack: RunningStack, key: str, path: str, body_size: int) -> socket.socket:
    """A connection that sends its headers, declaring a body of ``body_size`` bytes."""
    host, port = stack.api_url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=30)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {key}\r\nContent-Length: {body_size}\r\n\r\n"
    )
    conn.sendall(head.encode())
    return conn


def whole(conn: socket.socket, first: bytes) -> bytes:
    """An answer that began with ``first``, read to the end of its body."""
    answer = first
    conn.settimeout(10)
    while b"\r\n\r\n" not in answer:
        answer += conn.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))  # fmt: skip
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def trickle(conn: socket.socket, every_s: float, chunk: bytes, stop: threading.Event) -> bytes:
    """Send ``chunk`` every ``every_s`` until the server answers; its answer."""
    conn.settimeout(every_s)
    while not stop.is_set():
        try:
            first = conn.recv(65536)
        except TimeoutError:
            try:
                conn.sendall(chunk)
            except OSError:
                return b""
            continue
        return whole(conn, first)
    return b""


def test_slow_bodies_are_refused_by_pace_and_a_tenants_connections_by_its_cap(
    stack: RunningStack,
) -> None:
    slow = memstream("keys", "create", "--tenant", "slow-t", data_dir=stack.data_dir).stdout
    other = memstream("keys", "create", "--tenant", "busy-t", data_dir=stack.data_dir).stdout
    stop = threading.Event()
    conns = [raw_request(stack, slow.strip(), "/v1/events", 10_000) for _ in range(2)]
    answers: list[tuple[float, bytes]] = []
    started = time.monotonic()

    def run(conn: socket.socket) -> None:
        answer = trickle(conn, 0.5, b" ", stop)
        answers.append((time.monotonic() - started, answer))

    threads = [threading.Thread(target=run, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    time.sleep(0.5)  # both are open and read
    third = httpx.post(f"{stack.api_url}/v1/events", headers=auth(slow.strip()),
                       json=tool_result("third", 10), timeout=30)  # fmt: skip
    assert third.status_code == 429 and third.headers["Retry-After"] == "5", third.text
    assert "already has 2 ingest requests open" in third.json()["detail"]
    busy = httpx.post(f"{stack.api_url}/v1/events", headers=auth(other.strip()),
                      json=tool_result("busy-1", 10), timeout=30)  # fmt: skip
    assert busy.status_code == 202, busy.text
    for t in threads:
        t.join(30)
    stop.set()
    assert len(answers) == 2
    for elapsed, answer in answers:
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"slower than 1024 bytes/s" in answer
        assert 1.5 <= elapsed <= 10, elapsed  # the 2 s grace, then refused
    # A body at a good rate that goes on past the deadline.
    conn = raw_request(stack, other.strip(), "/v1/events", 1_000_000)
    begun = time.monotonic()
    answer = trickle(conn, 1.0, b" " * 4096, stop=threading.Event())  # above the rate
    assert answer.startswith(b"HTTP/1.1 408") and b"not whole within 6 s" in answer, answer
    assert 5 <= time.monotonic() - begun <= 12
    conn.close()
    refusals = {
        s.labels["reason"]: s.value
        for s in read_samples(
            f"{stack.api_url}/metrics", ("memstream_api_refused_total",), timeout=30
        )
    }
    assert refusals["body_too_slow"] >= 2 and refusals["body_deadline"] >= 1
    assert refusals["tenant_ingest_open"] >= 1


def status_with(stack: RunningStack, **env: str) -> dict[str, Any]:
    """``memstream status --json`` with ``MEMSTREAM_*`` settings of its own."""
    out = subprocess.run(
        [str(BIN / "memstream"), "status", "--json", "--data-dir", str(stack.data_dir)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, **env),
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_one_tenants_backlog_fills_only_its_share_of_the_outbox(stack: RunningStack) -> None:
    flood = memstream("keys", "create", "--tenant", "flood-t", data_dir=stack.data_dir).stdout
    calm = memstream("keys", "create", "--tenant", "calm-t", data_dir=stack.data_dir).stdout
    sequencer = stack.pid("sequencer")
    os.kill(sequencer, signal.SIGSTOP)  # nothing is ledgered: the outbox keeps every event
    try:
        answers = []
        with httpx.Client(base_url=stack.api_url, headers=auth(flood.strip()), timeout=60) as h:
            for i in range(40):  # 40 x ~250 KiB sealed: past a 4 MiB share
                batch = [tool_result(f"fl-{i}-{j}", 45_000) for j in range(4)]
                answers.append(h.post("/v1/events", json={"events": batch}))
                if answers[-1].status_code != 202:
                    break
        refused = answers[-1]
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "5", refused.text
        assert "tenant flood-t's backlog in the outbox holds" in refused.json()["detail"]
        assert 10 <= len(answers) < 40
        other = httpx.post(f"{stack.api_url}/v1/events", headers=auth(calm.strip()),
                           json=tool_result("calm-1", 100), timeout=60)  # fmt: skip
        assert other.status_code == 202, other.text
        time.sleep(3)
        doc = status_with(stack, MEMSTREAM_OUTBOX_MAX_AGE_S="2")
        assert not doc["healthy"]
        assert [p for p in doc["problems"] if p.startswith("outbox: its oldest accepted event")]
    finally:
        os.kill(sequencer, signal.SIGCONT)
    accepted = {i for r in answers if r.status_code == 202 for i in r.json()["ids"]}
    wait_until(lambda: accepted | {"calm-1"} <= ledger_ids(stack, "flood-t")
               | ledger_ids(stack, "calm-t"), 120, "the backlog ledgered")  # fmt: skip
    wait_until(lambda: status_with(stack, MEMSTREAM_OUTBOX_MAX_AGE_S="2")["healthy"], 120,
               "the outbox drained and status healthy")  # fmt: skip
    again = httpx.post(f"{stack.api_url}/v1/events", headers=auth(flood.strip()),
                       json=tool_result("fl-again", 100), timeout=60)  # fmt: skip
    assert again.status_code == 202, again.text


def test_a_record_refused_for_good_is_dead_lettered_without_its_neighbours(
    stack: RunningStack,
) -> None:
    """Stopped, the stack is left an outbox segment (as an API with a larger record limit
    would leave it) holding a record past today's limit between two good ones. Started again,
    the outbox sends the good ones to the ledger and the other to the DLQ, once."""
    stack.stop()
    keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    tenant = "poison-t"
    docs = [tool_result("p-before", 10), tool_result("p-big", 400_000), tool_result("p-after", 10)]
    events = [
        EventAdapter.validate_python(
            d | {"tenant": tenant, "agent": "Zoë", "occurred_at": datetime.now(UTC)}
        )
        for d in docs
    ]
    lines = EventSealer(keys).encode(events)
    keys.close()
    segment = stack.data_dir / "outbox" / "000009999999.jsonl"
    segment.write_bytes(b"".join(line + b"\n" for line in lines))
    hour_ago = time.time() - 3600
    os.utime(segment, (hour_ago, hour_ago))
    restarted = start_stack(stack.data_dir, env=dict(ENV))
    stack.proc, stack.info = restarted.proc, restarted.info
    wait_until(lambda: {"p-before", "p-after"} <= ledger_ids(stack, tenant), 120,
               "the poison's neighbours in the ledger")  # fmt: skip
    wait_until(lambda: not segment.exists(), 60, "the segment to be archived and deleted")
    assert "p-big" not in ledger_ids(stack, tenant)
    letters = [orjson.loads(m.value() or b"{}") for m in read_topic(stack.bootstrap, DLQ)]
    mine = [x for x in letters if x.get("source", {}).get("event_id") == "p-big"]
    assert len(mine) == 1, mine
    assert "Message size too large" in mine[0]["reason"]
    assert mine[0]["source"]["outbox_segment"] == 9999999 and mine[0]["source"]["line"] == 1
    head = base64.b64decode(mine[0]["raw_b64"])
    assert head == lines[1][: RECORD_LIMIT // 2] and mine[0]["raw_bytes"] == len(lines[1])
    dead = read_samples(
        f"{stack.api_url}/metrics", ("memstream_outbox_dead_lettered_total",), timeout=30
    )
    assert sum(s.value for s in dead) == 1
    doc = healthy_status(stack.data_dir)
    assert not [p for p in doc["problems"] if p.startswith("outbox")], doc["problems"]
    assert memstream("verify", "--tenant", tenant, data_dir=stack.data_dir).returncode == 0
