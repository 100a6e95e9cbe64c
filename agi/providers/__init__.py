"""Model providers: the wire protocols (OpenAI-compatible chat completions, Anthropic's Messages
API, Ollama's native chat, the text ReAct adapter), stream decoding, provider errors, what an
endpoint accepts, usage and cost."""
