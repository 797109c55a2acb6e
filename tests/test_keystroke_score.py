"""evaluation.prefixes.keystroke_score (issue 43's measure): a type-ahead judged as the sequence a
person watches, on hand-made sequences of (answered, gold shown) with known figures."""
from __future__ import annotations

from catalog.records import CaseRecord
from evaluation.prefixes import keystroke_cases, keystroke_score

STEADY = [(True, False), (True, True), (True, True), (True, True)]          # found, never lost
BLINKING = [(True, True), (False, False), (True, True), (True, False)]      # lost twice, one flip
NEVER = [(False, False), (False, False), (True, False)]                    # never shown


def test_the_figures_of_known_sequences():
    score = keystroke_score([STEADY, BLINKING, NEVER])
    assert score["queries"] == 3 and score["keystrokes"] == 11
    assert score["refused"] == round(3 / 11, 4)
    assert score["vanished_per_query"] == round(2 / 3, 3)      # BLINKING: shown -> refused, shown -> gone
    assert score["never_lost"] == 0.5                          # of the two ever shown, STEADY only
    assert score["flips"] == 1 and score["flips_per_query"] == round(1 / 3, 3)
    assert score["found_first"] == round((1 / 4 + 0 / 4 + 3 / 3) / 3, 4)


def test_a_steady_type_ahead_scores_perfectly():
    score = keystroke_score([STEADY, STEADY])
    assert (score["refused"], score["vanished_per_query"], score["never_lost"], score["flips"]) == (0.0, 0.0, 1.0, 0)


def test_each_query_is_typed_from_its_third_character_to_its_end():
    cases = [CaseRecord(query="lead test", gold=("t.lead",)), CaseRecord(query="weather", gold=()),
             CaseRecord(query="ab", gold=("t.ab",))]
    typed = keystroke_cases(cases)
    assert [(n, c.query) for n, c in typed] == [
        (0, "lea"), (0, "lead"), (0, "lead "), (0, "lead t"), (0, "lead te"), (0, "lead tes"), (0, "lead test"),
        (1, "ab")]   # out-of-scope cases have no gold to watch; a query shorter than 3 is typed whole
