"""Each prefilter signal, their fusion, role filtering and typo tolerance, on small catalogs
whose right answers are obvious by construction."""
import numpy as np
import pytest

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from search.index import build_index
from search.prefilter import prefilter
from search.signals import rationale_weight
from settings import FieldWeights, Weights

TASKS = [
    TaskRecord(id="asq", name="ASQ-3 Screening", help="Record Ages and Stages questionnaire results.", category="health"),
    TaskRecord(id="pool", name="Application Pool", help="Review applicants and their selection points.", category="ersea"),
    TaskRecord(id="meal", name="CACFP Meal Count", help="Daily meal counts for the food program claim.", category="nutrition"),
    TaskRecord(id="notes", name="Case Notes", help="Screening notes, referral notes and follow-up.", category="family_services"),
    TaskRecord(id="budget", name="Budget Revisions", help="", category="fiscal", roles=("fiscal",)),
]
CASES = [CaseRecord(query="eligibility", gold=("pool",), rationale="Eligibility is determined in the Application Pool."),
         CaseRecord(query="developmental screening", gold=("asq",), rationale="ASQ-3 is the developmental screening tool.")]
def only(**weights) -> Weights:
    """A weight set with just the named signals (every other weight 0)."""
    return Weights(**{name: weights.get(name, 0.0) for name in Weights.__dataclass_fields__})


LEX_ONLY, RAT_ONLY, TYPO_ONLY = only(lexical=1), only(rationale=1), only(typo=1)


def with_unit_vectors(index):
    """The index with one-hot task vectors and one-hot exemplar vectors per owning task."""
    n = len(index.tasks)
    tasks = np.eye(n, dtype=np.float32)
    return index.with_vectors(tasks, tasks[index.exemplars.task_rows], None)


@pytest.fixture(scope="module")
def index():
    return build_index(TASKS, build_lexicon(CASES), FieldWeights())


def ids(result):
    return [s.task.id for s in result.ranked]


def test_rationale_weight_favours_specific_links():
    # a term linked to one task by two cases outweighs one shared by four tasks
    assert rationale_weight(2, 2, 1, 5) > rationale_weight(1, 4, 4, 5)


def test_name_matches_outrank_help_text_matches(index):
    result = prefilter(index, "screening", LEX_ONLY, k=5)
    assert ids(result)[:2] == ["asq", "notes"]
    assert result.ranked[0].signals["lexical"] > result.ranked[1].signals["lexical"]


def test_rationale_lexicon_bridges_jargon(index):
    assert prefilter(index, "eligibility", LEX_ONLY, k=5).ranked[0].signals["lexical"] == 0
    result = prefilter(index, "eligibility", RAT_ONLY, k=5)
    assert ids(result)[0] == "pool"
    assert {"term": "eligibility", "field": "rationale"} in result.ranked[0].matched


def test_typo_signal_corrects_misspelled_words(index):
    result = prefilter(index, "devlopmental screning", TYPO_ONLY, k=5)
    assert ids(result)[0] == "asq"
    assert result.corrections["devlopmental"][0][0] == "developmental"
    assert any(m.get("corrected_to") == "screening" for m in result.ranked[0].matched)


def test_last_word_is_completed_as_a_prefix_for_type_ahead(index):
    assert ids(prefilter(index, "selec", TYPO_ONLY, k=5))[0] == "pool"


def test_embedding_signals_rank_by_raw_cosine(index):
    dense = with_unit_vectors(index)
    query = np.eye(len(TASKS), dtype=np.float32)[2]
    for signal in ("embedding", "centroid", "neighbour"):
        result = prefilter(dense, "anything", only(**{signal: 1}), k=5, query_vector=query)
        assert ids(result)[0] == "meal", signal
        assert result.ranked[0].signals[signal] == pytest.approx(1.0), signal
        assert result.ranked[1].signals[signal] == pytest.approx(0.0), signal  # raw cosine, not stretched


def test_fusion_is_the_weighted_sum_of_signals_relative_to_the_average_task(index):
    weights = Weights(1.0, 0.8, 0.5, 0.3, 0.7, 2.0, 3.0, 0.0)
    dense = with_unit_vectors(index)
    result = prefilter(dense, "screening eligibility", weights, k=5, query_vector=np.eye(len(TASKS), dtype=np.float32)[1])
    raw = [sum(getattr(weights, name) * value for name, value in item.signals.items() if value is not None)
           for item in result.ranked]
    for item, fused in zip(result.ranked, raw):
        assert sum(item.contributions.values()) == pytest.approx(item.score, abs=1e-3)
        assert item.score - result.ranked[0].score == pytest.approx(fused - raw[0], abs=1e-3)
    assert sum(item.probability for item in result.ranked) == pytest.approx(1.0, abs=1e-3)  # all 5 visible tasks
    assert result.mode == "full"


def test_without_embeddings_the_degraded_weights_rank_and_the_mode_says_so(index):
    from search.ranker import FusionWeights

    weights = FusionWeights(full=only(embedding=1.0), sparse=only(lexical=1.0))
    result = prefilter(index, "meal count", weights, k=3)
    assert result.mode == "sparse" and ids(result)[0] == "meal"
    assert result.ranked[0].signals["embedding"] is None
    assert result.effective_weights["lexical"] == 1.0 and result.effective_weights["embedding"] == 0.0


def test_role_filtering_hides_restricted_tasks(index):
    assert "budget" not in ids(prefilter(index, "budget revisions", LEX_ONLY, k=5))
    assert "budget" not in ids(prefilter(index, "budget revisions", LEX_ONLY, k=5, role="teacher"))
    assert ids(prefilter(index, "budget revisions", LEX_ONLY, k=5, role="fiscal"))[0] == "budget"
    assert ids(prefilter(index, "budget revisions", LEX_ONLY, k=5, restrict_roles=False))[0] == "budget"


def test_shortlist_length_and_stable_order(index):
    first = prefilter(index, "program", Weights(), k=3)
    assert len(first.ranked) == 3
    assert ids(first) == ids(prefilter(index, "program", Weights(), k=3))


def test_partial_match_scores_below_full_match(index):
    """Coverage normalisation: one of two words matched gives about half the lexical score."""
    full = prefilter(index, "meal count", LEX_ONLY, k=1).ranked[0].signals["lexical"]
    half = prefilter(index, "meal zzzz", LEX_ONLY, k=1).ranked[0].signals["lexical"]
    assert full == pytest.approx(1.0, abs=0.01)
    assert 0.3 < half < 0.7


def test_a_test_case_query_pins_its_gold_tasks_first():
    """'eligibility' matches three tasks' names, but the admin's test case says Application
    Pool: a repeat of a case's query (case and punctuation aside) gets its gold tasks first; the
    same words in another order or with a word more are a different query and are ranked."""
    tasks = TASKS + [TaskRecord(id="elig", name="Eligibility Determination", help="Income eligibility."),
                     TaskRecord(id="foster", name="Foster Care Eligibility", help="Categorical eligibility.")]
    index = build_index(tasks, build_lexicon(CASES), FieldWeights())
    result = prefilter(index, "Eligibility!", Weights(), k=5)
    assert ids(result)[0] == "pool" and result.ranked[0].pinned
    assert not any(s.pinned for s in result.ranked[1:])
    assert prefilter(index, "Developmental  Screening?", Weights(), k=5).ranked[0].pinned
    assert not prefilter(index, "screening developmental", Weights(), k=5).ranked[0].pinned
    assert not prefilter(index, "eligibility income", Weights(), k=5).ranked[0].pinned


def test_enrichment_terms_join_the_lexical_signal_without_touching_task_text():
    enrichment = {"meal": [("food program", 1.0), ("USDA reimbursement", 1.0)]}
    plain = build_index(TASKS, build_lexicon([]), FieldWeights())
    enriched = build_index(TASKS, build_lexicon([]), FieldWeights(), enrichment)
    assert prefilter(plain, "usda reimbursement", LEX_ONLY, k=1).ranked[0].signals["lexical"] == 0
    top = prefilter(enriched, "usda reimbursement", LEX_ONLY, k=1).ranked[0]
    assert top.task.id == "meal" and {"term": "usda", "field": "enriched"} in top.matched
    assert enriched.tasks == plain.tasks  # stored text unchanged
    name_hit = prefilter(enriched, "meal", LEX_ONLY, k=1).ranked[0].signals["lexical"]
    assert name_hit == pytest.approx(1.0, abs=0.01)
