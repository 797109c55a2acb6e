"""The public HTTP surface: what an anonymous browser or a host platform calls.

    search   the search blueprint: /api/search, /healthz, /readyz, /metrics, /openapi.json
    roles    who may see which task: role tokens (JWT HS256, PyJWT) and the trusted proxy header
    cors     CORS for /api/search, /api/events and /api/kb/search

The events endpoint (`POST /api/events`) is analytics' own blueprint (analytics/api.py), beside
the log it writes; the ranking itself lives in search/ and imports nothing from here.
"""
