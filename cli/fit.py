"""`python app.py fit`: the per-catalog ranker fit (search.fitting, run by the search service).

    python app.py fit             # fit on the database's current cases now, store it, print the CV figures
    python app.py fit --history   # the stored fits, newest first

The JSON report's `learning` says what learning from use did first: the clicks folded in, how
many pairs count, and the clicks still waiting (received in the last LEARNING_SETTLE_S) with
when they will count (analytics.learning.fit_learning_summary).

Serving processes also refit by themselves, in the background, whenever the cases change
(AUTO_FIT=1); this command is for doing it now, from a deploy script or after a bulk import.
"""
from __future__ import annotations

import json

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("fit")
@click.option("--history", is_flag=True, help="List the stored fits instead of fitting.")
@with_appcontext
def fit_command(history: bool):
    """Fit fusion weights, shortlist depth and abstention on this catalog's test cases (CV)."""
    services = current_app.extensions["taskfinder"]
    if history:
        for fit in services.store.fits():
            report = fit.report or {}
            full = (report.get("cv") or {}).get("full", {}).get("fitted", {})
            click.echo(f"fit {fit.id}  {fit.created_at:%Y-%m-%d %H:%M}  revision {fit.store_revision}  "
                       f"{report.get('n_cases', '?')} cases  CV Hit@1 {full.get('hit@1', '-')}  MRR {full.get('mrr', '-')}")
        return
    settings = services.settings
    # fold the clicks in here (the fit's own aggregation then finds nothing new) to say what it did
    from analytics.learning import aggregate, fit_learning_summary  # at run time: ~0.1 s app.py search never needs
    folded = aggregate(services.store.engine, settings) if settings.learning_enabled else None
    report = services.search.refit_now()
    if folded is not None:
        report["learning"] = fit_learning_summary(folded, services.store.engine, settings)
        if report.get("status") == "up to date":
            report["message"] = ("The stored fit already uses these cases and the learned pairs that count: "
                                 "nothing to refit. " + report["learning"]["message"])
    click.echo(json.dumps(report, indent=2, ensure_ascii=False, default=str))
