"""Pure conversions: JSON Schema → Gemini schema, tool names, error classification."""

from __future__ import annotations

import json

import pytest
from conftest import API_KEY, TOOL_SCHEMA
from google.genai import types

from tarsy_llm.errors import ErrorCode, FailureKind, classify
from tarsy_llm.logs import redact, register_secret
from tarsy_llm.providers.base import ToolNameMapper
from tarsy_llm.providers.gemini_schema import to_gemini_schema
from tarsy_llm.providers.thought_signatures import ThoughtSignatureCache


def dump(schema: types.Schema | None) -> dict:
    assert schema is not None
    return schema.model_dump(exclude_none=True, mode="json")


def test_mcp_schema_becomes_gemini_subset() -> None:
    out = dump(to_gemini_schema(TOOL_SCHEMA))
    assert out["type"] == "OBJECT"
    assert out["required"] == ["namespace"]
    assert out["properties"]["namespace"] == {
        "type": "STRING",
        "description": "Kubernetes namespace",
    }
    # ["integer", "null"] → nullable integer; the default survives as a hint.
    limit = out["properties"]["limit"]
    assert limit["type"] == "INTEGER" and limit["nullable"] is True
    assert "default: 10" in limit["description"]
    text = json.dumps(out)
    assert "additional" not in text.lower() and "$schema" not in text


def test_refs_any_of_enums_and_arrays() -> None:
    schema = {
        "type": "object",
        "$defs": {"Selector": {"type": "object", "properties": {"app": {"type": "string"}}}},
        "properties": {
            "selector": {"$ref": "#/$defs/Selector", "description": "label selector"},
            "kind": {"enum": ["Pod", "Deployment"]},
            "mode": {"const": "fast"},
            "level": {"enum": [1, 2, 3]},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "names": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "anything": {},
            "when": {"type": "string", "format": "date-time"},
            "uri": {"type": "string", "format": "uri"},
        },
    }
    props = dump(to_gemini_schema(schema))["properties"]
    assert props["selector"]["type"] == "OBJECT"
    assert props["selector"]["properties"]["app"]["type"] == "STRING"
    assert props["selector"]["description"] == "label selector"
    assert props["kind"] == {"type": "STRING", "enum": ["Pod", "Deployment"]}
    assert props["mode"] == {"type": "STRING", "enum": ["fast"]}
    # Gemini enums are strings only: numeric choices move into the description.
    assert "enum" not in props["level"] and "1, 2, 3" in props["level"]["description"]
    assert props["maybe"] == {"type": "STRING", "nullable": True}
    assert [alt["type"] for alt in props["either"]["any_of"]] == ["STRING", "INTEGER"]
    assert props["names"] == {"type": "ARRAY", "items": {"type": "STRING"}, "min_items": 1}
    assert props["anything"]["type"] == "STRING"
    assert props["when"]["format"] == "date-time"
    assert "format" not in props["uri"] and "format: uri" in props["uri"]["description"]


def test_recursive_ref_terminates_and_all_of_merges() -> None:
    schema = {
        "type": "object",
        "definitions": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/definitions/Node"}},
            }
        },
        "allOf": [
            {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"root": {"$ref": "#/definitions/Node"}}},
        ],
    }
    out = dump(to_gemini_schema(schema))
    assert out["required"] == ["a"]
    assert set(out["properties"]) == {"a", "root"}
    depth, node = 0, out["properties"]["root"]
    while "properties" in node:
        node, depth = node["properties"]["child"], depth + 1
    assert 3 < depth < 20


def test_tool_without_parameters_has_no_schema() -> None:
    assert to_gemini_schema({"type": "object", "properties": {}}) is None
    assert to_gemini_schema({"type": "object"}) is None


def test_tool_name_mapping_round_trip() -> None:
    mapper = ToolNameMapper(["kubernetes-server.pods_list", "prom.query__range"])
    assert (
        ToolNameMapper.to_provider("kubernetes-server.pods_list") == "kubernetes-server__pods_list"
    )
    assert mapper.to_canonical("kubernetes-server__pods_list") == "kubernetes-server.pods_list"
    # Exact reverse mapping even when the tool name itself contains "__".
    assert mapper.to_canonical(ToolNameMapper.to_provider("prom.query__range")) == (
        "prom.query__range"
    )
    # A name the request did not define: first separator becomes the dot.
    assert mapper.to_canonical("other__tool") == "other.tool"
    assert mapper.to_canonical("plain") == "plain"


class _Status(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status_code = status
        self.message = message
        self.response = type("R", (), {"headers": headers or {}, "status_code": status})()


@pytest.mark.parametrize(
    ("status", "message", "kind", "code", "retryable"),
    [
        (429, "slow down", FailureKind.RATE_LIMIT, ErrorCode.PROVIDER_ERROR, True),
        (401, "bad key", FailureKind.AUTH, ErrorCode.CREDENTIALS, False),
        (403, "denied", FailureKind.AUTH, ErrorCode.CREDENTIALS, False),
        (400, "bad field", FailureKind.INVALID, ErrorCode.INVALID_REQUEST, False),
        (404, "no such model", FailureKind.INVALID, ErrorCode.INVALID_REQUEST, False),
        (
            400,
            "This model's maximum context length is 8192 tokens",
            FailureKind.CONTEXT_OVERFLOW,
            ErrorCode.CONTEXT_OVERFLOW,
            False,
        ),
        (500, "boom", FailureKind.SERVER, ErrorCode.PROVIDER_ERROR, True),
        (503, "overloaded", FailureKind.SERVER, ErrorCode.PROVIDER_ERROR, True),
    ],
)
def test_classify_http_status(status, message, kind, code, retryable) -> None:
    failure = classify(_Status(status, message))
    assert failure.kind is kind
    error = failure.to_error()
    assert (error.code, error.retryable) == (code, retryable)


def test_classify_follows_cause_chain_and_retry_after_forms() -> None:
    try:
        try:
            raise _Status(429, "quota", {"retry-after": "7"})
        except _Status as inner:
            raise RuntimeError("wrapped by an integration") from inner
    except RuntimeError as outer:
        failure = classify(outer)
    assert failure.kind is FailureKind.RATE_LIMIT and failure.retry_after == 7.0
    assert classify(_Status(429, "q", {"retry-after-ms": "1500"})).retry_after == 1.5


def test_classify_network_and_unknown() -> None:
    assert classify(ConnectionResetError("reset")).kind is FailureKind.NETWORK
    assert classify(TimeoutError()).kind is FailureKind.NETWORK
    assert classify(ValueError("weird")).kind is FailureKind.UNKNOWN
    assert classify(ValueError("weird")).to_error().retryable is False


def test_redaction_by_value_and_shape() -> None:
    register_secret("a-registered-secret-value")
    text = redact(f"key {API_KEY} and a-registered-secret-value and AIza{'x' * 30}")
    assert API_KEY not in text and "a-registered-secret-value" not in text
    assert "AIza" not in text and text.count("[REDACTED]") == 3


def test_signature_cache_ttl_and_isolation() -> None:
    now = [1000.0]
    cache = ThoughtSignatureCache(ttl_seconds=3600, clock=lambda: now[0])
    cache.put("exec-a", {"call:1": b"sig-a"})
    cache.put("exec-b", {"call:1": b"sig-b"})
    assert cache.get("exec-a", "call:1") == b"sig-a"
    assert cache.get("exec-b", "call:1") == b"sig-b"
    now[0] += 3000
    assert cache.get("exec-a", "call:1") == b"sig-a"  # use refreshes the TTL
    now[0] += 3000
    assert cache.get("exec-a", "call:1") == b"sig-a"
    assert cache.get("exec-b", "call:1") is None  # untouched for 6000 s: expired
    cache.clear("exec-a")
    assert cache.get("exec-a", "call:1") is None
    assert len(cache) == 0
