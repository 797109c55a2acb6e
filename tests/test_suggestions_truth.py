"""Issue 32 item 8: the "try one of these" suggestions never contradict the test cases. An
out-of-scope test case (no right task) is the developers saying "this query is no task"; its
rationale usually names the task it is *not* ("Emergency Drills covers severe-weather drills,
not forecasts"). For a query such a case covers, no task is offered at all (spelling and topics
only); for a query it is about (its words are a part of the query's, or the other way round), no
task its rationale names is offered. The pure function first, then through the API of the demo
(its own out-of-scope case, and one an editor adds through the editor)."""
from __future__ import annotations

import pytest

from search.suggestions import Suggestion, named_in, suggest
from tests.conftest import build_app, close_app, install_demo_fit, make_settings, signed_in

NEAREST = [("Emergency Drills (Shelter-in-Place/Lockdown)", 0.9), ("Program Calendar", 0.5), ("Training Calendar", 0.2)]
WEATHER = ("weather forecast for tomorrow",
           "Weather is not a program task; Emergency Drills covers severe-weather drills, not forecasts.")


# -- the pure function ----------------------------------------------------------------------------------
def test_a_query_an_out_of_scope_case_covers_gets_no_task_only_topics():
    for query in ("weather forecast for tomorrow", "Weather forecast, for tomorrow?", "tomorrow weather forecast"):
        got = suggest(query, query.lower().replace(",", "").replace("?", "").split(), {}, NEAREST,
                      ["health", "health", "transportation"], out_of_scope=[WEATHER])
        assert [s.kind for s in got] == ["topic", "topic"], (query, got)


def test_a_query_an_out_of_scope_case_is_about_never_gets_a_task_its_rationale_names():
    got = suggest("weather tomorrow", ["weather", "tomorrow"], {}, NEAREST, ["health"], out_of_scope=[WEATHER])
    assert [s.text for s in got] == ["Program Calendar", "Training Calendar"]   # Emergency Drills named: dropped
    unrelated = suggest("fire drill log", ["fire", "drill", "log"], {}, NEAREST, ["health"], out_of_scope=[WEATHER])
    assert unrelated[0].text == NEAREST[0][0], "a case about other words says nothing about this query"


def test_a_rationale_names_a_task_by_its_name_or_its_name_before_a_parenthesis():
    assert named_in(WEATHER[1], "Emergency Drills (Shelter-in-Place/Lockdown)")
    assert named_in("User Accounts manages system logins, not email.", "User Accounts")
    assert not named_in("Weather is not a program task.", "Program Calendar")
    assert not named_in("Accounts are IT's.", "User Accounts")


def test_spelling_is_still_offered_and_no_case_changes_nothing():
    typo = {"wether": [("weather", 0.93)]}
    got = suggest("wether forecast for tomorrow", ["wether", "forecast", "tomorrow"], typo, NEAREST, ["health"],
                  out_of_scope=[WEATHER])
    assert got == [Suggestion("weather forecast for tomorrow", "spelling")]   # what it meant is covered (as typed)
    plain = suggest("weather forecast for tomorrow", ["weather", "forecast", "tomorrow"], {}, NEAREST, ["health"])
    assert plain == suggest("weather forecast for tomorrow", ["weather", "forecast", "tomorrow"], {}, NEAREST,
                            ["health"], out_of_scope=[])
    assert plain[0].text == NEAREST[0][0]


# -- through the API, on the fitted demo ----------------------------------------------------------------
SLACK = "custom emoji in slack"
SLACK_RATIONALE = "Slack emoji are not a program task; Custom Fields adds fields to the program's own forms."


@pytest.fixture(scope="module")
def demo(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    from tests.conftest import FAST_HASHER, ADMIN_PASSWORD
    app = build_app(make_settings(tmp_path_factory.mktemp("oos-suggest"), shared_cache_dir, SECRET_KEY="s" * 40),
                    demo_tasks, demo_cases)
    install_demo_fit(app)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    yield app
    close_app(app)


def suggestions(app, query: str) -> tuple[list[dict], dict]:
    app.extensions["taskfinder"].search.live(wait=True)
    body = app.test_client().get("/api/search", query_string={"q": query}).get_json()
    return body["suggestions"], body


def test_the_demos_out_of_scope_query_is_not_offered_the_task_its_case_rejects(demo):
    offered, body = suggestions(demo, "weather forecast for tomorrow")
    assert body["results"] == [] and offered, body
    assert [s for s in offered if s["kind"] == "task"] == [], offered


def test_an_out_of_scope_case_an_editor_adds_stops_its_task_being_suggested(demo):
    before, body = suggestions(demo, SLACK)
    assert body["results"] == [] and before[0] == {"text": "Custom Fields", "kind": "task"}, before  # the premise

    client, csrf = signed_in(demo, "eddie")
    form = {"csrf_token": csrf, "action": "save", "case_id": "", "base_version": "", "query": SLACK,
            "rationale": SLACK_RATIONALE, "category": "natural_language", "message": "slack is not ours"}
    published = client.post("/admin/cases/publish", data=form)
    assert published.status_code == 302, published.get_data(as_text=True)[:500]

    for query in (SLACK, "Custom emoji in Slack?", "slack custom emoji"):
        after, body = suggestions(demo, query)
        assert body["results"] == [], (query, body["results"])
        assert [s for s in after if s["kind"] == "task"] == [], (query, after)
        assert after, "somewhere to go: the topics"
    near, body = suggestions(demo, "custom emoji")   # the case is about these words: never its rejected task
    assert "Custom Fields" not in [s["text"] for s in near], near
