"""The admin evaluation page: start an offline evaluation of the current catalog in the
background, follow its progress from any worker, read its report and chart, see past runs.

    GET  /admin/evaluation                      the newest run (its progress, or its report) and past runs
    GET  /admin/evaluation/<id>                 one run
    POST /admin/evaluation                      start a run (viewers may: see blueprint.VIEWER_WRITES)
    GET  /admin/api/evaluation/runs/<id>        a run's status as JSON (the page's poller; automation)

The run itself is evaluation.runs (one at a time across processes, a thread of this process).
The chart is an SVG drawn by the template from `bar_chart`'s geometry: no script, no image file.
"""
from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, g, jsonify, redirect, render_template, url_for

from admin.audit import user_actor
from admin.blueprint import admin_bp, api_bp, refuse
from evaluation.configs import config_specs
from evaluation.runs import EvaluationBusy, EvaluationJob, EvaluationRuns, RunRecord
from search.fitting import usable_learned

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
    learned, blocked = services.search.learned_evidence()
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


# -- pages ------------------------------------------------------------------------------------------
def render_page(run: RunRecord | None, status: int = 200, error: str | None = None):
    runs = evaluation_runs().recent()
    specs = config_specs(current_app.extensions["taskfinder"].settings.weights)
    report = run.report if run is not None and run.status == "done" else None
    return render_template(
        "admin/evaluation.html", run=run, runs=runs, report=report, error=error,
        chart=bar_chart(report["configs"]) if report else None,
        descriptions={name: spec.description for name, spec in specs.items()},
        metrics=TABLE_METRICS, running=any(r.active and not r.stalled() for r in runs)), status


@admin_bp.get("/evaluation")
def evaluation_page():
    """The run in progress if there is one, else the newest finished one."""
    runs = evaluation_runs()
    newest = next(iter(runs.recent(limit=1)), None)
    return render_page(runs.get(newest.id) if newest is not None else None)


@admin_bp.get("/evaluation/<int:run_id>")
def evaluation_run_page(run_id: int):
    run = evaluation_runs().get(run_id)
    if run is None:
        return refuse(404, "no such evaluation run")
    return render_page(run)


@admin_bp.post("/evaluation")
def start_evaluation():
    try:
        run = evaluation_job().start(user_actor(g.admin_user.name))
    except EvaluationBusy as exc:
        newest = next(iter(evaluation_runs().recent(limit=1)), None)
        return render_page(evaluation_runs().get(newest.id) if newest else None, 409, str(exc))
    return redirect(url_for("admin.evaluation_run_page", run_id=run.id), 303)


@api_bp.get("/evaluation/runs/<int:run_id>", endpoint="evaluation_run")
def api_evaluation_run(run_id: int):
    run = evaluation_runs().get(run_id)
    if run is None:
        return jsonify({"error": "no such evaluation run"}), 404
    return jsonify({**run.status_json(), "report": run.report})
