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
"""
from __future__ import annotations

from functools import lru_cache

from lexicon.language import CATALOG_LANGUAGE, LANGUAGES
from lexicon.normalise import normalise

#: Zipf frequency (log10 per billion words) at or above which a word is common (table above).
COMMON_ZIPF = 2.0


@lru_cache(maxsize=65536)
def common(word: str) -> bool:
    """Whether `word` (one token, any case) is a common word of some supported language: the
    catalog's first, the others only when it is not (each language's list loads on first use)."""
    from wordfreq import zipf_frequency   # 0.4 s to import: only where a misspelling is judged

    folded = word.casefold()
    plain = normalise(folded)
    for language in (CATALOG_LANGUAGE, *(lang for lang in LANGUAGES if lang != CATALOG_LANGUAGE)):
        if zipf_frequency(folded, language) >= COMMON_ZIPF or \
                (plain != folded and zipf_frequency(plain, language) >= COMMON_ZIPF):
            return True
    return False


def warm() -> None:
    """Load wordfreq and every supported language's list now (about 0.7 s on the 2-core
    machine, once per process), so that the first completions built on a request do not wait
    for them: api.completions.LiveCompletions calls it in a background thread when an app
    starts. The demo's completions then build in 0.05 s on the first search, not 0.9 s."""
    from wordfreq import zipf_frequency

    for language in LANGUAGES:
        zipf_frequency("the", language)
