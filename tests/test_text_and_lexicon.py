"""The text pipeline and the rationale lexicon (Eq. 1)."""
from catalog.records import CaseRecord
from lexicon.rationale import build_lexicon
from lexicon.normalise import normalise
from lexicon.text import jaccard, terms, words


def test_compounds_match_with_or_without_punctuation():
    assert terms("ASQ-3") == ["asq", "3", "asq3"]
    assert "asq3" in terms("asq3") and "asqse2" in terms("ASQ:SE-2")


def test_normalisation_folds_case_accents_and_width():
    assert words("Évaluation ＤＲＤＰ") == ["evaluation", "drdp"]
    assert normalise("\x00bad\u202econtrol") .split() == ["bad", "control"]


def test_hostile_unicode_never_raises():
    for text in ["\ud800", "🚌🚌", "\u0000" * 5, "ﷺ", "\u202e\u202d", ""]:
        terms(text)


def test_stopwords_dropped_and_stems_shared():
    assert terms("where do I find the immunizations") == terms("immunization")
    assert jaccard(set(terms("lead screening")), set(terms("screenings for lead"))) == 1.0


def test_lexicon_links_rationale_terms_to_gold_tasks_only():
    cases = [CaseRecord(query="ASQ", gold=("health.asq3", "mh.asqse"), rationale="Ages and Stages Questionnaires"),
             CaseRecord(query="book a flight", gold=(), rationale="travel booking is out of scope")]
    lexicon = build_lexicon(cases)
    assert dict(lexicon.tasks_for("stage")) == {"health.asq3": 1, "mh.asqse": 1}
    assert dict(lexicon.tasks_for("asq")) == {"health.asq3": 1, "mh.asqse": 1}
    assert lexicon.tasks_for("travel") == {}  # out-of-scope cases contribute nothing
    assert build_lexicon(cases, include_queries=False).tasks_for("asq") == {}
