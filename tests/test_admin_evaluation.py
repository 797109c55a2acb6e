"""The admin evaluation page: background runs of the offline evaluation, their progress seen from
any worker, one run at a time across processes, reports with a chart, failures with their error.
On SQLite and PostgreSQL, over the tiny evaluation fixtures (tests/fixtures/eval)."""
from __future__ import annotations

import html
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from catalog.formats import load_cases_file, load_tasks_file
from catalog.splits import holdout_split
from evaluation.configs import BASELINES, LADDER
from evaluation.evaluate import STAGE_SHARES
from evaluation.models import EvaluationRun
from evaluation.runs import EVALUATION_LEASE, HOLDOUT, SEED, STALL_S, EvaluationRuns, evaluate_catalog, utcnow
from admin.evaluation_views import CHART_METRICS, bar_chart
from tests.conftest import FAST_HASHER, build_app, close_app, make_settings, postgres_schema, signed_in

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
TASKS = load_tasks_file(FIXTURES / "tiny_catalog.jsonl")
CASES = load_cases_file(FIXTURES / "tiny_cases.jsonl", {t.id for t in TASKS})
ORDER = {"queued": 0, "running": 1, "done": 2, "failed": 2}


def make_eval_app(data_dir, cache_dir, cases, database_url=None, **extra_env):
    env = {"SECRET_KEY": "e" * 40, **({"DATABASE_URL": database_url} if database_url else {}), **extra_env}
    app = build_app(make_settings(data_dir, cache_dir, **env), TASKS, cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("vera", "a long enough password", "viewer", actor="cli:test")
    return app


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    """A database URL of each kind (None: the app's own SQLite file under tmp_path)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'eval.db'}"
        return
    with postgres_schema() as (_schema, url):
        yield url


@pytest.fixture
def eval_app(database, tmp_path, shared_cache_dir):
    app = make_eval_app(tmp_path / "app", shared_cache_dir, CASES, database)
    yield app
    close_app(app)


def runs_of(app) -> EvaluationRuns:
    return EvaluationRuns(app.extensions["taskfinder"].store.engine)


def start(client, csrf):
    return client.post("/admin/evaluation", data={"csrf_token": csrf})


def follow(client, run_id: int, timeout_s: float = 240.0) -> list[dict]:
    """Poll the run's JSON status (as the page's script does) until it ends; every answer seen."""
    seen, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = client.get(f"/admin/api/evaluation/runs/{run_id}").get_json()
        seen.append(body)
        if body["status"] in ("done", "failed"):
            return seen
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not end within {timeout_s} s: {seen[-1]}")


def test_a_viewer_starts_a_run_that_goes_queued_running_done(eval_app):
    client, csrf = signed_in(eval_app, "vera")
    response = start(client, csrf)
    assert response.status_code == 303
    run_id = int(response.headers["Location"].rstrip("/").rsplit("/", 1)[1])
    seen = follow(client, run_id)

    statuses = [s["status"] for s in seen]
    assert statuses[-1] == "done", seen[-1]
    assert [ORDER[s] for s in statuses] == sorted(ORDER[s] for s in statuses)   # never goes back
    assert [s["progress"] for s in seen] == sorted(s["progress"] for s in seen)
    run = runs_of(eval_app).get(run_id)
    assert run.created_at <= run.started_at <= run.finished_at       # it was queued, then running, then done
    assert run.started_by == "user:vera" and run.progress == 1.0 and run.error is None

    _train, test = holdout_split(CASES, HOLDOUT, SEED)
    assert run.report["data"]["n_test"] == len(test) and run.report["data"]["n_tasks"] == len(TASKS)
    assert set(run.report["configs"]) == set(BASELINES + LADDER)
    for name, summary in run.report["configs"].items():
        if not summary["skipped"]:
            assert 0.0 <= summary["hit@1"] <= summary["hit@5"] <= 1.0, name

    page = client.get(f"/admin/evaluation/{run_id}").get_data(as_text=True)
    assert "<svg" in page and "Held-out results" in page
    product = run.report["configs"]["prefilter"]
    first = round(product["hit@1"] * product["n"])
    assert f"For <strong>{first} of {product['n']}</strong> test queries the right task comes" in page
    assert page.index("What users get") < page.index("Queries it gets wrong") < page.index('<details class="ev-ablations">')
    assert all(f">{name}<" in page for name in run.report["configs"])
    assert 'method="post" action="/admin/evaluation"' in page          # no run in progress: can start another
    assert f'href="/admin/evaluation/{run_id}"' in client.get("/admin/evaluation").get_data(as_text=True)


def test_a_run_in_progress_shows_on_every_worker(eval_app):
    """A run executed by one process (its rows written here as that process writes them) is
    followed from another app instance (another worker) on the same database."""
    from app import create_app

    runs = runs_of(eval_app)
    run = runs.create("user:eddie")
    runs.mark_running(run.id)
    runs.report_progress(run.id, "fitting the ranker", 0.6)
    other = create_app(eval_app.extensions["taskfinder"].settings)
    try:
        client, _ = signed_in(other, "vera")
        page = client.get("/admin/evaluation").get_data(as_text=True)
        assert "fitting the ranker" in page and 'value="0.6"' in page and "60%" in page
        assert f'data-evaluation-status="/admin/api/evaluation/runs/{run.id}"' in page
        assert "evaluation.js" in page and "<script>" not in page
        assert 'action="/admin/evaluation"' not in page                      # no second run offered
        status = client.get(f"/admin/api/evaluation/runs/{run.id}").get_json()
        assert (status["status"], status["stage"], status["progress"]) == ("running", "fitting the ranker", 0.6)
    finally:
        runs.fail(run.id, "test over")
        other.extensions["taskfinder"].store.engine.dispose()


def test_one_run_at_a_time_across_processes(eval_app):
    store = eval_app.extensions["taskfinder"].store
    assert store.acquire_lease(EVALUATION_LEASE, 60)       # another process is running one
    try:
        client, csrf = signed_in(eval_app, "vera")
        response = start(client, csrf)
        assert response.status_code == 409
        assert "already running" in response.get_data(as_text=True)
        assert runs_of(eval_app).recent() == []
    finally:
        store.release_lease(EVALUATION_LEASE)


def test_a_run_whose_process_died_is_failed_and_replaced(eval_app):
    store, runs = eval_app.extensions["taskfinder"].store, runs_of(eval_app)
    assert store.acquire_lease(EVALUATION_LEASE, 3600)     # the dead process's lease
    dead = runs.create("user:eddie")
    runs.mark_running(dead.id)
    with store.engine.begin() as conn:
        conn.execute(update(EvaluationRun).where(EvaluationRun.id == dead.id)
                     .values(heartbeat_at=utcnow() - timedelta(seconds=STALL_S + 5)))
    assert runs.get(dead.id).stalled()

    client, csrf = signed_in(eval_app, "vera")
    response = start(client, csrf)
    assert response.status_code == 303
    assert runs.get(dead.id).status == "failed" and "stopped" in runs.get(dead.id).error
    new_id = int(response.headers["Location"].rsplit("/", 1)[1])
    assert new_id != dead.id and follow(client, new_id)[-1]["status"] == "done"


def test_a_failed_run_shows_its_error(database, tmp_path, shared_cache_dir):
    app = make_eval_app(tmp_path / "empty", shared_cache_dir, [], database)   # no test case to hold out
    try:
        client, csrf = signed_in(app, "vera")
        run_id = int(start(client, csrf).headers["Location"].rsplit("/", 1)[1])
        final = follow(client, run_id)[-1]
        assert final["status"] == "failed" and "no held-out test case" in final["error"]
        page = client.get(f"/admin/evaluation/{run_id}").get_data(as_text=True)
        assert "The evaluation failed: ValueError: no held-out test case" in page
        # the lease was released: the next run may start (and fails the same way)
        assert start(client, csrf).status_code == 303
        follow(client, run_id + 1)
    finally:
        app.extensions["taskfinder"].store.engine.dispose()


def test_anonymous_callers_and_forged_posts_are_refused(eval_app):
    anonymous = eval_app.test_client()
    response = anonymous.post("/admin/evaluation")
    assert response.status_code == 302 and response.headers["Location"].startswith("/admin/login")
    assert anonymous.get("/admin/evaluation").status_code == 302
    assert anonymous.get("/admin/api/evaluation/runs/1").status_code == 401
    client, _csrf = signed_in(eval_app, "vera")
    assert client.post("/admin/evaluation", data={"csrf_token": "forged"}).status_code == 400
    assert runs_of(eval_app).recent() == []


def test_the_evaluation_reports_its_stages_in_order(settings):
    heard = []
    report = evaluate_catalog(settings, TASKS, CASES, None, None, lambda stage, fraction: heard.append((stage, fraction)))
    stages = list(dict.fromkeys(stage for stage, _ in heard))
    assert stages == list(STAGE_SHARES)
    fractions = [fraction for _, fraction in heard]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] < 1.0
    assert report["configs"]["embedding"]["skipped"]             # no embedder: the dense baselines skip


def test_the_chart_draws_each_metric_to_scale():
    configs = {"a": {"hit@1": 0.5, "hit@5": 1.0, "mrr": 0.75, "skipped": None},
               "b": {"skipped": "no LLM"},
               "c": {"hit@1": 0.0, "hit@5": 0.25, "mrr": 0.1, "skipped": None}}
    chart = bar_chart(configs)
    assert [g.label for g in chart["groups"]] == ["a", "c"]
    a, c = chart["groups"]
    full = a.bars[1].width                                         # hit@5 = 1.0 spans the axis
    assert full == chart["ticks"][-1]["x"] - chart["ticks"][0]["x"]
    assert [b.width for b in a.bars] == [full * 0.5, full, full * 0.75]
    assert [b.metric for b in c.bars] == list(range(len(CHART_METRICS)))
    assert all(b.y >= a.bars[-1].y + a.bars[-1].height for b in c.bars)   # groups do not overlap


# -- the page as the catalog's admin reads it (issue 19 item 9) ------------------------------------------
def summary(hit1: float, hit5: float, n: int = 10, n_oos: int = 2, oos: float | None = 0.5) -> dict:
    return {"n": n, "n_oos": n_oos, "hit@1": hit1, "hit@3": hit5, "hit@5": hit5, "mrr": hit1, "ndcg@10": hit1,
            "oos_fpr": oos, "skipped": None}


STORED_REPORT = {
    "configs": {"bm25": summary(0.4, 0.7), "centroid": summary(0.3, 0.6), "prefilter": summary(0.6, 0.9),
                "prefilter_sparse": summary(0.5, 0.8)},
    "data": {"n_tasks": 5, "n_train": 12, "n_test": 12, "n_test_in_scope": 10, "n_test_out_of_scope": 2,
             "split": "hash holdout", "embedding_model": "e5", "depth": 20},
    "fit": {"status": "fitted"},
    "error_analysis": {"prefilter": {"n_misses": 2, "misses": [
        {"query": "who was absent today", "gold": ["t.attend"], "cls": "missing_rationale", "reason": "x",
         "top": ["t.bus", "t.meal"], "gold_rank": 7, "unknown_words": [],
         "suggestion": {"query": "who was absent today", "gold": ["t.attend"],
                        "rationale": "Daily Attendance: Mark children present or absent by classroom."}},
        {"query": "lunch zzyzx", "gold": ["t.meal"], "cls": "lexical_gap", "reason": "y", "top": [],
         "gold_rank": None, "unknown_words": ["zzyzx"], "suggestion": {"rationale": "Meal Counts."}}]}},
}


def test_the_page_leads_with_what_users_get_then_the_failing_queries_with_a_fix(eval_app):
    runs = runs_of(eval_app)
    run = runs.create("user:vera")
    runs.finish(run.id, STORED_REPORT)
    client, _csrf = signed_in(eval_app, "vera")
    page = client.get(f"/admin/evaluation/{run.id}").get_data(as_text=True)

    lead = page.index("What users get")
    assert "For <strong>6 of 10</strong> test queries the right task comes <strong>first</strong>" in page
    assert "for <strong>9 of 10</strong> it is in the\n      <strong>top five</strong> (90%)" in page
    assert "Of the 2 off-topic test queries (no right task), 1 was answered with a task instead of " \
           "“no confident match”; the other 1 was refused." in page
    failing = page.index("Queries it gets wrong (2)")
    ablations = page.index('<details class="ev-ablations">')
    assert lead < failing < ablations < page.index(">bm25<") and page.index(">centroid<") > ablations
    assert "a similar task" not in page and "no word of it points at the right task yet" in page
    assert "it uses words the catalog does not know<br><small class=\"ev-unseen\">A word this run never saw:\n" \
           "            <q>zzyzx</q>.</small>" in page and "Bus Route Planner" in page
    assert "<small>rank 7</small>" in page and "<small>not in the top 20</small>" in page

    # a held-out query's own case is never learned from: its words are taught through a case of the
    # same task that the run learns from (issue 32 item 9; tests/test_evaluation_fix_truth.py)
    cases = {c.query: c for c in eval_app.extensions["taskfinder"].store.cases()}
    absent, kids, lunch = cases["who was absent today"], cases["absent kids"], cases["lunch numbers"]
    assert f"/admin/cases/{absent.id}/edit" not in page
    fix = re.search(r'href="(/admin/cases/%d/edit\?[^"]+)">Teach its words through &ldquo;absent kids' % kids.id,
                    page).group(1)
    # "zzyzx" is in no task and no training case: teaching it would copy the test into the catalog (issue 44 item 6)
    assert f"/admin/cases/{lunch.id}/edit" not in page and "No fix offered: <q>zzyzx</q>" in page
    form = client.get(html.unescape(fix)).get_data(as_text=True)
    assert "“absent”, “today” should find Daily Attendance: Mark children present or absent" in form
    assert f'name="message" value="from evaluation run {run.id}: teach the words of “who was absent today”"' in form
    assert kids.rationale == "" and absent.rationale == "Absences are marked in daily attendance.", "a link saves nothing"
