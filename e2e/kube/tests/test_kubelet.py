"""The harness kubelet: pods run as real local processes and report phases."""

from __future__ import annotations

import json
import socket
import stat
import sys
import time
import urllib.request
from typing import Any


from conftest import eventually, wait_for_watch


def pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "containers": containers, **spec}}


def sh(script: str, name: str = "main", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", "command": ["sh", "-c", script], **extra}


def phase_of(kubectl, name: str) -> str:
    return kubectl.json("get", "pod", name)["status"]["phase"]


def wait_phase(kubectl, name: str, phase: str, timeout: float = 15) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        got = kubectl.json("get", "pod", name)
        return got if got["status"]["phase"] == phase else None
    return eventually(check, timeout=timeout, what=f"pod {name} {phase}")


def test_pod_runs_to_succeeded_with_env_from_secrets_configmaps_and_fields(kubectl, tmp_path):
    kubectl.apply([
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"url": "postgres://x"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"level": "debug", "mode": "k8s"}},
        pod("ok", [sh('echo "url=$DB_URL level=$LEVEL pod=$POD ns=$NS plain=$PLAIN cfg_mode=$CFG_mode arg=$1"; '
                      'test -f "$KUBECONFIG" && pwd', args=["x", "$(PLAIN)"],
                      env=[{"name": "DB_URL", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}},
                           {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level"}}},
                           {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                           {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                           {"name": "PLAIN", "value": "hello"}],
                      envFrom=[{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}])]),
    ])
    got = wait_phase(kubectl, "ok", "Succeeded")
    state = got["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 0 and state["reason"] == "Completed"
    assert got["spec"]["nodeName"] == "kubeemu-node"
    assert {c["type"]: c["status"] for c in got["status"]["conditions"]}["PodScheduled"] == "True"
    logs = kubectl("logs", "ok").stdout
    assert "url=postgres://x level=debug pod=ok ns=default plain=hello cfg_mode=k8s arg=hello" in logs
    reasons = [e["reason"] for e in kubectl.json("get", "events", "--field-selector", "involvedObject.name=ok")["items"]]
    assert "Scheduled" in reasons and "Started" in reasons


def test_failing_pod_is_failed_with_exit_code(kubectl):
    kubectl.apply(pod("bad", [sh("echo boom >&2; exit 3")]))
    got = wait_phase(kubectl, "bad", "Failed")
    term = got["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3 and term["reason"] == "Error"
    assert "boom" in kubectl("logs", "bad").stdout


def test_phases_go_pending_running_then_terminal(emu, kubectl):
    watcher = kubectl.popen("get", "pods", "--field-selector=metadata.name=slow", "-w",
                            "-o", "jsonpath={.status.phase}{\"\\n\"}")
    try:
        wait_for_watch(emu, "/pods")
        kubectl.apply(pod("slow", [sh("sleep 1")]))
        wait_phase(kubectl, "slow", "Succeeded")
        time.sleep(0.5)
    finally:
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
    phases = [line for line in out.splitlines() if line]
    collapsed = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert collapsed == ["Pending", "Running", "Succeeded"], phases


def test_unknown_image_is_image_pull_back_off(kubectl):
    kubectl.apply(pod("nopull", [{"name": "main", "image": "registry.example.invalid/nothing:1"}]))
    got = eventually(lambda: (p := kubectl.json("get", "pod", "nopull"))["status"].get("containerStatuses") and p)
    waiting = got["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ImagePullBackOff" and got["status"]["phase"] == "Pending"
    assert "ImagePullBackOff" in kubectl("get", "pod", "nopull").stdout


def test_simulated_oom_kill(emu, kubectl):
    kubectl.apply(pod("hog", [sh("sleep 60")]))
    wait_phase(kubectl, "hog", "Running")
    req = urllib.request.Request(f"{emu.url}/kubeemu/v1/namespaces/default/pods/hog/oom", data=b"{}", method="POST")
    assert json.loads(urllib.request.urlopen(req, timeout=5).read()) == {"oomKilled": "main"}
    got = wait_phase(kubectl, "hog", "Failed")
    term = got["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["reason"] == "OOMKilled" and term["exitCode"] == 137


def test_active_deadline_kills_the_pod(kubectl):
    started = time.monotonic()
    kubectl.apply(pod("late", [sh("sleep 60")], activeDeadlineSeconds=1, terminationGracePeriodSeconds=1))
    got = wait_phase(kubectl, "late", "Failed", timeout=15)
    assert time.monotonic() - started < 10
    assert got["status"]["reason"] == "DeadlineExceeded"
    assert "deadline" in got["status"]["message"]


def test_deletion_sends_sigterm_then_removes_the_pod(kubectl, tmp_path):
    marker = tmp_path / "terminated"
    kubectl.apply(pod("graceful", [sh(f"trap 'echo bye > {marker}; exit 0' TERM; while true; do sleep 0.1; done")],
                      terminationGracePeriodSeconds=10))
    wait_phase(kubectl, "graceful", "Running")
    kubectl("delete", "pod", "graceful", "--wait=false")
    eventually(lambda: kubectl("get", "pod", "graceful", check=False).returncode != 0, what="pod removed")
    assert marker.read_text().strip() == "bye"


def test_deletion_kills_after_the_grace_period(kubectl, tmp_path):
    kubectl.apply(pod("stubborn", [sh("trap '' TERM; while true; do sleep 0.1; done")],
                      terminationGracePeriodSeconds=1))
    wait_phase(kubectl, "stubborn", "Running")
    got = kubectl.json("get", "pod", "stubborn")
    pid_probe = time.monotonic()
    kubectl("delete", "pod", "stubborn", "--wait=false")
    held = kubectl.json("get", "pod", "stubborn")
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["deletionGracePeriodSeconds"] == 1
    eventually(lambda: kubectl("get", "pod", "stubborn", check=False).returncode != 0, timeout=10, what="pod removed")
    assert time.monotonic() - pid_probe >= 0.9, "SIGKILL only after the grace period"
    assert got["status"]["phase"] == "Running"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_native_sidecar_init_container_and_mapped_image(tmp_path):
    # An "image binary": what TARSY_BIN would point at.
    tool = tmp_path / "fake-tarsy"
    tool.write_text("#!/bin/sh\necho \"fake-tarsy $*\"\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    port = _free_port()
    from tarsy_kube_emulator import BackgroundEmulator
    from conftest import Kubectl
    with BackgroundEmulator(kubeconfig_out=tmp_path / "kc", kubelet=True,
                            kubelet_options={"root": tmp_path / "kubelet",
                                             "image_map": {"tarsy:*": {"entrypoint": [str(tool)],
                                                                       "paths": {"/usr/local/bin/tarsy": str(tool)}}}}):
        kubectl = Kubectl(tmp_path / "kc", tmp_path / "cache")
        server = f"import http.server as h; h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler).serve_forever()"
        kubectl.apply(pod("inv", [
            {"name": "runner", "image": "tarsy:dev", "command": ["/tools/tarsy", "runner"], "args": ["--execution", "e1"],
             "volumeMounts": [{"name": "tools", "mountPath": "/tools"}]},
        ], initContainers=[
            {"name": "copy-tarsy", "image": "tarsy:dev", "command": ["cp", "/usr/local/bin/tarsy", "/tools/tarsy"],
             "volumeMounts": [{"name": "tools", "mountPath": "/tools"}]},
            {"name": "mcp", "image": "python:3.12", "restartPolicy": "Always",
             "command": [sys.executable, "-c", server],
             "readinessProbe": {"httpGet": {"port": port, "path": "/"}, "periodSeconds": 1},
             "startupProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1}},
            {"name": "unmapped-sidecar", "image": "ghcr.io/example/other:1", "restartPolicy": "Always"},
        ], volumes=[{"name": "tools", "emptyDir": {}}]))
        got = wait_phase(kubectl, "inv", "Succeeded", timeout=20)
        assert "fake-tarsy runner --execution e1" in kubectl("logs", "inv", "-c", "runner").stdout
        inits = {s["name"]: s for s in got["status"]["initContainerStatuses"]}
        assert inits["copy-tarsy"]["state"]["terminated"]["exitCode"] == 0
        assert "terminated" in inits["mcp"]["state"], "sidecars are stopped once the main containers exit"
        assert inits["unmapped-sidecar"]["state"]["waiting"]["reason"] == "NotRunByKubeEmu"
        events = kubectl.json("get", "events", "--field-selector", "involvedObject.name=inv")["items"]
        assert any(e["reason"] == "SidecarNotRun" for e in events)
