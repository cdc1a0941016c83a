"""``PostgresDataKeys``: the data key store on a PostgreSQL server, for stacks of more than
one machine (every process that seals or opens reaches the same keys over the network).

The rules are the SQLite store's (:mod:`memstream.shred.sqlite`): a key is created once per
(tenant, kind, id) and the first one wins (``ON CONFLICT DO NOTHING``, so two processes
sealing the same id at once agree); a destroyed key is gone from every read, and its row
becomes a tombstone with an empty key, so no key is ever made again for the id. Tenants and ids
are kept as their UTF-8 bytes: PostgreSQL text cannot hold NUL, and the store keeps exactly
the id it was given, as SQLite does.

Where a destroyed key may still lie as bytes: its old row version stays in its page until VACUUM
reuses the space, and the server's write-ahead log and its backups hold what was written.
``destroy`` runs VACUUM on the table, and the WAL recycles its segments, so the window is
the life of the WAL and of the oldest backup: keep key backups short-lived and apart from
the data they shred (a backup of both together can undo a purge).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable

import psycopg

from memstream.shred.port import KEY_BYTES, KeyKind, Owned, chunks

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS data_keys (tenant BYTEA NOT NULL, kind TEXT NOT NULL, "
    "id BYTEA NOT NULL, key BYTEA NOT NULL, PRIMARY KEY (tenant, kind, id))",
    "CREATE TABLE IF NOT EXISTS tenant_secrets (tenant BYTEA PRIMARY KEY, secret BYTEA NOT NULL)",
    # Who made a key outside the stack (create_owned); a store made before owners gains it.
    "ALTER TABLE data_keys ADD COLUMN IF NOT EXISTS owner TEXT",
)
# Two processes creating the tables at once race on the catalog; one lock orders them.
_SCHEMA_LOCK = 7_305_115  # an arbitrary advisory lock id of memstream's


def _b(text: str) -> bytes:
    # surrogatepass: a lone surrogate in an id is kept too, not refused
    return text.encode("utf-8", "surrogatepass")


class PostgresDataKeys:
    """A :class:`memstream.shred.port.DataKeys` on PostgreSQL (one connection, serialised)."""

    def __init__(self, url: str) -> None:
        self._lock = threading.Lock()
        self._db = psycopg.connect(url, autocommit=True)
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for stmt in _SCHEMA:
                self._db.execute(stmt)

    def _select(self, tenant: str, kind: KeyKind, ids: list[str]) -> dict[str, bytes]:
        wanted = {_b(i): i for i in ids}
        rows = self._db.execute(
            "SELECT id, key FROM data_keys WHERE tenant = %s AND kind = %s AND id = ANY(%s) "
            "AND octet_length(key) > 0",
            (_b(tenant), kind, list(wanted)),
        )
        return {wanted[bytes(i)]: bytes(k) for i, k in rows}

    def create_or_get(self, tenant: str, kind: KeyKind, ids: Iterable[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        with self._lock, self._db.transaction():
            for chunk in chunks(ids):
                rows = [(_b(tenant), kind, _b(i), secrets.token_bytes(KEY_BYTES)) for i in chunk]
                with self._db.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO data_keys (tenant, kind, id, key) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT DO NOTHING",
                        rows,
                    )
                out.update(self._select(tenant, kind, chunk))
        return out

    def create_owned(self, tenant: str, kind: KeyKind, ids: Iterable[str], owner: str) -> Owned:
        keys: dict[str, bytes] = {}
        taken: list[str] = []
        with self._lock, self._db.transaction():
            for chunk in chunks(ids):
                wanted = {_b(i): i for i in chunk}
                rows = [
                    (_b(tenant), kind, b, secrets.token_bytes(KEY_BYTES), owner) for b in wanted
                ]
                with self._db.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO data_keys (tenant, kind, id, key, owner) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        rows,
                    )
                found = self._db.execute(
                    "SELECT id, key, owner FROM data_keys WHERE tenant = %s AND kind = %s "
                    "AND id = ANY(%s) AND octet_length(key) > 0",
                    (_b(tenant), kind, list(wanted)),
                )
                for i, k, o in found:
                    if o == owner:
                        keys[wanted[bytes(i)]] = bytes(k)
                    else:
                        taken.append(wanted[bytes(i)])
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
            with self._db.transaction():
                for chunk in chunks(ids):
                    # One upsert, not a DELETE: a DELETE does not see a key another process
                    # is creating (uncommitted), which would then outlive the destroy; the
                    # conflict waits for that insert and blanks it. xmax is 0 on a row this
                    # statement inserted, set on one it updated (a key that existed).
                    rows = self._db.execute(
                        "INSERT INTO data_keys AS d (tenant, kind, id, key) "
                        "SELECT %s, %s, unnest(%s::bytea[]), ''::bytea "
                        "ON CONFLICT (tenant, kind, id) DO UPDATE SET key = ''::bytea "
                        "WHERE octet_length(d.key) > 0 RETURNING d.xmax <> 0",
                        (_b(tenant), kind, [_b(i) for i in chunk]),
                    ).fetchall()
                    gone += sum(1 for (updated,) in rows if updated)
            if gone:
                # Dead rows to reusable space now rather than at the next autovacuum.
                self._db.execute("VACUUM data_keys")
        return gone

    def tenant_secret(self, tenant: str) -> bytes:
        with self._lock:
            self._db.execute(
                "INSERT INTO tenant_secrets VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (_b(tenant), secrets.token_bytes(KEY_BYTES)),
            )
            row = self._db.execute(
                "SELECT secret FROM tenant_secrets WHERE tenant = %s", (_b(tenant),)
            ).fetchone()
        assert row is not None  # inserted or already there, in this very call
        return bytes(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
