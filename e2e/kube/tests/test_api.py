"""HTTP-level API semantics (what kube-rs sees): status errors, resourceVersion and
watch resumption, bookmarks, PUT, patch flavours, event conversion, namespaces."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from conftest import eventually

ALERTS = "/apis/tarsy.dev/v1alpha1/namespaces/default/alerts"


class Api:
    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def ok(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        code, out = self.call(method, path, body, content_type)
        assert code in (200, 201), (code, out)
        return out

    def watch(self, path: str, count: int, timeout: float = 5, accept: str | None = None) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        headers = {"Accept": accept} if accept else {}
        with urllib.request.urlopen(urllib.request.Request(self.base + path, headers=headers), timeout=timeout) as resp:
            for line in resp:
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= count:
                    break
        return events


@pytest.fixture
def api(emu) -> Api:
    return Api(emu.url)


def alert(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "tarsy.dev/v1alpha1", "kind": "Alert", "metadata": {"name": name},
            "spec": {"alertType": "T", "data": "d", **spec}}


def test_errors_carry_standard_reasons(api):
    code, body = api.call("GET", f"{ALERTS}/missing")
    assert (code, body["reason"], body["kind"]) == (404, "NotFound", "Status")
    assert body["message"] == 'alerts.tarsy.dev "missing" not found'
    assert body["details"] == {"name": "missing", "group": "tarsy.dev", "kind": "alerts"}
    api.ok("POST", ALERTS, alert("a"))
    code, body = api.call("POST", ALERTS, alert("a"))
    assert (code, body["reason"]) == (409, "AlreadyExists")
    code, body = api.call("POST", ALERTS, alert("Not_Valid"))
    assert (code, body["reason"]) == (422, "Invalid")
    code, body = api.call("POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert (code, body["reason"]) == (422, "Invalid")
    code, body = api.call("POST", "/apis/tarsy.dev/v1alpha1/namespaces/nowhere/alerts", alert("b"))
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'namespaces "nowhere" not found')
    code, body = api.call("GET", "/apis/tarsy.dev/v1alpha1/namespaces/default/nothings")
    assert (code, body["reason"]) == (404, "NotFound")
    code, body = api.call("PATCH", f"{ALERTS}/a", '[{"op": "test", "path": "/spec/alertType", "value": "other"}]',
                          "application/json-patch+json")
    assert (code, body["reason"]) == (422, "Invalid")
    code, body = api.call("PATCH", f"{ALERTS}/a", {"spec": {}}, "application/strategic-merge-patch+json")
    assert code == 415, "custom resources do not support strategic merge patch"


def test_resource_versions_are_monotonic_and_watch_resumes_from_one(api):
    first = api.ok("POST", ALERTS, alert("r1"))
    listed = api.ok("GET", ALERTS)
    assert listed["kind"] == "AlertList" and listed["apiVersion"] == "tarsy.dev/v1alpha1"
    list_rv = int(listed["metadata"]["resourceVersion"])
    assert list_rv >= int(first["metadata"]["resourceVersion"])
    second = api.ok("POST", ALERTS, alert("r2"))
    patched = api.ok("PATCH", f"{ALERTS}/r1", {"spec": {"author": "x"}}, "application/merge-patch+json")
    assert list_rv < int(second["metadata"]["resourceVersion"]) < int(patched["metadata"]["resourceVersion"])
    # A watch from the list's resourceVersion replays exactly what happened after it.
    events = api.watch(f"{ALERTS}?watch=true&resourceVersion={list_rv}&timeoutSeconds=2", 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "r2"), ("MODIFIED", "r1")]
    assert events[1]["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    # Without a resourceVersion: synthetic ADDED events for what exists.
    events = api.watch(f"{ALERTS}?watch=true&timeoutSeconds=1", 2)
    assert sorted(e["object"]["metadata"]["name"] for e in events) == ["r1", "r2"]


def test_watch_streaming_list_bookmark_and_expiry(emu, api):
    api.ok("POST", ALERTS, alert("b1"))
    events = api.watch(f"{ALERTS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                       "&allowWatchBookmarks=true&timeoutSeconds=2", 2)
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # Forget old history: a watch from before it gets 410 Expired, as from a real server.
    emu.call(setattr, emu.emulator, "event_log_limit", 4)
    for i in range(10):
        api.ok("PATCH", f"{ALERTS}/b1", {"spec": {"author": str(i)}}, "application/merge-patch+json")
    events = api.watch(f"{ALERTS}?watch=true&resourceVersion=1&timeoutSeconds=2", 1)
    assert events[0]["type"] == "ERROR"
    assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")


def test_watch_with_label_selector_sees_objects_enter_and_leave(api):
    api.ok("POST", ALERTS, {**alert("sel"), "metadata": {"name": "sel", "labels": {"team": "a"}}})
    rv = api.ok("GET", ALERTS)["metadata"]["resourceVersion"]
    result: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: result.extend(
        api.watch(f"{ALERTS}?watch=true&labelSelector=team%3Db&resourceVersion={rv}&timeoutSeconds=3", 2)))
    t.start()
    api.ok("PATCH", f"{ALERTS}/sel", {"metadata": {"labels": {"team": "b"}}}, "application/merge-patch+json")
    api.ok("PATCH", f"{ALERTS}/sel", {"metadata": {"labels": {"team": "c"}}}, "application/merge-patch+json")
    t.join(5)
    assert [e["type"] for e in result] == ["ADDED", "DELETED"]


def test_metadata_only_lists_and_watches(api):
    """kube-rs `metadata_watcher`: lists and watch events carry metadata only."""
    api.ok("POST", ALERTS, {**alert("m1"), "metadata": {"name": "m1", "labels": {"team": "a"}}})
    req = urllib.request.Request(api.base + ALERTS, headers={
        "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        listed = json.loads(resp.read())
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert listed["metadata"]["resourceVersion"]
    [item] = listed["items"]
    assert item["kind"] == "PartialObjectMetadata" and item["metadata"]["labels"] == {"team": "a"}
    assert "spec" not in item
    rv = listed["metadata"]["resourceVersion"]
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    result: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: result.extend(
        api.watch(f"{ALERTS}?watch=true&resourceVersion={rv}&timeoutSeconds=3", 1, accept=accept)))
    t.start()
    # A status change is an event too (a real server sends one per resourceVersion).
    api.ok("PATCH", f"{ALERTS}/m1/status", {"status": {"phase": "InProgress"}}, "application/merge-patch+json")
    t.join(5)
    [event] = result
    assert event["type"] == "MODIFIED"
    assert event["object"]["kind"] == "PartialObjectMetadata" and set(event["object"]) == {"kind", "apiVersion", "metadata"}
    # Without the media type parameter: whole objects, as before.
    assert "spec" in api.ok("GET", ALERTS)["items"][0]


def test_put_replaces_and_requires_a_resource_version_for_custom_resources(api):
    created = api.ok("POST", ALERTS, alert("put", author="a"))
    replacement = alert("put", runbookUrl="https://rb")
    code, body = api.call("PUT", f"{ALERTS}/put", replacement)
    assert (code, body["reason"]) == (422, "Invalid")
    replacement["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    replaced = api.ok("PUT", f"{ALERTS}/put", replacement)
    assert replaced["spec"] == {"alertType": "T", "data": "d", "runbookUrl": "https://rb"}, "PUT replaces, no merge"
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"] and replaced["metadata"]["generation"] == 2
    code, body = api.call("PUT", f"{ALERTS}/put", replacement)
    assert (code, body["reason"]) == (409, "Conflict")
    code, body = api.call("PUT", f"{ALERTS}/absent", {**alert("absent"), "metadata": {"name": "absent", "resourceVersion": "1"}})
    assert (code, body["reason"]) == (404, "NotFound")


def test_apply_to_create_with_a_yaml_body(api):
    body = "apiVersion: tarsy.dev/v1alpha1\nkind: Alert\nmetadata:\n  name: yml\nspec:\n  alertType: T\n  data: d\n"
    code, out = api.call("PATCH", f"{ALERTS}/yml?fieldManager=test", body, "application/apply-patch+yaml")
    assert code == 201 or code == 200, out
    assert out["metadata"]["managedFields"][0]["manager"] == "test"
    code, out = api.call("PATCH", f"{ALERTS}/yml", body, "application/apply-patch+yaml")
    assert (code, out["reason"]) == (400, "BadRequest"), "apply needs a fieldManager"


def test_strategic_merge_patch_merges_containers_by_name(api):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smp"},
           "spec": {"containers": [{"name": "a", "image": "example.invalid/a:1"},
                                   {"name": "b", "image": "example.invalid/b:1"}]}}
    api.ok("POST", "/api/v1/namespaces/default/pods", pod)
    out = api.ok("PATCH", "/api/v1/namespaces/default/pods/smp",
                 {"spec": {"containers": [{"name": "b", "image": "example.invalid/c:2"}]}},
                 "application/strategic-merge-patch+json")
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("a", "example.invalid/a:1"),
                                                                            ("b", "example.invalid/c:2")]
    assert out["status"]["phase"] == "Pending"


def test_events_api_versions_share_one_store(api):
    now = "2026-01-01T00:00:00.000000Z"
    api.ok("POST", "/apis/events.k8s.io/v1/namespaces/default/events", {
        "metadata": {"name": "e1"}, "eventTime": now, "reportingController": "tarsy.dev/operator",
        "reportingInstance": "op-0", "action": "Reconcile", "reason": "StageStarted", "type": "Normal",
        "note": "stage 1 started", "regarding": {"kind": "Alert", "name": "a", "namespace": "default"}})
    core = api.ok("GET", "/api/v1/namespaces/default/events/e1")
    assert core["message"] == "stage 1 started" and core["involvedObject"]["name"] == "a"
    assert core["reportingComponent"] == "tarsy.dev/operator" and core["apiVersion"] == "v1"
    listed = api.ok("GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DAlert")
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e1"]
    new = api.ok("GET", "/apis/events.k8s.io/v1/namespaces/default/events/e1")
    assert new["note"] == "stage 1 started" and new["regarding"]["name"] == "a"


def test_deleting_a_namespace_deletes_its_content(api):
    api.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "tmp"}})
    api.ok("POST", "/apis/tarsy.dev/v1alpha1/namespaces/tmp/alerts", alert("x"))
    sa = api.ok("GET", "/api/v1/namespaces/tmp/serviceaccounts/default")
    assert sa["metadata"]["namespace"] == "tmp"
    gone = api.ok("DELETE", "/api/v1/namespaces/tmp")
    assert gone["status"]["phase"] == "Terminating"
    eventually(lambda: api.call("GET", "/api/v1/namespaces/tmp")[0] == 404, what="namespace removed")
    assert api.call("GET", "/apis/tarsy.dev/v1alpha1/namespaces/tmp/alerts/x")[0] == 404


def test_dry_run_and_injected_faults(api, emu):
    out = api.ok("POST", f"{ALERTS}?dryRun=All", alert("dry"))
    assert out["metadata"]["name"] == "dry"
    assert api.call("GET", f"{ALERTS}/dry")[0] == 404
    api.ok("POST", "/kubeemu/v1/faults", {"method": "POST", "path": "/alerts$", "status": 500, "count": 1})
    code, body = api.call("POST", ALERTS, alert("f"))
    assert (code, body["reason"]) == (500, "InternalError")
    assert api.call("GET", f"{ALERTS}/f")[0] == 404, "a failed request changes nothing"
    api.ok("POST", ALERTS, alert("f"))


def test_discovery_documents(api):
    assert api.ok("GET", "/api")["versions"] == ["v1"]
    groups = {g["name"]: g for g in api.ok("GET", "/apis")["groups"]}
    for group in ("tarsy.dev", "coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"):
        assert group in groups
    assert groups["tarsy.dev"]["preferredVersion"]["version"] == "v1alpha1"
    resources = {r["name"]: r for r in api.ok("GET", "/apis/tarsy.dev/v1alpha1")["resources"]}
    assert resources["alerts"]["kind"] == "Alert" and resources["alerts"]["namespaced"] is True
    assert "alerts/status" in resources and "watch" in resources["alerts"]["verbs"]
    core = {r["name"] for r in api.ok("GET", "/api/v1")["resources"]}
    assert {"pods", "pods/status", "pods/log", "events", "configmaps", "secrets", "serviceaccounts",
            "namespaces"} <= core
    assert {r["name"] for r in api.ok("GET", "/apis/coordination.k8s.io/v1")["resources"]} == {"leases"}


def test_json_patch_finalizer_protocol_of_kube_rs(api):
    """kube-rs' `finalizer()` adds with `test null` + `add`, removes with `test` + `remove`."""
    api.ok("POST", ALERTS, alert("jp"))
    fin = "tarsy.dev/cleanup"
    add = [{"op": "test", "path": "/metadata/finalizers", "value": None},
           {"op": "add", "path": "/metadata/finalizers", "value": [fin]}]
    out = api.ok("PATCH", f"{ALERTS}/jp", add, "application/json-patch+json")
    assert out["metadata"]["finalizers"] == [fin]
    code, body = api.call("PATCH", f"{ALERTS}/jp", add, "application/json-patch+json")
    assert (code, body["reason"]) == (422, "Invalid"), "test null fails once finalizers exist"
    api.ok("DELETE", f"{ALERTS}/jp")
    remove = [{"op": "test", "path": "/metadata/finalizers/0", "value": fin},
              {"op": "remove", "path": "/metadata/finalizers/0"}]
    gone = api.ok("PATCH", f"{ALERTS}/jp", remove, "application/json-patch+json")
    assert gone["metadata"]["deletionTimestamp"]
    assert api.call("GET", f"{ALERTS}/jp")[0] == 404


def test_leases_for_leader_election(api):
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = api.ok("POST", leases, {"metadata": {"name": "tarsy-operator"},
                                     "spec": {"holderIdentity": "op-0", "leaseDurationSeconds": 15}})
    taken = {**lease, "spec": {**lease["spec"], "holderIdentity": "op-1"}}
    api.ok("PUT", f"{leases}/tarsy-operator", taken)
    stale = {**lease, "spec": {**lease["spec"], "holderIdentity": "op-2"}}
    code, body = api.call("PUT", f"{leases}/tarsy-operator", stale)
    assert (code, body["reason"]) == (409, "Conflict"), "only one replica wins a lease update"
    assert api.ok("GET", f"{leases}/tarsy-operator")["spec"]["holderIdentity"] == "op-1"
    ev = api.ok("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
    assert ev["kind"] == "EventList"


def test_lease_takeover_race_has_one_winner(api):
    """kube-lease-manager locks an orphaned Lease with a non-forced apply per identity:
    the second contender must get 409 Conflict, not overwrite the first."""
    leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    api.ok("POST", leases, {"metadata": {"name": "leader"}, "spec": {}})

    def lock(identity: str) -> tuple[int, Any]:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "spec": {"holderIdentity": identity, "leaseDurationSeconds": 15,
                         "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z"}}
        return api.call("PATCH", f"{leases}/leader?fieldManager={identity}", body, "application/apply-patch+yaml")
    assert lock("op-0")[0] == 200
    code, body = lock("op-1")
    assert (code, body["reason"]) == (409, "Conflict")
    assert api.ok("GET", f"{leases}/leader")["spec"]["holderIdentity"] == "op-0"
    # Release (strategic patch to null, as kube-lease-manager does), then op-1 can lock.
    api.ok("PATCH", f"{leases}/leader?fieldManager=op-0",
           {"spec": {"holderIdentity": None, "acquireTime": None, "renewTime": None, "leaseDurationSeconds": None}},
           "application/strategic-merge-patch+json")
    assert lock("op-1")[0] == 200
    assert api.ok("GET", f"{leases}/leader")["spec"]["holderIdentity"] == "op-1"
