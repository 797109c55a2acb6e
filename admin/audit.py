"""The audit log: who did what to what, when, and the state before and after.

`record` adds its entry to the caller's session, so the entry commits in the same transaction
as the change it describes: there is no change without its entry, nor an entry for a change
that rolled back. Account changes use it now; the lexicon editor's publish actions will too.
Never put secrets in `before`/`after` (password hashes and token digests are left out).
"""
from __future__ import annotations

import getpass
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from admin.models import AuditEntry


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: datetime
    actor: str
    action: str
    target: str
    before: dict | None
    after: dict | None


def record(session: Session, actor: str, action: str, target: str,
           before: dict[str, Any] | None = None, after: dict[str, Any] | None = None) -> None:
    """Add one audit entry to `session` (committed, or rolled back, with the change itself)."""
    session.add(AuditEntry(actor=actor[:128], action=action[:64], target=target[:200], before=before, after=after))


def cli_actor() -> str:
    """The actor of a CLI command: the operating-system account that ran it."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "cli:unknown"


def user_actor(name: str) -> str:
    """The actor of a request made by an admin user (session or API token)."""
    return f"user:{name}"


def entries(engine: Engine, target: str | None = None, limit: int = 100) -> list[AuditRecord]:
    """The newest entries first, optionally only those about `target`."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if target is not None:
        query = query.where(AuditEntry.target == target)
    with Session(engine) as session:
        return [AuditRecord(e.id, e.at, e.actor, e.action, e.target, e.before, e.after)
                for e in session.scalars(query)]
