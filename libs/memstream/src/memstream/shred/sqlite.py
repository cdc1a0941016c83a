"""``SqliteDataKeys``: the embedded stack's key store, one SQLite file in the data dir.

Every process of the stack opens the same file (WAL: readers never wait on a writer). A
destroyed key must not survive on disk: ``secure_delete`` overwrites freed pages, and a
checkpoint after each destroy moves the change out of the write-ahead log and truncates it.
``synchronous=NORMAL`` in WAL mode keeps a committed key through the death of any process
(what durability asks: docs/pipeline.md); only a power loss may lose the last commits.

A destroyed key's row is deleted (so ``secure_delete`` overwrites it) and a tombstone row
with an empty key takes its place: reads leave it out, and ``create_or_get`` cannot make a
new key for the id, because the tombstone holds its primary key.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from memstream.shred.port import KEY_BYTES, KeyKind, Owned, chunks

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS data_keys (tenant TEXT NOT NULL, kind TEXT NOT NULL, "
    "id TEXT NOT NULL, key BLOB NOT NULL, owner TEXT, PRIMARY KEY (tenant, kind, id)) "
    "WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS tenant_secrets (tenant TEXT PRIMARY KEY, secret BLOB NOT NULL)",
)


class SqliteDataKeys:
    """A :class:`memstream.shred.port.DataKeys` in one SQLite file (0600)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            path, timeout=30.0, check_same_thread=False, isolation_level=None
        )
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "secure_delete=ON"):
            self._db.execute(f"PRAGMA {pragma}")
        with self._lock:
            for stmt in _SCHEMA:
                self._db.execute(stmt)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(data_keys)")}
            if "owner" not in columns:  # a store made before keys had owners
                self._db.execute("ALTER TABLE data_keys ADD COLUMN owner TEXT")

    def _select(self, tenant: str, kind: KeyKind, ids: list[str]) -> dict[str, bytes]:
        marks = ",".join("?" * len(ids))
        rows = self._db.execute(
            f"SELECT id, key FROM data_keys WHERE tenant=? AND kind=? AND id IN ({marks}) "
            "AND length(key) > 0",
            (tenant, kind, *ids),
        )
        return {str(i): bytes(k) for i, k in rows}

    def create_or_get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for chunk in chunks(ids):
                    rows = [(tenant, kind, i, secrets.token_bytes(KEY_BYTES)) for i in chunk]
                    insert = "INSERT OR IGNORE INTO data_keys VALUES (?, ?, ?, ?, NULL)"
                    self._db.executemany(insert, rows)
                    out.update(self._select(tenant, kind, chunk))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return out

    def create_owned(self, tenant: str, kind: KeyKind, ids: Iterable[str], owner: str) -> Owned:
        keys: dict[str, bytes] = {}
        taken: list[str] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for chunk in chunks(ids):
                    rows = [(tenant, kind, i, secrets.token_bytes(KEY_BYTES), owner) for i in chunk]
                    insert = "INSERT OR IGNORE INTO data_keys VALUES (?, ?, ?, ?, ?)"
                    self._db.executemany(insert, rows)
                    marks = ",".join("?" * len(chunk))
                    found = self._db.execute(
                        f"SELECT id, key, owner FROM data_keys WHERE tenant=? AND kind=? "
                        f"AND id IN ({marks}) AND length(key) > 0",
                        (tenant, kind, *chunk),
                    )
                    for i, k, o in found:
                        if o == owner:
                            keys[str(i)] = bytes(k)
                        else:
                            taken.append(str(i))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return Owned(keys, taken)

    def get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        with self._lock:
            for chunk in chunks(ids):
                out.update(self._select(tenant, kind, chunk))
        return out

    def destroy(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> int:
        gone = 0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for chunk in chunks(ids):
                    marks = ",".join("?" * len(chunk))
                    cur = self._db.execute(
                        f"DELETE FROM data_keys WHERE tenant=? AND kind=? AND id IN ({marks}) "
                        "AND length(key) > 0",
                        (tenant, kind, *chunk),
                    )
                    gone += cur.rowcount
                    self._db.executemany(
                        "INSERT OR IGNORE INTO data_keys VALUES (?, ?, ?, X'', NULL)",
                        [(tenant, kind, i) for i in chunk],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            if gone:
                # Out of the log and into the (securely overwritten) database file.
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return gone

    def tenant_secret(self, tenant: str) -> bytes:
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO tenant_secrets VALUES (?, ?)",
                (tenant, secrets.token_bytes(KEY_BYTES)),
            )
            row = self._db.execute(
                "SELECT secret FROM tenant_secrets WHERE tenant=?", (tenant,)
            ).fetchone()
        return bytes(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
