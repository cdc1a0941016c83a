"""What the checkout service is asked: one checkout, one recall (the HTTP bodies that carry
them are the API's)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memstream.checkout.retrieve.config import RetrievalConfig
from memstream.records.latent import Purpose
from memstream.scope import WHOLE, Scope

Mode = Literal["fused", "hybrid", "dense", "sparse"]


@dataclass(frozen=True)
class CheckoutQuery:
    """One checkout: the question, its time and budget, and the levers it runs with."""

    query: str
    as_of: datetime | None = None
    max_tokens: int = 1500
    k: int = 10
    purpose: Purpose | None = None  # adds a memory weave for this reasoning step
    scope: Scope = WHOLE  # the part of the tenant's memory it reads (``memstream.scope``)
    task_id: str | None = None  # the task it serves (for learning)
    config: RetrievalConfig | None = None  # None: the service's default
    fresh: bool = False  # a read after its own write: names resolve against memory now
    explain: bool = False  # meta gets what the calibrated answerability read (its features)


@dataclass(frozen=True)
class RecallQuery:
    """The raw top ``k``: every lane fused, or one vector-index lane alone. With ``config``
    the fused pool is gathered and ordered as a checkout with those levers would."""

    query: str
    k: int = 10
    scope: Scope = WHOLE
    mode: Mode = "fused"
    as_of: datetime | None = None
    fresh: bool = False
    config: RetrievalConfig | None = None  # None: the fused lanes alone
