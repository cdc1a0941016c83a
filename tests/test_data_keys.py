"""The ``DataKeys`` contract over both adapters, SQLite (the embedded stack's file) and
PostgreSQL (a real server the suite starts): one key per (tenant, kind, id), destroyed keys
gone for good, tenant secrets, two processes sharing one store. Then what only the SQLite file
promises: it is private, and a destroyed key leaves no bytes in it or in its write-ahead log."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from memstream.settings import Settings
from memstream.shred.factory import open_data_keys
from memstream.shred.port import KEY_BYTES, DataKeys
from memstream.shred.postgres import PostgresDataKeys
from memstream.shred.sqlite import SqliteDataKeys
from pgserver import Postgres
from pydantic import SecretStr


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "keys" / "data-keys.sqlite"


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, path: Path) -> Settings:
    """Settings that name a fresh store of each adapter."""
    if request.param == "sqlite":
        return Settings(data_keys_file=path)
    pg: Postgres = request.getfixturevalue("postgres_server")
    url = pg.fresh_database(f"keys_{uuid.uuid4().hex[:12]}")
    return Settings(data_keys_url=SecretStr(url))


@pytest.fixture
def opened(settings: Settings) -> Iterator[Callable[[], DataKeys]]:
    """Opens another handle on the same store (closed after the test)."""
    handles: list[DataKeys] = []

    def open_one() -> DataKeys:
        handles.append(open_data_keys(settings))
        return handles[-1]

    yield open_one
    for h in handles:
        h.close()


@pytest.fixture
def store(opened: Callable[[], DataKeys]) -> DataKeys:
    return opened()


def test_the_setting_chooses_the_adapter(settings: Settings, store: DataKeys) -> None:
    wanted = SqliteDataKeys if settings.data_keys_url is None else PostgresDataKeys
    assert isinstance(store, wanted)


def test_create_or_get_gives_the_same_key_every_time(store: DataKeys) -> None:
    first = store.create_or_get("acme", "event", ["e1", "e2"])
    assert set(first) == {"e1", "e2"}
    assert all(len(k) == KEY_BYTES for k in first.values())
    assert first["e1"] != first["e2"]
    again = store.create_or_get("acme", "event", ["e2", "e1", "e3", "e1"])
    assert again["e1"] == first["e1"] and again["e2"] == first["e2"]
    assert set(again) == {"e1", "e2", "e3"}
    assert store.get("acme", "event", ["e1", "e2", "e3"]) == again


def test_tenants_and_kinds_have_keys_of_their_own(store: DataKeys) -> None:
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


def test_get_leaves_out_destroyed_and_missing_keys(store: DataKeys) -> None:
    made = store.create_or_get("acme", "event", ["keep", "drop"])
    store.destroy("acme", "event", ["drop"])
    assert store.get("acme", "event", ["keep", "drop", "never"]) == {"keep": made["keep"]}


def test_destroy_counts_what_existed_and_is_idempotent(store: DataKeys) -> None:
    store.create_or_get("acme", "event", ["a", "b", "c"])
    assert store.destroy("acme", "event", ["a", "b", "missing", "a"]) == 2
    assert store.destroy("acme", "event", ["a", "b"]) == 0
    assert store.destroy("acme", "event", []) == 0
    assert store.get("acme", "event", ["c"]).keys() == {"c"}


def test_a_destroyed_key_is_never_made_again(store: DataKeys) -> None:
    store.create_or_get("acme", "event", ["e1"])
    store.destroy("acme", "event", ["e1"])
    assert store.get("acme", "event", ["e1"]) == {}
    # A late copy of purged content asks for its key again: there is none, not a new one.
    made = store.create_or_get("acme", "event", ["e1", "e2"])
    assert set(made) == {"e2"}
    assert store.create_or_get("acme", "event", ["e1"]) == {}
    assert store.get("acme", "event", ["e1", "e2"]) == {"e2": made["e2"]}
    assert store.destroy("acme", "event", ["e1"]) == 0  # the tombstone is no key


def test_destroying_an_id_never_made_forbids_its_key(store: DataKeys) -> None:
    # A purge can reach an artifact before its builder made the key.
    assert store.destroy("acme", "latent", ["not-yet"]) == 0
    assert store.create_or_get("acme", "latent", ["not-yet", "other"]).keys() == {"other"}
    # Only that tenant's, that kind's id.
    assert store.create_or_get("globex", "latent", ["not-yet"]).keys() == {"not-yet"}
    assert store.create_or_get("acme", "event", ["not-yet"]).keys() == {"not-yet"}


def test_a_destroy_racing_a_create_never_leaves_a_key(opened: Callable[[], DataKeys]) -> None:
    ids = [f"r-{i}" for i in range(400)]
    maker, shredder = opened(), opened()
    made: list[dict[str, bytes]] = []
    t = threading.Thread(target=lambda: made.append(maker.create_or_get("acme", "latent", ids)))
    t.start()
    shredder.destroy("acme", "latent", ids)
    t.join(60)
    assert len(made) == 1
    # Whichever came first, once destroy returned no id has a key, and none can be made.
    assert shredder.get("acme", "latent", ids) == {}
    assert maker.create_or_get("acme", "latent", ids) == {}


def test_many_ids_at_once(store: DataKeys) -> None:
    ids = [f"id-{i}" for i in range(1_234)]  # beyond one statement's chunk
    made = store.create_or_get("acme", "event", ids)
    assert len(made) == len(ids) and len(set(made.values())) == len(ids)
    assert store.destroy("acme", "event", ids[::2]) == len(ids[::2])
    assert set(store.get("acme", "event", ids)) == set(ids[1::2])


def test_ids_with_unusual_characters(store: DataKeys) -> None:
    odd = ["café/déjà vu", "a'b\"c", "línea\nnueva", "%_*", "tab\there", "🔑" * 40]
    made = store.create_or_get("tenant-ü", "event", odd)
    assert set(made) == set(odd)
    assert store.destroy("tenant-ü", "event", ["%_*"]) == 1
    assert set(store.get("tenant-ü", "event", odd)) == set(odd) - {"%_*"}


def test_nul_and_control_characters_are_kept_exactly(store: DataKeys) -> None:
    tenant, ids = "ac\x00me", ["x\x00y", "x", "\x01\x1f\x7f", "x\x00"]
    made = store.create_or_get(tenant, "event", ids)
    assert set(made) == set(ids) and len(set(made.values())) == len(ids)
    assert store.get("ac", "event", ids) == {}  # the tenant is not cut at the NUL
    assert store.destroy(tenant, "event", ["x\x00y"]) == 1
    assert set(store.get(tenant, "event", ids)) == {"x", "\x01\x1f\x7f", "x\x00"}
    assert store.tenant_secret(tenant) != store.tenant_secret("ac")


def test_tenant_secret_is_stable_and_per_tenant(opened: Callable[[], DataKeys]) -> None:
    one = opened()
    s1 = one.tenant_secret("acme")
    assert len(s1) == KEY_BYTES
    assert one.tenant_secret("acme") == s1
    assert one.tenant_secret("globex") != s1
    one.create_or_get("acme", "event", ["e"])
    one.destroy("acme", "event", ["e"])  # a purge does not rotate it
    one.close()
    assert opened().tenant_secret("acme") == s1


def test_two_handles_racing_on_the_same_ids_agree_on_every_key(
    opened: Callable[[], DataKeys],
) -> None:
    ids = [f"race-{i}" for i in range(300)]
    handles = [opened(), opened()]
    got: list[dict[str, bytes]] = []
    threads = [
        threading.Thread(target=lambda h=h: got.append(h.create_or_get("acme", "event", ids)))
        for h in handles
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 2 and got[0] == got[1] and set(got[0]) == set(ids)


_OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from memstream.settings import Settings
    from memstream.shred.factory import open_data_keys

    store = open_data_keys(Settings())
    action = sys.argv[1]
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


def _other(settings: Settings, action: str) -> list[str]:
    """``action`` on the same store, from another process configured by environment."""
    env = dict(os.environ)
    if settings.data_keys_url is not None:
        env["MEMSTREAM_DATA_KEYS_URL"] = settings.data_keys_url.get_secret_value()
    else:
        env["MEMSTREAM_DATA_KEYS_FILE"] = str(settings.data_keys_path)
    out = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, action],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    return out.stdout.split()


def test_two_processes_share_keys_and_destroys(store: DataKeys, settings: Settings) -> None:
    mine = store.create_or_get("acme", "event", ["mine"])["mine"]
    secret = store.tenant_secret("acme")
    assert _other(settings, "read") == [mine.hex(), secret.hex()]
    theirs = _other(settings, "make")[0]
    assert store.get("acme", "event", ["theirs"]) == {"theirs": bytes.fromhex(theirs)}
    assert _other(settings, "destroy") == ["1"]
    assert store.get("acme", "event", ["mine"]) == {}
    assert _other(settings, "read")[0] == "none"  # gone for the other process too
    store.destroy("acme", "event", ["theirs"])
    assert _other(settings, "destroy") == ["0"]


# What only the SQLite file promises.


@pytest.fixture
def sqlite_store(path: Path) -> Iterator[SqliteDataKeys]:
    s = SqliteDataKeys(path)
    yield s
    s.close()


def test_the_file_is_private(sqlite_store: SqliteDataKeys, path: Path) -> None:
    sqlite_store.create_or_get("acme", "event", ["e"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _on_disk(path: Path) -> bytes:
    """The bytes of the database and of every file SQLite keeps beside it."""
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def test_a_destroyed_key_leaves_no_bytes_on_disk(sqlite_store: SqliteDataKeys, path: Path) -> None:
    made = sqlite_store.create_or_get("acme", "event", [f"e{i}" for i in range(50)])
    gone = [made["e7"], made["e30"]]
    kept = made["e8"]
    assert all(k in _on_disk(path) for k in [*gone, kept])  # the search finds keys at all
    assert sqlite_store.destroy("acme", "event", ["e7", "e30"]) == 2
    wal = path.with_name(path.name + "-wal")
    data = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    for key in gone:
        assert key not in data
        assert key not in _on_disk(path)
    assert kept in _on_disk(path)


def test_a_destroyed_key_leaves_no_bytes_while_another_process_reads(
    sqlite_store: SqliteDataKeys, path: Path
) -> None:
    # Another process holding the file open must not keep the destroyed key in the log.
    other = SqliteDataKeys(path)
    try:
        key = sqlite_store.create_or_get("acme", "event", ["e"])["e"]
        assert other.get("acme", "event", ["e"]) == {"e": key}
        sqlite_store.destroy("acme", "event", ["e"])
        assert other.get("acme", "event", ["e"]) == {}
        assert key not in _on_disk(path)
    finally:
        other.close()


def test_an_owned_key_is_given_to_its_owner_only(store: DataKeys) -> None:
    """A producer outside the stack gets the keys of ids it makes; an id another writer (or
    the stack itself) made a key for is taken, and its key is never given; a destroyed id is
    in neither list."""
    first = store.create_owned("acme", "event", ["mine-1", "mine-2"], owner="k1")
    assert set(first.keys) == {"mine-1", "mine-2"} and first.taken == []
    again = store.create_owned("acme", "event", ["mine-1"], owner="k1")
    assert again.keys == {"mine-1": first.keys["mine-1"]}  # a re-send seals under the same key
    theirs = store.create_owned("acme", "event", ["mine-1", "fresh"], owner="k2")
    assert theirs.taken == ["mine-1"] and set(theirs.keys) == {"fresh"}
    stack_made = store.create_or_get("acme", "event", ["by-api"])
    assert store.create_owned("acme", "event", ["by-api"], owner="k1").taken == ["by-api"]
    assert store.get("acme", "event", ["mine-2"]) == {"mine-2": first.keys["mine-2"]}
    store.destroy("acme", "event", ["mine-2"])
    gone = store.create_owned("acme", "event", ["mine-2"], owner="k1")
    assert gone.keys == {} and gone.taken == []
    # the stack's own lookup of an owned id is unchanged: the sequencer opens what k1 sealed
    assert store.create_or_get("acme", "event", ["mine-1", "by-api"]) == {
        "mine-1": first.keys["mine-1"], "by-api": stack_made["by-api"],
    }  # fmt: skip


def test_an_owned_id_is_per_tenant(store: DataKeys) -> None:
    a = store.create_owned("acme", "event", ["same"], owner="k1")
    b = store.create_owned("globex", "event", ["same"], owner="k9")
    assert a.keys and b.keys and a.keys["same"] != b.keys["same"]


def test_a_store_made_before_owners_gains_the_column(path: Path) -> None:
    import sqlite3

    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE data_keys (tenant TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, "
        "key BLOB NOT NULL, PRIMARY KEY (tenant, kind, id)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO data_keys VALUES ('acme', 'event', 'old', X'0102')")
    db.commit()
    db.close()
    store = SqliteDataKeys(path)
    try:
        assert store.get("acme", "event", ["old"]) == {"old": b"\x01\x02"}
        assert store.create_owned("acme", "event", ["old"], owner="k1").taken == ["old"]
        assert "new" in store.create_owned("acme", "event", ["new"], owner="k1").keys
    finally:
        store.close()
