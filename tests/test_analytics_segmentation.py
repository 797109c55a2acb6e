"""Issue 44 item 3: analytics merged a retyped query into the old one. A search is what the
person settled on (a pause, a click, leaving), a fragment passed through while typing is never
one, Back re-running a search is not a new one, and a search is clicked or reformulated, never
both (analytics.formulas, "A search"). One test per symptom of the issue, each on the log the
widget sends (a request per keystroke pause, the re-ranked one after 700 ms), then the
segmentation measured on simulated sessions whose searches are known (ops/simulate_sessions.py)
and properties over any log (hypothesis)."""
from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analytics.formulas import (REPEAT_WINDOW_S, SETTLE_GAP_S, TYPING_ON_GAP_S, by_query, intents, low_ctr_queries, measure,
                                top_no_result_queries)
from analytics.records import EventRecord, SearchRecord
from analytics.report import load_rollup_report, summarise
from tests.conftest import signed_in
from tests.test_analytics_rollup import page_app  # noqa: F401  (the fixture: SQLite and PostgreSQL)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
import simulate_sessions  # noqa: E402

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)
REPORT = "report.attendance"
TRAINING = "staff.training-hours"
RESULTS = (REPORT, TRAINING, "admin.child-profile", "health.immunizations")


class Log:
    """One session's requests and events, as the widget sends them."""

    def __init__(self, session: str, start: datetime = T0):
        self.session, self.start = session, start
        self.searches: list[SearchRecord] = []
        self.events: list[EventRecord] = []

    def at(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)

    def typed(self, seconds: float, query: str, results=RESULTS, no_match: bool = False, rerank: bool = False):
        record = SearchRecord(f"{self.session}-{len(self.searches):05d}", self.at(seconds), self.session, query,
                              rerank, () if no_match else tuple(results), no_confident_match=no_match)
        self.searches.append(record)
        return record

    def keys(self, seconds: float, text: str, step: float = 0.2, start: int = 1, **kw) -> float:
        """Type `text` from its `start`-th character on, a request per key `step` apart; returns
        the time of the last."""
        t = seconds
        for end in range(start, len(text) + 1):
            if text[end - 1] != " ":
                self.typed(t, text[:end].strip(), **kw)
            t += step
        return t - step

    def click(self, seconds: float, task: str = REPORT, record: SearchRecord | None = None):
        record = record or self.searches[-1]
        self.events.append(EventRecord(self.at(seconds), record.id, "click", self.session, task,
                                       record.result_ids.index(task) + 1))

    def came_back(self, seconds: float, task: str = REPORT):
        clicked = [e for e in self.events if e.type == "click"][-1]
        self.events.append(EventRecord(self.at(seconds), clicked.search_id, "return", self.session, task))


def merged(*logs: Log) -> tuple[list[SearchRecord], list[EventRecord]]:
    return [s for log in logs for s in log.searches], [e for log in logs for e in log.events]


def retyped(session: str, start: datetime = T0) -> Log:
    """`atendance` (results, read 2.5 s, no click), the box cleared, `attendance report` typed
    (the same first letters) and clicked: 8 s in all, well within the old 10 s."""
    log = Log(session, start)
    t = log.keys(0, "atendance")
    log.typed(t + 0.6, "atendance", rerank=True)
    t = log.keys(t + 2.5, "attendance report", step=0.15)        # cleared: "a", "at", ... again
    log.click(t + 1.5)
    return log


# -- one test per symptom ---------------------------------------------------------------------
def test_a_query_retyped_after_clearing_the_box_is_a_new_search_and_a_reformulation():
    log = retyped("retyped-session-01")
    found = intents(log.searches, log.events)
    assert [i.query for i in found] == ["atendance", "attendance report"]
    assert [i.reformulated for i in found] == [True, False]
    assert found[0].followup_task == REPORT                         # found after rephrasing
    assert measure(found).reformulation_rate == pytest.approx(0.5)


def test_a_no_result_search_edited_into_another_query_is_still_counted():
    log = Log("staff-session-001")
    t = log.keys(0, "staff rec", no_match=True)
    log.typed(t + 0.6, "staff rec", no_match=True, rerank=True)
    t += 2.0                                                        # reads "No confident match"
    for n, cut in enumerate(["staff re", "staff r", "staff"]):      # Backspace to the word
        log.typed(t + 0.12 * n, cut, no_match=True)
    t = log.keys(t + 0.5, "staff training hours", start=len("staff t"))
    log.click(t + 2.0, TRAINING)
    found = intents(log.searches, log.events)
    assert [i.query for i in found] == ["staff rec", "staff training hours"]
    m = measure(found)
    assert (m.searches, m.no_result, m.reformulated, m.clicked) == (2, 1, 1, 1)
    assert [r.query for r in top_no_result_queries(by_query(found))] == ["staff rec"]


def test_found_after_rephrasing_names_the_task_after_two_rephrase_then_click_searches(page_app):  # noqa: F811
    """Two sessions rephrase then click: the rephrased query's row names the task clicked after
    it, on the page (from the roll-ups, SQLite and PostgreSQL), not "–"."""
    recorder = page_app.extensions["taskfinder_analytics"]
    now = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=30)
    tasks = [t.id for t in page_app.extensions["taskfinder"].store.tasks()][:4]
    first, then = tasks[0], tasks[1]
    logs = []
    for n in range(2):
        log = Log(f"rephrase-page-{n:03d}", now + timedelta(minutes=5 * n))
        t = log.keys(0, "attendence", results=tasks)
        t = log.keys(t + 3.0, "attendance sheet", results=(then, first, *tasks[2:]))
        log.click(t + 2.0, first)
        logs.append(log)
    searches, events = merged(*logs)
    recorder.store.write(searches, events)
    recorder.rollup(force=True)
    report = load_rollup_report(recorder.store, now.date(), datetime.now(timezone.utc).date())
    top = {r.query: r for r in report.top_queries}
    assert top["attendence"].suggested_gold == first
    assert top["attendence"].measures.reformulation_rate == 1.0
    viewer, _csrf = signed_in(page_app, "vera")
    html = viewer.get("/admin/analytics/?days=7").get_data(as_text=True)
    row = re.search(r'<td class="query">attendence</td>(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)   # searches, no result, CTR, reformulated, found, case
    assert first in cells[4] and "–" not in cells[4]
    assert f"gold={first}" in cells[5]                              # "Turn into a test case" offers it


def fragments_log() -> tuple[list[SearchRecord], list[EventRecord]]:
    """Three people each: "family income eligibility" typed with a 12 s pause inside "el|igibility";
    "criminal background check" with a 15 s pause after "crim"; "medica" typed and at once
    replaced by "health insurance"; each search read and left (no click)."""
    logs = []
    for n in range(3):
        log = Log(f"fragment-session-{n:02d}", T0 + timedelta(minutes=10 * n))
        t = log.keys(0, "family income el")
        t = log.keys(t + 12.0, "family income eligibility", start=len("family income eli"))
        t = log.keys(t + 5.0, "crim")                               # cleared, retyped
        t = log.keys(t + 15.0, "criminal background check", start=len("crimi"))
        t = log.keys(t + 5.0, "medica")
        t = log.keys(t + 0.4, "health insurance")                   # replaced at once
        logs.append(log)
    return merged(*logs)


def test_half_typed_fragments_are_never_searches_nor_test_case_suggestions():
    searches, events = fragments_log()
    report = summarise(searches, events, T0.date(), T0.date())
    listed = {r.query for r in (*report.top_queries, *report.low_ctr_queries, *report.no_result_queries)}
    assert listed == {"family income eligibility", "criminal background check", "health insurance"}
    assert report.total.searches == 9
    assert {r.query for r in report.low_ctr_queries} == listed      # read, never clicked: low CTR, whole queries


def test_back_after_a_chip_does_not_count_the_no_result_query_again():
    log = Log("chip-session-0001")
    t = log.keys(0, "staff rec", no_match=True)
    chip = log.typed(t + 3.0, "staff training log")                # the chip's search (no keystrokes)
    log.click(t + 3.5, TRAINING, chip)                              # ... opens its task
    log.came_back(t + 60, TRAINING)
    log.typed(t + 60.1, "staff rec", no_match=True, rerank=True)   # Back: the widget searches it again
    found = intents(log.searches, log.events)
    m = measure(found)
    assert [i.query for i in found] == ["staff rec", "staff training log"]
    assert (m.searches, m.no_result) == (2, 1)
    assert [r.measures.no_result for r in top_no_result_queries(by_query(found))] == [1]


def test_a_query_is_never_all_clicked_and_all_reformulated():
    """"daily attendance": clicked, came back, searched "daily attendance report" 30 s later."""
    logs = []
    for n in range(3):
        log = Log(f"daily-session-{n:04d}", T0 + timedelta(minutes=10 * n))
        t = log.keys(0, "daily attendance")
        log.click(t + 2.0)
        log.came_back(t + 20)
        t = log.keys(t + 30, "daily attendance report", start=len("daily attendance r"))
        log.click(t + 2.0)
        logs.append(log)
    found = intents(*merged(*logs))
    daily = {r.query: r for r in by_query(found)}["daily attendance"].measures
    assert (daily.click_through_rate, daily.reformulation_rate) == (1.0, 0.0)
    assert not [i for i in found if i.clicked and i.reformulated]


# -- the segmentation, measured --------------------------------------------------------------
def test_the_simulated_sessions_are_cut_right_at_least_95_percent():
    searches, events, truth, patterns = simulate_sessions.simulate(300, seed=44)
    result = simulate_sessions.score(searches, events, truth, patterns)
    assert result.session_accuracy >= 0.95, result
    assert result.precision >= 0.95 and result.recall >= 0.95, result
    assert set(p for ps in patterns.values() for p in ps.split("+")) == set(simulate_sessions.PATTERNS)


def test_the_simulator_is_reproducible():
    a = simulate_sessions.simulate(20, seed=5)
    b = simulate_sessions.simulate(20, seed=5)
    assert a[0] == b[0] and a[2] == b[2]


# -- properties over any log ------------------------------------------------------------------
WORDS = ["lead", "screening", "staff", "rec", "attendance", "report"]
GAPS = [0.1, 0.2, 0.5, SETTLE_GAP_S / 2, SETTLE_GAP_S + 0.5, 5.0, 12.0, TYPING_ON_GAP_S + 5, 400.0]


@st.composite
def session_logs(draw):
    """Sessions typing phrases key by key with random pauses, cutting back and clearing at
    random, some requests answered with nothing, some clicked, some Back re-runs."""
    searches, events = [], []
    for s in range(draw(st.integers(1, 3))):
        session = f"prop-session-{s:03d}"
        t, text = 0.0, ""
        for n in range(draw(st.integers(1, 25))):
            move = draw(st.sampled_from(["key", "key", "key", "word", "cut", "clear", "back"]))
            if move == "key" and text and not text.endswith(" "):
                target = draw(st.sampled_from(WORDS))
                text = text + target[0]
            elif move in ("key", "word"):
                text = (text + " " if text else "") + draw(st.sampled_from(WORDS))
            elif move == "cut" and text:
                text = text[:-draw(st.integers(1, len(text)))]
            elif move == "clear":
                text = draw(st.sampled_from(WORDS))[:draw(st.integers(1, 4))]
            elif move == "back" and searches and searches[-1].session_id == session:
                text = draw(st.sampled_from([r.query for r in searches if r.session_id == session]))
            t += draw(st.sampled_from(GAPS))
            query = " ".join(text.split())
            if not query:
                continue
            record = SearchRecord(f"{session}-{n:04d}", T0 + timedelta(seconds=t), session, query,
                                  draw(st.booleans()), () if draw(st.integers(0, 4)) == 0 else RESULTS)
            searches.append(record)
            if record.result_ids and draw(st.integers(0, 5)) == 0:
                events.append(EventRecord(record.at + timedelta(seconds=0.05), record.id, "click", session,
                                          record.result_ids[0], 1))
    return searches, events


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_logs())
def test_every_search_ends_one_way_and_the_counts_add_up(log):
    searches, events = log
    found = intents(searches, events)
    m = measure(found)
    left_without_results = sum(1 for i in found if i.no_result and not i.clicked and not i.reformulated)
    assert m.clicked + m.reformulated + m.abandoned + left_without_results == m.searches
    assert not [i for i in found if i.clicked and i.reformulated]
    assert sum(r.measures.searches for r in by_query(found)) == m.searches
    assert sorted(i for f in found for i in f.search_ids) == sorted(s.id for s in searches)   # each request once
    for r in low_ctr_queries(by_query(found), min_searches=1):
        assert r.measures.click_through_rate < 0.5


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_logs())
def test_a_fragment_only_typed_through_is_never_a_search(log):
    """A text whose every request was typed on inside a word within TYPING_ON_GAP_S, never
    clicked, names no search (and so is on no list nor offered as a test case)."""
    searches, events = log
    clicked = {e.search_id for e in events}
    by_session: dict[str, list[SearchRecord]] = {}
    for record in sorted(searches, key=lambda r: (r.at, r.id)):
        by_session.setdefault(record.session_id, []).append(record)
    passed, kept = set(), set()
    for records in by_session.values():
        for a, b in zip(records, [*records[1:], None]):
            through = (b is not None and a.id not in clicked and len(b.query) > len(a.query)
                       and b.query.startswith(a.query) and a.query[-1].isalnum() and b.query[len(a.query)].isalnum()
                       and (b.at - a.at).total_seconds() <= TYPING_ON_GAP_S)
            (passed if through else kept).add((a.session_id, a.query))
    fragments = passed - kept
    named = {(i.session_id, i.query) for i in intents(searches, events)}
    assert not fragments & named


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_logs(), st.floats(TYPING_ON_GAP_S + 1, 1700), st.integers(0, 1000))
def test_back_re_running_a_search_counts_nothing_new(log, after, pick):
    """Back on the page a task was opened from: the widget searches one of the session's
    searches again, a while after its last request. The number of searches and of no-result
    searches stay as they were (it is that search again)."""
    searches, events = log
    if not searches:
        return
    found = intents(searches, events)
    last = max(searches, key=lambda r: (r.at, r.id))
    mine = [i for i in found if i.session_id == last.session_id]
    again_of = mine[pick % len(mine)]
    at = last.at + timedelta(seconds=after)
    if (at - again_of.started_at).total_seconds() > REPEAT_WINDOW_S:
        return                                                      # past the window: a new search
    shown = next(s for s in searches if s.id == again_of.search_ids[-1])
    rerun = SearchRecord(f"{last.session_id}-rerun", at, last.session_id, again_of.query, True, shown.result_ids)
    again, before = measure(intents([*searches, rerun], events)), measure(found)
    assert (again.searches, again.no_result) == (before.searches, before.no_result)
