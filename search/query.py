"""What a query means to an index, read once for every signal: its language, its words, their
typo corrections, the last word's completions and whether it is still being typed
(`AnalysedQuery`, `analyse_query`), and how each word meets the index's columns (`QueryPlan`,
`plan_query`), with the share of its words the catalog knows (`query_coverage`).

This module sits below the signals (search/signal/): their shared context
(search.signal.base.QueryContext) plans the query here, and the prefilter (search.prefilter)
only fuses and ranks what the signals make of it. Nothing here scores a task.

The typo corrections live here, not in the typo signal's module (search/signal/typo.py), because
the whole query reads them: the typo signal through the plan's `typo_columns`, the embedder
through `embedding_text` (near-certain typos only: EMBED_CORRECTION_MIN) and the "why" line
through `corrections` (search.prefilter.explain_rows). The one setting they read,
TYPO_MIN_SIMILARITY (settings.typo_min_similarity), is given once, here, and kept with the
analysed query (`AnalysedQuery.typo_min_similarity`) for whatever reads the query again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from lexicon.language import CATALOG_LANGUAGE, LANGUAGES, detect, foreign
from lexicon.normalise import WORD, normalise
from lexicon.text import printable, stem, words
from search.index import SearchIndex, says_what_it_begins
from search.signals import fuzzy_corrections, unique
from search.typed import TYPED_WHOLE, unfinished as typing_unfinished


@dataclass(frozen=True)
class AnalysedQuery:
    """A query as every signal reads it (analyse_query): its text, words, their corrections,
    the text the embedder sees, the last word's completions and its typing reading."""

    text: str
    words: list[str]
    corrections: dict[str, list[tuple[str, float]]]
    embedding_text: str   # the query as the embedder should see it
    prefix: dict[int, float] = field(default_factory=dict)   # the last word's completions (type-ahead)
    # read as still being typed: its typing class (search.typed.unfinished: 1-3 by length), else 0;
    # the typing weights rank it and its class's threshold judges it
    unfinished: int = 0
    finished: bool = False     # a space was typed after the last word: it is a whole word, not a prefix
    # the language its words are written in (lexicon.language.detect, knowing the catalog's words):
    # another than the catalog's: no typo correction, no prefix expansion, and the fusion's
    # foreign weights (search.ranker.RankerParams.weights_for)
    language: str = CATALOG_LANGUAGE
    # the typo tolerance its words were corrected with (TYPO_MIN_SIMILARITY): what reads the same
    # query against another index reads it with the same tolerance (search.prefilter.written_values)
    typo_min_similarity: float = 80.0
    # read as whole (unfinished 0) but said by the caller to be still typed (search.typed.TYPED_WHOLE)
    still_typed: bool = False
    # its last word is still being typed and reads as no catalog word (reads_no_catalog_word):
    # its letters speak for or against no task's words (search.sequence)
    typing_unknown: bool = False

    @property
    def foreign(self) -> bool:
        return foreign(self.language)

    @property
    def judged_as(self) -> int:
        """The class whose abstention threshold judges it (search.confidence.AbstentionModel.
        threshold_for): its typing class, TYPED_WHOLE for a whole-reading text still being typed,
        0 for a whole query."""
        return self.unfinished or (TYPED_WHOLE if self.still_typed else 0)


# A word unknown to the catalog and the lexicon is replaced by its correction in the text the
# embedder sees only when the correction is this close (normalised Indel similarity): true typos
# ("devlopmental", "screning", "imunizations") are >= 0.93, while real words that merely look like
# a vocabulary word ("puppies" -> "supplies", "harry potter" -> "carry otters") are ~0.8.
EMBED_CORRECTION_MIN = 0.9


def analyse_query(index: SearchIndex, query: str, typo_min_similarity: float = 80.0,
                  prefix_search: bool = True, finished: bool | None = None,
                  typing: bool | None = None, page_language: str | None = None) -> AnalysedQuery:
    """Normalise, split and typo-correct a query once, for every signal.

    The embedder gets the user's own text (stopwords, order and all: e5 reads sentences), with
    only near-certain typos of out-of-vocabulary words replaced in place (EMBED_CORRECTION_MIN).
    Rewriting every out-of-vocabulary word, as before, turned 227 of 2,997 CLINC150 val queries
    into nonsense ("give me harry potter trivia" -> "give carry otters trivia") and cost the
    centroid signal 1.4 points of Hit@1.

    `finished`: a space was typed after the last word (default: `query` ends in white space), so
    it is read as a whole word, not as the start of one: no prefix expansion, no prefix
    correction, and the typed signal matches it exactly, as a prefix search engine does. The
    widget keeps that one trailing space; the API strips the query but passes this on.

    `typing`: whether the query is still being typed, where the caller knows (the widget says
    `typing=0` when the person submits, pressing Enter); None: the prefilter's reading
    (search.typed.unfinished). A submitted query is always a whole one; a typed one the prefilter
    reads as whole (a long text: "what is the balance of my chec") is ranked as one and judged
    by the threshold of such prefixes (`still_typed`: search.typed.TYPED_WHOLE).

    `page_language`: the language of the page it was typed on, where the asker says (the widget
    sends the host page's `lang`): the query's language where its text shows none (query_language).
    """
    if finished is None:
        finished = query[-1:].isspace()
    query = query.rstrip()   # the trailing space said all it says: the same text as the API's stripped one
    language = query_language(index, query, finished, typing, page_language)
    query_words = unique(words(query, language))
    if foreign(language):
        # its words are not the catalog's: none is a typo of one (nor the start of one), and the
        # embedder reads it as typed
        typing_class = typing_class_read(index, query, prefix_search, typing)
        return AnalysedQuery(query, query_words, {}, printable(query), {}, typing_class, finished, language,
                             typo_min_similarity, still_typed=bool(typing) and not typing_class,
                             typing_unknown=reads_no_catalog_word(index, query, query_words, finished, foreign=True))
    corrections = typo_corrections(index, query_words, typo_min_similarity, finished)
    replace_with = {w: found[0][0] for w, found in corrections.items()
                    if stem(w) not in index.vocabulary and found[0][1] >= EMBED_CORRECTION_MIN}
    embedding_text = printable(query)  # never control or format characters (lexicon.text.printable)
    if replace_with:
        embedding_text = WORD.sub(lambda m: replace_with.get(m.group(0), m.group(0)),
                                           " ".join(normalise(query).split()))
    prefix = index.prefix_expansion(query_words[-1]) if query_words and prefix_search and not finished else {}
    typing_class = typing_class_read(index, query, prefix_search, typing)
    return AnalysedQuery(query, query_words, corrections, embedding_text, prefix, typing_class, finished,
                         CATALOG_LANGUAGE, typo_min_similarity, still_typed=bool(typing) and not typing_class,
                         typing_unknown=reads_no_catalog_word(index, query, query_words, finished, corrections, prefix))


def reads_no_catalog_word(index: SearchIndex, query: str, query_words: list[str], finished: bool,
                          corrections: dict | None = None, prefix: dict | None = None, foreign: bool = False) -> bool:
    """Whether the last word of `query` is still being typed (not `finished`) and reads as no
    catalog word: long enough to say something (search.index.says_what_it_begins), and either the
    text is in another language (`foreign`: its words are never the catalog's) or the catalog has
    no term it is, none it begins (`prefix`, the index's prefix expansion) and none it misspells
    (`corrections`): "resulta" past "result", "xylo". A stop word being typed is not one (it is
    not among `query_words`: the stop-word rule judges it, search.sequence.is_quiet)."""
    tokens = WORD.findall(normalise(query))
    if finished or not tokens or not query_words or tokens[-1] != query_words[-1]:
        return False
    last = tokens[-1]
    if not says_what_it_begins(last):
        return False
    return foreign or not (prefix or last in (corrections or {}) or stem(last) in index.vocabulary)


def typing_class_read(index: SearchIndex, query: str, prefix_search: bool, typing: bool | None) -> int:
    """The typing class of `query` (search.typed.unfinished), 0 where it reads as a whole query,
    prefix search is off, or the caller says it is submitted (`typing` False)."""
    if not prefix_search or typing is False or index.typed is None:   # (a submitted query never reads the typed index)
        return 0
    return typing_unfinished(index.typed, query)


def query_language(index: SearchIndex, query: str, finished: bool = True, typing: bool | None = None,
                   page_language: str | None = None) -> str:
    """The language of `query` (lexicon.language.detect), each word whose term weighs in the
    catalog's own text counting for the catalog's language ("informe PIR" keeps its acronym's
    vote, "plan de cuidado" is Spanish all the same), and each word the catalog's cases in
    another language use counting for that language ("vacunas", once a Spanish case says it), as
    does each word only the tasks' texts in that language hold ("audición" of a Spanish alias:
    SearchIndex.foreign_text_terms; it weighs in the task's text, but not as the catalog's word).
    A last word still being typed (not `finished`) that begins a word of the catalog counts for
    the catalog's language too ("de" is Spanish's "of", and the start of "dental"). While the
    text is being typed (`typing` not False: a submitted query is read whole), the last word
    decides only where the words before it say nothing (lexicon.language.detect, `unfinished`):
    read as the start of a catalog word, "te" turned "referido a intervencion te" back to
    English between two Spanish keystrokes, and the ranking with it (docs/results.md, type-ahead
    in other languages). `page_language`: the language where no word says any
    (lexicon.language.detect's `hint`): a Spanish page's "conteo" is Spanish, an English page's
    the catalog's as before."""
    foreign_terms, text_terms = index.lexicon.foreign_terms, index.foreign_text_terms
    tokens = WORD.findall(normalise(query))
    last = tokens[-1] if tokens and not finished else None

    def known(word: str) -> bool:
        term = stem(word)
        return (in_catalog_text(index, index.vocabulary.get(term)) and term not in text_terms) or \
            (word == last and bool(index.prefix_expansion(word)))

    def written(word: str) -> str | None:
        if not (foreign_terms or text_terms):
            return None
        return next((lang for lang in LANGUAGES[1:]
                     if lang in (foreign_terms.get(term := stem(word, lang)), text_terms.get(term))), None)

    return detect(query, known, written, unfinished=not finished and typing is not False, hint=page_language)


def in_catalog_text(index: SearchIndex, column: int | None) -> bool:
    """Whether the term at `column` weighs in some task's own text (not only in the rationale
    lexicon or the cases): such a word is the catalog's, never a typo."""
    return column is not None and index.lexical_ideal.per_term[column] > 0


def typo_corrections(index: SearchIndex, query_words: list[str], min_similarity: float,
                     finished: bool = False) -> dict[str, list[tuple[str, float]]]:
    """Query words that no task's text contains -> nearby vocabulary words (rapidfuzz); the last
    word also by prefix, unless a space typed after it finished it (`finished`). A word known
    only to the rationale lexicon is still corrected: test-case queries deliberately contain
    misspellings, and those must not shield a word from correction.
    Each (word, is-last) answer is memoised on the index (type-ahead repeats words keystroke
    after keystroke); the memo is bounded and dies with the index."""
    corrections = {}
    for position, word in enumerate(query_words):
        if in_catalog_text(index, index.vocabulary.get(stem(word))):
            continue
        last = position == len(query_words) - 1 and not finished
        found = index.memo_corrections(word, last, min_similarity, lambda: [
            (candidate, similarity)
            for candidate, similarity in fuzzy_corrections(word, index.surface_words, min_similarity, allow_prefix=last)
            if candidate != word])
        if found:
            corrections[word] = found
    return corrections


@dataclass(frozen=True)
class QueryPlan:
    """How each query word meets the index: an exact term column, a typo correction, or nothing."""

    columns: list[int]                          # exact-term columns (lexical and rationale signals)
    typo_columns: dict[int, float]              # corrected-term column -> similarity (typo signal)
    lexical_ideal: float                        # coverage denominators (see coverage_normalise)
    rationale_ideal: float
    exemplar_ideal: float
    prefix_columns: dict[int, float] = field(default_factory=dict)  # the last word's completions -> weight
    # the query is in another language than the catalog's (lexicon.language): the signals that need
    # the catalog's own words (lexical, typo) say "no evidence" (0 for every task)
    foreign: bool = False


def _weighted_ideal(ideal, columns: dict[int, float]) -> float:
    return sum(weight * ideal.of_term(column) for column, weight in columns.items())


def plan_query(index: SearchIndex, query_words: list[str], corrections,
               prefix_columns: dict[int, float] | None = None, language: str = CATALOG_LANGUAGE) -> QueryPlan:
    """`prefix_columns`: the last word's completions (SearchIndex.prefix_expansion): that word
    then meets the exact-term signals through them, weighted, and its ideal is theirs.
    `language`: the query's; its words are stemmed in it (lexicon.text.stem)."""
    columns: list[int] = []
    typo_columns: dict[int, float] = {}
    lexical_ideal = rationale_ideal = exemplar_ideal = 0.0
    for position, word in enumerate(query_words):
        column = index.vocabulary.get(stem(word, language))
        if column is not None:
            columns.append(column)
        corrected = None
        if word in corrections:
            best, similarity = corrections[word][0]
            corrected = index.vocabulary.get(index.surface_to_term.get(best, ""))
            if corrected is not None:
                typo_columns[corrected] = max(typo_columns.get(corrected, 0.0), similarity)
        if prefix_columns and position == len(query_words) - 1:   # (a prefix is never a term itself)
            lexical_ideal += _weighted_ideal(index.lexical_ideal, prefix_columns)
            rationale_ideal += _weighted_ideal(index.rationale_ideal, prefix_columns)
            exemplar_ideal += _weighted_ideal(index.exemplar_ideal, prefix_columns)
            continue
        # A word's ideal is that of its own term where the signal knows it, else its correction's.
        lexical_ideal += index.lexical_ideal.of_term(column if in_catalog_text(index, column) else corrected)
        known_to_lexicon = column is not None and index.rationale_ideal.per_term[column] > 0
        rationale_ideal += index.rationale_ideal.of_term(column if known_to_lexicon else corrected)
        known_to_cases = column is not None and index.exemplar_ideal.per_term[column] > 0
        exemplar_ideal += index.exemplar_ideal.of_term(column if known_to_cases else None)
    return QueryPlan(unique(columns), typo_columns, lexical_ideal, rationale_ideal, exemplar_ideal,
                     dict(prefix_columns or {}), foreign(language))


def query_coverage(index: SearchIndex, analysed: AnalysedQuery) -> float:
    """Lexical coverage of the query: the share of its (non-stopword) words whose term the
    catalog knows at all (task text, rationale lexicon or a test-case query),

        coverage(q) = |{w in q : stem(w) in V}| / |q|     (0 for a query without words)

    A one-class evidence of being in scope: an off-topic query is mostly made of words that no
    task and no case of this catalog has ever used. Typo corrections do not count (a real word
    one edit away from a catalog word is a common false friend)."""
    if not analysed.words:
        return 0.0
    return sum(stem(w, analysed.language) in index.vocabulary for w in analysed.words) / len(analysed.words)
