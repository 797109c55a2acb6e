"""A query still being typed (issue 31): the `typed` signal (search.typed), the typing weights and
threshold a fit calibrates on prefixes of its own cases (search.fitting.typing_queries), and the
type-ahead evaluation that counts "no confident match" as a miss beside a plain prefix engine
(evaluation.prefixes, evaluation.prefix_engine). Figures: docs/prefix-search.md."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from catalog.records import CaseRecord, TaskRecord
from catalog.splits import holdout_split
from evaluation.evaluate import Split
from evaluation.prefix_engine import build_prefix_engine
from evaluation.prefixes import run as run_prefixes
from lexicon.rationale import build_lexicon
from search.confidence import AbstentionModel
from search.fitting import typing_cuts
from search.index import build_index
from search.prefilter import TYPED, prefilter
from search.query import analyse_query
from search.ranker import FusionWeights, RankerParams, default_params
from search.typed import TYPED_WHOLE, build_typed_index, typed_signal, unfinished
from settings import Settings

SETTINGS = Settings.from_env({})

TASKS = [TaskRecord(id="renew", name="Renew license", help="renew a driving license"),
         TaskRecord(id="balance", name="Account balance", help="see the money in an account"),
         TaskRecord(id="weather", name="Weather", help="the forecast")]
CASES = [CaseRecord(query="how do i renew my license", gold=("renew",)),
         CaseRecord(query="what is my balance", gold=("balance",)),
         CaseRecord(query="what is the weather like", gold=("weather",))]


@pytest.fixture(scope="module")
def typed():
    return build_typed_index(TASKS, CASES)


def test_words_as_typed_keep_the_function_words_the_other_signals_drop(typed):
    scores = typed_signal(typed, "how do")
    assert scores.argmax() == 0 and scores[0] > 0 and scores[1] == 0


def test_the_last_word_is_read_as_the_start_of_a_word(typed):
    assert typed_signal(typed, "ren").argmax() == 0
    assert typed_signal(typed, "bal").argmax() == 1
    assert typed_signal(typed, "what is my bal").argmax() == 1


def test_a_prefix_of_four_letters_may_carry_one_typo(typed):
    assert typed.completions("balz") and typed_signal(typed, "balz").argmax() == 1
    assert not typed.completions("bxz")   # under four letters: no typo tolerance


def test_the_signal_is_coverage_normalised(typed):
    scores = typed_signal(typed, "renew license")
    assert 0 < scores.max() <= 1.0 + 1e-6
    assert typed_signal(typed, "zzzz qqqq").max() == 0


@pytest.mark.parametrize("query, expected", [
    ("asq", True), ("how m", True), ("balance", True),   # short: read as being typed, whatever the word
    ("what is the weath", False),                        # several words: ranked as a whole query
    ("what is the weather like", False), ("renew my license please", False)])
def test_which_queries_are_read_as_still_being_typed(typed, query, expected):
    assert bool(unfinished(typed, query)) is expected


@pytest.mark.parametrize("query, typing_class", [("as", 1), ("asq", 1), ("asq-", 2), ("how m", 2), ("how mu", 3),
                                                 ("balance", 3), ("how much", 3), ("how much is", 0)])
def test_a_query_being_typed_has_a_class_by_its_length(typed, query, typing_class):
    assert unfinished(typed, query) == typing_class


@pytest.fixture(scope="module")
def demo_index(demo_tasks, demo_cases):
    return build_index(demo_tasks, build_lexicon(demo_cases), SETTINGS.field_weights, cases=demo_cases)


def test_a_whole_query_never_meets_the_typed_signal(demo_index):
    analysed = analyse_query(demo_index, "developmental screening for toddlers")
    assert not analysed.unfinished
    result = prefilter(demo_index, analysed, SETTINGS.degraded_weights, 5)
    assert all(TYPED not in item.signals and TYPED not in item.contributions for item in result.ranked)
    typing = prefilter(demo_index, "devel", SETTINGS.degraded_weights, 5)
    assert all(TYPED in item.signals for item in typing.ranked)
    assert typing.ranked[0].contributions[TYPED] > 0


def test_one_long_word_is_being_typed_when_it_begins_an_indexed_word(demo_index):
    assert unfinished(demo_index.typed, "immunizati") == unfinished(demo_index.typed, "developme") == 3
    assert not unfinished(demo_index.typed, "immunization")            # an indexed word: finished
    assert not unfinished(demo_index.typed, "developmental scr")       # several words: a whole query


def test_typing_cuts_are_the_prefixes_typed_on_the_way():
    query = "developmental screening"   # 20 keystrokes from the third character: one cut in each 3
    cuts = typing_cuts(query, stride=3)
    assert len(cuts) == 7 and all(query.startswith(c) and 3 <= len(c) < len(query) for c in cuts)
    lengths = [len(c) for c in cuts]
    assert lengths == sorted(lengths) and all(3 + 3 * s - 1 <= n < 3 + 3 * (s + 1) + 1 for s, n in enumerate(lengths))
    assert typing_cuts(query, stride=3) == cuts                     # a stable draw
    assert typing_cuts("asq") == [] and typing_cuts("asqs") == ["asq"]


def test_across_cases_every_keystroke_length_is_calibrated_on():
    """Issue 43 item 1: the fit's prefixes cover every keystroke length, as often as the widget
    asks it (not only 3, 5 and 8 characters and half the last word)."""
    queries = [f"what is the balance of account number {n:03d}" for n in range(200)]
    lengths = Counter(len(c) for q in queries for c in typing_cuts(q, stride=3))
    assert set(lengths) == set(range(3, len(queries[0])))           # every length up to the whole
    assert max(lengths.values()) < 3 * min(lengths.values())        # none drawn far more than another


def test_a_long_text_still_being_typed_is_ranked_whole_and_judged_as_a_prefix(demo_index):
    """`typing=1` on a text the prefilter reads as whole: the whole query's ranking and signals,
    the threshold of such prefixes (search.typed.TYPED_WHOLE); without it, or submitted: whole."""
    text = "developmental screening for tod"
    said, read, submitted = (analyse_query(demo_index, text, typing=t) for t in (True, None, False))
    assert said.unfinished == read.unfinished == submitted.unfinished == 0
    assert said.judged_as == TYPED_WHOLE and read.judged_as == submitted.judged_as == 0
    assert analyse_query(demo_index, "devel", typing=True).judged_as == analyse_query(demo_index, "devel").unfinished > 0
    ranked = [[(i.task.id, i.score) for i in prefilter(demo_index, q, SETTINGS.degraded_weights, 5).ranked]
              for q in (said, read)]
    assert ranked[0] == ranked[1]


def test_typing_weights_and_threshold_survive_the_store_round_trip():
    params = default_params(SETTINGS)
    typing = FusionWeights(SETTINGS.weights, SETTINGS.degraded_weights)
    model = AbstentionModel(("neighbour",), (1.0,), 0.0, 0.5, {}, typing_threshold=(-3.0, -2.0, -1.5, -1.0))
    again = RankerParams.from_dict(RankerParams(params.weights, 15, {"full": model, "sparse": None},
                                                typing=typing, tail={"full": (0.02, 0.005)}).as_dict())
    assert again.tail_for("full", False) == 0.02 and again.tail_for("full", True) == 0.005
    assert again.tail_for("sparse", False) == 0.0
    assert again.typing.as_dict() == typing.as_dict() and again.weights_for(True) is again.typing
    assert again.weights_for(False).as_dict() == params.weights.as_dict()
    assert [again.abstention["full"].threshold_for(c) for c in (0, 1, 2, 3, TYPED_WHOLE)] == [0.5, -3.0, -2.0, -1.5, -1.0]
    # a fit stored before the typing classes held one typing threshold: it serves every class; a
    # long text still being typed is judged as a whole query where the fit set no threshold for it
    old = AbstentionModel.from_dict({**model.as_dict(), "typing_threshold": -1.0})
    assert old.threshold_for(1) == old.threshold_for(3) == -1.0 and old.threshold_for(TYPED_WHOLE) == 0.5
    three = AbstentionModel.from_dict({**model.as_dict(), "typing_threshold": [-3.0, -2.0, -1.5]})
    assert three.threshold_for(3) == -1.5 and three.threshold_for(TYPED_WHOLE) == 0.5


def test_the_prefix_engine_reads_a_trailing_space_as_a_finished_word():
    engine = build_prefix_engine(TASKS, CASES)
    assert engine.rank("ren", 3)[0] == "renew"
    assert engine.rank("ren ", 3) == []          # "ren" finished: no indexed word is "ren"
    assert engine.rank("what is my bal", 1) == ["balance"]


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_on_the_demo_typed_prefixes_are_found_more_often_than_by_a_prefix_engine(demo_app, demo_tasks, demo_cases):
    """Both modes (the real embedder, and without it): the fit on the training split, the
    held-out split's queries cut after 3, 5 and 8 characters. A refused cut counts as a miss; as
    served (embeddings on) at most 10% of 5-character cuts are refused; whole queries keep their
    Hit@5 (docs/prefix-search.md)."""
    embedder = demo_app.extensions["taskfinder"].search.embedder
    train, test = holdout_split(demo_cases, 0.2, 42)
    out = run_prefixes(demo_app.extensions["taskfinder"].settings, Split(demo_tasks, train, test), embedder)
    for cut in ("3", "5", "8"):
        for mode in ("full", "sparse"):
            assert out[cut][mode]["found@5"] > out[cut]["engine"]["hit@5"], (cut, mode, out[cut])
    assert out["5"]["full"]["refused"] <= 0.10
    # the fitted score-tail cut shows fewer results, fewer of them wrong, and loses no found query
    whole = out["whole"]["full"]
    assert whole["shown_cut"] < whole["shown_uncut"] == 5.0
    assert whole["wrong_share_cut"] < whole["wrong_share_uncut"] and whole["found@5_cut"] == whole["found@5"]
    assert out["whole"]["full"]["hit@5"] >= 0.90 and out["whole"]["sparse"]["hit@5"] >= 0.80
    assert np.isclose(sum(1 for c in test if c.gold), out["whole"]["full"]["n"])


def test_a_typed_space_finishes_the_last_word(typed, demo_index):
    assert typed_signal(typed, "ren ", finished=True).max() == 0        # no indexed word is "ren"
    assert typed_signal(typed, "ren").argmax() == 0
    assert typed_signal(typed, "how do ", finished=True).argmax() == 0
    open_word = analyse_query(demo_index, "develop")
    closed = analyse_query(demo_index, "develop ")
    assert closed.finished and not open_word.finished and closed.text == "develop"
    assert closed.prefix == {} and closed.words == open_word.words


def test_the_api_passes_a_trailing_space_on(client):
    """The widget keeps one typed trailing space; the answer cache keeps the two apart."""
    open_word = client.get("/api/search", query_string={"q": "immun", "k": 5}).get_json()
    closed = client.get("/api/search", query_string={"q": "immun ", "k": 5}).get_json()
    assert open_word["query"] == closed["query"] == "immun"
    assert open_word["results"] and "Immunization" in open_word["results"][0]["name"]
    assert [r["id"] for r in open_word["results"]] != [r["id"] for r in closed["results"]]


def test_the_tail_cut_keeps_the_largest_ratio_that_loses_no_more_than_its_allowance():
    from types import SimpleNamespace as NS

    from search.fitting import TAIL_MAX_LOSS, choose_tail_ratio

    def item(task_id, probability):
        return NS(task=NS(id=task_id), probability=probability, pinned=False)
    # 100 queries: the gold first with p=0.5, four runners-up at 0.004 (a long weak tail) ...
    queries = [NS(case=NS(gold=("g",))) for _ in range(100)]
    results = [NS(ranked=[item("g", 0.5)] + [item(f"x{j}", 0.004) for j in range(4)]) for _ in range(100)]
    # ... except one query whose gold is second, at 0.03 of the top
    results[0] = NS(ranked=[item("x", 0.5), item("g", 0.015), *[item(f"x{j}", 0.001) for j in range(3)]])
    ratio, report = choose_tail_ratio(queries, results)
    assert report["uncut"]["hit@5"] == 1.0 and report["uncut"]["shown"] == 5.0
    assert ratio == 0.02 and report["chosen"]["hit@5"] == 1.0    # 0.05 would cut query 0's gold
    assert report["chosen"]["shown"] < 1.1 and report["chosen"]["wrong_share"] < report["uncut"]["wrong_share"]
    assert TAIL_MAX_LOSS < 0.01


def test_the_caller_may_say_whether_the_query_is_still_being_typed(client):
    """`typing=0` (the widget's Enter): a whole query, without the typing signals; `typing=1`: still
    being typed, whatever its length (a long text ranked as the whole query it is becoming, judged
    by its own threshold: search.typed.TYPED_WHOLE); absent: the service reads it (at most 8
    characters: typing)."""
    def signals(**params):
        body = client.get("/api/search", query_string={"q": "immun", "k": 3, **params}).get_json()
        return [set(row["signals"]) for row in body["results"]]
    assert all("typed" in names and "begins" in names for names in signals())
    assert all("typed" not in names for names in signals(typing="0"))
    def ranking(**params):
        body = client.get("/api/search", query_string={"q": "immunization records for", "k": 3, **params}).get_json()
        return [(row["id"], row["score"], sorted(row["signals"])) for row in body["results"]]
    assert ranking(typing="1") == ranking() == ranking(typing="0")
    assert all("typed" not in signals for _, _, signals in ranking(typing="1"))
    assert client.get("/api/search", query_string={"q": "immun", "typing": "maybe"}).status_code == 400
