"""The public HTTP surface: what an anonymous browser or a host platform calls.

    search   the search blueprint: /api/search, /healthz, /readyz, /metrics, /openapi.json
    events   the events blueprint: POST /api/events (what the widget saw and did), and the app's
             analytics writer (init_analytics; the log itself is analytics/)
    kb       the kb blueprint: GET /api/kb/search over a named document corpus (kb/)
    completions  the whole queries /api/search offers under the box (search.completions)
    roles    who may see which task: role tokens (JWT HS256, PyJWT) and the trusted proxy header
    cors     CORS for /api/search, /api/events and /api/kb/search

create_app registers each blueprint itself; importing a module here registers nothing. The
ranking itself lives in search/ and imports nothing from here, and nothing here imports the admin
(admin/), whose pages, analytics pages included, have their own home.
"""
