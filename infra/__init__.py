"""Generic infrastructure shared by the search pipeline, the re-ranker and the document corpora,
with no knowledge of tasks or queries: the circuit breaker (`breaker`), the OpenAI-compatible
JSON chat client (`chat`), the local llama.cpp server and its `llm` CLI group (`local_llm`,
`cli`), client addresses behind trusted proxies (`clients`) and the Redis-backed fixed-window
counters that rate limits and the login throttle share between workers (`ratelimit`)."""
