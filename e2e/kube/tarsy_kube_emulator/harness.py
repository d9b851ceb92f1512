"""Running the emulator: an async context manager, a thread-backed synchronous
wrapper for tests, and the kubeconfig clients use to reach it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import pathlib
import threading
from typing import Any, Callable, Iterable, TypeVar

import kmock
import yaml

from . import resources
from .emulator import KubeEmulator

T = TypeVar("T")

# The repository's generated CRD manifests, when the package runs from a checkout.
REPO_CRDS = pathlib.Path(__file__).resolve().parents[3] / "kubernetes" / "crds" / "manifests"

# Seconds aiohttp gives a request handler still running when the server stops.
SERVER_SHUTDOWN_TIMEOUT = 1.0


def write_kubeconfig(path: str | pathlib.Path, url: str, namespace: str = "default") -> pathlib.Path:
    """A kubeconfig with one context `kubeemu`: plain http, no credentials."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubeemu", "cluster": {"server": url}}],
        "users": [{"name": "kubeemu", "user": {}}],
        "contexts": [{"name": "kubeemu", "context": {"cluster": "kubeemu", "user": "kubeemu", "namespace": namespace}}],
        "current-context": "kubeemu",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def load_crds(emulator: KubeEmulator, paths: Iterable[pathlib.Path] | None = None) -> list[str]:
    """Register CRDs from manifest files/folders; TARSy's kinds from the repository's
    manifests (or built-in fallbacks) when no path is given. Returns the kinds served."""
    if paths is None:
        paths = [REPO_CRDS] if REPO_CRDS.is_dir() else []
        if not paths:
            for kind in resources.TARSY_FALLBACK_KINDS:
                emulator.register(kind)
            return [k.kind for k in resources.TARSY_FALLBACK_KINDS]
    served = []
    for crd in resources.load_crd_documents(paths):
        served += [k.kind for k in emulator.register_crd(crd)]
    return served


class EmulatorServer:
    """`async with EmulatorServer(...) as srv:` — the emulator on a local port, plus
    (optionally) the kubelet, and a kubeconfig pointing at it."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, kubeconfig_out: str | pathlib.Path | None = None,
                 crd_paths: Iterable[str | pathlib.Path] | None = None, kubelet: bool = False,
                 kubelet_options: dict[str, Any] | None = None, emulator: KubeEmulator | None = None,
                 pod_stop_grace: float = 1.0) -> None:
        self.emulator = emulator or KubeEmulator()
        self.pod_stop_grace = pod_stop_grace
        self.host, self.port = host, port
        self.kubeconfig_out = pathlib.Path(kubeconfig_out) if kubeconfig_out else None
        self.crd_paths = [pathlib.Path(p) for p in crd_paths] if crd_paths is not None else None
        self.with_kubelet = kubelet
        self.kubelet_options = kubelet_options or {}
        self.kubelet: Any = None
        self._server: kmock.Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not running"
        return str(self._server.url).rstrip("/")

    async def __aenter__(self) -> "EmulatorServer":
        load_crds(self.emulator, self.crd_paths)
        await self.emulator.__aenter__()
        self._server = kmock.Server(self.emulator, host=self.host, port=self.port or None, user_agent="")
        await self._server.__aenter__()
        # aiohttp waits up to 60 s (twice) for running handlers when it stops. Ours end
        # at once on shutdown (watches are closed first); this bounds anything else.
        runner = getattr(self._server.server, "runner", None)
        if runner is not None and hasattr(runner, "_shutdown_timeout"):
            runner._shutdown_timeout = SERVER_SHUTDOWN_TIMEOUT
        if self.kubeconfig_out is not None:
            write_kubeconfig(self.kubeconfig_out, self.url)
        if self.with_kubelet:
            from .kubelet import Kubelet
            self.kubelet = Kubelet(self.emulator, api_url=self.url, **self.kubelet_options)
            await self.kubelet.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        # Pods first, while the API still answers (a stopping pod may write to it), then
        # the watch streams (the HTTP server would wait for them), then the server.
        try:
            if self.kubelet is not None:
                await self.kubelet.stop(self.pod_stop_grace)
        finally:
            self.emulator.close_watches()
            if self._server is not None:
                await self._server.__aexit__(*exc)
            await self.emulator.__aexit__(*exc)


class BackgroundEmulator:
    """A synchronous handle for tests: the emulator runs on its own event loop thread.

    Use `call(fn, *args)` to run emulator/kubelet methods on that loop (they are not
    thread-safe) and `run(coro)` for coroutines.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubeemu", daemon=True)
        self.server: EmulatorServer | None = None

    def __enter__(self) -> "BackgroundEmulator":
        self._thread.start()
        self.server = self.run(self._start())
        return self

    async def _start(self) -> EmulatorServer:
        server = EmulatorServer(**self._kwargs)
        return await server.__aenter__()

    def __exit__(self, *exc: Any) -> None:
        if self.server is not None:
            self.run(self.server.__aexit__(None, None, None))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def run(self, coro: Any, timeout: float | None = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def invoke() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:  # delivered to the calling thread
                future.set_exception(e)
        self._loop.call_soon_threadsafe(invoke)
        return future.result(60)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def emulator(self) -> KubeEmulator:
        assert self.server is not None
        return self.server.emulator

    @property
    def kubelet(self) -> Any:
        assert self.server is not None
        return self.server.kubelet

    def get(self, group: str, version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The current object (a copy), or None."""
        emu = self.emulator
        return self.call(lambda: emu.get_object(emu.kind_of(group, version, plural), namespace, name))
