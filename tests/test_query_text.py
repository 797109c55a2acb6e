"""What reaches the models, and one validation of a query's text for every search endpoint.

Two bugs found while fuzzing (docs/design/abuse-and-faults.md): control and format characters reached the
embedding model's input (analyse_query passed the raw query on whenever no typo was corrected),
and /api/kb/search answered 200 to a query of only control characters where /api/search
answered 400."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from lexicon.text import QUERY_REQUIRED, printable, query_problem
from search.index import build_index
from search.query import analyse_query
from settings import FieldWeights

TASKS = [
    TaskRecord(id="asq", name="ASQ-3 Screening", help="Record Ages and Stages questionnaire results.", category="health"),
    TaskRecord(id="lead", name="Lead Screening", help="Blood lead level screening results.", category="health"),
]
CASES = [CaseRecord(query="developmental screening", gold=("asq",), rationale="ASQ-3 is the screening tool.")]
ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60)
DIRTY = "lead\x00 \x1bscreening\u202e\x7f\u200b\t\n"


@pytest.fixture(scope="module")
def index():
    return build_index(TASKS, build_lexicon(CASES), FieldWeights(), cases=CASES)


def test_the_embedder_never_sees_control_or_format_characters(index):
    assert analyse_query(index, DIRTY).embedding_text == "lead screening"
    # case and punctuation are the user's own: e5 reads sentences
    assert analyse_query(index, "Lead\x00 Screening?").embedding_text == "Lead Screening?"
    # a typo-corrected query goes through the same cleaning
    corrected = analyse_query(index, "screning\x07 \u2066lead").embedding_text
    assert corrected == "screening lead"


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT)
def test_embedding_text_is_printable_for_any_input(text):
    index = build_index(TASKS, build_lexicon(CASES), FieldWeights(), cases=CASES)
    embedded = analyse_query(index, text).embedding_text
    assert embedded.isprintable() and embedded == embedded.strip()
    embedded.encode("utf-8")  # no unpaired surrogate either: an HTTP embedder must be able to send it
    assert printable(embedded) == embedded


@pytest.mark.parametrize("query, problem", [
    (None, QUERY_REQUIRED), ("", QUERY_REQUIRED), ("\x00\x01\x1b\x7f", QUERY_REQUIRED),
    ("\u200e\u202e\u2066", QUERY_REQUIRED), (" \t\r\n", QUERY_REQUIRED),
    ("a" * 11, "query is 11 characters long; the limit is 10"), ("é" * 10, None), ("lead\x00", None),
])
def test_query_problem(query, problem):
    assert query_problem(query, 10) == problem


class RecordingEmbedder:
    """Wraps the app's real back end and keeps every query text it was asked to embed."""

    def __init__(self, inner):
        self.inner, self.model, self.texts = inner, inner.model, []

    def embed(self, texts, kind):
        if kind == "query":
            self.texts.extend(texts)
        return self.inner.embed(texts, kind)


def test_a_search_embeds_the_cleaned_query(demo_app, monkeypatch):
    service = demo_app.extensions["taskfinder"].search
    service.live()  # the index (whose build embeds task names as queries too) is built first
    embedder = service.embedder
    recorder = RecordingEmbedder(embedder.inner)
    monkeypatch.setattr(embedder, "inner", recorder)
    query = "hearing\x00 and \x1bvision\u202e checks \u200bfor toddlers no. 7731"  # not cached by another test
    response = demo_app.test_client().get("/api/search", query_string={"q": query})
    assert response.status_code == 200
    assert recorder.texts == ["hearing and vision checks for toddlers no. 7731"]


@pytest.mark.parametrize("query", ["\x00", "\x01\x1b\x7f", "\u200e\u202e", "   "])
def test_both_search_endpoints_refuse_a_query_without_text_alike(demo_app, tmp_path, query):
    """/api/kb/search needs a corpus to get as far as the query check: one is ingested here."""
    from kb.search import KB

    settings = demo_app.config["SETTINGS"]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"id": "d1", "title": "Lead", "text": "Blood lead screening"}\n', encoding="utf-8")
    kb = KB(settings.with_overrides(data_dir=tmp_path))
    kb.store.ingest("tiny", jsonl=corpus)
    demo_app.extensions["kb"] = kb
    try:
        client = demo_app.test_client()
        search = client.get("/api/search", query_string={"q": query})
        kb_search = client.get("/api/kb/search", query_string={"corpus": "tiny", "q": query})
        assert (search.status_code, kb_search.status_code) == (400, 400)
        assert search.get_json() == kb_search.get_json() == {"error": QUERY_REQUIRED}
        ok = client.get("/api/kb/search", query_string={"corpus": "tiny", "q": "lead\x00"})
        assert ok.status_code == 200 and ok.get_json()["results"]
    finally:
        demo_app.extensions.pop("kb")
