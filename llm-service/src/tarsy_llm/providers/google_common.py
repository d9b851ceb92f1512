"""What both Google paths (google-native and LangChain's Gemini integration) share,
without importing the google-genai SDK: provider names and service-account loading."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ErrorCode, LLMServiceError

GOOGLE_PROVIDERS = frozenset({"google", "gemini"})
VERTEX_PROVIDERS = frozenset({"vertexai", "vertex"})
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def load_google_credentials(env_name: str, environ: Mapping[str, str]) -> tuple[Any, str]:
    """Loads Google credentials from the file the environment variable points at.

    Returns (credentials, project id from the file or ""). Failures are
    non-retryable ``credentials`` errors.
    """
    import google.auth  # noqa: PLC0415 - only Vertex needs it
    from google.auth import exceptions as auth_exceptions  # noqa: PLC0415

    path = environ.get(env_name, "").strip()
    if not path:
        raise LLMServiceError(
            ErrorCode.CREDENTIALS,
            f"environment variable {env_name} (credentials_env) is not set",
            retryable=False,
        )
    try:
        credentials, project = google.auth.load_credentials_from_file(
            path, scopes=[CLOUD_PLATFORM_SCOPE]
        )
    except (OSError, ValueError, auth_exceptions.GoogleAuthError) as exc:
        raise LLMServiceError(
            ErrorCode.CREDENTIALS,
            f"cannot load credentials from {env_name}: {type(exc).__name__}",
            retryable=False,
        ) from exc
    return credentials, project or ""
