"""Validates rendered chart output: every object against its schema, plus
cross-object consistency that schemas cannot see.

- core Kubernetes kinds: kubernetes-validate's strict schemas (unknown fields fail);
- tarsy.dev kinds: the openAPIV3Schema of our CRDs, made strict the way the API
  server prunes (unknown fields fail unless x-kubernetes-preserve-unknown-fields);
- ServiceMonitor and cert-manager kinds: minimal schemas of the fields the chart
  uses (their CRDs are not available offline);
- ConfigMap keys ending in .json hold JSON (Grafana dashboards);
- Services and PodDisruptionBudgets select some rendered pod template, Services
  name ports it declares;
  workloads' service accounts are rendered; no duplicate objects;
- each ServiceMonitor selects a rendered Service and names its ports, and the
  NetworkPolicies of the scraped pods admit a Prometheus pod (namespace
  `monitoring`, label app.kubernetes.io/name=prometheus, as the CI profiles
  describe it) to the scraped port;
- an optional expectation file lists `Kind/name` lines that must be rendered
  (`!Kind/name` for objects that must not be).

Exit status 1 on any problem.
"""

import argparse
import copy
import glob
import json
import sys

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

NAME = {"type": "string", "minLength": 1}
META = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": NAME, "namespace": NAME, "labels": {"type": "object"},
                   "annotations": {"type": "object"}},
    "additionalProperties": False,
}


def obj_schema(spec):
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {"apiVersion": NAME, "kind": NAME, "metadata": META, "spec": spec},
        "additionalProperties": False,
    }


KEY_REF = {"type": "object", "required": ["name", "key"], "additionalProperties": False,
           "properties": {"name": NAME, "key": NAME, "optional": {"type": "boolean"}}}
SECRET_OR_CONFIGMAP = {"type": "object", "minProperties": 1, "maxProperties": 1,
                       "additionalProperties": False,
                       "properties": {"secret": KEY_REF, "configMap": KEY_REF}}
TLS_CONFIG = {"type": "object", "additionalProperties": False, "properties": {
    "ca": SECRET_OR_CONFIGMAP, "cert": SECRET_OR_CONFIGMAP, "keySecret": KEY_REF,
    "serverName": NAME, "insecureSkipVerify": {"type": "boolean"}}}
ISSUER_REF = {"type": "object", "required": ["name"], "additionalProperties": False,
              "properties": {"name": NAME, "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                             "group": NAME}}
THIRD_PARTY = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): obj_schema({
        "type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
        "properties": {
            "selector": {"type": "object", "properties": {"matchLabels": {"type": "object"}}},
            "namespaceSelector": {"type": "object", "additionalProperties": False, "properties": {
                "matchNames": {"type": "array", "items": NAME}, "any": {"type": "boolean"}}},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False,
                "properties": {"port": NAME, "path": NAME, "interval": {
                    "type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                    "scheme": {"enum": ["http", "https"]}, "tlsConfig": TLS_CONFIG}}},
        }}),
    ("cert-manager.io/v1", "Issuer"): obj_schema({
        "type": "object", "minProperties": 1, "maxProperties": 1,
        "properties": {"selfSigned": {"type": "object"}, "ca": {"type": "object"}}}),
    ("cert-manager.io/v1", "Certificate"): obj_schema({
        "type": "object", "required": ["secretName", "issuerRef"], "additionalProperties": False,
        "properties": {
            "secretName": NAME, "commonName": NAME, "issuerRef": ISSUER_REF,
            "dnsNames": {"type": "array", "items": NAME, "minItems": 1},
            "duration": {"type": "string"}, "renewBefore": {"type": "string"},
            "isCA": {"type": "boolean"},
            "privateKey": {"type": "object", "additionalProperties": False, "properties": {
                "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]}, "size": {"type": "integer"},
                "rotationPolicy": {"enum": ["Never", "Always"]}}},
        }}),
}


def strict(schema):
    """Unknown fields fail, as the API server would prune (drop) them."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        if schema.get("nullable"):
            t = schema.get("type")
            if isinstance(t, str):
                schema["type"] = [t, "null"]
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def load_crd_schemas(crd_dir):
    schemas = {}
    for path in sorted(glob.glob(f"{crd_dir}/*.yaml")):
        with open(path) as f:
            crd = yaml.safe_load(f)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            s = copy.deepcopy(v["schema"]["openAPIV3Schema"])
            props = s.setdefault("properties", {})
            props["metadata"] = META
            props["apiVersion"] = {"const": f"{group}/{v['name']}"}
            props["kind"] = {"const": kind}
            s["required"] = sorted(set(s.get("required", [])) | {"apiVersion", "kind", "metadata"})
            schemas[(f"{group}/{v['name']}", kind)] = strict(s)
    return schemas


def ident(o):
    m = o.get("metadata") or {}
    return f"{o.get('kind')}/{m.get('name')}" + (f" (ns {m['namespace']})" if m.get("namespace") else "")


def validate_objects(objs, kube_version, crd_schemas):
    errors = []
    seen = set()
    for o in objs:
        if not isinstance(o, dict) or not o.get("apiVersion") or not o.get("kind"):
            errors.append(f"not a Kubernetes object: {str(o)[:80]}")
            continue
        key = (o["apiVersion"].split("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"].get("name"))
        if key in seen:
            errors.append(f"duplicate object {ident(o)}")
        seen.add(key)
        k = (o["apiVersion"], o["kind"])
        if k == ("v1", "ConfigMap"):
            for name, text in (o.get("data") or {}).items():
                if name.endswith(".json"):
                    try:
                        json.loads(text)
                    except (TypeError, ValueError) as e:
                        errors.append(f"{ident(o)}: data.{name} is not JSON: {e}")
        schema = crd_schemas.get(k) or THIRD_PARTY.get(k)
        try:
            if schema is not None:
                v = jsonschema.Draft202012Validator(schema)
                for e in sorted(v.iter_errors(o), key=lambda e: list(e.path)):
                    errors.append(f"{ident(o)}: {'.'.join(map(str, e.path))}: {e.message}")
            elif o["apiVersion"].startswith("tarsy.dev/"):
                errors.append(f"{ident(o)}: no CRD for {k}")
            else:
                kubernetes_validate.validate(o, kube_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            errors.append(f"{ident(o)}: {'.'.join(map(str, e.path))}: {e.message}")
        except SchemaNotFoundError:
            errors.append(f"{ident(o)}: no schema for {k} in Kubernetes {kube_version}")
    return errors


def pod_templates(objs):
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            yield o, o["spec"]["template"]


def consistency(objs):
    errors = []
    sas = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs if o["kind"] == "ServiceAccount"}
    for o, t in pod_templates(objs):
        ns = o["metadata"].get("namespace")
        sa = t["spec"].get("serviceAccountName")
        if sa and (ns, sa) not in sas:
            errors.append(f"{ident(o)}: service account {sa} is not rendered")
        labels = t["metadata"].get("labels", {})
        sel = o["spec"]["selector"].get("matchLabels", {})
        if any(labels.get(k) != v for k, v in sel.items()):
            errors.append(f"{ident(o)}: selector does not match its pod template")
    for s in (o for o in objs if o["kind"] == "Service"):
        sel = s["spec"].get("selector") or {}
        targets = [t for _, t in pod_templates(objs)
                   if all(t["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]
        if not targets:
            errors.append(f"{ident(s)}: selects no rendered pod template")
            continue
        names = {p.get("name") for t in targets for c in t["spec"]["containers"] for p in c.get("ports", [])}
        for p in s["spec"]["ports"]:
            tp = p.get("targetPort")
            if isinstance(tp, str) and tp not in names:
                errors.append(f"{ident(s)}: targetPort {tp} is not a container port of its pods")
    for pdb in (o for o in objs if o["kind"] == "PodDisruptionBudget"):
        sel = pdb["spec"].get("selector") or {}
        if not any(selects(sel, t["metadata"].get("labels", {})) for _, t in pod_templates(objs)):
            errors.append(f"{ident(pdb)}: selects no rendered pod template")
    return errors


# The Prometheus the CI profiles describe (networkPolicy.prometheus*Selector).
PROMETHEUS_NAMESPACE_LABELS = {"kubernetes.io/metadata.name": "monitoring"}
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus"}


def selects(selector, labels):
    """A LabelSelector (matchLabels, matchExpressions) against labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": labels.get(key) not in values,
              "Exists": key in labels,
              "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def admits(policy, ns_labels, pod_labels, port_name, port_number):
    """Whether a NetworkPolicy's ingress rules admit a pod of another namespace to a port."""
    for rule in policy["spec"].get("ingress") or []:
        ports = rule.get("ports")
        if ports and not any(p.get("port") in (port_name, port_number) for p in ports):
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            if "namespaceSelector" in peer and selects(peer["namespaceSelector"], ns_labels) \
                    and selects(peer.get("podSelector") or {}, pod_labels):
                return True
    return False


def scrape_consistency(objs):
    """ServiceMonitors select rendered Services and ports; NetworkPolicies let Prometheus scrape."""
    errors = []
    services = [o for o in objs if o["kind"] == "Service"]
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"
                and "Ingress" in (o["spec"].get("policyTypes") or ["Ingress"])]
    for sm in (o for o in objs if o["kind"] == "ServiceMonitor"):
        ns = sm["metadata"].get("namespace")
        names = (sm["spec"].get("namespaceSelector") or {}).get("matchNames") or [ns]
        sel = sm["spec"]["selector"]
        svcs = [s for s in services if s["metadata"].get("namespace") in names
                and selects(sel, s["metadata"].get("labels") or {})]
        if not svcs:
            errors.append(f"{ident(sm)}: selects no rendered Service")
        for ep in sm["spec"]["endpoints"]:
            for svc in svcs:
                sp = [p for p in svc["spec"]["ports"] if p.get("name") == ep.get("port")]
                if not sp:
                    errors.append(f"{ident(sm)}: {ident(svc)} has no port named {ep.get('port')}")
                    continue
                target = sp[0].get("targetPort", sp[0]["port"])
                for o, t in pod_templates(objs):
                    labels = t["metadata"].get("labels", {})
                    if o["metadata"].get("namespace") != svc["metadata"].get("namespace") \
                            or not selects({"matchLabels": svc["spec"].get("selector") or {}}, labels):
                        continue
                    cports = [p for c in t["spec"]["containers"] for p in c.get("ports", [])
                              if target in (p.get("name"), p.get("containerPort"))]
                    if not cports:
                        continue
                    pname, pnum = cports[0].get("name"), cports[0]["containerPort"]
                    for np in policies:
                        if np["metadata"].get("namespace") == o["metadata"].get("namespace") \
                                and selects(np["spec"].get("podSelector") or {}, labels) \
                                and not admits(np, PROMETHEUS_NAMESPACE_LABELS,
                                               PROMETHEUS_POD_LABELS, pname, pnum):
                            errors.append(f"{ident(np)}: does not admit Prometheus to port "
                                          f"{pname or pnum} of {ident(o)}, scraped by {ident(sm)}")
    return errors


def expectations(objs, path):
    errors = []
    present = {f"{o['kind']}/{o['metadata']['name']}" for o in objs}
    with open(path) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if not line:
                continue
            if line.startswith("!"):
                if line[1:] in present:
                    errors.append(f"expected {line[1:]} not to be rendered")
            elif line not in present:
                errors.append(f"expected {line} to be rendered")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kube-version", required=True)
    ap.add_argument("--crds", required=True, help="directory of our CRD manifests")
    ap.add_argument("--expect", help="file of Kind/name lines that must (or !must not) be rendered")
    ap.add_argument("--each-must-fail", action="store_true",
                    help="self-test: every object must be reported (a fixture of broken objects)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    crd_schemas = load_crd_schemas(a.crds)
    if not crd_schemas:
        sys.exit(f"no CRDs in {a.crds}")
    objs = []
    for path in a.files:
        with open(path) as f:
            objs += [d for d in yaml.safe_load_all(f) if d is not None]
    if a.each_must_fail:
        missed = [ident(o) for o in objs if not validate_objects([o], a.kube_version, crd_schemas)]
        for m in missed:
            print(f"ERROR broken fixture {m} passed validation", file=sys.stderr)
        print(f"  {len(objs) - len(missed)}/{len(objs)} broken objects rejected")
        return 1 if missed or not objs else 0
    errors = validate_objects(objs, a.kube_version, crd_schemas)
    if not errors:
        errors = consistency(objs) + scrape_consistency(objs)
    if a.expect:
        try:
            errors += expectations(objs, a.expect)
        except FileNotFoundError:
            errors.append(f"missing expectation file {a.expect}")
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    kinds = {}
    for o in objs:
        kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
    print(f"  {len(objs)} objects ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}): "
          f"{'ok' if not errors else f'{len(errors)} error(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
