"""Decoding of the Kubernetes protobuf encoding for the few built-in kinds that
`kubectl create namespace|configmap|secret|serviceaccount` sends that way (kubectl's
typed clients send protobuf and do not fall back to JSON). Other kinds get 415."""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """Not a Kubernetes protobuf body this module can read."""


def _fields(data: bytes) -> dict[int, list[Any]]:
    """Wire-format fields: varints as int, length-delimited as bytes."""
    out: dict[int, list[Any]] = {}
    i = 0

    def varint() -> int:
        nonlocal i
        shift = result = 0
        while True:
            if i >= len(data):
                raise ProtobufError("truncated varint")
            b = data[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value: Any = varint()
        elif wire == 2:
            length = varint()
            value = data[i:i + length]
            i += length
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _str(fields: dict[int, list[Any]], n: int) -> str | None:
    values = fields.get(n)
    return values[-1].decode() if values else None


def _map(fields: dict[int, list[Any]], n: int, binary: bool = False) -> dict[str, str] | None:
    if n not in fields:
        return None
    out = {}
    for entry in fields[n]:
        kv = _fields(entry)
        key = (kv.get(1) or [b""])[-1].decode()
        raw = (kv.get(2) or [b""])[-1]
        out[key] = base64.b64encode(raw).decode() if binary else raw.decode()
    return out


def _meta(data: bytes) -> dict[str, Any]:
    f = _fields(data)
    meta: dict[str, Any] = {}
    for n, name in ((1, "name"), (2, "generateName"), (3, "namespace"), (6, "resourceVersion")):
        value = _str(f, n)
        if value:
            meta[name] = value
    for n, name in ((11, "labels"), (12, "annotations")):
        value = _map(f, n)
        if value:
            meta[name] = value
    if 14 in f:
        meta["finalizers"] = [v.decode() for v in f[14]]
    if 13 in f:
        refs = []
        for raw in f[13]:
            r = _fields(raw)
            ref: dict[str, Any] = {"apiVersion": _str(r, 5) or "", "kind": _str(r, 1) or "", "name": _str(r, 3) or "",
                                   "uid": _str(r, 4) or ""}
            if 6 in r:
                ref["controller"] = bool(r[6][-1])
            if 7 in r:
                ref["blockOwnerDeletion"] = bool(r[7][-1])
            refs.append(ref)
        meta["ownerReferences"] = refs
    return meta


def decode(body: bytes) -> dict[str, Any]:
    """A JSON-shaped object from a `application/vnd.kubernetes.protobuf` body."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    unknown = _fields(body[len(MAGIC):])
    type_meta = _fields((unknown.get(1) or [b""])[-1])
    api_version, kind = _str(type_meta, 1) or "", _str(type_meta, 2) or ""
    raw = _fields((unknown.get(2) or [b""])[-1])
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": _meta((raw.get(1) or [b""])[-1])}
    if api_version != "v1":
        raise ProtobufError(f"protobuf bodies are only decoded for core/v1 kinds, not {api_version}")
    if kind == "Namespace":
        if 2 in raw:
            spec = _fields(raw[2][-1])
            obj["spec"] = {"finalizers": [v.decode() for v in spec.get(1, [])]}
    elif kind == "ConfigMap":
        data, binary = _map(raw, 2), _map(raw, 3, binary=True)
        if data is not None:
            obj["data"] = data
        if binary is not None:
            obj["binaryData"] = binary
        if 4 in raw:
            obj["immutable"] = bool(raw[4][-1])
    elif kind == "Secret":
        data = _map(raw, 2, binary=True)
        if data is not None:
            obj["data"] = data
        if _str(raw, 3):
            obj["type"] = _str(raw, 3)
        string_data = _map(raw, 4)
        if string_data is not None:
            obj["stringData"] = string_data
        if 5 in raw:
            obj["immutable"] = bool(raw[5][-1])
    elif kind == "ServiceAccount":
        if 4 in raw:
            obj["automountServiceAccountToken"] = bool(raw[4][-1])
    else:
        raise ProtobufError(f"protobuf bodies are not decoded for kind {kind}; send JSON (e.g. kubectl apply)")
    return obj
