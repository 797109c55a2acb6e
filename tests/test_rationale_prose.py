"""Words of rationale prose do not carry a task (issue 32 item 5).

A rationale explains a case in sentences ("Exact task name for ...", "Users say ... when they
mean ..."); before this change every word of it linked the case's gold task in the rationale
lexicon, and a word common to the rationales of many tasks linked each of them. Now a word used
by the rationales of more than PROSE_MAX_DF of the tasks (SIRA's document-frequency bound) links
a case's gold only where the case's own query uses it; the preview says which words of an edited
rationale link nothing, and why."""
from __future__ import annotations

from catalog.records import CaseRecord
from lexicon import rationale
from lexicon.rationale import build_lexicon, prose_terms

CASES = [CaseRecord(f"query {i}", (f"t{i}",), f"Exact task name; the t{i} screen records widget{i} counts.")
         for i in range(10)]


def test_words_most_rationales_use_are_prose_and_link_only_through_the_query():
    assert prose_terms(CASES, 0.2) == frozenset({"exact", "task", "name", "screen", "record", "count"})
    assert prose_terms(CASES, None) == frozenset()
    assert prose_terms(CASES[:4], 0.2) == frozenset(), "fewer than PROSE_MIN_TASKS tasks: nothing is prose"
    plain, bounded = build_lexicon(CASES, max_prose_df=1.0), build_lexicon(CASES, max_prose_df=0.2)
    assert plain.tasks_for("task") == {f"t{i}": 1 for i in range(10)}
    assert bounded.tasks_for("task") == {} and bounded.tasks_for("exact") == {}
    assert bounded.tasks_for("widget3") == {"t3": 1}, "a word only one task's rationale uses still links it"
    asked = build_lexicon([*CASES, CaseRecord("screen counts", ("t0",), "Exact task name.")], max_prose_df=0.2)
    assert asked.tasks_for("screen") == {"t0": 1} and asked.tasks_for("count") == {"t0": 1}, \
        "the case's own query links its words, prose or not"


def test_the_product_bounds_prose_and_the_preview_says_which_words_link_nothing(client):
    from admin.preview import preview_change

    assert rationale.PROSE_MAX_DF is not None
    search = client.application.extensions["taskfinder"].search
    live = search.live(wait=True)
    tasks, cases = list(live.index.tasks), list(live.cases)
    common = sorted(prose_terms(cases, rationale.PROSE_MAX_DF))
    assert common, "the demo's rationales share prose words"
    new = CaseRecord("lunch menu allergy list", ("nutrition.menus",),
                     "Exact task name of the task staff use; a child with an allergy.")
    report = preview_change(search, tasks, cases, tasks, [*cases, new], [new.query])
    assert set(report.prose_words) == {w for w in ("task", "child", "exact", "name") if w in common} - {"lunch"}
    added = {link.term for link in report.links_added}
    assert not added & set(common) and "allergi" in added
