"""The API key store: hashed at rest, atomic writes, reload on change."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from memstream.keys import KeyStore, KeyStoreError
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
