"""The SDK's flush answers its position, against a real Tansu broker."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from memstream import position
from memstream.kafka.topics import RAW, ensure_topics
from memstream.sdk import MemoryClient
from memstream.settings import Settings
from memstream.shred.sqlite import SqliteDataKeys
from scratchtopics import tenant_reach


@pytest.fixture(scope="module")
def topics(broker: str) -> str:
    ensure_topics(broker, Settings())
    return broker


def test_flush_returns_position(topics: str, tmp_path: Path) -> None:
    keys = SqliteDataKeys(tmp_path / "data-keys.sqlite")
    tenant = f"sdk-pos-{uuid.uuid4().hex[:8]}"
    try:
        with MemoryClient(topics, tenant, keys=keys, epoch="1764090000000000000") as client:
            for i in range(20):
                client.emit(f"agent-{i}", "observation", {"text": f"café n°{i}\t«ok»"})
            token = client.flush()
            assert token.startswith("ms1.")  # signed: the client holds the data keys
            signed = position.verify(token, tenant, keys.tenant_secret(tenant))
            assert signed.tenant == tenant and signed.epoch == "1764090000000000000"
            assert signed.segment is None and not signed.unacknowledged
            assert len(signed.raw) > 1 and signed.raw == tenant_reach(topics, RAW, tenant)
            client.emit("agent-0", "observation", {"text": "one more"})
            later = position.verify(client.flush(), tenant, keys.tenant_secret(tenant))
            assert all(later.raw[p] >= o for p, o in signed.raw.items())
            assert later.raw == tenant_reach(topics, RAW, tenant)
            with pytest.raises(position.MalformedPosition):  # another tenant's key
                position.verify(token, tenant, keys.tenant_secret("another"))
    finally:
        keys.close()

    bare = f"sdk-bare-{uuid.uuid4().hex[:8]}"
    with MemoryClient(topics, bare) as client:
        assert position.read(client.flush()).position.raw == {}  # nothing written yet
        ids = [client.emit("only", "message.user", {"text": f"t{i}"}) for i in range(3)]
        token = client.flush()
    assert token.startswith("ms1u.") and len(ids) == 3  # unsigned: no data keys
    unsigned = position.verify(token, bare, b"any secret: unsigned tokens carry no MAC")
    assert unsigned.epoch == "" and unsigned.raw == tenant_reach(topics, RAW, bare)
    ((_partition, _offset),) = unsigned.raw.items()  # one stream: one partition
