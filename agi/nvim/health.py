"""What `:checkhealth agi` asks the host's Python: can it run the engine, with which model."""

from __future__ import annotations

from typing import Any


def engine_problem() -> str | None:
    """Why the engine cannot run in this Python (a missing dependency), or None."""
    try:
        import httpx  # noqa: F401  (the transport imports it when it first connects)

        import agi.agent  # noqa: F401
        import agi.nvim.engine  # noqa: F401
        import agi.run  # noqa: F401
        import agi.transport  # noqa: F401
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return None


def report(options: dict[str, Any]) -> dict[str, Any]:
    """The engine's state and the model agi would use with these setup() options."""
    from agi.config import agi_home, config_path, load_file, resolve_model
    from agi.errors import AgiError
    from agi.nvim.engine import flags

    out: dict[str, Any] = {"home": str(agi_home())}
    problem = engine_problem()
    if problem:
        out["engine_error"] = problem
    path = config_path()
    out["config"] = str(path)
    out["config_exists"] = path.exists()
    try:
        model = resolve_model(flags(options), load_file(path), path)
    except AgiError as e:
        out["model_error"] = str(e)
    else:
        out.update(model=model.label, base_url=model.base_url, api_key=model.api_key is not None)
    return out
