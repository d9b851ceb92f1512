"""kube-rs 5 against the emulator (opt-in: TARSY_KUBE_RUST_SMOKE=1, compiles kube)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import time

import pytest

from tarsy_kube_emulator import BackgroundEmulator

SMOKE = pathlib.Path(__file__).resolve().parents[1] / "rust-smoke"


@pytest.mark.skipif(os.environ.get("TARSY_KUBE_RUST_SMOKE") != "1",
                    reason="set TARSY_KUBE_RUST_SMOKE=1 to build and run the kube-rs smoke test (slow)")
def test_kube_rs_controller_reconciles_through_the_emulator(tmp_path):
    target = os.environ.get("TARSY_KUBE_RUST_SMOKE_TARGET") or os.environ.get("CARGO_TARGET_DIR") or \
        str(pathlib.Path.home() / ".cache" / "tarsy" / "kube-rust-smoke-target")
    env = {**os.environ, "CARGO_TARGET_DIR": target}
    started = time.monotonic()
    build = subprocess.run(["cargo", "build", "--quiet", "--manifest-path", str(SMOKE / "Cargo.toml")],
                           env=env, capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, build.stderr
    print(f"rust-smoke build took {time.monotonic() - started:.0f}s")
    with BackgroundEmulator(kubeconfig_out=tmp_path / "kubeconfig"):
        run = subprocess.run([str(pathlib.Path(target) / "debug" / "kubeemu-rust-smoke")],
                             env={**env, "KUBECONFIG": str(tmp_path / "kubeconfig")},
                             capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    assert "SMOKE OK" in run.stdout
    for step in ("no reconcile loop while idle", "owned ConfigMap recreated", "finalizer cleanup ran",
                 "owned ConfigMap garbage-collected"):
        assert step in run.stdout
