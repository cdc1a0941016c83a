"""The ``DataKeys`` contract over ``SqliteDataKeys``: one key per (tenant, kind, id), destroyed
keys gone for good (from reads, from the database file and from its write-ahead log), tenant
secrets, and two processes sharing one file."""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from memstream.shred.port import DataKeys
from memstream.shred.sqlite import KEY_BYTES, SqliteDataKeys


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "keys" / "data-keys.sqlite"


@pytest.fixture
def store(path: Path) -> Iterator[SqliteDataKeys]:
    s = SqliteDataKeys(path)
    yield s
    s.close()


def test_it_is_a_data_keys(store: SqliteDataKeys) -> None:
    keys: DataKeys = store  # mypy checks the Protocol
    assert keys.get("t", "event", []) == {}


def test_create_or_get_gives_the_same_key_every_time(store: SqliteDataKeys) -> None:
    first = store.create_or_get("acme", "event", ["e1", "e2"])
    assert set(first) == {"e1", "e2"}
    assert all(len(k) == KEY_BYTES for k in first.values())
    assert first["e1"] != first["e2"]
    again = store.create_or_get("acme", "event", ["e2", "e1", "e3", "e1"])
    assert again["e1"] == first["e1"] and again["e2"] == first["e2"]
    assert set(again) == {"e1", "e2", "e3"}
    assert store.get("acme", "event", ["e1", "e2", "e3"]) == again


def test_tenants_and_kinds_have_keys_of_their_own(store: SqliteDataKeys) -> None:
    a = store.create_or_get("acme", "event", ["x"])["x"]
    b = store.create_or_get("globex", "event", ["x"])["x"]
    c = store.create_or_get("acme", "latent", ["x"])["x"]
    d = store.create_or_get("acme", "packet", ["x"])["x"]
    e = store.create_or_get("acme", "dead_letter", ["x"])["x"]
    assert len({a, b, c, d, e}) == 5
    assert store.destroy("acme", "event", ["x"]) == 1
    assert store.get("globex", "event", ["x"]) == {"x": b}
    assert store.get("acme", "latent", ["x"]) == {"x": c}
    assert store.get("acme", "event", ["x"]) == {}


def test_get_leaves_out_destroyed_and_missing_keys(store: SqliteDataKeys) -> None:
    made = store.create_or_get("acme", "event", ["keep", "drop"])
    store.destroy("acme", "event", ["drop"])
    assert store.get("acme", "event", ["keep", "drop", "never"]) == {"keep": made["keep"]}


def test_destroy_counts_what_existed_and_is_idempotent(store: SqliteDataKeys) -> None:
    store.create_or_get("acme", "event", ["a", "b", "c"])
    assert store.destroy("acme", "event", ["a", "b", "missing", "a"]) == 2
    assert store.destroy("acme", "event", ["a", "b"]) == 0
    assert store.destroy("acme", "event", []) == 0
    assert store.get("acme", "event", ["c"]).keys() == {"c"}


def test_a_destroyed_key_is_never_made_again_by_get(store: SqliteDataKeys) -> None:
    old = store.create_or_get("acme", "event", ["e1"])["e1"]
    store.destroy("acme", "event", ["e1"])
    assert store.get("acme", "event", ["e1"]) == {}
    # create_or_get after a purge makes a new key: the old one (and what it sealed) stays gone.
    assert store.create_or_get("acme", "event", ["e1"])["e1"] != old


def test_many_ids_at_once(store: SqliteDataKeys) -> None:
    ids = [f"id-{i}" for i in range(1_234)]  # beyond one statement's chunk
    made = store.create_or_get("acme", "event", ids)
    assert len(made) == len(ids) and len(set(made.values())) == len(ids)
    assert store.destroy("acme", "event", ids[::2]) == len(ids[::2])
    assert set(store.get("acme", "event", ids)) == set(ids[1::2])


def test_ids_with_unusual_characters(store: SqliteDataKeys) -> None:
    odd = ["café/déjà vu", "a'b\"c", "x\x00y", "línea\nnueva", "%_*"]
    made = store.create_or_get("tenant-ü", "event", odd)
    assert set(made) == set(odd)
    assert store.destroy("tenant-ü", "event", ["%_*"]) == 1
    assert set(store.get("tenant-ü", "event", odd)) == set(odd) - {"%_*"}


def test_tenant_secret_is_stable_and_per_tenant(path: Path) -> None:
    one = SqliteDataKeys(path)
    s1 = one.tenant_secret("acme")
    assert len(s1) == KEY_BYTES
    assert one.tenant_secret("acme") == s1
    assert one.tenant_secret("globex") != s1
    one.create_or_get("acme", "event", ["e"])
    one.destroy("acme", "event", ["e"])  # a purge does not rotate it
    one.close()
    reopened = SqliteDataKeys(path)
    try:
        assert reopened.tenant_secret("acme") == s1
    finally:
        reopened.close()


def test_the_file_is_private(store: SqliteDataKeys, path: Path) -> None:
    store.create_or_get("acme", "event", ["e"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


_OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from memstream.shred.sqlite import SqliteDataKeys

    store = SqliteDataKeys(Path(sys.argv[1]))
    action = sys.argv[2]
    if action == "read":
        print(store.get("acme", "event", ["mine"]).get("mine", b"").hex() or "none")
        print(store.tenant_secret("acme").hex())
    elif action == "make":
        print(store.create_or_get("acme", "event", ["theirs"])["theirs"].hex())
    elif action == "destroy":
        print(store.destroy("acme", "event", ["mine"]))
    store.close()
    """
)


def _other(path: Path, action: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, str(path), action],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.split()


def test_two_processes_share_keys_and_destroys(store: SqliteDataKeys, path: Path) -> None:
    mine = store.create_or_get("acme", "event", ["mine"])["mine"]
    secret = store.tenant_secret("acme")
    assert _other(path, "read") == [mine.hex(), secret.hex()]
    theirs = _other(path, "make")[0]
    assert store.get("acme", "event", ["theirs"]) == {"theirs": bytes.fromhex(theirs)}
    assert _other(path, "destroy") == ["1"]
    assert store.get("acme", "event", ["mine"]) == {}
    assert _other(path, "read")[0] == "none"  # gone for the other process too
    store.destroy("acme", "event", ["theirs"])
    assert _other(path, "destroy") == ["0"]


def _on_disk(path: Path) -> bytes:
    """The bytes of the database and of every file SQLite keeps beside it."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def test_a_destroyed_key_leaves_no_bytes_on_disk(store: SqliteDataKeys, path: Path) -> None:
    made = store.create_or_get("acme", "event", [f"e{i}" for i in range(50)])
    gone = [made["e7"], made["e30"]]
    kept = made["e8"]
    assert all(k in _on_disk(path) for k in [*gone, kept])  # the search finds keys at all
    assert store.destroy("acme", "event", ["e7", "e30"]) == 2
    wal = path.with_name(path.name + "-wal")
    data = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    for key in gone:
        assert key not in data
        assert key not in _on_disk(path)
    assert kept in _on_disk(path)


def test_a_destroyed_key_leaves_no_bytes_while_another_process_reads(
    store: SqliteDataKeys, path: Path
) -> None:
    # Another process holding the file open must not keep the destroyed key in the log.
    other = SqliteDataKeys(path)
    try:
        key = store.create_or_get("acme", "event", ["e"])["e"]
        assert other.get("acme", "event", ["e"]) == {"e": key}
        store.destroy("acme", "event", ["e"])
        assert other.get("acme", "event", ["e"]) == {}
        assert key not in _on_disk(path)
    finally:
        other.close()
