"""Fixtures: an emulator per test (with its kubelet) and a real `kubectl` pointed at it."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import time
from typing import Any, Callable

import pytest
import yaml

from tarsy_kube_emulator import BackgroundEmulator

REPO = pathlib.Path(__file__).resolve().parents[3]
CRD_DIR = REPO / "kubernetes" / "crds" / "manifests"
EXAMPLES_DIR = REPO / "kubernetes" / "crds" / "examples"


class Kubectl:
    """Runs the real kubectl binary against one emulator."""

    def __init__(self, kubeconfig: pathlib.Path, cache: pathlib.Path) -> None:
        binary = shutil.which("kubectl")
        if binary is None:
            pytest.fail("kubectl is required on PATH for the emulator tests")
        self.binary = binary
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(cache)}

    def __call__(self, *args: str, input: str | None = None, check: bool = True,
                 timeout: float = 30) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.binary, *args], input=input, capture_output=True, text=True,
                              env=self.env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json").stdout)

    def apply(self, docs: list[dict[str, Any]] | dict[str, Any], *extra: str) -> str:
        docs = docs if isinstance(docs, list) else [docs]
        return self("apply", *extra, "-f", "-", input=yaml.safe_dump_all(docs)).stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env)


@pytest.fixture
def emu(tmp_path: pathlib.Path) -> BackgroundEmulator:
    with BackgroundEmulator(kubeconfig_out=tmp_path / "kubeconfig", kubelet=True,
                            kubelet_options={"root": tmp_path / "kubelet"}) as handle:
        yield handle
        errors = handle.call(lambda: list(handle.emulator._errors[-1]) if handle.emulator._errors else [])
        assert not errors, f"the emulator failed internally: {errors!r}"


@pytest.fixture
def kubectl(emu: BackgroundEmulator, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(tmp_path / "kubeconfig", tmp_path / "kube-cache")


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll until `check()` returns a truthy value; fail with the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or check}: last value {last!r}")


def wait_for_watch(emu: BackgroundEmulator, path_part: str, timeout: float = 20.0) -> None:
    """Block until a client has opened a watch whose path contains `path_part`."""
    def opened() -> bool:
        requests = emu.call(lambda: list(emu.emulator._requests))
        return any(r.params.get("watch") in ("true", "1") and path_part in r.url.path for r in requests)
    eventually(opened, timeout=timeout, what=f"a watch on {path_part}")
