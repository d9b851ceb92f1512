"""Kubernetes `Status` errors as the real API server returns them."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure rendered as a `v1 Status` object with a standard reason.

    Clients (kube-rs, client-go/kubectl) branch on `reason` and `code`, so both
    follow the real server's choices for the same situation.
    """

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The `Status` object for the response body or a watch `ERROR` event."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def qualified(plural: str, group: str) -> str:
    """`alerts.tarsy.dev` / `pods`: how the real server names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(plural, group)} "{name}" not found',
                    {"name": name, "group": group, "kind": plural})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{qualified(plural, group)} "{name}" already exists',
                    {"name": name, "group": group, "kind": plural})


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
                    {"name": name, "group": group, "kind": plural})


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid with one cause per (field, message)."""
    text = "; ".join(f"{field}: {msg}" for field, msg in causes)
    return ApiError(422, "Invalid", f'{kind}.{group} "{name}" is invalid: {text}' if group else f'{kind} "{name}" is invalid: {text}',
                    {"name": name, "group": group, "kind": kind,
                     "causes": [{"reason": "FieldValueInvalid", "message": msg, "field": field} for field, msg in causes]})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
