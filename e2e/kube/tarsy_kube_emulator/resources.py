"""Resource kinds the emulator serves: built-in kinds and custom resources from CRDs."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import yaml

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass
class Kind:
    """Everything the emulator needs to know about one resource (group/version/plural)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # e.g. {"status"}; "status" switches on the status-subresource rules.
    subresources: frozenset[str] = frozenset()
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    # Built-in kinds get strategic merge patch and keyed-list apply; custom resources do not.
    builtin: bool = False

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def discovery(self) -> list[dict[str, Any]]:
        """`APIResourceList.resources` entries for this kind and its subresources."""
        main = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(VERBS),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        for sub in sorted(self.subresources):
            verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
            out.append({"name": f"{self.plural}/{sub}", "singularName": "", "namespaced": self.namespaced,
                        "kind": "Pod" if sub == "log" else self.kind, "verbs": verbs})
        return out


def _b(group: str, version: str, plural: str, kind: str, *, namespaced: bool = True, short: Iterable[str] = (),
       sub: Iterable[str] = (), categories: Iterable[str] = ()) -> Kind:
    return Kind(group, version, plural, kind, namespaced=namespaced, short_names=tuple(short),
                subresources=frozenset(sub), categories=tuple(categories), builtin=True)


BUILTIN_KINDS: list[Kind] = [
    _b("", "v1", "pods", "Pod", short=("po",), sub=("status", "log"), categories=("all",)),
    _b("", "v1", "events", "Event", short=("ev",)),
    _b("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _b("", "v1", "secrets", "Secret"),
    _b("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",)),
    _b("", "v1", "services", "Service", short=("svc",), sub=("status",), categories=("all",)),
    _b("", "v1", "namespaces", "Namespace", namespaced=False, short=("ns",), sub=("status",)),
    _b("", "v1", "nodes", "Node", namespaced=False, short=("no",), sub=("status",)),
    _b("events.k8s.io", "v1", "events", "Event", short=("ev",)),
    _b("coordination.k8s.io", "v1", "leases", "Lease"),
    _b("apps", "v1", "deployments", "Deployment", short=("deploy",), sub=("status",), categories=("all",)),
    _b("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _b("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _b("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _b("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _b("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
       namespaced=False, short=("crd", "crds"), sub=("status",)),
]

# TARSy's kinds (types in kubernetes/crds/src/), used when the generated CRD manifests are not at hand.
TARSY_FALLBACK_KINDS: list[Kind] = [
    Kind("tarsy.dev", "v1alpha1", plural, kind, subresources=frozenset({"status"}), categories=("tarsy",))
    for plural, kind in (
        ("alerts", "Alert"), ("chains", "Chain"), ("agentexecutions", "AgentExecution"),
        ("agents", "Agent"), ("mcpservers", "MCPServer"), ("llmproviders", "LLMProvider"),
    )
]


def kinds_from_crd(crd: dict[str, Any]) -> list[Kind]:
    """One `Kind` per served version of a `CustomResourceDefinition` object."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if version.get("served", True) is False:
            continue
        subs = set((version.get("subresources") or spec.get("subresources") or {}).keys())
        out.append(Kind(
            group=spec["group"], version=version["name"], plural=names["plural"], kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            singular=names.get("singular") or names["kind"].lower(),
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            subresources=frozenset(subs),
            printer_columns=list(version.get("additionalPrinterColumns") or spec.get("additionalPrinterColumns") or []),
        ))
    return out


def load_crd_documents(paths: Iterable[pathlib.Path]) -> list[dict[str, Any]]:
    """Every `CustomResourceDefinition` document found in the given YAML files or folders."""
    docs: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) + sorted(path.glob("*.yml")) if path.is_dir() else [path]
        for file in files:
            for doc in yaml.load_all(file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    docs.append(doc)
    return docs
