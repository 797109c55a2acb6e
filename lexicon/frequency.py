"""Whether a word is a common word of a language: what tells a misspelling from a word.

A word is *common* when its frequency in some supported language (lexicon.language.LANGUAGES) is
at least COMMON_ZIPF on the Zipf scale, log10 of its occurrences per billion words, as wordfreq
reads it (Speer, "wordfreq", 2022: Wikipedia, subtitles, news, books, web text and social media,
merged per language; https://github.com/rspeer/wordfreq). It is looked up as written (accents
kept, case folded) and accent-folded, so "contraseña" and "inscripcion" are both Spanish words.

Why a frequency list rather than a spelling dictionary: pyspellchecker's Spanish list has no
plurals ("familias", "vacunas", "informes" are all unknown to it), and the catalog's stemmer
cannot tell a typo from an inflection ("attendence" and "attendance" share the Porter2 stem
"attend"). A frequency list holds inflections and also the commonest misspellings ("recieve" is
2.75), so the bar sits where it separates the demo's own typo test cases from the rest:

    COMMON_ZIPF | typo cases with an uncommon word | other cases with one
    1.5         | 25 / 31                          | 1 / 227 ("disenroll")
    2.0         | 29 / 31                          | 1 / 227 ("disenroll")
    2.5         | 30 / 31                          | 5 / 227 ("onboarding", "checkups", "TSG", ...)

(`python ops/measure_completions.py --spelling`; a word of the catalog's own texts is never
uncommon, so "ASQ", "DRDP" and "hematocrit" are words.) The two typo cases it misses are made
of real words of another language or species ("vison", "profesional"); 1.5 lets "attendence",
"backround" and "kindergarden" through.

wordfreq's data is frozen (its author stopped updating it in 2024, because text on the web after
2021 is polluted by generated text); a list of word frequencies is what this needs, and a frozen
one is fine for telling typos from words.

**The common words ship with the code** (lexicon/data/common-<language>.txt.gz, written by
`python -m lexicon.frequency write`): wordfreq's import and its four lists cost ~1.2 s on the
AMD EPYC VM (0.25-0.31 s to import, 0.15-0.30 s a list), paid by every `app.py search` whose
query holds a misspelled word (issue 44 item 9); the four shipped lists load in ~0.1 s and a
word is then a bisection. Each list holds exactly the words w of wordfreq's list for which
`zipf_frequency(w, language) >= COMMON_ZIPF`; a word that is not plain letters (digits, an
apostrophe: wordfreq's tokenizer would read it otherwise) or a bar other than the shipped one
(ops/measure_completions.py tries several) asks wordfreq itself. `tests/test_frequency.py`
rebuilds every list from the installed wordfreq and requires the shipped one to equal it, so a
new wordfreq without `write` fails the suite.
"""
from __future__ import annotations

import bisect
import gzip
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

from lexicon.language import CATALOG_LANGUAGE, LANGUAGES
from lexicon.normalise import normalise

#: Zipf frequency (log10 per billion words) at or above which a word is common (table above).
COMMON_ZIPF = 2.0
#: The bar the shipped lists were written for.
SHIPPED_ZIPF = 2.0
DATA = Path(__file__).parent / "data"


def shipped_path(language: str) -> Path:
    return DATA / f"common-{language}.txt.gz"


@lru_cache(maxsize=None)
def shipped(language: str) -> tuple[str, ...] | None:
    """The shipped common words of `language`, sorted (None: none shipped)."""
    path = shipped_path(language)
    if not path.exists():
        return None
    return tuple(gzip.decompress(path.read_bytes()).decode("utf-8").split("\n"))


def listed(words: tuple[str, ...], word: str) -> bool:
    """Whether `word` is in the sorted `words` (a bisection)."""
    at = bisect.bisect_left(words, word)
    return at < len(words) and words[at] == word


def _plain(word: str) -> bool:
    """A word wordfreq's tokenizer reads as itself: letters only, already in NFC."""
    return word.isalpha() and unicodedata.is_normalized("NFC", word)


def frequent(word: str, language: str) -> bool:
    """zipf_frequency(word, language) >= COMMON_ZIPF, from the shipped list where it answers."""
    words = shipped(language) if COMMON_ZIPF == SHIPPED_ZIPF and _plain(word) else None
    if words is not None:
        return listed(words, word)
    from wordfreq import zipf_frequency   # 0.3 s to import: only where the shipped lists cannot answer

    return zipf_frequency(word, language) >= COMMON_ZIPF


@lru_cache(maxsize=65536)
def common(word: str) -> bool:
    """Whether `word` (one token, any case) is a common word of some supported language: the
    catalog's first, the others only when it is not (each language's list loads on first use)."""
    folded = word.casefold()
    plain = normalise(folded)
    for language in (CATALOG_LANGUAGE, *(lang for lang in LANGUAGES if lang != CATALOG_LANGUAGE)):
        if frequent(folded, language) or (plain != folded and frequent(plain, language)):
            return True
    return False


def warm() -> None:
    """Load every supported language's list now (the shipped lists: ~0.1 s on the 2-core
    machine, once per process), so that the first completions built on a request do not wait
    for them: api.completions.LiveCompletions calls it in a background thread when an app
    starts."""
    for language in LANGUAGES:
        frequent("the", language)


def wordfreq_common(language: str, bar: float = SHIPPED_ZIPF) -> list[str]:
    """The words of wordfreq's list for `language` with zipf_frequency >= `bar`, sorted: what
    `write` ships. The list's raw frequency picks the candidates (a word within 2% of the bar's
    frequency; zipf_frequency rounds to 3 significant digits, then to 2 decimals of the Zipf
    value), and zipf_frequency itself decides each."""
    from wordfreq import get_frequency_dict, zipf_frequency

    floor = 10 ** (bar - 9) * 0.98
    return sorted(w for w, f in get_frequency_dict(language, "best").items()
                  if f >= floor and _plain(w) and zipf_frequency(w, language) >= bar)


def write() -> None:
    """Write every supported language's shipped list from the installed wordfreq."""
    DATA.mkdir(exist_ok=True)
    for language in LANGUAGES:
        words = wordfreq_common(language)
        shipped_path(language).write_bytes(gzip.compress("\n".join(words).encode("utf-8"), mtime=0))
        print(f"{language}: {len(words)} words -> {shipped_path(language)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["write"]:
        sys.exit("usage: python -m lexicon.frequency write")
    write()
