"""Simulated search-box sessions whose searches are known: how right is analytics' cut of
keystrokes into searches? (issue 44 item 3; docs/admin.md, "Search analytics")

    python ops/simulate_sessions.py --sessions 2000 --seed 44          # the figure in the docs
    python ops/simulate_sessions.py --sessions 2000 --seed 7 --sweep   # the fit of the two gaps

Each simulated person types into the widget (widget/static/widget.js) key by key, and the log is
what the server would record of it: the widget sends the instant request 120 ms after the last
keystroke (debounceMs), the re-ranked one after a 700 ms pause (settleMs) when the server can
re-rank (half of the sessions), a request on Enter, a `click` event when a result is opened, a
`return` event and the restored query searched again when the person comes Back (the widget's
restore()), and a chip's search when a suggestion is chosen; an empty box sends nothing. The
server stamps each request 20-120 ms after it is sent.

The people (seeded; every number below is an input, not a result):

* typing: a per-person pace of 80-250 ms a key (each key log-normal around it), 0-400 ms more
  between words, a composing pause of 0.5-2.5 s before 15% of the words; a typo on 3% of the
  keys (a neighbouring letter), noticed 0-2 keys later after 150-500 ms, fixed with Backspace
  at 80-150 ms a key;
* slow typists (the "slow" pattern): a pause inside a word before 12% of the keys, 0.8-8 s,
  one in ten of them 10-20 s;
* reading the results before the next move: log-normal, median 3 s, at least 1 s;
* clearing the box: select-all + Delete (250-600 ms), or Backspace held (500 ms, then 33 ms a
  character);

and the patterns, with the searches each one truly made (the truth):

    type-and-click      type Q, read, open a result                                 [Q]
    enter               type Q, press Enter, read, open a result or leave            [Q]
    clear-and-retype    type Q1, read, clear the box, type Q2 (often the same first
                        letters: "atendance" -> "attendance report"), read, act      [Q1, Q2]
    rephrase-then-click type Q1, read, cut back to a word and type other words (or
                        type on: "lead" -> "lead screening"), read, open a result    [Q1, Q2]
    abandon             type Q (at times half a word: "medica"), read, leave          [Q]
    back-and-forth      type Q; no result: choose a chip, its search opens a task,
                        Back re-runs Q; else open a result, Back re-runs Q, open
                        another or leave                                            [Q, chip] / [Q]
    slow                type Q with pauses inside words, then open a result or leave  [Q]

A session is one to three needs (70/25/5%). The truth counts a query once per session (a Back
re-run, or the same query typed again, is the same search: analytics.formulas' definition).

Measured: the share of sessions whose searches (queries, in order) are exactly the true ones,
and search-level precision and recall. `--sweep` prints the share of sessions right over a
grid of SETTLE_GAP_S and EXTEND_SETTLE_S (analytics.formulas), the values they were fitted on.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics import formulas  # noqa: E402
from analytics.records import EventRecord, SearchRecord  # noqa: E402
from lexicon.text import normalise_query  # noqa: E402

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)
DEBOUNCE_S, SETTLE_S = 0.120, 0.700
TASKS = [f"task.{n:02d}" for n in range(40)]

QUERIES = [
    "attendance report", "daily attendance", "staff training hours", "family income eligibility",
    "criminal background check", "medicaid enrollment", "immunization records", "lead screening",
    "cacfp meal count", "incident report", "staff child ratio", "enrollment form", "tuition payment",
    "subsidy application", "hearing screening", "vision screening", "waitlist", "field trip permission",
    "allergy action plan", "parent contact", "fire drill log", "medication log", "sign in sheet",
    "teacher certification", "classroom observation", "developmental screening", "menu planning",
    "emergency contacts", "child profile", "license renewal",
]
#: (first try, what the person settled on after it): rephrasings sharing the first letters, others not
REPHRASINGS = [
    ("atendance", "attendance report"), ("staff rec", "staff training hours"), ("family income", "income eligibility"),
    ("crim check", "criminal background check"), ("medicaid", "medicaid enrollment form"), ("shots", "immunization records"),
    ("lead test", "lead screening"), ("meal count", "cacfp meal count"), ("accident", "incident report"),
    ("ratio", "staff child ratio"), ("enrol", "enrollment form"), ("pay tuition", "tuition payment"),
    ("subsidy", "subsidy application form"), ("hearing test", "hearing screening"), ("eye exam", "vision screening"),
    ("wait list", "waitlist"), ("trip form", "field trip permission"), ("allergy", "allergy action plan"),
    ("daily attendance", "daily attendance report"), ("med log", "medication log"),
]
CHIPS = ["Staff Training Log", "Attendance Report", "Income Eligibility", "Background Check", "Immunization Records"]
KEYBOARD = "qwertyuiop asdfghjkl zxcvbnm"


def neighbour(ch: str, rng: random.Random) -> str:
    rows = KEYBOARD.split()
    for row in rows:
        if ch in row:
            i = row.index(ch)
            choices = [row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)]
            return rng.choice(choices)
    return rng.choice("aeiou")


@dataclass
class Person:
    rng: random.Random
    pace: float                 # seconds a key
    slow: bool = False

    def key(self) -> float:
        return min(0.6, max(0.05, self.pace * math.exp(self.rng.gauss(0, 0.3))))

    def read(self) -> float:
        return max(1.0, 3.0 * math.exp(self.rng.gauss(0, 0.5)))


@dataclass
class Session:
    """What the widget did (box texts over time, Enter, clicks, Back) and the true searches."""

    id: str
    pattern: str
    rerank: bool
    t: float = 0.0
    text: str = ""
    keys: list = field(default_factory=list)        # (time, text after the key)
    submits: list = field(default_factory=list)     # (time, text): Enter, a chip, a Back re-run
    clicks: list = field(default_factory=list)      # (time, position)
    backs: list = field(default_factory=list)       # (time of the return, text searched again)
    truth: list = field(default_factory=list)

    def press(self, text: str, after: float) -> None:
        self.t += after
        self.text = text
        self.keys.append((self.t, text))

    def settle_on(self, query: str) -> None:
        q = normalise_query(query)
        if q and q not in self.truth:
            self.truth.append(q)


def type_on(s: Session, p: Person, target: str) -> None:
    """Type from the box's text to `target` (the box holds a prefix of it), key by key."""
    rng = p.rng
    i = len(s.text)
    while i < len(target):
        ch = target[i]
        gap = p.key()
        if ch == " " or (i and target[i - 1] == " "):
            gap += rng.uniform(0, 0.4)
            if ch != " " and rng.random() < 0.15:
                gap += rng.uniform(0.5, 2.5)       # composing: which word next
        elif p.slow and i and rng.random() < 0.12:
            gap += rng.uniform(10, 20) if rng.random() < 0.1 else rng.uniform(0.8, 8)   # mid-word hesitation
        if ch.isalpha() and rng.random() < 0.03:   # a typo, noticed a little later and fixed
            s.press(s.text + neighbour(ch, rng), gap)
            extra = min(rng.randint(0, 2), len(target) - i - 1)
            for j in range(extra):
                s.press(s.text + target[i + 1 + j], p.key())
            s.t += rng.uniform(0.15, 0.5)
            for _ in range(extra + 1):
                s.press(s.text[:-1], rng.uniform(0.08, 0.15))
            gap = p.key()
        s.press(s.text + ch, gap)
        i += 1


def clear(s: Session, p: Person) -> None:
    if not s.text:
        return
    if p.rng.random() < 0.5:
        s.press("", p.rng.uniform(0.25, 0.6))                 # select all, Delete
    else:
        s.t += 0.5
        while s.text:
            s.press(s.text[:-1], 0.033)                       # Backspace held


def cut_back_to(s: Session, p: Person, prefix: str) -> None:
    while len(s.text) > len(prefix):
        s.press(s.text[:-1], p.rng.uniform(0.08, 0.15))


def start_typing(s: Session, p: Person, target: str) -> None:
    """Get the box to hold a prefix of `target` (clearing what is not one), then type it."""
    if not target.startswith(s.text):
        clear(s, p)
    type_on(s, p, target)


def click(s: Session, p: Person, position: int | None = None) -> None:
    s.t += p.read()
    s.clicks.append((s.t, position or p.rng.choice([1, 1, 1, 2, 2, 3])))


def come_back(s: Session, p: Person) -> None:
    s.t += p.rng.uniform(5, 120)
    s.backs.append((s.t, s.text))


def need(s: Session, p: Person, pattern: str, no_result: set[str]) -> None:
    rng = p.rng
    if pattern == "type-and-click":
        q = rng.choice(QUERIES)
        start_typing(s, p, q)
        s.settle_on(q)
        click(s, p)
    elif pattern == "enter":
        q = rng.choice(QUERIES)
        start_typing(s, p, q)
        s.t += rng.uniform(0.1, 0.6)
        s.submits.append((s.t, s.text))
        s.settle_on(q)
        if rng.random() < 0.7:
            click(s, p)
        else:
            s.t += p.read()
    elif pattern in ("clear-and-retype", "rephrase-then-click"):
        first, then = rng.choice(REPHRASINGS)
        if rng.random() < 0.4:
            no_result.add(normalise_query(first))
        start_typing(s, p, first)
        s.settle_on(first)
        s.t += p.read()
        if pattern == "clear-and-retype":
            clear(s, p)
        elif then.startswith(first + " "):
            pass                                            # types on: "lead" -> "lead screening"
        else:
            words = first.split()
            keep = " ".join(words[:-1]) + " " if len(words) > 1 and then.startswith(words[0] + " ") else ""
            cut_back_to(s, p, keep)
        start_typing(s, p, then)
        s.settle_on(then)
        if rng.random() < 0.8:
            click(s, p)
        else:
            s.t += p.read()
    elif pattern == "abandon":
        q = rng.choice(QUERIES)
        if rng.random() < 0.4:
            word = q.split()[0]
            q = word[:max(3, len(word) - rng.randint(1, 3))]       # left on half a word: "medica"
        start_typing(s, p, q)
        s.settle_on(q)
        s.t += p.read()
    elif pattern == "back-and-forth":
        if rng.random() < 0.5:
            first, _then = rng.choice(REPHRASINGS)
            no_result.add(normalise_query(first))
            start_typing(s, p, first)
            s.settle_on(first)
            s.t += p.read()
            chip = rng.choice(CHIPS)
            s.submits.append((s.t, chip))                  # the chip's search (the box keeps `first`)
            s.settle_on(chip)
            s.clicks.append((s.t + rng.uniform(0.3, 1.0), 1))   # a task chip opens its task
            s.t += 1.0
            come_back(s, p)                                 # Back: `first` searched again
            if rng.random() < 0.5:
                s.t += p.read()                             # and left
        else:
            q = rng.choice(QUERIES)
            start_typing(s, p, q)
            s.settle_on(q)
            click(s, p)
            come_back(s, p)
            if rng.random() < 0.6:
                click(s, p, rng.choice([2, 3, 4]))
    elif pattern == "slow":
        p.slow = True
        q = rng.choice(QUERIES)
        start_typing(s, p, q)
        s.settle_on(q)
        p.slow = False
        if rng.random() < 0.7:
            click(s, p)
        else:
            s.t += p.read()
    else:
        raise ValueError(pattern)


PATTERNS = {"type-and-click": 20, "enter": 10, "clear-and-retype": 15, "rephrase-then-click": 15, "abandon": 10,
            "back-and-forth": 15, "slow": 15}


def results_of(query: str, no_result: set[str]) -> tuple[str, ...]:
    if query in no_result:
        return ()
    h = sum(ord(c) * (i + 1) for i, c in enumerate(query))
    return tuple(TASKS[(h + 7 * k) % len(TASKS)] for k in range(5))


def log_of(s: Session, rng: random.Random, no_result: set[str], start: datetime
           ) -> tuple[list[SearchRecord], list[EventRecord]]:
    """The requests and events the server would record of session `s` (module docstring)."""
    sent: list[tuple[float, str, bool]] = []        # (time sent, text, re-ranked)
    keys = s.keys
    for k, (t, text) in enumerate(keys):
        nxt = keys[k + 1][0] if k + 1 < len(keys) else math.inf
        nxt = min([nxt, *(ts for ts, _ in s.submits if ts > t)])
        if not text.strip():
            continue
        if nxt - t > DEBOUNCE_S:
            sent.append((t + DEBOUNCE_S, text, False))
        if nxt - t > SETTLE_S and s.rerank:
            sent.append((t + SETTLE_S, text, True))
    sent += [(t, text, s.rerank) for t, text in s.submits]
    sent += [(t + 0.05, text, s.rerank) for t, text in s.backs]
    sent.sort(key=lambda x: x[0])
    searches = []
    for n, (t, text, rerank) in enumerate(sent):
        query = normalise_query(text)
        at = start + timedelta(seconds=t + rng.uniform(0.02, 0.12))
        no_match = query in no_result
        searches.append(SearchRecord(id=f"{s.id}-{n:05d}", at=at, session_id=s.id, query=query, rerank=rerank,
                                     result_ids=results_of(query, no_result), no_confident_match=no_match))
    events = []
    for t, position in s.clicks:
        shown = [r for r in searches if r.at <= start + timedelta(seconds=t)]
        if not shown or not shown[-1].result_ids:
            continue
        last = shown[-1]
        events.append(EventRecord(at=start + timedelta(seconds=t + 0.1), search_id=last.id, type="click",
                                  session_id=s.id, task_id=last.result_ids[position - 1], position=position))
    for t, _text in s.backs:
        before = [e for e in events if e.at <= start + timedelta(seconds=t)]
        if before:
            events.append(EventRecord(at=start + timedelta(seconds=t), search_id=before[-1].search_id, type="return",
                                      session_id=s.id, task_id=before[-1].task_id))
    return searches, events


def simulate(n_sessions: int, seed: int) -> tuple[list[SearchRecord], list[EventRecord], dict[str, list[str]],
                                                  dict[str, str]]:
    """(requests, events, true searches per session, pattern per session) of `n_sessions` sessions."""
    rng = random.Random(seed)
    searches, events, truth, patterns = [], [], {}, {}
    names, weights = list(PATTERNS), list(PATTERNS.values())
    for n in range(n_sessions):
        person = Person(rng, pace=rng.uniform(0.08, 0.25))
        sid = f"sim{seed}-{n:06d}"
        count = rng.choices([1, 2, 3], [70, 25, 5])[0]
        chosen = rng.choices(names, weights, k=count)
        s = Session(sid, "+".join(chosen), rerank=rng.random() < 0.5)
        no_result: set[str] = set()
        for k, pattern in enumerate(chosen):
            if k:
                s.t += rng.uniform(5, 60)              # the next need
                if s.clicks and (not s.backs or s.backs[-1][0] < s.clicks[-1][0]):
                    s.text = ""                          # left for a task page: the box is empty here
            need(s, person, pattern, no_result)
        more_searches, more_events = log_of(s, rng, no_result, T0 + timedelta(minutes=40 * n))
        searches += more_searches
        events += more_events
        truth[sid] = s.truth
        patterns[sid] = s.pattern
    return searches, events, truth, patterns


@dataclass(frozen=True)
class Score:
    sessions: int
    sessions_right: int
    true_searches: int
    found_searches: int
    matched: int
    wrong_by_pattern: Counter

    @property
    def session_accuracy(self) -> float:
        return self.sessions_right / self.sessions

    @property
    def precision(self) -> float:
        return self.matched / self.found_searches if self.found_searches else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.true_searches if self.true_searches else 1.0


def score(searches, events, truth, patterns) -> Score:
    found: dict[str, list[str]] = {sid: [] for sid in truth}
    for intent in formulas.intents(searches, events):
        found[intent.session_id].append(intent.query)
    right = matched = n_true = n_found = 0
    wrong: Counter = Counter()
    for sid, true in truth.items():
        got = found[sid]
        n_true += len(true)
        n_found += len(got)
        matched += sum((Counter(true) & Counter(got)).values())
        if got == true:
            right += 1
        else:
            wrong[patterns[sid]] += 1
    return Score(len(truth), right, n_true, n_found, matched, wrong)


def with_gaps(settle: float, extend: float, run):
    """`run()` with analytics.formulas' two settle gaps set to these values (for the sweep)."""
    saved = formulas.SETTLE_GAP_S, formulas.EXTEND_SETTLE_S
    formulas.SETTLE_GAP_S, formulas.EXTEND_SETTLE_S = settle, extend
    try:
        return run()
    finally:
        formulas.SETTLE_GAP_S, formulas.EXTEND_SETTLE_S = saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--sweep", action="store_true", help="the share of sessions right over a grid of the gaps")
    parser.add_argument("--show-wrong", type=int, default=0, help="print this many wrongly cut sessions")
    args = parser.parse_args(argv)
    searches, events, truth, patterns = simulate(args.sessions, args.seed)
    if args.sweep:
        settles = [0.6, 0.8, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0]
        extends = [1.5, 2.0, 3.0, 4.0, 6.0, 10.0]
        print("sessions right; rows SETTLE_GAP_S, columns EXTEND_SETTLE_S")
        print("        " + "".join(f"{e:>8.1f}" for e in extends))
        for settle in settles:
            row = [with_gaps(settle, e, lambda: score(searches, events, truth, patterns)).session_accuracy
                   for e in extends]
            print(f"{settle:>8.1f}" + "".join(f"{v:>8.3f}" for v in row))
        return 0
    result = score(searches, events, truth, patterns)
    print(f"{result.sessions} simulated sessions (seed {args.seed}), {len(searches)} requests, "
          f"{result.true_searches} true searches; SETTLE_GAP_S={formulas.SETTLE_GAP_S}, "
          f"EXTEND_SETTLE_S={formulas.EXTEND_SETTLE_S}")
    print(f"sessions cut exactly right: {result.sessions_right}/{result.sessions} = {result.session_accuracy:.3f}")
    print(f"search precision {result.precision:.3f}, recall {result.recall:.3f} "
          f"({result.found_searches} searches found, {result.matched} true)")
    for pattern, n in result.wrong_by_pattern.most_common():
        print(f"  wrong: {n:4d}  {pattern}")
    if args.show_wrong:
        found: dict[str, list[str]] = {}
        for intent in formulas.intents(searches, events):
            found.setdefault(intent.session_id, []).append(intent.query)
        shown = 0
        for sid, true in truth.items():
            if found.get(sid, []) != true and shown < args.show_wrong:
                shown += 1
                print(f"{sid} {patterns[sid]}: true {true} found {found.get(sid, [])}")
                for r in (r for r in searches if r.session_id == sid):
                    print(f"    {r.at:%H:%M:%S.%f} {r.query!r} rerank={r.rerank}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
