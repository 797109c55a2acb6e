"""HTTP guards of the public surface: per-client rate limits (`guard.limits`) and the security
headers of the JSON API (`guard.headers`). Installed on the app by create_app; the counters
live in infra.ratelimit (Redis when REDIS_URL is set, this process otherwise)."""
