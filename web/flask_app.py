"""The Flask class the app is made of, and its id converter (app.create_app uses both).

Here rather than in app.py so that importing app.py loads no Flask: `python app.py search` runs
without the web side (app.main, cli.search; issue 44 item 9).
"""
from __future__ import annotations

from types import FunctionType

from flask import Flask
from werkzeug.routing import IntegerConverter

from catalog.validation import MAX_ID


class TaskfinderFlask(Flask):
    """Flask, asking once per plain function whether a view or hook is a coroutine function.
    Flask asks `ensure_sync` before every call of a view and of each before/after-request hook
    (`inspect.iscoroutinefunction`: about half a microsecond each, five times per search; issue
    43 item 6); Flask's documentation names this method as the one to override. Functions that
    are not coroutine functions are remembered (at most SYNC_MEMO of them: the app's views and
    hooks); anything else, a coroutine function included, goes to Flask's own each time."""

    SYNC_MEMO = 1024

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._sync_functions: dict[FunctionType, bool] = {}

    def ensure_sync(self, func):
        if type(func) is FunctionType and func in self._sync_functions:
            return func
        sync = super().ensure_sync(func)
        if sync is func and type(func) is FunctionType and len(self._sync_functions) < self.SYNC_MEMO:
            self._sync_functions[func] = True
        return sync


def digits_at_most(limit: int) -> str:
    """A regex of the decimal numbers from 0 to `limit` (leading zeros allowed within its
    length): any shorter number, or one of its length below `limit` at its first smaller digit."""
    top = str(limit)
    branches = [rf"\d{{1,{len(top) - 1}}}"] if len(top) > 1 else []
    for i, digit in enumerate(top):
        rest = len(top) - i - 1
        if digit != "0":
            branches.append(f"{top[:i]}[0-{int(digit) - 1}]" + (rf"\d{{{rest}}}" if rest else ""))
    branches.append(top)
    return "(?:" + "|".join(branches) + ")"


class Int32Converter(IntegerConverter):
    """Werkzeug's `<int:...>` for database ids: at most MAX_ID (2**31 - 1; the id columns are
    32-bit INTEGERs on PostgreSQL), so a larger number matches no route (404) instead of reaching
    the database (`integer out of range`, a 500; issue 33). A regex bound rather than werkzeug's
    `max=`: a value refused by the converter made the matcher answer 405 with another rule's
    methods."""

    regex = digits_at_most(MAX_ID)
