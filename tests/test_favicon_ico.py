"""Issue 32 item 10: a browser asks for /favicon.ico by itself (before, or without, reading a
page's <link rel=icon>): it gets the admin's icon, not a 404, with or without a session."""
from __future__ import annotations

from pathlib import Path

ICON = Path(__file__).resolve().parents[1] / "admin" / "static" / "favicon.svg"


def test_a_plain_favicon_request_gets_the_icon_every_page_names(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200, response.status_code
    assert response.mimetype == "image/svg+xml"
    assert response.get_data() == ICON.read_bytes()
    assert response.headers.get("X-Content-Type-Options") == "nosniff"
    assert "max-age" in response.headers.get("Cache-Control", "")
    assert client.head("/favicon.ico").status_code == 200
