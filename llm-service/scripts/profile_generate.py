"""Per-call cost of the service's provider path, with an optional profile.

Runs ``Generate`` calls through the real gRPC server (in this process) against a
zero-latency OpenAI-compatible endpoint (a child process that streams each event
in its own write, keeps connections alive and sets TCP_NODELAY unless
``--nagle``), with a conversation that grows by one tool turn per call, as an
agent's does. Prints the wall time and the CPU time of this process per call
(the endpoint's CPU is not included), and with ``--profile`` the functions that
took the most CPU (cProfile, cumulative).

    python scripts/profile_generate.py [--calls 200] [--profile] [--nagle]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import socket
import subprocess
import sys
import time

TOOL_SCHEMA = {
    "type": "object",
    "properties": {"bytes": {"type": "integer", "description": "Size of the output"}},
    "required": ["bytes"],
}
RESULT = ("line 00000001: the quick brown fox jumps over the lazy dog\n" * 40)[:2048]


def _events(n: int) -> list[bytes]:
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


async def _serve(port_file: str, nodelay: bool) -> None:
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if nodelay else 0)
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            count += 1
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            for event in _events(count):
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                await asyncio.sleep(0)
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(port_file, "w") as f:
        f.write(str(port))
    await server.serve_forever()


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
            api_key_env="PROFILE_KEY",
            base_url=base_url,
            backend="langchain",
        ),
    )


async def _main(args: argparse.Namespace) -> None:
    import grpc

    from tarsy_llm.proto import llm_service_pb2 as pb
    from tarsy_llm.proto import llm_service_pb2_grpc as pb_grpc
    from tarsy_llm.providers.registry import default_registry
    from tarsy_llm.server import LLMServer

    os.environ["PROFILE_KEY"] = "sk-profile-not-a-key"
    port_file = f"/tmp/tarsy-profile-{os.getpid()}.port"
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", port_file] + (["--nagle"] if args.nagle else [])
    )
    try:
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read():
                break
            await asyncio.sleep(0.05)
        base_url = f"http://127.0.0.1:{open(port_file).read()}/v1"
        registry = default_registry()
        registry.prewarm(os.environ)
        server = LLMServer("127.0.0.1:0", registry)
        await server.start()
        channel = grpc.aio.insecure_channel(server.address)
        stub = pb_grpc.LLMServiceStub(channel)

        async def call(turns: int) -> None:
            async for chunk in stub.Generate(_request(pb, base_url, turns % 20)):
                if chunk.HasField("error"):
                    raise RuntimeError(chunk.error.message)

        for i in range(5):  # warm-up: first calls import and connect
            await call(i)
        profiler = cProfile.Profile() if args.profile else None
        walls = []
        cpu0 = time.process_time()
        if profiler:
            profiler.enable()
        for i in range(args.calls):
            t0 = time.perf_counter()
            await call(i)
            walls.append(time.perf_counter() - t0)
        if profiler:
            profiler.disable()
        cpu = time.process_time() - cpu0
        walls.sort()
        print(
            f"{args.calls} calls: wall median {walls[len(walls) // 2] * 1000:.2f} ms, "
            f"p90 {walls[int(len(walls) * 0.9)] * 1000:.2f} ms; "
            f"CPU (server + client in this process) {cpu / args.calls * 1000:.2f} ms per call"
        )
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.top)
        await channel.close()
        await server.stop(0)
    finally:
        child.kill()
        child.wait()
        if os.path.exists(port_file):
            os.unlink(port_file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--nagle", action="store_true", help="the endpoint leaves Nagle on")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, nodelay=not args.nagle))
        return
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
