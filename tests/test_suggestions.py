"""Suggestions for a search without an answer (search.suggestions): the pure function on hand-made
inputs, and the /api/search response of a real app (embedded SQLite, no embeddings) where the
suggestions may only come from tasks the caller can see."""
import pytest

from catalog.records import TaskRecord
from search.suggestions import Suggestion, common_topics, corrected_query, suggest
from tests.conftest import build_app, make_settings

TYPO = {"devlopmental": [("developmental", 0.96), ("development", 0.87)]}


def test_a_near_certain_typo_is_corrected_in_place_and_other_words_are_kept():
    assert corrected_query(["devlopmental", "scrn"], TYPO) == "developmental scrn"


def test_a_loose_correction_is_not_offered():
    assert corrected_query(["harry", "potter"], {"harry": [("carry", 0.8)]}) is None
    assert corrected_query(["screening"], {}) is None


def test_nearest_tasks_above_average_only_then_spelling():
    """What the product is unsure between first (issue 43 item 2), then the spelling fix."""
    got = suggest("devlopmental scrn", ["devlopmental", "scrn"], TYPO,
                  nearest=[("ASQ-3 Screening", 1.7), ("45-Day Screening Tracker", 0.4), ("Bus Routes", -0.2)],
                  visible_categories=["health", "health", "transportation"])
    assert got == [Suggestion("ASQ-3 Screening", "task"), Suggestion("45-Day Screening Tracker", "task"),
                   Suggestion("developmental scrn", "spelling")]


def test_topics_only_when_nothing_else_applies_most_common_first():
    got = suggest("qqq", ["qqq"], {}, nearest=[("Bus Routes", 0.0)],
                  visible_categories=["transportation", "family_services", "health", "family_services", None, ""])
    assert [s.as_dict() for s in got] == [{"text": "family services", "kind": "topic"},
                                          {"text": "health", "kind": "topic"},
                                          {"text": "transportation", "kind": "topic"}]


def test_no_duplicates_nothing_equal_to_the_query_and_at_most_the_limit():
    nearest = [("Immunization Records", 2.0), ("immunization  records", 1.5), ("A", 1.0), ("B", 0.9), ("C", 0.8)]
    got = suggest("Immunization records", ["immunization", "records"], {}, nearest, ["health"], limit=2)
    assert [s.text for s in got] == ["A", "B"]


def test_common_topics_ties_break_by_name():
    assert common_topics(["b", "a", "c_d", "a", "b"]) == ["a", "b", "c d"]


# -- through the API --------------------------------------------------------------------------------
TASKS = [
    TaskRecord(id="h.imm", name="Immunization Records", help="Record vaccines and exemptions.", category="health",
               url="/health/imm"),
    TaskRecord(id="h.scr", name="Developmental Screening", help="ASQ-3 screening within 45 days.", category="health",
               url="/health/scr"),
    TaskRecord(id="t.bus", name="Bus Routes", help="Plan routes and stops.", category="transportation",
               url="/t/bus"),
    TaskRecord(id="x.pay", name="Payroll Export", help="Export payroll.", category="secret_payroll",
               url="/x/pay", roles=("fiscal",)),
]


@pytest.fixture(scope="module")
def sparse_client(tmp_path_factory, shared_cache_dir):
    settings = make_settings(tmp_path_factory.mktemp("suggest"), shared_cache_dir, EMBEDDINGS_ENABLED="0")
    return build_app(settings, TASKS, []).test_client()


def test_an_unanswered_query_gets_topics_of_visible_tasks_only(sparse_client):
    body = sparse_client.get("/api/search", query_string={"q": "🚌🚌🚌"}).get_json()
    assert body["results"] == [] and body["no_confident_match"] is True
    assert body["suggestions"] == [{"text": "health", "kind": "topic"}, {"text": "transportation", "kind": "topic"}]


def test_an_answered_query_has_no_suggestions(sparse_client):
    body = sparse_client.get("/api/search", query_string={"q": "imunization"}).get_json()
    assert body["results"][0]["id"] == "h.imm"
    assert body["suggestions"] == []
