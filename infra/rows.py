"""All-or-nothing reading of numbered rows: every problem of every row, or every record.

An import (a catalog's tasks, its test cases: catalog.formats; a corpus's documents: kb.store)
reads a file row by row and either takes all of it or none: the person who wrote the file gets
every problem at once, each naming its line, instead of fixing one per attempt.
`all_or_nothing` is that one loop: it reads each row into a record, or collects the row's
problems (`RowRefused`), and refuses a row whose key an earlier row has already taken, naming
that earlier line. What a row must be, and how its problems are worded, is the caller's.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, TypeVar

Raw = TypeVar("Raw")
Record = TypeVar("Record")


class RowRefused(ValueError):
    """A row that cannot be read: its problems, each a message that names where."""

    def __init__(self, *problems: str):
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def all_or_nothing(rows: Iterable[tuple[int, Raw]], read: Callable[[int, Raw], Record],
              key: Callable[[Record], Hashable], duplicate: Callable[[int, Record, int], str]
              ) -> tuple[list[Record], list[str]]:
    """(records, problems) of `rows`, (line number, raw row) pairs in file order.

    `read(line, raw)` returns the row's record or raises RowRefused with its problems. A record
    whose `key` an earlier row's record has is refused with `duplicate(line, record, first line)`.
    The caller raises its own error when problems is not empty: records is then partial."""
    records: list[Record] = []
    problems: list[str] = []
    first_line: dict[Hashable, int] = {}
    for line, raw in rows:
        try:
            record = read(line, raw)
        except RowRefused as refused:
            problems.extend(refused.problems)
            continue
        seen = key(record)
        if seen in first_line:
            problems.append(duplicate(line, record, first_line[seen]))
            continue
        first_line[seen] = line
        records.append(record)
    return records, problems
