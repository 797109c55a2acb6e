"""The browser harness itself works: Debian's Chromium renders a page of the real app served
over HTTP (here the admin login page, whose form must be present and usable)."""


def test_chromium_renders_the_admin_login_page(demo_app, live_server, page):
    base = live_server(demo_app)
    page.goto(f"{base}/admin/login")
    assert page.locator("input[name=username]").is_visible()
    assert page.locator("input[name=password]").get_attribute("type") == "password"
