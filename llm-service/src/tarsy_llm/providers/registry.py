"""Routes ``llm_config.backend`` to a provider (seed 002 Q1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..errors import ErrorCode, LLMServiceError
from .base import LLMProvider

DEFAULT_BACKEND = "langchain"
GOOGLE_NATIVE = "google-native"


class ProviderRegistry:
    """Backend name → provider instance (created once, at startup)."""

    def __init__(self) -> None:
        self._providers: dict[str, LLMProvider] = {}

    def register(self, backend: str, provider: LLMProvider) -> None:
        """Adds a backend; a later registration of the same name replaces it."""
        self._providers[backend] = provider

    def get(self, backend: str) -> LLMProvider:
        """The provider for ``backend`` (empty means the default, ``langchain``)."""
        name = backend.strip() or DEFAULT_BACKEND
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(sorted(self._providers)) or "none"
            raise LLMServiceError(
                ErrorCode.INVALID_BACKEND,
                f"unknown backend {name!r} (known: {known})",
                retryable=False,
            )
        return provider

    def backends(self) -> list[str]:
        """Registered backend names."""
        return sorted(self._providers)

    def __iter__(self) -> Iterator[LLMProvider]:
        return iter(self._providers.values())

    def prewarm(self, environ: Mapping[str, str]) -> None:
        """Lets every provider create the clients it can build from the environment."""
        for provider in self._providers.values():
            provider.prewarm(environ)


def default_registry() -> ProviderRegistry:
    """The production registry: google-native and langchain."""
    # Imported here so that importing the registry module stays cheap.
    from .google_native import GoogleNativeProvider  # noqa: PLC0415
    from .langchain_provider import LangChainProvider  # noqa: PLC0415

    registry = ProviderRegistry()
    registry.register(GOOGLE_NATIVE, GoogleNativeProvider())
    registry.register(DEFAULT_BACKEND, LangChainProvider())
    return registry
