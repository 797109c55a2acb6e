"""Property-based tests (hypothesis) of the text pipeline and the prefilter over arbitrary
Unicode: control characters, unpaired surrogates (valid Python str, never valid JSON), emoji,
combining marks, RTL marks. The index is a small fixed one, sparse only (no embeddings)."""
from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from lexicon.language import STOPWORDS
from lexicon.normalise import normalise
from lexicon.text import terms, words
from search.index import build_index
from search.prefilter import prefilter
from search.query import analyse_query
from settings import FieldWeights, Weights

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKEN = re.compile(r"[0-9a-z]+")

# Any code point, surrogates (Cs) and controls (Cc) included: st.text() alone excludes surrogates.
ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=80)

TASKS = [
    TaskRecord(id="asq", name="ASQ-3 Screening", help="Record Ages and Stages questionnaire results.", category="health"),
    TaskRecord(id="pool", name="Application Pool", help="Review applicants and their selection points.", category="ersea"),
    TaskRecord(id="meal", name="CACFP Meal Count", help="Daily meal counts for the food program claim.", category="nutrition"),
    TaskRecord(id="notes", name="Case Notes", help="Screening notes, referral notes and follow-up.", category="family_services"),
    TaskRecord(id="inkind", name="In-Kind Donations", aliases=("non-federal share",), help="Log volunteer hours.",
               category="fiscal"),
    TaskRecord(id="budget", name="Budget Revisions", help="Revise the grant budget.", category="fiscal", roles=("fiscal",)),
    TaskRecord(id="payroll", name="Payroll Export", help="Export staff payroll.", category="hr", roles=("hr", "fiscal")),
    TaskRecord(id="retired", name="Old Screening Report", help="Retired screening report.", category="health", active=False),
]
CASES = [
    CaseRecord(query="eligibility", gold=("pool",), rationale="Eligibility is determined in the Application Pool."),
    CaseRecord(query="developmental screening", gold=("asq",), rationale="ASQ-3 is the developmental screening tool."),
    CaseRecord(query="volunteer hours", gold=("inkind",), rationale="Volunteer hours count as in-kind match."),
    CaseRecord(query="budget change", gold=("budget",), rationale="Budget changes are revisions."),
    CaseRecord(query="what is the weather", gold=(), rationale="Out of scope."),
]
VOCABULARY = sorted({w for t in TASKS for w in (t.name + " " + t.help).split()} | {c.query for c in CASES}
                    | {"screnning", "eligibilty", "i'm", "what's", "DROP TABLE", "<script>", "\x00", "\u202e"})
# Query text: arbitrary Unicode, catalog words (so signals fire), exact test-case queries (so pins
# fire), and mixtures of both.
QUERIES = st.one_of(
    ANY_TEXT,
    st.sampled_from([c.query for c in CASES]),
    st.lists(st.one_of(st.sampled_from(VOCABULARY), ANY_TEXT), min_size=1, max_size=6).map(" ".join),
)
ROLES = st.sampled_from([None, "fiscal", "hr", "nobody", frozenset({"fiscal", "hr"})])


@pytest.fixture(scope="module")
def index():
    return build_index(TASKS, build_lexicon(CASES), FieldWeights(), cases=CASES)


# -- lexicon.text ----------------------------------------------------------------------------
@PROPERTY_SETTINGS
@given(ANY_TEXT)
@example("\ud800abc\udfff")          # unpaired surrogates
@example("a\x00b\x1b[31mc\x7f\u200e\u202e")
@example("İSTANBUL ﬁ ẞ Ǆ ᾈ")       # case folding that expands or needs renormalising
def test_normalise_never_raises_is_idempotent_and_printable(text):
    out = normalise(text)
    assert isinstance(out, str)
    assert normalise(out) == out
    for ch in out:
        assert ch == " " or ch.isprintable(), repr(ch)
        assert unicodedata.category(ch) not in ("Cc", "Cs", "Cf"), repr(ch)


@PROPERTY_SETTINGS
@given(st.text(alphabet=st.characters(max_codepoint=127)))
@example("A\x00b\x1b[31mC\x7fD\tE\n")
def test_the_ascii_shortcut_folds_exactly_as_the_unicode_path(text):
    """lexicon.normalise reads an ASCII text with str.lower and a table for the controls: the
    same result as NFKC, case-folding, NFKD, dropping marks and blanking the unprintable."""
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
                     if not unicodedata.combining(ch))
    assert normalise(text) == "".join(ch if ch.isprintable() else " " for ch in folded)


@PROPERTY_SETTINGS
@given(ANY_TEXT)
@example("I'm looking for what's new")
@example("where's the ASQ:SE-2 in-kind")
def test_words_are_ascii_tokens_without_stopwords(text):
    found = words(text)
    for word in found:
        assert TOKEN.fullmatch(word), repr(word)
        assert word not in STOPWORDS, (text, word)


@PROPERTY_SETTINGS
@given(ANY_TEXT)
def test_terms_are_ascii_tokens_one_per_word(text):
    found = terms(text)
    assert len(found) == len(words(text))
    for term in found:
        assert TOKEN.fullmatch(term), repr(term)


# -- search.prefilter ------------------------------------------------------------------------
@PROPERTY_SETTINGS
@given(query=QUERIES, k=st.integers(min_value=1, max_value=10), role=ROLES)
@example(query="developmental screening", k=1, role=None)
@example(query="budget change", k=3, role="fiscal")
def test_prefilter_invariants(index, query, k, role):
    analysed = analyse_query(index, query)
    for word in analysed.words:
        assert TOKEN.fullmatch(word)
    result = prefilter(index, analysed, Weights(), k, role=role)
    ranked = result.ranked

    assert len(ranked) <= k
    assert len({item.task.id for item in ranked}) == len(ranked)
    for item in ranked:   # only active tasks the role may see
        assert item.task.active and item.task.visible_to(role), (item.task.id, role)
        assert sum(item.contributions.values()) == pytest.approx(item.score, abs=1e-3)
        assert 0.0 <= item.probability <= 1.0

    pins = [item.pinned for item in ranked]
    assert pins == sorted(pins, reverse=True), "pinned tasks come first"
    unpinned = [item.score for item in ranked if not item.pinned]
    for better, worse in zip(unpinned, unpinned[1:]):
        assert better >= worse - 1e-3, unpinned   # scores are rounded to 4 places


@PROPERTY_SETTINGS
@given(query=QUERIES, role=ROLES)
def test_prefilter_returns_every_visible_task_when_k_is_large(index, query, role):
    result = prefilter(index, query, Weights(), k=50, role=role)
    visible = {t.id for t in TASKS if t.active and t.visible_to(role)}
    assert {item.task.id for item in result.ranked} == visible
