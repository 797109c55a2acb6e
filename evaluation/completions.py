"""How well the completions under the search box lead a person who types a held-out query.

Each held-out in-scope query is typed one character at a time from the third (as
evaluation.prefixes does for rankings); at each keystroke the completions a viewer who may see
every task is offered (search.completions.Completions.complete) are judged against the query's
gold tasks:

    lead@5     share of keystrokes where some completion offered leads to a gold task
    first      share of keystrokes where the first completion offered leads to one
    wrong      completions offered per keystroke that lead to no gold task (what a person reads
               past)
    written    share of the completions offered that are written test-case queries (another
               person's words, read by everyone)

The completions are built from the training split's cases only, never the held-out ones, so a
case completion can help a query only by being another person's words for the same task.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from catalog.records import CaseRecord, TaskRecord
from evaluation.prefixes import keystroke_cases
from search.completions import Completions


@dataclass(frozen=True)
class CompletionScore:
    keystrokes: int
    lead: float
    first: float
    wrong: float
    written: float

    def as_dict(self) -> dict:
        return {"keystrokes": self.keystrokes, "lead@5": round(self.lead, 3), "first": round(self.first, 3),
                "wrong_per_keystroke": round(self.wrong, 3), "written_share": round(self.written, 3)}


def completion_score(tasks: Sequence[TaskRecord], train: Sequence[CaseRecord], test: Sequence[CaseRecord],
                     case_queries: str = "general") -> CompletionScore:
    """The measures above for `test`'s in-scope queries typed against completions built from
    `tasks` and `train` with the written cases' policy `case_queries`."""
    completions = Completions(tasks, train, case_queries=case_queries)
    every_role = frozenset(role for task in tasks for role in task.roles)
    typed = lead = first = wrong = shown = written = 0
    for _, cut in keystroke_cases(test):   # as evaluation.prefixes types them
        gold = set(cut.gold)
        offered = completions.complete(cut.query, every_role)
        typed += 1
        lead += any(c.tasks & gold for c in offered)
        first += bool(offered and offered[0].tasks & gold)
        wrong += sum(not (c.tasks & gold) for c in offered)
        shown += len(offered)
        written += sum(c.source == "case" for c in offered)
    n = max(typed, 1)
    return CompletionScore(typed, lead / n, first / n, wrong / n, written / max(shown, 1))
