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

    held(t)  <=>  t on screen  and  rank(t) <= k + HOLD_SLACK  and  p(t) >= r * max p

that is, the task is still within HOLD_SLACK places of the k the new answer lists (the request's
k: the widget's eight), and it still clears the tail cut's own bar (search.confidence.shown: its
probability, softmax of the fused scores, at least r times the best one's, r the fitted tail
ratio). The slack is hysteresis, the textbook cure for a value flickering around one threshold
(a thermostat's dead band): a task enters the list by the ranking's rule and leaves it only a
margin past it. The list stays k long: a held task keeps its place over a newcomer ranked just
above it (`displayed`). A query whose abstention refuses it is still answered while a held task
remains (the evidence still points where it did), and then shows the held tasks alone: nothing
the person has not seen comes in on evidence the abstention found wanting.

What this is not: a held task never moves up, a task the person never saw is never held, and a
submitted query (the widget's Enter: `typing=False`) is judged on its own, whole, as every
whole-query figure is.

Measured (docs/prefix-search.md, "Every keystroke, judged as a sequence"). Chosen on a tune split
(the demo's seed-7 holdout, not the seed-42 one reported), typing its 50 queries: a slack of 0, 1,
2 or 3 places gave the gold vanishing 0.30, 0.16, 0.16 and 0.16 times per query (2 with the
degraded sparse mode's 0.26, 0.22, 0.20, 0.20); a dead band on the tail cut too (holding a task
down to 0, 1/4, 1/2 or 3/4 of its bar) changed none of the sequence's figures there and only
showed more wrong tasks, so there is none.
"""
from __future__ import annotations

from typing import Collection, Sequence

from lexicon.normalise import normalise
from search.confidence import shown

#: A task on screen stays held while it is at most this many places below the k listed (hysteresis).
HOLD_SLACK = 2
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


def held(items: Sequence, k: int, tail_ratio: float, on_screen: Collection[str], slack: int = HOLD_SLACK) -> list:
    """The `items` (a ranking, best first: .task.id, .probability, .pinned) that the sequence holds
    for a list of `k`: on screen, within the first k + slack, and shown by the tail cut
    (search.confidence.shown, its bar set by the best of them) (module docstring)."""
    if not on_screen:
        return []
    reach = items[:k + slack]
    return [item for item in shown(reach, tail_ratio) if item.task.id in on_screen]


def displayed(items: Sequence, k: int, tail_ratio: float, on_screen: Collection[str], confident: bool) -> list:
    """What a list of `k` shows of the ranking `items` (best first; a re-ranked list too), in their
    order: where the abstention answers (`confident`), those of the first k the tail cut shows
    (search.confidence.shown) and those the sequence holds, the lowest-ranked not held left out
    beyond k; where it refuses, only those the sequence holds: a task the person has not seen is
    not put before them on evidence the abstention found wanting (`attendance repo` would list
    Policy Council Elections first, above the Attendance Report on screen)."""
    kept = {id(item) for item in held(items, k, tail_ratio, on_screen)}
    keep = set(kept)
    if confident:
        keep |= {id(item) for item in shown(items[:k], tail_ratio)}
    out = [item for item in items[:k + HOLD_SLACK] if id(item) in keep]
    while len(out) > k:
        out.remove(next((item for item in reversed(out) if id(item) not in kept), out[-1]))
    return out
