"""Counts in words for the admin's pages: "1 test case", "3 test cases", never "1 test case(s)"
(issue 44 item 5). The admin registers them as the Jinja filters `counted` and `noun`
(admin.blueprint); the store and the importers word their messages with them."""
from __future__ import annotations


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """`singular` for exactly one, else `plural` (default: `singular` + "s")."""
    return singular if n == 1 else (plural or singular + "s")


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and its noun: counted(0, "case") == "0 cases", counted(1, "case") == "1 case"."""
    return f"{n} {noun(n, singular, plural)}"
