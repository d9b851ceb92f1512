"""`KubeEmulator`: kmock's `KubernetesEmulator` extended with the API semantics that
controllers (kube-rs `Controller`, kubectl) rely on. README.md lists them precisely."""

from __future__ import annotations

import asyncio
import bisect
import copy
import datetime
import json
import random
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import parsing as kmock_parsing  # pinned kmock==0.8

from . import errors, openapi, patching, protobuf, resources, selectors, tables
from .errors import ApiError
from .resources import Kind

ArrayKey = tuple[kmock.resource, "str | None", str]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MERGE_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_CORE_EVENTS = kmock.resource("", "v1", "events")
_NEW_EVENTS = kmock.resource("events.k8s.io", "v1", "events")
_CRDS = kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
_NAMESPACES = kmock.resource("", "v1", "namespaces")
_PODS = kmock.resource("", "v1", "pods")
_SECRETS = kmock.resource("", "v1", "secrets")
_SERVICEACCOUNTS = kmock.resource("", "v1", "serviceaccounts")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def now_rfc3339(offset_seconds: float = 0.0) -> str:
    """Seconds-precision UTC timestamp, as `metav1.Time` serialises."""
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _res(kind: Kind) -> kmock.resource:
    return kmock.resource(kind.group, kind.version, kind.plural)


@dataclass(frozen=True)
class Record:
    """One change in the store: the event log behind watches and `resourceVersion`."""

    rv: int
    res: kmock.resource
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


@dataclass
class Fault:
    """An injected API failure: requests matching `method` and `path` get `status`."""

    method: str
    path: re.Pattern[str]
    status: int
    reason: str
    message: str
    remaining: int | None  # None: forever

    def matches(self, method: str, path: str) -> bool:
        return (self.method in ("*", method.upper())) and bool(self.path.search(path)) and self.remaining != 0


@dataclass(frozen=True)
class Target:
    """A parsed API path."""

    group: str | None
    version: str | None
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    root: str = "apis"


def parse_api_path(path: str) -> Target | None:
    """Split `/api(s)/...` paths; `None` for anything else."""
    segs = [s for s in path.strip("/").split("/") if s]
    if not segs or segs[0] not in ("api", "apis"):
        return None
    if segs[0] == "api":
        group, rest = "", segs[1:]
        if not rest:
            return Target(None, None, root="api")
        version, rest = rest[0], rest[1:]
    else:
        if len(segs) == 1:
            return Target(None, None)
        group = segs[1]
        if len(segs) == 2:
            return Target(group, None)
        version, rest = segs[2], segs[3:]
    namespace = None
    if rest and rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return Target(group, version)
    return Target(group, version, rest[0], namespace, rest[1] if len(rest) > 1 else None, "/".join(rest[2:]) or None)


def _json(body: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    """An in-memory Kubernetes API server good enough for controllers and kubectl.

    Requests answered by reactions added with the kmock DSL (`emu['...'] << ...`, any
    priority above kmock's `fallback`) never reach the emulator's store.
    """

    require_namespaces: bool = True
    history_limit: int = 4
    event_log_limit: int = 10000
    request_log_limit: int = 2000
    gc_delay: float = 0.05
    bookmark_interval: float = 30.0
    server_minor: str = "33"
    node_name: str = "kubeemu-node"

    _kinds: dict[kmock.resource, Kind] = attrs.field(factory=dict, init=False)
    _crd_kinds: dict[str, list[Kind]] = attrs.field(factory=dict, init=False)
    _rv: int = attrs.field(default=0, init=False)
    _log: list[Record] = attrs.field(factory=list, init=False)
    _log_floor: int = attrs.field(default=0, init=False)
    _changed: asyncio.Event | None = attrs.field(default=None, init=False)
    _uids: dict[str, ArrayKey] = attrs.field(factory=dict, init=False)
    _gc_wakeup: asyncio.Event | None = attrs.field(default=None, init=False)
    _gc_task: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _faults: list[Fault] = attrs.field(factory=list, init=False)
    _closing: bool = attrs.field(default=False, init=False)

    # Hooks for the kubelet: graceful pod deletion, `pods/log`, control endpoints.
    pod_is_running: Callable[[dict[str, Any]], bool] | None = attrs.field(default=None, init=False)
    pod_log: Callable[[str, str, str | None, bool], Awaitable[bytes] | Any] | None = attrs.field(default=None, init=False)
    control_handlers: dict[str, Callable[[str, str, str, dict[str, Any]], Awaitable[dict[str, Any]]]] = \
        attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for kind in resources.BUILTIN_KINDS:
            self.register(kind)
        for ns in DEFAULT_NAMESPACES:
            self.create_object(self.kind_of("", "v1", "namespaces"), None, {"metadata": {"name": ns}})

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> "KubeEmulator":
        await super().__aenter__()
        self._gc_wakeup = asyncio.Event()
        self._gc_task = asyncio.create_task(self._gc_loop())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._gc_task is not None:
            self._gc_task.cancel()
            try:
                await self._gc_task
            except asyncio.CancelledError:
                pass
            self._gc_task = None
        await super().__aexit__(*exc)

    # ------------------------------------------------------------------ kinds

    def register(self, kind: Kind) -> None:
        """Serve a kind (built-in or custom); also visible in kmock's `resources`."""
        res = _res(kind)
        self._kinds[res] = kind
        self.resources[res] = kmock.ResourceInfo(
            namespaced=kind.namespaced, kind=kind.kind, singular=kind.singular, verbs=set(resources.VERBS),
            shortnames=set(kind.short_names), categories=set(kind.categories), subresources=set(kind.subresources))

    def register_crd(self, crd: dict[str, Any]) -> list[Kind]:
        """Create (or update) a `CustomResourceDefinition` object and serve its kinds."""
        crd_kind = self.kind_of("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        name = crd["metadata"]["name"]
        body = copy.deepcopy(crd)
        current = self.get_object(crd_kind, None, name)
        if current is None:
            self.create_object(crd_kind, None, body)
        else:
            body["metadata"] = current["metadata"]
            self.replace_object(crd_kind, None, name, body)
        return self._crd_kinds.get(name, [])

    def kind_of(self, group: str, version: str, plural: str) -> Kind:
        kind = self._lookup(group, version, plural)
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return kind

    def _lookup(self, group: str, version: str, plural: str) -> Kind | None:
        res = kmock.resource(group, version, plural)
        kind = self._kinds.get(res)
        if kind is None and res in self.resources:  # declared through kmock's own API
            info = self.resources[res]
            kind = Kind(group, version, plural, info.kind or plural.capitalize().rstrip("s"),
                        namespaced=info.namespaced is not False, singular=info.singular or "",
                        short_names=tuple(info.shortnames), categories=tuple(info.categories),
                        subresources=frozenset(info.subresources))
            self._kinds[res] = kind
        return kind

    def kinds(self) -> list[Kind]:
        return list(self._kinds.values())

    @staticmethod
    def _storage(kind: Kind) -> kmock.resource:
        """events.k8s.io/v1 events are stored as core/v1 events, like the real server does."""
        res = _res(kind)
        return _CORE_EVENTS if res == _NEW_EVENTS else res

    def _to_view(self, kind: Kind, stored: dict[str, Any] | None) -> dict[str, Any] | None:
        if stored is None:
            return None
        if _res(kind) == _NEW_EVENTS:
            return _core_event_to_new(stored)
        return stored

    def _from_view(self, kind: Kind, view: dict[str, Any]) -> dict[str, Any]:
        if _res(kind) == _NEW_EVENTS:
            return _new_event_to_core(view)
        return view

    # ------------------------------------------------------------------ store primitives

    def _key(self, kind: Kind, namespace: str | None, name: str) -> ArrayKey:
        return (self._storage(kind), namespace if kind.namespaced else None, name)

    def _current(self, key: ArrayKey) -> dict[str, Any] | None:
        if key not in self._objects:
            return None
        obj = self._objects[key]
        return None if obj.deleted else obj.raw

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _commit(self, key: ArrayKey, kind_type: str, new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        rv = self._next_rv()
        new = copy.deepcopy(new)
        new.setdefault("metadata", {})["resourceVersion"] = str(rv)
        if kind_type == "DELETED":
            self._objects[key].history.append(new)
            self._objects[key].delete()
            self._uids.pop(new["metadata"].get("uid", ""), None)
        elif key in self._objects:
            self._objects[key].history.append(new)
        else:
            self._objects[key] = new
        if kind_type == "ADDED":
            self._uids[new["metadata"]["uid"]] = key
        history = self._objects[key].history
        if len(history) > self.history_limit:
            del history[: len(history) - self.history_limit]
        self._log.append(Record(rv, key[0], kind_type, new, old))
        if len(self._log) > self.event_log_limit * 5 // 4:
            cut = len(self._log) - self.event_log_limit
            self._log_floor = self._log[cut - 1].rv
            del self._log[:cut]
        self._notify()
        meta = new["metadata"]
        # A collector pass scans every object: wake it only when something may be
        # collectable (an object went, one is being deleted, or one names an owner
        # that does not exist), not on every status write of an owned object.
        if (kind_type == "DELETED" or meta.get("deletionTimestamp")
                or any(r.get("uid") not in self._uids for r in meta.get("ownerReferences") or [])):
            self._wake_gc()
        return new

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def _wake_gc(self) -> None:
        if self._gc_wakeup is not None:
            self._gc_wakeup.set()

    def records_after(self, rv: int) -> list[Record]:
        """Changes with a resourceVersion above `rv` (raises 410 Expired if forgotten)."""
        if rv < self._log_floor:
            raise errors.gone(f"too old resource version: {rv} ({self._log_floor + 1})")
        idx = bisect.bisect_right(self._log, rv, key=lambda r: r.rv)
        return self._log[idx:]

    def close_watches(self) -> None:
        """End every open watch stream now, and every later one right after its first
        events: at shutdown an open stream would keep the HTTP server waiting for it
        (aiohttp waits for running handlers before closing their connections)."""
        self._closing = True
        self._notify()

    async def wait_for_change(self, timeout: float) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    @property
    def resource_version(self) -> int:
        return self._rv

    def objects_of(self, kind: Kind, namespace: str | None = None) -> list[dict[str, Any]]:
        """Current objects of a kind (views), sorted by namespace and name like etcd keys."""
        storage = self._storage(kind)
        found = []
        for (res, ns, name), obj in self._objects.items():
            if res == storage and (namespace is None or ns == namespace) and not obj.deleted:
                found.append(((ns or "", name), obj.raw))
        found.sort(key=lambda item: item[0])
        # Decided once per list, not per object: building a resource reference is
        # costly and lists of thousands of objects are served often.
        if _res(kind) != _NEW_EVENTS:
            return [raw for _, raw in found]
        return [_core_event_to_new(raw) for _, raw in found]

    # ------------------------------------------------------------------ semantic operations

    def get_object(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._to_view(kind, self._current(self._key(kind, namespace, name)))

    def create_object(self, kind: Kind, namespace: str | None, body: Any, *, dry_run: bool = False,
                      field_manager: str | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        view = copy.deepcopy(body)
        self._check_type(kind, view)
        meta = view.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        namespace = self._resolve_namespace(kind, namespace, meta)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        name = meta.get("name")
        if not name:
            if meta.get("generateName"):
                for _ in range(20):
                    name = meta["generateName"] + "".join(random.choice(_GENERATE_ALPHABET) for _ in range(5))
                    if self._current(self._key(kind, namespace, name)) is None:
                        break
                meta["name"] = name
            else:
                raise errors.invalid(kind.kind, kind.group, "", [("metadata.name", "Required value: name or generateName is required")])
        self._validate_name(kind, name)
        if kind.namespaced and self.require_namespaces and not (kind.plural == "events"):
            ns_obj = self._current((_NAMESPACES, None, namespace))
            if ns_obj is None:
                raise errors.not_found("namespaces", "", namespace)
            if ns_obj["metadata"].get("deletionTimestamp"):
                raise ApiError(403, "Forbidden", f"{kind.plural} \"{name}\" is forbidden: unable to create new content "
                               f"in namespace {namespace} because it is being terminated")
        key = self._key(kind, namespace, name)
        if self._current(key) is not None:
            raise errors.already_exists(kind.plural, kind.group, name)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "uid", "creationTimestamp", "generation"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        if kind.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        stored = self._from_view(kind, view)
        self._prepare_builtin(key[0], stored, None)
        if kind.has_status and not kind.builtin:
            stored.pop("status", None)  # CRDs with a status subresource drop status on create
        if field_manager is not None and not stored["metadata"].get("managedFields"):
            self._record_update(kind, None, stored, field_manager, None)
        self._validate(kind, stored)
        if dry_run:
            stored["metadata"]["resourceVersion"] = str(self._rv)
            return self._to_view(kind, stored)  # type: ignore[return-value]
        committed = self._commit(key, "ADDED", stored, None)
        self._after_create(kind, committed)
        return self._to_view(kind, committed)  # type: ignore[return-value]

    def replace_object(self, kind: Kind, namespace: str | None, name: str, body: Any, *, subresource: str | None = None,
                       dry_run: bool = False, field_manager: str | None = None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        self._check_type(kind, body)
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if kind.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        key = self._key(kind, namespace, name)
        current = self._current(key)
        if current is None:
            raise errors.not_found(kind.plural, kind.group, name)
        if not meta.get("resourceVersion") and not kind.builtin:
            raise errors.invalid(kind.kind, kind.group, name,
                                 [("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")])
        return self._update(kind, key, current, self._from_view(kind, copy.deepcopy(body)), subresource, dry_run,
                            field_manager)

    def patch_object(self, kind: Kind, namespace: str | None, name: str, body: bytes | Any, content_type: str, *,
              subresource: str | None = None, field_manager: str | None = None, force: bool = False,
              dry_run: bool = False) -> dict[str, Any]:
        ptype = _MERGE_TYPES.get(content_type.split(";")[0].strip().lower())
        if ptype is None:
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted "
                           f"media types include: {', '.join(_MERGE_TYPES)}")
        if ptype == "strategic" and not kind.builtin:
            raise ApiError(415, "UnsupportedMediaType",
                           "strategic merge patch is not supported for custom resources; use a merge or JSON patch")
        patch_doc = _decode(body, yaml_ok=(ptype == "apply"))
        key = self._key(kind, namespace, name)
        current = self._current(key)
        if ptype == "apply":
            return self._apply(kind, key, namespace, name, current, patch_doc, subresource, field_manager, force, dry_run)
        if current is None:
            raise errors.not_found(kind.plural, kind.group, name)
        view = self._to_view(kind, current)
        try:
            if ptype == "json":
                patched = patching.json_patch(view, patch_doc)  # type: ignore[arg-type]
            elif ptype == "merge":
                if not isinstance(patch_doc, dict):
                    raise patching.PatchError("a merge patch must be an object")
                patched = patching.merge_patch(view, patch_doc)
            else:
                patched = patching.strategic_merge_patch(view, patch_doc)  # type: ignore[arg-type]
        except patching.PatchError as e:
            raise errors.invalid(kind.kind, kind.group, name, [("patch", str(e))]) from e
        return self._update(kind, key, current, self._from_view(kind, patched), subresource, dry_run, field_manager)

    def _apply(self, kind: Kind, key: ArrayKey, namespace: str | None, name: str, current: dict[str, Any] | None,
               applied: Any, subresource: str | None, field_manager: str | None, force: bool,
               dry_run: bool) -> dict[str, Any]:
        """Server-side apply with field ownership: conflicts with other managers (409)
        unless forced, removal of fields this manager stopped applying."""
        if not field_manager:
            raise errors.bad_request("PATCH requests with apply content type require a fieldManager")
        if not isinstance(applied, dict):
            raise errors.bad_request("an apply configuration must be an object")
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise errors.bad_request("invalid object: apiVersion and kind must be set in an apply configuration")
        self._check_type(kind, applied)
        meta = applied.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        fields = patching.fields_v1(applied)
        if subresource == "status":
            fields = {k: v for k, v in fields.items() if k == "f:status"}
        elif kind.has_status:
            fields.pop("f:status", None)
        applied_leaves = patching.leaves(fields)

        def entry(time_: str) -> dict[str, Any]:
            out = {"manager": field_manager, "operation": "Apply", "apiVersion": kind.api_version,
                   "time": time_, "fieldsType": "FieldsV1", "fieldsV1": fields}
            if subresource:
                out["subresource"] = subresource
            return out

        if current is None:
            if subresource:
                raise errors.not_found(kind.plural, kind.group, name)
            body = copy.deepcopy(applied)
            body.setdefault("metadata", {})["name"] = name
            body["metadata"]["managedFields"] = [entry(now_rfc3339())]
            return self.create_object(kind, namespace, body, dry_run=dry_run)
        view = self._to_view(kind, current)
        assert view is not None
        entries = list(current["metadata"].get("managedFields") or [])

        def mine(e: dict[str, Any]) -> bool:
            return (e.get("manager"), e.get("operation"), e.get("subresource")) == \
                (field_manager, "Apply", subresource)
        differs = {p for p in applied_leaves if patching.get_path(view, p) != patching.get_path(applied, p)}
        if not force:
            conflicts = sorted({(e.get("manager", ""), p) for e in entries if e.get("manager") != field_manager
                                for p in differs & patching.leaves(e.get("fieldsV1") or {})})
            if conflicts:
                lines = "\n".join(f'- conflict with "{m}": .{".".join(seg[2:] for seg in p)}' for m, p in conflicts)
                raise ApiError(409, "Conflict", f"Apply failed with {len(conflicts)} conflict"
                               f"{'s' if len(conflicts) > 1 else ''}:\n{lines}",
                               {"name": name, "group": kind.group, "kind": kind.plural,
                                "causes": [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}"',
                                            "field": "." + ".".join(seg[2:] for seg in p)} for m, p in conflicts]})
        merged = patching.apply_merge(view, applied, kind.builtin)
        previous = set().union(*[patching.leaves(e.get("fieldsV1") or {}) for e in entries if mine(e)])
        others = set().union(*[patching.leaves(e.get("fieldsV1") or {}) for e in entries if not mine(e)])
        for path in previous - applied_leaves - others:
            patching.delete_path(merged, path)
        def managed(time_: str | None) -> list[dict[str, Any]]:
            out, placed = [], False
            for e in entries:
                if mine(e):
                    unchanged = patching.leaves(e.get("fieldsV1") or {}) == applied_leaves
                    # Unchanged ownership keeps its time, so that a no-op apply is a no-op.
                    out.append(entry(e.get("time", now_rfc3339()) if unchanged and time_ is None else
                                     time_ or now_rfc3339()))
                    placed = True
                    continue
                owned = patching.leaves(e.get("fieldsV1") or {})
                if force:
                    owned -= differs  # forced: ownership moves to the applier
                if owned:
                    out.append({**e, "fieldsV1": patching.to_fields_v1(owned)})
            if not placed:
                out.append(entry(time_ or now_rfc3339()))
            return out
        merged.setdefault("metadata", {})["resourceVersion"] = meta.get("resourceVersion") or current["metadata"]["resourceVersion"]
        merged["metadata"]["managedFields"] = managed(None)
        candidate = self._from_view(kind, merged)
        preview = self._update(kind, key, current, candidate, subresource, True)
        if preview == view or dry_run:  # a no-op apply changes nothing, not even managedFields
            return preview
        candidate["metadata"]["managedFields"] = managed(now_rfc3339())
        return self._update(kind, key, current, candidate, subresource, False)

    def _update(self, kind: Kind, key: ArrayKey, current: dict[str, Any], proposed: dict[str, Any],
                subresource: str | None, dry_run: bool, manager: str | None = None) -> dict[str, Any]:
        """Common rules of PUT, PATCH and apply; a no-op changes nothing and emits nothing."""
        name = key[2]
        if subresource not in (None, "status") or (subresource == "status" and not kind.has_status):
            raise errors.not_found(kind.plural, kind.group, name)
        cmeta = current["metadata"]
        pmeta = proposed.get("metadata") if isinstance(proposed.get("metadata"), dict) else {}
        prv = pmeta.get("resourceVersion")
        if prv not in (None, "") and str(prv) != cmeta["resourceVersion"]:
            raise errors.conflict(kind.plural, kind.group, name)
        if kind.has_status and subresource == "status":
            new = copy.deepcopy(current)
            if "status" in proposed:
                new["status"] = copy.deepcopy(proposed["status"])
            else:
                new.pop("status", None)
            if "managedFields" in pmeta:
                new["metadata"]["managedFields"] = copy.deepcopy(pmeta["managedFields"])
        else:
            new = copy.deepcopy(proposed)
            new["metadata"] = copy.deepcopy(pmeta)
            if kind.has_status:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
        meta = new["metadata"]
        for field in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation", "resourceVersion"):
            if field in cmeta:
                meta[field] = cmeta[field]
            else:
                meta.pop(field, None)
        if "managedFields" not in meta and "managedFields" in cmeta:
            meta["managedFields"] = cmeta["managedFields"]
        if meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(cmeta.get("finalizers") or [])
            if added:
                raise errors.invalid(kind.kind, kind.group, name, [
                    ("metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being deleted")])
        self._prepare_builtin(key[0], new, current)
        new["apiVersion"] = current.get("apiVersion", new.get("apiVersion"))
        new["kind"] = current.get("kind", new.get("kind"))
        if _spec_part(new) != _spec_part(current):
            meta["generation"] = int(cmeta.get("generation", 1)) + 1
        if manager is not None:
            self._record_update(kind, current, new, manager, subresource)
        self._validate(kind, new)
        if new == current:
            return self._to_view(kind, current)  # type: ignore[return-value]
        if dry_run:
            return self._to_view(kind, new)  # type: ignore[return-value]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not self._held_by_runtime(key, new):
            committed = self._commit(key, "DELETED", new, current)
            self._after_delete(kind, committed)
            return self._to_view(kind, committed)  # type: ignore[return-value]
        return self._to_view(kind, self._commit(key, "MODIFIED", new, current))  # type: ignore[return-value]

    def _record_update(self, kind: Kind, current: dict[str, Any] | None, new: dict[str, Any], manager: str,
                       subresource: str | None) -> None:
        """Ownership of a non-apply write: the writer owns what it changed, others lose it."""
        changed = patching.changed_leaves(current or {}, new)
        entries = []
        for e in (new["metadata"].get("managedFields") or []):
            owned = {p for p in patching.leaves(e.get("fieldsV1") or {}) - changed
                     if patching.get_path(new, p) is not None}
            if owned:
                entries.append({**e, "fieldsV1": patching.to_fields_v1(owned)})
        if changed:
            mine = next((e for e in entries if (e.get("manager"), e.get("operation"), e.get("subresource"))
                         == (manager, "Update", subresource)), None)
            owned = changed | (patching.leaves(mine["fieldsV1"]) if mine else set())
            if mine is not None:
                entries.remove(mine)
            entry = {"manager": manager, "operation": "Update", "apiVersion": kind.api_version,
                     "time": now_rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": patching.to_fields_v1(owned)}
            if subresource:
                entry["subresource"] = subresource
            entries.append(entry)
        if entries:
            new["metadata"]["managedFields"] = entries
        else:
            new["metadata"].pop("managedFields", None)

    def delete_object(self, kind: Kind, namespace: str | None, name: str, options: dict[str, Any] | None = None, *,
               dry_run: bool = False) -> dict[str, Any]:
        options = options or {}
        key = self._key(kind, namespace, name)
        current = self._current(key)
        if current is None:
            raise errors.not_found(kind.plural, kind.group, name)
        meta = current["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(kind.plural, kind.group, name,
                                  f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise errors.conflict(kind.plural, kind.group, name,
                                  f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {meta.get('resourceVersion')}")
        if dry_run:
            return self._to_view(kind, current)  # type: ignore[return-value]
        grace = options.get("gracePeriodSeconds")
        new = copy.deepcopy(current)
        nmeta = new["metadata"]
        if meta.get("deletionTimestamp"):
            # Already being deleted; a zero grace period forces out a pod the kubelet still holds.
            if key[0] == _PODS and grace == 0 and not meta.get("finalizers"):
                committed = self._commit(key, "DELETED", new, current)
                return self._to_view(kind, committed)  # type: ignore[return-value]
            return self._to_view(kind, current)  # type: ignore[return-value]
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is True:
            policy = "Orphan"
        finalizers = list(nmeta.get("finalizers") or [])
        has_dependents = any(meta.get("uid") == ref.get("uid") for dep in self._all_current()
                             for ref in (dep["metadata"].get("ownerReferences") or []))
        if policy == "Foreground" and has_dependents and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if policy == "Orphan" and has_dependents and "orphan" not in finalizers:
            finalizers.append("orphan")
        if finalizers:
            nmeta["finalizers"] = finalizers
        if key[0] == _PODS and self.pod_is_running is not None and self.pod_is_running(current) and grace != 0:
            seconds = int(grace if grace is not None else new.get("spec", {}).get("terminationGracePeriodSeconds", 30))
            nmeta["deletionTimestamp"] = now_rfc3339(seconds)
            nmeta["deletionGracePeriodSeconds"] = seconds
            return self._to_view(kind, self._commit(key, "MODIFIED", new, current))  # type: ignore[return-value]
        if finalizers or key[0] == _NAMESPACES:
            nmeta["deletionTimestamp"] = now_rfc3339()
            nmeta["deletionGracePeriodSeconds"] = 0
            nmeta["generation"] = int(meta.get("generation", 1)) + 1
            if key[0] == _NAMESPACES:
                new.setdefault("status", {})["phase"] = "Terminating"
            return self._to_view(kind, self._commit(key, "MODIFIED", new, current))  # type: ignore[return-value]
        committed = self._commit(key, "DELETED", new, current)
        self._after_delete(kind, committed)
        return self._to_view(kind, committed)  # type: ignore[return-value]

    def list_objects(self, kind: Kind, namespace: str | None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict[str, Any]:
        match = selectors.combined(label_selector, field_selector)
        items = []
        for obj in self.objects_of(kind, namespace if kind.namespaced else None):
            if match(obj):
                items.append(obj)
        return {"kind": kind.list_kind, "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    # ------------------------------------------------------------------ kind-specific behaviour

    def _all_current(self) -> list[dict[str, Any]]:
        return [obj.raw for obj in self._objects.values() if not obj.deleted]

    def _held_by_runtime(self, key: ArrayKey, obj: dict[str, Any]) -> bool:
        """A pod being deleted stays until its kubelet has stopped it."""
        return key[0] == _PODS and self.pod_is_running is not None and self.pod_is_running(obj)

    def _check_type(self, kind: Kind, body: dict[str, Any]) -> None:
        api_version, k = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != kind.api_version:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                                     f"version ({kind.api_version})")
        if k and k != kind.kind:
            raise errors.bad_request(f"the kind in the data ({k}) does not match the expected kind ({kind.kind})")
        body["apiVersion"], body["kind"] = kind.api_version, kind.kind

    def _resolve_namespace(self, kind: Kind, namespace: str | None, meta: dict[str, Any]) -> str | None:
        if not kind.namespaced:
            return None
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        ns = namespace or body_ns
        if not ns:
            raise errors.bad_request("a namespace must be given for a namespaced resource")
        return ns

    def _validate_name(self, kind: Kind, name: str) -> None:
        pattern = _DNS_LABEL if kind.plural == "namespaces" else _DNS_SUBDOMAIN
        limit = 63 if kind.plural == "namespaces" else 253
        if len(name) > limit or not pattern.match(name):
            raise errors.invalid(kind.kind, kind.group, name, [
                ("metadata.name", f"Invalid value: \"{name}\": a lowercase RFC 1123 "
                 f"{'label' if limit == 63 else 'subdomain'} must consist of lower case alphanumeric characters, "
                 "'-' or '.', and must start and end with an alphanumeric character")])

    def _validate(self, kind: Kind, obj: dict[str, Any]) -> None:
        name = obj["metadata"].get("name", "")
        causes: list[tuple[str, str]] = []
        for field in ("labels", "annotations"):
            value = obj["metadata"].get(field)
            if value is not None and (not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())):
                causes.append((f"metadata.{field}", "Invalid value: values must be strings"))
        if kind.plural == "pods" and kind.group == "":
            containers = (obj.get("spec") or {}).get("containers")
            if not containers:
                causes.append(("spec.containers", "Required value"))
            for i, c in enumerate(containers or []):
                if not isinstance(c, dict) or not c.get("name"):
                    causes.append((f"spec.containers[{i}].name", "Required value"))
                elif not c.get("image"):
                    causes.append((f"spec.containers[{i}].image", "Required value"))
        if kind.plural == "customresourcedefinitions":
            try:
                resources.kinds_from_crd(obj)
            except (KeyError, TypeError) as e:
                causes.append(("spec", f"Required value: {e}"))
        if causes:
            raise errors.invalid(kind.kind, kind.group, name, causes)

    def _prepare_builtin(self, res: kmock.resource, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
        if res == _SECRETS and not obj.get("type"):
            obj["type"] = "Opaque"
        if res == _SECRETS and isinstance(obj.get("stringData"), dict):
            import base64
            data = dict(obj.get("data") or {})
            for k, v in obj.pop("stringData").items():
                data[k] = base64.b64encode(str(v).encode()).decode()
            obj["data"] = data
        if res == _PODS:
            spec = obj.setdefault("spec", {})
            if current is None:
                spec.setdefault("restartPolicy", "Always")
                spec.setdefault("terminationGracePeriodSeconds", 30)
                spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
                spec.setdefault("dnsPolicy", "ClusterFirst")
                obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        if res == _NAMESPACES and current is None:
            obj["status"] = {"phase": "Active"}
            spec = obj.setdefault("spec", {})
            if not spec.get("finalizers"):
                spec["finalizers"] = ["kubernetes"]
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        if res == _CRDS:
            obj["status"] = {
                "acceptedNames": copy.deepcopy((obj.get("spec") or {}).get("names") or {}),
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": now_rfc3339()},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": now_rfc3339()},
                ],
                "storedVersions": [v["name"] for v in (obj.get("spec") or {}).get("versions") or [] if v.get("storage")],
            }
            if current is not None and current.get("status", {}).get("conditions"):
                obj["status"]["conditions"] = current["status"]["conditions"]

    def _after_create(self, kind: Kind, obj: dict[str, Any]) -> None:
        res = _res(kind)
        if res == _NAMESPACES:
            sa_kind = self._kinds[_SERVICEACCOUNTS]
            ns = obj["metadata"]["name"]
            if self.get_object(sa_kind, ns, "default") is None:
                self.create_object(sa_kind, ns, {"metadata": {"name": "default"}})
        if res == _CRDS:
            self._sync_crd(obj)

    def _sync_crd(self, crd: dict[str, Any]) -> None:
        name = crd["metadata"]["name"]
        kinds = resources.kinds_from_crd(crd)
        for old in self._crd_kinds.get(name, []):
            if all(_res(old) != _res(k) for k in kinds):
                self._kinds.pop(_res(old), None)
        for k in kinds:
            self.register(k)
        self._crd_kinds[name] = kinds

    def _after_delete(self, kind: Kind, obj: dict[str, Any]) -> None:
        if _res(kind) == _CRDS:
            name = obj["metadata"]["name"]
            for k in self._crd_kinds.pop(name, []):
                for dep in self.objects_of(k):
                    key = self._key(k, dep["metadata"].get("namespace"), dep["metadata"]["name"])
                    self._commit(key, "DELETED", dep, dep)
                self._kinds.pop(_res(k), None)
                if _res(k) in self.resources:
                    del self.resources[_res(k)]

    # ------------------------------------------------------------------ garbage collection

    async def _gc_loop(self) -> None:
        assert self._gc_wakeup is not None
        while True:
            await self._gc_wakeup.wait()
            self._gc_wakeup.clear()
            await asyncio.sleep(self.gc_delay)
            try:
                self.collect_garbage()
            except Exception as e:  # keep collecting after a bad object; surface it to tests
                self._errors[-1].append(e) if self._errors else None

    def _kind_for_res(self, res: kmock.resource) -> Kind | None:
        return self._kinds.get(res)

    def collect_garbage(self) -> None:
        """One pass of the garbage collector and the namespace controller (also run in the background)."""
        for _ in range(5):
            changed = False
            objects = [(key, obj.raw) for key, obj in list(self._objects.items()) if not obj.deleted]
            dependents: dict[str, list[tuple[ArrayKey, dict[str, Any]]]] = {}
            for key, raw in objects:
                for ref in raw["metadata"].get("ownerReferences") or []:
                    dependents.setdefault(ref.get("uid", ""), []).append((key, raw))
            for key, _ in objects:
                kind = self._kind_for_res(key[0])
                raw = self._current(key)  # earlier steps of this pass may have changed it
                if kind is None or raw is None:
                    continue
                meta = raw["metadata"]
                refs = meta.get("ownerReferences") or []
                if refs and not meta.get("deletionTimestamp"):
                    owners = [self._current(self._uids[r["uid"]]) if r.get("uid") in self._uids else None for r in refs]
                    alive = [o for o in owners if o is not None]
                    foreground = any("foregroundDeletion" in (o["metadata"].get("finalizers") or []) for o in alive)
                    if not alive or foreground:
                        self.delete_object(kind, key[1], key[2], {"propagationPolicy": "Foreground" if foreground else "Background"})
                        changed = True
                        continue
                    if len(alive) < len(refs):
                        keep = [r for r in refs if r.get("uid") in self._uids]
                        self._update(kind, key, raw, {**raw, "metadata": {**meta, "ownerReferences": keep}}, None, False)
                        changed = True
                        continue
                if meta.get("deletionTimestamp"):
                    fins = list(meta.get("finalizers") or [])
                    uid = meta.get("uid", "")
                    if "orphan" in fins:
                        for dkey, draw in dependents.get(uid, []):
                            dkind = self._kind_for_res(dkey[0])
                            current = self._current(dkey)
                            if dkind is None or current is None:
                                continue
                            keep = [r for r in current["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                            new = copy.deepcopy(current)
                            if keep:
                                new["metadata"]["ownerReferences"] = keep
                            else:
                                new["metadata"].pop("ownerReferences", None)
                            self._update(dkind, dkey, current, new, None, False)
                        fins.remove("orphan")
                    if "foregroundDeletion" in fins:
                        if not any(self._current(dkey) is not None for dkey, _ in dependents.get(uid, [])):
                            fins.remove("foregroundDeletion")
                    if key[0] == _NAMESPACES:
                        ns = key[2]
                        content = [(k, r) for k, r in objects if k[1] == ns and k[0] != _NAMESPACES]
                        for ckey, craw in content:
                            ckind = self._kind_for_res(ckey[0])
                            if ckind is not None and not craw["metadata"].get("deletionTimestamp"):
                                self.delete_object(ckind, ckey[1], ckey[2])
                        if not any(self._current(ckey) is not None for ckey, _ in content):
                            new = copy.deepcopy(raw)
                            new.setdefault("spec", {})["finalizers"] = []
                            if not fins:
                                self._commit(key, "DELETED", new, raw)
                                changed = True
                                continue
                    if fins != list(meta.get("finalizers") or []):
                        current = self._current(key)
                        if current is not None:
                            new = copy.deepcopy(current)
                            new["metadata"]["finalizers"] = fins
                            self._update(kind, key, current, new, None, False)
                            changed = True
            if not changed:
                return

    # ------------------------------------------------------------------ HTTP

    def add_fault(self, method: str, path: str, status: int = 500, reason: str = "InternalError",
                  message: str = "injected failure", count: int | None = 1) -> Fault:
        """Fail matching requests (regex on the path) before they reach the store."""
        fault = Fault(method.upper(), re.compile(path), status, reason, message, count)
        self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        self._faults.clear()

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock 0.8's request parser fails on some valid paths (`/api/v1/namespaces`), so
        # requests it cannot parse are recorded without kmock's Kubernetes fields; the
        # emulator parses paths itself (`parse_api_path`).
        try:
            kmock_parsing.parse_path(raw_request.path)
        except ValueError:
            pass
        else:
            return await super().__call__(raw_request)
        body = await raw_request.read()
        request = kmock.Request(id=len(self._requests), raw_request=raw_request, url=raw_request.url,
                                method=raw_request.method, params=dict(raw_request.query),
                                headers=dict(raw_request.headers), body=body, text=body.decode(errors="replace"))
        self._requests.append(request)
        try:
            return await self._handle(request)
        except Exception as e:
            if self._errors:
                self._errors[-1].append(e)
            return await self._render_error(e)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        if len(self._requests) > self.request_log_limit * 2:
            del self._requests[: len(self._requests) - self.request_log_limit]
        path = request.url.path
        method = str(request.method.value).upper()
        for fault in self._faults:
            if fault.matches(method, path):
                if fault.remaining is not None:
                    fault.remaining -= 1
                return _json(ApiError(fault.status, fault.reason, fault.message).status(), fault.status)
        user = await self._user_reaction(request)
        if user is not None:
            return user
        try:
            if path.startswith("/kubeemu/"):
                return await self._serve_control(request, path, method)
            if path in ("/healthz", "/livez", "/readyz"):
                return aiohttp.web.Response(text="ok")
            if path == "/version":
                return _json({"major": "1", "minor": self.server_minor, "gitVersion": f"v1.{self.server_minor}.0-kubeemu",
                              "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
                              "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"})
            target = parse_api_path(path)
            if target is not None:
                return await self._serve_api(request, target, method)
            if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
                return _json(self._openapi(path[len("/openapi/v3"):].strip("/")))
            if path.startswith("/openapi/"):
                raise ApiError(404, "NotFound", "the server could not find the requested resource (OpenAPI is not served)")
        except ApiError as e:
            return _json(e.status(), e.code)
        return await super()._handle(request)

    async def _user_reaction(self, request: kmock.Request) -> aiohttp.web.StreamResponse | None:
        """Reactions added with kmock's DSL win over the emulator (fault injection, overrides)."""
        payloads = [p for p in self._payloads if all(abs(x) != float("inf") for x in p.priorities)]
        payloads.sort(key=lambda p: tuple(-x for x in p.priorities))
        for payload in payloads:
            if request in payload._source and not payload._disabled.is_set():
                try:
                    return await payload(request)
                except kmock.ReactionMismatchError:
                    payload._disabled.set()
                except NotImplementedError:
                    pass
        return None

    async def _serve_api(self, request: kmock.Request, t: Target, method: str) -> aiohttp.web.StreamResponse:
        if t.plural is None:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            return _json(self._discovery(t))
        kind = self.kind_of(t.group or "", t.version or "", t.plural)
        if t.namespace and not kind.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        params = request.params
        dry_run = bool(params.get("dryRun"))
        content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        body: Any = request.body
        if method in ("POST", "PUT") and body and content_type == "application/vnd.kubernetes.protobuf":
            try:
                body = protobuf.decode(body)
            except protobuf.ProtobufError as e:
                raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unsupported "
                               f"format: {e}") from e
        elif method in ("POST", "PUT") and body and content_type not in ("", "application/json", "application/yaml"):
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                           "accepted media types include: application/json, application/yaml")
        ns = t.namespace if kind.namespaced else None
        if method == "GET":
            if params.get("watch") in ("true", "1"):
                return await self._serve_watch_stream(request, kind, ns, t.name)
            if t.name is None:
                result = self.list_objects(kind, ns, params.get("labelSelector"), params.get("fieldSelector"))
                result = tables.maybe_metadata(request, result, is_list=True)
                return _json(tables.maybe_table(request, kind, result, is_list=True))
            if t.subresource == "log" and _res(kind) == _PODS:
                return await self._serve_log(kind, ns, t.name, params)
            if t.subresource not in (None, "status"):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            obj = self.get_object(kind, ns, t.name)
            if obj is None:
                raise errors.not_found(kind.plural, kind.group, t.name)
            obj = tables.maybe_metadata(request, obj, is_list=False)
            return _json(tables.maybe_table(request, kind, obj, is_list=False))
        # Like the real server: the fieldManager parameter, else the client's User-Agent product.
        manager = params.get("fieldManager") or \
            (request.headers.get("User-Agent") or "unknown").split("/")[0].split(" ")[0] or "unknown"
        if method == "POST" and t.name is None:
            return _json(self.create_object(kind, ns, _decode(body), dry_run=dry_run, field_manager=manager), 201)
        if method == "PUT" and t.name is not None:
            return _json(self.replace_object(kind, ns, t.name, _decode(body), subresource=t.subresource,
                                             dry_run=dry_run, field_manager=manager))
        if method == "PATCH" and t.name is not None:
            ctype = request.headers.get("Content-Type", "")
            return _json(self.patch_object(kind, ns, t.name, request.body, ctype, subresource=t.subresource,
                                           field_manager=params.get("fieldManager") if "apply" in ctype else manager,
                                           force=params.get("force") == "true", dry_run=dry_run))
        if method == "DELETE":
            options = _decode(request.body) if request.body else {}
            options = dict(options or {})
            if "gracePeriodSeconds" in params:
                options["gracePeriodSeconds"] = int(params["gracePeriodSeconds"])
            if "propagationPolicy" in params:
                options["propagationPolicy"] = params["propagationPolicy"]
            if t.name is not None:
                return _json(self.delete_object(kind, ns, t.name, options, dry_run=dry_run))
            listed = self.list_objects(kind, ns, params.get("labelSelector"), params.get("fieldSelector"))
            deleted = [self.delete_object(kind, o["metadata"].get("namespace"), o["metadata"]["name"], options, dry_run=dry_run)
                       for o in listed["items"]]
            return _json({**listed, "items": deleted})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _discovery(self, t: Target) -> dict[str, Any]:
        kinds = self.kinds()
        if t.group is None:  # /api or /apis
            if t.root == "apis":
                return {"kind": "APIGroupList", "apiVersion": "v1",
                        "groups": [self._group(g) for g in sorted({k.group for k in kinds if k.group})]}
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if t.version is None:
            if not any(k.group == t.group for k in kinds):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(t.group)}
        matching = [k for k in kinds if k.group == t.group and k.version == t.version]
        if not matching:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{t.group}/{t.version}" if t.group else t.version,
                "resources": [entry for k in sorted(matching, key=lambda k: k.plural) for entry in k.discovery()]}

    def _openapi(self, gv: str) -> dict[str, Any]:
        by_gv: dict[str, list[Kind]] = {}
        for kind in self.kinds():
            by_gv.setdefault(openapi.gv_path(kind), []).append(kind)
        schemas = {}
        for crd in self.objects_of(self.kind_of("apiextensions.k8s.io", "v1", "customresourcedefinitions")):
            for version in (crd.get("spec") or {}).get("versions") or []:
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    schemas[crd["spec"]["names"]["kind"]] = schema
        docs = {path: openapi.gv_document(kinds, schemas) for path, kinds in by_gv.items()}
        if not gv:
            return openapi.root_document(docs)
        if gv not in docs:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return docs[gv]

    def _group(self, group: str) -> dict[str, Any]:
        versions = sorted({k.version for k in self.kinds() if k.group == group}, key=_version_priority)
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    async def _serve_log(self, kind: Kind, ns: str | None, name: str, params: dict[str, str]) -> aiohttp.web.StreamResponse:
        if self.get_object(kind, ns, name) is None:
            raise errors.not_found(kind.plural, kind.group, name)
        if self.pod_log is None:
            raise errors.bad_request(f"pod {name} has no logs: the emulator runs without a kubelet")
        result = self.pod_log(ns or "", name, params.get("container"), params.get("follow") == "true")
        if asyncio.iscoroutine(result):
            result = await result
        return aiohttp.web.Response(body=result, content_type="text/plain")

    async def _serve_watch_stream(self, request: kmock.Request, kind: Kind, ns: str | None,
                                  name: str | None) -> aiohttp.web.StreamResponse:
        params = request.params
        match = selectors.combined(params.get("labelSelector"), params.get("fieldSelector"))
        rv_param = params.get("resourceVersion")
        initial = params.get("sendInitialEvents") == "true"
        bookmarks = params.get("allowWatchBookmarks") == "true"
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        cursor: int
        if rv_param in (None, "", "0") or initial:
            cursor = self._rv
            snapshot = [o for o in self.objects_of(kind, ns) if (name is None or o["metadata"]["name"] == name) and match(o)]
        else:
            try:
                cursor = int(rv_param)  # type: ignore[arg-type]
            except ValueError:
                raise errors.bad_request(f"invalid resourceVersion {rv_param!r}")
            snapshot = []
        raw = request._raw_request
        assert raw is not None
        resp = aiohttp.web.StreamResponse(status=200)
        resp.content_type = "application/json"
        await resp.prepare(raw)
        table = tables.wants_table(request)

        async def send(event_type: str, obj: dict[str, Any]) -> None:
            if event_type != "BOOKMARK" and event_type != "ERROR":
                obj = tables.maybe_metadata(request, obj, is_list=False)
                if table:
                    obj = tables.maybe_table(request, kind, obj, is_list=False)
            await resp.write(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")

        deadline = time.monotonic() + timeout if timeout else None
        next_bookmark = time.monotonic() + self.bookmark_interval
        try:
            for obj in snapshot:
                await send("ADDED", obj)
            if initial:
                await send("BOOKMARK", {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": {
                    "resourceVersion": str(cursor), "annotations": {"k8s.io/initial-events-end": "true"}}})
            storage = self._storage(kind)
            while True:
                try:
                    records = self.records_after(cursor)
                except ApiError as e:
                    await send("ERROR", e.status())
                    break
                for rec in records:
                    cursor = rec.rv
                    event = self._event_for(rec, kind, storage, ns, name, match)
                    if event is not None:
                        await send(*event)
                if raw.transport is None or raw.transport.is_closing() or self._closing:
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    await send("BOOKMARK", {"kind": kind.kind, "apiVersion": kind.api_version,
                                            "metadata": {"resourceVersion": str(cursor)}})
                    next_bookmark = now + self.bookmark_interval
                if not records:
                    wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - now))
                    await self.wait_for_change(wait)
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError, RuntimeError):
            pass  # the client went away
        return resp

    def _event_for(self, rec: Record, kind: Kind, storage: kmock.resource, ns: str | None, name: str | None,
                   match: Callable[[dict[str, Any] | None], bool]) -> tuple[str, dict[str, Any]] | None:
        if rec.res != storage:
            return None
        meta = rec.obj["metadata"]
        if ns is not None and meta.get("namespace") != ns:
            return None
        if name is not None and meta.get("name") != name:
            return None
        new, old = self._to_view(kind, rec.obj), self._to_view(kind, rec.old)
        now_in = match(new)
        if rec.type == "MODIFIED":
            was_in = match(old)
            if now_in and was_in:
                return ("MODIFIED", new)  # type: ignore[return-value]
            if now_in:
                return ("ADDED", new)  # type: ignore[return-value]
            if was_in:
                return ("DELETED", new)  # type: ignore[return-value]
            return None
        return (rec.type, new) if now_in else None  # type: ignore[return-value]

    async def _serve_control(self, request: kmock.Request, path: str, method: str) -> aiohttp.web.StreamResponse:
        """`/kubeemu/v1/...`: test controls for clients that are not Python (e.g. Rust e2e tests)."""
        segs = path.strip("/").split("/")[2:]
        body = _decode(request.body) if request.body else {}
        if segs == ["faults"] and method == "POST":
            self.add_fault(body.get("method", "*"), body.get("path", ".*"), int(body.get("status", 500)),
                           body.get("reason", "InternalError"), body.get("message", "injected failure"), body.get("count", 1))
            return _json({"faults": len(self._faults)})
        if segs == ["faults"] and method == "DELETE":
            self.clear_faults()
            return _json({"faults": 0})
        if segs == ["stats"]:
            return _json({"resourceVersion": self._rv, "objects": sum(1 for o in self._objects.values() if not o.deleted),
                          "requests": len(self._requests)})
        if len(segs) == 5 and segs[0] == "namespaces" and segs[2] == "pods" and "pods" in self.control_handlers \
                and method == "POST":
            return _json(await self.control_handlers["pods"](segs[1], segs[3], segs[4], body or {}))
        raise ApiError(404, "NotFound", f"unknown control endpoint {path}")


def _decode(body: bytes | Any, yaml_ok: bool = True) -> Any:
    if not isinstance(body, (bytes, bytearray)):
        return body
    if not body:
        return {}
    try:
        return json.loads(body)
    except ValueError:
        if yaml_ok:
            try:
                return yaml.safe_load(body)
            except yaml.YAMLError as e:
                raise errors.bad_request(f"error decoding YAML: {e}") from e
        raise errors.bad_request("the request body is not valid JSON")


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _version_priority(v: str) -> tuple[int, int, int]:
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (3, 0, 0)
    stability = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stability, -int(m.group(1)), -int(m.group(3) or 0))


_EVENT_RENAMES = [("regarding", "involvedObject"), ("note", "message"), ("deprecatedSource", "source"),
                  ("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp"),
                  ("deprecatedCount", "count"), ("reportingController", "reportingComponent")]


def _new_event_to_core(view: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(view)
    for new, core in _EVENT_RENAMES:
        if new in out:
            out[core] = out.pop(new)
    out["apiVersion"], out["kind"] = "v1", "Event"
    if "source" not in out and out.get("reportingComponent"):
        out["source"] = {"component": out["reportingComponent"]}
    out.setdefault("involvedObject", {})
    return out


def _core_event_to_new(stored: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(stored)
    for new, core in _EVENT_RENAMES:
        if core in out:
            out[new] = out.pop(core)
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    out.setdefault("eventTime", None)  # core events may lack it; the real server serves null
    if not out.get("reportingController") and isinstance(out.get("deprecatedSource"), dict):
        out["reportingController"] = out["deprecatedSource"].get("component", "")
    return out
