"""HTTP guards of the public surface: per-client rate limits (`guard.limits`, Flask-Limiter; the
windows in Redis when REDIS_URL is set, in this process otherwise) and the security headers of
the JSON API (`guard.headers`). Installed on the app by create_app."""
