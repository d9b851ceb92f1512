"""`python -m tarsy_kube_emulator` stops promptly on SIGTERM/SIGINT, as the Rust e2e
harness needs: pods stopped (SIGTERM, short grace, SIGKILL), open watches ended, exit 0."""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest

from conftest import eventually

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1]


class EmulatorProcess:
    """The emulator as the Rust harness runs it: a child process printing its URL."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tarsy_kube_emulator", "--port", "0", "--kubeconfig-out", str(tmp / "kc"),
             "--kubelet", "--kubelet-root", str(tmp / "kubelet")],
            cwd=PACKAGE_DIR, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR)})
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), f"no URL printed; stderr: {self._stderr()}"

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def create_pod(self, name: str, script: str) -> None:
        self.request("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}]}})

    def stop_and_time(self, sig: signal.Signals, timeout: float) -> tuple[int | None, float]:
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code: int | None = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class RawWatch:
    """A watch held open the way kube-rs holds it (HTTP/1.1, chunked, keep-alive),
    read on a thread so the test can see the server end the stream."""

    def __init__(self, url: str, path: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self.conn.request("GET", path, headers={"Connection": "keep-alive"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200
        self.events: list[dict[str, Any]] = []
        self.ended = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while line := self.resp.readline():
                self.events.append(json.loads(line))
        except (OSError, http.client.HTTPException, ValueError):
            pass
        self.ended.set()

    def close(self) -> None:
        self.conn.close()


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_pids(path: pathlib.Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() and path.read_text().endswith("\n") else []


@pytest.fixture
def running(tmp_path: pathlib.Path):
    """An emulator with two running pods (one leaves on SIGTERM, one ignores it) and
    two open watches (kubectl's and a raw one)."""
    emu = EmulatorProcess(tmp_path)
    kubectl: subprocess.Popen[str] | None = None
    watch: RawWatch | None = None
    try:
        watch = RawWatch(emu.url, "/api/v1/namespaces/default/pods?watch=true&allowWatchBookmarks=true")
        kubectl = subprocess.Popen(["kubectl", "--kubeconfig", str(tmp_path / "kc"), "get", "pods", "-w"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "KUBECACHEDIR": str(tmp_path / "kube-cache")})
        graceful_pids, stubborn_pids, marker = tmp_path / "graceful.pids", tmp_path / "stubborn.pids", tmp_path / "bye"
        emu.create_pod("graceful", f"trap 'echo bye > {marker}; exit 0' TERM; echo $$ > {graceful_pids}; "
                                   "while true; do sleep 0.1; done")
        emu.create_pod("stubborn", f"trap '' TERM; sleep 300 & echo $$ $! > {stubborn_pids}; wait")
        pids = eventually(lambda: (read_pids(graceful_pids) + read_pids(stubborn_pids)
                                   if read_pids(graceful_pids) and read_pids(stubborn_pids) else None),
                          timeout=15, what="both pods running")
        eventually(lambda: any(e["object"]["metadata"]["name"] == "stubborn"
                               and e["object"]["status"].get("phase") == "Running" for e in watch.events),
                   timeout=15, what="the watch to report the running pod")
        yield emu, watch, pids, marker
    finally:
        emu.kill()
        if kubectl is not None:
            kubectl.kill()
            kubectl.wait()
        if watch is not None:
            watch.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_pods_ends_watches_and_exits_promptly(running, sig):
    emu, watch, pids, marker = running
    assert all(alive(p) for p in pids)
    code, took = emu.stop_and_time(sig, timeout=15)
    assert code == 0, f"exit status {code} after {took:.1f} s; stderr: {emu._stderr()}"
    assert took < 5, f"took {took:.1f} s to exit"
    assert not [p for p in pids if alive(p)], "pod processes survived the emulator"
    assert marker.read_text().strip() == "bye", "pods get SIGTERM before SIGKILL"
    assert watch.ended.wait(5), "the open watch was not ended"


def test_second_signal_exits_at_once(running):
    emu, _, pids, _ = running
    emu.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)  # inside the stubborn pod's 1 s grace
    code, took = emu.stop_and_time(signal.SIGTERM, timeout=15)
    assert code == 1, f"exit status {code}; stderr: {emu._stderr()}"
    assert took < 1, f"took {took:.1f} s to exit"
    assert "again while stopping" in emu._stderr()
    eventually(lambda: not [p for p in pids if alive(p)], timeout=2, what="pod processes gone")
