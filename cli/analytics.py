"""`python app.py analytics purge`, `analytics rollup` and `analytics report`."""
from __future__ import annotations

import json
from datetime import timedelta

import click
from flask import current_app
from flask.cli import AppGroup

from catalog.models import utcnow
from infra.words import counted

# What the commands read (the recorder, the report) is imported when one runs: app.py imports
# this module for every command, and `app.py search` should not pay ~0.1 s for it (issue 44 item 9).

analytics_group = AppGroup("analytics", help="Search analytics: the search log and the widget's events.")


def _recorder():
    """The app's analytics.recorder.AnalyticsRecorder."""
    from api.events import EXTENSION
    return current_app.extensions[EXTENSION]


@analytics_group.command("purge")
@click.option("--days", type=click.IntRange(min=1), default=None,
              help="Keep this many days (default: ANALYTICS_RETENTION_DAYS).")
def purge_command(days: int | None):
    """Delete searches and events older than the retention (the writer thread also does this hourly)."""
    recorder = _recorder()
    keep = timedelta(days=days) if days is not None else recorder.retention
    searches, events = recorder.store.purge(utcnow() - keep)
    click.echo(f"purged {searches} searches and {events} events older than {keep.days} days")


@analytics_group.command("rollup")
def rollup_command():
    """Roll up every day not final yet (the writer threads do this one day at a time)."""
    done = _recorder().rollup(force=True)
    click.echo(f"rolled up {counted(done, 'day')}")


@analytics_group.command("report")
@click.option("--days", type=click.IntRange(min=1, max=3660), default=7, show_default=True,
              help="How many days, ending today (UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--exact", is_flag=True,
              help="Compute from the raw log (every row) instead of rolling up the due days and reading the roll-ups.")
def report_command(days: int, as_json: bool, exact: bool):
    """Searches, no-result rate, CTR, average click position, abandonment and reformulation, per day."""
    from analytics.report import load_report, load_rollup_report
    last = utcnow().date()
    first = last - timedelta(days=days - 1)
    if exact:
        report = load_report(_recorder().store, first, last)
    else:
        _recorder().rollup(force=True)
        report = load_rollup_report(_recorder().store, first, last)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        return
    click.echo(f"{'day':<10}  {'searches':>8}  {'no-result':>9}  {'CTR':>5}  {'pos':>4}  {'abandon':>7}  {'reform':>6}")
    for day, m in [*report.days, ("total", report.total)]:
        click.echo(f"{str(day):<10}  {m.searches:>8}  {_pct(m.no_result_rate):>9}  {_pct(m.click_through_rate):>5}  "
                   f"{_num(m.average_click_position):>4}  {_pct(m.abandonment_rate):>7}  {_pct(m.reformulation_rate):>6}")
    for title, items in (("top no-result queries", report.no_result_queries),
                         ("low click-through queries", report.low_ctr_queries)):
        click.echo(f"\n{title}:")
        for item in items:
            click.echo(f"  {item.query!r}: {item.measures.searches} searches, no result {_pct(item.measures.no_result_rate)}, "
                       f"CTR {_pct(item.measures.click_through_rate)}, suggested gold {item.suggested_gold or '-'}")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
