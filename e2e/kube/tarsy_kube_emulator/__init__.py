"""A Kubernetes API emulator for TARSy's end-to-end tests, built on PyPI `kmock`.

`KubeEmulator` adds the API semantics controllers rely on (README.md lists them);
`Kubelet` runs pods as local processes; `EmulatorServer` / `BackgroundEmulator` run
both on a local port with a kubeconfig for clients.
"""

from .emulator import KubeEmulator, Record, parse_api_path
from .errors import ApiError
from .harness import BackgroundEmulator, EmulatorServer, load_crds, write_kubeconfig
from .kubelet import Kubelet
from .resources import BUILTIN_KINDS, Kind, kinds_from_crd

__all__ = [
    "ApiError", "BUILTIN_KINDS", "BackgroundEmulator", "EmulatorServer", "Kind", "KubeEmulator", "Kubelet", "Record",
    "kinds_from_crd", "load_crds", "parse_api_path", "write_kubeconfig",
]
