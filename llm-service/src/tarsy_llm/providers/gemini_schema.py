"""JSON Schema (as MCP tools publish it) → Gemini function-parameter schema.

Gemini accepts an OpenAPI subset: upper-case types, string-only enums, no
``$ref``/``additionalProperties``/``const``, nullability as a flag. MCP servers
publish full JSON Schema, so the schema is rewritten into that subset: refs are
inlined, null alternatives become ``nullable``, unsupported keywords are dropped
(their intent is kept in the description where it matters).
"""

from __future__ import annotations

import json
from typing import Any

from google.genai import types

_TYPES = {
    "string": "STRING",
    "number": "NUMBER",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
_FORMATS = {
    "STRING": {"enum", "date-time"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}
_NUMERIC = ("minimum", "maximum")
_COPY = {
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minItems": "min_items",
    "maxItems": "max_items",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
}
_MAX_REF_DEPTH = 8


def to_gemini_schema(schema: dict[str, Any]) -> types.Schema | None:
    """Converts a tool's parameter schema; None when the tool takes no parameters."""
    converted = _Converter(schema).convert(schema, depth=0)
    if converted.get("type") == "OBJECT" and not converted.get("properties"):
        return None
    return types.Schema.model_validate(converted)


class _Converter:
    def __init__(self, root: dict[str, Any]) -> None:
        defs: dict[str, Any] = {}
        for key in ("$defs", "definitions"):
            value = root.get(key)
            if isinstance(value, dict):
                defs.update({f"#/{key}/{name}": sub for name, sub in value.items()})
        self._defs = defs

    def _resolve(self, node: dict[str, Any], depth: int) -> dict[str, Any] | None:
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        target = self._defs.get(ref)
        if target is None or depth > _MAX_REF_DEPTH:
            return None
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return merged

    def convert(self, node: Any, depth: int) -> dict[str, Any]:
        if not isinstance(node, dict):
            return {"type": "STRING"}
        resolved = self._resolve(node, depth)
        if resolved is None:
            # Unresolvable or too deeply recursive reference: accept any object.
            return {"type": "OBJECT", "description": node.get("description", "")}
        node = resolved
        if "allOf" in node and isinstance(node["allOf"], list):
            node = self._merge_all_of(node, depth)

        out: dict[str, Any] = {}
        description = node.get("description")
        notes: list[str] = []

        nullable = False
        alternatives = None
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                alternatives = node[key]
                break
        if alternatives is not None:
            non_null = []
            for alt in alternatives:
                if isinstance(alt, dict) and alt.get("type") == "null":
                    nullable = True
                else:
                    non_null.append(alt)
            if len(non_null) == 1:
                inner = self.convert(non_null[0], depth + 1)
                out.update(inner)
            elif non_null:
                out["any_of"] = [self.convert(alt, depth + 1) for alt in non_null]

        raw_type = node.get("type")
        if isinstance(raw_type, list):
            names = [t for t in raw_type if t != "null"]
            nullable = nullable or len(names) < len(raw_type)
            if len(names) == 1:
                raw_type = names[0]
            elif names:
                out["any_of"] = [self.convert({**node, "type": t}, depth + 1) for t in names]
                raw_type = None
            else:
                raw_type = "string"
        gemini_type = _TYPES.get(raw_type) if isinstance(raw_type, str) else None
        if gemini_type is None and "any_of" not in out and "type" not in out:
            if isinstance(node.get("properties"), dict):
                gemini_type = "OBJECT"
            elif "items" in node:
                gemini_type = "ARRAY"
            elif "enum" in node or "const" in node:
                gemini_type = "STRING"
            else:
                gemini_type = "STRING"
                notes.append("any JSON value, encoded as a string")
        if gemini_type is not None:
            out["type"] = gemini_type

        enum_values = node.get("enum")
        if "const" in node:
            enum_values = [node["const"]]
        if isinstance(enum_values, list) and enum_values:
            if all(isinstance(v, str) for v in enum_values):
                out["type"] = "STRING"
                out["enum"] = list(enum_values)
            else:
                notes.append("allowed values: " + ", ".join(json.dumps(v) for v in enum_values))

        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS.get(out.get("type", ""), set()):
            out["format"] = fmt
        elif isinstance(fmt, str):
            notes.append(f"format: {fmt}")

        for key in _NUMERIC:
            if isinstance(node.get(key), int | float) and not isinstance(node.get(key), bool):
                out[key] = node[key]
        for src, dst in _COPY.items():
            if src in node and isinstance(node[src], int | str) and not isinstance(node[src], bool):
                out[dst] = node[src]
        if "default" in node:
            notes.append(f"default: {json.dumps(node['default'], default=str)}")

        if out.get("type") == "OBJECT":
            props = node.get("properties")
            if isinstance(props, dict) and props:
                out["properties"] = {
                    str(name): self.convert(sub, depth + 1) for name, sub in props.items()
                }
                required = node.get("required")
                if isinstance(required, list):
                    present = [r for r in required if isinstance(r, str) and r in props]
                    if present:
                        out["required"] = present
        elif out.get("type") == "ARRAY":
            items = node.get("items")
            if isinstance(items, list):  # tuple validation: accept the first item's type
                items = items[0] if items else None
            out["items"] = (
                self.convert(items, depth + 1) if isinstance(items, dict) else {"type": "STRING"}
            )

        if nullable:
            out["nullable"] = True
        parts = [description] if isinstance(description, str) and description else []
        parts.extend(f"({note})" for note in notes)
        if parts:
            out["description"] = " ".join(parts)
        return out

    def _merge_all_of(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        properties: dict[str, Any] = dict(merged.get("properties") or {})
        required: list[str] = list(merged.get("required") or [])
        for sub in node["allOf"]:
            if not isinstance(sub, dict):
                continue
            resolved = self._resolve(sub, depth + 1) or {}
            for key, value in resolved.items():
                if key == "properties" and isinstance(value, dict):
                    properties.update(value)
                elif key == "required" and isinstance(value, list):
                    required.extend(r for r in value if r not in required)
                else:
                    merged.setdefault(key, value)
        if properties:
            merged["properties"] = properties
            merged.setdefault("type", "object")
        if required:
            merged["required"] = required
        return merged
