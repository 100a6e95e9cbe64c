"""Model providers: one module per wire protocol (`chat`: OpenAI-compatible chat completions,
`anthropic`: the Messages API, `ollama`: Ollama's native chat; `react`: the text ReAct adapter),
the HTTP exchange they share (`transport`, built by `protocols.transport_for`), stream decoding,
what an error means (`errors`), the endpoint (root URL, headers, key), a model's context window,
what an endpoint accepts, usage and cost."""
