"""Pure filters behind the admin's read-only lists (pages and /admin/api share them)."""
from __future__ import annotations

from typing import Iterable, Sequence

from catalog.records import CaseRecord, TaskRecord

STATUSES = ("active", "inactive", "all")
PAGE_SIZE = 50


def _contains(needle: str, *haystacks: str | None) -> bool:
    return any(needle in (h or "").casefold() for h in haystacks)


def filter_tasks(tasks: Iterable[TaskRecord], q: str = "", category: str = "", role: str = "",
                 status: str = "active") -> list[TaskRecord]:
    """Tasks whose id, name, aliases or help contain `q` (case-insensitive), in `category`,
    restricted to `role` (`-` = unrestricted tasks only), and active/inactive/all."""
    needle = q.strip().casefold()
    found = []
    for task in tasks:
        if status == "active" and not task.active or status == "inactive" and task.active:
            continue
        if category and task.category != category:
            continue
        if role == "-" and task.roles or role not in ("", "-") and role not in task.roles:
            continue
        if needle and not _contains(needle, task.id, task.name, task.help, *task.aliases):
            continue
        found.append(task)
    return found


def filter_cases(cases: Iterable[CaseRecord], q: str = "", category: str = "", task: str = "") -> list[CaseRecord]:
    """Test cases whose query or rationale contain `q`, in `category`, naming task id `task`
    (`-` = out-of-scope cases, the ones with no gold task)."""
    needle = q.strip().casefold()
    found = []
    for case in cases:
        if category and case.category != category:
            continue
        if task == "-" and case.gold or task not in ("", "-") and task not in case.gold:
            continue
        if needle and not _contains(needle, case.query, case.rationale):
            continue
        found.append(case)
    return found


def page_of(items: Sequence, page: int, size: int = PAGE_SIZE) -> tuple[list, int, int]:
    """(the items of 1-based `page`, that page clamped to range, the number of pages)."""
    pages = max(1, -(-len(items) // size))
    page = min(max(page, 1), pages)
    return list(items[(page - 1) * size: page * size]), page, pages


def cases_for_ranking(cases: Iterable[CaseRecord], ranked_task_ids: Sequence[str]) -> list[CaseRecord]:
    """The cases naming any of `ranked_task_ids`, ordered by the rank of their best gold task
    (then by id): what a search of the test cases by the product's ranking shows."""
    rank = {task_id: i for i, task_id in enumerate(ranked_task_ids)}
    found = [(min(rank[g] for g in c.gold if g in rank), c.id or 0, c) for c in cases if set(c.gold) & rank.keys()]
    return [c for _, _, c in sorted(found, key=lambda item: item[:2])]
