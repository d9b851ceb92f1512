"""Constructors for ``GenerateResponse`` stream chunks."""

from __future__ import annotations

from .errors import LLMServiceError
from .proto import llm_service_pb2 as pb

GenerateResponse = pb.GenerateResponse

# Chunk kinds that carry model output (as opposed to usage, errors or the final marker).
CONTENT_KINDS = frozenset({"text", "thinking", "tool_call", "code_execution", "grounding"})


def text(content: str) -> pb.GenerateResponse:
    """A piece of answer text."""
    return pb.GenerateResponse(text=pb.TextDelta(content=content))


def thinking(content: str) -> pb.GenerateResponse:
    """A piece of native reasoning."""
    return pb.GenerateResponse(thinking=pb.ThinkingDelta(content=content))


def tool_call(call_id: str, name: str, arguments: str) -> pb.GenerateResponse:
    """One complete tool call with its canonical ``server.tool`` name."""
    return pb.GenerateResponse(
        tool_call=pb.ToolCallDelta(call_id=call_id, name=name, arguments=arguments)
    )


def code_execution(code: str = "", result: str = "") -> pb.GenerateResponse:
    """Gemini code execution: generated code and/or its output."""
    return pb.GenerateResponse(code_execution=pb.CodeExecutionDelta(code=code, result=result))


def grounding(delta: pb.GroundingDelta) -> pb.GenerateResponse:
    """Google Search / URL context grounding metadata."""
    return pb.GenerateResponse(grounding=delta)


def usage(
    input_tokens: int,
    output_tokens: int,
    total_tokens: int,
    thinking_tokens: int = 0,
    cached_input_tokens: int = 0,
) -> pb.GenerateResponse:
    """Token usage of the call, the same way for every provider.

    ``input_tokens`` is the whole prompt, cached tokens included;
    ``cached_input_tokens`` the part of it read from the provider's cache;
    ``output_tokens`` the answer, thinking excluded; ``thinking_tokens`` the
    thinking; ``total_tokens`` as the provider reports it.
    """
    return pb.GenerateResponse(
        usage=pb.UsageInfo(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total_tokens,
            thinking_tokens=thinking_tokens,
            cached_input_tokens=cached_input_tokens,
        )
    )


def error(err: LLMServiceError) -> pb.GenerateResponse:
    """The terminal error chunk (``is_final`` set: nothing follows an error)."""
    return pb.GenerateResponse(
        error=pb.ErrorInfo(message=err.message, code=str(err.code), retryable=err.retryable),
        is_final=True,
    )


def final() -> pb.GenerateResponse:
    """The terminal chunk of a successful call: no content, ``is_final`` set."""
    return pb.GenerateResponse(is_final=True)


def kind(chunk: pb.GenerateResponse) -> str | None:
    """The populated ``content`` oneof field, or None."""
    return chunk.WhichOneof("content")
