"""Model providers: one HTTP exchange (`transport.Exchange`) composed with one protocol object
per wire protocol (OpenAI-compatible chat completions, Anthropic's Messages API, Ollama's native
chat, fill-in-the-middle; the seams in `wire`), the pool runs share, the text ReAct adapter,
stream decoding, provider errors, what an endpoint accepts, usage and cost."""

import sys

# httpx imports its own command-line client (click, and rich when installed) whenever those are
# installed, some 7 ms at every start that agi never uses: with this entry that import fails
# and httpx goes on without it (httpx/__init__.py catches the ImportError).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
