"""`agi --serve`: agi over HTTP (docs: serve). The runs API (`/v1/runs`, SSE, background runs)
and an OpenAI-compatible front (`/v1/chat/completions`, `/v1/responses`, `/v1/models`), each
request a run opened through the engine's door; the ASGI stack (the `serve` extra) is loaded on
this path alone."""
