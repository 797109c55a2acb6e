"""Browser-test fixtures: a real HTTP server (waitress, in a thread) and Debian's Chromium driven
by Playwright for Python. No browser is downloaded: Playwright launches Debian's
/usr/bin/chromium-headless-shell (the package `make test` installs), else /usr/bin/chromium in its
headless mode; CHROMIUM_PATH overrides both.

    live_server(app) -> base URL    serves `app` on a free loopback port until the test ends
    page                            a fresh browser page (its own context: no shared cookies)

Screenshots the README shows are written under docs/ by the tests themselves (`screenshot`).
"""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from ops.servers import free_port

# The headless shell is the same Blink, V8 and version as Debian's chromium (one source package),
# without the full browser's headless mode around it, and what Playwright itself runs for headless
# Chromium. The 68 browser tests on the slow AMD EPYC kind (2026-11-30, one process, back to back):
# 141 CPU s and 249 s with it, 197 CPU s and 297 s with chromium --headless=new; the ten
# screenshots the same pixels but for their timestamps.
CHROMIUM = (os.environ.get("CHROMIUM_PATH") or shutil.which("chromium-headless-shell") or shutil.which("chromium")
            or "/usr/bin/chromium-headless-shell")
DOCS = Path(__file__).resolve().parents[2] / "docs"
CHROMIUM_ARGS = [*(() if "headless-shell" in Path(CHROMIUM).name else ("--headless=new",)),
                 "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-extensions", "--no-first-run"]


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium-headless-shell package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _serve_until(server, stop: threading.Event) -> None:
    """waitress's loop (server.run) in turns of 50 ms until `stop`, then the server's own close,
    all in this one thread: its request threads finish first (task_dispatcher.shutdown: they
    write their answers and pull the trigger), then every channel, the trigger and the listening
    socket close (close_all). Closing from the test's thread, or through the trigger after the
    test, raced the loop: "Bad file descriptor" under select, or on the trigger's pipe at a later
    teardown."""
    while not stop.is_set():
        server.asyncore.loop(timeout=0.05, map=server._map, count=1)
    server.task_dispatcher.shutdown()
    server.asyncore.close_all(server._map)


@pytest.fixture
def live_server():
    """Call with a Flask app; returns its base URL. Each server stops (and its thread ends)
    before the test's teardown returns."""
    from waitress.server import create_server

    running = []

    def serve(app) -> str:
        port = free_port()
        server = create_server(app, host="127.0.0.1", port=port, threads=8)
        stop = threading.Event()
        thread = threading.Thread(target=_serve_until, args=(server, stop), daemon=True)
        thread.start()
        running.append((stop, thread))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield serve
    for stop, _ in running:
        stop.set()
    for _, thread in running:
        thread.join(10)


def screenshot(page, name: str, **options) -> Path:
    """Save a small PNG under docs/ for the README (viewport only unless told otherwise)."""
    DOCS.mkdir(exist_ok=True)
    path = DOCS / name
    page.screenshot(path=str(path), **options)
    return path


def sign_in(page, base: str, username: str = "eddie", password: str | None = None) -> None:
    """Sign in on the admin's login page as `username` (ADMIN_PASSWORD unless told) and wait for
    the dashboard."""
    from tests.conftest import ADMIN_PASSWORD

    page.goto(f"{base}/admin/login")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password or ADMIN_PASSWORD)
    page.press("input[name=password]", "Enter")
    page.wait_for_url(f"{base}/admin/")
