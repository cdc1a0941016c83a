"""File-backed API keys: each key maps to one tenant; only SHA-256 hashes are stored.

A key has an id, a name, permissions (``read``, ``write``, ``forget``, ``admin``: admin
implies the others) and an optional scope (``memstream.scope``): it writes only events
inside it, and reads only inside it. A key made before keys had permissions has every
permission on the whole tenant. A revoked key stays in the file, refused; every process
reads the file again when it changes, so a revocation holds at once everywhere.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from memstream.events.envelope import TENANT_PATTERN
from memstream.scope import WHOLE, Scope
from memstream.settings import Settings
from memstream.wire import PRINTABLE

KEY_PREFIX = "ms"
_TENANT_RE = re.compile(TENANT_PATTERN)


class KeyStoreError(RuntimeError):
    """The key file exists but cannot be read or parsed."""


Permission = Literal["read", "write", "forget", "admin"]
PERMISSIONS: tuple[Permission, ...] = ("read", "write", "forget", "admin")


class KeyRecord(BaseModel):
    """One stored key: never the key itself, only its hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key_id: str
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(pattern=TENANT_PATTERN)
    created_at: AwareDatetime
    name: str | None = Field(default=None, min_length=1, max_length=200)
    # None: a key made before permissions, which has them all.
    permissions: builtins.list[Permission] | None = None
    scope: Scope | None = None
    revoked_at: AwareDatetime | None = None

    def granted(self) -> frozenset[str]:
        """Its permissions (admin implies every one)."""
        found = set(self.permissions if self.permissions is not None else PERMISSIONS)
        return frozenset(PERMISSIONS) if "admin" in found else frozenset(found)

    def principal(self) -> Principal:
        return Principal(self.tenant, self.key_id, self.granted(), self.scope or WHOLE)


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the key's tenant, id, permissions and scope."""

    tenant: str
    key_id: str
    permissions: frozenset[str]
    scope: Scope

    def can(self, permission: Permission) -> bool:
        return permission in self.permissions


class _KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = 1
    keys: list[KeyRecord] = Field(default_factory=list)


def hash_key(key: str) -> str:
    """SHA-256 hex of the full plaintext key."""
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    """API keys in a JSON file shared by the CLI (writes) and the API (reads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        # (inode, mtime_ns, size): os.replace gives a new inode, so a rewrite is always seen
        # even when two writes land within the filesystem's mtime granularity.
        self._stamp: tuple[int, int, int] | None = None
        self._records: builtins.list[KeyRecord] = []
        self._by_hash: dict[str, KeyRecord] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyStore:
        return cls(settings.resolved_keys_file())

    def create(
        self,
        tenant: str,
        name: str | None = None,
        permissions: builtins.list[Permission] | None = None,
        scope: Scope | None = None,
    ) -> str:
        """Bind a new key to ``tenant`` and return it; the plaintext is not kept anywhere."""
        return self.create_record(tenant, name, permissions, scope)[0]

    def create_record(
        self,
        tenant: str,
        name: str | None = None,
        permissions: builtins.list[Permission] | None = None,
        scope: Scope | None = None,
    ) -> tuple[str, KeyRecord]:
        """:meth:`create`, with the record kept of the key (ValueError: a tenant, name,
        permission or scope that cannot be)."""
        if not _TENANT_RE.match(tenant):
            raise ValueError(f"invalid tenant {tenant!r}: must match {TENANT_PATTERN}")
        if name is not None and (not name or PRINTABLE.first(name) >= 0 or len(name) > 200):
            raise ValueError("a key's name is 1 to 200 printable characters")
        if permissions is not None and not permissions:
            raise ValueError("a key has at least one permission")
        key_id = secrets.token_hex(6)
        key = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(
            key_id=key_id, hash=hash_key(key), tenant=tenant, created_at=datetime.now(UTC),
            name=name,
            permissions=sorted(set(permissions), key=PERMISSIONS.index) if permissions else None,
            scope=scope if scope is not None and not scope.empty else None,
        )  # fmt: skip
        with self._lock, self._file_lock():
            current = self._read()
            self._write(_KeyFile(keys=[*current.keys, record]))
            self._reload_if_changed()
        return key, record

    def principal_for(self, key: str) -> Principal | None:
        """Who ``key`` acts as, or None when it is unknown or revoked."""
        if not key.startswith(f"{KEY_PREFIX}_"):
            return None
        with self._lock:
            self._reload_if_changed()
            record = self._by_hash.get(hash_key(key))
        if record is None or record.revoked_at is not None:
            return None
        return record.principal()

    def tenant_for(self, key: str) -> str | None:
        """The tenant a key is bound to, or None when the key is unknown or revoked."""
        found = self.principal_for(key)
        return found.tenant if found is not None else None

    def record(self, key_id: str) -> KeyRecord | None:
        """The record of key ``key_id`` (revoked or not), or None."""
        return next((r for r in self.list() if r.key_id == key_id), None)

    def list(self, tenant: str | None = None) -> builtins.list[KeyRecord]:
        """Every stored key record (of ``tenant``), oldest first."""
        with self._lock:
            self._reload_if_changed()
            return [r for r in self._records if tenant is None or r.tenant == tenant]

    def revoke(self, key_id: str) -> KeyRecord:
        """Refuse key ``key_id`` from now on (KeyError: no such key); revoking twice keeps
        the first time."""
        with self._lock, self._file_lock():
            current = self._read()
            found = next((r for r in current.keys if r.key_id == key_id), None)
            if found is None:
                raise KeyError(key_id)
            if found.revoked_at is None:
                found = found.model_copy(update={"revoked_at": datetime.now(UTC)})
                keys = [found if r.key_id == key_id else r for r in current.keys]
                self._write(_KeyFile(keys=keys))
            self._reload_if_changed()
        return found

    def _reload_if_changed(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._records, self._by_hash = None, [], {}
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        data = self._read()
        self._records = data.keys
        self._by_hash = {r.hash: r for r in data.keys}
        self._stamp = stamp

    def _read(self) -> _KeyFile:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return _KeyFile()
        except OSError as exc:
            raise KeyStoreError(f"cannot read key file {self.path}: {exc}") from exc
        try:
            return _KeyFile.model_validate_json(raw)
        except ValidationError as exc:
            raise KeyStoreError(f"key file {self.path} is malformed: {exc}") from exc

    def _write(self, data: _KeyFile) -> None:
        # Defaults left out: a key made with none of the newer fields reads as before.
        _atomic_write(self.path, data.model_dump_json(indent=2, exclude_defaults=True).encode())

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        # Two CLI processes creating keys at once must not drop each other's record.
        with _locked(self.path):
            yield


def _atomic_write(path: Path, raw: bytes) -> None:
    """``raw`` as the whole of ``path``, 0600; a reader never sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock of ``path``'s own lock file, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class LastUsed:
    """When each key was last used, kept beside the key file (``<keys>.used``): written by
    the API at most once a ``every_s`` per key and process, merged with what other
    processes wrote (the latest time wins), read by ``memstream keys list``."""

    def __init__(self, keys_path: Path, every_s: float = 60.0) -> None:
        self.path = keys_path.with_name(keys_path.name + ".used")
        self.every_s = every_s
        self._marked: dict[str, float] = {}  # key id -> monotonic time this process wrote it
        self._lock = threading.Lock()

    def mark(self, key_id: str, now: datetime | None = None) -> None:
        """Record a use of ``key_id`` (cheap when it was recorded within ``every_s``)."""
        tick = time.monotonic()
        with self._lock:
            last = self._marked.get(key_id)
            if last is not None and tick - last < self.every_s:
                return
            self._marked[key_id] = tick
        when = (now or datetime.now(UTC)).isoformat()
        with _locked(self.path):
            seen = self.read()
            if seen.get(key_id, "") < when:
                seen[key_id] = when
                _atomic_write(self.path, json.dumps(seen, indent=1).encode())

    def read(self) -> dict[str, str]:
        """Key id -> ISO time of its last recorded use."""
        try:
            doc = json.loads(self.path.read_bytes())
        except (FileNotFoundError, ValueError):
            return {}
        return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) else {}
