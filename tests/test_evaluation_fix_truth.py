"""Issue 32 item 9: the evaluation page offers a fix that can change a held-out miss, or says why
none can, in words that read as sentences; and its table for specialists says whether a
configuration's difference from the product is more than chance.

A held-out query's own test case is never learned from in a run (that is what holds it out), so
editing that case's rationale cannot change its result: the next run is identical and offers the
same fix again. What the run does learn from is the training side of the split (a hash of each
case's wording: catalog.splits), so the page teaches the query's words through a case of the right
task on that side, or, when the task has none, asks for a new case in other words."""
from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from catalog.formats import load_tasks_file
from catalog.records import CaseRecord
from catalog.splits import bucket
from evaluation.errors import suggest_case
from evaluation.runs import HOLDOUT, SEED, EvaluationRuns
from tests.conftest import close_app, signed_in
from tests.test_admin_evaluation import CASES, STORED_REPORT, make_eval_app, summary

DEMO_CATALOG = Path(__file__).resolve().parents[1] / "catalog" / "data" / "headstart_catalog.jsonl"


def held_out(query: str) -> bool:
    return bucket(SEED, query) < HOLDOUT


def report_with(**configs) -> dict:
    return {**STORED_REPORT, "configs": {**STORED_REPORT["configs"], **configs}}


@pytest.fixture
def app(tmp_path, shared_cache_dir):
    # every case of the bus task but its held-out one gone: nothing on the training side teaches it
    cases = [c for c in CASES if c.query != "bus stops"]
    app = make_eval_app(tmp_path / "app", shared_cache_dir, cases)
    yield app
    close_app(app)


def page_of(app, report: dict) -> tuple[str, int, object]:
    runs = EvaluationRuns(app.extensions["taskfinder"].store.engine)
    run = runs.create("user:vera")
    runs.finish(run.id, report)
    client, _csrf = signed_in(app, "vera")
    return client.get(f"/admin/evaluation/{run.id}").get_data(as_text=True), run.id, client


def case_of(app, query: str) -> CaseRecord:
    return next(c for c in app.extensions["taskfinder"].store.cases() if c.query == query)


def miss_rows(page: str) -> dict[str, str]:
    body = re.search(r'<table class="ev-misses">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return {html.unescape(re.search(r"<q>(.*?)</q>", row).group(1)): row for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)}


# -- the fix ---------------------------------------------------------------------------------------------
def test_a_held_out_miss_is_never_offered_an_edit_of_its_own_case_but_a_case_the_run_learns_from(app):
    report = {**STORED_REPORT, "error_analysis": {"prefilter": {"n_misses": 3, "misses": [
        *STORED_REPORT["error_analysis"]["prefilter"]["misses"],
        {"query": "route planning", "gold": ["t.bus"], "cls": "missing_rationale", "reason": "z", "top": ["t.meal"],
         "gold_rank": 9, "unknown_words": [], "suggestion": {"rationale": "Bus Route Planner. Users say \"rout plan\""}}]}}}
    page, run_id, client = page_of(app, report)
    rows = miss_rows(page)
    absent = case_of(app, "who was absent today")
    assert held_out(absent.query), "the premise: the miss's own case is held out"
    assert "Fix its rationale" not in page
    assert f"/admin/cases/{absent.id}/edit" not in page, "editing a held-out case cannot change its result"
    assert "held out" in rows["who was absent today"]

    # the fix opens a case of the same task that the run learns from, with a sentence to add
    hrefs = re.findall(r'<a class="button" href="([^"]+)"', rows["who was absent today"])
    assert len(hrefs) == 1
    link = urlparse(html.unescape(hrefs[0]))
    teacher = next(c for c in app.extensions["taskfinder"].store.cases() if link.path == f"/admin/cases/{c.id}/edit")
    assert teacher.gold == ("t.attend",) and not held_out(teacher.query)
    assert teacher.query == "absent kids", "the training case sharing the most words with the miss"
    sentence = parse_qs(link.query)["rationale"][0]
    assert sentence == '“absent”, “today” should find Daily Attendance: Mark children present or absent by classroom.'
    assert "who was absent today" not in sentence, "the held-out query's words, never the query itself"
    form = client.get(html.unescape(hrefs[0])).get_data(as_text=True)
    assert f"{teacher.rationale} {sentence}".strip() in html.unescape(form), "added to what the case says"

    # a miss whose task has no case the run learns from: a new case, in other words, is what can work
    bus = rows["route planning"]
    assert "/admin/cases/new?gold=t.bus" in html.unescape(bus) and "/edit" not in bus
    assert "Every test case of Bus Route Planner is held out" in html.unescape(bus)
    assert '“route”, “planning” should find Bus Route Planner: Plan transportation routes and stops.' in html.unescape(bus)


def test_the_suggested_rationale_reads_as_a_sentence(demo_tasks):
    by_id = {t.id: t for t in demo_tasks}
    query = "driver's morning check of the bus before leaving"
    row = suggest_case(query, ("transport.vehicle-inspections",), "natural_language", by_id,
                       ["driver", "s", "drivers", "morning", "check", "bus", "leaving"])
    assert row["rationale"] == ('“driver\'s morning check of the bus before leaving” should find Vehicle Inspections: '
                                'Pre-trip/post-trip checklists and annual inspections.')
    assert "driver s drivers" not in row["rationale"]
    two = suggest_case("sub", ("hr.substitute-pool", "transport.vehicle-inspections"), None, by_id, ["sub"])
    assert two["rationale"] == '“sub” should find Substitute Pool or Vehicle Inspections.'


# -- the specialists' table --------------------------------------------------------------------------------
def test_the_specialists_table_says_whether_a_difference_from_the_product_is_more_than_chance(app):
    n = 40
    report = report_with(
        prefilter={**summary(0.825, 0.9, n=n)},
        embedding={**summary(0.8, 0.925, n=n), "p_value_vs_prefilter": {"hit@1": 1.0, "hit@5": 1.0, "mrr": 0.8}},
        bm25={**summary(0.5, 0.7, n=n), "p_value_vs_prefilter": {"hit@1": 0.0002, "hit@5": 0.004, "mrr": 0.0001}})
    page, _run_id, _client = page_of(app, report)
    table = re.search(r'<table class="ev-table">(.*?)</table>', page, re.S).group(1)
    rows = {re.search(r'<th scope="row">(\w+)', r).group(1): html.unescape(r)
            for r in re.findall(r"<tr>(.*?)</tr>", table, re.S) if '<th scope="row">' in r}
    assert "Hit@5 against the product" in table
    assert "1 more of 40" in rows["embedding"] and "not significant (p = 1.00)" in rows["embedding"]
    assert "8 fewer of 40" in rows["bm25"] and "significant (p = 0.004)" in rows["bm25"]
    assert "not significant" not in rows["bm25"]
    assert "the product" in rows["prefilter"]
