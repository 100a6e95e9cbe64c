"""In-process latency claims the test suite no longer asserts (tests assert no wall-clock time).

    python bench/latency.py

Prints each measurement beside its target; the exit status is 0 whatever the numbers (a busy
machine makes them slower; compare runs on an idle one).

- estimator: the per-step size check (agi.context.estimate.Estimator) over a 5,000-message
  history of ~2 KB each, 50 steps each adding a 5 KB tool result and rebuilding an 8 KB system
  message, as the loop does. Target: under 10 ms per step.
"""

from __future__ import annotations

import os
import time

from agi.context.estimate import Estimator, estimate


def estimator_per_step(steps: int = 50) -> float:
    """Seconds per step of the size check; also checks it agrees with a full estimate."""
    history = [{"role": "user", "content": f"{i} " + "x" * 2000} for i in range(5000)]
    tools = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(20)]
    meter = Estimator()
    meter(history, tools)
    system: list[dict[str, str]] = []
    started = time.perf_counter()
    for step in range(steps):
        history.append({"role": "tool", "tool_call_id": str(step), "content": "y" * 5000})
        system = [{"role": "system", "content": "s" * 8000}]  # rebuilt each step
        meter(system + history, tools)
    per_step = (time.perf_counter() - started) / steps
    assert meter(system + history, tools) == estimate(system + history, tools)
    return per_step


def main() -> int:
    print(f"load average {os.getloadavg()[0]:.2f}")
    per_step = estimator_per_step()
    print(f"estimator: {per_step * 1000:.2f} ms per step for 5,000 messages (target < 10 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
