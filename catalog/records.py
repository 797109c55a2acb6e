"""Plain, immutable records that flow from the store into the (pure) search pipeline."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection


@dataclass(frozen=True)
class TaskRecord:
    id: str
    name: str
    help: str = ""
    category: str | None = None
    aliases: tuple[str, ...] = ()
    url: str | None = None
    roles: tuple[str, ...] = ()
    active: bool = True
    # The optimistic-locking counter of the stored row (None when not read from the store). Not
    # part of equality: two records with the same content are the same task.
    version: int | None = field(default=None, compare=False)

    def visible_to(self, roles: str | Collection[str] | None) -> bool:
        """Unrestricted tasks (no roles) are visible to everyone; others only to callers sharing
        one of their roles. `roles` is one role or a set of them (a caller may hold several)."""
        if not self.roles:
            return True
        if roles is None:
            return False
        held = {roles} if isinstance(roles, str) else set(roles)
        return not held.isdisjoint(self.roles)

    def to_row(self) -> dict:
        row = {"id": self.id, "name": self.name, "help": self.help}
        if self.category:
            row["category"] = self.category
        if self.aliases:
            row["aliases"] = list(self.aliases)
        if self.url:
            row["url"] = self.url
        if self.roles:
            row["roles"] = list(self.roles)
        if not self.active:  # a retired task stays retired through an export and re-import
            row["active"] = False
        return row


#: The category label of a case learned from use (see CaseRecord): a label for reports only;
#: what marks such a case is its `implicit` flag, which no written case can carry.
IMPLICIT_CATEGORY = "learned"


@dataclass(frozen=True)
class CaseRecord:
    """A developer test case: query -> gold task ids (empty: out of scope) -> rationale.
    An `implicit` case was learned from use (search.learned.learned_cases), not written: it feeds
    the exemplar memory and the lexicon like a written case but never pins. The flag is never
    stored or imported (to_row leaves it out), so a written case is never implicit, whatever
    its category is called."""

    query: str
    gold: tuple[str, ...]
    rationale: str = ""
    category: str | None = None
    id: int | None = None
    version: int | None = None
    implicit: bool = False

    def to_row(self) -> dict:
        row = {"query": self.query, "gold": list(self.gold)}
        if self.rationale:
            row["rationale"] = self.rationale
        if self.category:
            row["category"] = self.category
        return row
