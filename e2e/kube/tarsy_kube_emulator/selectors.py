"""Label and field selectors, parsed the way the API server parses query parameters."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .errors import bad_request

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `in (...)` value sets."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # exists, !exists, =, !=, in, notin
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        return False


class LabelSelector:
    """`labelSelector=a=b,c,!d,e in (x,y),f notin (z),g!=h`."""

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self.requirements: list[_Requirement] = []
        for part in _split_top_level(self.text):
            self.requirements.append(self._parse(part))

    @staticmethod
    def _parse(part: str) -> _Requirement:
        m = re.match(r"^(\S+)\s+(in|notin)\s*\(([^)]*)\)$", part)
        if m:
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            return _Requirement(LabelSelector._key(m.group(1)), m.group(2), values)
        if part.startswith("!"):
            return _Requirement(LabelSelector._key(part[1:].strip()), "!exists")
        for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
            if op in part:
                key, _, value = part.partition(op)
                return _Requirement(LabelSelector._key(key.strip()), norm, (value.strip(),))
        return _Requirement(LabelSelector._key(part), "exists")

    @staticmethod
    def _key(key: str) -> str:
        if not _LABEL_KEY.match(key):
            raise bad_request(f"unable to parse requirement: invalid label key {key!r}")
        return key

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in self.requirements)


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string form of a dotted field (`metadata.name`, `status.phase`); "" when absent."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


class FieldSelector:
    """`fieldSelector=metadata.name=x,status.phase!=Running` over any dotted field."""

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self.requirements: list[tuple[str, str, str]] = []
        for part in _split_top_level(self.text):
            for op in ("!=", "==", "="):
                if op in part:
                    key, _, value = part.partition(op)
                    self.requirements.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                    break
            else:
                raise bad_request(f"invalid selector: '{part}'; can't understand '{part}'")

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        for key, op, value in self.requirements:
            actual = field_value(obj, key)
            if (actual == value) != (op == "="):
                return False
        return True


def combined(label: str | None, field: str | None) -> Callable[[dict[str, Any] | None], bool]:
    """One predicate for both selectors (parse errors raise `400 BadRequest`)."""
    ls, fs = LabelSelector(label), FieldSelector(field)
    return lambda obj: ls.matches(obj) and fs.matches(obj)
