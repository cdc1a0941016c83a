"""Pick the vector adapter from settings: Qdrant Edge embedded, or a Qdrant server."""

from __future__ import annotations

from memstream.settings import Settings
from memstream.vectors.port import VectorIndex


def open_vector_index(settings: Settings, collection: str, dim: int) -> VectorIndex:
    """Edge at ``<vectors dir>/<collection>`` (``<data_dir>/vectors``, or the API replica's)
    unless ``settings.qdrant_url`` is set: in
    shards by tenant, or one shard for a collection made before shards existed."""
    if settings.qdrant_url is None:
        from memstream.vectors.edge import EdgeVectorIndex
        from memstream.vectors.edge_shards import EdgeTenantShards, is_sharded

        path = settings.vectors_dir / collection
        if is_sharded(path):
            return EdgeTenantShards(
                path,
                collection,
                dim,
                shards=settings.vector_shards,
                payload_cache=settings.vector_payload_cache,
            )
        return EdgeVectorIndex(path, collection, dim, payload_cache=settings.vector_payload_cache)
    from qdrant_client import QdrantClient

    from memstream.vectors.qdrant_server import QdrantVectorIndex

    client = QdrantClient(url=settings.qdrant_url)
    return QdrantVectorIndex(client, collection, dim, owns_client=True)
