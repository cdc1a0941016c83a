"""Build the nearest-words table shipped beside the static embedder's weights.

For every whole word of the vocabulary (alphabetic entries, not word pieces) the 16 other
whole words nearest it by cosine in the token table, best first, with their similarity
(float16). Checkout's query expansion reads it (``StaticEmbedder.neighbours``); computing it
takes ~20 s of CPU, too long for a process start. Run with the project's environment, from
the repository root, after the weights change::

    .venv/bin/python scripts/static_neighbours.py

Output: ``neighbours.safetensors`` in the weights folder (override with ``--folder``), tensors
``rows`` (vocabulary ids of the words, ascending), ``ids`` (their neighbours' vocabulary ids)
and ``sims``. Two runs on one machine give byte-identical files.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FOLDER = REPO / "libs/memstream/src/memstream/embed/weights/minilm-static-256"
KEPT = 16  # must match memstream.embed.static.NEIGHBOURS_KEPT
CHUNK = 1024


def whole_words(folder: Path) -> npt.NDArray[np.int32]:
    """Vocabulary ids of the alphabetic entries, ascending."""
    vocab = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab()
    return np.array(sorted(i for w, i in vocab.items() if w.isalpha()), dtype=np.int32)


def table(
    folder: Path, rows: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float16]]:
    """Each row's ``KEPT`` nearest other rows (vocabulary ids) and their cosines."""
    weights = load_file(str(folder / "model.safetensors"))
    emb = np.asarray(next(iter(weights.values())), dtype=np.float32)[rows]
    emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), np.float32(1e-12))
    ids = np.empty((len(rows), KEPT), dtype=np.int32)
    sims = np.empty((len(rows), KEPT), dtype=np.float16)
    for start in range(0, len(rows), CHUNK):
        sim = emb[start : start + CHUNK] @ emb.T
        own = np.arange(start, start + len(sim))
        sim[np.arange(len(sim)), own] = -np.inf  # a word is not its own neighbour
        top = np.argpartition(-sim, KEPT, axis=1)[:, :KEPT]
        val = np.take_along_axis(sim, top, axis=1)
        order = np.lexsort((top, -val), axis=1)  # best first, ties by row
        ids[start : start + len(sim)] = rows[np.take_along_axis(top, order, axis=1)]
        sims[start : start + len(sim)] = np.take_along_axis(val, order, axis=1)
    return ids, sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    folder = parser.parse_args().folder
    rows = whole_words(folder)
    ids, sims = table(folder, rows)
    save_file({"rows": rows, "ids": ids, "sims": sims}, str(folder / "neighbours.safetensors"))
    print(f"{len(rows)} words x {KEPT} neighbours -> {folder / 'neighbours.safetensors'}")


if __name__ == "__main__":
    main()
