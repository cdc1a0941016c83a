"""Finding the stack a CLI command talks to: ``MEMSTREAM_*`` endpoints or the data dir."""

from __future__ import annotations

from dataclasses import dataclass

from memstream.settings import Settings

from memstream_cli.stack.stackfile import StackInfo, read_stack


class NoStackError(RuntimeError):
    pass


@dataclass(frozen=True)
class Endpoints:
    kafka_bootstrap: str
    api_url: str | None
    stack: StackInfo | None


def locate(settings: Settings) -> Endpoints:
    """Explicit settings win; otherwise the live stack recorded in the data dir."""
    info = read_stack(settings.data_dir)
    if settings.kafka_bootstrap:
        api = f"http://{settings.api_host}:{settings.api_port}"
        return Endpoints(settings.kafka_bootstrap, api, info)
    if info is None:
        raise NoStackError(
            f"no running stack found in {settings.data_dir} "
            "(start one with `memstream up`, or set MEMSTREAM_KAFKA_BOOTSTRAP)"
        )
    return Endpoints(info.kafka_bootstrap, info.api_url, info)
