"""Reads given after= a write's position, on the real stack: they answer once the live graph
and vectors applied the write, refuse another tenant's position (403) and anything that is not
one (422 naming `after`), and answer at the bound (or at once when waiting cannot help) with a
stale warning naming what was not applied."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from confluent_kafka import Message, Producer
from memstream import position
from memstream.client import MemoryHttpClient, StaleRead
from memstream.kafka.topics import RAW
from memstream.metrics import read_samples
from memstream.shred.sqlite import SqliteDataKeys
from memstream.stack.epoch import read_epoch
from messages_standin import MessagesStandin, llm_env, prompt_ids
from stackproc import RunningStack, memstream, start_stack, wait_until

BOUND_S = 15.0  # the stack's MEMSTREAM_READ_AFTER_MAX_WAIT_S: generous for a loaded machine
TENANT = "zoe-atelier.9"
OTHER = "voisins-2"


@pytest.fixture(scope="module")
def stack(
    standin: MessagesStandin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    env = {**llm_env(standin), "MEMSTREAM_READ_AFTER_MAX_WAIT_S": str(BOUND_S)}
    s = start_stack(tmp_path_factory.mktemp("read-after") / "data", env=env)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def keys(stack: RunningStack) -> dict[str, str]:
    made = {}
    for tenant in (TENANT, OTHER):
        out = memstream("keys", "create", "--tenant", tenant, data_dir=stack.data_dir)
        made[tenant] = out.stdout.strip()
    return made


@pytest.fixture(scope="module")
def client(stack: RunningStack, keys: dict[str, str]) -> Iterator[MemoryHttpClient]:
    with MemoryHttpClient(stack.api_url, keys[TENANT]) as c:

        def live() -> bool:  # the live version's vector index opens after start-up
            try:
                c.recall("anything", k=1)
            except Exception:
                return False
            return True

        wait_until(live, 120, "the live projection")
        yield c


def signed(stack: RunningStack, pos: position.Position) -> str:
    """A token for ``pos`` signed with the tenant's key, as a write of the stack would be."""
    data_keys = SqliteDataKeys(stack.data_dir / "data-keys.sqlite")
    try:
        return position.encode(pos, data_keys.tenant_secret(pos.tenant))
    finally:
        data_keys.close()


def marker_event(text: str) -> dict[str, Any]:
    return {"stream": "atelier", "type": "message.user", "agent": "Zoé", "payload": {"text": text}}


def cited(packet: dict[str, Any]) -> set[str]:
    ids = {i for a in packet["answer_candidates"] for i in a["support_ids"]}
    ids |= {f["fact_id"].split("#")[0] for f in packet["facts"]}
    ids |= {r["support_id"].split("#")[0] for r in packet["evidence"]}
    return ids | {sn["item_id"].split("#")[0] for sn in packet["snippets"]}


def post(stack: RunningStack, key: str, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{stack.api_url}{path}", json=body, headers=headers, timeout=120)


def test_checkout_after_cites_own_event_first_answer(client: MemoryHttpClient) -> None:
    word = f"quartz{uuid.uuid4().hex[:6]}"
    ids, token = client.emit_written(
        [marker_event(f"Zoé's code word for the atelier safe is {word}.")]
    )
    packet = client.checkout(f"What is Zoé's code word for the atelier safe? {word}", after=token)
    assert ids[0] in cited(packet), packet
    after = packet["meta"]["after"]
    assert after["applied"] is True and after["missing"] == [], after
    assert 0 <= after["waited_ms"] < BOUND_S * 1000
    assert not [w for w in packet["warnings"] if w["kind"] == "stale"]


def test_recall_search_summarize_after(client: MemoryHttpClient, standin: MessagesStandin) -> None:
    for n, read in enumerate(("recall", "search", "summarize")):
        word = f"heliotrope{n}{uuid.uuid4().hex[:6]}"
        ids, token = client.emit_written(
            [marker_event(f"The greenhouse key of Señor Núñez is called {word}.")]
        )
        query = f"greenhouse key {word}"
        with _no_stale():
            if read == "recall":
                found = [i["item_id"].split("#")[0] for i in client.recall(query, after=token)]
            elif read == "search":
                found = [h["id"] for h in client.search(query, after=token)]
            else:
                doc = client.summarize_recall(query, k=3, after=token, force_refresh=True)
                assert not [w for w in doc["warnings"] if w["kind"] == "stale"], doc
                found = prompt_ids(standin.requests[-1])
        assert ids[0] in [f.split("#")[0] for f in found], (read, found)


class _no_stale:
    """Fails when the client raised a StaleRead warning inside the block."""

    def __enter__(self) -> None:
        self._catch = warnings.catch_warnings(record=True)
        self._seen = self._catch.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc: object) -> None:
        self._catch.__exit__(*exc)
        stale = [w for w in self._seen if issubclass(w.category, StaleRead)]
        assert not stale, [str(w.message) for w in stale]


def test_foreign_position_403(stack: RunningStack, keys: dict[str, str]) -> None:
    with MemoryHttpClient(stack.api_url, keys[OTHER]) as other:
        _, token = other.emit_written([marker_event("the neighbours' position")])
    for path, body in (
        ("/v1/checkout", {"query": "anything?"}),
        ("/v1/recall", {"query": "anything"}),
        ("/v1/search", {"query": "anything"}),
        ("/v1/summarize_recall", {"query": "anything"}),
        ("/v1/invalidate", {"target_ids": ["evt-anything"], "reason": "wrong"}),
    ):
        resp = post(stack, keys[TENANT], path, {**body, "after": token})
        assert resp.status_code == 403, (path, resp.text)
        detail = resp.json()["detail"]
        assert detail.startswith("after:") and OTHER in detail and TENANT in detail, detail


def test_malformed_position_422(
    stack: RunningStack, keys: dict[str, str], client: MemoryHttpClient
) -> None:
    _, token = client.emit_written([marker_event("a position to damage")])
    prefix, body, mac = token.split(".")
    other_mac = ("A" if mac[0] != "A" else "B") + mac[1:]
    flipped = body[:-3] + ("x" if body[-3] != "x" else "y") + body[-2:]
    bad = [
        "garbage",
        "ms1.\x00.AAAA",
        token + "\n",
        f"{prefix}.{body}.{other_mac}",  # a signature that is not the tenant's
        f"{prefix}.{flipped}.{mac}",  # a tampered body
        f"ms1u.{body}",  # the signed body presented as unsigned: still parsed, tenant checked
    ]
    for value in bad[:-1]:
        for path in ("/v1/checkout", "/v1/recall", "/v1/search", "/v1/summarize_recall"):
            resp = post(stack, keys[TENANT], path, {"query": "anything?", "after": value})
            assert resp.status_code == 422, (value, path, resp.text)
            doc = resp.json()
            assert doc["detail"].startswith("after:"), doc
            assert [e["field"] for e in doc["errors"]] == ["after"], doc
        wrong = {"target_ids": ["evt-anything"], "reason": "wrong", "after": value}
        resp = post(stack, keys[TENANT], "/v1/invalidate", wrong)
        assert resp.status_code == 422, (value, resp.text)
        assert [e["field"] for e in resp.json()["errors"]] == ["after"], resp.text
    unsigned = post(stack, keys[TENANT], "/v1/recall", {"query": "anything", "after": bad[-1]})
    assert unsigned.status_code == 200, unsigned.text  # unsigned: accepted for its tenant


def test_unreachable_position_answers_at_bound_with_stale_warning(
    stack: RunningStack, client: MemoryHttpClient
) -> None:
    far = position.Position(TENANT, read_epoch(stack.data_dir), {0: 10**12})
    packet = client.checkout("What is Zoé's code word?", after=signed(stack, far))
    after = packet["meta"]["after"]
    assert after["applied"] is False and after["waited_ms"] >= BOUND_S * 1000 - 100, after
    assert {m["projection"] for m in after["missing"]} == {"graph", "vectors"}, after
    stale = [w for w in packet["warnings"] if w["kind"] == "stale"]
    assert len(stale) == 1 and stale[0]["ids"] == [], stale
    assert "graph" in stale[0]["message"] and "vectors" in stale[0]["message"], stale
    assert "not yet applied after" in stale[0]["message"], stale
    samples = read_samples(
        f"{stack.api_url}/metrics", {"memstream_read_after_stale_total"}, timeout=30
    )
    counted = {(x.labels["route"], x.labels["projection"]): x.value for x in samples}
    assert counted[("checkout", "graph")] >= 1 and counted[("checkout", "vectors")] >= 1


def test_partition_the_topic_lacks_is_stale_at_once(
    stack: RunningStack, client: MemoryHttpClient
) -> None:
    nowhere = position.Position(TENANT, read_epoch(stack.data_dir), {999: 0})
    with pytest.warns(StaleRead, match="partition the topic does not have"):
        client.recall("anything", after=signed(stack, nowhere))
    doc = client.checkout("anything?", after=signed(stack, nowhere))
    assert doc["meta"]["after"]["waited_ms"] < BOUND_S * 1000 / 2, doc["meta"]


def test_invalidate_after_a_write_checks_its_targets_once_memory_applied_it(
    stack: RunningStack, keys: dict[str, str], client: MemoryHttpClient
) -> None:
    word = f"obsidian{uuid.uuid4().hex[:6]}"
    ids, token = client.emit_written([marker_event(f"Zoé's kiln fires at {word} degrees.")])
    assert client.invalidate([ids[0]], "the kiln was recalibrated", after=token)
    # After a write memory applied, an id it does not hold is simply not there.
    nothing = f"evt-nothing-{uuid.uuid4().hex[:8]}"
    body = {"target_ids": [nothing], "reason": "wrong", "after": token}
    resp = post(stack, keys[TENANT], "/v1/invalidate", body)
    assert resp.status_code == 404 and resp.json()["detail"] == f"not in memory: {nothing}"
    # A position memory can never apply: the 404 says it may not be projected, and why.
    nowhere = position.Position(TENANT, read_epoch(stack.data_dir), {999: 0})
    resp = post(stack, keys[TENANT], "/v1/invalidate", {**body, "after": signed(stack, nowhere)})
    detail = resp.json()["detail"]
    assert resp.status_code == 404, resp.text
    assert detail.startswith(f"not in memory (or not projected yet): {nothing}; after:"), detail
    assert "partition the topic does not have" in detail, detail
    samples = read_samples(
        f"{stack.api_url}/metrics", {"memstream_read_after_wait_seconds_count"}, timeout=30
    )
    waits = {x.labels["route"]: x.value for x in samples}
    assert waits["invalidate"] >= 3, waits


def test_sequencer_dead_letter_does_not_wait_for_bound(
    stack: RunningStack, client: MemoryHttpClient
) -> None:
    """A raw record with a NUL in its text (what an SDK without the client-side check would
    send) is dead-lettered by the sequencer: it never reaches the ledger, and a read after it
    answers once the projections caught up with the ledger, not at the bound."""
    delivered: list[Message] = []
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    envelope = {"id": f"evt-{uuid.uuid4().hex}", "tenant": TENANT, "stream": "atelier"}
    envelope |= {"type": "observation", "payload": {"text": "a\x00b"}}
    value = orjson.dumps(envelope)
    producer.produce(
        RAW,
        value,
        key=f"{TENANT}/atelier".encode(),
        headers=stack.prover.headers(value),  # proved: refused for its NUL, not its sender
        on_delivery=lambda err, msg: delivered.append(msg) if err is None else None,
    )
    producer.flush(30)
    (msg,) = delivered
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None
    pos = position.Position(TENANT, read_epoch(stack.data_dir), {partition: offset})
    unsigned = position.encode(pos, None)  # as an SDK without data keys answers it
    packet = client.checkout("anything about the atelier?", after=unsigned)
    after = packet["meta"]["after"]
    assert after["applied"] is True, after
    assert after["waited_ms"] < BOUND_S * 1000 - 1000, after


def cli_emit(stack: RunningStack, text: str) -> dict[str, Any]:
    """``memstream emit --json`` of one message by Ana-María: its id and position."""
    out = memstream(
        "emit", "--tenant", TENANT, "--stream", "kiln-room", "--type", "message.user",
        "--agent", "Ana-María", "--text", text, "--json", data_dir=stack.data_dir,
    )  # fmt: skip
    written: dict[str, Any] = orjson.loads(out.stdout)
    return written


def test_the_cli_emits_with_a_position_and_checks_out_after_it(
    stack: RunningStack, keys: dict[str, str]
) -> None:
    word = f"garnet{uuid.uuid4().hex[:6]}"
    written = cli_emit(stack, f"The kiln room of Ana-María Ñúñez opens with the word {word}.")
    assert position.read(written["position"]).position.tenant == TENANT
    question = f"Which word opens the kiln room? {word}"
    args = ["checkout", question, "--tenant", TENANT, "--key", keys[TENANT]]
    packet = orjson.loads(
        memstream(*args, "--after", written["position"], data_dir=stack.data_dir).stdout
    )
    assert written["id"] in cited(packet), packet
    assert packet["meta"]["after"]["applied"] is True, packet["meta"]
    refused = memstream(*args, "--after", "ms1.AAAA.BBBB", data_dir=stack.data_dir, check=False)
    assert refused.returncode != 0 and "after" in refused.stderr + refused.stdout


def test_the_cli_invalidates_after_a_write(stack: RunningStack, keys: dict[str, str]) -> None:
    written = cli_emit(stack, f"The glaze of batch {uuid.uuid4().hex[:6]} is Œillet pink.")
    args = ["invalidate", written["id"], "--tenant", TENANT, "--key", keys[TENANT]]
    args += ["--reason", "the glaze came out grey", "--after", written["position"], "--json"]
    done = orjson.loads(memstream(*args, data_dir=stack.data_dir).stdout)
    assert done["target_ids"] == [written["id"]] and done["id"], done
