"""Cross-cutting web plumbing, one module per concern, shared by every blueprint:

    clients          who the client is: the TCP peer, or behind TRUSTED_PROXIES the first untrusted
                     X-Forwarded-For hop (rate limits, login throttle, role header)
    limits           per-client rate limits (the `limits` library, moving windows in Redis or this
                     process) and the storage the login throttle shares with them
    headers          the JSON API's security headers (WSGI middleware)
    request_metrics  RED metrics around every request (WSGI middleware, the outermost)
    metrics          the Prometheus metrics the serving process exports
    multiprocess     Prometheus multiprocess mode under gunicorn
    json_provider    Flask's JSON through orjson

Installed on the app by create_app (app.py); no blueprint, no view and no ranking math here.
"""
