"""Issue 32 items 1 and 2: what the search widget's "why" line says must be true.

The typo part of the line is built from each result's `matched` entries that carry a
`corrected_to` (search.prefilter.explain_rows); the signal part from its `contributions`
(widget/static/widget.js, whyLine; tests/browser/test_why_line.py reads the line itself).
Through the real app on SQLite and PostgreSQL (the admin fixture's two databases) and the
prefilter on a small index. The rankings are not touched: only what is said about them.
"""
from __future__ import annotations

import pytest

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from search.index import build_index
from search.prefilter import explain_rows
from search.query import analyse_query
from settings import FieldWeights


def search(app, query: str) -> dict:
    response = app.test_client().get("/api/search", query_string={"q": query})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def readings(row: dict) -> list[tuple[str, str]]:
    """The (typed word, read as) pairs a result explains as typo corrections, as the widget
    reads them from `matched`: one per field the correction matched in."""
    return [(m["term"], m["corrected_to"]) for m in row["matched"] if "corrected_to" in m]


def by_name(body: dict, name: str) -> dict:
    return next(row for row in body["results"] if row["name"] == name)


# -- item 1: a correctly spelled word is never explained as a misspelling ----------------------------
def test_a_correctly_spelled_word_is_not_explained_as_a_test_case_s_misspelling(admin_app):
    """"developmental" is spelled right; a test case's "devlopmental" is its misspelling. The
    ranker still reads the typed word against it too (the response's `corrections` and the
    scores are unchanged), but no result may say it read "developmental" as "devlopmental"."""
    body = search(admin_app, "developmental scr")
    assert body["corrections"]["developmental"][0]["word"] == "devlopmental"   # the ranking's own reading
    asq = by_name(body, "ASQ-3 Screening")
    assert asq["contributions"]["typo"] > 0
    for row in body["results"]:
        assert not [pair for pair in readings(row) if pair[0] == "developmental"], (row["name"], readings(row))
    # the unfinished last word begins the task's word: it is not read as another finished word
    assert ("scr", "screened") not in readings(asq)
    assert {"term": "scr", "field": "name", "begins": "Screening"} in asq["matched"]


def test_a_misspelling_is_explained_once_per_word_and_term(admin_app):
    """"screning" read as "screening" and as "screenings" is one reading (one term): it is said
    once. A real misspelling of a word the test cases also misspell ("devlopmental") is still
    explained as its correction."""
    body = search(admin_app, "devlopmental screning")
    asq = by_name(body, "ASQ-3 Screening")
    assert ("devlopmental", "developmental") in readings(asq)
    assert ("screning", "screening") in readings(asq)
    for row in body["results"]:
        said = readings(row)
        assert ("screning", "screenings") not in said, (row["name"], said)
        per_field = [(m["term"], m["field"]) for m in row["matched"] if "corrected_to" in m]
        assert len(per_field) == len(set(per_field)), (row["name"], row["matched"])


def test_the_explanation_changes_no_score(client):
    """The same query twice, and the contributions still add up to each score: explaining less
    moved nothing (tests/test_learning.py's golden rankings hold the scores themselves)."""
    first, again = search(client.application, "devlopmental screning"), search(client.application, "developmental scr")
    for body in (first, again):
        for row in body["results"]:
            assert sum(row["contributions"].values()) == pytest.approx(row["score"], abs=1e-3)
    assert [r["id"] for r in first["results"]][:2] == ["health.asq3-screening", "health.screening-tracker"]


# -- the rule, on a small index ----------------------------------------------------------------------
TASKS = [TaskRecord(id="asq", name="ASQ-3 Screening", help="Ages and stages questionnaire."),
         TaskRecord(id="drdp", name="DRDP Reports", help="Desired results profile."),
         TaskRecord(id="notes", name="Case Notes", help="Notes about a family.")]
CASES = [CaseRecord(query="developmental screening", gold=("asq",), rationale="developmental screening"),
         CaseRecord(query="developmental profile", gold=("drdp",), rationale="developmental profile"),
         CaseRecord(query="developmental checklist", gold=("asq",), rationale="developmental"),
         CaseRecord(query="devlopmental screning", gold=("asq",), rationale="a misspelled query")]


@pytest.fixture(scope="module")
def small_index():
    return build_index(TASKS, build_lexicon(CASES), FieldWeights(), cases=CASES)


def explained(index, query: str) -> list[list[tuple[str, str]]]:
    analysed = analyse_query(index, query)
    rows = explain_rows(index, list(range(len(index.tasks))), analysed.words, analysed.corrections)
    return [[(m["term"], m["corrected_to"]) for m in matched if "corrected_to" in m] for matched in rows]


def test_a_word_the_cases_know_better_than_its_correction_is_no_misspelling(small_index):
    analysed = analyse_query(small_index, "developmental")
    assert analysed.corrections["developmental"][0][0] == "devlopmental"   # the ranker's reading stays
    assert explained(small_index, "developmental") == [[], [], []]


def test_a_word_the_cases_know_worse_than_its_correction_is_explained(small_index):
    asq, _drdp, _notes = explained(small_index, "devlopmental screning")
    assert ("devlopmental", "developmental") in asq and ("screning", "screening") in asq


# -- issue 43 item 3: what a fragment is said to match -------------------------------------------------
def begun(row: dict) -> list[tuple[str, str, str]]:
    return [(m["term"], m["field"], m["begins"]) for m in row["matched"] if "begins" in m]


@pytest.mark.parametrize(("typed", "task", "word"), [("dev", "Professional Development Hours", "Development"),
                                                     ("medica", "Medical Home", "Medical"),
                                                     ("eligib", "Eligibility Determination", "Eligibility")])
def test_a_word_still_being_typed_is_said_to_begin_the_task_s_word(admin_app, typed, task, word):
    """Issue 43 item 3: `dev` was explained as 'Reads “dev” as “developement”' (a test case's
    typo), `medica` as 'as “medical”', `med` as 'as “medicaid”' on Medical Home. A half-typed
    word begins the task's own word, as the task writes it; it is never read as a finished word."""
    body = search(admin_app, typed)
    row = by_name(body, task)
    assert (typed, "name", word) in begun(row), row["matched"]
    for result in body["results"]:
        assert not [pair for pair in readings(result) if pair[0] == typed], (result["name"], readings(result))


def test_a_why_line_never_reads_a_word_as_a_test_case_s_typo(small_index):
    """A correction into a word only a misspelled test case has ("screning") is not said, even
    where the ranker reads it; one into a word of the tasks' texts is."""
    analysed = analyse_query(small_index, "screnning")
    assert "screning" in [word for word, _ in analysed.corrections.get("screnning", [])]
    said = [pair for row in explained(small_index, "screnning") for pair in row]
    assert ("screnning", "screning") not in said
    assert ("screnning", "screening") in said


def test_a_finished_word_and_a_word_that_begins_nothing_are_not_fragments(small_index):
    from search.prefilter import typed_fragment

    assert typed_fragment(small_index, analyse_query(small_index, "quest")) == "quest"        # Questionnaire
    assert typed_fragment(small_index, analyse_query(small_index, "quest ")) is None          # finished
    assert typed_fragment(small_index, analyse_query(small_index, "xyzq")) is None            # begins nothing
    analysed = analyse_query(small_index, "quest")
    rows = explain_rows(small_index, [0], analysed.words, analysed.corrections, fragment="quest")
    assert {"term": "quest", "field": "help", "begins": "questionnaire"} in rows[0]
