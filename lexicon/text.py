"""The one text pipeline: every query, task field, rationale and document goes through here.

normalise (lexicon.normalise) -> words (surface forms, stopwords dropped) -> terms (Snowball stems).

Per language (lexicon.language): a text written in another language than the catalog's (detected
from the text itself) drops that language's stop words too and is stemmed by its Snowball
stemmer, so a Spanish case and a Spanish query meet on the same stems ("vacunas"/"vacuna" ->
"vacun"); accents are folded for matching (normalise) and kept for display (the text as typed).

Hyphen/colon/slash compounds such as "ASQ-3", "ASQ:SE-2" or "In-Kind" also yield a joined form
("asq3", "asqse2", "inkind") so that users who type the acronym with or without punctuation
land on the same term.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Iterable

import Stemmer

from lexicon.language import CATALOG_LANGUAGE, STOPWORDS, detect, stemmer, stop_words
from lexicon.normalise import WORD, normalise

_STEMMER = Stemmer.Stemmer("english")

_JOINERS = re.compile(r"[-:/']")


def printable(text: str) -> str:
    """`text` as a user wrote it (case, accents and punctuation kept) with what no reader should
    see replaced by a space: unpaired surrogates, control, format (RTL marks, zero-width) and
    unassigned characters; whitespace runs collapsed and trimmed. For texts handed on whole, such
    as the query an embedding model or an LLM reads."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def normalise_query(text: str) -> str:
    """The query as analytics counts it and learned evidence keys it: `normalise`d, runs of white
    space collapsed to one space, trimmed. "Lead  Screening " and "lead screening" are one query."""
    return " ".join(normalise(text).split())


# Texts up to this long have their words remembered (a bounded LRU memo, like `stem`'s): an
# index is rebuilt from the same task fields, rationales and case queries again and again (each
# edit, each cross-validation fold, each admin preview), and splitting them dominated its cost.
WORDS_MEMO_MAX_CHARS = 1000
QUERY_REQUIRED = "query 'q' is required and must contain text"


def query_problem(query: str | None, max_chars: int) -> str | None:
    """Why `query` cannot be searched, as a message for a 400 (or a CLI error), or None.

    The one check of a query's text for every search endpoint (/api/search, /api/kb/search, the
    CLI): missing, nothing left once normalised (only spaces, control or format characters), or
    longer than `max_chars` characters (characters, not UTF-8 bytes)."""
    if query is None or not normalise(query).strip():
        return QUERY_REQUIRED
    if len(query) > max_chars:
        return f"query is {len(query)} characters long; the limit is {max_chars}"
    return None


def words(text: str, language: str | None = None) -> list[str]:
    """Surface words of `text`, stopwords removed; compounds are split and also joined (a
    compound that is a stopword whole or joined, such as "i'm" or "what's", is dropped).
    `language`: the text's (None: lexicon.language.detect's reading of it); a language other
    than the catalog's drops its own stop words as well."""
    if len(text) <= WORDS_MEMO_MAX_CHARS:
        return list(_remembered_words(text, language))
    return _split_words(text, language)


@lru_cache(maxsize=16384)
def _remembered_words(text: str, language: str | None = None) -> tuple[str, ...]:
    return tuple(_split_words(text, language))


def _split_words(text: str, language: str | None = None) -> list[str]:
    if language is None:
        language = detect(text)
    out = _split_catalog_words(text)
    if language == CATALOG_LANGUAGE:
        return out
    own = stop_words(language)
    return [w for w in out if w not in own]


def _split_catalog_words(text: str) -> list[str]:
    out: list[str] = []
    for match in WORD.finditer(normalise(text)):
        token = match.group(0)
        parts = [p for p in _JOINERS.split(token) if p]
        if token in STOPWORDS or "".join(parts) in STOPWORDS:
            continue   # a contraction that is a stopword as a whole ("i'm", "what's", "it's")
        if len(parts) > 1:
            out.extend(p for p in parts if p not in STOPWORDS)
            out.append("".join(parts))
        elif token not in STOPWORDS:
            out.append(token)
    return out


@lru_cache(maxsize=65536)
def stem(word: str, language: str = CATALOG_LANGUAGE) -> str:
    """Snowball stem in `language` (Porter2 for English); digits and short acronyms pass through
    unchanged."""
    if len(word) <= 3 or word.isdigit():
        return word
    if language == CATALOG_LANGUAGE:
        return _STEMMER.stemWord(word)
    return stemmer(language).stemWord(word)


def terms(text: str, language: str | None = None) -> list[str]:
    """Index/query terms: stemmed surface words, in order, duplicates kept, in the text's
    language (None: detected from the text, lexicon.language.detect)."""
    if language is None:
        language = detect(text)
    return [stem(w, language) for w in words(text, language)]


def jaccard(a: set[str], b: set[str]) -> float:
    """|a & b| / |a | b|: the token-overlap similarity of Eq. 6 (0 when both are empty)."""
    union = a | b
    return len(a & b) / len(union) if union else 0.0


_LABEL_PARTS = re.compile(r"[_\s-]+")


def display_label(identifier: str, texts: Iterable[str]) -> str:
    """A person's label for a lower-case identifier such as a category: "facilities_safety" ->
    "Facilities Safety", and a word the catalog's own `texts` write in capitals mostly (an
    acronym: "ERSEA Selection Criteria") in capitals: "ersea" -> "ERSEA" (a style-sheet
    `text-transform: capitalize` made it "Ersea"), as is a word they never write that has no
    vowel ("hr" -> "HR"). An identifier with any capital letter was
    written that way on purpose and is kept as it is, underscores as spaces."""
    return display_labels([identifier], texts)[identifier]


def display_labels(identifiers: Iterable[str], texts: Iterable[str]) -> dict[str, str]:
    """display_label of each identifier, reading `texts` once for all of them (an index build
    labels every category: one pass instead of one per category, 26 -> 2 ms on the demo)."""
    identifiers = list(identifiers)
    split = {identifier: [p for p in _LABEL_PARTS.split(identifier.strip()) if p] for identifier in identifiers}
    wanted = {p for identifier, parts in split.items() if identifier == identifier.lower()
              for p in parts if p.isalpha() and len(p) >= 2}
    upper, seen = Counter(), Counter()
    if wanted:
        for text in texts:
            for token in _LETTERS.findall(text):
                folded = token.lower()
                if folded in wanted:
                    seen[folded] += 1
                    upper[folded] += token.isupper()
    return {identifier: " ".join(parts) if identifier != identifier.lower() else
            " ".join(p.upper() if _acronym(p, seen[p], upper[p]) else p[:1].upper() + p[1:] for p in parts)
            for identifier, parts in split.items()}


_LETTERS = re.compile(r"[A-Za-z]+")


def _acronym(word: str, seen: int, upper: int) -> bool:
    """Mostly written in capitals where it occurs, or (never written out) a word no English word
    looks like: letters without a vowel ("hr", "cdc")."""
    if seen:
        return upper * 2 > seen
    return word.isalpha() and not set(word) & set("aeiouy")
