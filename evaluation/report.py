"""Files an evaluation leaves in --out: TREC qrels/run files, PNG charts, a Markdown report."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

from catalog.records import CaseRecord

RUN_TAG_PREFIX = "taskfinder"


def json_safe(value):
    """The report as strict JSON can hold it: NaN/inf -> null, tuples -> lists, keys -> strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def qid(position: int) -> str:
    return f"q{position:05d}"


def write_qrels(path: Path, test: Sequence[CaseRecord]) -> None:
    """`qid 0 docid 1` per gold task; out-of-scope cases have no line (trec_eval skips them)."""
    with path.open("w", encoding="utf-8") as out:
        for i, case in enumerate(test):
            for task_id in case.gold:
                out.write(f"{qid(i)} 0 {task_id} 1\n")


def write_run(path: Path, name: str, rows, test: Sequence[CaseRecord]) -> None:
    """Standard 6-column run: `qid Q0 docid rank score tag`. The score is a rank-derived value
    (depth - rank + 1) so that trec_eval, which sorts by score, sees exactly our order (a
    re-ranked list's fused scores are not monotone)."""
    position = {case.query: i for i, case in enumerate(test)}
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            depth = len(row.ranking)
            for rank, task_id in enumerate(row.ranking, start=1):
                out.write(f"{qid(position[row.query])} Q0 {task_id} {rank} {depth - rank + 1} {RUN_TAG_PREFIX}-{name}\n")


def write_queries(path: Path, test: Sequence[CaseRecord]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i, case in enumerate(test):
            out.write(f"{qid(i)}\t{case.query.replace(chr(9), ' ')}\n")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ablation_chart(path: Path, configs: dict) -> None:
    plt = _plt()
    names = [n for n, c in configs.items() if not c.get("skipped")]
    metrics = ("hit@1", "hit@3", "hit@5", "mrr")
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(names) + 2), 4.2))
    width = 0.8 / len(metrics)
    for j, metric in enumerate(metrics):
        values = [configs[n][metric] for n in names]
        errs = [[v - (configs[n]["ci"].get(metric) or (v, v))[0] for n, v in zip(names, values)],
                [(configs[n]["ci"].get(metric) or (v, v))[1] - v for n, v in zip(names, values)]]
        xs = [i + (j - 1.5) * width for i in range(len(names))]
        ax.bar(xs, values, width, label=metric, yerr=errs, capsize=2)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (95% bootstrap CI)")
    ax.set_title("Ablation on the held-out split")
    ax.legend(fontsize=8, ncol=4, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _f(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(c: dict, key: str) -> str:
    ci = (c.get("ci") or {}).get(key)
    return f"{_f(c.get(key))} [{_f(ci[0], 2)}, {_f(ci[1], 2)}]" if ci else _f(c.get(key))


def fit_section(fit: dict, data: dict, configs: dict) -> list[str]:
    """The per-catalog fit (training split only) and the abstention it chose."""
    lines = ["## Per-catalog fit (CV inside the training split)", "", f"Status: {fit.get('status')}.", ""]
    cv = dict(fit.get("cv") or {})
    typing = cv.pop("typing", None) or {}
    foreign = cv.pop("foreign", None)
    for mode, row in cv.items():
        before, after = row["defaults"], row["fitted"]
        lines.append(f"- {mode} mode, {after['n']} CV queries: shipped defaults Hit@1 {_f(before.get('hit@1'))} / "
                     f"MRR {_f(before.get('mrr'))} -> fitted Hit@1 {_f(after.get('hit@1'))} / MRR {_f(after.get('mrr'))}")
    for mode, row in typing.items():   # the typing weights, on prefixes of the CV queries (docs/prefix-search.md)
        before, after = row["whole_weights"], row["typing_weights"]
        lines.append(f"- typed prefixes, {mode} mode, {after['n']} CV cuts: whole-query weights Hit@1 "
                     f"{_f(before.get('hit@1'))} / MRR {_f(before.get('mrr'))} -> typing weights Hit@1 "
                     f"{_f(after.get('hit@1'))} / MRR {_f(after.get('mrr'))}")
    if foreign:   # the weights of a query in another language, on CV queries masked as one (search.fitting.foreign)
        before, after = foreign["own_weights"], foreign["fitted"]
        lines.append(f"- queries in another language, {after['n']} masked CV queries ({', '.join(foreign['signals'])}): "
                     f"the catalog language's weights Hit@1 {_f(before.get('hit@1'))} / MRR {_f(before.get('mrr'))} -> "
                     f"foreign weights Hit@1 {_f(after.get('hit@1'))} / MRR {_f(after.get('mrr'))}")
    ranker = data.get("ranker") or {}
    if ranker.get("weights"):
        lines += ["", f"Fitted weights: `{json.dumps(ranker['weights'])}`; shortlist K = {ranker.get('shortlist_size')}; "
                  f"prototypes: {ranker.get('prototypes')}.", ""]
    lines += ["### No confident match (fitted abstention)", ""]
    for mode, point in (fit.get("abstention") or {}).items():
        config = configs.get("prefilter" if mode == "full" else "prefilter_sparse", {})
        if not point:
            lines.append(f"- {mode}: not fitted (too few in-scope training cases to calibrate): everything is answered.")
            continue
        negatives = ", ".join(f"{n} {source}" for source, n in (point.get("n_negatives") or {}).items()) or "no"
        lines.append(f"- {mode}: {point.get('kind', '')} model, budget {_f(point.get('budget'))}; CV "
                     f"({point['n_in_scope']} in-scope; negatives: {negatives}) Hit@5 "
                     f"{_f(point.get('hit@5'))} (answer-all {_f(point.get('hit5_answer_all'))}), OOS FPR "
                     f"{_f(point.get('oos_fpr'))}; held-out: Hit@5 {_f(config.get('hit@5'))} -> "
                     f"{_f(config.get('hit@5_with_threshold'))}, OOS FPR {_f(config.get('oos_fpr_unthresholded'))} -> "
                     f"{_f(config.get('oos_fpr'))} (in-scope abstentions {_f(config.get('in_scope_abstain'))}).")
    return lines + [""]


def markdown(report: dict, command: str | None = None, extra_sections: Sequence[str] = ()) -> str:
    data, configs = report["data"], report["configs"]
    lines = ["# Taskfinder offline evaluation", ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [f"- catalog: `{data.get('catalog')}` ({data['n_tasks']} active tasks)",
              f"- cases: `{data.get('cases')}`; split: {data.get('split')}",
              f"- train {data['n_train']} cases (lexicon, pins, exemplar memory, in-context examples and the "
              f"per-catalog fit), held-out {data['n_test']} ({data['n_test_in_scope']} in scope, "
              f"{data['n_test_out_of_scope']} out of scope)",
              f"- embedding model: {data.get('embedding_model')}; LLM: {data.get('llm_model') or 'none'} "
              f"({data.get('llm_status')})",
              f"- ranker: {(data.get('ranker') or {}).get('source')}; shortlist K = "
              f"{(data.get('ranker') or {}).get('shortlist_size')}",
              f"- 95% CIs: percentile bootstrap over queries ({data['bootstrap_resamples']} resamples, seed "
              f"{data['seed']}); p-values: {data['significance']}", ""]
    lines += ["## Results (held-out, in-scope queries)", "",
              "| config | n | Hit@1 | Hit@3 | Hit@5 | MRR | nDCG@10 | P@5 | R@5 (acc.) | p (MRR vs prefilter) | OOS FPR | Hit@5 w/ threshold | p50 ms |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in configs.items():
        if c.get("skipped"):
            lines.append(f"| {name} | skipped: {c['skipped']} |" + " |" * 11)
            continue
        p = (c.get("p_value_vs_prefilter") or {}).get("mrr")
        lines.append(f"| {name} | {c['n']} | {_ci(c, 'hit@1')} | {_ci(c, 'hit@3')} | {_ci(c, 'hit@5')} | "
                     f"{_ci(c, 'mrr')} | {_ci(c, 'ndcg@10')} | {_f(c['p@5'])} | {_f(c['r@5'])} | {_f(p, 4)} | "
                     f"{_f(c.get('oos_fpr'))} | {_f(c.get('hit@5_with_threshold'))} | {_f(c.get('latency_ms_p50'), 1)} |")
    lines += ["", "Latency: per-query wall time of computing the signals and ranking with the embedding cache "
              "warm (query embeddings precomputed in batches), so it is the ranking cost, not the embedding model's.",
              "", "![ablation](ablation.png)", ""]
    notes = {n: c.get("notes") for n, c in configs.items() if c.get("notes")}
    if notes:
        lines += ["Notes: " + "; ".join(f"{n}: {json.dumps(v)}" for n, v in notes.items()), ""]
    cats = sorted({g for c in configs.values() for g in (c.get("per_category") or {})})
    if cats:
        shown = [n for n, c in configs.items() if not c.get("skipped")]
        lines += ["## Hit@5 per case category", "", "| category | n | " + " | ".join(shown) + " |",
                  "|---|---|" + "---|" * len(shown)]
        for g in cats:
            n = next((c["per_category"][g]["n"] for c in configs.values() if g in (c.get("per_category") or {})), 0)
            lines.append(f"| {g} | {n} | " + " | ".join(_f((configs[s]["per_category"].get(g) or {}).get("hit@5"))
                                                     for s in shown) + " |")
        lines.append("")
    lines += fit_section(report.get("fit") or {}, data, configs)
    for name, analysis in (report.get("error_analysis") or {}).items():
        lines += [f"## Error analysis: {name} ({analysis['n_misses']} misses, gold not in top 5)", "",
                  "Rules (first match wins; see evaluation/errors.py): ambiguous = gold in shortlist and top "
                  "within 10% of gold's score or same category; lexical_gap = no link to gold and an unknown "
                  "word; missing_rationale = no link to gold, all words known; embedding_failure = links exist "
                  "but embedding and sparse evidence both rank gold > 5; fusion = otherwise.", "",
                  "| class | count | share |", "|---|---|---|"]
        for cls, count in analysis["counts"].items():
            lines.append(f"| {cls} | {count} | {_f(analysis['shares'][cls], 2)} |")
        lines += ["", "Worst queries (gold ranked lowest first) and the test case that would fix each:", ""]
        for miss in analysis["misses"][:25]:
            lines.append(f"- `{miss['query']}` -> gold {', '.join(miss['gold'])} (rank "
                         f"{miss['gold_rank'] or '>' + str(data['depth'])}); **{miss['cls']}**: {miss['reason']}; "
                         f"top 3: {', '.join(miss['top'][:3])}")
            lines.append(f"  - add: `{json.dumps(miss['suggestion'], ensure_ascii=False)}`")
        lines.append("")
    lines += list(extra_sections)
    return "\n".join(lines) + "\n"


def write_all(out: Path, report: dict, artefacts: dict, command: str | None = None,
              extra_sections: Sequence[str] = ()) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    test = artefacts["test"]
    write_qrels(out / "qrels.txt", test)
    write_queries(out / "queries.tsv", test)
    written += [out / "qrels.txt", out / "queries.tsv"]
    for name, run in artefacts["runs"].items():
        if not run.skipped:
            path = out / f"run.{name}.txt"
            write_run(path, name, run.rows, test)
            written.append(path)
    ablation_chart(out / "ablation.png", report["configs"])
    written.append(out / "ablation.png")
    (out / "report.md").write_text(markdown(report, command, extra_sections), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    written += [out / "report.md", out / "report.json"]
    return written
