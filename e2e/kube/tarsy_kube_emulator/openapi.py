"""A minimal OpenAPI v3 discovery: enough for kubectl to detect server-side field
validation (so it skips client-side validation) and for `kubectl explain` on
custom resources (their CRD schemas are served)."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from .resources import Kind

_PARAM = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
          {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
          {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]


def gv_path(kind: Kind) -> str:
    return f"apis/{kind.group}/{kind.version}" if kind.group else f"api/{kind.version}"


def schema_name(kind: Kind) -> str:
    if not kind.group:
        return f"io.k8s.api.core.{kind.version}.{kind.kind}"
    return ".".join(reversed(kind.group.split("."))) + f".{kind.version}.{kind.kind}"


def gv_document(kinds: list[Kind], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The OpenAPI v3 document of one group/version."""
    paths: dict[str, Any] = {}
    components: dict[str, Any] = {}
    for kind in kinds:
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        base = f"/{gv_path(kind)}/" + ("namespaces/{namespace}/" if kind.namespaced else "") + kind.plural
        ref = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name(kind)}"}}}}

        def op(verb: str) -> dict[str, Any]:
            return {"operationId": f"{verb}{kind.kind}", "parameters": _PARAM,
                    "responses": {"200": {"description": "OK", **ref}},
                    "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk}
        paths[base] = {"get": op("list"), "post": op("post")}
        paths[base + "/{name}"] = {"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}
        if kind.has_status:
            paths[base + "/{name}/status"] = {"get": op("get"), "put": op("put"), "patch": op("patch")}
        schema = copy.deepcopy(schemas.get(kind.kind) or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
        props = schema.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string", "description": "APIVersion of this representation."})
        props.setdefault("kind", {"type": "string", "description": "Kind of this representation."})
        props.setdefault("metadata", {"type": "object", "description": "Standard object metadata."})
        schema["x-kubernetes-group-version-kind"] = [gvk]
        components[schema_name(kind)] = schema
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0-kubeemu"},
            "paths": paths, "components": {"schemas": components}}


def root_document(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for path, doc in sorted(docs.items()):
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": out}
