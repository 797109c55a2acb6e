"""End to end against the REAL local LLM: llama.cpp's server (xllamacpp) running Gemma 3 270M.

One server for the module (infra.local_llm.serve on a free loopback port, n_ctx 2048). The
270M model generates roughly 5-20 tokens/s on a 2-core CPU depending on load, so shortlists
are small and completion budgets bounded; the module takes one to two minutes.

Skipped only when xllamacpp is not importable (`make test` installs requirements-llm.txt).
"""
from __future__ import annotations

import copy
import json
import logging
import socket

import openai
import pytest

pytest.importorskip("xllamacpp", reason="xllamacpp not installed (make llm)")

from rerank import INVALID, Reranker  # noqa: E402
from infra.local_llm import DEFAULT_MODEL_ALIAS, serve, stop, wait_ready  # noqa: E402
from rerank.prompt import build_messages  # noqa: E402
from rerank.schema import entry_branches, response_schema  # noqa: E402
from rerank.validate import check_answer  # noqa: E402
from settings import Settings  # noqa: E402
from test_rerank_faults import SHORTLIST  # noqa: E402  (the same five-task shortlist)

TIMEOUT_S = 150.0


@pytest.fixture(scope="module")
def llm_base_url(tmp_path_factory):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log_path = tmp_path_factory.mktemp("llm") / "server.log"
    # one thread: llama.cpp's threads spin-wait for each other, and the suite's other worker holds a core
    process = serve("127.0.0.1", port, n_ctx=2048, threads=1, log_path=log_path)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(base_url, timeout=120, process=process)
        yield base_url
    except (RuntimeError, TimeoutError) as exc:
        pytest.fail(f"{exc}\n--- server log ---\n{log_path.read_text(errors='replace')[-3000:]}")
    finally:
        stop(process)


def test_the_server_names_its_model_by_the_alias_the_product_asks_for(llm_base_url):
    client = openai.OpenAI(base_url=llm_base_url, api_key="unused", max_retries=0)
    assert DEFAULT_MODEL_ALIAS in {model.id for model in client.models.list()}


# Three candidates, not the product's 15: the path is the same, and the smoke-test model writes
# ~40 tokens of reasons per candidate under the schema's grammar (five took 11 s of the suite).
SHORT = SHORTLIST[:3]


def test_reranker_end_to_end_with_the_product_schema(llm_base_url, caplog, record_property):
    reranker = Reranker(Settings(llm_base_url=llm_base_url, llm_timeout_s=TIMEOUT_S))
    with caplog.at_level(logging.WARNING, logger="rerank"):
        outcome = reranker.rerank("record which children were absent today", SHORT, [])
    record_property("outcome", repr(outcome))
    print(f"\n270M product-schema outcome: {outcome}")

    assert outcome.skipped is None and outcome.degraded in (None, INVALID), "the endpoint must have answered"
    assert sorted(outcome.order) == list(range(len(SHORT)))
    assert outcome.order[: len(outcome.llm_order)] == outcome.llm_order
    assert len(set(outcome.llm_order)) == len(outcome.llm_order)
    assert all(0 <= idx < len(SHORT) for idx in outcome.llm_order)
    assert set(outcome.reasons) == set(outcome.llm_order)
    assert outcome.prompt_tokens > 0 and outcome.completion_tokens > 0
    # The grammar built from the schema binds each idx to its own name: nothing is left to drop.
    assert outcome.dropped == {}
    # llama.cpp's server takes the json_schema type itself: the first rung, no fallback.
    assert "rejected response_format" not in caplog.text


def test_validation_drops_whatever_an_unconstrained_model_invents(llm_base_url, record_property):
    """JSON mode with the answer's shape but no enums: task_name is free text, so the model may
    invent names. It is not required to; the invariant is asserted and the counts recorded
    (printed with `pytest -s`, and as junit properties)."""
    shortlist = SHORTLIST[:3]
    free = copy.deepcopy(response_schema(shortlist))
    entry = entry_branches(free)[0]
    del entry["properties"]["idx"]["enum"], entry["properties"]["task_name"]["enum"]
    free["properties"]["results"]["items"] = entry
    client = openai.OpenAI(base_url=llm_base_url, api_key="unused", timeout=TIMEOUT_S, max_retries=0)
    response = client.chat.completions.create(
        model=DEFAULT_MODEL_ALIAS,
        messages=build_messages("delete all records", shortlist, [], free),  # type: ignore[arg-type]
        temperature=0,
        max_tokens=200,
        response_format={"type": "json_object", "schema": free},  # type: ignore[typeddict-unknown-key]
    )
    content = response.choices[0].message.content
    verdict = check_answer(content, shortlist)

    names = {c.idx: c.name for c in shortlist}
    returned = _entries(content)
    for idx, _reason in verdict.accepted:
        assert idx in names
        assert any(e.get("idx") == idx and e.get("task_name", "").strip() == names[idx] for e in returned)
    if returned:
        assert len(verdict.accepted) + sum(verdict.dropped.values()) == len(returned)
    invented = [e.get("task_name") for e in returned if e.get("task_name", "").strip() not in names.values()]
    record_property("entries_returned", len(returned))
    record_property("entries_accepted", len(verdict.accepted))
    record_property("entries_dropped", json.dumps(dict(verdict.dropped)))
    print(f"\n270M free-name answer: {len(returned)} entries, {len(verdict.accepted)} accepted, "
          f"dropped {dict(verdict.dropped)}, invented names {invented}; raw {content!r}")


def _entries(content: str | None) -> list[dict]:
    """The raw answer's entries (dicts only), or [] when it is not the expected JSON at all."""
    try:
        answer = json.loads(content or "")
    except ValueError:
        return []
    entries = answer.get("results") if isinstance(answer, dict) else answer
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def test_the_evaluations_rerank_configuration_runs_against_the_real_server(llm_base_url, demo_tasks, demo_cases):
    """`app.py evaluate --config rerank` (evaluation.runner.run_rerank_config) through the real
    server: it crashed on the row it builds (a changed QueryRun signature) and no test ran it."""
    from evaluation.configs import config_specs
    from evaluation.evaluate import EvaluationOptions, Replay, Runtime, Split, run_config
    from evaluation.replay import replay_pipeline
    from search.assembly import serving_index
    from search.ranker import default_params

    settings = Settings(llm_base_url=llm_base_url, llm_timeout_s=TIMEOUT_S, embeddings_enabled=False,
                        shortlist_size=len(SHORT))
    tasks = [t for t in demo_tasks if t.category == "health"][:8]
    ids = {t.id for t in tasks}
    cases = [c for c in demo_cases if c.gold and set(c.gold) <= ids]
    train, test = cases[2:], cases[:2]
    spec = config_specs(settings.weights)["rerank"]
    params = default_params(settings)
    pipeline = replay_pipeline(settings, serving_index(settings, tasks, train, params), params, None)
    run = run_config(spec, Runtime(settings), Split(tasks, train, test), Replay(pipeline, [], [], []),
                     EvaluationOptions(depth=5, show=False), (True, "reachable"))
    assert run.skipped is None and len(run.rows) == len(test)
    for row in run.rows:
        assert row.ranking and set(row.ranking) <= ids          # catalog tasks only, whatever the model said
        assert row.extra["rerank"]                             # applied, or why not (skipped, degraded)
    assert sum(run.notes["rerank_outcomes"].values()) == len(test)
    assert sum(1 for r in run.rows if r.extra["rerank"] == "applied") <= run.notes["llm_calls"] <= len(test)
