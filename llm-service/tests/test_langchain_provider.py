"""LangChainProvider against fake OpenAI, Anthropic, Gemini, Vertex and xAI endpoints."""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import pytest
from conftest import (
    API_KEY,
    ENV,
    KEY_ENV,
    call,
    collect,
    kinds,
    make_request,
    msg,
    service_account_info,
    texts,
    tool_def,
)
from fakes import (
    gemini_chunk,
    json_reply,
    openai_chunk,
    openai_done,
    openai_usage,
    sse_event,
    sse_reply,
)

from tarsy_llm.errors import ErrorCode, LLMServiceError
from tarsy_llm.providers.langchain_provider import NO_KEY_PLACEHOLDER, LangChainProvider

HISTORY = [
    msg("system", "You are TARSy."),
    msg("user", "Why is pod x failing?"),
    msg(
        "assistant",
        "Checking.",
        tool_calls=[call("call_1", "kubernetes-server.pods_list", {"namespace": "prod"})],
    ),
    msg(
        "tool",
        "pod x: CrashLoopBackOff",
        tool_call_id="call_1",
        tool_name="kubernetes-server.pods_list",
    ),
]


def provider(**kwargs) -> LangChainProvider:
    return LangChainProvider(environ=ENV, **kwargs)


def openai_tool_call_stream() -> list[bytes]:
    """Text, then one tool call whose arguments arrive in three fragments."""
    name = "kubernetes-server__events_list"
    return [
        openai_chunk(role="assistant", content=""),
        openai_chunk(content="The pod "),
        openai_chunk(content="crash-loops."),
        openai_chunk(
            tool_calls=[
                {
                    "index": 0,
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        ),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"namespace"'}}]),
        openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": ': "prod"}'}}]),
        openai_chunk(finish="tool_calls"),
        openai_chunk(usage=openai_usage(321, 45, reasoning=12, cached=256)),
        openai_done(),
    ]


async def test_openai_conversion_both_ways(fake) -> None:
    fake.add(sse_reply(openai_tool_call_stream()))
    tools = [tool_def(), tool_def("kubernetes-server.events_list")]
    req = make_request(
        "openai", f"{fake.url}/v1", messages=HISTORY, tools=tools, max_output_tokens=1000
    )
    chunks = await collect(provider().generate(req))

    assert kinds(chunks) == ["text", "text", "tool_call", "usage"]
    assert texts(chunks) == "The pod crash-loops."
    tool_call = chunks[2].tool_call
    assert (tool_call.call_id, tool_call.name) == ("call_9", "kubernetes-server.events_list")
    assert json.loads(tool_call.arguments) == {"namespace": "prod"}
    usage = chunks[3].usage
    # completion_tokens (45) include the reasoning tokens; prompt_tokens the cached ones.
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (321, 33, 366)
    assert (usage.thinking_tokens, usage.cached_input_tokens) == (12, 256)

    sent = fake.post_requests("/v1/chat/completions")[0]
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    body = sent.json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 1000
    assert body["messages"] == [
        {"role": "system", "content": "You are TARSy."},
        {"role": "user", "content": "Why is pod x failing?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "call_1",
                    "function": {
                        "name": "kubernetes-server__pods_list",
                        "arguments": json.dumps({"namespace": "prod"}),
                    },
                }
            ],
        },
        {"role": "tool", "content": "pod x: CrashLoopBackOff", "tool_call_id": "call_1"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == [
        "kubernetes-server__pods_list",
        "kubernetes-server__events_list",
    ]
    # The JSON schema goes to OpenAI unchanged.
    assert body["tools"][0]["function"]["parameters"]["required"] == ["namespace"]


async def test_openai_compatible_endpoint_without_key(fake) -> None:
    """A local vLLM/Ollama-style server: base_url set, no api_key_env."""
    fake.add(sse_reply([openai_chunk(content="hi"), openai_chunk(finish="stop"), openai_done()]))
    req = make_request("openai", f"{fake.url}/v1", api_key_env="", model="llama3")
    chunks = await collect(LangChainProvider(environ={}).generate(req))
    assert texts(chunks) == "hi"
    assert fake.requests[0].headers["authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"
    assert fake.requests[0].json["model"] == "llama3"


async def test_openai_chunks_are_forwarded_before_the_stream_ends(fake) -> None:
    gate = threading.Event()
    fake.add(
        sse_reply(
            [
                openai_chunk(content="first"),
                openai_chunk(content="second"),
                openai_chunk(finish="stop"),
                openai_done(),
            ],
            gate=gate,
            gate_at=1,
        )
    )
    stream = provider().generate(make_request("openai", f"{fake.url}/v1"))
    first = await asyncio.wait_for(stream.__anext__(), timeout=10)
    assert first.text.content == "first"
    gate.set()
    assert texts([c async for c in stream]) == "second"


async def test_malformed_tool_arguments_are_passed_on_verbatim(fake) -> None:
    fake.add(
        sse_reply(
            [
                openai_chunk(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_bad",
                            "type": "function",
                            "function": {
                                "name": "kubernetes-server__pods_list",
                                "arguments": '{"namespace": ',
                            },
                        }
                    ]
                ),
                openai_chunk(finish="tool_calls"),
                openai_done(),
            ]
        )
    )
    chunks = await collect(
        provider().generate(make_request("openai", f"{fake.url}/v1", tools=[tool_def()]))
    )
    assert kinds(chunks) == ["tool_call"]
    assert chunks[0].tool_call.name == "kubernetes-server.pods_list"
    assert chunks[0].tool_call.arguments == '{"namespace": '


def anthropic_stream(usage: dict | None = None) -> list[bytes]:
    usage = usage or {"input_tokens": 200, "output_tokens": 60}
    return [
        sse_event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 200, "output_tokens": 1},
                },
            },
        ),
        sse_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        sse_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "Restarts point to OOM."},
            },
        ),
        sse_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "c2ln"},
            },
        ),
        sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        sse_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "Checking events."},
            },
        ),
        sse_event("content_block_stop", {"type": "content_block_stop", "index": 1}),
        sse_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_7",
                    "name": "kubernetes-server__events_list",
                    "input": {},
                },
            },
        ),
        sse_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"namespace": "prod"}'},
            },
        ),
        sse_event("content_block_stop", {"type": "content_block_stop", "index": 2}),
        sse_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": usage,
            },
        ),
        sse_event("message_stop", {"type": "message_stop"}),
    ]


async def test_anthropic_conversion_both_ways(fake) -> None:
    fake.add(sse_reply(anthropic_stream()))
    tools = [tool_def(), tool_def("kubernetes-server.events_list")]
    req = make_request(
        "anthropic",
        fake.url,
        model="claude-sonnet",
        messages=HISTORY,
        tools=tools,
        max_output_tokens=3000,
    )
    chunks = await collect(provider().generate(req))
    assert kinds(chunks) == ["thinking", "text", "tool_call", "usage"]
    assert chunks[0].thinking.content == "Restarts point to OOM."
    assert chunks[1].text.content == "Checking events."
    assert chunks[2].tool_call.call_id == "toolu_7"
    assert chunks[2].tool_call.name == "kubernetes-server.events_list"
    assert json.loads(chunks[2].tool_call.arguments) == {"namespace": "prod"}
    assert (chunks[3].usage.input_tokens, chunks[3].usage.output_tokens) == (200, 60)
    assert chunks[3].usage.cached_input_tokens == 0

    body = fake.post_requests("/v1/messages")[0].json
    assert body["system"] == "You are TARSy."
    assert body["max_tokens"] == 3000
    assert body["messages"] == [
        {"role": "user", "content": "Why is pod x failing?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "name": "kubernetes-server__pods_list",
                    "input": {"namespace": "prod"},
                    "id": "call_1",
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "content": "pod x: CrashLoopBackOff",
                    "tool_use_id": "call_1",
                    "is_error": False,
                }
            ],
        },
    ]
    assert [t["name"] for t in body["tools"]] == [
        "kubernetes-server__pods_list",
        "kubernetes-server__events_list",
    ]
    assert body["tools"][0]["input_schema"]["required"] == ["namespace"]


async def test_anthropic_usage_counts_cache_reads_as_input(fake) -> None:
    # Anthropic's input_tokens exclude the cache: langchain-anthropic adds the cache
    # reads and writes back, so input is the whole prompt and cached a part of it.
    fake.add(
        sse_reply(
            anthropic_stream(
                {
                    "input_tokens": 50,
                    "cache_read_input_tokens": 1000,
                    "cache_creation_input_tokens": 200,
                    "output_tokens": 80,
                    "output_tokens_details": {"thinking_tokens": 30},
                }
            )
        )
    )
    req = make_request("anthropic", fake.url, model="claude-sonnet", tools=[tool_def()])
    chunks = await collect(provider().generate(req))
    usage = chunks[-1].usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (1250, 1000)
    # Anthropic's output_tokens include the thinking.
    assert (usage.output_tokens, usage.thinking_tokens, usage.total_tokens) == (50, 30, 1330)


async def test_google_through_langchain(fake) -> None:
    fake.add(
        sse_reply(
            [
                gemini_chunk([{"text": "Looking "}]),
                gemini_chunk(
                    [
                        {
                            "functionCall": {
                                "name": "kubernetes-server__events_list",
                                "args": {"namespace": "prod"},
                            }
                        }
                    ],
                    finish="STOP",
                    usage={
                        "promptTokenCount": 50,
                        "cachedContentTokenCount": 32,
                        "candidatesTokenCount": 10,
                        "thoughtsTokenCount": 7,
                        "totalTokenCount": 67,
                    },
                ),
            ]
        )
    )
    tools = [tool_def(), tool_def("kubernetes-server.events_list")]
    req = make_request("google", fake.url, model="gemini-2.5-flash", messages=HISTORY, tools=tools)
    chunks = await collect(provider().generate(req))
    assert kinds(chunks) == ["text", "tool_call", "usage"]
    assert chunks[1].tool_call.name == "kubernetes-server.events_list"
    assert json.loads(chunks[1].tool_call.arguments) == {"namespace": "prod"}
    usage = chunks[2].usage
    # candidatesTokenCount excludes the thoughts, as output_tokens does here.
    assert (usage.input_tokens, usage.cached_input_tokens) == (50, 32)
    assert (usage.output_tokens, usage.thinking_tokens, usage.total_tokens) == (10, 7, 67)

    sent = fake.post_requests(":streamGenerateContent")[0]
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert sent.headers["x-goog-api-key"] == API_KEY
    body = sent.json
    assert body["systemInstruction"]["parts"] == [{"text": "You are TARSy."}]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    function_call = body["contents"][1]["parts"][1]["functionCall"]
    assert function_call == {"name": "kubernetes-server__pods_list", "args": {"namespace": "prod"}}
    response = body["contents"][2]["parts"][0]["functionResponse"]
    assert response["name"] == "kubernetes-server__pods_list"
    assert "CrashLoopBackOff" in json.dumps(response["response"])
    names = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert names == ["kubernetes-server__pods_list", "kubernetes-server__events_list"]


async def test_vertex_through_langchain_express_key(fake) -> None:
    fake.add(sse_reply([gemini_chunk([{"text": "vertex says hi"}], finish="STOP")]))
    req = make_request("vertexai", fake.url, model="gemini-2.5-pro", location="us-central1")
    chunks = await collect(provider().generate(req))
    assert texts(chunks) == "vertex says hi"
    sent = fake.post_requests(":streamGenerateContent")[0]
    assert "/publishers/google/models/gemini-2.5-pro:streamGenerateContent" in sent.path
    assert sent.headers["x-goog-api-key"] == API_KEY


async def test_vertex_through_langchain_service_account(fake, tmp_path) -> None:
    fake.routes["/token"] = json_reply(200, {"access_token": "ya29.lc-token", "expires_in": 3600})
    creds = tmp_path / "sa.json"
    creds.write_text(json.dumps(service_account_info(f"{fake.url}/token")))
    fake.add(sse_reply([gemini_chunk([{"text": "vertex via sa"}], finish="STOP")]))
    lc = LangChainProvider(environ={"SA_FILE": str(creds)})
    req = make_request(
        "vertexai",
        fake.url,
        model="gemini-2.5-pro",
        api_key_env="",
        credentials_env="SA_FILE",
        location="us-east5",
    )
    chunks = await collect(lc.generate(req))
    assert texts(chunks) == "vertex via sa"
    sent = fake.post_requests(":streamGenerateContent")[0]
    # The project comes from the service-account file when the request names none.
    assert "/projects/proj-from-file/locations/us-east5/publishers/google/models/" in sent.path
    assert sent.headers["authorization"] == "Bearer ya29.lc-token"


async def test_xai(fake) -> None:
    fake.add(
        sse_reply(
            [
                openai_chunk(content="Grok "),
                openai_chunk(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_x",
                            "type": "function",
                            "function": {
                                "name": "kubernetes-server__pods_list",
                                "arguments": '{"namespace": "a"}',
                            },
                        }
                    ]
                ),
                openai_chunk(finish="tool_calls"),
                # xAI counts reasoning apart from completion_tokens (langchain-xai
                # adds it back to output_tokens): the answer stays 6.
                openai_chunk(
                    usage={**openai_usage(5, 6, reasoning=4, cached=3), "total_tokens": 15}
                ),
                openai_done(),
            ]
        )
    )
    req = make_request(
        "xai", f"{fake.url}/v1", model="grok-4", messages=HISTORY, tools=[tool_def()]
    )
    chunks = await collect(provider().generate(req))
    assert kinds(chunks) == ["text", "tool_call", "usage"]
    assert chunks[1].tool_call.name == "kubernetes-server.pods_list"
    usage = chunks[2].usage
    assert (usage.input_tokens, usage.cached_input_tokens) == (5, 3)
    assert (usage.output_tokens, usage.thinking_tokens, usage.total_tokens) == (6, 4, 15)
    sent = fake.post_requests("/v1/chat/completions")[0]
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.json["messages"][2]["tool_calls"][0]["function"]["name"] == (
        "kubernetes-server__pods_list"
    )


async def test_models_are_cached_per_configuration(fake) -> None:
    lc = provider()
    a = make_request("openai", f"{fake.url}/v1").llm_config
    b = make_request("openai", f"{fake.url}/v1", model="other").llm_config
    assert lc.model_for(a) is lc.model_for(a)
    assert lc.model_for(a) is not lc.model_for(b)


@pytest.mark.parametrize(
    ("provider_name", "config", "code"),
    [
        ("openai", {"api_key_env": ""}, ErrorCode.CREDENTIALS),
        ("anthropic", {"api_key_env": "UNSET_KEY_ENV"}, ErrorCode.CREDENTIALS),
        ("mistral", {}, ErrorCode.INVALID_REQUEST),
        ("", {}, ErrorCode.INVALID_REQUEST),
    ],
)
async def test_configuration_errors_fail_without_a_call(fake, provider_name, config, code) -> None:
    cfg = {"api_key_env": KEY_ENV, **config}
    base = "" if provider_name == "openai" else fake.url
    with pytest.raises(LLMServiceError) as info:
        await collect(provider().generate(make_request(provider_name, base, **cfg)))
    assert info.value.code is code and info.value.retryable is False
    assert fake.requests == []


async def test_invalid_history_is_an_invalid_request(fake) -> None:
    bad_args = [msg("user", "q"), msg("assistant", tool_calls=[pb_call("c", "a.b", "{not json")])]
    with pytest.raises(LLMServiceError) as info:
        await collect(provider().generate(make_request("openai", fake.url, messages=bad_args)))
    assert info.value.code is ErrorCode.INVALID_REQUEST and "not valid JSON" in info.value.message
    bad_role = [msg("robot", "beep")]
    with pytest.raises(LLMServiceError) as info:
        await collect(provider().generate(make_request("openai", fake.url, messages=bad_role)))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    bad_schema = [tool_def()]
    bad_schema[0].parameters_schema = "[1, 2]"
    with pytest.raises(LLMServiceError) as info:
        await collect(provider().generate(make_request("openai", fake.url, tools=bad_schema)))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert fake.requests == []


def pb_call(call_id: str, name: str, arguments: str):
    from tarsy_llm.proto import llm_service_pb2 as pb

    return pb.ToolCall(id=call_id, name=name, arguments=arguments)


async def test_gemini_thought_signatures_survive_the_round_trip(fake) -> None:
    signature = b"\x07langchain-gemini-signature"
    fake.add(
        sse_reply(
            [
                gemini_chunk(
                    [
                        {
                            "functionCall": {
                                "name": "kubernetes-server__pods_list",
                                "args": {"namespace": "prod"},
                            },
                            "thoughtSignature": base64.b64encode(signature).decode(),
                        }
                    ],
                    finish="STOP",
                )
            ]
        ),
        sse_reply([gemini_chunk([{"text": "done"}], finish="STOP")]),
        sse_reply([gemini_chunk([{"text": "done"}], finish="STOP")]),
    )
    lc = provider()
    first = await collect(
        lc.generate(make_request("google", fake.url, model="gemini-2.5-pro", tools=[tool_def()]))
    )
    tool_call = first[0].tool_call
    history = [
        msg("user", "Why?"),
        msg(
            "assistant", tool_calls=[call(tool_call.call_id, tool_call.name, {"namespace": "prod"})]
        ),
        msg("tool", "CrashLoopBackOff", tool_call_id=tool_call.call_id),
    ]
    await collect(
        lc.generate(
            make_request(
                "google", fake.url, model="gemini-2.5-pro", messages=history, tools=[tool_def()]
            )
        )
    )
    part = fake.post_requests()[1].json["contents"][1]["parts"][0]
    assert part["functionCall"]["name"] == "kubernetes-server__pods_list"
    assert base64.b64decode(part["thoughtSignature"]) == signature
    # clear_cache forgets it.
    await collect(
        lc.generate(
            make_request(
                "google",
                fake.url,
                model="gemini-2.5-pro",
                messages=history,
                tools=[tool_def()],
                clear_cache=True,
            )
        )
    )
    assert "thoughtSignature" not in json.dumps(fake.post_requests()[2].json)
