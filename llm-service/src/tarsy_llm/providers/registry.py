"""Routes ``llm_config.backend`` to a provider: ``google-native`` or ``langchain`` (the default).

The orchestrator picks the backend from the agent's iteration strategy, never from the provider
type (``IterationStrategy::backend`` in ``operator/core/src/status.rs``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ..errors import ErrorCode, LLMServiceError
from .base import ALL, PROVIDER_TYPES, LLMProvider

DEFAULT_BACKEND = "langchain"
GOOGLE_NATIVE = "google-native"


class PreloadError(ValueError):
    """An invalid list of providers to preload."""


def parse_preload(value: str) -> frozenset[str]:
    """``all`` (or empty), ``none``, or a comma-separated list of provider types."""
    text = value.strip().lower()
    if text in ("", "all"):
        return ALL
    if text == "none":
        return frozenset()
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(names - ALL)
    if unknown:
        raise PreloadError(
            f"unknown provider(s) to preload: {', '.join(unknown)} "
            f"(known: {', '.join(PROVIDER_TYPES)}, or all, none)"
        )
    return names


@dataclass
class _Lazy:
    """A provider created on first use, or at start-up when one of ``wanted_by``
    is preloaded (its module imports a large SDK)."""

    factory: Callable[[], LLMProvider]
    wanted_by: frozenset[str]


class ProviderRegistry:
    """Backend name → provider instance (created once, at startup or first use)."""

    def __init__(self) -> None:
        self._providers: dict[str, LLMProvider | _Lazy] = {}

    def register(self, backend: str, provider: LLMProvider) -> None:
        """Adds a backend; a later registration of the same name replaces it."""
        self._providers[backend] = provider

    def register_lazy(
        self, backend: str, factory: Callable[[], LLMProvider], wanted_by: frozenset[str]
    ) -> None:
        """Adds a backend created on first use, or by :meth:`prewarm` when one of
        the provider types ``wanted_by`` is preloaded."""
        self._providers[backend] = _Lazy(factory, wanted_by)

    def _materialize(self, name: str) -> LLMProvider | None:
        entry = self._providers.get(name)
        if isinstance(entry, _Lazy):
            entry = entry.factory()
            self._providers[name] = entry
        return entry

    def get(self, backend: str) -> LLMProvider:
        """The provider for ``backend`` (empty means the default, ``langchain``)."""
        name = backend.strip() or DEFAULT_BACKEND
        provider = self._materialize(name)
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
        return iter(
            [p for name in sorted(self._providers) if (p := self._materialize(name)) is not None]
        )

    def prewarm(self, environ: Mapping[str, str], providers: frozenset[str] = ALL) -> None:
        """Imports the libraries of the preloaded provider types and lets every
        loaded provider create the clients it can build from the environment."""
        for name, entry in list(self._providers.items()):
            if isinstance(entry, _Lazy) and not (entry.wanted_by & providers):
                continue
            provider = self._materialize(name)
            if provider is not None:
                provider.prewarm(environ, providers)

    async def aclose(self) -> None:
        """Closes the providers created so far (lazy ones not yet used stay unmade)."""
        for entry in list(self._providers.values()):
            if not isinstance(entry, _Lazy):
                await entry.aclose()


def _google_native() -> LLMProvider:
    # Imported on demand: google-genai's types alone take ≈ 0.5 s and 35 MiB.
    from .google_native import GoogleNativeProvider  # noqa: PLC0415

    return GoogleNativeProvider()


def default_registry() -> ProviderRegistry:
    """The production registry: google-native and langchain."""
    # Imported here so that importing the registry module stays cheap.
    from .langchain_provider import LangChainProvider  # noqa: PLC0415

    registry = ProviderRegistry()
    registry.register_lazy(GOOGLE_NATIVE, _google_native, frozenset({"google", "vertexai"}))
    registry.register(DEFAULT_BACKEND, LangChainProvider())
    return registry
