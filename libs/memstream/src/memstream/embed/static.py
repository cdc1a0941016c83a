"""``StaticEmbedder``: the default offline embedder, a model2vec distillation of MiniLM.

The weights ship inside the package (``weights/minilm-static-256/``, built by
``scripts/distill_static_embedder.py``); loading never touches the network.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

# model2vec imports huggingface_hub; a local path never needs it, so make sure it cannot try.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from model2vec import StaticModel
from safetensors.numpy import load_file
from tokenizers import Tokenizer

NAME = "minilm-static-256"
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights" / NAME
TOKEN_CACHE_SIZE = 50_000
# The nearest-words table beside the weights (``scripts/static_neighbours.py`` builds it from
# them): each whole word's nearest whole words, best first.
NEIGHBOURS_FILE = "neighbours.safetensors"
NEIGHBOURS_KEPT = 16
WEIGHT_FILES = ("config.json", "model.safetensors", "tokenizer.json")
MAX_TOKENS = 512  # tokens per text that are averaged; the rest is ignored
BATCH = 2048
# Bump when the preprocessing below changes: it is hashed into ``version``.
PREPROCESSING = f"mean-f32/max{MAX_TOKENS}/l2"


def content_version(folder: Path, files: tuple[str, ...] = WEIGHT_FILES, salt: str = "") -> str:
    """Short sha256 over ``salt`` and the named files' bytes."""
    h = hashlib.sha256(salt.encode())
    for name in files:
        h.update(name.encode() + b"\0")
        h.update((folder / name).read_bytes())
    return h.hexdigest()[:12]


def l2_normalise(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length; all-zero rows stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    out: npt.NDArray[np.float32] = (vectors / norms).astype(np.float32, copy=False)
    return out


class StaticEmbedder:
    """Token-embedding average (model2vec) of all-MiniLM-L6-v2, PCA 256-d.

    A text with no known tokens (e.g. ``""``) embeds to the zero vector.
    """

    name = NAME
    dim = 256

    def __init__(self, folder: Path | None = None) -> None:
        folder = WEIGHTS_DIR if folder is None else folder
        if not (folder / "model.safetensors").is_file():
            raise FileNotFoundError(f"static embedder weights missing under {folder}")
        self.folder = folder
        self.version = content_version(folder, salt=PREPROCESSING)
        model = StaticModel.from_pretrained(folder, max_length=MAX_TOKENS)
        # float16 on disk keeps the package small; float32 in memory is faster and exact.
        model.embedding = np.asarray(model.embedding, dtype=np.float32)
        if model.dim != self.dim:
            raise ValueError(f"{folder}: expected {self.dim}-d vectors, found {model.dim}")
        self._model = model
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._token_cache: dict[str, int] = {}
        vocab = tokenizer.get_vocab()
        self._words = [""] * (max(vocab.values(), default=-1) + 1)
        for token, index in vocab.items():
            self._words[index] = token
        self._near: _NearestWords | None = None

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """L2-normalised float32 vectors, shape ``(len(texts), 256)``."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = self._model.encode(
            list(texts),
            max_length=MAX_TOKENS,
            normalize=False,
            batch_size=BATCH,
            use_multiprocessing=False,
        )
        return l2_normalise(np.asarray(raw, dtype=np.float32).reshape(len(texts), self.dim))

    def count_tokens(self, text: str) -> int:
        """WordPiece tokens of ``text`` (no special tokens, no truncation)."""
        # Packet budgeting counts the same item renderings several times per checkout.
        cached = self._token_cache.get(text)
        if cached is None:
            cached = len(self._tokenizer.encode(text, add_special_tokens=False).ids)
            if len(self._token_cache) >= TOKEN_CACHE_SIZE:
                self._token_cache.clear()
            self._token_cache[text] = cached
        return cached

    def neighbours(self, word: str, limit: int, min_similarity: float) -> list[tuple[str, float]]:
        """The whole words (alphabetic vocabulary entries, not word pieces) nearest ``word``
        in the token table, by cosine, at most ``NEIGHBOURS_KEPT``; empty unless ``word`` is
        one token of the vocabulary."""
        if self._near is None:  # loaded on first use: only checkout's expansion reads it
            self._near = _NearestWords.load(self.folder / NEIGHBOURS_FILE)
        ids = self._tokenizer.encode(word, add_special_tokens=False).ids
        if len(ids) != 1 or limit <= 0:
            return []
        near = self._near.of(ids[0])
        out = [(self._words[i], round(s, 4)) for i, s in near if s >= min_similarity]
        return out[:limit]


@dataclass(frozen=True)
class _NearestWords:
    rows: dict[int, int]  # vocabulary id -> row of ``ids`` and ``sims``
    ids: npt.NDArray[np.int32]
    sims: npt.NDArray[np.float16]

    @classmethod
    def load(cls, path: Path) -> _NearestWords:
        tensors = load_file(str(path))
        rows = {int(v): n for n, v in enumerate(tensors["rows"])}
        return cls(rows, tensors["ids"], tensors["sims"])

    def of(self, vocab_id: int) -> list[tuple[int, float]]:
        row = self.rows.get(vocab_id)
        if row is None:
            return []
        return [(int(i), float(s)) for i, s in zip(self.ids[row], self.sims[row], strict=True)]
