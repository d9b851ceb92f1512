"""GoogleNativeProvider against a fake Gemini REST endpoint."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading

import pytest
from conftest import (
    API_KEY,
    ENV,
    call,
    collect,
    kinds,
    make_request,
    msg,
    service_account_info,
    texts,
    tool_def,
)
from fakes import gemini_chunk, json_reply, sse_reply

from tarsy_llm.errors import ErrorCode, LLMServiceError
from tarsy_llm.providers.google_native import GoogleNativeProvider, thinking_config_for
from tarsy_llm.providers.thought_signatures import ThoughtSignatureCache

USAGE = {
    "promptTokenCount": 120,
    "candidatesTokenCount": 30,
    "thoughtsTokenCount": 50,
    "totalTokenCount": 200,
}
SIG1 = b"\x01signature-of-call-one"
SIG2 = b"\x02signature-of-text"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def provider(**kwargs) -> GoogleNativeProvider:
    return GoogleNativeProvider(environ=ENV, **kwargs)


def request(fake, **kwargs):
    kwargs.setdefault("backend", "google-native")
    kwargs.setdefault("model", "gemini-2.5-pro")
    return make_request("google", fake.url, **kwargs)


async def test_streams_thinking_text_tool_call_and_usage_in_order(fake) -> None:
    fake.add(
        sse_reply(
            [
                gemini_chunk([{"text": "Pod x restarts; ", "thought": True}]),
                gemini_chunk([{"text": "check events.", "thought": True}]),
                gemini_chunk([{"text": "Let me look "}]),
                gemini_chunk([{"text": "at the pods."}]),
                gemini_chunk(
                    [
                        {
                            "functionCall": {
                                "name": "kubernetes-server__pods_list",
                                "args": {"namespace": "prod"},
                            },
                            "thoughtSignature": b64(SIG1),
                        }
                    ],
                    usage=USAGE,
                    finish="STOP",
                ),
            ]
        )
    )
    chunks = await collect(provider().generate(request(fake, tools=[tool_def()])))
    assert kinds(chunks) == ["thinking", "thinking", "text", "text", "tool_call", "usage"]
    assert texts(chunks, "thinking") == "Pod x restarts; check events."
    assert texts(chunks) == "Let me look at the pods."
    tool_call = chunks[4].tool_call
    assert tool_call.name == "kubernetes-server.pods_list"
    assert json.loads(tool_call.arguments) == {"namespace": "prod"}
    assert tool_call.call_id
    usage = chunks[5].usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 30, 200)
    assert (usage.thinking_tokens, usage.cached_input_tokens) == (50, 0)


async def test_usage_counts_cached_and_tool_use_prompt_tokens_as_input(fake) -> None:
    usage = {
        # promptTokenCount includes the cached content.
        "promptTokenCount": 1000,
        "cachedContentTokenCount": 768,
        "toolUsePromptTokenCount": 40,
        # candidatesTokenCount excludes the thoughts.
        "candidatesTokenCount": 25,
        "thoughtsTokenCount": 90,
        "totalTokenCount": 1155,
    }
    fake.add(sse_reply([gemini_chunk([{"text": "ok"}], usage=usage, finish="STOP")]))
    chunks = await collect(provider().generate(request(fake)))
    got = chunks[-1].usage
    assert (got.input_tokens, got.cached_input_tokens) == (1040, 768)
    assert (got.output_tokens, got.thinking_tokens, got.total_tokens) == (25, 90, 1155)


async def test_chunks_are_forwarded_before_the_stream_ends(fake) -> None:
    gate = threading.Event()
    fake.add(
        sse_reply(
            [gemini_chunk([{"text": "first"}]), gemini_chunk([{"text": "second"}], finish="STOP")],
            gate=gate,
            gate_at=1,
        )
    )
    stream = provider().generate(request(fake))
    first = await asyncio.wait_for(stream.__anext__(), timeout=10)
    # The fake is still holding back "second": the first chunk was not buffered.
    assert first.text.content == "first"
    gate.set()
    rest = [chunk async for chunk in stream]
    assert texts(rest) == "second"


async def test_request_conversion_messages_tools_and_config(fake) -> None:
    fake.add(sse_reply([gemini_chunk([{"text": "done"}], finish="STOP")]))
    messages = [
        msg("system", "You are TARSy."),
        msg("system", "Be brief."),
        msg("user", "Why is pod x failing?"),
        msg(
            "assistant",
            "Checking two things.",
            tool_calls=[
                call("c1", "kubernetes-server.pods_list", {"namespace": "prod"}),
                call("c2", "kubernetes-server.events_list", {}),
            ],
        ),
        msg(
            "tool",
            "pod x: CrashLoopBackOff",
            tool_call_id="c1",
            tool_name="kubernetes-server.pods_list",
        ),
        # tool_name omitted: found through the call id.
        msg("tool", "no events", tool_call_id="c2"),
        msg("user", "And now?"),
    ]
    req = request(
        fake,
        messages=messages,
        tools=[tool_def(), tool_def("kubernetes-server.events_list", {"type": "object"})],
        max_output_tokens=2048,
    )
    await collect(provider().generate(req))
    sent = fake.post_requests(":streamGenerateContent")[0]
    assert sent.path == "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
    assert sent.headers["x-goog-api-key"] == API_KEY
    body = sent.json
    assert body["systemInstruction"]["parts"] == [{"text": "You are TARSy.\n\nBe brief."}]
    contents = body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "user"]
    assert contents[1]["parts"] == [
        {"text": "Checking two things."},
        {"functionCall": {"name": "kubernetes-server__pods_list", "args": {"namespace": "prod"}}},
        {"functionCall": {"name": "kubernetes-server__events_list", "args": {}}},
    ]
    # Both results go back in one turn, as function responses with Gemini names.
    assert contents[2]["parts"] == [
        {
            "functionResponse": {
                "name": "kubernetes-server__pods_list",
                "response": {"result": "pod x: CrashLoopBackOff"},
            }
        },
        {
            "functionResponse": {
                "name": "kubernetes-server__events_list",
                "response": {"result": "no events"},
            }
        },
    ]
    declarations = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == [
        "kubernetes-server__pods_list",
        "kubernetes-server__events_list",
    ]
    assert declarations[0]["parameters"]["properties"]["namespace"]["type"] == "STRING"
    assert "parameters" not in declarations[1]
    generation = body["generationConfig"]
    assert generation["maxOutputTokens"] == 2048
    thinking = {k.replace("_", "").lower(): v for k, v in generation["thinkingConfig"].items()}
    assert thinking == {"includethoughts": True, "thinkingbudget": 32768}
    assert "googleSearch" not in json.dumps(body)


@pytest.mark.parametrize(
    ("model", "budget", "level"),
    [
        ("gemini-2.5-pro", 32768, None),
        ("gemini-2.5-flash", 24576, None),
        ("models/gemini-2.5-flash-lite", 24576, None),
        ("gemini-3-pro-preview", None, "HIGH"),
        ("some-future-model", 24576, None),
    ],
)
def test_thinking_configuration_by_model(model, budget, level) -> None:
    cfg = thinking_config_for(model)
    assert cfg.include_thoughts is True
    assert cfg.thinking_budget == budget
    assert (cfg.thinking_level.value if cfg.thinking_level else None) == level


async def test_thought_signatures_round_trip_per_execution(fake) -> None:
    gemini = provider()
    fake.add(
        sse_reply(
            [
                gemini_chunk([{"text": "Let me check.", "thoughtSignature": b64(SIG2)}]),
                gemini_chunk(
                    [
                        {
                            "functionCall": {
                                "name": "kubernetes-server__pods_list",
                                "args": {"namespace": "prod"},
                            },
                            "thoughtSignature": b64(SIG1),
                        }
                    ],
                    finish="STOP",
                ),
            ]
        )
    )
    first = await collect(gemini.generate(request(fake, tools=[tool_def()])))
    call_id = next(c.tool_call.call_id for c in first if c.WhichOneof("content") == "tool_call")

    # The orchestrator sends the turn back as assistant + tool messages.
    history = [
        msg("user", "Why is pod x failing?"),
        msg(
            "assistant",
            "Let me check.",
            tool_calls=[call(call_id, "kubernetes-server.pods_list", {"namespace": "prod"})],
        ),
        msg("tool", "CrashLoopBackOff", tool_call_id=call_id),
    ]
    for _ in range(3):
        fake.add(sse_reply([gemini_chunk([{"text": "ok"}], finish="STOP")]))
    await collect(gemini.generate(request(fake, messages=history, tools=[tool_def()])))
    model_turn = fake.post_requests()[1].json["contents"][1]
    assert model_turn["role"] == "model"
    assert base64.b64decode(model_turn["parts"][0]["thoughtSignature"]) == SIG2
    assert base64.b64decode(model_turn["parts"][1]["thoughtSignature"]) == SIG1

    # Another execution never sees these signatures.
    await collect(
        gemini.generate(
            request(fake, messages=history, tools=[tool_def()], execution_id="exec-other")
        )
    )
    assert "thoughtSignature" not in json.dumps(fake.post_requests()[2].json)

    # clear_cache drops them before the call.
    await collect(
        gemini.generate(request(fake, messages=history, tools=[tool_def()], clear_cache=True))
    )
    assert "thoughtSignature" not in json.dumps(fake.post_requests()[3].json)


async def test_thought_signatures_expire_after_an_hour(fake) -> None:
    now = [0.0]
    gemini = provider(signatures=ThoughtSignatureCache(clock=lambda: now[0]))
    fake.add(
        sse_reply(
            [
                gemini_chunk(
                    [
                        {
                            "functionCall": {"id": "g1", "name": "a__b", "args": {}},
                            "thoughtSignature": b64(SIG1),
                        }
                    ],
                    finish="STOP",
                )
            ]
        ),
        sse_reply([gemini_chunk([{"text": "ok"}], finish="STOP")]),
        sse_reply([gemini_chunk([{"text": "ok"}], finish="STOP")]),
    )
    tools = [tool_def("a.b", {"type": "object"})]
    await collect(gemini.generate(request(fake, tools=tools)))
    history = [
        msg("user", "q"),
        msg("assistant", tool_calls=[call("g1", "a.b", {})]),
        msg("tool", "r", tool_call_id="g1"),
    ]
    now[0] = 3599.0
    await collect(gemini.generate(request(fake, messages=history, tools=tools)))
    assert "thoughtSignature" in json.dumps(fake.post_requests()[1].json)
    now[0] += 3601.0
    await collect(gemini.generate(request(fake, messages=history, tools=tools)))
    assert "thoughtSignature" not in json.dumps(fake.post_requests()[2].json)


async def test_native_tools_only_without_mcp_tools(fake, caplog) -> None:
    native = {"google_search": True, "code_execution": True, "url_context": True}
    fake.add(
        sse_reply([gemini_chunk([{"text": "a"}], finish="STOP")]),
        sse_reply([gemini_chunk([{"text": "b"}], finish="STOP")]),
    )
    gemini = provider()
    with caplog.at_level(logging.WARNING, logger="tarsy_llm"):
        await collect(gemini.generate(request(fake, tools=[tool_def()], native_tools=native)))
    with_mcp = fake.post_requests()[0].json["tools"]
    assert with_mcp == [{"functionDeclarations": with_mcp[0]["functionDeclarations"]}]
    warnings = [r for r in caplog.records if "native tools suppressed" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].native_tools == ["code_execution", "google_search", "url_context"]

    await collect(gemini.generate(request(fake, native_tools={**native, "url_context": False})))
    without_mcp = fake.post_requests()[1].json["tools"]
    assert sorted(next(iter(t)) for t in without_mcp) == ["codeExecution", "googleSearch"]
    assert "functionDeclarations" not in json.dumps(without_mcp)


async def test_code_execution_and_grounding_deltas(fake) -> None:
    fake.add(
        sse_reply(
            [
                gemini_chunk([{"executableCode": {"language": "PYTHON", "code": "print(6*7)"}}]),
                gemini_chunk(
                    [{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}}]
                ),
                gemini_chunk(
                    [{"text": "The answer is 42."}],
                    finish="STOP",
                    usage=USAGE,
                    grounding={
                        "webSearchQueries": ["meaning of life"],
                        "groundingChunks": [
                            {"web": {"uri": "https://example.com/42", "title": "Forty-two"}}
                        ],
                        "groundingSupports": [
                            {
                                "segment": {
                                    "startIndex": 0,
                                    "endIndex": 17,
                                    "text": "The answer is 42.",
                                },
                                "groundingChunkIndices": [0],
                            }
                        ],
                    },
                    url_context={
                        "urlMetadata": [
                            {
                                "retrievedUrl": "https://example.com/42",
                                "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
                            }
                        ]
                    },
                ),
            ]
        )
    )
    chunks = await collect(
        provider().generate(request(fake, native_tools={"code_execution": True}))
    )
    assert kinds(chunks) == ["code_execution", "code_execution", "text", "grounding", "usage"]
    assert chunks[0].code_execution.code == "print(6*7)" and not chunks[0].code_execution.result
    assert chunks[1].code_execution.result == "42\n"
    grounding = chunks[3].grounding
    assert list(grounding.web_search_queries) == ["meaning of life"]
    assert grounding.grounding_chunks[0].uri == "https://example.com/42"
    assert grounding.grounding_chunks[0].title == "Forty-two"
    support = grounding.grounding_supports[0]
    assert (support.start_index, support.end_index, support.text) == (0, 17, "The answer is 42.")
    assert list(support.grounding_chunk_indices) == [0]
    assert grounding.url_context[0].url == "https://example.com/42"
    assert grounding.url_context[0].status == "URL_RETRIEVAL_STATUS_SUCCESS"


async def test_client_is_cached_per_configuration(fake) -> None:
    gemini = provider()
    req = request(fake)
    assert gemini.client_for(req.llm_config) is gemini.client_for(req.llm_config)
    other = request(fake, project="p2")
    assert gemini.client_for(other.llm_config) is not gemini.client_for(req.llm_config)
    # Startup prewarm builds the client for a well-known key variable.
    warm = GoogleNativeProvider(environ={"GEMINI_API_KEY": "AIza" + "k" * 35})
    warm.prewarm({"GEMINI_API_KEY": "AIza" + "k" * 35})
    assert len(warm._clients) == 1


async def test_missing_key_and_wrong_provider_fail_fast(fake) -> None:
    gemini = GoogleNativeProvider(environ={})
    with pytest.raises(LLMServiceError) as info:
        await collect(gemini.generate(request(fake)))
    assert info.value.code is ErrorCode.CREDENTIALS and not info.value.retryable
    assert "TARSY_TEST_API_KEY" in info.value.message
    with pytest.raises(LLMServiceError) as info:
        await collect(
            provider().generate(make_request("openai", fake.url, backend="google-native"))
        )
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert fake.requests == []


async def test_vertex_with_service_account_file(fake, tmp_path) -> None:
    """Vertex AI with a service-account file: the token comes from the file's token_uri."""
    fake.routes["/token"] = json_reply(
        200, {"access_token": "ya29.test-access-token", "expires_in": 3600, "token_type": "Bearer"}
    )
    creds = tmp_path / "service-account.json"
    creds.write_text(json.dumps(service_account_info(f"{fake.url}/token")))
    fake.add(sse_reply([gemini_chunk([{"text": "from vertex"}], finish="STOP", usage=USAGE)]))
    gemini = GoogleNativeProvider(environ={"VERTEX_CREDS": str(creds)})
    req = make_request(
        "vertexai",
        fake.url,
        backend="google-native",
        model="gemini-2.5-flash",
        api_key_env="",
        credentials_env="VERTEX_CREDS",
        project="proj-1",
        location="europe-west4",
    )
    chunks = await collect(gemini.generate(req))
    assert texts(chunks) == "from vertex"
    sent = fake.post_requests(":streamGenerateContent")[0]
    assert sent.path.endswith(
        "/projects/proj-1/locations/europe-west4/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent"
    )
    assert sent.headers["authorization"] == "Bearer ya29.test-access-token"
    token_requests = [r for r in fake.requests if r.path == "/token"]
    assert len(token_requests) == 1 and b"jwt-bearer" in token_requests[0].body


async def test_vertex_credentials_errors_are_not_retryable(fake, tmp_path) -> None:
    missing = GoogleNativeProvider(environ={})
    req = make_request(
        "vertexai",
        fake.url,
        backend="google-native",
        api_key_env="",
        credentials_env="VERTEX_CREDS",
        project="p",
    )
    with pytest.raises(LLMServiceError) as info:
        await collect(missing.generate(req))
    assert info.value.code is ErrorCode.CREDENTIALS and not info.value.retryable
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    broken = GoogleNativeProvider(environ={"VERTEX_CREDS": str(bad)})
    with pytest.raises(LLMServiceError) as info:
        await collect(broken.generate(req))
    assert info.value.code is ErrorCode.CREDENTIALS
