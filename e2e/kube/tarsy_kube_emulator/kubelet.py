"""A small kubelet: runs the containers of pods stored in the emulator as local
processes and reports pod phases and container states back through the API store."""

from __future__ import annotations

import asyncio
import base64
import copy
import fnmatch
import os
import pathlib
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import kmock

from .emulator import KubeEmulator, now_rfc3339
from .errors import ApiError
from .harness import write_kubeconfig

# Images that stand for "the host's own tools": a container with one of these runs its
# `command` with the host's executables (e.g. `busybox` + `sh -c ...`).
DEFAULT_HOST_IMAGES = ("busybox*", "alpine*", "debian*", "ubuntu*", "python*", "docker.io/library/*",
                       "registry.k8s.io/pause*", "kubeemu/host*")


_PODS = kmock.resource("", "v1", "pods")


@dataclass
class ImageEntry:
    """How an image maps to the host: its entrypoint and in-image paths that exist here."""

    entrypoint: list[str]
    paths: dict[str, str] = field(default_factory=dict)


def default_image_map() -> dict[str, ImageEntry]:
    """`tarsy` images run the locally built binary named by `TARSY_BIN` (when set)."""
    tarsy = os.environ.get("TARSY_BIN")
    if not tarsy:
        return {}
    entry = ImageEntry([tarsy], {"/usr/local/bin/tarsy": tarsy, "/usr/bin/tarsy": tarsy, "/tarsy": tarsy,
                                 "/bin/tarsy": tarsy})
    return {pattern: entry for pattern in ("tarsy", "tarsy:*", "*/tarsy", "*/tarsy:*", "*/tarsy@*")}


def _entry(value: Any) -> ImageEntry:
    if isinstance(value, ImageEntry):
        return value
    if isinstance(value, str):
        return ImageEntry([value])
    return ImageEntry(list(value.get("entrypoint") or []), dict(value.get("paths") or {}))


class ContainerConfigError(Exception):
    """The container cannot be configured yet (missing Secret/ConfigMap key)."""


@dataclass
class Container:
    spec: dict[str, Any]
    init: bool = False
    sidecar: bool = False
    process: asyncio.subprocess.Process | None = None
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    ready: bool = False
    started: bool = False
    restarts: int = 0
    ignored: str | None = None  # why a sidecar is not run
    oom: bool = False
    log_path: pathlib.Path | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    last_state: dict[str, Any] | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""

    @property
    def name(self) -> str:
        return self.spec["name"]

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "image": self.spec.get("image", ""), "imageID": "",
                               "ready": self.ready, "restartCount": self.restarts, "state": copy.deepcopy(self.state)}
        if self.last_state is not None:
            out["lastState"] = copy.deepcopy(self.last_state)
        if not self.init or self.sidecar:
            out["started"] = self.started
        return out


class PodWorker:
    """Runs one pod from acceptance to its terminal phase (and, if deleted, to removal)."""

    def __init__(self, kubelet: "Kubelet", pod: dict[str, Any]) -> None:
        self.kubelet = kubelet
        self.emu = kubelet.emu
        meta = pod["metadata"]
        self.namespace, self.name, self.uid = meta.get("namespace", ""), meta["name"], meta["uid"]
        self.spec = copy.deepcopy(pod.get("spec") or {})
        self.dir = kubelet.root / f"{self.namespace}_{self.name}_{self.uid[:8]}"
        self.containers = [Container(c) for c in self.spec.get("containers") or []]
        self.inits = [Container(c, init=True, sidecar=c.get("restartPolicy") == "Always")
                      for c in self.spec.get("initContainers") or []]
        self.stop_requested = asyncio.Event()
        self.stop_grace: float = float(self.spec.get("terminationGracePeriodSeconds", 30))
        self.phase = "Pending"
        self.reason: str | None = None
        self.message: str | None = None
        self.terminal_reason: str | None = None  # DeadlineExceeded, Evicted, ...
        self.finished = False
        self.deleted = False
        self.start_time = now_rfc3339()
        self.notes: list[str] = []
        self.task: asyncio.Task[None] | None = None
        self.probes: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------- status

    def _pod_kind(self) -> Any:
        return self.emu.kind_of("", "v1", "pods")

    def _current(self) -> dict[str, Any] | None:
        pod = self.emu.get_object(self._pod_kind(), self.namespace, self.name)
        if pod is None or pod["metadata"].get("uid") != self.uid:
            return None
        return pod

    def publish(self) -> None:
        pod = self._current()
        if pod is None:
            return
        all_run = [c for c in self.containers + [i for i in self.inits if i.sidecar] if not c.ignored]
        ready = self.phase == "Running" and all(c.ready for c in all_run)
        initialized = all(c.started if c.sidecar else "terminated" in c.state for c in self.inits if not c.ignored)
        now = now_rfc3339()
        old_conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}

        def cond(kind: str, value: bool, reason: str | None = None) -> dict[str, Any]:
            status = "True" if value else "False"
            previous = old_conditions.get(kind)
            out = {"type": kind, "status": status,
                   "lastTransitionTime": previous["lastTransitionTime"] if previous and previous["status"] == status else now}
            if reason and not value:
                out["reason"] = reason
            return out
        status: dict[str, Any] = {
            "phase": self.phase,
            "conditions": [
                cond("PodScheduled", True),
                cond("Initialized", initialized, "ContainersNotInitialized"),
                cond("ContainersReady", ready, "ContainersNotReady"),
                cond("Ready", ready, "ContainersNotReady"),
            ],
            "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "qosClass": (pod.get("status") or {}).get("qosClass", "BestEffort"),
            "containerStatuses": [c.status() for c in self.containers],
        }
        if self.inits:
            status["initContainerStatuses"] = [c.status() for c in self.inits]
        if self.reason:
            status["reason"] = self.reason
        if self.message:
            status["message"] = self.message
        new = copy.deepcopy(pod)
        new["status"] = status
        try:
            self.emu.replace_object(self._pod_kind(), self.namespace, self.name, new, subresource="status",
                                    field_manager="kubelet")
        except ApiError:
            pass  # removed meanwhile

    def event(self, reason: str, message: str, type_: str = "Normal") -> None:
        self.kubelet.record_event(self.namespace, self.name, self.uid, reason, message, type_)

    # ---------------------------------------------------------------- running

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self.finished = True
            for probe in list(self.probes):
                probe.cancel()
            for c in self.containers + self.inits:
                await self._kill(c, 0)
            if self.deleted or self.stop_requested.is_set() and self._deleting():
                self._remove()

    def _deleting(self) -> bool:
        pod = self._current()
        return pod is not None and bool(pod["metadata"].get("deletionTimestamp"))

    def _remove(self) -> None:
        try:
            self.emu.delete_object(self._pod_kind(), self.namespace, self.name,
                                   {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}})
        except ApiError:
            pass

    async def _run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._bind()
        self.publish()
        deadline = self.spec.get("activeDeadlineSeconds")
        deadline_task = asyncio.create_task(self._deadline(float(deadline))) if deadline else None
        try:
            ok = await self._start_all()
            if ok:
                await self._wait_main()
        finally:
            if deadline_task is not None:
                deadline_task.cancel()
        await self._terminate_all(self.stop_grace if self.stop_requested.is_set() else 0.0, sidecars_only=False)
        self._final_phase()
        self.publish()

    def _bind(self) -> None:
        pod = self._current()
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            return
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = self.kubelet.node_name
        try:
            self.emu._update(self._pod_kind(), self.emu._key(self._pod_kind(), self.namespace, self.name), pod,
                             new, None, False)
        except ApiError:
            pass
        self.event("Scheduled", f"Successfully assigned {self.namespace}/{self.name} to {self.kubelet.node_name}")

    async def _deadline(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.terminal_reason = "DeadlineExceeded"
        self.message = "Pod was active on the node longer than the specified deadline"
        self.event("DeadlineExceeded", self.message, "Warning")
        self.stop_grace = float(self.spec.get("terminationGracePeriodSeconds", 30))
        self.stop_requested.set()

    async def _start_all(self) -> bool:
        """Init containers in order (native sidecars keep running), then the main containers."""
        for c in self.inits:
            if self.stop_requested.is_set():
                return False
            if c.sidecar:
                if not await self._prepare(c):
                    if c.ignored:
                        continue
                    return False
                await self._launch(c)
                await self._wait_probe(c, "startupProbe")
                continue
            if not await self._prepare(c):
                return False
            await self._launch(c)
            await self._wait_or_stop(c)
            exit_code = c.state.get("terminated", {}).get("exitCode", 1)
            if exit_code != 0:
                self.publish()
                return False
        for c in self.containers:
            if not await self._prepare(c):
                return False
        for c in self.containers:
            await self._launch(c)
        self.phase = "Running"
        self.publish()
        return True

    async def _wait_or_stop(self, c: Container) -> None:
        stop = asyncio.create_task(self.stop_requested.wait())
        done = asyncio.create_task(c.done.wait())
        await asyncio.wait({stop, done}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        done.cancel()

    async def _wait_main(self) -> None:
        restart = self.spec.get("restartPolicy", "Always")
        while True:
            waits = [asyncio.create_task(c.done.wait()) for c in self.containers]
            stop = asyncio.create_task(self.stop_requested.wait())
            await asyncio.wait(waits + [stop], return_when=asyncio.FIRST_COMPLETED if restart != "Never" else
                               asyncio.FIRST_COMPLETED)
            for t in waits + [stop]:
                t.cancel()
            if self.stop_requested.is_set():
                return
            if all(c.done.is_set() for c in self.containers) and restart == "Never":
                return
            for c in self.containers:
                if c.done.is_set() and restart != "Never":
                    code = c.state.get("terminated", {}).get("exitCode", 0)
                    if restart == "Always" or code != 0:
                        c.last_state = c.state
                        c.state = {"waiting": {"reason": "CrashLoopBackOff",
                                               "message": f"back-off 1s restarting failed container={c.name}"}}
                        self.publish()
                        await asyncio.sleep(1.0)
                        if self.stop_requested.is_set():
                            return
                        c.restarts += 1
                        c.done = asyncio.Event()
                        await self._launch(c)
            if restart == "OnFailure" and all(
                    c.done.is_set() and c.state.get("terminated", {}).get("exitCode") == 0 for c in self.containers):
                return
            if restart == "Never" and all(c.done.is_set() for c in self.containers):
                return

    async def _prepare(self, c: Container) -> bool:
        """Resolve the container's command and environment; report why it cannot start."""
        while not self.stop_requested.is_set():
            try:
                c.argv, c.env, c.cwd = self.kubelet.resolve(self, c)
                return True
            except ImagePullError as e:
                if c.sidecar:
                    c.ignored = str(e)
                    c.state = {"waiting": {"reason": "NotRunByKubeEmu", "message": str(e)}}
                    self.event("SidecarNotRun", f"native sidecar {c.name} is not run by the emulator's kubelet: {e}")
                    self.publish()
                    return False
                if "waiting" not in c.state or c.state["waiting"].get("reason") != "ImagePullBackOff":
                    self.event("Failed", f"Failed to pull image \"{c.spec.get('image')}\": {e}", "Warning")
                c.state = {"waiting": {"reason": "ImagePullBackOff",
                                       "message": f"Back-off pulling image \"{c.spec.get('image')}\": {e}"}}
            except ContainerConfigError as e:
                c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            self.publish()
            try:
                await asyncio.wait_for(self.stop_requested.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
        return False

    async def _launch(self, c: Container) -> None:
        argv, env, cwd = c.argv, c.env, c.cwd
        c.log_path = self.dir / f"{c.name}.log"
        log = open(c.log_path, "ab")
        try:
            c.process = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)
        except OSError as e:
            log.close()
            c.state = {"terminated": {"exitCode": 128, "reason": "StartError", "message": str(e),
                                      "startedAt": now_rfc3339(), "finishedAt": now_rfc3339()}}
            c.started = False
            c.done.set()
            self.event("Failed", f"Error: failed to start container {c.name}: {e}", "Warning")
            self.publish()
            return
        log.close()
        c.state = {"running": {"startedAt": now_rfc3339()}}
        c.started = True
        c.ready = not c.spec.get("readinessProbe")
        self.event("Started", f"Started container {c.name}")
        asyncio.create_task(self._reap(c, c.process))
        if c.spec.get("readinessProbe"):
            probe = asyncio.create_task(self._readiness(c, c.process))
            self.probes.add(probe)
            probe.add_done_callback(self.probes.discard)

    async def _reap(self, c: Container, process: asyncio.subprocess.Process) -> None:
        started = c.state.get("running", {}).get("startedAt", now_rfc3339())
        code = await process.wait()
        _killpg(process.pid, signal.SIGKILL)  # container teardown: nothing of it survives
        exit_code = code if code >= 0 else 128 - code
        reason = "OOMKilled" if c.oom else ("Completed" if exit_code == 0 else "Error")
        c.state = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started,
                                  "finishedAt": now_rfc3339()}}
        c.ready = False
        c.done.set()
        if not self.finished:
            self.publish()

    async def _probe_once(self, c: Container, probe: dict[str, Any]) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "httpGet" in probe:
                h = probe["httpGet"]
                port = self._port(c, h.get("port"))
                url = f"{h.get('scheme', 'HTTP').lower()}://127.0.0.1:{port}{h.get('path', '/')}"
                async with aiohttp.ClientSession() as session:
                    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                        return 200 <= resp.status < 400
            if "tcpSocket" in probe:
                port = self._port(c, probe["tcpSocket"].get("port"))
                _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
                writer.close()
                return True
            if "exec" in probe:
                argv = self.kubelet.rewrite_argv(self, c, list(probe["exec"].get("command") or []))
                proc = await asyncio.create_subprocess_exec(*argv, env=c.env, cwd=c.cwd,
                                                            stdout=asyncio.subprocess.DEVNULL,
                                                            stderr=asyncio.subprocess.DEVNULL)
                return await asyncio.wait_for(proc.wait(), timeout) == 0
        except (OSError, asyncio.TimeoutError, aiohttp.ClientError, ValueError):
            return False
        return True

    def _port(self, c: Container, port: Any) -> int:
        if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
            return int(port)
        for p in c.spec.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
        raise ValueError(f"unknown port {port!r}")

    async def _readiness(self, c: Container, process: asyncio.subprocess.Process) -> None:
        probe = c.spec["readinessProbe"]
        await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
        period = min(float(probe.get("periodSeconds", 10)), self.kubelet.max_probe_period)
        while process.returncode is None and not self.finished:
            ok = await self._probe_once(c, probe)
            if ok != c.ready and process.returncode is None:
                c.ready = ok
                self.publish()
            await asyncio.sleep(period)

    async def _wait_probe(self, c: Container, which: str) -> None:
        probe = c.spec.get(which)
        if not probe or c.process is None:
            return
        await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
        period = min(float(probe.get("periodSeconds", 10)), self.kubelet.max_probe_period)
        while c.process.returncode is None and not self.stop_requested.is_set():
            if await self._probe_once(c, probe):
                return
            await asyncio.sleep(period)

    async def _kill(self, c: Container, grace: float) -> None:
        process = c.process
        if process is None or process.returncode is not None:
            return
        # os.kill, not Process.send_signal: the latter polls (reaps) the child behind
        # asyncio's child watcher, which then reports exit code 255.
        try:
            os.kill(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(process.wait(), max(grace, 0.0))
        except asyncio.TimeoutError:
            pass
        _killpg(process.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(process.wait(), 5)
        except asyncio.TimeoutError:
            pass
        await asyncio.sleep(0)  # let the reaper record the state

    async def _terminate_all(self, grace: float, sidecars_only: bool) -> None:
        """Main containers first, then sidecars in reverse order (as the kubelet does)."""
        deadline = time.monotonic() + grace
        if not sidecars_only:
            await asyncio.gather(*(self._kill(c, grace) for c in self.containers))
        for c in reversed([i for i in self.inits if i.sidecar]):
            await self._kill(c, max(0.0, deadline - time.monotonic()) if grace else 2.0)
        for c in self.containers + self.inits:
            if c.process is not None and not c.done.is_set():
                try:
                    await asyncio.wait_for(c.done.wait(), 5)
                except asyncio.TimeoutError:
                    pass

    def _final_phase(self) -> None:
        if self.terminal_reason:
            self.phase, self.reason = "Failed", self.terminal_reason
            for c in self.containers:
                if "terminated" not in c.state:
                    c.state = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now_rfc3339()}}
            return
        codes = []
        for c in self.containers:
            term = c.state.get("terminated")
            if term is None:  # never started (e.g. a failed init container) or lost
                c.state = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                          "message": "The container could not be located when the pod was terminated",
                                          "finishedAt": now_rfc3339()}}
                term = c.state["terminated"]
            codes.append(term.get("exitCode", 1))
        self.phase = "Succeeded" if codes and all(code == 0 for code in codes) else "Failed"

    def containers_ran(self) -> bool:
        return any(c.process is not None for c in self.containers)

    # ---------------------------------------------------------------- controls

    async def request_stop(self, grace: float) -> None:
        self.stop_grace = grace
        self.stop_requested.set()

    async def simulate_oom(self, container: str | None) -> dict[str, Any]:
        targets = [c for c in self.containers if container is None or c.name == container]
        if not targets:
            raise ApiError(404, "NotFound", f"container {container!r} not found in pod {self.name}")
        for c in targets[:1]:
            c.oom = True
            if c.process is not None and c.process.returncode is None:
                _killpg(c.process.pid, signal.SIGKILL)
        self.event("OOMKilling", f"Memory cgroup out of memory: Killed process of container {targets[0].name}", "Warning")
        return {"oomKilled": targets[0].name}

    async def evict(self, message: str) -> dict[str, Any]:
        self.terminal_reason = "Evicted"
        self.message = message
        self.event("Evicted", message, "Warning")
        self.stop_grace = 0
        self.stop_requested.set()
        return {"evicted": self.name}


class ImagePullError(Exception):
    """The image is neither mapped to a host executable nor a host-tools image."""


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Kubelet:
    """Watches pods in the emulator and runs them as local processes (see README.md)."""

    def __init__(self, emulator: KubeEmulator, *, api_url: str | None = None, root: str | pathlib.Path | None = None,
                 image_map: dict[str, Any] | None = None, host_images: tuple[str, ...] = DEFAULT_HOST_IMAGES,
                 node_name: str | None = None, base_env: dict[str, str] | None = None,
                 pass_env: list[str] | tuple[str, ...] = (), max_probe_period: float = 1.0) -> None:
        self.emu = emulator
        self.api_url = api_url
        self._own_root = root is None
        self.root = pathlib.Path(root) if root else pathlib.Path(tempfile.mkdtemp(prefix="kubeemu-kubelet-"))
        self.image_map: dict[str, ImageEntry] = default_image_map()
        for pattern, value in (image_map or {}).items():
            self.image_map[pattern] = _entry(value)
        self.host_images = tuple(host_images)
        self.node_name = node_name or emulator.node_name
        self.base_env = base_env if base_env is not None else {
            k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER")}
        self.base_env.update({k: os.environ[k] for k in pass_env if k in os.environ})
        self.max_probe_period = max_probe_period
        self.workers: dict[str, PodWorker] = {}
        self._task: asyncio.Task[None] | None = None
        self.kubeconfig: pathlib.Path | None = None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.api_url:
            self.kubeconfig = write_kubeconfig(self.root / "kubeconfig", self.api_url)
        self.emu.pod_is_running = self._holds
        self.emu.pod_log = self.logs
        self.emu.control_handlers["pods"] = self._control
        self._register_node()
        self._task = asyncio.create_task(self._loop())

    async def stop(self, grace: float = 1.0) -> None:
        """Stop every pod: SIGTERM to each container, SIGKILL to its process group after
        `grace` seconds; whatever still runs shortly after that is killed outright, so
        stopping is bounded (pods are processes in their own sessions: nothing else would
        end them when the emulator exits)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for worker in list(self.workers.values()):
            await worker.request_stop(grace)
        tasks = [w.task for w in self.workers.values() if w.task is not None and not w.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace + 2.0)
        self.kill_all()
        self.emu.pod_is_running = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def kill_all(self) -> int:
        """SIGKILL the process group of every container that has not been reaped yet;
        returns how many. Safe to call from another thread (the shutdown watchdog): it
        only reads pids and sends signals."""
        killed = 0
        for worker in list(self.workers.values()):
            for c in list(worker.containers) + list(worker.inits):
                process = c.process
                # A reaped container's group was killed by its reaper, and its pid may
                # belong to someone else by now.
                if process is not None and not c.done.is_set():
                    _killpg(process.pid, signal.SIGKILL)
                    killed += 1
        return killed

    def _register_node(self) -> None:
        kind = self.emu.kind_of("", "v1", "nodes")
        if self.emu.get_object(kind, None, self.node_name) is None:
            self.emu.create_object(kind, None, {"metadata": {"name": self.node_name, "labels": {
                "kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux"}}})
            node = self.emu.get_object(kind, None, self.node_name)
            assert node is not None
            node["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                              "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}],
                              "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                            {"type": "Hostname", "address": self.node_name}]}
            self.emu.replace_object(kind, None, self.node_name, node, subresource="status")

    def _holds(self, pod: dict[str, Any]) -> bool:
        worker = self.workers.get(pod["metadata"].get("uid", ""))
        return worker is not None and not worker.finished

    async def _loop(self) -> None:
        kind = self.emu.kind_of("", "v1", "pods")
        cursor = self.emu.resource_version
        for pod in self.emu.objects_of(kind):
            self._observe("ADDED", pod)
        while True:
            try:
                records = self.emu.records_after(cursor)
            except ApiError:  # fell behind the event log: resync from the store
                cursor = self.emu.resource_version
                for pod in self.emu.objects_of(kind):
                    self._observe("MODIFIED", pod)
                continue
            for rec in records:
                cursor = rec.rv
                if rec.res == _PODS:
                    self._observe(rec.type, rec.obj)
            if not records:
                await self.emu.wait_for_change(1.0)

    def _observe(self, event: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        worker = self.workers.get(uid)
        if event == "DELETED":
            if worker is not None:
                worker.deleted = True
                asyncio.create_task(worker.request_stop(0))
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if worker is None:
            phase = (pod.get("status") or {}).get("phase")
            if node not in (None, self.node_name) or phase in ("Succeeded", "Failed"):
                return
            if meta.get("deletionTimestamp"):
                return
            worker = PodWorker(self, pod)
            self.workers[uid] = worker
            worker.task = asyncio.create_task(worker.run())
            return
        if meta.get("deletionTimestamp") and not worker.stop_requested.is_set():
            grace = float(meta.get("deletionGracePeriodSeconds", worker.stop_grace))
            worker.event("Killing", "Stopping container(s)")
            asyncio.create_task(worker.request_stop(grace))

    def _worker(self, namespace: str, name: str) -> PodWorker:
        for worker in self.workers.values():
            if worker.namespace == namespace and worker.name == name and not worker.finished:
                return worker
        raise ApiError(404, "NotFound", f'pods "{name}" not found on the kubelet')

    # ---------------------------------------------------------------- test controls

    async def simulate_oom(self, namespace: str, name: str, container: str | None = None) -> dict[str, Any]:
        """Kill a container as the kernel's OOM killer would (reason OOMKilled, exit 137)."""
        return await self._worker(namespace, name).simulate_oom(container)

    async def evict(self, namespace: str, name: str, message: str = "The node was low on resource: memory.") -> dict[str, Any]:
        """Stop a pod as node-pressure eviction does (phase Failed, reason Evicted)."""
        return await self._worker(namespace, name).evict(message)

    async def _control(self, namespace: str, name: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        if action == "oom":
            return await self.simulate_oom(namespace, name, body.get("container"))
        if action == "evict":
            return await self.evict(namespace, name, body.get("message") or "The node was low on resource: memory.")
        raise ApiError(404, "NotFound", f"unknown pod control {action!r}")

    async def logs(self, namespace: str, name: str, container: str | None, follow: bool) -> bytes:
        worker = next((w for w in reversed(list(self.workers.values()))
                       if w.namespace == namespace and w.name == name), None)
        if worker is None:
            raise ApiError(400, "BadRequest", f"pod {name} has not been started by the kubelet")
        containers = worker.containers + worker.inits
        target = next((c for c in containers if c.name == container), None) if container else worker.containers[0]
        if target is None:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if follow and target.process is not None:
            await target.done.wait()
        if target.log_path is None or not target.log_path.exists():
            return b""
        return target.log_path.read_bytes()

    def record_event(self, namespace: str, pod: str, uid: str, reason: str, message: str, type_: str) -> None:
        kind = self.emu.kind_of("", "v1", "events")
        now = now_rfc3339()
        try:
            self.emu.create_object(kind, namespace, {"metadata": {"generateName": f"{pod}.", "namespace": namespace},
                                                     "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": pod,
                                                                        "namespace": namespace, "uid": uid},
                                                     "reason": reason, "message": message, "type": type_,
                                                     "source": {"component": "kubelet", "host": self.node_name},
                                                     "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                                                     "reportingComponent": "kubelet",
                                                     "reportingInstance": self.node_name})
        except ApiError:
            pass

    # ---------------------------------------------------------------- container resolution

    def _image(self, image: str) -> tuple[ImageEntry | None, bool]:
        candidates = [image] if ":" in image.rsplit("/", 1)[-1] or "@" in image else [image, f"{image}:latest"]
        for pattern, entry in self.image_map.items():
            if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
                return entry, True
        return None, any(fnmatch.fnmatchcase(c, p) for c in candidates for p in self.host_images)

    def _mounts(self, worker: PodWorker, c: Container) -> list[tuple[str, str]]:
        """(mountPath, host directory) pairs, longest mount path first."""
        volumes = {v.get("name"): v for v in worker.spec.get("volumes") or []}
        out = []
        for m in c.spec.get("volumeMounts") or []:
            volume = volumes.get(m.get("name"))
            if volume is None:
                continue
            host = self._volume_dir(worker, volume)
            if host is None:
                continue
            if m.get("subPath"):
                host = os.path.join(host, m["subPath"])
            out.append((m["mountPath"].rstrip("/") or "/", host))
        return sorted(out, key=lambda pair: -len(pair[0]))

    def _volume_dir(self, worker: PodWorker, volume: dict[str, Any]) -> str | None:
        path = worker.dir / "volumes" / volume["name"]
        if "hostPath" in volume:
            return volume["hostPath"].get("path")
        if "emptyDir" in volume:
            path.mkdir(parents=True, exist_ok=True)
            return str(path)
        for source, plural, binary in (("configMap", "configmaps", False), ("secret", "secrets", True)):
            if source in volume:
                ref = volume[source]
                obj_name = ref.get("name") or ref.get("secretName")
                obj = self.emu.get_object(self.emu.kind_of("", "v1", plural), worker.namespace, obj_name)
                if obj is None:
                    if ref.get("optional"):
                        path.mkdir(parents=True, exist_ok=True)
                        return str(path)
                    raise ContainerConfigError(f'{plural[:-1]} "{obj_name}" not found')
                path.mkdir(parents=True, exist_ok=True)
                for key, value in (obj.get("data") or {}).items():
                    (path / key).write_bytes(base64.b64decode(value) if binary else value.encode())
                return str(path)
        return None

    def _rewrite(self, value: str, mounts: list[tuple[str, str]], image: ImageEntry | None) -> str:
        for mount, host in mounts:
            if value == mount or value.startswith(mount + "/"):
                return host + value[len(mount):]
        if image is not None:
            for inner, host in image.paths.items():
                if value == inner or value.startswith(inner.rstrip("/") + "/"):
                    return host + value[len(inner):]
        return value

    def rewrite_argv(self, worker: PodWorker, c: Container, argv: list[str]) -> list[str]:
        mounts = self._mounts(worker, c)
        image, _ = self._image(c.spec.get("image", ""))
        return [self._rewrite(a, mounts, image) for a in argv]

    def resolve(self, worker: PodWorker, c: Container) -> tuple[list[str], dict[str, str], str]:
        """argv, environment and working directory of a container on this host."""
        image_name = c.spec.get("image", "")
        image, known = self._image(image_name)
        if not known:
            raise ImagePullError(f"image {image_name!r} is not mapped to a host executable")
        env = dict(self.base_env)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        env["HOSTNAME"] = worker.name
        env.update(self._env(worker, c, env))
        mounts = self._mounts(worker, c)
        command = [self._expand(a, env) for a in c.spec.get("command") or []]
        args = [self._expand(a, env) for a in c.spec.get("args") or []]
        if command:
            argv = command + args
        elif image is not None and image.entrypoint:
            argv = list(image.entrypoint) + args
        elif image is None:
            # Host-tools images (busybox, alpine, ...) have a CMD and no ENTRYPOINT: args replace it.
            argv = args or ["sh"]
        else:
            raise ImagePullError(f"image {image_name!r} has no entrypoint known to the kubelet and the container "
                                 "has no command")
        argv = [self._rewrite(a, mounts, image) for a in argv]
        if shutil.which(argv[0], path=env.get("PATH")) is None and image is not None and image.entrypoint:
            argv[0] = image.entrypoint[0]  # the image's own binary under another in-image path
        env = {k: self._rewrite(v, mounts, image) for k, v in env.items()}
        workdir = c.spec.get("workingDir")
        cwd = self._rewrite(workdir, mounts, image) if workdir else ""
        if not cwd or not os.path.isdir(cwd):
            cwd = str(worker.dir / "work" / c.name)
            os.makedirs(cwd, exist_ok=True)
        return argv, env, cwd

    @staticmethod
    def _expand(value: str, env: dict[str, str]) -> str:
        """Kubernetes `$(VAR)` expansion; `$$(VAR)` stays literal."""
        def sub(m: re.Match[str]) -> str:
            if m.group(0).startswith("$$"):
                return m.group(0)[1:]
            return env.get(m.group(1), m.group(0))
        return re.sub(r"\$?\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, value)

    def _env(self, worker: PodWorker, c: Container, base: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for source in c.spec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for ref_key, plural, binary in (("configMapRef", "configmaps", False), ("secretRef", "secrets", True)):
                ref = source.get(ref_key)
                if ref is None:
                    continue
                obj = self.emu.get_object(self.emu.kind_of("", "v1", plural), worker.namespace, ref.get("name"))
                if obj is None:
                    if ref.get("optional"):
                        continue
                    raise ContainerConfigError(f'{plural[:-1]} "{ref.get("name")}" not found')
                for k, v in (obj.get("data") or {}).items():
                    out[prefix + k] = base64.b64decode(v).decode(errors="replace") if binary else v
        pod = worker._current() or {"metadata": {"name": worker.name, "namespace": worker.namespace, "uid": worker.uid},
                                    "spec": worker.spec}
        for item in c.spec.get("env") or []:
            name = item.get("name")
            if "valueFrom" not in item:
                out[name] = self._expand(str(item.get("value", "")), {**base, **out})
                continue
            vf = item["valueFrom"]
            for ref_key, plural, binary in (("secretKeyRef", "secrets", True), ("configMapKeyRef", "configmaps", False)):
                if ref_key in vf:
                    ref = vf[ref_key]
                    obj = self.emu.get_object(self.emu.kind_of("", "v1", plural), worker.namespace, ref.get("name"))
                    data = (obj or {}).get("data") or {}
                    if obj is None or ref.get("key") not in data:
                        if ref.get("optional"):
                            break
                        what = f'{plural[:-1]} "{ref.get("name")}" not found' if obj is None else \
                            f'couldn\'t find key {ref.get("key")} in {plural[:-1]} {worker.namespace}/{ref.get("name")}'
                        raise ContainerConfigError(what)
                    value = data[ref["key"]]
                    out[name] = base64.b64decode(value).decode(errors="replace") if binary else value
                    break
            else:
                if "fieldRef" in vf:
                    out[name] = _field_ref(pod, vf["fieldRef"].get("fieldPath", ""), self.node_name)
                elif "resourceFieldRef" in vf:
                    out[name] = "0"
        return out


def _field_ref(pod: dict[str, Any], path: str, node: str) -> str:
    meta = pod.get("metadata") or {}
    m = re.match(r"^metadata\.(labels|annotations)\['([^']+)'\]$", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"), "metadata.uid": meta.get("uid"),
        "spec.nodeName": node, "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName"),
        "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1", "status.podIPs": "127.0.0.1",
    }
    return str(simple.get(path) or "")
