"""The throw-away embedded stack every benchmark runs in."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memstream.settings import Settings
from memstream.stack.net import free_port
from memstream_cli.progress import Report
from memstream_cli.stack.supervisor import EmbeddedStack


@contextmanager
def throwaway_stack(
    progress: Report, projections: bool = True, replicas: int | None = None
) -> Iterator[tuple[EmbeddedStack, Settings]]:
    """A fresh stack in a temporary data dir; settings point at its graph server.

    Without ``projections`` only the spine runs (broker, sequencer, archiver, API);
    ``replicas`` overrides ``MEMSTREAM_REPLICAS``.
    """
    with tempfile.TemporaryDirectory(prefix="memstream-bench-") as tmp:
        update: dict[str, object] = {"data_dir": Path(tmp), "embedded_projections": projections}
        if replicas is not None:
            update["replicas"] = replicas
        settings = Settings().model_copy(update=update)
        stack = EmbeddedStack(settings, Path(tmp), free_port())
        progress("starting a throw-away embedded stack")
        info = stack.start()
        try:
            yield stack, settings.model_copy(update={"falkordb_url": info.falkordb_url})
        finally:
            progress("stopping the stack")
            stack.stop(drain=False)
