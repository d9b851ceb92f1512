"""Per-call cost of the service's provider path, with an optional profile.

Runs ``Generate`` calls against a zero-latency OpenAI-compatible endpoint (a
child process that streams each event in its own write, keeps connections
alive and sets TCP_NODELAY unless ``--nagle``), with a conversation that grows
by one tool turn per call, as an agent's does.

By default the service runs in its own process, as ``tarsy`` runs it (the
console script, ``TARSY_LLM_PRELOAD=openai``), and is measured from outside,
the way the Rust bench ``agent_overhead`` measures it: an HTTP/2 relay in the
endpoint's process notes when each gRPC request was complete and when its
response ended, the endpoint notes when each provider request arrived and when
its answer was written. Printed per call:

* service overhead = (provider request received - gRPC request complete)
  + (gRPC response ended - provider answer written), i.e. the call's time at
  the relay minus its time in the endpoint, with both parts;
* CPU of the service process (every thread, from ``/proc``);
* start → ready (the ``listening`` log line) and RSS at ready, now and peak.

``--py-spy PATH`` also records the service process with that py-spy binary
while the measured calls run (``--py-spy-out`` names the output, speedscope
format unless it ends in ``.txt``: collapsed stacks).

``--in-process`` runs the server in this process instead (client and server
CPU together) and ``--profile`` (which implies it) prints the functions that
took the most CPU (cProfile, ``--sort``).

    python scripts/profile_generate.py [--calls 300] [--nagle] [--mix]
    python scripts/profile_generate.py --py-spy ~/.local/bin/py-spy
    python scripts/profile_generate.py --profile [--sort tottime] [--top 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import glob
import json
import os
import pstats
import shlex
import socket
import subprocess
import sys
import tempfile
import time

TOOL_SCHEMA = {
    "type": "object",
    "properties": {"bytes": {"type": "integer", "description": "Size of the output"}},
    "required": ["bytes"],
}
RESULT = ("line 00000001: the quick brown fox jumps over the lazy dog\n" * 40)[:2048]
KEY_ENV = "PROFILE_KEY"
WARM_UP_CALLS = 5


def _now() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


# --- the fake endpoint and the relay (child process) ---------------------------


def _text_events(n: int, pieces: list[str]) -> list[bytes]:
    """A streamed text answer, as the bench's fake streams its final answers."""

    def chunk(choices, usage=None):
        payload = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "choices": choices}
        if usage:
            payload["usage"] = usage
        return f"data: {json.dumps(payload)}\n\n".encode()

    out = [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    out += [chunk([{"index": 0, "delta": {"content": piece}}]) for piece in pieces]
    out.append(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    out.append(chunk([], {"prompt_tokens": 4200, "completion_tokens": 30, "total_tokens": 4230}))
    out.append(b"data: [DONE]\n\n")
    return out


def _events(n: int, mix: bool = False) -> list[bytes]:
    if mix and n % 7 == 6:
        return _text_events(n, ["Root cause: ", "web-1 is OOMKilled; ", "raise its limit."])
    if mix and n % 7 == 0:
        return _text_events(n, ["web-1 was OOMKilled; ", "raise its limit."])

    def chunk(choices, usage=None):
        payload = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-4o-mini",
            "choices": choices,
            "usage": usage,
        }
        return f"data: {json.dumps(payload)}\n\n".encode()

    args = json.dumps({"bytes": 2048})
    pieces = [args[:5], args[5:10], args[10:]]
    out = [
        chunk(
            [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": f"call_{n}",
                                "type": "function",
                                "function": {"name": "bench__large_output", "arguments": ""},
                            }
                        ],
                    },
                    "finish_reason": None,
                }
            ]
        )
    ]
    for piece in pieces:
        out.append(
            chunk(
                [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]},
                        "finish_reason": None,
                    }
                ]
            )
        )
    out.append(chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
    out.append(chunk([], {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920}))
    out.append(b"data: [DONE]\n\n")
    return out


# HTTP/2 frame header: length (3), type (1), flags (1), stream id (4).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_H2_DATA, _H2_HEADERS, _H2_END_STREAM = 0, 1, 0x1


class _FrameScanner:
    """Finds the frames that end a stream in one direction of an HTTP/2 connection."""

    def __init__(self, preface: bool) -> None:
        self._skip = len(_H2_PREFACE) if preface else 0
        self._buf = b""

    def ended_streams(self, data: bytes) -> list[int]:
        buf = self._buf + data
        pos = min(self._skip, len(buf))
        self._skip -= pos
        ended = []
        while len(buf) - pos >= 9:
            length = int.from_bytes(buf[pos : pos + 3], "big")
            if len(buf) - pos < 9 + length:
                break
            kind, flags = buf[pos + 3], buf[pos + 4]
            stream = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
            if kind in (_H2_DATA, _H2_HEADERS) and flags & _H2_END_STREAM and stream:
                ended.append(stream)
            pos += 9 + length
        self._buf = buf[pos:]
        return ended


async def _serve(port_file: str, upstream: str, nodelay: bool, mix: bool) -> None:
    count = 0
    # Per provider request: (received, answered); per gRPC stream: request
    # complete and response ended, by stream id.
    provider: list[tuple[int, int]] = []
    grpc_sent: dict[tuple[int, int], int] = {}
    grpc_ended: dict[tuple[int, int], int] = {}

    async def endpoint(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if nodelay else 0)
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            if head.startswith(b"GET /timings"):
                keys = sorted(grpc_sent)
                body = json.dumps(
                    {
                        "provider": provider,
                        "grpc": [(grpc_sent[k], grpc_ended.get(k)) for k in keys],
                    }
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
                continue
            received = _now()
            count += 1
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            for event in _events(count, mix):
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                await asyncio.sleep(0)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            provider.append((received, _now()))

    connections = 0

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        conn = connections
        host, port = upstream.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))

        async def pump(src, dst, scanner: _FrameScanner, marks: dict, after: bool) -> None:
            try:
                while data := await src.read(1 << 16):
                    if not after:
                        for stream in scanner.ended_streams(data):
                            marks[(conn, stream)] = _now()
                    dst.write(data)
                    if after:
                        for stream in scanner.ended_streams(data):
                            marks[(conn, stream)] = _now()
            except ConnectionError:
                pass
            finally:
                dst.close()

        # Requests: complete once forwarded; responses: ended when received.
        await asyncio.gather(
            pump(reader, up_writer, _FrameScanner(preface=True), grpc_sent, after=True),
            pump(up_reader, writer, _FrameScanner(preface=False), grpc_ended, after=False),
        )

    endpoint_server = await asyncio.start_server(endpoint, "127.0.0.1", 0)
    relay_server = await asyncio.start_server(relay, "127.0.0.1", 0)
    ports = (endpoint_server.sockets[0].getsockname()[1], relay_server.sockets[0].getsockname()[1])
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{ports[0]} {ports[1]}")
    os.rename(port_file + ".tmp", port_file)
    await asyncio.gather(endpoint_server.serve_forever(), relay_server.serve_forever())


# --- the client ----------------------------------------------------------------


def _request(pb, base_url: str, turns: int):
    messages = [
        pb.ConversationMessage(role="system", content="You are an SRE agent. " * 40),
        pb.ConversationMessage(role="user", content="Investigate: pod web-1 crash-loops. " * 10),
    ]
    for i in range(turns):
        messages.append(
            pb.ConversationMessage(
                role="assistant",
                tool_calls=[
                    pb.ToolCall(
                        id=f"call_{i}", name="bench.large_output", arguments='{"bytes": 2048}'
                    )
                ],
            )
        )
        messages.append(
            pb.ConversationMessage(
                role="tool",
                content=RESULT,
                tool_call_id=f"call_{i}",
                tool_name="bench.large_output",
            )
        )
    return pb.GenerateRequest(
        session_id="s",
        execution_id="e",
        messages=messages,
        tools=[
            pb.ToolDefinition(
                name="bench.large_output",
                description="Returns numbered lines",
                parameters_schema=json.dumps(TOOL_SCHEMA),
            )
        ],
        llm_config=pb.LLMConfig(
            provider="openai",
            model="gpt-4o-mini",
            api_key_env=KEY_ENV,
            base_url=base_url,
            backend="langchain",
        ),
    )


def _ms(ns: float) -> float:
    return ns / 1e6


def _stats(values: list[float]) -> str:
    s = sorted(values)
    return f"median {s[len(s) // 2]:6.2f} ms   p90 {s[min(len(s) - 1, int(len(s) * 0.9))]:6.2f} ms"


def _process_cpu_ns(pid: int) -> int:
    """On-CPU time of every thread of a process (ns, from schedstat)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        with contextlib.suppress(OSError), open(path) as f:
            total += int(f.read().split()[0])
    return total


def _process_rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


async def _http_get_json(port: int, path: str):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET %s HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n" % path.encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    body = await reader.readexactly(length)
    writer.close()
    return json.loads(body)


async def _start_endpoint(
    args: argparse.Namespace, upstream: str
) -> tuple[subprocess.Popen, int, int]:
    port_file = os.path.join(tempfile.gettempdir(), f"tarsy-profile-{os.getpid()}.ports")
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", port_file, "--upstream", upstream]
        + (["--nagle"] if args.nagle else [])
        + (["--mix"] if args.mix else [])
    )
    for _ in range(200):
        if os.path.exists(port_file):
            break
        await asyncio.sleep(0.025)
    with open(port_file) as f:
        endpoint_port, relay_port = (int(p) for p in f.read().split())
    os.unlink(port_file)
    return child, endpoint_port, relay_port


async def _calls(stub, pb, base_url: str, first: int, count: int) -> list[int]:
    walls = []
    for i in range(first, first + count):
        request = _request(pb, base_url, i % 20)
        t0 = _now()
        async for chunk in stub.Generate(request):
            if chunk.HasField("error"):
                raise RuntimeError(chunk.error.message)
        walls.append(_now() - t0)
    return walls


def _service_command(override: str | None) -> list[str]:
    if override:
        return shlex.split(override)
    script = os.path.join(os.path.dirname(sys.executable), "tarsy-llm-service")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "tarsy_llm"]


async def _start_service(
    env: dict[str, str], command: str | None
) -> tuple[asyncio.subprocess.Process, str, float]:
    started = _now()
    proc = await asyncio.create_subprocess_exec(
        *_service_command(command),
        "--listen",
        "127.0.0.1:0",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    while True:
        line = await proc.stderr.readline()
        if not line:
            raise RuntimeError(f"service exited before it was ready ({await proc.wait()})")
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("msg") == "listening":
                return proc, record["address"], _ms(_now() - started)


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def _main_process(args: argparse.Namespace) -> None:
    import grpc

    from tarsy_llm.proto import llm_service_pb2 as pb
    from tarsy_llm.proto import llm_service_pb2_grpc as pb_grpc

    env = {
        **os.environ,
        KEY_ENV: "sk-profile-not-a-key",
        "TARSY_LLM_PRELOAD": args.preload,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("TARSY_LLM_LISTEN", None)
    service, address, ready_ms = await _start_service(env, args.service_command)
    rss_ready, _ = _process_rss_mib(service.pid)
    assert service.stderr is not None
    drain = asyncio.create_task(_drain(service.stderr))
    child, endpoint_port, relay_port = await _start_endpoint(args, address)
    spy = None
    try:
        base_url = f"http://127.0.0.1:{endpoint_port}/v1"
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{relay_port}")
        stub = pb_grpc.LLMServiceStub(channel)
        # The first call creates the provider's client and connection.
        warm_up = await _calls(stub, pb, base_url, 0, WARM_UP_CALLS)
        if args.py_spy:
            out = args.py_spy_out or "profile-service.speedscope.json"
            fmt = "raw" if out.endswith(".txt") else "speedscope"
            # --native stops the process for each sample (figures inflate).
            mode = ["--native"] if args.native else ["--nonblocking"]
            spy = subprocess.Popen(
                [
                    *(args.py_spy, "record", "--pid", str(service.pid), "--rate", "1000"),
                    *("--format", fmt, "--output", out, *mode),
                ]
            )
            await asyncio.sleep(1.0)  # py-spy attaches
        cpu0 = _process_cpu_ns(service.pid)
        walls = await _calls(stub, pb, base_url, WARM_UP_CALLS, args.calls)
        cpu = _process_cpu_ns(service.pid) - cpu0
        rss, hwm = _process_rss_mib(service.pid)
        if spy is not None:
            spy.send_signal(2)
            spy.wait()
        timings = await _http_get_json(endpoint_port, "/timings")
        await channel.close()
    finally:
        child.kill()
        child.wait()
        if service.returncode is None:
            service.terminate()
            await service.wait()
        drain.cancel()
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump({**timings, "walls": walls, "calls": args.calls}, f)
    provider = timings["provider"][-args.calls :]
    grpc_calls = timings["grpc"][-args.calls :]
    if not provider:  # a service that calls no provider (--service-command)
        provider = [(g[0], g[0]) for g in grpc_calls]
    before = [_ms(p[0] - g[0]) for p, g in zip(provider, grpc_calls, strict=True)]
    after = [_ms(g[1] - p[1]) for p, g in zip(provider, grpc_calls, strict=True)]
    in_endpoint = [_ms(p[1] - p[0]) for p in provider]
    print(f"{args.calls} calls, service in its own process (TARSY_LLM_PRELOAD={args.preload}):")
    overhead = [a + b for a, b in zip(before, after, strict=True)]
    print(f"  service overhead (before + after)   {_stats(overhead)}")
    print(f"    gRPC request → provider request   {_stats(before)}")
    print(f"    provider answer → gRPC response   {_stats(after)}")
    print(f"  time in the endpoint                {_stats(in_endpoint)}")
    print(f"  call at the client                  {_stats([_ms(w) for w in walls])}")
    print(f"  service CPU per call                {_ms(cpu) / args.calls:6.2f} ms")
    print(f"  first call at the client            {_ms(warm_up[0]):6.2f} ms")
    print(f"  start → ready                       {ready_ms:6.0f} ms")
    print(f"  RSS ready / now / peak              {rss_ready:.1f} / {rss:.1f} / {hwm:.1f} MiB")


async def _main_in_process(args: argparse.Namespace) -> None:
    import grpc

    from tarsy_llm.proto import llm_service_pb2 as pb
    from tarsy_llm.proto import llm_service_pb2_grpc as pb_grpc
    from tarsy_llm.providers.base import ALL
    from tarsy_llm.providers.registry import default_registry, parse_preload
    from tarsy_llm.server import LLMServer

    os.environ[KEY_ENV] = "sk-profile-not-a-key"
    registry = default_registry()
    registry.prewarm(os.environ, parse_preload(args.preload) if args.preload else ALL)
    server = LLMServer("127.0.0.1:0", registry)
    await server.start()
    child, endpoint_port, _ = await _start_endpoint(args, server.address)
    try:
        base_url = f"http://127.0.0.1:{endpoint_port}/v1"
        channel = grpc.aio.insecure_channel(server.address)
        stub = pb_grpc.LLMServiceStub(channel)
        await _calls(stub, pb, base_url, 0, WARM_UP_CALLS)
        profiler = cProfile.Profile() if args.profile else None
        cpu0 = time.process_time()
        if profiler:
            profiler.enable()
        walls = await _calls(stub, pb, base_url, WARM_UP_CALLS, args.calls)
        if profiler:
            profiler.disable()
        cpu = time.process_time() - cpu0
        print(
            f"{args.calls} calls in this process: wall {_stats([_ms(w) for w in walls])}; "
            f"CPU (server + client) {cpu / args.calls * 1000:.2f} ms per call"
        )
        if profiler:
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
        await channel.close()
        await server.stop(0)
    finally:
        child.kill()
        child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--preload", default="openai", help="TARSY_LLM_PRELOAD of the service")
    parser.add_argument(
        "--service-command", help="command line of the service (default: the console script)"
    )
    parser.add_argument("--in-process", action="store_true", help="server in this process")
    parser.add_argument("--profile", action="store_true", help="cProfile (in process)")
    parser.add_argument("--sort", default="cumulative", help="cProfile sort key")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--py-spy", help="py-spy binary: record the service process")
    parser.add_argument("--py-spy-out", help="py-spy output file")
    parser.add_argument("--native", action="store_true", help="py-spy --native")
    parser.add_argument("--nagle", action="store_true", help="the endpoint leaves Nagle on")
    parser.add_argument(
        "--mix",
        action="store_true",
        help="answers as in the bench's sessions: 5 tool calls, then 2 streamed texts",
    )
    parser.add_argument("--dump", help="write the raw timings (monotonic ns) to this JSON file")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.upstream, nodelay=not args.nagle, mix=args.mix))
    elif args.in_process or args.profile:
        asyncio.run(_main_in_process(args))
    else:
        asyncio.run(_main_process(args))


if __name__ == "__main__":
    main()
