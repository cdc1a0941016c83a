"""Embedder registry: name -> factory, with one cached instance per name."""

from __future__ import annotations

import threading
from collections.abc import Callable

from memstream.embed.port import Embedder

DEFAULT_EMBEDDER = "minilm-static-256"


def _static() -> Embedder:
    from memstream.embed.static import StaticEmbedder  # lazy: loads model2vec and weights

    return StaticEmbedder()


def _hashing() -> Embedder:
    from memstream.embed.hashing import HashingEmbedder

    return HashingEmbedder(256)


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    DEFAULT_EMBEDDER: _static,
    "hash-256": _hashing,
}

_instances: dict[str, Embedder] = {}
_lock = threading.Lock()


def get_embedder(name: str | None = None) -> Embedder:
    """The shared embedder called ``name`` (default ``minilm-static-256``)."""
    key = DEFAULT_EMBEDDER if name is None else name
    if key not in EMBEDDERS:
        available = ", ".join(sorted(EMBEDDERS))
        raise ValueError(f"unknown embedder {key!r}; available: {available}")
    with _lock:
        if key not in _instances:
            _instances[key] = EMBEDDERS[key]()
        return _instances[key]
