"""Flask blueprint `kb`: GET /api/kb/search?corpus=&q=&k=&mode= (the HTTP part of kb/, the corpus engine).

Settings come from current_app.config["SETTINGS"]; loaded indexes are cached in
current_app.extensions["kb"] (a kb.search.KB). Bad parameters are HTTP 400 {"error": ...}.
"""
from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from kb.search import KB, MODES
from lexicon.text import query_problem

kb_bp = Blueprint("kb", __name__)
MAX_K = 1000


def get_kb() -> KB:
    kb = current_app.extensions.get("kb")
    if kb is None:
        kb = current_app.extensions["kb"] = KB(current_app.config["SETTINGS"])
    return kb


def _bad(message: str, status: int = 400):
    resp = jsonify({"error": message})
    resp.status_code = status
    return resp


@kb_bp.get("/api/kb/search")
def search():
    kb = get_kb()
    settings = current_app.config["SETTINGS"]
    corpus = (request.args.get("corpus") or "").strip()
    q = request.args.get("q")
    mode = (request.args.get("mode") or "bm25").strip()
    if not corpus:
        return _bad("missing parameter 'corpus'")
    if not kb.store.exists(corpus):
        return _bad(f"unknown corpus {corpus!r}; known: {', '.join(kb.store.names()) or 'none'}")
    problem = query_problem(q, settings.max_query_chars)  # the same check as /api/search
    if problem is not None:
        return _bad(problem)
    raw_k = request.args.get("k", "10")
    try:
        k = int(raw_k)
    except ValueError:
        return _bad(f"'k' must be an integer, got {raw_k[:20]!r}")
    if not 1 <= k <= MAX_K:
        return _bad(f"'k' must be between 1 and {MAX_K}")
    if mode not in MODES:
        return _bad(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    reason = kb.unavailable(corpus, mode)
    if reason:
        return _bad(f"mode {mode!r} unavailable: {reason}")
    return jsonify(kb.search(corpus, q, k, mode))
