"""The `meta.k8s.io/v1` renderings a client can ask for with `Accept: ...;as=...`:
`Table` for kubectl's human-readable output (`kubectl get` without `-o`; CRD
`additionalPrinterColumns`, and a few built-in layouts), and `PartialObjectMetadata(List)`
for metadata-only lists and watches (kube-rs `metadata_watcher`)."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import kmock

from .resources import Kind


def _as(request: kmock.Request) -> str | None:
    """The `as=` parameter of the first Accept media type that has one."""
    for media in (request.headers.get("Accept") or "").split(","):
        for param in media.split(";")[1:]:
            key, _, value = param.strip().partition("=")
            if key == "as":
                return value
    return None


def wants_table(request: kmock.Request) -> bool:
    return _as(request) == "Table"


def _metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def maybe_metadata(request: kmock.Request, body: dict[str, Any], *, is_list: bool) -> dict[str, Any]:
    """The body as metadata only when the client asked for it, like a real server: a list
    as `PartialObjectMetadataList`, an object (or a watch event's object) as
    `PartialObjectMetadata`."""
    wanted = _as(request)
    if is_list and wanted == "PartialObjectMetadataList":
        return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": body["metadata"],
                "items": [_metadata_only(o) for o in body["items"]]}
    if not is_list and wanted == "PartialObjectMetadata":
        return _metadata_only(body)
    return body


def age(timestamp: str | None) -> str:
    """Real servers render `date` columns as an age: 5s, 3m, 2h, 4d."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return "<invalid>"
    seconds = int((datetime.datetime.now(datetime.timezone.utc) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 if unit != "m" else seconds >= 120:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _jsonpath(obj: Any, path: str) -> Any:
    cur = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path.strip().lstrip(".")):
        if part.startswith("["):
            idx = int(part[1:-1])
            cur = cur[idx] if isinstance(cur, list) and idx < len(cur) else None
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return None
    return cur


def _cell(value: Any, typ: str) -> Any:
    if value is None:
        return "<none>" if typ != "date" else "<unknown>"
    if typ == "date":
        return age(str(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def _pod_status(pod: dict[str, Any]) -> tuple[str, str, int]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len((pod.get("spec") or {}).get("containers") or [])
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for s in statuses:
        state = s.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason") not in (None, "ContainerCreating") \
                or "terminated" in state and status.get("phase") not in ("Running",):
            reason = (state.get("waiting") or state.get("terminated") or {}).get("reason") or reason
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    return f"{ready}/{total}", reason, restarts


def columns_and_cells(kind: Kind) -> tuple[list[dict[str, Any]], Any]:
    name_col = {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}
    age_col = {"name": "Age", "type": "string", "format": "", "description": "Age", "priority": 0}
    if kind.printer_columns:
        cols = [name_col] + [{"name": c["name"], "type": "string" if c.get("type") == "date" else c.get("type", "string"),
                              "format": c.get("format", ""), "description": c.get("description", ""),
                              "priority": int(c.get("priority", 0))} for c in kind.printer_columns]
        specs = kind.printer_columns
        return cols, lambda o: [o["metadata"]["name"]] + [_cell(_jsonpath(o, c["jsonPath"]), c.get("type", "string"))
                                                          for c in specs]
    if kind.plural == "pods" and kind.group == "":
        cols = [name_col, {**age_col, "name": "Ready", "description": "ready containers"},
                {**age_col, "name": "Status", "description": "pod status"},
                {**age_col, "name": "Restarts", "type": "integer", "description": "restarts"}, age_col]
        return cols, lambda o: [o["metadata"]["name"], *_pod_status(o), age(o["metadata"].get("creationTimestamp"))]
    if kind.plural == "namespaces":
        cols = [name_col, {**age_col, "name": "Status"}, age_col]
        return cols, lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""),
                                age(o["metadata"].get("creationTimestamp"))]
    if kind.plural == "events":
        cols = [{**age_col, "name": "Last Seen"}, {**age_col, "name": "Type"}, {**age_col, "name": "Reason"},
                {**age_col, "name": "Object"}, {**age_col, "name": "Message"}, {**name_col, "priority": 1}]

        def event_cells(o: dict[str, Any]) -> list[Any]:
            involved = o.get("involvedObject") or o.get("regarding") or {}
            when = o.get("lastTimestamp") or o.get("deprecatedLastTimestamp") or o.get("eventTime") or \
                o["metadata"].get("creationTimestamp")
            return [age(str(when)[:19] + "Z" if when else None), o.get("type", ""), o.get("reason", ""),
                    f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                    o.get("message") or o.get("note") or "", o["metadata"]["name"]]
        return cols, event_cells
    return [name_col, age_col], lambda o: [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"))]


def maybe_table(request: kmock.Request, kind: Kind, body: dict[str, Any], *, is_list: bool) -> dict[str, Any]:
    """The body as a Table when the client asked for one (`Accept: ...;as=Table`)."""
    if not wants_table(request):
        return body
    cols, cells = columns_and_cells(kind)
    include = request.params.get("includeObject", "PartialObjectMetadata")
    objects = body["items"] if is_list else [body]
    rows = []
    for obj in objects:
        if include == "Object":
            embedded: Any = obj
        elif include == "None":
            embedded = None
        else:
            embedded = _metadata_only(obj)
        row: dict[str, Any] = {"cells": cells(obj)}
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    meta = {"resourceVersion": body["metadata"].get("resourceVersion", "")}
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": cols, "rows": rows}
