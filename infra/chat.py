"""One chat-completion call to any OpenAI-compatible endpoint, with response-format negotiation.

Servers differ in how they take a JSON contract, so the request climbs down a ladder:

    json_schema         {"type": "json_schema", "json_schema": {..., "strict": true}}
                        OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's own server (the local
                        default, infra.local_llm)
    json_object+schema  {"type": "json_object", "schema": {...}} and the schema in the prompt
                        llama-cpp-python, which turns `schema` into a grammar
    json_object         {"type": "json_object"} and the schema in the prompt; anything else

With LLM_RESPONSE_FORMAT=auto the first call tries json_schema; when the server rejects the
`response_format` itself (HTTP 400/422, or the 500 that llama-cpp-python answers with, whose
error text names response_format) the call is retried at once one rung lower, and the rung is
remembered per base URL for the life of the process. `json_object` starts on the second rung;
`json_schema` is pinned to the first and never falls back. Every other error propagates as
`LLMUnavailable`, for the caller to degrade on (the re-ranker; kb.llm for enrichment).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT = "json_schema", "json_object+schema", "json_object"
_LADDER = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT)
_START = {"auto": 0, "json_schema": 0, "json_object": 1}
_FORMAT_REJECTION_STATUS = {400, 422, 500}

Messages = list[dict[str, str]]


def json_schema_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """`response_format` for servers with structured outputs (OpenAI, Azure, vLLM, Ollama)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def json_object_format(schema: dict[str, Any] | None) -> dict[str, Any]:
    """`response_format` JSON mode; with `schema`, the llama.cpp extension that constrains decoding.

    llama-cpp-python rejects the `json_schema` type but turns a `schema` key inside `json_object`
    into a grammar (llama.cpp's own server takes both).
    """
    return {"type": "json_object"} if schema is None else {"type": "json_object", "schema": schema}


class LLMUnavailable(Exception):
    """The endpoint did not produce an answer: timeout, connection error or HTTP error."""


@dataclass(frozen=True)
class Reply:
    content: str | None
    prompt_tokens: int
    completion_tokens: int


class ChatClient:
    """Chat completions at temperature 0 against one endpoint, remembering its format rung."""

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        response_format: str = "auto",
    ):
        if response_format not in _START:
            raise ValueError(f"response_format must be one of {sorted(_START)}, not {response_format!r}")
        self._client = client
        self._model = model
        self._mode = response_format
        self._rung_by_url: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def response_format(self) -> str:
        """The rung the next call will start on for this endpoint."""
        with self._lock:
            return _LADDER[self._rung_by_url.get(self.base_url, _START[self._mode])]

    def complete(
        self,
        render: Callable[[dict[str, Any] | None], Messages],
        schema: dict[str, Any],
        max_tokens: int,
        *,
        schema_name: str = "response",
        grammar_schema: dict[str, Any] | None = None,
    ) -> Reply:
        """Send one request; `render(schema_or_None)` builds the messages for the chosen rung.

        `schema` is the strict schema: the json_schema rung sends it under `schema_name`, and the
        plain json_object rung spells it out in the prompt via `render`. `grammar_schema` (default:
        `schema`) is what the json_object+schema rung hands the server to turn into a grammar.
        Raises LLMUnavailable for every failure that is not a rejected response_format.
        """
        import openai  # already loaded by whoever built the client; lazy for the CLI's start-up

        while True:
            rung = self.response_format()
            # Where the server enforces the schema (json_schema, or a llama.cpp grammar) the prompt
            # does not repeat it: that costs ~300 prompt tokens a call, and small models copy its
            # keywords ("properties", "required") into their answers. Plain JSON mode gets it spelled out.
            if rung == JSON_SCHEMA:
                fmt, messages = json_schema_format(schema, schema_name), render(None)
            elif rung == JSON_OBJECT_SCHEMA:
                fmt, messages = json_object_format(schema if grammar_schema is None else grammar_schema), render(None)
            else:
                fmt, messages = json_object_format(None), render(schema)
            try:
                response = self._client.chat.completions.create(
                    model=self._model,
                    messages=messages,  # type: ignore[arg-type]
                    temperature=0,
                    response_format=fmt,  # type: ignore[arg-type]
                    max_tokens=max_tokens,
                )
            except openai.APIStatusError as exc:
                if self._can_fall_back(rung) and _rejects_response_format(exc):
                    self._fall_back(rung)
                    log.warning("LLM at %s rejected response_format %s (HTTP %s); using %s from now on",
                                self.base_url, rung, exc.status_code, self.response_format())
                    continue
                raise LLMUnavailable(f"HTTP {exc.status_code}: {exc.message}") from exc
            except openai.APITimeoutError as exc:
                raise LLMUnavailable("timeout") from exc
            except openai.APIError as exc:  # connection errors, unreadable responses
                raise LLMUnavailable(f"{type(exc).__name__}: {exc}") from exc
            usage = response.usage
            return Reply(
                content=response.choices[0].message.content if response.choices else None,
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
            )

    def _can_fall_back(self, rung: str) -> bool:
        return self._mode != "json_schema" and rung != JSON_OBJECT

    def _fall_back(self, rung: str) -> None:
        with self._lock:
            self._rung_by_url[self.base_url] = _LADDER.index(rung) + 1


def _rejects_response_format(exc: openai.APIStatusError) -> bool:
    """Whether the error is the server refusing our response_format (not some other failure)."""
    if exc.status_code not in _FORMAT_REJECTION_STATUS:
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text
