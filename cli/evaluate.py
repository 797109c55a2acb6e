"""`python app.py evaluate`: offline evaluation (Hit@K/MRR, baselines, ablations, the fitted
product, abstention, error analysis).

    python app.py evaluate --catalog C.jsonl --cases CASES.jsonl [--holdout 0.2 --seed 42 | --test-cases T.jsonl]
                           [--config all|deterministic|NAME ...] [--out DIR] [--json FILE] [--adaptation]
    python app.py evaluate --clinc150 ../shared/data/clinc150 [--max-per-intent N] [--drop-oos-train]
    python app.py evaluate --catalog C.jsonl --cases CASES.jsonl --holdout-oos   # abstention without written negatives
    python app.py evaluate --catalog C.jsonl --cases CASES.jsonl --test-cases T.jsonl --train-split
                           # T rewrites the --holdout/--seed split's held-out cases (another language:
                           # evaluation/data/languages/); training on that split's training part only
    python app.py evaluate --clinc150 ../shared/data/clinc150 --test-cases T.jsonl   # T instead of val
    python app.py evaluate                 # the current database's tasks and cases (read only)

Everything is built in a throw-away store from the TRAINING cases only; the live database and
its cases are only read. app.py registers `evaluate_command` and `evaluate_prefixes_command`.
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext

from catalog.formats import ImportRejected, load_cases_file, load_tasks_file
from catalog.splits import holdout_split
from evaluation import clinc150 as clinc
from evaluation.configs import resolve
from evaluation.evaluate import EvaluationOptions, Runtime, Split, evaluate
from evaluation.report import json_safe, write_all


def _load_clinc(clinc_dir: Path, max_per_intent: int | None, max_test_per_intent: int | None,
                sample_seed: int | None = None, test_cases: Path | None = None):
    """(tasks, train, test, source) of CLINC150: train (+oos_train) to learn from, val (+oos_val)
    held out (evaluation.clinc150.load), or the cases of `test_cases` (e.g. a sample of val written
    in another language: evaluation/data/languages/)."""
    data = clinc.load(clinc_dir, max_per_intent, max_test_per_intent, sample_seed)
    test = data.test if test_cases is None else load_cases_file(test_cases, {t.id for t in data.tasks})
    return data.tasks, data.train, test, {
        "catalog": f"clinc150:{clinc_dir}", "cases": f"{clinc_dir}/train.jsonl + oos_train.jsonl",
        "test_cases": f"{clinc_dir}/val.jsonl + oos_val.jsonl" if test_cases is None else str(test_cases),
        "split": "CLINC150 train (+oos_train) -> lexicon; val (+oos_val) -> evaluation"
                 + (f"; max {max_per_intent} training requests per intent" if max_per_intent is not None else "")
                 + (f" (random sample, seed {sample_seed})" if sample_seed is not None else "")
                 + (f"; max {max_test_per_intent} val requests per intent" if max_test_per_intent else ""),
        "dropped_duplicate_requests": data.dropped_duplicates,
        "rationale_note": "CLINC cases have no rationale: the lexicon links the training requests' own words"}


def _load(catalog: Path | None, cases: Path | None, test_cases: Path | None, holdout: float, seed: int,
          train_split: bool = False):
    """(tasks, train, test, source) of a catalog and cases file (or the current database's), split
    by `test_cases` or a hash holdout (catalog.splits.holdout_split). `train_split`: with
    `test_cases`, train on the holdout's training part only (the test file rewrites the held-out
    cases, e.g. in another language: evaluation/data/languages/, so their originals stay out)."""
    if (catalog is None) != (cases is None):
        raise click.UsageError("--catalog and --cases go together (or give neither to use the current database)")
    if catalog is not None:
        tasks = load_tasks_file(catalog)
        ids = {t.id for t in tasks}
        all_cases = load_cases_file(cases, ids)
        source = {"catalog": str(catalog), "cases": str(cases)}
    else:
        store = current_app.extensions["taskfinder"].store
        tasks, all_cases = store.tasks(), store.cases()
        url = store.engine.url.render_as_string(hide_password=True)
        source = {"catalog": f"database:{url}", "cases": f"database:{url}"}
        ids = {t.id for t in tasks}
    if test_cases is not None and train_split:
        test = load_cases_file(test_cases, ids)
        held_queries = {c.query for c in test}
        train = [c for c in holdout_split(all_cases, holdout, seed)[0] if c.query not in held_queries]
        source.update(test_cases=str(test_cases), holdout=holdout,
                      split=f"explicit test file; training: the hash holdout {holdout} seed {seed}'s training part")
    elif test_cases is not None:
        test = load_cases_file(test_cases, ids)
        held = {c.query for c in test}
        train = [c for c in all_cases if c.query not in held]
        source.update(test_cases=str(test_cases), dropped_train_overlap=len(all_cases) - len(train),
                      split=f"explicit test file ({len(all_cases) - len(train)} training cases with the same query dropped)")
    else:
        train, test = holdout_split(all_cases, holdout, seed)
        source.update(split=f"hash holdout {holdout} seed {seed} (catalog.splits.holdout_split)", holdout=holdout)
    return tasks, train, test, source


@click.command("evaluate")
@click.option("--catalog", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--cases", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--test-cases", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--holdout", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.2, show_default=True)
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--config", "configs", multiple=True, help="Configuration name(s), comma-separated or repeated; 'all'.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--adaptation", is_flag=True, help="Paper 4.7: new acronym tasks before/after teaching cases.")
@click.option("--clinc150", "clinc_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None)
@click.option("--max-per-intent", type=click.IntRange(0), default=None,
              help="CLINC150: at most N training requests per intent (0: zero-shot, intent names only).")
@click.option("--sample-seed", type=int, default=None,
              help="CLINC150: with --max-per-intent, keep a random sample (this seed) rather than the first N.")
@click.option("--max-test-per-intent", type=click.IntRange(1), default=None)
@click.option("--drop-oos-train", is_flag=True,
              help="Train without written negatives: drop every out-of-scope case from the training split "
                   "(CLINC150: oos_train). The abstention then has only in-scope cases and the generic memory.")
@click.option("--holdout-oos", is_flag=True,
              help="Move every out-of-scope case of the training split into the held-out split (the demo: all "
                   "its off-topic cases become unseen test queries).")
@click.option("--train-split", is_flag=True,
              help="With --test-cases: train on the --holdout/--seed split's training part only (the test file "
                   "rewrites the held-out cases, e.g. in another language).")
@click.option("--depth", type=click.IntRange(10, 100), default=20, show_default=True)
@click.option("--cv-max-queries", type=click.IntRange(10), default=3000, show_default=True,
              help="Fit on at most this many cross-validated training queries (a stable hash sample).")
@click.option("--bootstrap", "resamples", type=click.IntRange(100), default=1000, show_default=True)
@click.option("--progress/--no-progress", default=True)
@with_appcontext
def evaluate_command(catalog, cases, test_cases, holdout, seed, configs, out, json_path, adaptation,
                     clinc_dir, max_per_intent, sample_seed, max_test_per_intent, drop_oos_train, holdout_oos,
                     train_split, depth, cv_max_queries, resamples, progress):
    """Offline evaluation: fit on the training split, then Hit@K, MRR, nDCG, baselines, ablations,
    abstention and error analysis on the held-out split."""
    services = current_app.extensions["taskfinder"]
    settings = services.settings
    try:
        names = resolve(configs)
        tasks, train, test, source = (
            _load_clinc(clinc_dir, max_per_intent, max_test_per_intent, sample_seed, test_cases)
            if clinc_dir is not None else _load(catalog, cases, test_cases, holdout, seed, train_split))
    except (ValueError, ImportRejected) as exc:
        raise click.UsageError(str(exc)) from exc
    train, test, source = without_written_negatives(train, test, source, drop_oos_train, holdout_oos)
    if not test:
        raise click.UsageError("no held-out cases: raise --holdout or pass --test-cases")
    embedder = services.search.embedder
    report, artefacts = evaluate(Runtime(settings, embedder, services.cache), Split(tasks, train, test, source), names,
                                 EvaluationOptions(seed=seed, depth=depth, cv_max_queries=cv_max_queries, show=progress,
                                                   bootstrap_resamples=resamples))
    command = "python app.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    extra = []
    if adaptation:
        from evaluation import adaptation as adaptation_experiment   # ~0.1 s that `app.py search` never needs
        result = adaptation_experiment.run(settings, Split(tasks, train, test), embedder, progress)
        report["adaptation"] = result
        extra.append(adaptation_experiment.markdown(result))
    report = json_safe(report)
    if out is not None:
        write_all(out, report, artefacts, command, extra)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    click.echo(summary_table(report))
    if out is not None:
        click.echo(f"report: {out / 'report.md'}")


def without_written_negatives(train, test, source: dict, drop: bool, holdout: bool):
    """(train, test, source): the training split's out-of-scope cases dropped (`drop`) or moved to
    the held-out split (`holdout`), so abstention is measured as a catalog without written
    negatives would see it."""
    negatives = [c for c in train if not c.gold]
    if not (drop or holdout) or not negatives:
        return train, test, source
    train = [c for c in train if c.gold]
    if holdout:
        test = [*test, *negatives]
    note = f"{len(negatives)} out-of-scope training cases " + ("moved to the held-out split" if holdout else "dropped")
    return train, test, {**source, "written_negatives": note}


def summary_table(report: dict) -> str:
    def f(v):
        return "    -" if v is None else f"{v:.3f}"

    lines = [f"{'config':26} {'n':>5} {'Hit@1':>6} {'Hit@3':>6} {'Hit@5':>6} {'MRR':>6} {'nDCG10':>6} {'OOSFPR':>6} "
             f"{'H5thr':>6} {'refuse':>6} {'p50ms':>7}"]
    for name, c in report["configs"].items():
        if c.get("skipped"):
            lines.append(f"{name:26} skipped: {c['skipped']}")
            continue
        lat = c.get("latency_ms_p50")
        lines.append(f"{name:26} {c['n']:>5} {f(c['hit@1']):>6} {f(c['hit@3']):>6} {f(c['hit@5']):>6} "
                     f"{f(c['mrr']):>6} {f(c['ndcg@10']):>6} {f(c.get('oos_fpr')):>6} "
                     f"{f(c.get('hit@5_with_threshold')):>6} {f(c.get('in_scope_abstain')):>6} "
                     f"{lat if lat is None else round(lat, 2):>7}")
    fit = report.get("fit") or {}
    lines.append(f"ranker: {fit.get('status')}" + (f"; CV (full) fitted {fit['cv']['full']['fitted']}" if
                                                    fit.get("cv", {}).get("full") else ""))
    for mode, point in (fit.get("abstention") or {}).items():
        if point:
            lines.append(f"abstention ({mode}, {point.get('kind')}, budget {point.get('budget')}), CV: Hit@5 "
                         f"{f(point.get('hit@5'))} (answer-all {f(point.get('hit5_answer_all'))}), in-scope refused "
                         f"{f(point.get('in_scope_abstain'))}, OOS FPR {f(point.get('oos_fpr'))}, negatives answered "
                         f"{point.get('negatives_answered')}")
    if report.get("adaptation"):
        a = report["adaptation"]
        lines.append(f"adaptation Hit@5 on new-task queries: before {a['before']['new_queries']['hit@5']:.3f} -> "
                     f"after {a['after']['new_queries']['hit@5']:.3f}")
    return "\n".join(lines)


@click.command("evaluate-prefixes")
@click.option("--catalog", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--cases", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--clinc150", "clinc_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None)
@click.option("--holdout", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.2, show_default=True)
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--max-test-per-intent", type=click.IntRange(1), default=None, help="CLINC150: at most N val requests per intent")
@click.option("--cv-max-queries", type=click.IntRange(10), default=3000, show_default=True,
              help="fit on at most this many CV queries")
@click.option("--test-cases", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="held-out queries from this file (e.g. real traffic) instead of a holdout of --cases")
@click.option("--train-split", is_flag=True,
              help="With --test-cases: train on the --holdout/--seed split's training part only (the test file "
                   "rewrites the held-out cases, e.g. in another language).")
@click.option("--cold-start", is_flag=True, help="rank with no case at all (the shipped defaults; the engine too)")
@click.option("--every-keystroke", "keystrokes", is_flag=True,
              help="also type each held-out query one character at a time from the third, each keystroke with "
                   "what the widget shows for the one before it on screen, and judge the sequence (refused, the "
                   "gold vanishing, flips: evaluation.prefixes.keystroke_score; 'alone': each keystroke on its own)")
@click.option("--page-language", default=None,
              help="the language of the page the queries are typed on, as the widget sends it (the API's lang: "
                   "'es', 'pt-BR'): read where a typed text's words show no language")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@with_appcontext
def evaluate_prefixes_command(catalog, cases, clinc_dir, holdout, seed, max_test_per_intent, cv_max_queries, test_cases,
                              train_split, cold_start, keystrokes, page_language, json_path):
    """Type-ahead: Hit@K/MRR on prefixes (3, 5, 8 characters) of the held-out queries
    (evaluation.prefixes)."""
    from evaluation.prefixes import run as run_prefixes
    from lexicon.language import page_language as language_of_page

    services = current_app.extensions["taskfinder"]
    try:
        tasks, train, test, source = (_load_clinc(clinc_dir, None, max_test_per_intent, None, test_cases)
                                      if clinc_dir is not None
                                      else _load(catalog, cases, test_cases, holdout, seed, train_split))
    except (ValueError, ImportRejected) as exc:
        raise click.UsageError(str(exc)) from exc
    result = {"source": source, "page_language": page_language, "cuts": run_prefixes(services.settings, Split(tasks, train, test),
                                                     services.search.embedder, seed=seed, cv_max_queries=cv_max_queries,
                                                     cold_start=cold_start, keystrokes=keystrokes,
                                                     language=language_of_page(page_language))}
    text = json.dumps(result, indent=2, default=str)
    if json_path:
        json_path.write_text(text + "\n")
    click.echo(text)
