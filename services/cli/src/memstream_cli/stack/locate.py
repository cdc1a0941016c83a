"""Finding the stack a CLI command talks to: ``MEMSTREAM_*`` endpoints or the data dir."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memstream.settings import Settings
from pydantic import SecretStr

from memstream_cli.stack.stackfile import StackInfo, read_stack


class NoStackError(RuntimeError):
    pass


@dataclass(frozen=True)
class Endpoints:
    kafka_bootstrap: str
    api_url: str | None
    stack: StackInfo | None
    graph_password: SecretStr | None = None  # the stack's FalkorDB password


def locate(settings: Settings) -> Endpoints:
    """Explicit settings win; otherwise the live stack recorded in the data dir."""
    info = read_stack(settings.data_dir)
    if info is not None:
        settings = settings.model_copy(update={"data_dir": Path(info.data_dir)})
    password = settings.falkordb_secret()
    if settings.kafka_bootstrap:
        api = f"http://{settings.api_host}:{settings.api_port}"
        return Endpoints(settings.kafka_bootstrap, api, info, password)
    if info is None:
        raise NoStackError(
            f"no running stack found in {settings.data_dir} "
            "(start one with `memstream up`, or set MEMSTREAM_KAFKA_BOOTSTRAP)"
        )
    return Endpoints(info.kafka_bootstrap, info.api_url, info, password)
