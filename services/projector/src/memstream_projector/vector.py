"""Vector projector for a Qdrant server (distributed stack).

In the embedded stack the same projector runs inside the API process, next to the
in-process Qdrant Edge index that checkout reads.
"""

from __future__ import annotations

from memstream.kafka.loop import tune_gc_for_batches
from memstream.kafka.worker import start_worker
from memstream.projection.embedded import vector_manager
from memstream.sinks import sink
from memstream.stopping import install_stop

COMPONENT = sink("vectors").component


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)
    manager = vector_manager(settings, bootstrap)
    install_stop(manager.stopping)
    tune_gc_for_batches()
    manager.run_forever()


if __name__ == "__main__":
    main()
