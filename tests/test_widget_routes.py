"""The widget's HTTP edge (widget/blueprint.py): the assets and the demo homepage, their headers,
and a homepage with nothing inline (the browser behaviour: tests/browser/test_widget.py)."""
import re
from html.parser import HTMLParser
from pathlib import Path

from tests.conftest import build_app, make_settings


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.script_text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if self.tags and self.tags[-1][0] == "script":
            self.script_text += data.strip()


def test_widget_assets_are_served_with_their_types_and_headers(client):
    js = client.get("/widget.js")
    assert js.status_code == 200 and js.mimetype == "text/javascript"
    assert b"window.Taskfinder" in js.data
    assert js.headers["Cross-Origin-Resource-Policy"] == "cross-origin"   # loadable by any host page
    assert js.headers["X-Content-Type-Options"] == "nosniff"
    assert js.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert "max-age=300" in js.headers["Cache-Control"] and js.headers["ETag"]
    css = client.get("/widget.css")
    assert css.status_code == 200 and css.mimetype == "text/css" and b".tf-widget" in css.data
    assert client.get("/widget.js", headers={"If-None-Match": js.headers["ETag"]}).status_code == 304


def test_the_widget_script_never_parses_data_as_html():
    source = (Path(__file__).resolve().parents[1] / "widget" / "static" / "widget.js").read_text(encoding="utf-8")
    code = re.sub(r"/\*.*?\*/", "", source, flags=re.S)          # comments may name what the code avoids
    code = re.sub(r"(?m)^\s*//.*$|\s//\s.*$", "", code)
    assert "textContent" in code and "createTextNode" in code
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function", code)


def test_the_homepage_embeds_the_widget_like_a_host_with_nothing_inline(client):
    page = client.get("/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    csp = page.headers["Content-Security-Policy"]
    for directive in ("script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    tags = Tags()
    tags.feed(page.get_data(as_text=True))
    scripts = [attrs for tag, attrs in tags.tags if tag == "script"]
    assert scripts == [{"src": "/widget.js", "data-endpoint": "/api", "data-target": "#taskfinder",
                        "data-label": "Search tasks", "defer": None}]
    assert tags.script_text == ""                                   # no inline script
    assert not any(tag == "style" or "style" in attrs for tag, attrs in tags.tags)
    assert not any(name.startswith("on") for _, attrs in tags.tags for name in attrs)
    assert ("div", {"id": "taskfinder", "class": "home-search"}) in tags.tags
    stylesheets = [attrs["href"] for tag, attrs in tags.tags if tag == "link" and attrs.get("rel") == "stylesheet"]
    assert "/widget.css" in stylesheets
    assert all(client.get(href).status_code == 200 for href in stylesheets)


def test_demo_homepage_off_leaves_the_widget_served(tmp_path, shared_cache_dir):
    app = build_app(make_settings(tmp_path, shared_cache_dir, DEMO_HOMEPAGE="0", EMBEDDINGS_ENABLED="0"), [], [])
    client = app.test_client()
    assert client.get("/").status_code == 404
    assert client.get("/widget.js").status_code == 200
