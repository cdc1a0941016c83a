"""Which data key store a process opens."""

from __future__ import annotations

from memstream.settings import Settings
from memstream.shred.port import DataKeys
from memstream.shred.sqlite import SqliteDataKeys


def open_data_keys(settings: Settings) -> DataKeys:
    """PostgreSQL when ``MEMSTREAM_DATA_KEYS_URL`` is set, else the SQLite file in the data
    dir (every process of one machine's stack opens the same file)."""
    if settings.data_keys_url is not None:
        # Imported here: the PostgreSQL driver costs every process 0.15 s to import, and
        # the embedded stack never opens it.
        from memstream.shred.postgres import PostgresDataKeys

        return PostgresDataKeys(settings.data_keys_url.get_secret_value())
    return SqliteDataKeys(settings.data_keys_path)
