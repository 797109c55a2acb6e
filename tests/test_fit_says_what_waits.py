"""Issue 32 item 4: clicks wait LEARNING_SETTLE_S (600 s) before a fit folds them in, and
`python app.py fit` and the task page said nothing of it ("up to date", "no search has ended on
this task often enough"). Now the fit's JSON report says what learning did (clicks folded in,
pairs that count) and how many clicks wait and from when they count; the task page says how
many of its clicks wait. Each figure is checked against the log and the learned table."""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from analytics.learning import load_learned
from analytics.records import EventRecord, SearchRecord
from catalog.models import utcnow
from tests.conftest import build_app, close_app, install_demo_fit, make_settings, signed_in

OLD_TASK = "health.immunizations"      # clicked 11 minutes ago: past the settle time, folded in by the fit
NEW_TASK = "admin.child-profile"       # clicked just now: waits 10 minutes


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fitted_app(request, tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """The demo with its shipped fit, on each database, under the default LEARNING_SETTLE_S (600 s); a
    pair needs 3 clicking sessions (the majority rule off), so the clicks below fold in without
    making a pair count: the fit stays "up to date" (no minutes-long refit)."""
    from tests.conftest import FAST_HASHER, postgres_schema

    def make(**env):
        app = build_app(make_settings(tmp_path_factory.mktemp("waits"), shared_cache_dir, SECRET_KEY="k" * 40,
                                      LEARNING_MAJORITY_SESSIONS="0", **env), demo_tasks, demo_cases)
        install_demo_fit(app)
        accounts = app.extensions["taskfinder"].accounts
        accounts.hasher = FAST_HASHER
        accounts.create_user("vera", "a long enough password", "viewer", actor="cli:test")
        return app

    if request.param == "sqlite":
        app = make()
        yield app
        close_app(app)
        return
    with postgres_schema() as (_schema, url):
        app = make(DATABASE_URL=url)
        yield app
        close_app(app)


def clicks(prefix: str, query: str, task: str, at, sessions: int) -> tuple[list, list]:
    """`sessions` sessions, each searching `query` at `at`, shown `task` first, clicking it."""
    searches, events = [], []
    for n in range(sessions):
        session = f"{prefix}-session-{n:04d}"
        search = SearchRecord(f"{prefix}-{n:04d}-000000000", at, session, query, True, (task, "admin.staff-child-ratios"))
        searches.append(search)
        events.append(EventRecord(at + timedelta(seconds=2), search.id, "click", session_id=session, task_id=task,
                                  position=1))
    return searches, events


def test_the_fit_and_the_task_page_say_how_many_clicks_wait_and_when_they_count(fitted_app):
    services = fitted_app.extensions["taskfinder"]
    now = utcnow()
    old = clicks("old", "kids shots", OLD_TASK, now - timedelta(minutes=11), sessions=2)
    new = clicks("new", "child record", NEW_TASK, now - timedelta(seconds=5), sessions=3)
    fitted_app.extensions["taskfinder_analytics"].store.write(old[0] + new[0], old[1] + new[1])

    result = fitted_app.test_cli_runner().invoke(args=["fit"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["status"] == "up to date"
    learning = report["learning"]
    # what the fit did: it folded in the 2 old clicks (one pair), and no pair counts yet
    assert (learning["aggregation"], learning["clicks_folded"], learning["pairs_that_count"]) == ("aggregated", 2, 0)
    pairs = {(p.query, p.task_id): p for p in load_learned(services.store.engine)}
    assert pairs[("kids shots", OLD_TASK)].clicks == 2 and ("child record", NEW_TASK) not in pairs
    # what waits: the 3 new clicks, until 600 s after the last was received
    assert learning["clicks_waiting"] == 3
    counts_from = max(e.at for e in new[1]) + timedelta(seconds=600)
    assert learning["waiting_count_from"][:19] == counts_from.isoformat()[:19]
    assert "folded 2 clicks" in learning["message"] and "3 clicks wait" in learning["message"]
    assert f"{counts_from:%H:%M} UTC" in learning["message"] and "LEARNING_SETTLE_S=600" in learning["message"]
    assert "nothing to refit" in report["message"]

    viewer, _csrf = signed_in(fitted_app, "vera")
    waiting = viewer.get(f"/admin/tasks/{NEW_TASK}").get_data(as_text=True)
    line = re.search(r'<p class="note" id="learned-waiting">([^<]*)</p>', waiting)
    assert line, "the task page says its clicks wait"
    assert "3 clicks on this task wait" in line.group(1) and f"{counts_from:%H:%M} UTC" in line.group(1)
    assert "often enough" not in waiting
    folded = viewer.get(f"/admin/tasks/{OLD_TASK}").get_data(as_text=True)
    assert 'id="learned-waiting"' not in folded            # its clicks were folded in: nothing waits
    assert "<q>kids shots</q>" in folded                    # ... and they are listed, not counting yet

    again = json.loads(fitted_app.test_cli_runner().invoke(args=["fit"]).output)["learning"]
    assert (again["clicks_folded"], again["clicks_waiting"]) == (0, 3)
    assert "nothing new to fold in" in again["message"]
