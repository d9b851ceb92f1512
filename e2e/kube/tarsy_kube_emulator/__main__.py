"""`python -m tarsy_kube_emulator --port 0 --kubeconfig-out PATH [--kubelet]`.

Prints the server URL on stdout (one line, flushed) once it accepts requests, then
serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import signal
import sys

from .harness import EmulatorServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tarsy_kube_emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig-out", type=pathlib.Path, help="write a kubeconfig for the emulator here")
    parser.add_argument("--crds", action="append", type=pathlib.Path,
                        help="CRD manifest file or folder (repeatable); default: the repository's crds/manifests")
    parser.add_argument("--kubelet", action="store_true", help="run pods as local processes")
    parser.add_argument("--kubelet-root", type=pathlib.Path, help="working directories and logs of pods")
    parser.add_argument("--image-map", type=pathlib.Path,
                        help="JSON file: {image glob: executable or {entrypoint: [...], paths: {...}}}")
    parser.add_argument("--image", action="append", default=[], metavar="GLOB=EXECUTABLE",
                        help="map images matching GLOB to a host executable (repeatable)")
    parser.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                        help="pass this host environment variable to every pod process (repeatable)")
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
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with EmulatorServer(host=args.host, port=args.port, kubeconfig_out=args.kubeconfig_out,
                              crd_paths=args.crds, kubelet=args.kubelet, kubelet_options=kubelet_options) as srv:
        print(srv.url, flush=True)
        await stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
