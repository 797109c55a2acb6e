"""The admin's completions page (issue 42): what the search box offers as people type, what is about
to be offered, and the exclusion list that stops either.

    GET  /admin/completions                  offered suggestions (text, source, people), the crowd
                                             queries about to be offered (people settling, or one
                                             person short), the blocked suggestions, the blocked words
    POST /admin/completions/block            block a suggestion (form: text)        editors
    POST /admin/completions/unblock          unblock one (form: key)                editors
    POST /admin/completions/words            block a word (form: word)              editors
    POST /admin/completions/words/remove     unblock a word (form: word)            editors

Behind the admin's login and CSRF like every /admin route (admin.blueprint: writes need the editor
role and the session's CSRF token). Each change is written with its audit entry (admin.audit) in one
transaction, and this worker's live completions read the list again at once (api.completions:
other workers within EXCLUSIONS_REFRESH_S). The page reads the search log afresh, so what it says
is what the next read of every worker serves.
"""
from __future__ import annotations

from datetime import datetime, timezone

from flask import Blueprint, current_app, flash, g, redirect, render_template, request, url_for
from sqlalchemy.orm import Session

from admin import audit
from admin.audit import user_actor
from admin.blueprint import refuse
from analytics.store import (AnalyticsStore, add_blocked_word, add_completion_block, remove_blocked_word,
                             remove_completion_block)
from api.completions import LiveCompletions
from api.search import COMPLETIONS
from search.completions import MAX_COMPLETION_CHARS, blocked_word_key, completion_key, min_people

MAX_BLOCK_TEXT = 500   # the completion_blocks.key column


def register(pages: Blueprint, api: Blueprint) -> None:
    """Attach this module's pages to the admin's blueprint (admin.routes.install_admin; endpoints
    admin.NAME). It has no JSON route: `api` goes unused."""
    pages.add_url_rule("/completions", "completions_page", completions_page, methods=["GET"])
    pages.add_url_rule("/completions/block", "completion_block", completion_block, methods=["POST"])
    pages.add_url_rule("/completions/unblock", "completion_unblock", completion_unblock, methods=["POST"])
    pages.add_url_rule("/completions/words", "completion_word_block", completion_word_block, methods=["POST"])
    pages.add_url_rule("/completions/words/remove", "completion_word_unblock", completion_word_unblock,
                       methods=["POST"])


def _engine():
    return current_app.extensions["taskfinder"].store.engine


def _live() -> LiveCompletions:
    return current_app.extensions[COMPLETIONS]


def completions_page():
    services = current_app.extensions["taskfinder"]
    live_completions = _live()
    live_completions.refresh_popular()
    crowd = live_completions.crowd
    offered = live_completions.completions(services.search.live()).offered()
    store = AnalyticsStore(_engine())
    settings = services.settings
    blocked = crowd.exclusions.texts
    return render_template("admin/completions.html", offered=offered, upcoming=[
        c for c in crowd.upcoming if c.query not in blocked], blocks=store.completion_blocks(),
        words=store.completion_blocked_words(), need=min_people(settings.completion_min_people),
        settle_h=settings.completion_settle_s / 3600, read_at=crowd.at or datetime.now(timezone.utc),
        max_chars=MAX_COMPLETION_CHARS)


def _changed(note: str):
    _live().refresh_exclusions()
    flash(note)
    return redirect(url_for("admin.completions_page"))


def completion_block():
    text = " ".join(request.form.get("text", "").split())
    key = completion_key(text)
    if not key or len(key) > MAX_BLOCK_TEXT:
        return refuse(400, "cannot block: give the suggestion's text (1-500 characters, not only stopwords)")
    actor = user_actor(g.admin_user.name)
    with Session(_engine()) as session, session.begin():
        added = add_completion_block(session, key, text, actor)
        if added:
            audit.record(session, actor, "completion.block", f"completion:{key}"[:200], None, {"text": text})
    return _changed(f"Blocked: {text!r} is no longer offered under the search box." if added
                    else f"{text!r} was blocked already.")


def completion_unblock():
    key = request.form.get("key", "")
    actor = user_actor(g.admin_user.name)
    with Session(_engine()) as session, session.begin():
        removed = remove_completion_block(session, key)
        if removed is None:
            return refuse(404, f"{key!r} is not blocked")
        text = removed.text
        audit.record(session, actor, "completion.unblock", f"completion:{key}"[:200], {"text": text}, None)
    return _changed(f"Unblocked: {text!r} may be offered again (when it still qualifies).")


def completion_word_block():
    raw = request.form.get("word", "").strip()
    word = blocked_word_key(raw)
    if word is None:
        return refuse(400, "cannot block: give one word (letters and digits, at most 64)")
    actor = user_actor(g.admin_user.name)
    with Session(_engine()) as session, session.begin():
        added = add_blocked_word(session, word, actor)
        if added:
            audit.record(session, actor, "completion.word_block", f"completion-word:{word}", None, {"word": word})
    return _changed(f"Blocked word: no suggestion with {word!r} is offered." if added
                    else f"{word!r} was blocked already.")


def completion_word_unblock():
    word = request.form.get("word", "")
    actor = user_actor(g.admin_user.name)
    with Session(_engine()) as session, session.begin():
        if not remove_blocked_word(session, word):
            return refuse(404, f"{word!r} is not a blocked word")
        audit.record(session, actor, "completion.word_unblock", f"completion-word:{word}", {"word": word}, None)
    return _changed(f"Unblocked word: suggestions with {word!r} may be offered again.")
