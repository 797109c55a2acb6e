"""Issue 33 item 8: what a response says (its spelling corrections and "did you mean"
suggestion) comes only from tasks the caller may see. An anonymous `?q=zanzibarqux` was
answered with the suggestion "zanzibarquux", a word only an `hr`-restricted task holds."""
from __future__ import annotations

import json

from catalog.records import TaskRecord
from tests.conftest import build_app, make_settings

SECRET = TaskRecord(id="hr.zq", name="Zanzibarquux Ledger", help="Payroll adjustments kept in the zanzibarquux ledger.",
                    category="human_resources", roles=("hr",))


def test_corrections_and_suggestions_never_name_a_word_of_a_task_the_caller_cannot_see(tmp_path, shared_cache_dir,
                                                                                     demo_tasks):
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED=0), [*demo_tasks[:20], SECRET], [])
    anonymous = app.test_client().get("/api/search?q=zanzibarqux%20ledgr")
    assert anonymous.status_code == 200
    assert "zanzibarquux" not in json.dumps(anonymous.get_json()).lower()

    service = app.extensions["taskfinder"].search
    hr = service.search("zanzibarqux ledgr", roles=("hr",))          # who may see it is told
    assert any(c["word"] == "zanzibarquux" for c in hr["corrections"].get("zanzibarqux", []))
    assert hr["results"] and hr["results"][0]["id"] == SECRET.id
    # a word every caller may see is still corrected for the anonymous one
    public = service.search("ledgr")
    assert ("ledger" in {c["word"] for c in public["corrections"].get("ledgr", [])}) == \
        service.live().index.visible_word("ledger", None)
