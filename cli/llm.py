"""`python app.py llm ...`: the local llama.cpp server (infra.local_llm) as a command group."""
from __future__ import annotations

import signal
import sys

import click

from infra.local_llm import serve, stop, wait_ready

READY_TIMEOUT_S = 180.0


@click.group("llm")
def llm_group() -> None:
    """The local default LLM for re-ranking and enrichment (llama.cpp server, Gemma 3 270M)."""


@llm_group.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Listen address.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="Listen port.")
@click.option("--model-path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A GGUF model file. Default: the bundled Gemma 3 270M.")
@click.option("--n-ctx", default=4096, show_default=True, type=click.IntRange(512), help="Context size in tokens.")
@click.option("--threads", type=click.IntRange(1), default=None,
              help="CPU threads. Default: llama.cpp's (half the CPUs).")
def serve_command(host: str, port: int, model_path: str | None, n_ctx: int, threads: int | None) -> None:
    """Run the OpenAI-compatible LLM server in the foreground until interrupted."""
    # A supervisor stops us with SIGTERM: turn it into SystemExit so the server is stopped too
    # (the finally below) instead of being orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        process = serve(host, port, model_path=model_path, n_ctx=n_ctx, threads=threads)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    base_url = f"http://{host}:{port}/v1"
    try:
        wait_ready(base_url, READY_TIMEOUT_S, process)
        click.echo(f"LLM server ready. Point Taskfinder at it with LLM_BASE_URL={base_url}", err=True)
        returncode = process.wait()
    except (RuntimeError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        returncode = 0
    finally:
        stop(process)
    if returncode:
        raise SystemExit(returncode)
