"""The analytics formulas (analytics/formulas.py) on hand-made logs whose answers are worked out
by hand in the comments: grouping keystrokes into searches, no-result rate, click-through rate,
average click position, abandonment, reformulation and the suggested gold."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from analytics.formulas import (EXTEND_SETTLE_S, REFORMULATION_WINDOW_S, SETTLE_GAP_S, TYPING_ON_GAP_S, by_day,
                                by_query, intents, is_edit,
                                low_ctr_queries, measure, top_no_result_queries, unmatched_events)
from analytics.records import EventRecord, SearchRecord
from lexicon.text import normalise_query

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


def search(id_, session, seconds, query, results=("t1",), no_confident_match=False, rerank=False, degraded=()):
    return SearchRecord(id=id_, at=T0 + timedelta(seconds=seconds), session_id=session, query=query, rerank=rerank,
                        result_ids=tuple(results), no_confident_match=no_confident_match, degraded=tuple(degraded))


def click(search_id, task, position, seconds, session="s"):
    """A click sent by `session` (the session of most searches here: events bind to theirs)."""
    return EventRecord(at=T0 + timedelta(seconds=seconds), search_id=search_id, type="click", task_id=task,
                       position=position, session_id=session)


def returned(search_id, task, seconds, session="s"):
    return EventRecord(at=T0 + timedelta(seconds=seconds), search_id=search_id, type="return", task_id=task,
                       session_id=session)


# -- grouping keystrokes -----------------------------------------------------------------------
@pytest.mark.parametrize("previous, current, expected", [
    ("dev", "devl", True),                          # typing on
    ("devlopmental scrn", "devlopmental", True),    # deleting at the end
    ("asq", "asq", True),                           # the same text again (e.g. Enter after type-ahead)
    ("devlopmental", "developmental", True),        # a typo fixed inside: 1 edit
    ("lead scren", "lead screen", True),            # 1 insertion
    ("menus", "venus", True),                       # 1 substitution, both >= 4 characters
    ("d", "a", False),                              # box cleared and retyped: too short to be an edit
    ("abc", "abd", False),                          # under 4 characters: only prefixes count
    ("lead screening", "hearing screening", False),  # 5 edits: a new query
    ("attendance", "enrollment", False),
])
def test_is_edit(previous, current, expected):
    assert is_edit(previous, current) is expected


def test_keystrokes_of_one_session_are_one_search():
    log = [
        # session s1 types, pauses, submits: five requests, one search
        search("a1", "s1", 0.0, "d"), search("a2", "s1", 0.4, "de"), search("a3", "s1", 1.0, "dev"),
        search("a4", "s1", 2.5, "devlopmental"), search("a5", "s1", 4.0, "devlopmental scrn", rerank=True),
        # 30 s later, a different query: a second search
        search("a6", "s1", 34.0, "asq"),
        # another session typing at the same time: its own search, not mixed into s1's
        search("b1", "s2", 1.2, "lead"), search("b2", "s2", 1.6, "lead s"),
        # no session id: every request is a search of its own
        search("c1", None, 0.0, "a"), search("c2", None, 0.5, "ab"),
    ]
    found = intents(log, [])
    # in order of each search's first request (ties: the smaller id)
    assert [i.search_ids for i in found] == [("a1", "a2", "a3", "a4", "a5"), ("c1",), ("c2",), ("b1", "b2"), ("a6",)]
    first = next(i for i in found if i.search_ids[0] == "a1")
    assert first.query == "devlopmental scrn"                     # the last request's query
    assert (first.started_at, first.ended_at) == (T0, T0 + timedelta(seconds=4))
    assert measure(found).searches == 5


def test_typing_on_settles_only_after_a_pause_at_a_word_boundary():
    """Issue 44 item 3: typing on inside a word never settles a text (within TYPING_ON_GAP_S);
    typing on after a finished word settles it once it was shown EXTEND_SETTLE_S."""
    mid_word = [search("x1", "s", 0, "hear"), search("x2", "s", TYPING_ON_GAP_S, "hearing")]
    word_pause = [search("y1", "s", 0, "hearing"), search("y2", "s", EXTEND_SETTLE_S - 0.5, "hearing screening")]
    read_then_on = [search("z1", "s", 0, "hearing"), search("z2", "s", EXTEND_SETTLE_S, "hearing screening")]
    assert [i.query for i in intents(mid_word, [])] == ["hearing"]
    assert [i.query for i in intents(word_pause, [])] == ["hearing screening"]
    assert [i.query for i in intents(read_then_on, [])] == ["hearing", "hearing screening"]


def test_a_cleared_box_starts_a_new_search():
    # "developmental" shown 5 s, then cut back and replaced: two searches; "dev" and "d" were
    # passed through on the way (under SETTLE_GAP_S each) and belong to the second
    log = [search("1", "s", 0, "developmental"), search("2", "s", 5, "dev"), search("3", "s", 5.3, "d"),
           search("4", "s", 5.6, "a"), search("5", "s", 5.8, "asq")]
    assert [i.search_ids for i in intents(log, [])] == [("1",), ("2", "3", "4", "5")]
    # cut back at once (a typo noticed while typing): one search
    quick = [search("1", "s", 0, "developmentl"), search("2", "s", SETTLE_GAP_S / 2, "development"),
             search("3", "s", SETTLE_GAP_S, "developmental")]
    assert [i.query for i in intents(quick, [])] == ["developmental"]


def test_a_click_ends_the_search_on_the_text_clicked():
    # typed on mid-word, then a result of "eligib" opened: one search, "eligib", clicked
    log = [search("1", "s", 0, "eli"), search("2", "s", 1, "eligib", results=("t1", "t2"))]
    found = intents(log, [click("2", "t2", 2, 2)])
    assert len(found) == 1 and found[0].clicked and found[0].result_ids == ("t1", "t2")
    assert found[0].search_ids == ("1", "2")
    # a click on a half-typed text's results: the person settled on it (issue 44 item 3)
    clicked_early = [search("1", "s", 0, "eli"), search("2", "s", 1, "eligib", results=("t1", "t2"))]
    found = intents(clicked_early, [click("1", "t1", 1, 0.5)])
    assert [(i.query, i.clicked) for i in found] == [("eli", True), ("eligib", False)]


# -- the measures on one worked example -----------------------------------------------------------
def worked_example():
    """Seven searches in four sessions:

    S1 (a) "eligibility"        results, click t2 at position 2                -> clicked
    S2 (b) "attendence"         no confident match, no click; S3 60 s later   -> no result, reformulated (gold t3)
    S3 (b) "attendance"         click t3 at position 1                          -> clicked
    S4 (c) "menus"              results, no click; next search 400 s later     -> abandoned (400 > 300 s)
    S5 (c) "cacfp menu"         results, no click, last of its session         -> abandoned
    S6 (d) "screening"          click t8 at 2, then a return from t8; S7 30 s later -> clicked (never also
                                reformulated: issue 44 item 3)
    S7 (d) "hearing screening"  click t9 at 1                                   -> clicked
    """
    log = [search("S1", "a", 0, "eligibility", ("t1", "t2")),
           search("S2", "b", 0, "attendence", (), no_confident_match=True),   # S3 fixes its typo: related
           search("S3", "b", 60, "attendance", ("t3",)),
           search("S4", "c", 0, "menus", ("t4", "t5")),
           search("S5", "c", 400, "cacfp menu", ("t6",)),
           search("S6", "d", 0, "screening", ("t7", "t8")),
           search("S7", "d", 30, "hearing screening", ("t9",))]
    events = [click("S1", "t2", 2, 5, "a"), click("S3", "t3", 1, 65, "b"), click("S6", "t8", 2, 3, "d"),
              returned("S6", "t8", 20, "d"), click("S7", "t9", 1, 35, "d")]
    return log, events


def test_measures_of_the_worked_example():
    found = intents(*worked_example())
    m = measure(found)
    assert (m.searches, m.no_result, m.clicked, m.clicks, m.abandoned, m.reformulated) == (7, 1, 4, 4, 2, 1)
    assert m.no_result_rate == pytest.approx(1 / 7)
    assert m.click_through_rate == pytest.approx(4 / 7)
    assert m.average_click_position == pytest.approx((2 + 1 + 2 + 1) / 4)
    assert m.abandonment_rate == pytest.approx(2 / 7)
    assert m.reformulation_rate == pytest.approx(1 / 7)
    by_id = {i.search_ids[0]: i for i in found}
    assert {k for k, i in by_id.items() if i.reformulated} == {"S2"}
    assert {k for k, i in by_id.items() if i.abandoned} == {"S4", "S5"}
    assert (by_id["S2"].followup_task, by_id["S6"].followup_task, by_id["S1"].followup_task) == ("t3", None, None)


def test_an_empty_log_has_no_rates():
    m = measure([])
    assert m.searches == 0
    assert (m.no_result_rate, m.click_through_rate, m.average_click_position, m.abandonment_rate,
            m.reformulation_rate) == (None, None, None, None, None)


def test_an_empty_result_list_is_a_no_result_too():
    found = intents([search("1", "s", 0, "zzz", results=()), search("2", "t", 0, "abc", results=("t1",))], [])
    assert measure(found).no_result == 1


def test_reformulation_needs_a_different_query_within_the_window():
    same_query = [search("1", "s", 0, "ersea"), search("2", "s", 60, "ersea")]        # searched again: one search
    late = [search("1", "s", 0, "ersea"), search("2", "s", 15 + REFORMULATION_WINDOW_S, "ersea eligibility")]
    in_time = [search("1", "s", 0, "ersea"), search("2", "s", REFORMULATION_WINDOW_S, "ersea eligibility")]
    assert [i.reformulated for i in intents(same_query, [])] == [False]
    assert [i.reformulated for i in intents(late, [])] == [False, False]
    # the window runs from the search's LAST request (here its only one, at 0 s) to the next search
    assert [i.reformulated for i in intents(in_time, [])] == [True, False]


def test_a_kept_click_is_not_reformulated():
    log = [search("1", "s", 0, "ersea"), search("2", "s", 30, "eligibility")]
    found = intents(log, [click("1", "t1", 1, 5)])
    assert [i.reformulated for i in found] == [False, False]
    assert not found[0].abandoned                         # it was clicked


def test_the_gold_follows_a_chain_of_reformulations():
    # "lead" (no result) -> "lead screen" (results, no click) -> "lead screening" (click t5): both earlier
    # searches lead to t5 (each a related rephrasing: analytics.formulas.related)
    # ("lead screen" -> "lead screening" is typing on inside a word: a search only after a pause
    # longer than TYPING_ON_GAP_S)
    log = [search("1", "s", 0, "lead", ()), search("2", "s", 20, "lead screen", ("t1",)),
           search("3", "s", 21 + TYPING_ON_GAP_S, "lead screening", ("t5",))]
    found = intents(log, [click("3", "t5", 1, 25 + TYPING_ON_GAP_S)])
    assert [i.followup_task for i in found] == ["t5", "t5", None]
    assert [i.reformulated for i in found] == [True, True, False]


def test_a_chain_that_ends_without_a_click_suggests_nothing():
    log = [search("1", "s", 0, "aaa", ()), search("2", "s", 20, "bbb", ("t1",))]
    assert [i.followup_task for i in intents(log, [])] == [None, None]


def test_suggested_gold_is_the_most_frequent_followup_then_the_smallest_id():
    log, events = [], []
    # "nothing here" reformulated five times: twice to a click on t9, twice on t3, once on t7
    for n, task in enumerate(["t9", "t3", "t9", "t3", "t7"]):
        session = f"s{n}"
        log += [search(f"{session}a", session, 0, "nothing here", ()),
                search(f"{session}b", session, 30, f"nothing here {n}", (task,))]   # related: an edit
        events.append(click(f"{session}b", task, 1, 35, session))
    report = {r.query: r for r in by_query(intents(log, events))}["nothing here"]
    assert report.measures.searches == 5 and report.measures.no_result == 5
    assert report.suggested_gold == "t3"                 # t3 and t9 tie at 2; t3 < t9


def test_a_click_on_a_task_the_search_did_not_show_is_ignored():
    log = [search("1", "s", 0, "aaa", ()), search("2", "s", 20, "bbb", ("t1", "t2"))]
    found = intents(log, [click("2", "admin.made-up", 1, 25)])
    assert measure(found).clicks == 0
    assert [i.followup_task for i in found] == [None, None]      # a forged click cannot become a gold


def test_a_click_counts_only_from_the_session_that_made_the_search():
    """Issue 17 item 4: the search id is in the log, the task was shown, but the click comes from
    another session (or none, or the search had none): it counts nowhere, not even as a gold."""
    log = [search("1", "victim", 0, "aaa", ()), search("2", "victim", 20, "bbb", ("t1", "t2")),
           search("3", None, 0, "ccc", ("t1",))]
    forged = [click("2", "t2", 2, 25, "attacker"), click("2", "t2", 2, 26, None), click("3", "t1", 1, 5, None)]
    found = intents(log, forged)
    assert measure(found).clicks == 0
    assert [i.followup_task for i in found] == [None, None, None]
    assert measure(intents(log, [click("2", "t2", 2, 25, "victim")])).clicks == 1


def test_events_without_a_logged_search_are_not_counted():
    log = [search("1", "s", 0, "ersea", ("t1",))]
    events = [click("1", "t1", 1, 2), click("never-issued-id", "t1", 1, 3), returned("never-issued-id", "t1", 4)]
    found = intents(log, events)
    assert measure(found).clicks == 1
    assert unmatched_events(log, events) == 2


# -- per day and per query --------------------------------------------------------------------
def test_by_day_covers_every_day_and_uses_the_first_request_s_utc_day():
    log = [search("1", "s", 0, "ersea", ("t1",)),
           # a search that starts at 23:59:58 on the 21st and ends on the 22nd counts on the 21st
           SearchRecord("2", datetime(2026, 11, 21, 23, 59, 58, tzinfo=timezone.utc), "u", "menu", False, ()),
           SearchRecord("3", datetime(2026, 11, 22, 0, 0, 1, tzinfo=timezone.utc), "u", "menus", False, ()),
           # a naive datetime (SQLite) is UTC
           SearchRecord("4", datetime(2026, 11, 23, 8, 0), "v", "cacfp", False, ("t2",))]
    days = by_day(intents(log, [click("1", "t1", 3, 5)]), date(2026, 11, 19), date(2026, 11, 23))
    assert [d for d, _ in days] == [date(2026, 11, 19) + timedelta(days=n) for n in range(5)]
    counts = {d: m.searches for d, m in days}
    assert counts == {date(2026, 11, 19): 0, date(2026, 11, 20): 1, date(2026, 11, 21): 1, date(2026, 11, 22): 0,
                      date(2026, 11, 23): 1}
    per_day = dict(days)
    assert per_day[date(2026, 11, 20)].click_through_rate == 1.0
    assert per_day[date(2026, 11, 20)].average_click_position == 3
    assert per_day[date(2026, 11, 21)].no_result_rate == 1.0     # "menu" -> "menus": one search, no result
    assert per_day[date(2026, 11, 19)].click_through_rate is None


def test_top_no_result_and_low_ctr_lists():
    log, events, n = [], [], 0

    def add(query, times, results=("t1",), clicks=0):
        nonlocal n
        for k in range(times):
            n += 1
            log.append(search(f"q{n}", f"s{n}", 0, query, results))   # one session each: no grouping
            if k < clicks:
                events.append(click(f"q{n}", "t1", 1, 1, f"s{n}"))

    add("nothing a", 3, results=())
    add("nothing b", 5, results=())
    add("rarely clicked", 4, clicks=1)     # CTR 25%
    add("never clicked", 3, clicks=0)      # CTR 0%
    add("often clicked", 4, clicks=3)      # CTR 75%: not low (analytics.formulas.LOW_CTR_BELOW)
    add("too rare", 2, clicks=0)           # fewer than 3 searches: not ranked by CTR
    reports = by_query(intents(log, events))
    assert [r.query for r in top_no_result_queries(reports)] == ["nothing b", "nothing a"]
    assert [r.query for r in low_ctr_queries(reports)] == ["never clicked", "rarely clicked"]
    assert [r.query for r in low_ctr_queries(reports, limit=1)] == ["never clicked"]


def test_queries_are_grouped_by_their_normalised_text():
    assert normalise_query("  Lead\tScréening  ") == "lead screening"
    log = [search("1", "a", 0, normalise_query("Lead Screening")), search("2", "b", 0, normalise_query("lead  screening "))]
    assert [(r.query, r.measures.searches) for r in by_query(intents(log, []))] == [("lead screening", 2)]


def test_degraded_is_kept_per_search():
    found = intents([search("1", "s", 0, "lea"), search("2", "s", 1, "lead", degraded=("embeddings_unavailable",))], [])
    assert found[0].degraded is True

