"""LLM providers behind one Protocol, chosen by name from a registry (Anthropic by default).

There is no silent fallback: without a key, building the provider raises ``SummarizeDisabled``
and summarize_recall answers that it is disabled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import SecretStr

from memstream.settings import Settings

if TYPE_CHECKING:
    import anthropic


class SummarizeDisabled(RuntimeError):
    """summarize_recall cannot run here (no API key, unknown provider)."""


class ProviderError(RuntimeError):
    """The provider call failed (network, timeout, 4xx/5xx, unusable reply)."""


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    model: str


class LlmProvider(Protocol):
    name: str
    model: str

    def complete(self, system: str, prompt: str, max_tokens: int) -> Completion:
        """One completion of ``prompt`` under ``system``; raises ``ProviderError``."""


class AnthropicLlmProvider:
    """The Messages API through the official client (which reads ANTHROPIC_BASE_URL itself
    when ``base_url`` is None)."""

    name = "anthropic"

    def __init__(
        self,
        api_key: str,
        model: str,
        timeout_s: float = 30.0,
        base_url: str | None = None,
        max_retries: int = 1,
    ) -> None:
        # Imported here: the client costs ~2 s of CPU to import, paid at every API start
        # (restarts included) though most stacks run without a model key.
        import anthropic

        self._api_error = anthropic.APIError
        self.model = model
        # One retry at most: the caller waits, and the cache absorbs repeats.
        self.client: anthropic.Anthropic = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )

    def complete(self, system: str, prompt: str, max_tokens: int) -> Completion:
        try:
            reply = self.client.messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=system,
                messages=[{"role": "user", "content": prompt}],
            )
        except self._api_error as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}") from exc
        text = "".join(block.text for block in reply.content if block.type == "text").strip()
        if not text:
            raise ProviderError(f"the reply holds no text (stop_reason {reply.stop_reason})")
        return Completion(
            text=text,
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            model=reply.model or self.model,
        )


def _secret(value: SecretStr | None) -> str | None:
    raw = value.get_secret_value().strip() if value is not None else ""
    return raw or None


def anthropic_provider(settings: Settings) -> LlmProvider:
    key = _secret(settings.anthropic_api_key)
    if key is None:
        raise SummarizeDisabled(
            "summarize_recall is disabled: set ANTHROPIC_API_KEY (or "
            "MEMSTREAM_ANTHROPIC_API_KEY) for the API process to enable it"
        )
    return AnthropicLlmProvider(key, settings.llm_model, settings.llm_timeout_s)


PROVIDERS: dict[str, Callable[[Settings], LlmProvider]] = {"anthropic": anthropic_provider}


def build_provider(settings: Settings) -> LlmProvider:
    """The provider ``settings.llm_provider`` names; ``SummarizeDisabled`` if it cannot run."""
    factory = PROVIDERS.get(settings.llm_provider)
    if factory is None:
        known = ", ".join(sorted(PROVIDERS))
        raise SummarizeDisabled(
            f"summarize_recall is disabled: unknown MEMSTREAM_LLM_PROVIDER "
            f"{settings.llm_provider!r} (known: {known})"
        )
    return factory(settings)
