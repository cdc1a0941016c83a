"""Sample events loaded once by ``memstream up --sample-data`` (tenant ``dev``)."""

from __future__ import annotations

from importlib import resources

from memstream.events import EventIn
from memstream.ledger.opening import data_keys
from memstream.proof import Prover, producer_secret
from memstream.sdk import MemoryClient
from memstream.settings import Settings
from memstream.stack.epoch import read_epoch

from memstream_cli.stack.stackfile import StackInfo

SAMPLE_TENANT = "dev"


def load_sample_data(info: StackInfo, settings: Settings) -> int:
    """Emit the bundled sample events unless this data dir already has them."""
    marker = settings.data_dir / "sample-loaded"
    if marker.exists():
        return 0
    text = resources.files("memstream_cli.stack").joinpath("sample_events.jsonl").read_text()
    events = [
        EventIn.model_validate_json(line).complete(SAMPLE_TENANT)
        for line in text.splitlines()
        if line.strip()
    ]
    keys, epoch = data_keys(settings), read_epoch(settings.data_dir)
    prover = Prover.internal(producer_secret(settings))  # the stack's own sample
    with MemoryClient(
        info.kafka_bootstrap, SAMPLE_TENANT, keys=keys, epoch=epoch, prover=prover
    ) as client:
        client.emit_many(events)
    marker.write_text(f"{len(events)}\n")
    return len(events)
