"""A keystroke is judged as part of its sequence: what is shown is held while typing extends it.

The widget asks after every keystroke, and a person reads the list as one thing that changes as
they type: it may sharpen, it should not blink. Judged one keystroke at a time, the ranking and
the abstention do blink: typing the demo's held-out queries a character at a time from the third
(evaluate-prefixes --every-keystroke), 17.8% of keystrokes were "no confident match", the right
task, once among the widget's eight results, was gone on the next keystroke 1.05 times per query,
and 21 keystrokes went answered -> refused -> answered. `staff trai` was refused between
`staff tr` and `staff train`, both answered with Training Calendar: the abstention's logit wanders
around its threshold from one prefix to the next, and a task near the bottom of the list wanders
in and out of it (9th, 8th, 9th) as each letter moves the scores a little.

So a request may say what the person sees now (`SearchRequest.held`: the task ids on screen, given
only when the new text extends the text they answer: `extends`). A task on screen stays shown
unless the new characters speak against it:

    held(t)  <=>  t on screen  and  rank(t) <= k + HOLD_SLACK

that is, the task is still within HOLD_SLACK places of the k the new answer lists (the request's
k: the widget's eight). The slack is hysteresis, the textbook cure for a value flickering around
one threshold (a thermostat's dead band): a task enters the list by the ranking's rule (the top k
that clear the tail cut, search.confidence.shown) and leaves it only a margin past it. The tail
cut is that rule's, not the hold's: a task on screen stays while it is near the list, however
far its probability falls behind a new best one. The list stays k long: a held task keeps its place over a newcomer ranked just
above it (`displayed`). A query whose abstention refuses it is still answered while a held task
remains (the evidence still points where it did), and then shows the held tasks alone: nothing
the person has not seen comes in on evidence the abstention found wanting.

What the new characters say (`is_quiet`, `spoken`): most of what blinked on long requests
(CLINC150 val: 83 of the 132 times the gold was shown and gone the next keystroke) happened while
the text held no word that can speak for or against a task ("wha", "what is the", "help m",
"can you tell me"): the ranking of stop words is noise, and each letter reshuffled dozens of
intents. A keystroke that adds no such word (stop words, the start of one, a space, a mark:
`spoken` is the same before and after) takes nothing off the screen, wherever the task now ranks,
and brings in nothing but a confident new best answer. And a refusal while the last word is still
being typed ("are there interna") keeps what is on screen: the half-typed word is the start of
many words, and the abstention's logit wanders with each letter of it; the refusal waits for the
word's end, where the rule above judges it (a space after a word that changes what is spoken).

A word the catalog cannot read (issue 46): while the last word is still being typed and no
catalog word begins with it or is what it misspells (AnalysedQuery.typing_unknown: every word of
a text in another language, whose words are never the catalog's; "resulta" past "result"), the
letters typed since the screen (`same_word`) speak for or against no task's words: only the dense
signals of a half-typed word move, and they pushed tasks on screen far down with every letter
("cuestion" -> "cuestiona", "porcenta" -> "porcentaj": 14 of the 17 times a Spanish query's
gold vanished). For such a keystroke the hold has no slack limit (`displayed(slack=...)`,
search.pipeline.Ranked.displayed): a task on screen stays wherever it now ranks, and leaves only
to make room for one the ranking puts above it; newcomers come in by the ranking's rule as ever.
Chosen on the Spanish tune set (evaluation/data/languages/tune_headstart_seed7_es.jsonl, the
demo's seed-7 split; `--every-keystroke`, full mode) against making such a keystroke quiet
(`is_quiet`'s rule: nothing new but a confident best): quiet kept the gold on screen more (it
vanished 0.122 times per query against this rule's 0.293 and the old 0.463) but kept it out more
too: at the last keystroke of the 41 queries, typed and not submitted, the gold was on screen for
23 (quiet) against 30 (this rule, as before); a person who stops typing would have had to press
Enter to see it. docs/prefix-search.md has the sets reported.

What this is not: a held task never moves up, a task the person never saw is never held, and a
submitted query (the widget's Enter: `typing=False`) is judged on its own, whole, as every
whole-query figure is.

Measured (docs/prefix-search.md, "Every keystroke, judged as a sequence"). Chosen on tune splits,
not the sets reported: the demo's seed-7 holdout (50 queries) and a split inside CLINC150's
training requests (2 per intent, 300 queries; fitted on the rest), each keystroke sent as the
widget sends it (typing=1). Held only above the tail cut, with a slack of 2, the gold vanished
0.26 / 0.77 times per query (demo / CLINC); held whatever the tail cut, with a slack of 2, 3, 4 or
5: 0.20 / 0.46, 0.16 / 0.42, 0.16 / 0.39, 0.14 / 0.38. The list grows with the slack (CLINC: 3.3
results per keystroke with the tail cut, 4.7 to 5.1 without), and a wider slack keeps tasks from
further down over newcomers: 3 is where the demo stops gaining.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Collection, Sequence

from lexicon.language import begins_stop_word, detect
from lexicon.normalise import WORD, normalise
from lexicon.text import words
from search.confidence import shown

#: A task on screen stays held while it is at most this many places below the k listed (hysteresis).
HOLD_SLACK = 3
#: At most this many task ids are read from a request's `shown` (the API's k is at most 50).
MAX_HELD = 50


def folded(text: str) -> str:
    """`text` as typing compares it: normalised (case, accents), spaces folded to one."""
    return " ".join(normalise(text).split())


def extends(text: str, before: str | None) -> bool:
    """Whether `text` extends `before` (the text whose answer is on screen): it begins with it,
    case, accents and spacing aside. Backspacing or retyping does not extend; neither does nothing."""
    if before is None:
        return False
    old = folded(before)
    return bool(old) and folded(text).startswith(old)


def in_a_word(text: str) -> bool:
    """Whether the last word of `text` is still being typed: no space and no mark after it."""
    return text[-1:].isalnum()


def finished_words(text: str) -> int:
    """How many words of `text` are finished: followed by a space or a mark."""
    return len(WORD.findall(normalise(text))) - in_a_word(text)


def same_word(text: str, before: str | None) -> bool:
    """Whether everything typed since `before` (the text on screen) belongs to the word still being
    typed: the last word is unfinished and no word was finished since ("staff trai" after "staff
    tr", "pizza p" after "pizza "; not "pizza party" after "pi", where "pizza" was finished on the
    way: an answer that lagged behind the typing). Only then does a refusal wait for the word's
    end (`displayed`)."""
    return before is not None and in_a_word(text) and finished_words(text) == finished_words(before)


@lru_cache(maxsize=4096)   # a type-ahead repeats its texts: each keystroke's is the next one's `after`
def spoken(text: str, language: str | None = None) -> tuple[str, ...]:
    """The words of `text` that can speak for or against a task: its words, stop words left out
    (lexicon.text.words, in `language`: None, the text's own), and the last one, while no space
    follows it, only once no stop word begins with it ("wha" may yet be "what"; "bal" may not)."""
    text = normalise(text)
    tokens = WORD.findall(text)
    if not tokens or not in_a_word(text) or not text.endswith(tokens[-1]):
        return tuple(words(text, language))        # the last word is finished (a space, a mark after it)
    partial = tokens[-1]
    head = tuple(words(text[:len(text) - len(partial)], language))
    return head if begins_stop_word(partial) else head + (partial,)


def is_quiet(text: str, before: str | None) -> bool:
    """Whether what was typed since `before` (the text on screen) adds no word that can speak:
    stop words, the start of one, spaces or marks ("what is the" after "what", "balance of my "
    after "balance"). Such letters speak neither for nor against a task on screen: it stays
    (`displayed`). Both texts are read in the new text's language."""
    if before is None:
        return False
    language = detect(text)
    return spoken(text, language) == spoken(before, language)


def held(items: Sequence, k: int, on_screen: Collection[str], slack: int = HOLD_SLACK) -> list:
    """The `items` (a ranking, best first: .task.id) that the sequence holds for a list of `k`:
    on screen and within the first k + slack (module docstring)."""
    if not on_screen:
        return []
    return [item for item in items[:k + slack] if item.task.id in on_screen]


def displayed(items: Sequence, k: int, tail_ratio: float, on_screen: Collection[str], confident: bool,
              quiet: bool = False, mid_word: bool = False, slack: int = HOLD_SLACK) -> list:
    """What a list of `k` shows of the ranking `items` (best first; a re-ranked list too), in their
    order.

    Where the typing since the screen adds no word that can speak (`quiet`: `is_quiet`), every task
    on screen stays, wherever it now ranks (`items` must hold them: search.pipeline ranks them),
    and the only newcomer is a confident new best answer, first. Where the abstention refuses
    while the last word is still being typed and no word was finished since the screen (`mid_word`:
    `same_word`), every task on screen stays too: a half-typed word ("interna") is read as the start of many words, and the
    refusal waits for the word's end (a space, a mark), where it is judged as any other keystroke.

    Otherwise, where the abstention answers (`confident`), those of the first k the tail cut shows
    (search.confidence.shown) and those the sequence holds (`held`), the lowest-ranked not held
    left out beyond k; where it refuses, only those the sequence holds: a task the person has not
    seen is not put before them on evidence the abstention found wanting (`attendance repo` would
    list Policy Council Elections first, above the Attendance Report on screen). Beyond k, a
    newcomer within HOLD_SLACK places of the list's end gives way to a held task (the
    lowest-ranked first); one ranked higher does not: the lowest-ranked task goes instead, so a
    new best answer always comes in. `slack`: how far past k a task on screen stays held
    (HOLD_SLACK; without limit while a word the catalog cannot read is typed, module docstring)."""
    if on_screen and (quiet or (mid_word and not confident)):
        stays = [item for item in items if item.task.id in on_screen]
        if stays:
            if quiet and confident and items[0].task.id not in on_screen:
                stays.insert(0, items[0])
            return stays[:k]
    kept = {id(item) for item in held(items, k, on_screen, slack)}
    keep = set(kept)
    if confident:
        keep |= {id(item) for item in shown(items[:k], tail_ratio)}
    out = [item for item in items[:k + slack] if id(item) in keep]
    edge = {id(item) for item in items[max(k - HOLD_SLACK, 0):k]}   # a newcomer "just above" the end
    while len(out) > k:
        out.remove(next((item for item in reversed(out) if id(item) not in kept and id(item) in edge), out[-1]))
    return out
