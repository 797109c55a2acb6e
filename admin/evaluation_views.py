"""The admin evaluation page: start an offline evaluation of the current catalog in the
background, follow its progress from any worker, read its report and chart, see past runs.

    GET  /admin/evaluation                      the newest run (its progress, or its report) and past runs
    GET  /admin/evaluation/<id>                 one run
    POST /admin/evaluation                      start a run (viewers may: see blueprint.VIEWER_WRITES)
    GET  /admin/api/evaluation/runs/<id>        a run's status as JSON (the page's poller; automation)

The run itself is evaluation.runs (one at a time across processes, a thread of this process).
The chart is an SVG drawn by the template from `bar_chart`'s geometry: no script, no image file.

The page speaks to the catalog's admin first: what users get (the product's own held-out Hit@1
and Hit@5, and how many off-topic queries it answered, in plain words: `headline`), then the
queries it gets wrong, each with the fix that can work (`failing_queries`). A failing query is
held out: its own test case is never learned from in a run (catalog.splits: a hash of the wording
puts it on the held-out side), so editing that case cannot change its result. What can is
teaching its words through a case the run learns from: the edit form of a training-side case of
the same task, pre-filled with a rationale sentence linking the query's words to the task
(evaluation.errors.rationale_sentence), previewed before anything is published; or, when every
case of that task is held out, a new case in other words, pre-filled with the same sentence. A
miss with words that no task text and no training case has is offered no fix: teaching them would
copy the held-out test into the catalog (evaluation.runs.offered_fix). A training-side fix shows
what the run measured it to do (evaluation.runs.measure_fixes: Hit@5 before and after, the queries
that newly pass or fail), which is what the next run measures once exactly that is published;
the figure is shown only while that case is as the run saw it. The comparison with simpler methods
and the ablations (bm25, centroid, hybrid_rationale, ...) follow, collapsed, each configuration's
Hit@5 set against the product's with the report's paired significance test (`versus_product`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, url_for

from admin.audit import user_actor
from admin.blueprint import refuse
from catalog.records import CaseRecord, TaskRecord
from evaluation.configs import config_specs
from evaluation.runs import (MAX_MEASURED_FIXES, EvaluationBusy, EvaluationJob, EvaluationRuns,  # noqa: F401
                             RunRecord, learned_from, offered_fix, teaching_case)
from search.fitting import usable_learned

def register(pages: Blueprint, api: Blueprint) -> None:
    """Attach this module's routes to the admin's blueprints (admin.routes.install_admin):
    /admin pages on `pages` (endpoints admin.NAME), JSON on `api` (admin.api.NAME)."""
    pages.add_url_rule("/evaluation", "evaluation_page", evaluation_page, methods=["GET"])
    pages.add_url_rule("/evaluation/<int:run_id>", "evaluation_run_page", evaluation_run_page, methods=["GET"])
    pages.add_url_rule("/evaluation", "start_evaluation", start_evaluation, methods=["POST"])
    api.add_url_rule("/evaluation/runs/<int:run_id>", "evaluation_run", api_evaluation_run, methods=["GET"])


CHART_METRICS = (("hit@1", "Hit@1"), ("hit@5", "Hit@5"), ("mrr", "MRR"))
TABLE_METRICS = (("hit@1", "Hit@1"), ("hit@3", "Hit@3"), ("hit@5", "Hit@5"), ("mrr", "MRR"),
                 ("ndcg@10", "nDCG@10"), ("oos_fpr", "OOS answered"))


def evaluation_runs() -> EvaluationRuns:
    return EvaluationRuns(current_app.extensions["taskfinder"].store.engine)


def evaluation_job() -> EvaluationJob:
    services = current_app.extensions["taskfinder"]
    return EvaluationJob(evaluation_runs(), services.store, services.settings, services.search.embedder,
                         services.cache, learned=lambda: usable_learned_evidence(services))


def usable_learned_evidence(services) -> tuple:
    """The exemplars learned from use that a fit of the catalog would weigh now (blocked pairs
    dropped), so that the evaluation's figures include learned evidence as the live ranking does."""
    if services.search.learned_evidence is None or not services.settings.learning_enabled:
        return ()
    learned, blocked = services.search.learned_evidence()[:2]
    return usable_learned(learned, blocked, services.store.tasks())


# -- the chart (pure) -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    metric: int          # 0..2: which of CHART_METRICS (the CSS class colours it)
    value: float


@dataclass(frozen=True)
class BarGroup:
    label: str
    y: float             # baseline of the label
    bars: tuple[Bar, ...]


def bar_chart(configs: dict, width: int = 680, label_width: int = 170, bar_height: int = 11,
              group_gap: int = 12) -> dict:
    """Geometry of a horizontal grouped bar chart: per configuration that ran, one bar per metric
    of CHART_METRICS (values 0..1 on a shared axis). Returned as plain numbers for the template."""
    plot = width - label_width - 50
    top = 34
    groups = []
    y = top
    for name, summary in configs.items():
        if summary.get("skipped"):
            continue
        bars = tuple(Bar(label_width, y + i * bar_height, round(plot * (summary.get(key) or 0.0), 1), bar_height - 2,
                         i, summary.get(key) or 0.0) for i, (key, _label) in enumerate(CHART_METRICS))
        groups.append(BarGroup(name, y + bar_height * len(CHART_METRICS) / 2 + 4, bars))
        y += bar_height * len(CHART_METRICS) + group_gap
    ticks = [{"x": label_width + plot * t, "label": f"{t:.2f}".rstrip("0").rstrip(".")} for t in (0, .25, .5, .75, 1)]
    return {"width": width, "height": y + 20, "top": top, "bottom": y, "groups": groups, "ticks": ticks,
            "legend": [{"x": label_width + i * 90, "label": label, "metric": i}
                       for i, (_key, label) in enumerate(CHART_METRICS)]}


# -- what users get, and what to fix (pure) -----------------------------------------------------------
PRODUCT_CONFIGS = ("prefilter", "prefilter_sparse")   # the product, then its degraded mode
MAX_FAILING = 25
# evaluation.errors' classes, for people
PLAIN_REASONS = {
    "ambiguous": "a similar task ranks above the right one (the two are easy to confuse)",
    "lexical_gap": "it uses words the catalog does not know",
    "missing_rationale": "no word of it points at the right task yet",
    "embedding_failure": "neither its words nor its meaning lead to the right task",
    "fusion": "the right task has some evidence but ranks below the top five",
}


@dataclass(frozen=True)
class Headline:
    config: str              # the configuration that is the product (PRODUCT_CONFIGS)
    degraded: bool           # embeddings were off: the degraded mode is what users get
    n: int                   # held-out in-scope queries
    hit_at_1: float
    hit_at_5: float
    first: int               # queries whose right task came first / in the top five
    top5: int
    n_oos: int               # held-out out-of-scope queries
    oos_answered: float | None   # share of them answered anyway (the product's operating point)

    @property
    def off_topic(self) -> str:
        """What the search did with the held-out off-topic queries, in a sentence that reads
        for one of them as for several (counts, never a percentage of one query)."""
        n = self.n_oos
        if not n:
            return "No off-topic test query was held out, so “no confident match” is not measured here."
        if self.oos_answered is None:
            return (f"{'The one off-topic test query' if n == 1 else f'The {n} off-topic test queries'} "
                    "(no right task) could not be measured.")
        answered = round(self.oos_answered * n)
        refused = "refused (“no confident match”, no task shown)"
        with_task = "answered with a task instead of “no confident match”"
        if n == 1:
            return f"The one off-topic test query (no right task) was {with_task if answered else refused}."
        if answered == 0:
            return f"All {n} off-topic test queries (no right task) were {refused}."
        if answered == n:
            return f"All {n} off-topic test queries (no right task) were {with_task}."
        return (f"Of the {n} off-topic test queries (no right task), {answered} "
                f"{'was' if answered == 1 else 'were'} {with_task}; the other {n - answered} "
                f"{'was' if n - answered == 1 else 'were'} refused.")


def headline(configs: Mapping[str, dict]) -> Headline | None:
    """The product's own held-out figures: the first of PRODUCT_CONFIGS that ran."""
    for name in PRODUCT_CONFIGS:
        c = configs.get(name)
        if c and not c.get("skipped") and c.get("n"):
            n = int(c["n"])
            return Headline(name, name != PRODUCT_CONFIGS[0], n, c["hit@1"], c["hit@5"], round(c["hit@1"] * n),
                            round(c["hit@5"] * n), int(c.get("n_oos") or 0), c.get("oos_fpr"))
    return None


@dataclass(frozen=True)
class FixEffect:
    """What the run measured a training-side fix to do (evaluation.runs.measure_fixes): the
    product's held-out Hit@5 before and after, over `n` queries, and the queries whose right
    task newly enters (or leaves) the top five."""
    before: float
    after: float
    n: int
    newly_passing: tuple[str, ...]
    newly_failing: tuple[str, ...]

    @property
    def change(self) -> str:
        return f"{self.after - self.before:+.3f}"


@dataclass(frozen=True)
class FailingQuery:
    query: str
    gold: tuple[tuple[str, str], ...]    # (id, name) of the right tasks
    shown: tuple[str, str] | None        # (id, name) of what users got first instead
    gold_rank: int | None
    reason: str                          # in plain words (PLAIN_REASONS)
    unknown_words: tuple[str, ...]
    case_id: int | None                  # its own test case now (None: deleted since the run); held out
    rationale: str                       # the suggested rationale sentence (evaluation.errors.rationale_sentence)
    teach: tuple[int, str] | None        # (id, query) of the case to add it to: one the run learns from
    fix: str = "teach"                   # evaluation.runs.Fix.kind: teach, new_case or none
    held_out_words: tuple[str, ...] = ()   # words only the held-out test has (fix "none")
    effect: FixEffect | None = None      # what the run measured the `teach` fix to do (None: not measured)
    stale: bool = False                  # the run measured a fix for it, but that case has changed since


def measured_effect(report: Mapping, query: str, teacher: CaseRecord | None, sentence: str) -> FixEffect | None:
    """The run's measurement of this fix, while it still is the fix the page offers: the same
    case, as the run saw it, and the same sentence (else the catalog changed since the run)."""
    if teacher is None:
        return None
    for row in report.get("fixes") or ():
        if (row.get("query"), row.get("case_id"), row.get("case_rationale"), row.get("rationale")) == \
                (query, teacher.id, teacher.rationale, sentence):
            before, after = row["hit@5"]
            return FixEffect(before, after, int(row["n"]), tuple(row.get("newly_passing") or ()),
                             tuple(row.get("newly_failing") or ()))
    return None


def failing_queries(report: Mapping, tasks: Mapping[str, TaskRecord], cases: Sequence[CaseRecord],
                    limit: int = MAX_FAILING) -> list[FailingQuery]:
    """The product's held-out misses (gold not in the top five), worst first, each with the fix
    the run offers it (evaluation.runs.offered_fix: the rationale sentence, from the tasks as they
    are now, and the case that can carry it; or none) and what the run measured that fix to do."""
    analysis = (report.get("error_analysis") or {}).get(PRODUCT_CONFIGS[0]) or {}
    case_ids = {c.query: c.id for c in cases}
    out = []
    for miss in analysis.get("misses", [])[:limit]:
        top = miss.get("top") or []
        gold = tuple(miss.get("gold", ()))
        fix = offered_fix(miss, tasks, cases)
        teacher = fix.case
        out.append(FailingQuery(
            miss["query"], tuple((g, tasks[g].name if g in tasks else g) for g in gold),
            (top[0], tasks[top[0]].name if top[0] in tasks else top[0]) if top else None, miss.get("gold_rank"),
            PLAIN_REASONS.get(miss.get("cls"), miss.get("reason", "")), tuple(miss.get("unknown_words") or ()),
            case_ids.get(miss["query"]), fix.sentence,
            (teacher.id, teacher.query) if teacher is not None else None, fix.kind, fix.held_out_words,
            measured_effect(report, miss["query"], teacher, fix.sentence),
            any(row.get("query") == miss["query"] for row in report.get("fixes") or ())))
    return out


@dataclass(frozen=True)
class Versus:
    """A configuration's held-out Hit@5 against the product's, in queries, and whether the
    difference is more than chance (the report's paired randomisation test, p < SIGNIFICANCE)."""
    difference: int          # queries found in the top five, minus the product's (same n)
    n: int
    p: float | None          # None: no test (the product itself, or a run without it)

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < SIGNIFICANCE

    @property
    def p_text(self) -> str:
        return "p < 0.001" if self.p is not None and self.p < 0.001 else (
            f"p = {self.p:.3f}" if self.p is not None and self.p < 0.01 else f"p = {self.p:.2f}")


SIGNIFICANCE = 0.05


def versus_product(configs: Mapping[str, dict]) -> dict[str, Versus]:
    """Per configuration that ran on the product's queries: its Hit@5 difference from the
    product (PRODUCT_CONFIGS[0]) in queries, with the p-value the report computed for it
    (evaluation.evaluate.summarise: `p_value_vs_prefilter`)."""
    product = configs.get(PRODUCT_CONFIGS[0]) or {}
    if product.get("skipped") or not product.get("n"):
        return {}
    n = int(product["n"])
    out = {}
    for name, c in configs.items():
        if c.get("skipped") or name == PRODUCT_CONFIGS[0] or int(c.get("n") or 0) != n or c.get("hit@5") is None:
            continue
        p = (c.get("p_value_vs_prefilter") or {}).get("hit@5")
        out[name] = Versus(round(c["hit@5"] * n) - round(product["hit@5"] * n), n, p)
    return out


# -- pages ------------------------------------------------------------------------------------------
def render_page(run: RunRecord | None, status: int = 200, error: str | None = None):
    runs = evaluation_runs().recent()
    services = current_app.extensions["taskfinder"]
    specs = config_specs(services.settings.weights)
    report = run.report if run is not None and run.status == "done" else None
    failing, lead, versus = [], None, {}
    if report:
        lead = headline(report["configs"])
        tasks = {t.id: t for t in services.store.tasks(include_inactive=True)}
        failing = failing_queries(report, tasks, services.store.cases())
        versus = versus_product(report["configs"])
    return render_template(
        "admin/evaluation.html", run=run, runs=runs, report=report, error=error, lead=lead, failing=failing,
        versus=versus, product=PRODUCT_CONFIGS[0], significance=SIGNIFICANCE,
        n_failing=len(((report or {}).get("error_analysis") or {}).get(PRODUCT_CONFIGS[0], {}).get("misses", [])),
        chart=bar_chart(report["configs"]) if report else None,
        descriptions={name: spec.description for name, spec in specs.items()},
        metrics=TABLE_METRICS, max_measured=MAX_MEASURED_FIXES, running=any(r.active and not r.stalled() for r in runs)), status


def evaluation_page():
    """The run in progress if there is one, else the newest finished one."""
    runs = evaluation_runs()
    newest = next(iter(runs.recent(limit=1)), None)
    return render_page(runs.get(newest.id) if newest is not None else None)


def evaluation_run_page(run_id: int):
    run = evaluation_runs().get(run_id)
    if run is None:
        return refuse(404, "no such evaluation run")
    return render_page(run)


def start_evaluation():
    try:
        run = evaluation_job().start(user_actor(g.admin_user.name))
    except EvaluationBusy as exc:
        newest = next(iter(evaluation_runs().recent(limit=1)), None)
        return render_page(evaluation_runs().get(newest.id) if newest else None, 409, str(exc))
    return redirect(url_for("admin.evaluation_run_page", run_id=run.id), 303)


def api_evaluation_run(run_id: int):
    run = evaluation_runs().get(run_id)
    if run is None:
        return jsonify({"error": "no such evaluation run"}), 404
    return jsonify({**run.status_json(), "report": run.report})
