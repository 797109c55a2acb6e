"""The product's own search inside the admin: the gold-task picker and the browse pages' search
box rank tasks exactly as /api/search does, but over every task whatever its roles (an editor
picks among all of them)."""
from __future__ import annotations

from flask import current_app

from catalog.records import TaskRecord
from serving.service import BadQuery


def tasks_by_id() -> dict[str, TaskRecord]:
    """Every task, retired ones included, by id."""
    return {t.id: t for t in current_app.extensions["taskfinder"].store.tasks(include_inactive=True)}


def ranked_tasks(query: str, k: int) -> list[TaskRecord]:
    """The tasks the product's search ranks for `query`, every role included (restrict_roles=False),
    then active tasks whose id, name or an alias contains the text and that the ranking did not
    list (a typed id prefix, or a search that abstained): at most `k`."""
    settings = current_app.config["SETTINGS"]
    query = query.strip()[: settings.max_query_chars]
    if not query:
        return []
    by_id = tasks_by_id()
    try:
        body = current_app.extensions["taskfinder"].search.search(query, k=min(k, settings.max_results),
                                                                  restrict_roles=False)
        found = [by_id[r["id"]] for r in body["results"] if r["id"] in by_id]
    except BadQuery:
        found = []
    needle, seen = query.casefold(), {t.id for t in found}
    found += [t for t in by_id.values() if t.active and t.id not in seen and
              any(needle in text.casefold() for text in (t.id, t.name, *t.aliases))]
    return found[:k]
