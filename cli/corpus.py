"""`python app.py corpus ...`: ingest, search, enrich, evaluate named corpora (kb/).

Commands read settings from current_app.config["SETTINGS"] (they run in the app context).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext

from kb.llm import MODES as PROMPT_MODES
from kb.search import KB, KBConfig, MODES
from kb.store import IngestError, parse_qrels, parse_queries

corpus_group = click.Group("corpus", help="Named document corpora: ingest, enrich, search, evaluate.")


def _kb(**config) -> KB:
    return KB(current_app.config["SETTINGS"], config=KBConfig(**{k: v for k, v in config.items() if v is not None}))


@corpus_group.command("ingest")
@click.option("--name", required=True, help="Corpus name (letters, digits, _ . -).")
@click.option("--beir", "beir_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="BEIR folder: corpus.jsonl, queries*.jsonl, qrels/*.tsv.")
@click.option("--jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help='Plain JSONL: {"id"|"_id", "title"?, "text"} per line.')
@click.option("--replace", is_flag=True, help="Also remove documents absent from the input.")
@click.option("--k1", type=float, default=None, help="BM25 k1 (default 0.9).")
@click.option("--b", type=float, default=None, help="BM25 b (default 0.4).")
@click.option("--no-join-compounds", is_flag=True, default=None,
              help="BEIR-parity analysis: do not add joined compounds (ASQ-3 -> asq, 3 only).")
@with_appcontext
def ingest(name, beir_dir, jsonl, replace, k1, b, no_join_compounds):
    """Validate and (re-)ingest documents; the index is updated for changed documents only."""
    if (beir_dir is None) == (jsonl is None):
        raise click.UsageError("give exactly one of --beir or --jsonl")
    kb = _kb()
    try:
        stats = kb.store.ingest(name, beir_dir=beir_dir, jsonl=jsonl, replace=replace, k1=k1, b=b,
                                join_compounds=None if no_join_compounds is None else not no_join_compounds)
    except IngestError as exc:
        raise click.ClickException(str(exc)) from exc
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps({"corpus": name, **stats}))


@corpus_group.command("search")
@click.option("--name", required=True)
@click.option("--q", "query", required=True)
@click.option("--k", type=click.IntRange(1, 1000), default=10)
@click.option("--mode", type=click.Choice(MODES), default="bm25")
@click.option("--json", "as_json", is_flag=True, help="Print the full JSON answer (with explanations).")
@with_appcontext
def search(name, query, k, mode, as_json):
    """Search a corpus and print the ranking."""
    kb = _kb()
    if not kb.store.exists(name):
        raise click.ClickException(f"unknown corpus {name!r}")
    reason = kb.unavailable(name, mode)
    if reason:
        raise click.ClickException(f"mode {mode!r} unavailable: {reason}")
    out = kb.search(name, query, k, mode)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    for r in out["results"]:
        terms = ", ".join(f"{m['term']}({m['source'][0]})" for m in r.get("matched", [])[:6])
        click.echo(f"{r['rank']:>3}  {r['score']:8.3f}  {r['id']}  {r['title'][:70]}  [{terms}]")


@corpus_group.command("enrich")
@click.option("--name", required=True)
@click.option("--mode", "prompt_mode", type=click.Choice(PROMPT_MODES), default="fact_checking",
              help="Task-aware prompt mode.")
@click.option("--variant", type=click.Choice(["sira", "sage"]), default="sira")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N documents.")
@click.option("--concurrency", type=click.IntRange(1, 64), default=4)
@click.option("--max-df", type=click.FloatRange(0, 1), default=0.05, help="Upper DF bound (corpus fraction).")
@click.option("--weight", type=click.FloatRange(0, min_open=True), default=1.0, help="Weight of injected postings.")
@click.option("--apply-only", is_flag=True, help="No LLM requests: rebuild postings from the cache.")
@with_appcontext
def enrich(name, prompt_mode, variant, limit, concurrency, max_df, weight, apply_only):
    """LLM corpus enrichment (resumable, cached); injects DF-filtered n-gram postings."""
    from kb.enrich import EnrichOptions, enrich_corpus
    from kb.jobs import JobOptions

    kb = _kb()
    if not kb.store.exists(name):
        raise click.ClickException(f"unknown corpus {name!r}")
    llm = None if apply_only else kb.llm
    if llm is None and not apply_only:
        raise click.ClickException("no LLM endpoint configured (LLM_BASE_URL); use --apply-only to reuse the cache")
    report = enrich_corpus(kb.store, name, llm, kb.cache, kb.settings.llm_model,
                           EnrichOptions(prompt_mode, variant, limit, max_df, weight),
                           JobOptions(concurrency, progress=sys.stderr.isatty()))
    click.echo(json.dumps(report, indent=1))


@corpus_group.command("enrich-catalog")
@click.option("--max-df", type=click.FloatRange(0, 1), default=0.1, show_default=True,
              help="Upper DF bound, as a fraction of the catalog.")
@click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True)
@with_appcontext
def enrich_catalog(max_df, concurrency):
    """Ask the LLM for vocabulary missing from each task (task_catalog mode; cached, resumable).

    The search index reads the cached, DF-filtered terms into the prefilter's `enriched` field
    when CATALOG_ENRICHMENT=1. The enrichment lives in the cache, not in the store, so the
    store's revision is bumped afterwards: serving processes only rebuild their index when the
    revision moves, and would otherwise never see the new vocabulary."""
    from kb.enrich import enrich_tasks
    from kb.jobs import JobOptions

    kb = _kb()
    if kb.llm is None:
        raise click.ClickException("no LLM endpoint configured (LLM_BASE_URL)")
    store = current_app.extensions["taskfinder"].store
    tasks = store.tasks()
    enrichment = enrich_tasks(tasks, kb.llm, kb.cache, kb.settings.llm_model, max_df=max_df,
                              job=JobOptions(concurrency, progress=sys.stderr.isatty()))
    revision = store.bump_revision()
    enriched = {task_id: terms for task_id, terms in enrichment.items() if terms}
    click.echo(json.dumps({"tasks": len(tasks), "tasks_enriched": len(enriched), "store_revision": revision,
                           "terms": sum(len(t) for t in enriched.values()), "model": kb.settings.llm_model,
                           "sample": dict(list(enriched.items())[:5])}, indent=1))


@corpus_group.command("evaluate")
@click.option("--name", required=True)
@click.option("--queries", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Queries JSONL (default: the corpus's only ingested split).")
@click.option("--qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--mode", "modes", multiple=True, type=click.Choice(MODES + ("all",)), default=("bm25",))
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N judged queries.")
@click.option("--prompt-mode", type=click.Choice(PROMPT_MODES), default="fact_checking")
@click.option("--lam", type=float, default=None, help="Expansion weight lambda.")
@click.option("--max-df", type=float, default=None)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@with_appcontext
def evaluate(name, queries, qrels, modes, limit, prompt_mode, lam, max_df, json_path):
    """nDCG@10, Recall@10, Recall@100, MRR@10 per mode (LLM modes skipped without an endpoint)."""
    from evaluation.corpus import evaluate_corpus   # when it runs: ~0.2 s that `app.py search` never needs

    kb = _kb(prompt_mode=prompt_mode, lam=lam, max_df=max_df)
    if not kb.store.exists(name):
        raise click.ClickException(f"unknown corpus {name!r}")
    if queries is None or qrels is None:
        splits = {s: p for s, p in kb.store.splits(name).items() if p[0] and p[1]}
        if len(splits) != 1:
            raise click.UsageError(f"give --queries and --qrels (ingested splits: {', '.join(splits) or 'none'})")
        q_path, r_path = next(iter(splits.values()))
        queries, qrels = queries or q_path, qrels or r_path
    try:
        qs, judged = parse_queries(queries), parse_qrels(qrels)
    except IngestError as exc:
        raise click.ClickException(str(exc)) from exc
    qs = [q for q in qs if q["_id"] in judged]
    if limit:
        qs = qs[:limit]
    mode_list = list(MODES) if "all" in modes else list(dict.fromkeys(modes))
    result = evaluate_corpus(kb, name, qs, judged, mode_list, progress=sys.stderr.isatty())
    click.echo(f"{'mode':<12} {'nDCG@10':>8} {'R@10':>7} {'R@100':>7} {'MRR@10':>7} {'n':>5}")
    for mode, m in result["modes"].items():
        if "skipped" in m:
            click.echo(f"{mode:<12} skipped: {m['skipped']}")
        else:
            click.echo(f"{mode:<12} {m['ndcg@10']:8.4f} {m['recall@10']:7.4f} {m['recall@100']:7.4f} "
                       f"{m['mrr@10']:7.4f} {m['n']:>5}")
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1), encoding="utf-8")
