"""Pick the vector adapter from settings: Qdrant Edge embedded, or a Qdrant server."""

from __future__ import annotations

from memstream.settings import Settings
from memstream.vectors.port import VectorIndex


def open_vector_index(settings: Settings, collection: str, dim: int) -> VectorIndex:
    """Edge at ``<data_dir>/vectors/<collection>`` unless ``settings.qdrant_url`` is set."""
    if settings.qdrant_url is None:
        from memstream.vectors.edge import EdgeVectorIndex

        return EdgeVectorIndex(
            settings.data_dir / "vectors" / collection,
            collection,
            dim,
            payload_cache=settings.vector_payload_cache,
        )
    from qdrant_client import QdrantClient

    from memstream.vectors.qdrant_server import QdrantVectorIndex

    client = QdrantClient(url=settings.qdrant_url)
    return QdrantVectorIndex(client, collection, dim, owns_client=True)
