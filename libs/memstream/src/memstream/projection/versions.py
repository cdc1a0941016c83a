"""Projection versions: a name + the hash of what builds it (the materialization key).

The registry is a small JSON document in the data dir shared by the workers that build
projections and the API that reads them; writes are atomic (temp file + rename) under a lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memstream.ledger.canonical import canonical_json
from memstream.projection.extract import EXTRACTOR_VERSION
from memstream.projection.keys import KeyForm

PROJECTOR_VERSION = "p3"  # p2: descriptive metadata indexed; p3: context keys (projection.keys)
VERSION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
DEFAULT_VERSION = "v1"


class ProjectionConfig(BaseModel):
    """Everything whose change changes the projection's content."""

    model_config = ConfigDict(frozen=True)
    extractor: str = EXTRACTOR_VERSION
    projector: str = PROJECTOR_VERSION
    embedder: str
    embedder_version: str
    dim: int
    # Feedback records projected (checkout applies priors); off = the original ranking.
    feedback: bool = True
    # What event points are found by: the context keys (day, previous message) or the
    # event's own words alone (the form before them, kept to measure against).
    keys: KeyForm = "context"

    @property
    def config_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump())).hexdigest()[:16]


class VersionInfo(BaseModel):
    name: str
    config: ProjectionConfig
    config_hash: str
    created_at: str
    status: Literal["building", "ready"] = "building"

    @property
    def graph_namespace(self) -> str:
        return f"memstream_{self.name}"

    @property
    def vector_collection(self) -> str:
        return f"{self.name}-{self.config.embedder}-{self.config_hash[:8]}"

    @property
    def graph_group(self) -> str:
        return f"memstream-graph-{self.name}"

    @property
    def vector_group(self) -> str:
        return f"memstream-vector-{self.name}"


class Registry(BaseModel):
    live: str | None = None
    versions: dict[str, VersionInfo] = Field(default_factory=dict)


class RegistryError(ValueError):
    pass


class FileProjectionRegistry:
    """``<data dir>/projections.json``; readers re-load cheaply when the file changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[float, Registry] | None = None

    def load(self) -> Registry:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return Registry()
        if self._cache is None or self._cache[0] != mtime:
            self._cache = (mtime, Registry.model_validate_json(self.path.read_bytes()))
        return self._cache[1]

    def _write(self, reg: Registry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(reg.model_dump_json(indent=2))
        os.replace(tmp, self.path)

    @contextmanager
    def _editing(self) -> Iterator[Registry]:
        """The registry under an exclusive lock; written back if the body changed it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_suffix(".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._cache = None
            reg = self.load().model_copy(deep=True)
            before = reg.model_dump_json()
            yield reg
            if reg.model_dump_json() != before:
                self._write(reg)
        finally:
            os.close(fd)

    def register(
        self, name: str, config: ProjectionConfig, live_if_first: bool = True
    ) -> VersionInfo:
        """Add a version (idempotent for the same config; an error for a different one)."""
        if not VERSION_NAME.match(name):
            raise RegistryError(f"invalid version name {name!r}: lower-case letters, digits, - _")
        with self._editing() as reg:
            existing = reg.versions.get(name)
            if existing is not None:
                if existing.config_hash != config.config_hash:
                    raise RegistryError(
                        f"version {name} exists with config {existing.config_hash}; "
                        f"this config is {config.config_hash} (choose a new name)"
                    )
                return existing
            info = VersionInfo(
                name=name,
                config=config,
                config_hash=config.config_hash,
                created_at=datetime.now(UTC).isoformat(),
            )
            reg.versions[name] = info
            if reg.live is None and live_if_first:
                reg.live = name
            return info

    def set_status(self, name: str, status: Literal["building", "ready"]) -> None:
        with self._editing() as reg:
            if name in reg.versions:
                reg.versions[name].status = status

    def promote(self, name: str) -> None:
        """Switch reads to ``name`` in one atomic file replace."""
        with self._editing() as reg:
            if name not in reg.versions:
                raise RegistryError(f"no projection version {name!r}")
            reg.live = name

    def drop(self, name: str) -> VersionInfo:
        with self._editing() as reg:
            if name not in reg.versions:
                raise RegistryError(f"no projection version {name!r}")
            if reg.live == name:
                raise RegistryError(f"{name} is live; promote another version first")
            return reg.versions.pop(name)


def registry_path(data_dir: Path) -> Path:
    return data_dir / "projections.json"
