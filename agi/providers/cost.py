"""What model calls cost: prices per million tokens, and the run's meter with its --max-cost budget.

A price is looked up as `[prices."provider:model"]` in the config file, then `[prices."model"]`,
then in the built-in table below by `provider:model` and by the model name. A provider's own
figure (OpenRouter's `usage.cost`, LiteLLM's `x-litellm-response-cost`) wins over any price.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from agi.errors import CostLimit, LimitReached, UsageError
from agi.messages import Usage

PRICE_FIELDS = ("input", "output", "cached", "cache_write")
REPORTS_COST = ("openrouter", "litellm")  # providers that send the cost of each call themselves


@dataclass(frozen=True)
class Price:
    """USD per million tokens. Without a cached or cache_write price, those tokens cost `input`."""

    input: float
    output: float
    cached: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """The contract's formula: fresh input, cache reads, cache writes and output, each at
        its own price."""
        fresh = max(0, usage.input - usage.cached - usage.cache_write)
        cached = self.input if self.cached is None else self.cached
        written = self.input if self.cache_write is None else self.cache_write
        total = (
            fresh * self.input
            + usage.cached * cached
            + usage.cache_write * written
            + usage.output * self.output
        )
        return total / 1_000_000

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> Price:
        """A `[prices."MODEL"]` table (checked by agi.options.config)."""
        return cls(**{k: float(v) for k, v in table.items() if k in PRICE_FIELDS})


# USD per million tokens: input, output, cached input (cache reads), cache writes.
# OpenAI: https://openai.com/api/pricing (standard tier; cache writes are free, not reported).
# DeepSeek: https://api-docs.deepseek.com/quick_start/pricing (V3.2, since 2025-09-29; cached =
# cache hit). Anthropic: https://platform.claude.com/docs/en/about-claude/pricing (cache_write =
# the 5-minute writes agi asks for). Google: https://ai.google.dev/gemini-api/docs/pricing
# (prompts up to 200k tokens; cache storage is billed per hour and not counted here).
# The figures those pages gave in late 2025; prices change: `[prices."MODEL"]` overrides them.
BUILTIN: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-5.1": Price(1.25, 10.00, 0.125),
    "deepseek-chat": Price(0.28, 0.42, 0.028),
    "deepseek-reasoner": Price(0.28, 0.42, 0.028),
    "claude-opus-4-6": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-5": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-1": Price(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4": Price(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-4-6": Price(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": Price(0.075, 0.30),
}

# dated snapshots and aliases cost what their model costs: gpt-4o-2024-08-06,
# claude-sonnet-4-5-20250929, claude-3-7-sonnet-latest, claude-opus-4-0
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest|0)$")


def builtin_price(name: str) -> Price | None:
    """The built-in price of a model name, also when dated (`-20250929`) or vendor-prefixed
    (`openai/gpt-4o`, `models/gemini-2.5-flash`)."""
    name = name.lower()
    for candidate in (name, name.rpartition("/")[2]):
        for key in (candidate, _SNAPSHOT.sub("", candidate)):
            if key in BUILTIN:
                return BUILTIN[key]
    return None


def find_price(label: str, model: str, prices: dict[str, Any] | None = None) -> Price | None:
    """The price of `label` (`provider:model`) sending `model`: config first, then built-in."""
    configured = prices or {}
    for key in (label, model):
        if isinstance(configured.get(key), dict):
            return Price.from_table(configured[key])
    return BUILTIN.get(label) or builtin_price(model)


# OpenAI's processing tiers (`service_tier`, docs: responses), USD per million tokens as for
# BUILTIN: https://platform.openai.com/docs/pricing, its "Flex" and "Priority" tabs (late 2025).
# A model missing here costs its standard price in that tier.
TIERS: dict[str, dict[str, Price]] = {
    "flex": {
        "gpt-5": Price(0.625, 5.00, 0.0625),
        "gpt-5.1": Price(0.625, 5.00, 0.0625),
        "gpt-5-mini": Price(0.125, 1.00, 0.0125),
        "gpt-5-nano": Price(0.025, 0.20, 0.0025),
        "o3": Price(1.00, 4.00, 0.25),
        "o4-mini": Price(0.55, 2.20, 0.138),
    },
    "priority": {
        "gpt-5": Price(2.50, 20.00, 0.25),
        "gpt-5.1": Price(2.50, 20.00, 0.25),
        "gpt-5-mini": Price(0.45, 3.60, 0.045),
        "o3": Price(3.50, 14.00, 0.875),
        "o4-mini": Price(2.00, 8.00, 0.50),
        "gpt-4.1": Price(3.50, 14.00, 0.875),
        "gpt-4o": Price(4.25, 17.00, 2.125),
    },
}


def tier_price(
    label: str, model: str, tier: str | None, prices: dict[str, Any] | None = None
) -> Price | None:
    """The built-in price of `model` in OpenAI's `tier` (flex, priority), or None: no such
    tier, a model the table lacks, or a `[prices."…"]` table of the config file, which wins."""
    configured = prices or {}
    if (
        not tier
        or tier not in TIERS
        or any(isinstance(configured.get(k), dict) for k in (label, model))
    ):
        return None
    name = model.lower().rpartition("/")[2]
    return TIERS[tier].get(name) or TIERS[tier].get(_SNAPSHOT.sub("", name))


BATCH_FIELDS = ("batch_input", "batch_output")  # a provider batch's prices (docs: batch)


def batch_price(label: str, model: str, prices: dict[str, Any] | None = None) -> Price | None:
    """What a call costs in a provider's batch (OpenAI's Batch API, Anthropic's Message
    Batches): `batch_input` and `batch_output` of the model's `[prices."..."]` table where it
    gives them, else half of every live price, as both providers charge (docs: batch)."""
    live = find_price(label, model, prices)
    if live is None:
        return None
    configured = prices or {}
    given = [configured[k] for k in (label, model) if isinstance(configured.get(k), dict)]
    table: dict[str, Any] = given[0] if given else {}

    def half(value: float | None) -> float | None:
        return None if value is None else value / 2

    return Price(
        float(table.get("batch_input", live.input / 2)),
        float(table.get("batch_output", live.output / 2)),
        half(live.cached),
        half(live.cache_write),
    )


def money(usd: float) -> str:
    """`$0.0123`, `$0.01`, `$1.50`; small sums keep six decimals (`$0.000072`)."""
    text = f"{usd:.4f}" if usd >= 0.01 or usd == 0 else f"{usd:.6f}"
    whole, _, fraction = text.partition(".")
    return f"${whole}.{fraction.rstrip('0').ljust(2, '0')}"


def describe(usage: Usage) -> str:
    """`1234 in (1000 cached), 56 out, $0.0123` (or `cost unknown`) for people."""
    cache = [f"{usage.cached} cached"] if usage.cached else []
    cache += [f"{usage.cache_write} written to cache"] if usage.cache_write else []
    tokens = f"{usage.input} in" + (f" ({', '.join(cache)})" if cache else "")
    thinking = f" ({usage.reasoning} reasoning)" if usage.reasoning else ""
    tokens += f", {usage.output} out{thinking}"
    cost = 0.0 if usage.empty else usage.cost
    return f"{tokens}, {'cost unknown' if cost is None else money(cost)}"


def missing_price(label: str) -> str:
    return (
        f'--max-cost needs a price for {label}: add [prices."{label}"] with input and output '
        "(USD per million tokens) to the config file"
    )


class Meter:
    """Every model call of a run (its subagents and ghost exchanges too, from any thread):
    usage and cost summed, and the --max-cost budget checked before each call."""

    def __init__(self, prices: dict[str, Any] | None = None, max_cost: float | None = None):
        self.prices = prices or {}
        self.max_cost = max_cost
        self._lock = threading.Lock()
        self._calls: list[Usage] = []
        self._total = Usage()
        self._models: dict[str, Usage] = {}  # the calls that reported usage, by model
        self._unknown: str | None = None  # why the run's cost is unknown, for --max-cost
        self._failures = 0  # calls that failed without reporting usage
        # calls in flight (concurrent subagents), each reserved at its caller's last call's
        # cost, so that together they cannot start past the budget (README "Cost")
        self._last: dict[Any, float] = {}
        self._flight: dict[Any, float] = {}

    def price(self, label: str, model: str) -> Price | None:
        return find_price(label, model, self.prices)

    def require(self, label: str, model: str) -> None:
        """With --max-cost, a model whose cost cannot be known is a usage error (exit 2)."""
        if self.max_cost is None or label.partition(":")[0] in REPORTS_COST:
            return
        if self.price(label, model) is None:
            raise UsageError(missing_price(label))

    def check(self, label: str, model: str, caller: object = None) -> None:
        """Before a model call: exit 4 once the run's cost has reached --max-cost, or, while
        other calls are in flight (concurrent subagents), when they and this call (each
        estimated at its caller's last call, else the run's largest) could pass it."""
        if self.max_cost is None:
            return
        self.require(label, model)
        key = (caller, threading.get_ident())
        with self._lock:
            unknown, spent = self._unknown, self._total.cost or 0.0
            estimate = self._last.get(caller, max(self._last.values(), default=0.0))
            flying = sum(self._flight.values())
            alone = spent < self.max_cost and not flying  # as before: while under budget
            if unknown is None and (alone or spent + flying + estimate < self.max_cost):
                self._flight[key] = estimate
                return
        if unknown is not None:  # calls were made: a limit reached (exit 4), not a usage error
            raise LimitReached(f"{unknown}; no further model call is made (--max-cost)")
        if spent >= self.max_cost:
            raise CostLimit(money(spent), money(self.max_cost))
        raise LimitReached(
            f"cost limit reached ({money(spent)} spent and about {money(flying + estimate)} "
            f"in calls running or due, of {money(self.max_cost)})"
        )

    def record(self, label: str, model: str, usage: Usage | None, caller: object = None) -> Usage:
        """Add one call; fill in its cost from the price unless the provider reported one.
        A call that reported no usage at all has an unknown cost."""
        call = usage if usage is not None else Usage(calls=1)
        if call.cost is None and usage is not None:
            price = self.price(label, model)
            if price is not None:
                call.cost = price.cost(call)
        with self._lock:
            self._flight.pop((caller, threading.get_ident()), None)
            if call.cost is not None:
                self._last[caller] = call.cost
            self._calls.append(call)
            self._total.add(call)
            self._models.setdefault(model, Usage()).add(call)
            if call.cost is None and self._unknown is None:
                self._unknown = (
                    missing_price(label)
                    if usage is not None
                    else f"--max-cost cannot be kept: {label} reported no usage for a call"
                )
        return call

    def release(self, caller: object = None) -> None:
        """The call `check` let start is over, whatever became of it (cancelled before any
        answer, interrupted): it no longer counts as in flight."""
        with self._lock:
            self._flight.pop((caller, threading.get_ident()), None)

    def failed(self, label: str, model: str, caller: object = None) -> None:
        """A call that failed for good without reporting usage: its cost is unknown (shown as
        unknown, never as 0), though --max-cost still counts what the other calls cost."""
        with self._lock:
            self._flight.pop((caller, threading.get_ident()), None)
            self._calls.append(Usage(calls=1))
            self._failures += 1

    @property
    def total(self) -> Usage:
        """The run's usage so far (a copy); its cost is unknown once a call failed unreported."""
        with self._lock:
            return Usage() + self._total + Usage(calls=self._failures)

    @property
    def by_model(self) -> dict[str, Usage]:
        """The usage of the calls recorded so far, by the model each was made to (copies)."""
        with self._lock:
            return {model: Usage() + usage for model, usage in self._models.items()}

    def since(self, mark: int) -> tuple[Usage, int]:
        """The calls recorded after `mark` (a count of calls), and the mark to use next time."""
        with self._lock:
            total = Usage()
            for call in self._calls[mark:]:
                total.add(call)
            return total, len(self._calls)
