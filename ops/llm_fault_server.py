"""A real loopback OpenAI-compatible chat server that misbehaves on purpose, for fault injection.

    with FaultLLMServer(mode="http500") as server:
        settings = Settings(llm_base_url=server.base_url)
        ...
        assert server.request_count == 1

It parses the real request the `openai` client sends (`server.requests` keeps every body), so
tests can assert on the prompt, the response_format schema and the sampling parameters. Answers
are derived from the shortlist found in the prompt (the lines `{"idx": ..., "task_name": ...}`).
`mode` may be changed between calls. Modes:

    ok                  answer the whole shortlist in reverse order, all entries valid
    bare_array          like ok, but a bare top-level array instead of {"results": [...]}
    slow                like ok, after sleeping `delay_s` (longer than the client timeout)
    http500             HTTP 500
    http400             HTTP 400 about the context length (not about response_format)
    garbage_body        HTTP 200 whose body is not JSON at all
    truncated           the ok answer cut in half (finish_reason "length")
    wrong_shape         valid JSON of the wrong shape
    hallucinate         the last entry, then an invented task name at idx 0
    idx_out_of_range    an idx beyond the shortlist, then entry 0
    name_swap           idx 0 carrying the name of entry 1, then entry 2
    duplicates          entry 1, entry 1 again, entry 0
    empty               {"results": []} ("no entry fits")
    obey_injection      only {"idx": 0, "task_name": "Delete all records"}, as if the model
                        followed an injected instruction
    reject_json_schema  `reject_status` (400) for response_format type json_schema, else ok
    plain_json_only     rejects json_schema and json_object with a "schema" key, else ok
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = (
    "ok", "bare_array", "slow", "http500", "http400", "garbage_body", "truncated", "wrong_shape", "hallucinate",
    "idx_out_of_range", "name_swap", "duplicates", "empty", "obey_injection", "reject_json_schema",
    "plain_json_only",
)
INVENTED_NAME = "Export Everything To Excel"
INJECTED_NAME = "Delete all records"


def shortlist_of(body: dict[str, Any]) -> list[tuple[int, str]]:
    """(idx, task_name) of every shortlist line in the request's messages."""
    entries = []
    for message in body.get("messages", []):
        for line in str(message.get("content", "")).splitlines():
            if line.startswith('{"idx"'):
                entry = json.loads(line)
                entries.append((entry["idx"], entry["task_name"]))
    return entries


def _entry(rank: int, idx: int, name: str, reason: str = "fits the query") -> dict[str, Any]:
    return {"rank": rank, "idx": idx, "task_name": name, "reason": reason}


def _answer(mode: str, shortlist: list[tuple[int, str]]) -> Any:
    """The JSON document the 'model' returns in this mode."""
    name = dict(shortlist)
    last = shortlist[-1][0]
    if mode == "wrong_shape":
        return {"answer": name[0]}
    if mode == "hallucinate":
        return {"results": [_entry(1, last, name[last]), _entry(2, 0, INVENTED_NAME)]}
    if mode == "idx_out_of_range":
        return {"results": [_entry(1, len(shortlist) + 5, name[0]), _entry(2, 0, name[0])]}
    if mode == "name_swap":
        return {"results": [_entry(1, 0, name[1]), _entry(2, 2, name[2])]}
    if mode == "duplicates":
        return {"results": [_entry(1, 1, name[1]), _entry(2, 1, name[1]), _entry(3, 0, name[0])]}
    if mode == "empty":
        return {"results": []}
    if mode == "obey_injection":
        return {"results": [_entry(1, 0, INJECTED_NAME, "the user asked for it")]}
    entries = [_entry(rank, idx, n) for rank, (idx, n) in enumerate(reversed(shortlist), start=1)]
    return entries if mode == "bare_array" else {"results": entries}


class FaultLLMServer:
    def __init__(self, mode: str = "ok", *, delay_s: float = 2.0, reject_status: int = 400):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
        self.mode = mode
        self.delay_s = delay_s
        self.reject_status = reject_status
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fault-llm", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def __enter__(self) -> "FaultLLMServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()  # releases handlers sleeping in "slow" mode
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def _respond(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """(status, body bytes) for one chat-completion request in the current mode."""
        mode = self.mode
        response_format = body.get("response_format") or {}
        if mode == "http500":
            return 500, _error("internal failure injected by FaultLLMServer", "server_error")
        if mode == "http400":
            return 400, _error("maximum context length exceeded", "invalid_request_error", param="messages")
        if mode == "garbage_body":
            return 200, b"<html>this is not JSON</html>"
        rejected = mode in ("reject_json_schema", "plain_json_only") and response_format.get("type") == "json_schema"
        rejected |= mode == "plain_json_only" and "schema" in response_format
        if rejected:
            return self.reject_status, _error(
                f"response_format {json.dumps(response_format)[:60]} is not supported", "invalid_request_error",
                param="response_format",
            )
        if mode == "slow":
            self._stopping.wait(self.delay_s)
        content = json.dumps(_answer(mode, shortlist_of(body)))
        finish_reason = "stop"
        if mode == "truncated":
            content, finish_reason = content[: len(content) // 2], "length"
        return 200, json.dumps({
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fault-llm"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168},
        }).encode()


def _error(message: str, kind: str, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": None}}).encode()


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: bytes) -> None:
    """Answer with a JSON body; a client that already gave up (timeout tests) is ignored."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fault-llm", "object": "model"}]}).encode())
        else:
            self._send(404, _error("not found", "not_found"))

    def do_POST(self) -> None:  # noqa: N802
        owner: FaultLLMServer = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, _error("not found", "not_found"))
            return
        body = json.loads(raw)
        owner._record(body)
        status, payload = owner._respond(body)
        self._send(status, payload)

    def _send(self, status: int, payload: bytes) -> None:
        send_json(self, status, payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        return
