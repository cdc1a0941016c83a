"""The API key store: hashed at rest, atomic writes, reload on change."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from memstream.keys import KeyStore, KeyStoreError, LastUsed
from memstream.scope import Scope
from memstream.settings import Settings


def test_create_returns_key_that_resolves_to_tenant(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.create("acme")
    assert key.startswith("ms_")
    _, key_id, secret = key.split("_", 2)
    assert len(secret) >= 32
    assert store.tenant_for(key) == "acme"
    assert [r.key_id for r in store.list()] == [key_id]


def test_only_the_hash_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key = KeyStore(path).create("acme")
    text = path.read_text()
    assert key not in text
    assert key.split("_", 2)[2] not in text
    (record,) = json.loads(text)["keys"]
    assert record["hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert set(record) == {"key_id", "hash", "tenant", "created_at"}


def test_file_mode_is_0600_and_no_temp_files_left(tmp_path: Path) -> None:
    path = tmp_path / "data" / "keys.json"
    KeyStore(path).create("acme")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_unknown_and_malformed_keys_resolve_to_none(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.create("acme")
    assert store.tenant_for(key + "x") is None
    assert store.tenant_for("") is None
    assert store.tenant_for("not-a-key") is None
    assert KeyStore(tmp_path / "missing.json").tenant_for(key) is None


def test_invalid_tenant_is_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    for bad in ("", "a/b", "-lead", "x" * 65, "sp ace"):
        with pytest.raises(ValueError, match="invalid tenant"):
            store.create(bad)
    assert not (tmp_path / "keys.json").exists()


def test_running_reader_sees_keys_created_by_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    reader = KeyStore(path)
    first = KeyStore(path).create("acme")
    assert reader.tenant_for(first) == "acme"
    # A second writer (the CLI) adds a key after the reader has loaded the file.
    second = KeyStore(path).create("globex")
    assert reader.tenant_for(second) == "globex"
    assert reader.tenant_for(first) == "acme"
    assert [r.tenant for r in reader.list()] == ["acme", "globex"]


def test_concurrent_creates_keep_every_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    keys: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        k = KeyStore(path).create(f"t{i}")
        with lock:
            keys.append(k)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = KeyStore(path)
    assert len(store.list()) == 16
    assert all(store.tenant_for(k) is not None for k in keys)


def test_malformed_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text("{not json")
    with pytest.raises(KeyStoreError, match="malformed"):
        KeyStore(path).tenant_for("ms_x_y")


def test_path_comes_from_settings(tmp_path: Path) -> None:
    store = KeyStore.from_settings(Settings(data_dir=tmp_path))
    assert store.path == tmp_path / "keys.json"
    explicit = tmp_path / "elsewhere" / "k.json"
    assert KeyStore.from_settings(Settings(keys_file=explicit)).path == explicit
    key = store.create("acme")
    assert os.path.exists(tmp_path / "keys.json")
    assert KeyStore.from_settings(Settings(data_dir=tmp_path)).tenant_for(key) == "acme"


def test_a_key_has_a_name_permissions_and_a_scope(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    scope = Scope.model_validate({"user": "zoë", "agent": ["planner", "coder"]})
    key, record = store.create_record("acme", "Zoë's planner", ["read", "write"], scope)
    who = store.principal_for(key)
    assert who is not None and who.tenant == "acme" and who.key_id == record.key_id
    assert who.can("read") and who.can("write") and not who.can("forget")
    assert who.scope == scope and record.name == "Zoë's planner"
    admin = store.principal_for(store.create("acme", permissions=["admin"]))
    assert admin is not None and {"read", "write", "forget", "admin"} == admin.permissions
    legacy = store.principal_for(store.create("acme"))
    assert legacy is not None and legacy.can("forget") and legacy.scope.empty


def test_revoked_keys_are_refused_and_stay_listed(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    writer, reader = KeyStore(path), KeyStore(path)  # two processes' handles
    key, record = writer.create_record("acme", "ci")
    assert reader.principal_for(key) is not None
    revoked = writer.revoke(record.key_id)
    assert reader.principal_for(key) is None and reader.tenant_for(key) is None
    assert writer.revoke(record.key_id).revoked_at == revoked.revoked_at  # the first time kept
    assert [r.key_id for r in reader.list("acme")] == [record.key_id]
    assert reader.list("globex") == []
    with pytest.raises(KeyError):
        writer.revoke("nosuchkey")


@pytest.mark.parametrize("name", ["", "a\x00b", "tab\there", "x" * 201])
def test_hostile_names_and_empty_permissions_are_refused(tmp_path: Path, name: str) -> None:
    store = KeyStore(tmp_path / "keys.json")
    with pytest.raises(ValueError):
        store.create("acme", name=name)
    with pytest.raises(ValueError):
        store.create("acme", permissions=[])


def test_last_use_is_kept_beside_the_file_latest_wins(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    one, two = LastUsed(path, every_s=0), LastUsed(path, every_s=0)
    one.mark("k1", datetime(2031, 1, 2, tzinfo=UTC))
    two.mark("k1", datetime(2031, 1, 1, tzinfo=UTC))  # an older use does not go back
    two.mark("k2", datetime(2031, 1, 3, tzinfo=UTC))
    seen = LastUsed(path).read()
    assert seen["k1"].startswith("2031-01-02") and seen["k2"].startswith("2031-01-03")
    assert stat.S_IMODE((tmp_path / "keys.json.used").stat().st_mode) == 0o600
