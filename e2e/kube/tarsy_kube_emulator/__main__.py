"""`python -m tarsy_kube_emulator --port 0 --kubeconfig-out PATH [--kubelet]`.

Prints the server URL on stdout (one line, flushed) once it accepts requests, then
serves until SIGINT/SIGTERM, which stop the pods (SIGTERM, a short grace, SIGKILL), end
open watches and exit 0 within about two seconds; a second signal, or a stop taking longer
than `--shutdown-timeout`, kills the pods and exits 1 at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import os
import signal
import sys
import threading

from .harness import EmulatorServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tarsy_kube_emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig-out", type=pathlib.Path, help="write a kubeconfig for the emulator here")
    parser.add_argument("--crds", action="append", type=pathlib.Path,
                        help="CRD manifest file or folder (repeatable); default: the repository's kubernetes/crds/manifests")
    parser.add_argument("--kubelet", action="store_true", help="run pods as local processes")
    parser.add_argument("--kubelet-root", type=pathlib.Path, help="working directories and logs of pods")
    parser.add_argument("--image-map", type=pathlib.Path,
                        help="JSON file: {image glob: executable or {entrypoint: [...], paths: {...}}}")
    parser.add_argument("--image", action="append", default=[], metavar="GLOB=EXECUTABLE",
                        help="map images matching GLOB to a host executable (repeatable)")
    parser.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                        help="pass this host environment variable to every pod process (repeatable)")
    parser.add_argument("--pod-stop-grace", type=float, default=1.0,
                        help="seconds pods get between SIGTERM and SIGKILL when the emulator stops")
    parser.add_argument("--shutdown-timeout", type=float, default=8.0,
                        help="after SIGTERM/SIGINT, kill the pods and exit (status 1) if not stopped by then")
    args = parser.parse_args(argv)
    kubelet_options: dict[str, object] = {}
    if args.kubelet_root:
        kubelet_options["root"] = args.kubelet_root
    image_map: dict[str, object] = json.loads(args.image_map.read_text()) if args.image_map else {}
    for item in args.image:
        glob, sep, executable = item.partition("=")
        if not sep:
            parser.error(f"--image expects GLOB=EXECUTABLE, got {item!r}")
        image_map[glob] = executable
    if image_map:
        kubelet_options["image_map"] = image_map
    if args.pass_env:
        kubelet_options["pass_env"] = args.pass_env
    return asyncio.run(_serve(args, kubelet_options))


async def _serve(args: argparse.Namespace, kubelet_options: dict[str, object]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    server: EmulatorServer | None = None

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():  # a second signal: do not wait for the orderly stop
            _hard_exit(server, f"{sig.name} again while stopping")
        stop.set()
        # The orderly stop is bounded by itself; the watchdog covers what is not (a
        # hung handler or task), so a caller waiting for the exit never waits long.
        watchdog = threading.Timer(args.shutdown_timeout, _hard_exit,
                                   (server, f"not stopped {args.shutdown_timeout:g} s after {sig.name}"))
        watchdog.daemon = True
        watchdog.start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    server = EmulatorServer(host=args.host, port=args.port, kubeconfig_out=args.kubeconfig_out,
                            crd_paths=args.crds, kubelet=args.kubelet, kubelet_options=kubelet_options,
                            pod_stop_grace=args.pod_stop_grace)
    async with server as srv:
        print(srv.url, flush=True)
        await stop.wait()
    return 0


def _hard_exit(server: EmulatorServer | None, why: str) -> None:
    """Kill the pods' process groups and exit at once (from any thread)."""
    killed = 0
    if server is not None and server.kubelet is not None:
        try:
            killed = server.kubelet.kill_all()
        except Exception as e:  # racing the event loop's thread: report, still exit
            print(f"tarsy_kube_emulator: killing pods failed: {e!r}", file=sys.stderr)
    print(f"tarsy_kube_emulator: {why}; killed {killed} container(s), exiting", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
