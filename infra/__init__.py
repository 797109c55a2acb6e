"""Generic infrastructure shared by the search pipeline, the re-ranker and the document corpora,
with no knowledge of tasks or queries: the circuit breaker (`breaker`), the OpenAI-compatible
JSON chat client (`chat`), the local llama.cpp server and its `llm` CLI group (`local_llm`,
`cli`) and the self-healing disk cache (`cache`). Web plumbing (client addresses, rate limits,
headers, metrics) is in `web/`."""
