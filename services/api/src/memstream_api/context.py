"""The API's typed context: what every route reaches, instead of untyped ``app.state``.

``ApiContext`` is made by ``create_app`` (settings, keys, limits); its ``serving`` part is
opened by the lifespan (stores, producer, caches, the forget service) and is there for every
request the app answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request

if TYPE_CHECKING:
    from memstream.checkout.service import CheckoutService
    from memstream.fairshare import FairShare
    from memstream.forget.metrics import PendingPurges
    from memstream.forget.service import ForgetService
    from memstream.intake import Intake
    from memstream.intake.outbox import Outbox
    from memstream.intake.producer import BatchProducer
    from memstream.keys import KeyStore, LastUsed
    from memstream.projection.live import LiveStores
    from memstream.projection.runner import ProjectionManager
    from memstream.settings import Settings
    from memstream.shred.port import DataKeys
    from memstream.summarize.providers import SummarizeDisabled
    from memstream.summarize.service import Summarizer

    from memstream_api.offsets_watch import KafkaWatch
    from memstream_api.slots import IngestSlots


@dataclass(frozen=True)
class Serving:
    """What the lifespan opens, for as long as the app serves."""

    data_keys: DataKeys
    intake: Intake  # the write path every writing route calls
    producer: BatchProducer
    outbox: Outbox | None
    vectors: ProjectionManager | None  # the embedded stack's in-process vector projection
    stores: LiveStores  # the live version's stores, for every route that reads them
    checkout: CheckoutService
    summarizer: Summarizer | SummarizeDisabled
    read_after_watch: KafkaWatch
    forget: ForgetService


@dataclass
class ApiContext:
    """One app's context."""

    settings: Settings
    bootstrap: str
    component: str
    keys: KeyStore  # API keys: the tenant, permissions and scope of each
    max_batch: int
    ingest_slots: IngestSlots
    pending_purges: PendingPurges
    fair_share: FairShare | None = None  # None: reads are not held to a share
    last_used: LastUsed | None = None  # when each key was last used (``keys list``)
    _serving: Serving | None = None

    @property
    def serving(self) -> Serving:
        if self._serving is None:
            raise RuntimeError("the API has not started serving (its lifespan did not run)")
        return self._serving

    def serve(self, serving: Serving | None) -> None:
        self._serving = serving


def attach(app: FastAPI, ctx: ApiContext) -> None:
    app.state.ctx = ctx


def context_of(app: FastAPI) -> ApiContext:
    ctx: ApiContext = app.state.ctx
    return ctx


def context(request: Request) -> ApiContext:
    """The context of the app answering ``request``."""
    return context_of(request.app)


def serving(request: Request) -> Serving:
    """What the app answering ``request`` opened (its stores, producer, services)."""
    return context_of(request.app).serving
