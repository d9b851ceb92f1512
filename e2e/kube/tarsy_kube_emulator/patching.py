"""Patch semantics: JSON patch, JSON merge patch, an approximation of strategic merge
patch for built-in kinds, and the merge used for server-side apply."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

# Lists of built-in kinds whose items are merged by key instead of replaced
# (the `patchMergeKey` / `x-kubernetes-list-map-keys` of the real schemas that matter here).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "ownerReferences": "uid",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
# Lists of primitives merged as sets by strategic merge patch.
SET_LISTS = {"finalizers"}


class PatchError(ValueError):
    """A patch that cannot be applied (rendered as 422 Invalid / 400 BadRequest)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, `null` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    try:
        for op in ops:
            # Like the API server's json-patch library, `test` with a null value passes
            # when the path is absent (kube-rs' finalizer helper relies on it).
            if isinstance(op, dict) and op.get("op") == "test" and op.get("value") is None:
                try:
                    found = jsonpatch.JsonPointer(op.get("path", "")).resolve(doc)
                except jsonpatch.JsonPointerException:
                    continue
                if found is not None:
                    raise PatchError(f"test failed: {op.get('path')} is not null")
                continue
            doc = jsonpatch.apply_patch(doc, [op], in_place=True)
        return doc
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError) as e:
        raise PatchError(str(e)) from e


def _keyed_merge(current: list[Any], patch: list[Any], key: str, strategic: bool) -> list[Any]:
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            result.append(copy.deepcopy(item))
            continue
        idx = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if strategic and item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(_strip_directives(item) if strategic else copy.deepcopy(item))
        else:
            result[idx] = _merge(result[idx], item, strategic)
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _merge(current: Any, patch: Any, strategic: bool) -> Any:
    if not isinstance(patch, dict) or not isinstance(current, dict):
        return _strip_directives(patch) if strategic else copy.deepcopy(patch)
    if strategic and patch.get("$patch") == "replace":
        return _strip_directives(patch)
    result = copy.deepcopy(current)
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys" or key == "$patch":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:  # null removes the field (merge patch, SMP and apply alike)
            result.pop(key, None)
            continue
        cur = result.get(key)
        if isinstance(value, list) and isinstance(cur, list):
            if key in MERGE_KEYS:
                result[key] = _keyed_merge(cur, value, MERGE_KEYS[key], strategic)
                continue
            if strategic and key in SET_LISTS:
                result[key] = cur + [v for v in value if v not in cur]
                continue
        result[key] = _merge(cur, value, strategic)
    return result


def strategic_merge_patch(target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """An approximation of strategic merge patch for built-in kinds: maps merge, lists
    named in `MERGE_KEYS` merge by key (`$patch: delete` removes an item), `finalizers`
    merge as a set, other lists are replaced; `$setElementOrder` is ignored."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be an object")
    return _merge(target, patch, strategic=True)


def apply_merge(target: dict[str, Any], applied: dict[str, Any], builtin: bool) -> dict[str, Any]:
    """Server-side apply without field ownership: the applied configuration is merged
    into the live object (last applier wins). Maps merge; for built-in kinds the
    keyed lists of `MERGE_KEYS` merge by key, every other list is atomic. Fields the
    applier omits are kept (real SSA would remove fields only this manager owned)."""
    if not builtin:
        return _merge_atomic_lists(target, applied)
    return _merge(target, applied, strategic=False)


def _merge_atomic_lists(current: Any, applied: Any) -> Any:
    if not isinstance(applied, dict) or not isinstance(current, dict):
        return copy.deepcopy(applied)
    result = copy.deepcopy(current)
    for key, value in applied.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_atomic_lists(result.get(key), value)
    return result


def fields_v1(applied: Any) -> dict[str, Any]:
    """A `managedFields[].fieldsV1` set for the fields of an applied configuration."""
    out: dict[str, Any] = {}
    if not isinstance(applied, dict):
        return out
    for key, value in applied.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {f"f:{k}": fields_v1(v) if isinstance(v, dict) else {} for k, v in value.items()
                    if k in ("labels", "annotations", "finalizers", "ownerReferences")}
            if meta:
                out["f:metadata"] = meta
            continue
        out[f"f:{key}"] = fields_v1(value) if isinstance(value, dict) else {}
    return out


# ---------------------------------------------------------------- field ownership
# Paths are tuples of `f:<key>` segments, as in `managedFields[].fieldsV1`; lists are
# leaves (atomic), so are scalars. Only these metadata fields are owned.
OWNED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")

Path = tuple[str, ...]


def leaves(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    """The leaf paths of a `fieldsV1` set."""
    out: set[Path] = set()
    for key, sub in fields.items():
        if not key.startswith("f:"):
            continue
        path = prefix + (key,)
        if isinstance(sub, dict) and any(k.startswith("f:") for k in sub):
            out |= leaves(sub, path)
        else:
            out.add(path)
    return out


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(paths):
        cur = out
        for seg in path:
            cur = cur.setdefault(seg, {})
    return out


def get_path(obj: Any, path: Path) -> Any:
    cur = obj
    for seg in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(seg[2:])
    return cur


def delete_path(obj: dict[str, Any], path: Path) -> None:
    """Remove a leaf and then any map it leaves empty."""
    parents = [obj]
    cur: Any = obj
    for seg in path[:-1]:
        cur = cur.get(seg[2:]) if isinstance(cur, dict) else None
        if not isinstance(cur, dict):
            return
        parents.append(cur)
    parents[-1].pop(path[-1][2:], None)
    for i in range(len(path) - 1, 0, -1):
        if parents[i] == {}:
            parents[i - 1].pop(path[i - 1][2:], None)


def changed_leaves(old: Any, new: Any, prefix: Path = ()) -> set[Path]:
    """Leaf paths whose value differs between two objects (set, changed or removed)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: set[Path] = set()
        for key in set(old) | set(new):
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == ("f:metadata",) and key not in OWNED_METADATA:
                continue
            out |= changed_leaves(old.get(key), new.get(key), prefix + (f"f:{key}",))
        return out
    if old == new or new is None:  # removed fields are owned by nobody
        return set()
    if isinstance(new, dict):  # a scalar/list replaced by a map: own its leaves
        return leaves(fields_v1(new), prefix) or {prefix}
    return {prefix} if prefix else set()
