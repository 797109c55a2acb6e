"""The admin analytics page, /admin/analytics/: the measures over time as server-rendered SVG
charts, the top searches and results, the top no-result and low-CTR queries, each with a link
that turns it into a test case. It reads the daily roll-ups (analytics.rollup).

The blueprint is nested in the admin's (admin.blueprint.admin_blueprints does that, for each
app; importing this module registers nothing), so every request passes admin.blueprint.enforce_policy
(login, and CSRF plus the editor role for writes) before a view runs; its pages are read-only.
Its templates (templates/analytics/) and stylesheet (static/) sit beside this module.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from flask import Blueprint, current_app, render_template, request, url_for

from analytics.charts import line_chart, number, percent
from analytics.report import Report, load_rollup_report, new_case_url
from api.events import analytics_recorder
from catalog.models import utcnow
from catalog.validation import bounded_int

analytics_pages_bp = Blueprint("analytics", __name__, url_prefix="/analytics", template_folder="templates",
                               static_folder="static")

SPANS = (7, 30, 90)
DEFAULT_SPAN = 30


def span_days() -> int:
    raw = request.args.get("days", "")
    return days if (days := bounded_int(raw)) in SPANS else DEFAULT_SPAN


def charts(report: Report) -> list:
    """One chart per measure, over the report's days."""
    def series(get):
        return [(day, get(m)) for day, m in report.days]
    return [
        line_chart("searches", "Searches per day", series(lambda m: m.searches), number),
        line_chart("no-result", "No-result rate", series(lambda m: m.no_result_rate), percent, 1.0),
        line_chart("ctr", "Click-through rate", series(lambda m: m.click_through_rate), percent, 1.0),
        line_chart("position", "Average click position", series(lambda m: m.average_click_position), number),
        line_chart("abandonment", "Abandonment rate", series(lambda m: m.abandonment_rate), percent, 1.0),
        line_chart("reformulation", "Reformulation rate", series(lambda m: m.reformulation_rate), percent, 1.0),
    ]


def case_editor_url(query: str, gold: str | None) -> str:
    """The test-case editor (admin, /admin/cases/new) pre-filled with the query and suggested gold."""
    return new_case_url(url_for("admin.dashboard") + "cases/new", query, gold)


@dataclass(frozen=True)
class TaskLabel:
    """How the page names a task it lists: an admin reads the task's name; the id is only the
    link's target. `known` is False for an id the catalog does not hold (deleted by a
    replacing import, or a click on a task that never was): no link then (its page would be a
    404), and the id is all there is to show."""

    id: str
    name: str
    known: bool = True
    retired: bool = False


def task_labels(report: Report) -> dict[str, TaskLabel]:
    """A TaskLabel for every task id the report shows (top results, suggested gold), from one
    read of the catalog, retired tasks included (their clicks happened)."""
    wanted = {task_id for task_id, _clicks in report.top_results}
    wanted |= {r.suggested_gold for r in (*report.top_queries, *report.no_result_queries, *report.low_ctr_queries)
               if r.suggested_gold}
    if not wanted:
        return {}
    tasks = {t.id: t for t in current_app.extensions["taskfinder"].store.tasks(include_inactive=True) if t.id in wanted}

    def label(task_id: str) -> TaskLabel:
        task = tasks.get(task_id)
        if task is None:
            return TaskLabel(task_id, task_id, known=False)
        return TaskLabel(task_id, task.name, retired=not task.active)
    return {task_id: label(task_id) for task_id in wanted}


@analytics_pages_bp.get("/")
def overview():
    days = span_days()
    last = utcnow().date()
    # the daily roll-ups (analytics.rollup), never the raw log: a page view reads days, not rows
    report = load_rollup_report(analytics_recorder().store, last - timedelta(days=days - 1), last)
    return render_template("analytics/overview.html", report=report, charts=charts(report), days=days,
                           spans=SPANS, case_url=case_editor_url, percent=percent, number=number,
                           tasks=task_labels(report))
