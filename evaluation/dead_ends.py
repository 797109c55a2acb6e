"""Dead ends: whether the popup gives a person a way forward (issue 43 item 2), as pure scoring.

A whole query is answered by /api/search with either results (a confident answer) or an empty
state (`no_confident_match`, or nothing visible) whose `suggestions` offer tasks to open. For one
test query with its gold tasks (`Outcome`):

    refused      an in-scope query (gold tasks) answered without results
    dead end     an in-scope query none of whose gold tasks is among the results nor among the
                 empty state's task suggestions (kind "task"): nothing on screen leads to it
    off-topic    an out-of-scope query (no gold) answered with confident results (not refused):
    confident    what the abstention is for

`dead_end_score` gives the shares: refused and dead ends of the in-scope queries, confident of
the off-topic ones, and the dead ends split by where they happen (answered without the gold, or
refused without it among the suggestions); and how often an off-topic query is told "nothing
matches" (refused with no task offered: search.suggestions.empty_state). ops/measure_dead_ends.py feeds it the real HTTP
answers of a temporary app (docs/prefix-search.md, "The empty state is a way forward").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence


@dataclass(frozen=True)
class Outcome:
    """One test query's answer as the popup shows it: task ids of the results, task ids the
    empty state suggests, and whether the answer was refused (no results)."""

    gold: tuple[str, ...]
    results: tuple[str, ...]
    suggested: tuple[str, ...]
    refused: bool

    @property
    def in_scope(self) -> bool:
        return bool(self.gold)

    @property
    def dead_end(self) -> bool:
        """In scope, and no gold task among the results nor the suggested tasks."""
        return self.in_scope and not (set(self.gold) & (set(self.results) | set(self.suggested)))


def suggested_task_ids(suggestions: Iterable[Mapping], ids_by_name: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The task ids an empty state's task suggestions name: a suggestion of kind "task" carries
    the task's name (search.suggestions); a name shared by several tasks names them all."""
    found: list[str] = []
    for suggestion in suggestions:
        if suggestion.get("kind") == "task":
            found.extend(ids_by_name.get(suggestion.get("text", ""), ()))
    return tuple(found)


def outcome_of(gold: Sequence[str], body: Mapping, ids_by_name: Mapping[str, Sequence[str]]) -> Outcome:
    """The Outcome of one /api/search response body for a query with `gold` tasks."""
    results = tuple(row["id"] for row in body.get("results") or ())
    suggested = () if results else suggested_task_ids(body.get("suggestions") or (), ids_by_name)
    return Outcome(tuple(gold), results, suggested, not results)


@dataclass(frozen=True)
class DeadEndScore:
    in_scope: int
    off_topic: int
    refused: int                 # in-scope queries answered without results
    dead_ends: int               # in-scope queries with no gold task on screen
    answered_missed: int         # ... of them answered with results, none a gold task
    refused_unsuggested: int     # ... of them refused, no gold task among the suggestions
    off_topic_confident: int     # off-topic queries answered with results
    suggested_per_refusal: float  # task suggestions per refused in-scope query (what a person reads)
    in_scope_nothing: int = 0    # in-scope queries refused with no task offered ("nothing matches")
    off_topic_nothing: int = 0   # off-topic queries refused with no task offered

    def as_dict(self) -> dict:
        def share(part: int, whole: int) -> float | None:
            return round(part / whole, 4) if whole else None

        return {"in_scope": self.in_scope, "off_topic": self.off_topic,
                "refused": share(self.refused, self.in_scope),
                "dead_ends": share(self.dead_ends, self.in_scope),
                "dead_ends_answered_missed": share(self.answered_missed, self.in_scope),
                "dead_ends_refused_unsuggested": share(self.refused_unsuggested, self.in_scope),
                "off_topic_confident": share(self.off_topic_confident, self.off_topic),
                "suggested_tasks_per_refusal": round(self.suggested_per_refusal, 3),
                "off_topic_told_nothing": share(self.off_topic_nothing, self.off_topic),
                "counts": {"refused": self.refused, "dead_ends": self.dead_ends,
                           "answered_missed": self.answered_missed, "refused_unsuggested": self.refused_unsuggested,
                           "off_topic_confident": self.off_topic_confident, "in_scope_nothing": self.in_scope_nothing,
                           "off_topic_nothing": self.off_topic_nothing}}


def dead_end_score(outcomes: Iterable[Outcome]) -> DeadEndScore:
    """The counts and shares of the module docstring over `outcomes`."""
    items = list(outcomes)
    inside = [o for o in items if o.in_scope]
    outside = [o for o in items if not o.in_scope]
    refused = [o for o in inside if o.refused]
    dead = [o for o in inside if o.dead_end]
    return DeadEndScore(
        in_scope=len(inside), off_topic=len(outside), refused=len(refused), dead_ends=len(dead),
        answered_missed=sum(not o.refused for o in dead), refused_unsuggested=sum(o.refused for o in dead),
        off_topic_confident=sum(not o.refused for o in outside),
        suggested_per_refusal=sum(len(set(o.suggested)) for o in refused) / len(refused) if refused else 0.0,
        in_scope_nothing=sum(not o.suggested for o in refused),
        off_topic_nothing=sum(o.refused and not o.suggested for o in outside))
