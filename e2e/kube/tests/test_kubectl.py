"""Real `kubectl` against the emulator: the API semantics the operator and its
tests rely on, observed the way a user (or client-go) observes them."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from conftest import CRD_DIR, EXAMPLES_DIR, eventually, wait_for_watch

NS = "sre"


def alert(name: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "tarsy.dev/v1alpha1", "kind": "Alert",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"alertType": "KubePodCrashLooping", "data": "pod: web-0"}}
    for key, value in extra.items():
        doc[key] = value
    return doc


@pytest.fixture
def sre(kubectl):
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return kubectl


def decode_stream(text: str) -> list[dict[str, Any]]:
    """kubectl -w -o json prints one pretty-printed JSON document after another."""
    decoder, out, idx = json.JSONDecoder(), [], 0
    while True:
        while idx < len(text) and text[idx].isspace():
            idx += 1
        if idx >= len(text):
            return out
        obj, idx = decoder.raw_decode(text, idx)
        out.append(obj)


def test_crd_manifests_and_examples_apply_and_read_back(sre):
    if CRD_DIR.is_dir():
        out = sre("apply", "-f", str(CRD_DIR)).stdout
        assert "alerts.tarsy.dev" in out
    crds = sre.json("get", "crd")["items"]
    plurals = {c["spec"]["names"]["plural"] for c in crds if c["spec"]["group"] == "tarsy.dev"}
    assert plurals == {"alerts", "chains", "agentexecutions", "agents", "mcpservers", "llmproviders"}
    for crd in crds:
        assert {"type": "Established", "status": "True"}.items() <= crd["status"]["conditions"][1].items()

    if EXAMPLES_DIR.is_dir() and list(EXAMPLES_DIR.glob("*.yaml")):
        sre("apply", "-f", str(EXAMPLES_DIR))
        docs = [d for f in sorted(EXAMPLES_DIR.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    else:
        docs = [alert("web-0-crashloop")]
        sre.apply(docs)
    for doc in docs:
        plural = {"Alert": "alerts", "Chain": "chains", "AgentExecution": "agentexecutions", "Agent": "agents",
                  "MCPServer": "mcpservers", "LLMProvider": "llmproviders"}[doc["kind"]]
        got = sre.json("get", f"{plural}.tarsy.dev", "-n", doc["metadata"].get("namespace", NS), doc["metadata"]["name"])
        meta = got["metadata"]
        assert got["kind"] == doc["kind"] and got["apiVersion"] == "tarsy.dev/v1alpha1"
        assert meta["namespace"] == doc["metadata"].get("namespace", NS)
        assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
        assert int(meta["resourceVersion"]) > 0
        assert got["spec"] == doc["spec"]
        assert "status" not in got, "status is dropped on create for kinds with a status subresource"

    listed = json.loads(sre("get", "--raw", f"/apis/tarsy.dev/v1alpha1/namespaces/{NS}/alerts").stdout)
    assert listed["kind"] == "AlertList" and listed["apiVersion"] == "tarsy.dev/v1alpha1"
    assert int(listed["metadata"]["resourceVersion"]) >= max(int(i["metadata"]["resourceVersion"]) for i in listed["items"])
    table = sre("get", "alerts", "-n", NS).stdout
    assert table.splitlines()[0].split() == ["NAME", "TYPE", "PHASE", "STAGE", "SCORE", "COST", "AGE"]
    assert "KubePodCrashLooping" in table


def test_status_subresource_and_generation(sre):
    sre.apply(alert("a1"))
    sre("patch", "alert", "a1", "-n", NS, "--subresource=status", "--type=merge",
        "-p", '{"status": {"phase": "InProgress"}, "spec": {"alertType": "Ignored"}}')
    got = sre.json("get", "alert", "a1", "-n", NS)
    assert got["status"] == {"phase": "InProgress"}
    assert got["spec"]["alertType"] == "KubePodCrashLooping", "a /status patch changes only .status"
    assert got["metadata"]["generation"] == 1, "status changes do not bump generation"

    sre("patch", "alert", "a1", "-n", NS, "--type=merge", "-p", '{"metadata": {"labels": {"team": "sre"}}}')
    assert sre.json("get", "alert", "a1", "-n", NS)["metadata"]["generation"] == 1, "metadata changes do not either"

    sre("patch", "alert", "a1", "-n", NS, "--type=merge",
        "-p", '{"spec": {"runbookUrl": "https://example.com/rb"}, "status": {"phase": "Failed"}}')
    got = sre.json("get", "alert", "a1", "-n", NS)
    assert got["metadata"]["generation"] == 2, "spec changes bump generation"
    assert got["status"] == {"phase": "InProgress"}, "writes to the main resource ignore .status"

    # PUT to /status (kubectl replace --subresource=status) replaces status only.
    got["status"] = {"phase": "Completed"}
    got["spec"]["alertType"] = "AlsoIgnored"
    sre("replace", "--subresource=status", "-f", "-", input=json.dumps(got))
    got = sre.json("get", "alert", "a1", "-n", NS)
    assert got["status"] == {"phase": "Completed"} and got["spec"]["alertType"] == "KubePodCrashLooping"


def test_server_side_apply_creates_updates_and_is_idempotent(sre):
    doc = alert("ssa", status={"phase": "Completed"})
    assert "serverside-applied" in sre.apply(doc, "--server-side")
    first = sre.json("get", "alert", "ssa", "-n", NS, "--show-managed-fields")
    assert "status" not in first, "status in an applied configuration is ignored on the main resource"
    assert [(m["manager"], m["operation"]) for m in first["metadata"]["managedFields"]] == [("kubectl", "Apply")]

    sre.apply(doc, "--server-side")
    again = sre.json("get", "alert", "ssa", "-n", NS)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"], "a no-op apply changes nothing"

    doc["spec"]["author"] = "bob@example.com"
    sre.apply(doc, "--server-side", "--field-manager=other", "--force-conflicts")
    changed = sre.json("get", "alert", "ssa", "-n", NS, "--show-managed-fields")
    assert changed["spec"]["author"] == "bob@example.com" and changed["metadata"]["generation"] == 2
    assert {m["manager"] for m in changed["metadata"]["managedFields"]} == {"kubectl", "other"}

    # Apply to /status (what the operator does with one field manager).
    status_doc = {"apiVersion": "tarsy.dev/v1alpha1", "kind": "Alert", "metadata": {"name": "ssa", "namespace": NS},
                  "status": {"phase": "InProgress", "observedGeneration": 2}}
    sre("apply", "--server-side", "--subresource=status", "--field-manager=tarsy-operator", "-f", "-",
        input=json.dumps(status_doc))
    got = sre.json("get", "alert", "ssa", "-n", NS)
    assert got["status"] == {"phase": "InProgress", "observedGeneration": 2} and got["metadata"]["generation"] == 2


def test_label_and_field_selectors(sre):
    docs = [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": NS, "labels": labels}, "data": {"k": name}}
            for name, labels in (("a", {"app": "x1", "tier": "web"}), ("b", {"app": "x1"}),
                                 ("c", {"app": "y1", "tier": "db"}), ("d", {}))]
    sre.apply(docs)

    def names(*args: str) -> list[str]:
        return sorted(i["metadata"]["name"] for i in sre.json("get", "cm", "-n", NS, *args)["items"]
                      if i["metadata"]["name"] != "kube-root-ca.crt")
    assert names("-l", "app=x1,tier") == ["a"]
    assert names("-l", "app=x1") == ["a", "b"]
    assert names("-l", "app!=x1") == ["c", "d"]
    assert names("-l", "!tier") == ["b", "d"]
    assert names("-l", "tier in (web,db)") == ["a", "c"]
    assert names("-l", "app notin (x1)") == ["c", "d"]
    assert names("--field-selector", "metadata.name=c") == ["c"]
    assert names("--field-selector", "metadata.name!=c", "-l", "app") == ["a", "b"]


def test_watch_sees_changes_and_noop_patch_emits_no_event(emu, sre):
    watcher = sre.popen("get", "alerts", "-n", NS, "-w", "-o", "json", "--output-watch-events")
    try:
        wait_for_watch(emu, f"/namespaces/{NS}/alerts")  # kubectl lists, then watches from the list's revision
        sre.apply(alert("w1"))
        sre("patch", "alert", "w1", "-n", NS, "--type=merge", "-p", '{"spec": {"author": "alice"}}')
        rv = sre.json("get", "alert", "w1", "-n", NS)["metadata"]["resourceVersion"]
        out = sre("patch", "alert", "w1", "-n", NS, "--type=merge", "-p", '{"spec": {"author": "alice"}}').stdout
        assert "(no change)" in out
        assert sre.json("get", "alert", "w1", "-n", NS)["metadata"]["resourceVersion"] == rv
        sre("patch", "alert", "w1", "-n", NS, "--subresource=status", "--type=merge", "-p", '{"status": {"phase": "Completed"}}')
        sre("delete", "alert", "w1", "-n", NS)
        time.sleep(1.0)
    finally:
        watcher.terminate()
        stdout, _ = watcher.communicate(timeout=10)
    events = decode_stream(stdout)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "w1"), ("MODIFIED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 4, "every event carries a new, increasing resourceVersion"
    assert events[2]["object"]["status"] == {"phase": "Completed"}


def test_finalizers_hold_deletion_until_removed(sre):
    sre.apply(alert("fin", metadata={"name": "fin", "namespace": NS, "finalizers": ["tarsy.dev/session"]}))
    sre("delete", "alert", "fin", "-n", NS, "--wait=false")
    held = sre.json("get", "alert", "fin", "-n", NS)
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["tarsy.dev/session"]
    again = sre("delete", "alert", "fin", "-n", NS, "--wait=false")
    assert again.returncode == 0
    sre("patch", "alert", "fin", "-n", NS, "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    gone = sre("get", "alert", "fin", "-n", NS, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    # Without finalizers, deletion is immediate and `kubectl delete` (which waits) returns.
    sre.apply(alert("plain"))
    sre("delete", "alert", "plain", "-n", NS, timeout=15)
    assert sre("get", "alert", "plain", "-n", NS, check=False).returncode != 0


def _owned(sre, owner_plural: str, owner: str, docs: list[dict[str, Any]]) -> None:
    uid = sre.json("get", owner_plural, owner, "-n", NS)["metadata"]["uid"]
    kind = {"alerts": "Alert", "agentexecutions": "AgentExecution"}[owner_plural]
    for doc in docs:
        doc["metadata"]["ownerReferences"] = [{"apiVersion": "tarsy.dev/v1alpha1", "kind": kind, "name": owner,
                                               "uid": uid, "controller": True, "blockOwnerDeletion": True}]
    sre.apply(docs)


def _execution(name: str) -> dict[str, Any]:
    return {"apiVersion": "tarsy.dev/v1alpha1", "kind": "AgentExecution", "metadata": {"name": name, "namespace": NS},
            "spec": {"agentName": "KubernetesAgent"}}


def _cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"a": "b"}}


def test_owner_references_are_garbage_collected(sre):
    sre.apply(alert("owner"))
    _owned(sre, "alerts", "owner", [_execution("owner-s1")])
    _owned(sre, "agentexecutions", "owner-s1", [_cm("owner-s1-cm")])
    sre("delete", "alert", "owner", "-n", NS)
    eventually(lambda: sre("get", "ae", "owner-s1", "-n", NS, check=False).returncode != 0, what="execution GC")
    eventually(lambda: sre("get", "cm", "owner-s1-cm", "-n", NS, check=False).returncode != 0, what="grandchild GC")


def test_orphan_and_foreground_propagation(sre):
    sre.apply(alert("orphaner"))
    _owned(sre, "alerts", "orphaner", [_execution("orphan-s1")])
    sre("delete", "alert", "orphaner", "-n", NS, "--cascade=orphan")
    eventually(lambda: not sre.json("get", "ae", "orphan-s1", "-n", NS)["metadata"].get("ownerReferences"),
               what="owner reference removed from the orphan")
    assert sre("get", "alert", "orphaner", "-n", NS, check=False).returncode != 0

    sre.apply(alert("fg"))
    _owned(sre, "alerts", "fg", [_execution("fg-s1")])
    sre("patch", "ae", "fg-s1", "-n", NS, "--type=merge", "-p", '{"metadata": {"finalizers": ["test/hold"]}}')
    sre("delete", "alert", "fg", "-n", NS, "--cascade=foreground", "--wait=false")
    owner = eventually(lambda: sre.json("get", "alert", "fg", "-n", NS), what="owner")
    assert "foregroundDeletion" in owner["metadata"]["finalizers"] and owner["metadata"]["deletionTimestamp"]
    eventually(lambda: sre.json("get", "ae", "fg-s1", "-n", NS)["metadata"].get("deletionTimestamp"),
               what="dependent being deleted first")
    assert sre("get", "alert", "fg", "-n", NS, check=False).returncode == 0, "owner waits for its dependents"
    sre("patch", "ae", "fg-s1", "-n", NS, "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    eventually(lambda: sre("get", "alert", "fg", "-n", NS, check=False).returncode != 0, what="owner removed")


def test_stale_resource_version_is_a_conflict(sre):
    sre.apply(alert("cas"))
    stale = sre.json("get", "alert", "cas", "-n", NS)
    sre("patch", "alert", "cas", "-n", NS, "--type=merge", "-p", '{"spec": {"author": "first"}}')
    stale["spec"]["author"] = "second"
    out = sre("replace", "-f", "-", input=json.dumps(stale), check=False)
    assert out.returncode != 0 and "the object has been modified" in out.stderr and "Conflict" in out.stderr
    out = sre("patch", "alert", "cas", "-n", NS, "--type=merge", "-p",
              json.dumps({"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]},
                          "spec": {"author": "third"}}), check=False)
    assert out.returncode != 0 and "Conflict" in out.stderr
    assert sre.json("get", "alert", "cas", "-n", NS)["spec"]["author"] == "first"


def test_generate_name_and_already_exists(sre):
    doc = alert("x")
    doc["metadata"] = {"generateName": "gen-", "namespace": NS}
    out = sre("create", "-f", "-", input=json.dumps(doc)).stdout
    name = out.split()[0].split("/")[1]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5
    sre.apply(alert("dup"))
    out = sre("create", "-f", "-", input=json.dumps(alert("dup")), check=False)
    assert out.returncode != 0 and "AlreadyExists" in out.stderr


def test_explain_uses_the_crd_schema(sre):
    if not CRD_DIR.is_dir():
        pytest.skip("CRD manifests are not generated in this checkout")
    out = sre("explain", "alert.spec.alertType").stdout
    assert "Alert type" in out and "immutable" in out.lower()


def test_typed_create_commands_send_protobuf_that_is_understood(kubectl):
    kubectl("create", "namespace", "typed")
    kubectl("create", "secret", "generic", "llm-key", "-n", "typed", "--from-literal=api-key=s3cret")
    kubectl("create", "configmap", "cfg", "-n", "typed", "--from-literal=level=debug")
    kubectl("create", "serviceaccount", "investigator", "-n", "typed")
    secret = kubectl.json("get", "secret", "llm-key", "-n", "typed")
    assert secret["data"] == {"api-key": "czNjcmV0"} and secret["type"] == "Opaque"
    assert kubectl.json("get", "cm", "cfg", "-n", "typed")["data"] == {"level": "debug"}
    names = {sa["metadata"]["name"] for sa in kubectl.json("get", "sa", "-n", "typed")["items"]}
    assert names == {"default", "investigator"}
    assert kubectl.json("get", "ns", "typed")["spec"]["finalizers"] == ["kubernetes"]


def test_server_side_apply_tracks_field_ownership(sre):
    def apply(manager: str, spec: dict[str, Any], *extra: str) -> Any:
        doc = alert("own")
        doc["spec"].update(spec)
        return sre("apply", "--server-side", f"--field-manager={manager}", *extra, "-f", "-",
                   input=json.dumps(doc), check=False)

    assert apply("alice", {"author": "alice", "runbookUrl": "https://rb"}).returncode == 0
    clash = apply("bob", {"author": "bob"})
    assert clash.returncode != 0 and "conflict" in clash.stderr.lower() and '"alice"' in clash.stderr
    assert ".spec.author" in clash.stderr
    assert sre.json("get", "alert", "own", "-n", NS)["spec"]["author"] == "alice"
    assert apply("bob", {"author": "alice"}).returncode == 0, "same value: shared ownership, no conflict"
    assert apply("bob", {"author": "bob"}, "--force-conflicts").returncode == 0
    assert sre.json("get", "alert", "own", "-n", NS)["spec"]["author"] == "bob"
    # alice no longer owns author; she stops applying runbookUrl, which only she owned: removed.
    assert apply("alice", {}).returncode == 0
    spec = sre.json("get", "alert", "own", "-n", NS)["spec"]
    assert spec["author"] == "bob" and "runbookUrl" not in spec
    # A plain patch (an Update) takes ownership too: applying the old value now conflicts.
    sre("patch", "alert", "own", "-n", NS, "--type=merge", "-p", '{"spec": {"author": "carol"}}')
    clash = apply("bob", {"author": "bob"})
    assert clash.returncode != 0 and '"kubectl-patch"' in clash.stderr
