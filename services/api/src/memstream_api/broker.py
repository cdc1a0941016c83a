"""A broker that restarts empty under the API (the embedded stack's): what the API does then.

The supervisor writes a new broker epoch once the fresh broker has its topics and the ledger
back. On seeing it the API renews its producer (the old one's sends fail at once), re-sends
its whole outbox, and makes sure each vector projection loop was reset: assigned again on
the new broker (the rebalance starts it over from the group's offsets there), else given a
new consumer. It keeps answering meanwhile: writes into the outbox, reads from the stores
that are up.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from memstream.intake.outbox import Outbox
from memstream.intake.producer import BatchProducer
from memstream.projection.runner import ProjectionManager
from memstream.stack.epoch import EpochWatch

log = logging.getLogger(__name__)
EVERY_S = 0.5


class BrokerFollower:
    """Watches the broker epoch of ``data_dir`` in a thread of its own."""

    def __init__(
        self,
        data_dir: Path,
        producer: BatchProducer,
        outbox: Outbox | None,
        vectors: ProjectionManager | None,
    ) -> None:
        self.watch = EpochWatch(data_dir)
        self.producer = producer
        self.outbox = outbox
        self.vectors = vectors
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-follower", daemon=True)

    def start(self) -> BrokerFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)

    def _run(self) -> None:
        while not self._stop.wait(EVERY_S):
            try:
                if self.watch.changed():
                    self.restarted()
            except Exception:  # never stop following; the next epoch is acted on again
                log.exception("acting on a broker restart failed")

    def restarted(self) -> None:
        """Producer first: what it held is failed and counted before the outbox re-sends."""
        log.warning("the broker restarted empty (epoch %s)", self.watch.seen)
        self.producer.reconnect()
        if self.outbox is not None:
            self.outbox.broker_restarted()
        if self.vectors is not None:
            self.vectors.after_broker_restart(self.watch.started)
