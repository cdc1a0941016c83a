"""Vectors of texts kept across calls, for a caller that embeds the same texts again and
again (the events a checkout ranks come back checkout after checkout)."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import numpy.typing as npt

from memstream.embed.port import Embedder


class KeptVectors:
    """An embedder's vectors by text, the ``size`` most recently used kept (thread-safe: the
    API serves checkouts on many threads). A vector is kept under the embedder's name and
    version, so another model or new weights never read an old vector."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[str, str, str], npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def vectors(self, embedder: Embedder, texts: list[str]) -> npt.NDArray[np.float32]:
        """One row per text, in order (shape ``(len(texts), embedder.dim)``); the texts not
        kept yet are embedded in one call."""
        keys = [(embedder.name, embedder.version, t) for t in texts]
        with self._lock:
            got = {k: self._kept[k] for k in keys if k in self._kept}
            for k in got:
                self._kept.move_to_end(k)
        missing = sorted({k[2] for k in keys if k not in got})
        if missing:
            for text, vector in zip(missing, embedder.embed(missing), strict=True):
                got[(embedder.name, embedder.version, text)] = vector
            with self._lock:
                for k in keys:
                    self._kept[k] = got[k]
                    self._kept.move_to_end(k)
                while len(self._kept) > self._size:
                    self._kept.popitem(last=False)
        if not keys:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([got[k] for k in keys])
