"""The projection-version registry: register, promote, drop, materialization keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from memstream.projection.versions import (
    FileProjectionRegistry,
    ProjectionConfig,
    RegistryError,
)

A = ProjectionConfig(embedder="hash-256", embedder_version="1", dim=256)
B = ProjectionConfig(embedder="minilm-static-256", embedder_version="abc", dim=256)


def test_config_hash_is_the_materialization_key() -> None:
    assert (
        A.config_hash
        == ProjectionConfig(embedder="hash-256", embedder_version="1", dim=256).config_hash
    )
    assert A.config_hash != B.config_hash


def test_register_promote_drop(tmp_path: Path) -> None:
    reg = FileProjectionRegistry(tmp_path / "projections.json")
    v1 = reg.register("v1", A)
    assert reg.load().live == "v1"
    assert reg.register("v1", A) == v1  # idempotent for the same config
    with pytest.raises(RegistryError, match="exists with config"):
        reg.register("v1", B)
    reg.register("v2", B)
    assert reg.load().live == "v1"
    other = FileProjectionRegistry(tmp_path / "projections.json")  # another process
    other.promote("v2")
    assert reg.load().live == "v2"
    with pytest.raises(RegistryError, match="is live"):
        reg.drop("v2")
    assert reg.drop("v1").name == "v1"
    assert set(reg.load().versions) == {"v2"}
    with pytest.raises(RegistryError, match="no projection version"):
        reg.promote("v1")
    reg.set_status("v2", "ready")
    assert other.load().versions["v2"].status == "ready"


def test_version_names_are_checked(tmp_path: Path) -> None:
    reg = FileProjectionRegistry(tmp_path / "projections.json")
    for bad in ("V1", "../x", "", "a" * 40):
        with pytest.raises(RegistryError, match="invalid version name"):
            reg.register(bad, A)
    assert not (tmp_path / "projections.json").exists()
