"""Graph projector: every registered projection version of the ledger into the graph store."""

from __future__ import annotations

from memstream.graph.factory import open_graph_store
from memstream.kafka.clients import make_producer
from memstream.kafka.loop import tune_gc_for_batches
from memstream.kafka.worker import start_worker
from memstream.ledger.opening import EntryOpener, reading_keys
from memstream.projection.projectors import GraphProjector
from memstream.projection.runner import ProjectionManager
from memstream.projection.versions import FileProjectionRegistry, VersionInfo, registry_path
from memstream.sinks import sink
from memstream.stopping import install_stop

COMPONENT = sink("graph").component


def main() -> None:
    settings, bootstrap = start_worker(COMPONENT)

    opener = EntryOpener(reading_keys(settings))

    def factory(info: VersionInfo) -> GraphProjector:
        store = open_graph_store(settings, info.graph_namespace)
        return GraphProjector(
            store,
            info.name,
            make_producer(bootstrap),
            feedback=info.config.feedback,
            opener=opener,
        )

    manager = ProjectionManager(
        settings=settings,
        bootstrap=bootstrap,
        registry=FileProjectionRegistry(registry_path(settings.data_dir)),
        component=COMPONENT,
        factory=factory,
        group_of=lambda info: info.graph_group,
    )
    install_stop(manager.stopping)
    tune_gc_for_batches()
    manager.run_forever()


if __name__ == "__main__":
    main()
