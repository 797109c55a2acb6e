"""The shipped common-word lists (lexicon.frequency, lexicon/data/common-<language>.txt.gz) say
what wordfreq says: a word is listed exactly when zipf_frequency(word, language) >= the bar.
Checked against the installed wordfreq, so a new wordfreq (or a new bar) without `python -m
lexicon.frequency write` fails here."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from wordfreq import get_frequency_dict, zipf_frequency

from lexicon import frequency
from lexicon.language import LANGUAGES
from lexicon.normalise import normalise

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_shipped_list_holds_exactly_wordfreqs_common_words(language):
    """Every word near the bar (raw frequency within 10% of it, where rounding decides) and a
    sample of 3,000 of wordfreq's other words: listed <=> zipf_frequency >= SHIPPED_ZIPF."""
    words = frequency.shipped(language)
    assert words is not None and list(words) == sorted(set(words)) and len(words) > 50_000
    bar = 10 ** (frequency.SHIPPED_ZIPF - 9)
    entries = [w for w in get_frequency_dict(language, "best") if w.isalpha()]
    near = [w for w in entries if 0.9 * bar <= get_frequency_dict(language, "best")[w] <= 1.1 * bar]
    sample = random.Random(7).sample(entries, 3000)
    assert near
    for word in [*near, *sample]:
        assert frequency.listed(words, word) == (zipf_frequency(word, language) >= frequency.SHIPPED_ZIPF), word


def demo_words() -> set[str]:
    """Every token of the demo's task texts, test cases and the hand-translated dev sets, as
    written and accent-folded (what lexicon.frequency.common asks about)."""
    texts = []
    for path in (ROOT / "catalog/data/headstart_catalog.jsonl", ROOT / "catalog/data/headstart_cases.jsonl",
                 *sorted((ROOT / "evaluation/data/languages").glob("*.jsonl"))):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                texts += [str(row.get(key, "")) for key in ("query", "name", "help", "rationale")]
    written = {word.casefold() for text in texts for word in re.findall(r"[\w'-]+", text)}
    return written | {normalise(word) for word in written} | {"can't", "o'clock", "2024", "co-op"}


def test_a_word_is_frequent_exactly_when_wordfreq_says_so():
    """The lists' answer equals wordfreq's on every word of the demo, English and Spanish and
    misspelled ("attendence", "devlopmental", "audición", "intervencion"), and on words the lists leave to
    wordfreq (an apostrophe, digits, a hyphen)."""
    words = sorted(demo_words())
    assert {"attendence", "devlopmental", "audición", "audicion", "intervencion"} <= set(words), "the dev sets moved"
    for language in LANGUAGES:
        for word in words:
            assert frequency.frequent(word, language) == (zipf_frequency(word, language) >= frequency.COMMON_ZIPF), \
                (word, language)


def test_another_bar_asks_wordfreq(monkeypatch):
    """ops/measure_completions.py tries other bars: the shipped lists (made for 2.0) then stay out."""
    monkeypatch.setattr(frequency, "COMMON_ZIPF", 5.5)
    assert frequency.frequent("the", "en") and not frequency.frequent("attendance", "en")
    assert frequency.listed(frequency.shipped("en"), "attendance")
