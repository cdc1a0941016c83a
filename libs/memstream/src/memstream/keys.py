"""File-backed API keys: each key maps to one tenant; only SHA-256 hashes are stored."""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from memstream.events.envelope import TENANT_PATTERN
from memstream.settings import Settings

KEY_PREFIX = "ms"
_TENANT_RE = re.compile(TENANT_PATTERN)


class KeyStoreError(RuntimeError):
    """The key file exists but cannot be read or parsed."""


class KeyRecord(BaseModel):
    """One stored key: never the key itself, only its hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key_id: str
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(pattern=TENANT_PATTERN)
    created_at: AwareDatetime


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

    def create(self, tenant: str) -> str:
        """Bind a new key to ``tenant`` and return it; the plaintext is not kept anywhere."""
        if not _TENANT_RE.match(tenant):
            raise ValueError(f"invalid tenant {tenant!r}: must match {TENANT_PATTERN}")
        key_id = secrets.token_hex(6)
        key = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(
            key_id=key_id, hash=hash_key(key), tenant=tenant, created_at=datetime.now(UTC)
        )
        with self._lock, self._file_lock():
            current = self._read()
            self._write(_KeyFile(keys=[*current.keys, record]))
            self._reload_if_changed()
        return key

    def tenant_for(self, key: str) -> str | None:
        """The tenant a key is bound to, or None when the key is unknown."""
        if not key.startswith(f"{KEY_PREFIX}_"):
            return None
        with self._lock:
            self._reload_if_changed()
            record = self._by_hash.get(hash_key(key))
        return record.tenant if record is not None else None

    def list(self) -> builtins.list[KeyRecord]:
        """Every stored key record, oldest first."""
        with self._lock:
            self._reload_if_changed()
            return builtins.list(self._records)

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # mkstemp creates the file 0600; rename keeps readers from ever seeing a partial file.
        fd, tmp = tempfile.mkstemp(prefix=".keys-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data.model_dump_json(indent=2).encode())
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        # Two CLI processes creating keys at once must not drop each other's record.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
