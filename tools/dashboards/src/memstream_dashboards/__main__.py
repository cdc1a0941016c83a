"""``python -m memstream_dashboards OUT_DIR``: write every dashboard's JSON into OUT_DIR."""

from __future__ import annotations

import sys
from pathlib import Path

from memstream_dashboards import write_all


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m memstream_dashboards OUT_DIR")
    for path in write_all(Path(args[0])):
        print(path)


if __name__ == "__main__":
    main()
