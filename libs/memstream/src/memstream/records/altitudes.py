"""The names of latent artifact types and of search altitudes, apart from the models that
use them: a command line or a client lists them without loading the models."""

from __future__ import annotations

from typing import Literal, get_args

ArtifactType = Literal[
    "episode_latent",
    "preference_latent",
    "procedure_latent",
    "failure_latent",
    "retrieval_policy_latent",
    "memory_weave",
]
ARTIFACT_TYPES: tuple[ArtifactType, ...] = get_args(ArtifactType)
# Every searchable item has one: ledger events, extracted facts, episodes, other latents.
Altitude = Literal["event", "fact", "episode", "latent"]
ALTITUDES: tuple[Altitude, ...] = get_args(Altitude)

__all__ = ["ALTITUDES", "ARTIFACT_TYPES", "Altitude", "ArtifactType"]
