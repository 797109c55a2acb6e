"""The first step of every text: Unicode folding (`normalise`) and what a word is (`WORD`).

Below both the text pipeline (lexicon.text: words, terms) and language detection
(lexicon.language), which each fold a text before reading its words: so neither imports the
other to do it.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

#: A word of a normalised text: letters and digits, joined by - : / ' into one compound
#: ("asq-3", "asq:se-2", "driver's"); lexicon.text splits and joins compounds.
WORD = re.compile(r"[0-9a-z]+(?:[-:/'][0-9a-z]+)*")

#: Texts up to this long are normalised once per process and remembered (an index rebuild
#: normalises every task and case again; type-ahead repeats prefixes): at most
#: NORMALISE_MEMO entries of at most a kilobyte each.
NORMALISE_MEMO, NORMALISE_MEMO_CHARS = 16384, 1024


def normalise(text: str) -> str:
    """Unicode-normalise any input: NFKC, case-fold, strip accents, drop control characters.

    Never raises: unpaired surrogates and control characters are replaced, so arbitrary user
    input (emoji, RTL marks, NUL bytes) yields a clean, possibly empty, string.
    """
    return _normalise_memo(text) if len(text) <= NORMALISE_MEMO_CHARS else _normalise(text)


#: ASCII's control characters, each read as a space (what `_normalise` makes of them).
_ASCII_CONTROLS = {**{code: " " for code in range(32)}, 127: " "}


def _normalise(text: str) -> str:
    if text.isascii():
        # The same result for an ASCII text, ten times faster (an index build folds every task,
        # case and alias; most catalogs are ASCII): NFKC and NFKD leave ASCII as it is, it has no
        # combining marks, its case-folding is lower(), and its only unprintable characters are
        # the controls (tests/test_properties.py holds both paths equal on every ASCII text).
        lowered = text.lower()
        return lowered if lowered.isprintable() else lowered.translate(_ASCII_CONTROLS)
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return "".join(ch if ch.isprintable() else " " for ch in stripped)


_normalise_memo = lru_cache(maxsize=NORMALISE_MEMO)(_normalise)
